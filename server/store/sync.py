"""Sync mode of the importer: re-importing a source whose objects may have changed since the last run.

A JSONL import is append-only: an object stored with other content is an error. A *mirror* of another
store (the GoodBuddy app database, a memory-server file) is imported again and again, and its objects
change upstream: a user confirms an entity, edits a message, a review re-extracts an event. In sync
mode (a `SyncPolicy` passed to the import) the same writer brings the stored copy up to date instead:

* An incoming line equal to the stored object is unchanged: no write, no revision bump.
* `recorded_at` is write-once: it says when *this store* first recorded the object, so it is ignored
  when comparing and kept on update. A source may name more fields it cannot know for certain
  (`volatile`, e.g. the import time a memory-server entity is stamped with): they are ignored when
  comparing and written only with a real change.
* A line with other content replaces the stored object in place: the main row is upserted (same key,
  so every link to it stays valid) and its own child rows (evidence, entity links, facts) are rewritten.
  The triggers refresh the search index and bump the scope's data revision, so a cursor opened on the
  old content answers `stale_cursor`: pages of old and new content never mix.
* A scope, a source version and a story's or experience's event link never change (a scope's and a
  version's key is their content; a link's primary flag is guarded by a rule across rows): other
  content is an error, as in an append import.
* Nothing is deleted because it is missing from the source. A source may *retire* an object it knows
  is no longer current (an event the app marked superseded): it is removed if stored, before any
  line is written.

merge.py applies this: `SyncPolicy.ignored` in its comparisons, `REPLACEABLE` and `upsert` when it
writes, and `retire` for each retired item the source yielded.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final

from server.store.errors import ImportRejected
from server.store.lines import Key

WRITE_ONCE: Final = "recorded_at"


@dataclass(frozen=True)
class SyncPolicy:
    """Turns sync mode on; `volatile` names fields the source can only stamp (ignored when comparing)."""

    volatile: frozenset[str] = frozenset()

    @property
    def ignored(self) -> frozenset[str]:
        """Fields that never make a stored object differ: the volatile ones and the write-once record time."""
        return self.volatile | {WRITE_ONCE}


@dataclass(frozen=True)
class Retired:
    """An object the source knows is no longer current; sync mode removes it when it is stored."""

    kind: str
    key: Key
    reason: str


# Kinds whose stored object is replaced in place when its content changed upstream.
REPLACEABLE: Final = frozenset(
    {
        "project",
        "result",
        "story_line",
        "source",
        "source_reference",
        "entity",
        "entity_revision",
        "event",
        "entity_change",
        "relation",
        "summary",
        "leaf",
        "story",
        "experience",
        "experience_event",
        "memory_item",
    }
)


def upsert(key: tuple[str, ...], columns: tuple[str, ...]) -> str:
    """The clause that turns an INSERT of main rows into an update of the stored row with the same key.

    An UPDATE keeps every link to the row valid; the write-once record time keeps its stored value.
    """
    updates = ", ".join(f"{column} = excluded.{column}" for column in columns if column not in (*key, WRITE_ONCE))
    return f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"


EVENT_HOLDERS: Final = (
    (
        "relation",
        "SELECT id FROM relations WHERE (from_type = 'event' AND from_id = :id) OR (to_type = 'event' AND to_id = :id)",
    ),
    ("entity change", "SELECT entity_id || '#' || association_key FROM entity_changes WHERE event_id = :id"),
)
RETIRE_EVENT: Final = (
    "DELETE FROM object_sources WHERE object_type = 'event' AND object_id = :id",
    "DELETE FROM fact_links WHERE object_type = 'event' AND object_id = :id",
    "DELETE FROM events WHERE id = :id",  # entity and story/experience links go with it (ON DELETE CASCADE)
)


def retire(conn: sqlite3.Connection, location: str, item: Retired) -> bool:
    """Remove a retired object if it is stored; True when it was. Only events can be retired."""
    if item.kind != "event":
        raise ImportRejected(location, "", f"a {item.kind} cannot be retired; only events can")
    params = {"id": item.key[0]}
    if conn.execute("SELECT 1 FROM events WHERE id = :id", params).fetchone() is None:
        return False
    for what, sql in EVENT_HOLDERS:
        holder = conn.execute(sql, params).fetchone()
        if holder is not None:
            raise ImportRejected(
                location, "", f"event {item.key[0]!r} is {item.reason}, but {what} {holder[0]!r} still links to it"
            )
    for sql in RETIRE_EVENT:
        conn.execute(sql, params)
    return True
