"""`db import`: load interchange lines into an existing database in one transaction.

An import is a pipeline: a *source* yields `(location, line)` pairs (jsonl.py reads a JSON Lines
file; other sources can read other stores), staging.py validates each line and stages it in
temporary tables, and merge.py checks every link and writes the lines kind by kind with
set-based SQL. Memory stays flat whatever the input size. Everything happens inside the one
transaction in `import_lines`: any bad line rolls it back and the database is left exactly as it
was. A dry run does all of it, then rolls back.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from server.store.errors import StoreError
from server.store.jsonl import JsonlSource
from server.store.kinds import CHUNK_CODE_POINTS
from server.store.merge import merge
from server.store.migrate import open_store
from server.store.progress import Progress
from server.store.staging import Source, drop_tables, stage

__all__ = ["CHUNK_CODE_POINTS", "ImportReport", "Source", "import_file", "import_lines"]

# Page caches of the import connection. Big enough that a large import does not thrash, small
# enough to keep the process far below its memory budget; staging spills to a temporary file.
IMPORT_PRAGMAS: Final = (
    "PRAGMA temp_store = FILE",
    "PRAGMA temp.page_size = 65536",  # fewer, larger reads and writes of the staging file
    "PRAGMA cache_size = -131072",  # KiB: 128 MiB for the database
    "PRAGMA temp.cache_size = -32768",  # KiB: 32 MiB for the staging tables
)


@dataclass(frozen=True)
class ImportReport:
    """What an import wrote (or, for a dry run, would write): new lines per kind, and lines already stored unchanged."""

    database: Path
    written: dict[str, int] = field(default_factory=dict)
    unchanged: int = 0
    dry_run: bool = False

    @property
    def total(self) -> int:
        return sum(self.written.values())

    def __str__(self) -> str:
        per_kind = ", ".join(f"{count} {kind}" for kind, count in self.written.items() if count) or "nothing new"
        if self.dry_run:
            return (
                f"dry run: would import {self.total} lines ({per_kind}) into {self.database}; {self.unchanged}"
                " unchanged; nothing was written"
            )
        return f"imported {self.total} lines ({per_kind}) into {self.database}; {self.unchanged} unchanged"


def import_file(
    db_path: Path, jsonl_path: Path, *, dry_run: bool = False, progress: Progress | None = None
) -> ImportReport:
    """Validate every line of `jsonl_path` and write the new ones to `db_path` in one transaction."""
    conn = open_store(db_path, write=True)
    try:
        return import_lines(conn, db_path, JsonlSource(jsonl_path), dry_run=dry_run, progress=progress)
    finally:
        conn.close()


def import_lines(
    conn: sqlite3.Connection,
    database: Path,
    source: Source,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """The import transaction: stage every line of `source`, check and write, then commit (or roll back)."""
    progress = progress or Progress.silent()
    for pragma in IMPORT_PRAGMAS:
        conn.execute(pragma)
    try:
        conn.execute("BEGIN IMMEDIATE")  # the write lock for the whole import; readers go on (WAL)
        counts = stage(conn, source, progress)
        written, unchanged = merge(conn, counts, progress)
        if dry_run:
            conn.execute("ROLLBACK")
        else:
            # Bulk maintenance of derived data (e.g. a search index) for the rows just written goes
            # here; `temp.stage_<kind>` rows with `skip = 0` are exactly the lines written.
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StoreError(f"import aborted, nothing was written: {database}: {exc}") from None
    finally:
        progress.stop()
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        drop_tables(conn)
    return ImportReport(database, written, unchanged, dry_run)
