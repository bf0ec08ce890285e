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
  is no longer current (an event the app marked superseded, a story the user merged away): it is
  removed if stored.
* The event links of a story or experience are part of it: a sync that lists a story lists all its
  links, and a stored link it no longer lists is removed (counted as retired).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from server.contracts.interchange import Line
from server.store.errors import ImportRejected, Where
from server.store.lines import Key, line_key

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
        "story",
        "story_event",
        "experience",
        "experience_event",
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
    "stories": ("id",),
    "story_events": ("story_id", "event_id"),
    "experiences": ("id",),
    "experience_events": ("experience_id", "event_id", "role"),
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
# How each kind that can be retired is removed; its search rows and revisions follow by trigger.
RETIRE: Final[dict[str, tuple[str, ...]]] = {
    "event": (
        "DELETE FROM object_sources WHERE object_type = 'event' AND object_id = :id",
        "DELETE FROM fact_links WHERE object_type = 'event' AND object_id = :id",
        "DELETE FROM events WHERE id = :id",  # event_entities and story/experience links go with it (CASCADE)
    ),
    "story": ("DELETE FROM stories WHERE id = :id",),  # its event links go with it (CASCADE)
    "experience": ("DELETE FROM experiences WHERE id = :id",),
}
STORED: Final[dict[str, str]] = {
    "event": "SELECT 1 FROM events WHERE id = :id",
    "story": "SELECT 1 FROM stories WHERE id = :id",
    "experience": "SELECT 1 FROM experiences WHERE id = :id",
}
# The links a story or experience owns (docs/interchange.md: a link is part of its owner).
OWNED_LINKS: Final[dict[str, tuple[str, str, str]]] = {
    "story": (
        "story_event",
        "SELECT story_id, event_id FROM story_events WHERE story_id = :id",
        "DELETE FROM story_events WHERE story_id = :k0 AND event_id = :k1",
    ),
    "experience": (
        "experience_event",
        "SELECT experience_id, event_id, role FROM experience_events WHERE experience_id = :id",
        "DELETE FROM experience_events WHERE experience_id = :k0 AND event_id = :k1 AND role = :k2",
    ),
}
INSERT_COLUMNS: Final = re.compile(r"^INSERT INTO (\w+) \(([^)]*)\)\s*VALUES \(([^)]*)\)$")


def upsert(insert_sql: str) -> str:
    """The INSERT of a main row turned into an UPDATE of the stored row by its key (an update keeps links valid).

    A plain UPDATE, not `INSERT ... ON CONFLICT DO UPDATE`: SQLite lets an outer statement's conflict clause
    override the `INSERT OR IGNORE` of the search-index triggers it fires, so an upsert of an object already
    waiting to be re-indexed would fail on the index's unique key.
    """
    match = INSERT_COLUMNS.match(insert_sql)
    if match is None or match.group(1) not in UPSERT_KEYS:
        return insert_sql
    keys = UPSERT_KEYS[match.group(1)]
    columns = [column.strip() for column in match.group(2).split(",")]
    values = [value.strip() for value in match.group(3).split(",")]
    pairs = list(zip(columns, values, strict=True))
    updates = ", ".join(f"{column} = {value}" for column, value in pairs if column not in keys)
    where = " AND ".join(f"{column} = {value}" for column, value in pairs if column in keys)
    return f"UPDATE {match.group(1)} SET {updates} WHERE {where}"


def address(kind: str, key: Key) -> str:
    """How links name an object: its id, or `<entity_id>#<association_key>` for an entity change."""
    return "#".join(key) if kind == "entity_change" else key[0]


def drop_own_links(conn: sqlite3.Connection, kind: str, key: Key) -> None:
    for sql in OWN_LINKS.get(kind, ()):
        conn.execute(sql, {"id": address(kind, key)})


def retire(conn: sqlite3.Connection, where: Where, item: Retired) -> bool:
    """Remove a retired object if it is stored; True when it was. Events, stories and experiences can be retired."""
    if item.kind not in RETIRE:
        raise ImportRejected(where, "", f"a {item.kind} cannot be retired; only events, stories and experiences can")
    params = {"id": item.key[0]}
    if conn.execute(STORED[item.kind], params).fetchone() is None:
        return False
    if item.kind == "event":
        for what, sql in EVENT_HOLDERS:
            holder = conn.execute(sql, params).fetchone()
            if holder is not None:
                raise ImportRejected(
                    where, "", f"event {item.key[0]!r} is {item.reason}, but {what} {holder[0]!r} still links to it"
                )
    for sql in RETIRE[item.kind]:
        conn.execute(sql, params)
    return True


def drop_unlisted_links(conn: sqlite3.Connection, lines: Iterable[Line]) -> int:
    """Remove the stored links of each story and experience in `lines` that `lines` no longer list; returns how many.

    A story's or experience's event links are part of it: a source that lists the story lists all of its
    current links, so a link it dropped (an event moved to another story, say) goes. Runs before any line
    is written, so the moved event's new primary link does not meet its old one.
    """
    owners: dict[str, set[str]] = {kind: set() for kind in OWNED_LINKS}
    listed: dict[str, set[Key]] = {link_kind: set() for link_kind, _, _ in OWNED_LINKS.values()}
    for line in lines:
        if line.kind in owners:
            owners[line.kind].add(line_key(line)[0])
        elif line.kind in listed:
            listed[line.kind].add(line_key(line))
    dropped = 0
    for kind, ids in owners.items():
        link_kind, stored_sql, delete_sql = OWNED_LINKS[kind]
        for owner in sorted(ids):
            for row in conn.execute(stored_sql, {"id": owner}).fetchall():
                key = tuple(row)
                if key not in listed[link_kind]:
                    conn.execute(delete_sql, {f"k{i}": part for i, part in enumerate(key)})
                    dropped += 1
    return dropped
