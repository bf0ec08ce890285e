"""GoodBuddy entities (current rows and result snapshots), events, entity changes, relations, the leaves'
descriptions of entities, and confirmed memory items.

Each table is read as a stream, joined with the scratch tables (state.py) for the results and scopes it
refers to; an event's links come from their own ordered streams (`RowsByKey`, a merge join)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Final

import orjson

from server.store.goodbuddy.rows import at, event_time, id_list, instant
from server.store.goodbuddy.state import Seen
from server.store.importer import ImportItem
from server.store.merge_join import RowsByKey
from server.store.sync import Retired

MEMORY: Final = "SELECT id, scope, scope_id, type, content, status, updated_at FROM memory_items ORDER BY id"
# An entity lives in its story line's scope; one of a story line not read is left out.
ADD_ENTITIES: Final = """
INSERT OR REPLACE INTO temp.gb_entity
SELECT e.id, l.scope_key FROM supervision_entities AS e JOIN temp.gb_story_line AS l ON l.id = e.story_line_id"""
ENTITIES: Final = """
SELECT e.id, e.story_line_id, e.canonical_label, e.description, e.confirmation_state, e.updated_at,
       e.source_reference_ids_json, g.scope_key
  FROM supervision_entities AS e JOIN temp.gb_entity AS g ON g.id = e.id ORDER BY e.id"""
SNAPSHOT_ENTITIES: Final = """
SELECT r.id AS result_id, r.scope_key, r.created_at, x.position, x.entity_id, x.label, x.description, x.state,
       x.refs, g.scope_key AS entity_scope
  FROM temp.gb_snapshot_entity AS x JOIN temp.gb_result AS r ON r.seq = x.result_seq
  LEFT JOIN temp.gb_entity AS g ON g.id = x.entity_id
 ORDER BY x.result_seq, x.position"""
LEAVES: Final = """
SELECT x.location, x.id, x.result_id, x.summary, x.facts, r.scope_key, r.created_at
  FROM temp.gb_leaf AS x JOIN temp.gb_result AS r ON r.id = x.result_id ORDER BY x.seq"""
CHANGES: Final = """
SELECT c.id, c.entity_id, c.result_id, c.change_type, c.description, c.confirmation_state,
       c.source_reference_ids_json, r.scope_key, r.created_at, g.scope_key AS entity_scope
  FROM supervision_entity_changes AS c JOIN temp.gb_result AS r ON r.id = c.result_id
  LEFT JOIN temp.gb_entity AS g ON g.id = c.entity_id
 ORDER BY c.id"""
# An event of a result read, with the result that supersedes it (if read) and its story line's scope.
EVENTS: Final = """
SELECT e.id, e.story_line_id, e.result_id, e.occurred_at, e.title, e.description, e.event_type, e.superseded_by,
       r.scope_key, r.created_at, later.id AS later_id, later.scope_key AS later_scope, l.scope_key AS line_scope
  FROM supervision_events AS e JOIN temp.gb_result AS r ON r.id = e.result_id
  LEFT JOIN temp.gb_result AS later ON later.id = coalesce(e.superseded_by, '')
  LEFT JOIN temp.gb_story_line AS l ON l.id = e.story_line_id
 ORDER BY e.id"""
ADD_EVENT: Final = "INSERT OR REPLACE INTO temp.gb_event VALUES (?, ?)"
EVENT_SOURCES: Final = """
SELECT l.event_id, l.source_id, g.scope_key FROM supervision_event_sources AS l
  LEFT JOIN temp.gb_reference AS g ON g.id = l.source_id
 ORDER BY l.event_id, l.source_id"""
EVENT_ENTITIES: Final = """
SELECT l.event_id, l.entity_id, g.scope_key FROM supervision_event_entities AS l
  LEFT JOIN temp.gb_entity AS g ON g.id = l.entity_id
 ORDER BY l.event_id, l.entity_id"""
# A relation row has no result: it is recorded with the first result of its scope whose snapshot holds it,
# else with the first result of its scope.
RELATIONS: Final = """
SELECT x.id, x.story_line_id, x.from_entity_id, x.to_entity_id, x.relation_type, x.reason, x.confirmation_state,
       x.source_reference_ids_json, l.scope_key, o.id AS owner_id, o.created_at AS owner_created_at,
       a.scope_key AS from_scope, b.scope_key AS to_scope
  FROM supervision_relations AS x LEFT JOIN temp.gb_story_line AS l ON l.id = x.story_line_id
  LEFT JOIN temp.gb_result AS o ON o.seq = coalesce(
       (SELECT f.result_seq FROM temp.gb_snapshot_relation AS f
         WHERE f.relation_id = x.id AND f.scope_key = l.scope_key),
       (SELECT min(e.seq) FROM temp.gb_result AS e WHERE e.scope_key = l.scope_key))
  LEFT JOIN temp.gb_entity AS a ON a.id = x.from_entity_id
  LEFT JOIN temp.gb_entity AS b ON b.id = x.to_entity_id
 ORDER BY x.id"""


def read_entities(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    conn.execute(ADD_ENTITIES)
    for row in conn.execute(ENTITIES):
        where = at("supervision_entities", id=row["id"])
        refs = id_list(where, "source_reference_ids_json", row["source_reference_ids_json"])
        yield seen.line(
            where,
            {
                "kind": "entity",
                "id": row["id"],
                "story_line_id": row["story_line_id"],
                "canonical_label": row["canonical_label"],
                "description": row["description"],
                "confirmation_state": row["confirmation_state"],
                "updated_at": instant(where, "updated_at", row["updated_at"]),
                "source_reference_ids": seen.in_scope(refs, row["scope_key"], "gb_reference", "saved fragments"),
            },
        )
    yield from snapshot_revisions(conn, seen)
    yield from leaves_with_facts(conn, seen)


def snapshot_revisions(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    """Each result's graph snapshot: the entity as that result saved it (an entity revision), with the references
    that result saved for it (its own evidence; unknown when the snapshot holds none)."""
    for row in conn.execute(SNAPSHOT_ENTITIES):
        entity_id = row["entity_id"]
        known = {entity_id: row["entity_scope"]}
        if seen.same_scope([entity_id], row["scope_key"], known, "entities (result snapshots)"):
            refs = None if row["refs"] is None else orjson.loads(row["refs"])
            if refs is not None:  # references not imported, or of another scope, are counted, as an entity's
                refs = seen.in_scope(refs, row["scope_key"], "gb_reference", "saved fragments")
            seen.add_fact(row["result_id"], "entity", entity_id)
            yield seen.line(
                f"{at('supervision_results', id=row['result_id'])}, graph_snapshot_json.entities[{row['position']}]",
                {
                    "kind": "entity_revision",
                    "entity_id": entity_id,
                    "result_id": row["result_id"],
                    "canonical_label": row["label"],
                    "description": row["description"],
                    "confirmation_state": row["state"],
                    "recorded_at": row["created_at"],
                    "source_reference_ids": refs,
                },
            )


def leaves_with_facts(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    for row in conn.execute(LEAVES):
        facts: dict[str, str | None] = orjson.loads(row["facts"])
        kept = seen.in_scope(list(facts), row["scope_key"], "gb_entity", "entities (leaf descriptions)")
        for entity_id in kept:
            seen.add_fact(f"leaf:{row['id']}", "entity", entity_id)
        yield seen.line(
            row["location"],
            {
                "kind": "leaf",
                "id": row["id"],
                "result_id": row["result_id"],
                "summary": row["summary"],
                "recorded_at": row["created_at"],
                "facts": [
                    {
                        "object_ref": {"type": "entity", "id": i},
                        "description": seen.child_text(facts[i], "leaf descriptions"),
                    }
                    for i in kept
                ],
            },
        )


def read_events(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    sources = RowsByKey(conn.execute(EVENT_SOURCES))
    entities = RowsByKey(conn.execute(EVENT_ENTITIES))
    for row in conn.execute(EVENTS):
        where = at("supervision_events", id=row["id"])
        scope = row["scope_key"]
        if row["later_id"] is not None and row["later_scope"] == scope:
            reason = f"superseded by result {row['later_id']} of the same scope"
            yield (where, Retired("event", (row["id"],), reason))
            seen.notes.add(
                "events the app marks superseded by a later review of the same scope (retired, not imported)"
            )
            continue
        if row["superseded_by"]:
            seen.notes.add("events superseded by a review of another scope (kept in their own scope)")
        time = event_time(row["occurred_at"])
        if time is None:
            seen.notes.add("events whose time names no instant (stored undated)")
        conn.execute(ADD_EVENT, (row["id"], scope))
        seen.add_fact(row["result_id"], "event", row["id"])
        entity_links, source_links = entities.of(row["id"]), sources.of(row["id"])
        yield seen.line(
            where,
            {
                "kind": "event",
                "id": row["id"],
                "result_id": row["result_id"],
                "story_line_id": row["story_line_id"] if row["line_scope"] == scope else None,
                "event_type": row["event_type"],
                "title": row["title"],
                "description": row["description"],
                "event_time": time,
                "recorded_at": row["created_at"],
                "entity_ids": seen.same_scope(
                    [link[1] for link in entity_links],
                    scope,
                    {link[1]: link[2] for link in entity_links},
                    "entities (from events)",
                ),
                "source_reference_ids": seen.same_scope(
                    [link[1] for link in source_links],
                    scope,
                    {link[1]: link[2] for link in source_links},
                    "saved fragments",
                ),
            },
        )


def read_changes(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    for row in conn.execute(CHANGES):
        where = at("supervision_entity_changes", id=row["id"])
        scope, entity = row["scope_key"], row["entity_id"]
        if not seen.same_scope([entity], scope, {entity: row["entity_scope"]}, "entities (from entity changes)"):
            continue
        refs = id_list(where, "source_reference_ids_json", row["source_reference_ids_json"])
        seen.add_fact(row["result_id"], "entity_change", f"{entity}#{row['id']}")
        yield seen.line(
            where,
            {
                "kind": "entity_change",
                "entity_id": entity,
                "association_key": row["id"],
                "result_id": row["result_id"],
                "change_type": row["change_type"],
                "description": row["description"],
                "confirmation_state": row["confirmation_state"],
                "recorded_at": row["created_at"],
                "source_reference_ids": seen.in_scope(refs, scope, "gb_reference", "saved fragments"),
            },
        )


def read_relations(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    for row in conn.execute(RELATIONS):
        where = at("supervision_relations", id=row["id"])
        scope = row["scope_key"]
        if scope is None or row["owner_id"] is None:
            seen.notes.add("relations of a scope without any result (not imported)")
            continue
        ends = [row["from_entity_id"], row["to_entity_id"]]
        known = {ends[0]: row["from_scope"], ends[1]: row["to_scope"]}
        if len(seen.same_scope(ends, scope, known, "entities (relation ends)")) < 2:
            seen.notes.add("relations with an end in another scope (not imported)")
            continue
        refs = id_list(where, "source_reference_ids_json", row["source_reference_ids_json"])
        seen.add_fact(row["owner_id"], "relation", row["id"])
        yield seen.line(
            where,
            {
                "kind": "relation",
                "id": row["id"],
                "result_id": row["owner_id"],
                "from_ref": {"type": "entity", "id": row["from_entity_id"]},
                "to_ref": {"type": "entity", "id": row["to_entity_id"]},
                "relation_type": row["relation_type"],
                "reason": row["reason"],
                "confirmation_state": row["confirmation_state"],
                "recorded_at": row["owner_created_at"],
                "source_reference_ids": seen.in_scope(refs, scope, "gb_reference", "saved fragments"),
            },
        )


def read_memory(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    for row in conn.execute(MEMORY):
        where = at("memory_items", id=row["id"])
        if row["status"] != "confirmed":
            seen.notes.add("memory items the user has not confirmed (not imported)")
            continue
        if row["scope"] == "conversation" or (row["scope"] == "project" and row["scope_id"] not in seen.projects):
            seen.notes.add("confirmed memory items of a conversation or a deleted project (not imported)")
            continue
        yield seen.line(
            where,
            {
                "kind": "memory_item",
                "id": row["id"],
                "project_id": row["scope_id"] if row["scope"] == "project" else None,
                "memory_type": row["type"],
                "body": row["content"],
                "confirmation_state": row["status"],
                "updated_at": instant(where, "updated_at", row["updated_at"]),
            },
        )
