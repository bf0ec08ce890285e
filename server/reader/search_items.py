"""The items of a search page: their stored texts (field by field, as the index holds them) and the entity changes
and relations touching each object, one query each for the whole page."""

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
# Entity changes and relations touching each object, the first EVOLUTION_LIMIT per object and how many.
EVOLUTION_REFS: Final = """
WITH wanted (object_type, object_id) AS (
  SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:objects)
),
refs (object_type, object_id, ref_type, ref_id) AS (
  SELECT w.object_type, w.object_id, 'entity_change', c.entity_id || '#' || c.association_key
    FROM wanted AS w JOIN entity_changes AS c ON c.entity_id = w.object_id
   WHERE w.object_type = 'entity' AND c.scope_key = :scope_key
  UNION
  -- the changes an event carried: the revision event's evolution, as get_context lists it
  SELECT w.object_type, w.object_id, 'entity_change', c.entity_id || '#' || c.association_key
    FROM wanted AS w JOIN entity_changes AS c ON c.event_id = w.object_id
   WHERE w.object_type = 'event' AND c.scope_key = :scope_key
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
    """The first EVOLUTION_LIMIT entity changes (an entity's own, or those an event carried) and relations touching
    the object, in (type, id) order."""
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
