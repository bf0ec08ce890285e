"""Opening a GoodBuddy assistant database: read-only, and only at the one schema version this build reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from server.store.errors import DatabaseUnusable
from server.store.migrate import read_problem, unreadable
from server.store.paths import sqlite_uri

SUPPORTED_SCHEMA: Final = 62
TABLES_READ: Final = (
    "projects",
    "messages",
    "tasks",
    "memory_items",
    "story_lines",
    "supervision_runs",
    "supervision_results",
    "supervision_sources",
    "supervision_entities",
    "supervision_entity_changes",
    "supervision_events",
    "supervision_event_sources",
    "supervision_event_entities",
    "supervision_relations",
    "supervision_review_runs",
    "supervision_review_sources",
    "supervision_review_batches",
    "supervision_review_current",
    "supervision_stories",
    "supervision_event_stories",
    "supervision_experiences",
    "supervision_experience_events",
)


def open_app_database(path: Path) -> sqlite3.Connection:
    """The app database, read-only, checked to be a GoodBuddy assistant database at schema 62."""
    if not path.exists():
        raise DatabaseUnusable(f"{path} does not exist")
    if path.is_dir():
        raise DatabaseUnusable(f"{path} is a directory, not a database file")
    try:
        conn = sqlite3.connect(sqlite_uri(path, "ro"), uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise DatabaseUnusable(f"cannot open {path} read-only: {read_problem(path) or exc}") from None
    try:
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            present = {row[0] for row in conn.execute("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view')")}
        except sqlite3.DatabaseError as exc:
            # Locked by the app, damaged or unreadable here, each with its own fix (never rebuilt: it is the app's).
            damaged = "the app's database must be repaired or restored by the app (GoodBuddy); nothing was imported"
            raise DatabaseUnusable(unreadable(conn, path, exc, damaged)) from None
        if not {"projects", "supervision_results"} <= present:
            raise DatabaseUnusable(f"{path} is not a GoodBuddy assistant database (it has no supervision tables)")
        if version != SUPPORTED_SCHEMA:
            hint = (
                "open it once with a GoodBuddy release that uses schema 62, which upgrades it"
                if version < SUPPORTED_SCHEMA
                else "this story-graph-mcp does not know that schema yet; upgrade story-graph-mcp"
            )
            raise DatabaseUnusable(
                f"{path} is a GoodBuddy assistant database at schema version {version}; only version"
                f" {SUPPORTED_SCHEMA} can be imported: {hint}"
            )
        missing = [table for table in TABLES_READ if table not in present]
        if missing:
            raise DatabaseUnusable(f"{path} claims GoodBuddy schema {SUPPORTED_SCHEMA} but has no {missing[0]}")
    except BaseException:
        conn.close()
        raise
    conn.row_factory = sqlite3.Row
    return conn
