"""The first half of an import: every line from a source, validated, into temporary staging tables.

Staging keeps memory flat whatever the input size: lines go to `temp.stage_<kind>` tables in
batches (SQLite spills them to a temporary file), and merge.py then checks and writes them with
set-based SQL. `seq` numbers the lines in the order the source gave them; `location` is kept for
errors. Objects a sync source retires go to `temp.stage_retired`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Final, Protocol

import orjson

from server.contracts.interchange import Line
from server.store.errors import ImportRejected, Where, location_of
from server.store.kind_model import Invalid, Kind, Staged
from server.store.kinds import KINDS
from server.store.progress import Progress
from server.store.sync import Retired

BATCH_ROWS: Final = 2_000
"""A kind's staged rows are written to its table in batches of this many."""
BATCH_CHARACTERS: Final = 4_000_000
"""All waiting rows are written once they hold this many characters of text, so long texts stay few in memory."""
RETIRED: Final = "stage_retired"

ImportItem = tuple[Where, Line | Retired]
"""What a source yields: a line, or (sync mode) an object it knows is retired, with where it came from."""


class Source(Protocol):
    """Where an import's lines come from, in any order.

    Yields `(where, line)`: `where` names the line in the source for errors, a line number of a file
    or a place such as `table supervision_events row id=7`. A sync source may also yield `Retired`
    objects. A source raises ImportRejected for input it cannot turn into a valid line.
    """

    def __iter__(self) -> Iterator[ImportItem]: ...

    def fraction_read(self) -> float | None:
        """How far through its input the source is (0..1), or None when it cannot tell."""


def create_tables(conn: sqlite3.Connection) -> None:
    drop_tables(conn)
    for kind in KINDS.values():
        columns = ", ".join(kind.staged_columns)
        conn.execute(
            f"CREATE TEMP TABLE {kind.stage} (seq INTEGER PRIMARY KEY, location TEXT NOT NULL,"
            f" skip INTEGER NOT NULL DEFAULT 0, {columns})"
        )
    conn.execute(
        f"CREATE TEMP TABLE {RETIRED} (seq INTEGER PRIMARY KEY, location TEXT NOT NULL, kind TEXT NOT NULL,"
        " key TEXT NOT NULL, reason TEXT NOT NULL)"
    )


def drop_tables(conn: sqlite3.Connection) -> None:
    for kind in KINDS.values():
        conn.execute(f"DROP TABLE IF EXISTS temp.{kind.stage}")
    conn.execute(f"DROP TABLE IF EXISTS temp.{RETIRED}")


def stage(conn: sqlite3.Connection, source: Source, progress: Progress, *, sync: bool) -> dict[str, int]:
    """Stage every line of `source`; return the number of lines per kind. Raises ImportRejected."""
    create_tables(conn)
    batches = {name: _Batch(kind) for name, kind in KINDS.items()}
    progress.phase("reading", "lines")
    seq = characters = 0
    for where, line in source:
        seq += 1
        location = location_of(where)
        if isinstance(line, Retired):
            if not sync:
                problem = f"{line.kind} {'/'.join(line.key)!r} is retired, but only a sync import can retire objects"
                raise ImportRejected(location, "", problem)
            row = (seq, location, line.kind, orjson.dumps(line.key).decode(), line.reason)
            conn.execute(f"INSERT INTO {RETIRED} VALUES (?, ?, ?, ?, ?)", row)
            continue
        try:
            values = KINDS[line.kind].row(line)
        except Invalid as bad:
            raise ImportRejected(location, bad.field, bad.problem) from None
        batch = batches[line.kind]
        batch.rows.append((seq, location, *values))
        characters += sum([len(value) for value in values if type(value) is str])
        if len(batch.rows) >= BATCH_ROWS:
            batch.flush(conn)
        if characters >= BATCH_CHARACTERS:  # a few long texts: write every kind's rows now
            for each in batches.values():
                each.flush(conn)
            characters = 0
        if seq % 1000 == 0:
            progress.update(seq, source.fraction_read())
    for batch in batches.values():
        batch.flush(conn)
    progress.update(seq, source.fraction_read())
    progress.finish()
    return {name: batch.count for name, batch in batches.items()}


class _Batch:
    """Rows of one kind waiting to be written to its staging table."""

    def __init__(self, kind: Kind) -> None:
        columns = kind.staged_columns
        self.sql = f"INSERT INTO {kind.stage} (seq, location, {', '.join(columns)}) VALUES (?, ?{', ?' * len(columns)})"
        self.rows: list[Staged] = []
        self.count = 0

    def flush(self, conn: sqlite3.Connection) -> None:
        if self.rows:
            conn.executemany(self.sql, self.rows)
            self.count += len(self.rows)
            self.rows.clear()
