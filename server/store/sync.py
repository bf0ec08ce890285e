"""Sync mode of the importer: re-importing a source whose objects may have changed since the last run.

A JSONL import is append-only: an object stored with other content is an error. A *mirror* of another
store (the GoodBuddy app database, a memory-server file) is imported again and again, and its objects
change upstream: a user confirms an entity, edits a message, concludes a story, a review re-extracts
an event. In sync mode (a `SyncPolicy` passed to the import) the same writer brings the stored copy up
to date instead:

* An incoming line equal to the stored object is unchanged: no write, no revision bump.
* `recorded_at` is write-once: it says when *this store* first recorded the object, so it is ignored
  when comparing and kept on update. A source may name more fields it cannot know for certain
  (`volatile`, e.g. the import time a memory-server entity is stamped with): they are ignored when
  comparing and written only with a real change.
* A line with other content replaces the stored object in place: the main row is updated (same key,
  so every link to it stays valid) and its own child rows (evidence, entity links, facts) are rewritten.
  The triggers refresh the search index and bump the scope's data revision, so a cursor opened on the
  old content answers `stale_cursor`: pages of old and new content never mix. A story's or
  experience's event link is updated the same way (`primary`, `user_set`, `note`); a link that gives
  up an event's primary story does so before any link takes it.
* A scope and a source version never change (their key is their content): other content is an
  error, as in an append import.
* Nothing is deleted because it is missing from the source, with two exceptions, both applied before
  any line is written:
  - A source may *retire* an object it knows is no longer current (an event the app marked
    superseded, a story or experience the user merged away or removed): it is removed if stored.
  - The event links of a story or experience are part of it: a sync that lists a story or experience
    lists all its links, so a stored link it no longer lists (an event moved to another story) is
    removed. Both count as retired. A story or experience that moves to another scope (a cross
    story that now spans one more project) has its stored links removed too, and its lines write
    them again in the new scope.

merge.py applies this: `SyncPolicy.ignored` in its comparisons, `REPLACEABLE` and `update` when it
writes, `retire` for each retired item the source yielded and `OWNED_LINKS` for the links above.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final

from server.contracts.interchange import KIND_ORDER
from server.store.errors import ImportRejected
from server.store.lines import Key

WRITE_ONCE: Final = "recorded_at"


@dataclass(frozen=True)
class SyncPolicy:
    """Turns sync mode on; `volatile` names fields the source can only stamp (ignored when comparing). With
    `repair`, a line breaking a rule that can be repaired (`Check.repair`: a saved range its version's stored text
    contradicts) is kept with the contradicted part unknown and counted, instead of refused."""

    volatile: frozenset[str] = frozenset()
    repair: bool = False

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


# Kinds whose stored object is replaced in place when its content changed upstream: every kind but the two whose
# key is their content (a scope, a source version; docs/interchange.md), where other content is a conflict.
REPLACEABLE: Final = frozenset(KIND_ORDER) - {"scope", "source_version"}


# Kinds that are part of their owner (`Kind.owner`, a story or experience): a sync listing the owner lists
# all of them, and a stored one it does not list is removed.
OWNED_LINKS: Final = ("story_event", "experience_event")


def update(table: str, key: tuple[str, ...], columns: tuple[str, ...], select: str) -> str:
    """An UPDATE of the stored rows of `table` from `select` (a query naming each of `columns`), matched by `key`.

    An update keeps every link to the row valid; the write-once record time keeps its stored value. A
    plain UPDATE, not `INSERT ... ON CONFLICT DO UPDATE`: SQLite lets an outer statement's conflict clause
    override the `INSERT OR IGNORE` of the search-index triggers it fires, so an upsert of an object
    already waiting to be re-indexed would fail on the index's unique key.
    """
    updates = ", ".join(f"{column} = x.{column}" for column in columns if column not in (*key, WRITE_ONCE))
    match = " AND ".join(f"{table}.{column} = x.{column}" for column in key)
    return f"UPDATE {table} SET {updates} FROM ({select}) AS x WHERE {match}"


EVENT_HOLDERS: Final = (
    (
        "relation",
        "SELECT id FROM relations WHERE (from_type = 'event' AND from_id = :id) OR (to_type = 'event' AND to_id = :id)",
    ),
    ("entity change", "SELECT entity_id || '#' || association_key FROM entity_changes WHERE event_id = :id"),
)
# How each kind that can be retired is found and removed; its search rows and revisions follow by trigger.
STORED: Final[dict[str, str]] = {
    "event": "SELECT 1 FROM events WHERE id = :id",
    "story": "SELECT 1 FROM stories WHERE id = :id",
    "experience": "SELECT 1 FROM experiences WHERE id = :id",
}
RETIRE: Final[dict[str, tuple[str, ...]]] = {
    "event": (
        "DELETE FROM object_sources WHERE object_type = 'event' AND object_id = :id",
        "DELETE FROM fact_links WHERE object_type = 'event' AND object_id = :id",
        "DELETE FROM events WHERE id = :id",  # entity and story/experience links go with it (ON DELETE CASCADE)
    ),
    "story": ("DELETE FROM stories WHERE id = :id",),  # its event links go with it (ON DELETE CASCADE)
    "experience": ("DELETE FROM experiences WHERE id = :id",),
}


def retire(conn: sqlite3.Connection, location: str, item: Retired) -> bool:
    """Remove a retired object if it is stored; True when it was. Events, stories and experiences can be retired."""
    if item.kind not in RETIRE:
        raise ImportRejected(location, "", f"a {item.kind} cannot be retired; only events, stories and experiences can")
    params = {"id": item.key[0]}
    if conn.execute(STORED[item.kind], params).fetchone() is None:
        return False
    if item.kind == "event":
        for what, sql in EVENT_HOLDERS:
            holder = conn.execute(sql, params).fetchone()
            if holder is not None:
                raise ImportRejected(
                    location, "", f"event {item.key[0]!r} is {item.reason}, but {what} {holder[0]!r} still links to it"
                )
    for sql in RETIRE[item.kind]:
        conn.execute(sql, params)
    return True
