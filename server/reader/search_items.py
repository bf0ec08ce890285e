"""The items of a search page: their stored texts (field by field, as the index holds them) and each object's
evolution (entity changes, listed events, relations touching it), one query each for the whole page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import aiosqlite
import orjson

ITEM_TEXTS: Final = """
SELECT item_id, object_type, object_id, result_key, hi, lo, hi_fields, lo_fields FROM search_items
 WHERE item_id IN (SELECT value FROM json_each(:ids))
"""
# Each object's evolution as get_context's header lists it, the first EVOLUTION_LIMIT per object and how many: an
# entity's changes and their events, the changes an event carried, a change's event, the events a story or experience
# lists, a story line's own events (not its members': two hops per member); and the relations touching any object.
# An entity's, event's or change's evolution leaves out what is the other end of one of its relations: get_context
# selects that end (an event linked to the entity, a change the event carried) as a related object, before its
# evolution, so its header counts it under relation_count only. A story's or experience's events are selected
# before its relations, so they count in both, as here. One statement for the whole page, each arm on an index.
EVOLUTION_REFS: Final = """
WITH wanted (object_type, object_id) AS (
  SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:objects)
),
evolution (object_type, object_id, ref_type, ref_id) AS (
  SELECT w.object_type, w.object_id, 'entity_change', c.entity_id || '#' || c.association_key
    FROM wanted AS w JOIN entity_changes AS c ON c.entity_id = w.object_id
   WHERE w.object_type = 'entity' AND c.scope_key = :scope_key
  UNION
  -- the events get_context's header lists with an entity's changes: those linked to the entity, and those that
  -- carried its changes (each read in this scope, as the header reads it)
  SELECT w.object_type, w.object_id, 'event', e.id
    FROM wanted AS w CROSS JOIN event_entities AS l ON l.entity_id = w.object_id AND l.scope_key = :scope_key
    JOIN events AS e ON e.id = l.event_id AND e.scope_key = :scope_key
   WHERE w.object_type = 'entity'
  UNION
  SELECT w.object_type, w.object_id, 'event', e.id
    FROM wanted AS w CROSS JOIN entity_changes AS c ON c.entity_id = w.object_id AND c.scope_key = :scope_key
    JOIN events AS e ON e.id = c.event_id AND e.scope_key = :scope_key
   WHERE w.object_type = 'entity'
  UNION
  -- the event that carried a change
  SELECT w.object_type, w.object_id, 'event', e.id
    FROM wanted AS w CROSS JOIN entity_changes AS c
      ON c.entity_id || '#' || c.association_key = w.object_id AND c.scope_key = :scope_key
    JOIN events AS e ON e.id = c.event_id AND e.scope_key = :scope_key
   WHERE w.object_type = 'entity_change'
  UNION
  -- the changes an event carried: the revision event's evolution, as get_context lists it
  SELECT w.object_type, w.object_id, 'entity_change', c.entity_id || '#' || c.association_key
    FROM wanted AS w JOIN entity_changes AS c ON c.event_id = w.object_id
   WHERE w.object_type = 'event' AND c.scope_key = :scope_key
  UNION
  -- the events get_context's header lists as a story's evolution: its own primary events (every linked event for a
  -- cross story), its threads' primary events and the event that set its state, each stored in its own scope. The
  -- unary + keeps SQLite on the id and parent indexes and CROSS JOIN on this order: else it read every story of the
  -- scope, or every primary link, first.
  SELECT w.object_type, w.object_id, 'event', l.event_id
    FROM wanted AS w JOIN stories AS s ON s.id = w.object_id AND +s.scope_key = :scope_key
    JOIN story_events AS l
      ON l.story_id = s.id AND l.scope_key = s.scope_key AND (l.is_primary = 1 OR s.level = 'cross')
    JOIN events AS e ON e.id = l.event_id AND e.scope_key = l.event_scope_key
   WHERE w.object_type = 'story'
  UNION
  SELECT w.object_type, w.object_id, 'event', l.event_id
    FROM wanted AS w CROSS JOIN stories AS t ON t.parent_story_id = w.object_id AND +t.scope_key = :scope_key
    CROSS JOIN story_events AS l ON l.story_id = t.id AND l.is_primary = 1
    JOIN events AS e ON e.id = l.event_id AND e.scope_key = l.event_scope_key
   WHERE w.object_type = 'story'
  UNION
  SELECT w.object_type, w.object_id, 'event', e.id
    FROM wanted AS w JOIN stories AS s ON s.id = w.object_id AND +s.scope_key = :scope_key
    JOIN events AS e ON e.id = s.state_event_id
   WHERE w.object_type = 'story'
  UNION
  -- an experience's events (formed or applied), as get_context's header lists them
  SELECT w.object_type, w.object_id, 'event', l.event_id
    FROM wanted AS w JOIN experience_events AS l ON l.experience_id = w.object_id AND l.scope_key = :scope_key
    JOIN events AS e ON e.id = l.event_id AND e.scope_key = l.event_scope_key
   WHERE w.object_type = 'experience'
  UNION
  -- a story line's own events (its member entities' changes and their events are get_context's to list)
  SELECT w.object_type, w.object_id, 'event', e.id
    FROM wanted AS w JOIN events AS e ON e.story_line_id = w.object_id AND +e.scope_key = :scope_key
   WHERE w.object_type = 'story_line'
),
refs (object_type, object_id, ref_type, ref_id) AS (
  -- The other end is looked up from the evolution ref's side (the unary + keeps SQLite off the object's side): an
  -- entity may have thousands of relations, an event or change a few.
  SELECT v.object_type, v.object_id, v.ref_type, v.ref_id FROM evolution AS v
   WHERE v.object_type NOT IN ('entity', 'event', 'entity_change')
      OR (NOT EXISTS (SELECT 1 FROM relations AS r
                       WHERE r.to_id = v.ref_id AND r.to_type = v.ref_type
                         AND +r.from_id = v.object_id AND +r.from_type = v.object_type AND +r.scope_key = :scope_key)
          AND NOT EXISTS (SELECT 1 FROM relations AS r
                           WHERE r.from_id = v.ref_id AND r.from_type = v.ref_type
                             AND +r.to_id = v.object_id AND +r.to_type = v.object_type AND +r.scope_key = :scope_key))
  UNION
  SELECT w.object_type, w.object_id, 'relation', r.id
    FROM wanted AS w JOIN relations AS r ON r.from_id = w.object_id AND r.from_type = w.object_type
   WHERE r.scope_key = :scope_key
  UNION
  SELECT w.object_type, w.object_id, 'relation', r.id
    FROM wanted AS w JOIN relations AS r ON r.to_id = w.object_id AND r.to_type = w.object_type
   WHERE r.scope_key = :scope_key
)
SELECT object_type, object_id, ref_type, ref_id, total FROM (
  SELECT *, row_number() OVER (PARTITION BY object_type, object_id ORDER BY ref_type, ref_id) AS n,
         count(*) OVER (PARTITION BY object_type, object_id) AS total
    FROM refs)
 WHERE n <= :limit ORDER BY object_type, object_id, n
"""
EVOLUTION_LIMIT: Final = 20
FIELD_END: Final = "\x01\x01"


@dataclass(frozen=True)
class FieldText:
    field: str
    weight: int
    text: str


@dataclass(frozen=True)
class ItemText:
    object_type: str
    object_id: str
    result_key: str
    fields: list[FieldText]

    @property
    def key(self) -> tuple[str, str, str]:
        return self.object_type, self.object_id, self.result_key


async def item_texts(conn: aiosqlite.Connection, item_ids: Sequence[int]) -> dict[int, ItemText]:
    """The searchable fields of each item, as the index holds them (weight-3 fields first)."""
    rows = await conn.execute_fetchall(ITEM_TEXTS, {"ids": "[" + ",".join(map(str, item_ids)) + "]"})
    found = {}
    for item_id, object_type, object_id, result_key, hi, lo, hi_fields, lo_fields in rows:
        fields = [
            FieldText(name, weight, text)
            for names, texts, weight in ((hi_fields, hi, 3), (lo_fields, lo, 1))
            for name, text in zip(_split(names), _split(texts), strict=True)
        ]
        found[int(item_id)] = ItemText(object_type, object_id, result_key, fields)
    return found


def _split(joined: str) -> list[str]:
    return joined.split(FIELD_END)[:-1] if joined else []


@dataclass(frozen=True)
class Evolution:
    refs: list[tuple[str, str]]
    """The first EVOLUTION_LIMIT of the object's evolution refs (EVOLUTION_REFS), in (type, id) order."""
    total: int


async def evolution_refs(
    conn: aiosqlite.Connection, scope_key: str, objects: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], Evolution]:
    params = {
        "objects": orjson.dumps(sorted(set(objects))).decode(),
        "scope_key": scope_key,
        "limit": EVOLUTION_LIMIT,
    }
    found: dict[tuple[str, str], Evolution] = {obj: Evolution([], 0) for obj in objects}
    for object_type, object_id, ref_type, ref_id, total in await conn.execute_fetchall(EVOLUTION_REFS, params):
        evolution = found[(object_type, object_id)]
        found[(object_type, object_id)] = Evolution([*evolution.refs, (ref_type, ref_id)], int(total))
    return found
