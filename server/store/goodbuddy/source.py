"""The GoodBuddy import source: one read-only snapshot of the app database as import items."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from server.contracts.base import format_utc
from server.store.errors import DatabaseUnusable
from server.store.goodbuddy import facts, reviews
from server.store.goodbuddy.database import SUPPORTED_SCHEMA, open_app_database
from server.store.goodbuddy.state import Seen
from server.store.goodbuddy.story_mapping import read_stories_and_experiences
from server.store.importer import ImportItem, ImportReport, import_source
from server.store.notes import Notes
from server.store.progress import Progress
from server.store.sync import SyncPolicy

POLICY: Final = SyncPolicy(repair=True)
"""A saved fragment its stored message text contradicts is kept with its position unknown: one damaged app row must
not stop the sync (the notes count it)."""


class GoodBuddySource:
    """Reads one app database as import items, in one read transaction while the import runs; `notes`
    then says what was left out and why."""

    policy: Final = POLICY

    def __init__(self, path: Path, now: str | None = None) -> None:
        self.path = path
        self.now = now or format_utc(datetime.now(UTC))
        self.notes = Notes()

    def __iter__(self) -> Iterator[ImportItem]:
        conn = open_app_database(self.path)
        try:
            conn.execute("BEGIN")  # one snapshot of the app's data, however it writes meanwhile
            try:
                yield from read(conn, Seen(conn, self.now, self.notes))
            finally:
                conn.execute("ROLLBACK")
        except sqlite3.DatabaseError as exc:
            if str(exc).startswith("no such column"):  # the tables are checked on opening, the columns as read
                raise DatabaseUnusable(
                    f"{self.path} claims GoodBuddy schema {SUPPORTED_SCHEMA} but its tables differ from that schema"
                    f" ({exc}); it may come from a development build of the app: only databases written by a"
                    f" GoodBuddy release that uses schema {SUPPORTED_SCHEMA} can be imported"
                ) from None
            raise DatabaseUnusable(f"cannot read {self.path}: {exc}") from None
        finally:
            conn.close()

    def fraction_read(self) -> float | None:
        return None  # the readers do not know their share of the rows


def read(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    """Every object of the snapshot; each reader relies on the ids the readers before it have seen."""
    yield from reviews.read_projects(conn, seen)
    yield from reviews.read_scopes_results_and_story_lines(conn, seen)
    yield from reviews.read_sources(conn, seen)
    yield from facts.read_entities(conn, seen)
    yield from facts.read_events(conn, seen)
    yield from facts.read_changes(conn, seen)
    yield from facts.read_relations(conn, seen)
    yield from seen.summaries()  # each listing the facts just written for it
    yield from facts.read_memory(conn, seen)
    yield from read_stories_and_experiences(conn, seen)


def import_goodbuddy(
    db_path: Path, app_path: Path, *, dry_run: bool = False, progress: Progress | None = None
) -> tuple[ImportReport, list[str]]:
    """Import (or re-import, as a sync) a GoodBuddy assistant database; returns the report and the notes."""
    source = GoodBuddySource(app_path)
    report = import_source(db_path, source, policy=source.policy, dry_run=dry_run, progress=progress)
    for reason, count in report.repaired.items():
        source.notes.add(reason, count)
    return report, source.notes.lines()
