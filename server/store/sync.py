"""Sync mode of the importer: re-importing a source whose objects may have changed since the last run.

A JSONL import is append-only: an object stored with other content is an error. A *mirror* of another
store (the GoodBuddy app database, a memory-server file) is imported again and again, and its objects
change upstream: a user confirms an entity, edits a message, a review re-extracts an event. In sync
mode the writer brings the stored copy up to date instead:

* An incoming line equal to the stored object is unchanged: no write, no revision bump.
* `recorded_at` is write-once: it says when *this store* first recorded the object, so it is ignored
  when comparing and kept on update. A source may name more fields it cannot know for certain
  (`volatile`, e.g. the import time a memory-server entity is stamped with): they are ignored when
  comparing and written only with a real change.
* A line with other content replaces the stored object in place: the main row is upserted (same key,
  so every link to it stays valid) and its own link rows (evidence, entity links, facts) are rewritten.
  The triggers refresh the search index and bump the scope's data revision, so a cursor opened on the
  old content answers `stale_cursor`: pages of old and new content never mix.
* A scope and a source version never change (their key is their content): other content is an error.
* Nothing is deleted because it is missing from the source. A source may *retire* an object it knows
  is no longer current (an event the app marked superseded): it is removed if stored.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Final

from server.contracts.interchange import Line
from server.store.errors import ImportRejected, Where
from server.store.lines import Key

WRITE_ONCE: Final = "recorded_at"


@dataclass(frozen=True)
class SyncPolicy:
    """Turns sync mode on; `volatile` names fields the source can only stamp (ignored when comparing)."""

    volatile: frozenset[str] = frozenset()

    def same(self, stored: Line, line: Line) -> bool:
        ignored = set(self.volatile | {WRITE_ONCE})
        return stored.model_dump(exclude=ignored) == line.model_dump(exclude=ignored)

    def carry_over(self, stored: Line, line: Line) -> Line:
        """The line to write over `stored`: its write-once record time kept."""
        if WRITE_ONCE in type(line).model_fields:
            return line.model_copy(update={WRITE_ONCE: getattr(stored, WRITE_ONCE)})
        return line


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
        "memory_item",
    }
)
UPSERT_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "projects": ("id",),
    "results": ("id",),
    "story_lines": ("id",),
    "sources": ("id",),
    "source_references": ("id",),
    "entities": ("id",),
    "entity_revisions": ("entity_id", "result_id"),
    "events": ("id",),
    "entity_changes": ("entity_id", "association_key"),
    "relations": ("id",),
    "summaries": ("id",),
    "leaves": ("id",),
    "memory_items": ("id",),
}
# The link rows owned by an object, rewritten with it (`:id` is the object's address).
OWN_LINKS: Final[dict[str, tuple[str, ...]]] = {
    "entity": ("DELETE FROM object_sources WHERE object_type = 'entity' AND object_id = :id",),
    "event": (
        "DELETE FROM event_entities WHERE event_id = :id",
        "DELETE FROM object_sources WHERE object_type = 'event' AND object_id = :id",
    ),
    "entity_change": ("DELETE FROM object_sources WHERE object_type = 'entity_change' AND object_id = :id",),
    "relation": ("DELETE FROM object_sources WHERE object_type = 'relation' AND object_id = :id",),
    "summary": (
        "DELETE FROM fact_links WHERE owner_type = 'summary' AND owner_id = :id",
        "DELETE FROM object_sources WHERE object_type = 'summary' AND object_id = :id",
    ),
    "leaf": ("DELETE FROM fact_links WHERE owner_type = 'leaf' AND owner_id = :id",),
}
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
    "DELETE FROM events WHERE id = :id",  # event_entities go with it (ON DELETE CASCADE)
)
INSERT_COLUMNS: Final = re.compile(r"^INSERT INTO (\w+) \(([^)]*)\)")


def upsert(insert_sql: str) -> str:
    """The INSERT of a main row turned into an upsert on its primary key (an UPDATE keeps links valid)."""
    match = INSERT_COLUMNS.match(insert_sql)
    if match is None or match.group(1) not in UPSERT_KEYS:
        return insert_sql
    keys = UPSERT_KEYS[match.group(1)]
    columns = [column.strip() for column in match.group(2).split(",")]
    updates = ", ".join(f"{column} = excluded.{column}" for column in columns if column not in keys)
    return f"{insert_sql} ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"


def address(kind: str, key: Key) -> str:
    """How links name an object: its id, or `<entity_id>#<association_key>` for an entity change."""
    return "#".join(key) if kind == "entity_change" else key[0]


def drop_own_links(conn: sqlite3.Connection, kind: str, key: Key) -> None:
    for sql in OWN_LINKS.get(kind, ()):
        conn.execute(sql, {"id": address(kind, key)})


def retire(conn: sqlite3.Connection, where: Where, item: Retired) -> bool:
    """Remove a retired object if it is stored; True when it was. Only events can be retired."""
    if item.kind != "event":
        raise ImportRejected(where, "", f"a {item.kind} cannot be retired; only events can")
    params = {"id": item.key[0]}
    if conn.execute("SELECT 1 FROM events WHERE id = :id", params).fetchone() is None:
        return False
    for what, sql in EVENT_HOLDERS:
        holder = conn.execute(sql, params).fetchone()
        if holder is not None:
            raise ImportRejected(
                where, "", f"event {item.key[0]!r} is {item.reason}, but {what} {holder[0]!r} still links to it"
            )
    for sql in RETIRE_EVENT:
        conn.execute(sql, params)
    return True
