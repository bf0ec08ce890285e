"""The GoodBuddy import source: one read-only snapshot of the app database as import items."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from server.contracts.base import format_utc
from server.store.errors import DatabaseUnusable
from server.store.goodbuddy import facts, reviews
from server.store.goodbuddy.database import open_app_database
from server.store.goodbuddy.state import Seen
from server.store.goodbuddy.story_mapping import read_stories_and_experiences
from server.store.importer import ImportItem, ImportReport, import_items
from server.store.notes import Notes
from server.store.sync import SyncPolicy

POLICY: Final = SyncPolicy()


class GoodBuddySource:
    """Reads one app database into import items; `notes` then says what was left out and why."""

    policy: Final = POLICY

    def __init__(self, path: Path, now: str | None = None) -> None:
        self.path = path
        self.now = now or format_utc(datetime.now(UTC))
        self.notes = Notes()

    def items(self) -> list[ImportItem]:
        conn = open_app_database(self.path)
        try:
            conn.execute("BEGIN")  # one snapshot of the app's data, however it writes meanwhile
            try:
                return read(conn, Seen(self.now, self.notes))
            finally:
                conn.execute("ROLLBACK")
        except sqlite3.DatabaseError as exc:
            raise DatabaseUnusable(f"cannot read {self.path}: {exc}") from None
        finally:
            conn.close()


def read(conn: sqlite3.Connection, seen: Seen) -> list[ImportItem]:
    """Every object of the snapshot; each reader relies on the ids the readers before it have seen."""
    return [
        *reviews.read_projects(conn, seen),
        *reviews.read_scopes_results_and_story_lines(conn, seen),
        *reviews.read_sources(conn, seen),
        *facts.read_entities(conn, seen),
        *facts.read_events(conn, seen),
        *facts.read_changes(conn, seen),
        *facts.read_relations(conn, seen),
        *facts.read_memory(conn, seen),
        *read_stories_and_experiences(conn, seen),
    ]


def import_goodbuddy(db_path: Path, app_path: Path) -> tuple[ImportReport, list[str]]:
    """Import (or re-import, as a sync) a GoodBuddy assistant database; returns the report and the notes."""
    source = GoodBuddySource(app_path)
    return import_items(db_path, source.items(), source.policy), source.notes.lines()
