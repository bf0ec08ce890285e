"""GoodBuddy entities (current rows and result snapshots), events, entity changes, relations, the leaves'
descriptions of entities, and confirmed memory items."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Final

from server.store.goodbuddy.rows import at, event_time, id_list, instant
from server.store.goodbuddy.state import Result, Seen
from server.store.importer import ImportItem
from server.store.sync import Retired

MEMORY: Final = "SELECT id, scope, scope_id, type, content, status, updated_at FROM memory_items ORDER BY id"
ENTITIES: Final = """
SELECT id, story_line_id, canonical_label, description, confirmation_state, updated_at, source_reference_ids_json
  FROM supervision_entities ORDER BY id"""
CHANGES: Final = """
SELECT id, entity_id, result_id, change_type, description, confirmation_state, source_reference_ids_json
  FROM supervision_entity_changes ORDER BY id"""
EVENTS: Final = """
SELECT id, story_line_id, result_id, occurred_at, title, description, event_type, superseded_by
  FROM supervision_events ORDER BY id"""
EVENT_SOURCES: Final = "SELECT event_id, source_id FROM supervision_event_sources ORDER BY event_id, source_id"
EVENT_ENTITIES: Final = "SELECT event_id, entity_id FROM supervision_event_entities ORDER BY event_id, entity_id"
RELATIONS: Final = """
SELECT id, story_line_id, from_entity_id, to_entity_id, relation_type, reason, confirmation_state,
       source_reference_ids_json
  FROM supervision_relations ORDER BY id"""


def read_entities(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    for row in conn.execute(ENTITIES).fetchall():
        where = at("supervision_entities", id=row["id"])
        scope = seen.story_line_scope.get(row["story_line_id"])
        if scope is None:
            continue
        seen.entity_scope[row["id"]] = scope
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
                "source_reference_ids": seen.same_scope(refs, scope, seen.reference_scope, "saved fragments"),
            },
        )
    yield from snapshot_revisions(seen)
    yield from leaves_with_facts(seen)


def snapshot_revisions(seen: Seen) -> Iterator[ImportItem]:
    """Each result's graph snapshot: the entity as that result saved it (an entity revision)."""
    for result in seen.results.values():
        entities = seen.snapshots[result.id].get("entities")
        done: set[str] = set()
        for index, entity in enumerate(entities if isinstance(entities, list) else []):
            entity_id = entity.get("id") if isinstance(entity, dict) else None
            if not isinstance(entity_id, str) or entity_id in done:
                continue
            done.add(entity_id)
            if seen.same_scope([entity_id], result.scope_key, seen.entity_scope, "entities (result snapshots)"):
                state = entity.get("confirmation_state")
                yield seen.line(
                    f"{result.where}, graph_snapshot_json.entities[{index}]",
                    {
                        "kind": "entity_revision",
                        "entity_id": entity_id,
                        "result_id": result.id,
                        "canonical_label": str(entity.get("canonical_label") or ""),
                        "description": str(entity.get("description") or ""),
                        "confirmation_state": state if isinstance(state, str) else "automatic",
                        "recorded_at": result.created_at,
                    },
                )


def leaves_with_facts(seen: Seen) -> Iterator[ImportItem]:
    for leaf in seen.leaves_read:
        result = seen.results[leaf.result_id]
        kept = seen.same_scope(list(leaf.facts), result.scope_key, seen.entity_scope, "entities (leaf descriptions)")
        facts = [{"object_ref": {"type": "entity", "id": i}, "description": leaf.facts[i]} for i in kept]
        yield seen.line(
            leaf.where,
            {
                "kind": "leaf",
                "id": leaf.id,
                "result_id": leaf.result_id,
                "summary": leaf.summary,
                "recorded_at": result.created_at,
                "facts": facts,
            },
        )


def read_events(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    sources = links(conn, EVENT_SOURCES)
    entities = links(conn, EVENT_ENTITIES)
    for row in conn.execute(EVENTS).fetchall():
        where = at("supervision_events", id=row["id"])
        result = seen.results.get(row["result_id"])
        if result is None:
            continue
        superseding = seen.results.get(row["superseded_by"] or "")
        if superseding is not None and superseding.scope_key == result.scope_key:
            reason = f"superseded by result {superseding.id} of the same scope"
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
        seen.event_scope[row["id"]] = result.scope_key
        story_line = row["story_line_id"]
        if seen.story_line_scope.get(story_line) != result.scope_key:
            story_line = None
        yield seen.line(
            where,
            {
                "kind": "event",
                "id": row["id"],
                "result_id": row["result_id"],
                "story_line_id": story_line,
                "event_type": row["event_type"],
                "title": row["title"],
                "description": row["description"],
                "event_time": time,
                "recorded_at": result.created_at,
                "entity_ids": seen.same_scope(
                    entities.get(row["id"], []), result.scope_key, seen.entity_scope, "entities (from events)"
                ),
                "source_reference_ids": seen.same_scope(
                    sources.get(row["id"], []), result.scope_key, seen.reference_scope, "saved fragments"
                ),
            },
        )


def links(conn: sqlite3.Connection, sql: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for owner, target in conn.execute(sql):
        found.setdefault(owner, []).append(target)
    return found


def read_changes(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    for row in conn.execute(CHANGES).fetchall():
        where = at("supervision_entity_changes", id=row["id"])
        result = seen.results.get(row["result_id"])
        if result is None or not seen.same_scope(
            [row["entity_id"]], result.scope_key, seen.entity_scope, "entities (from entity changes)"
        ):
            continue
        refs = id_list(where, "source_reference_ids_json", row["source_reference_ids_json"])
        yield seen.line(
            where,
            {
                "kind": "entity_change",
                "entity_id": row["entity_id"],
                "association_key": row["id"],
                "result_id": row["result_id"],
                "change_type": row["change_type"],
                "description": row["description"],
                "confirmation_state": row["confirmation_state"],
                "recorded_at": result.created_at,
                "source_reference_ids": seen.same_scope(
                    refs, result.scope_key, seen.reference_scope, "saved fragments"
                ),
            },
        )


def read_relations(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    """A relation row has no result: it is recorded with the first result whose snapshot holds it."""
    first: dict[str, Result] = {}
    earliest: dict[str, Result] = {}
    for result in seen.results.values():  # in creation order
        earliest.setdefault(result.scope_key, result)
        relations = seen.snapshots[result.id].get("relations")
        for relation in relations if isinstance(relations, list) else []:
            if isinstance(relation, dict) and isinstance(relation.get("id"), str):
                first.setdefault(f"{relation['id']}@{result.scope_key}", result)
    for row in conn.execute(RELATIONS).fetchall():
        where = at("supervision_relations", id=row["id"])
        scope = seen.story_line_scope.get(row["story_line_id"])
        owner = first.get(f"{row['id']}@{scope}") or earliest.get(scope or "")
        if scope is None or owner is None:
            seen.notes.add("relations of a scope without any result (not imported)")
            continue
        ends = [row["from_entity_id"], row["to_entity_id"]]
        if len(seen.same_scope(ends, scope, seen.entity_scope, "entities (relation ends)")) < 2:
            seen.notes.add("relations with an end in another scope (not imported)")
            continue
        refs = id_list(where, "source_reference_ids_json", row["source_reference_ids_json"])
        yield seen.line(
            where,
            {
                "kind": "relation",
                "id": row["id"],
                "result_id": owner.id,
                "from_ref": {"type": "entity", "id": row["from_entity_id"]},
                "to_ref": {"type": "entity", "id": row["to_entity_id"]},
                "relation_type": row["relation_type"],
                "reason": row["reason"],
                "confirmation_state": row["confirmation_state"],
                "recorded_at": owner.created_at,
                "source_reference_ids": seen.same_scope(refs, scope, seen.reference_scope, "saved fragments"),
            },
        )


def read_memory(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    for row in conn.execute(MEMORY).fetchall():
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
