"""`db import`: load interchange lines into an existing database in one transaction.

An import is a pipeline: a *source* yields `(where, line)` pairs (jsonl.py reads a JSON Lines file,
goodbuddy/ an app database, memory_graph.py a memory-server file), staging.py validates each line and
stages it in temporary tables, and merge.py checks every link and writes the lines kind by kind with
set-based SQL. Memory stays flat whatever the input size. Everything happens inside the one
transaction in `import_lines`: any bad line rolls it back and the database is left exactly as it
was. A dry run does all of it, then rolls back.

An append import (the default) refuses an object stored with other content; a source that mirrors
another store passes a `SyncPolicy` and the same writer updates such objects instead (sync.py).
The search index is deferred while the lines are written and rebuilt once before the commit
(search_index.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from server.store import search_index
from server.store.jsonl import JsonlSource
from server.store.kinds import CHUNK_CODE_POINTS
from server.store.merge import merge
from server.store.migrate import open_store, write_failed
from server.store.progress import Progress
from server.store.staging import ImportItem, Source, drop_tables, stage
from server.store.sync import SyncPolicy

__all__ = [
    "CHUNK_CODE_POINTS",
    "ImportItem",
    "ImportReport",
    "Source",
    "import_file",
    "import_items",
    "import_lines",
    "import_source",
]

# Page caches of the import connection; staging spills to a temporary file. SQLite also sizes the sorter
# that indexes staged rows by the database's cache, so these bound most of an import's own memory. Larger
# ones (64 and 32 MiB) made no import faster (docs/performance.md) but grew RSS with the graph's size.
IMPORT_PRAGMAS: Final = (
    "PRAGMA temp_store = FILE",
    "PRAGMA temp.page_size = 65536",  # fewer, larger reads and writes of the staging file
    "PRAGMA cache_size = -16384",  # KiB: 16 MiB for the database
    "PRAGMA temp.cache_size = -8192",  # KiB: 8 MiB for the staging tables
)


@dataclass(frozen=True)
class ImportReport:
    """What an import wrote (or, for a dry run, would write): new lines per kind, lines already stored
    unchanged, and in sync mode the objects updated in place and the retired ones removed."""

    database: Path
    written: dict[str, int] = field(default_factory=dict)
    unchanged: int = 0
    updated: dict[str, int] = field(default_factory=dict)
    retired: int = 0
    dry_run: bool = False
    repaired: dict[str, int] = field(default_factory=dict)
    """Lines kept with a contradicted part made unknown (`SyncPolicy.repair`), per reason: for the source's notes."""

    @property
    def total(self) -> int:
        return sum(self.written.values())

    def __str__(self) -> str:
        per_kind = ", ".join(f"{count} {kind}" for kind, count in self.written.items() if count) or "nothing new"
        lines = f"{self.total} lines ({per_kind}) into {self.database}; {self.unchanged} unchanged"
        text = f"dry run: would import {lines}" if self.dry_run else f"imported {lines}"
        if self.updated:
            changes = ", ".join(f"{count} {kind}" for kind, count in self.updated.items())
            text += f"; {sum(self.updated.values())} {'would be ' if self.dry_run else ''}updated ({changes})"
        if self.retired:
            text += f"; {self.retired} {'would be ' if self.dry_run else ''}retired"
        return text + ("; nothing was written" if self.dry_run else "")


def import_file(
    db_path: Path, jsonl_path: Path, *, dry_run: bool = False, progress: Progress | None = None
) -> ImportReport:
    """Validate every line of `jsonl_path` and write the new ones to `db_path` in one transaction."""
    return import_source(db_path, JsonlSource(jsonl_path), dry_run=dry_run, progress=progress)


def import_items(db_path: Path, items: Iterable[ImportItem], policy: SyncPolicy | None = None) -> ImportReport:
    """Import items already in hand (a list of `(where, line)`); `policy` turns on sync mode."""
    return import_source(db_path, _Items(items), policy=policy)


def import_source(
    db_path: Path,
    source: Source,
    *,
    policy: SyncPolicy | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """Open `db_path` for writing and import every line of `source` in one transaction."""
    conn = open_store(db_path, write=True)
    try:
        return import_lines(conn, db_path, source, policy=policy, dry_run=dry_run, progress=progress)
    finally:
        conn.close()


def import_lines(
    conn: sqlite3.Connection,
    database: Path,
    source: Source,
    *,
    policy: SyncPolicy | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """The import transaction: stage every line of `source`, check and write, rebuild the search index
    for what was written, then commit (or roll back)."""
    progress = progress or Progress.silent()
    for pragma in IMPORT_PRAGMAS:
        conn.execute(pragma)
    try:
        conn.execute("BEGIN IMMEDIATE")  # the write lock for the whole import; readers go on (WAL)
        counts = stage(conn, source, progress, sync=policy is not None)
        search_index.defer(conn)  # writes only collect the search items they touch
        merged = merge(conn, counts, progress, policy)
        if dry_run:
            conn.execute("ROLLBACK")  # also leaves the index as it was, mode included
        else:
            # Bulk maintenance of derived data for the rows just written: one rebuild of every
            # search item they touched.
            search_index.rebuild(conn, progress)
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise write_failed(conn, database, exc, "import aborted, nothing was written", "the import") from None
    finally:
        progress.stop()
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        drop_tables(conn)
    return ImportReport(
        database, merged.written, merged.unchanged, merged.updated, merged.retired, dry_run, merged.repaired
    )


class _Items:
    """Items already in hand as a source."""

    def __init__(self, items: Iterable[ImportItem]) -> None:
        self.items = items

    def __iter__(self) -> Iterator[ImportItem]:
        return iter(self.items)

    def fraction_read(self) -> float | None:
        return None
