"""The SQL of a search: the item id layout, the statements, and the filters every statement carries.

An item id (migrations/0003) is `scope number << 43 | own-row flag << 42 | type code << 38 | sequence`, so
a scope, its own or other rows, and a type are id ranges. Every range statement reads one of them from the
FTS index, highest id first, with the scope's filters: the requested types (ranges), the time range (a
clause on the item's times, and its month tokens ANDed to the text expression, migrations/0009), and the
items already listed (left out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson

SCOPE_SHIFT: Final = 43
OWN_BIT: Final = 42
TYPE_SHIFT: Final = 38
TYPE_CODES: Final[dict[str, int]] = {  # as in search_types (migrations/0003): higher codes rank first
    "story": 9,
    "experience": 8,
    "entity": 7,
    "event": 6,
    "relation": 5,
    "entity_change": 4,
    "story_line": 3,
    "summary": 2,
    "source_reference": 1,
}

SCOPE_NUMBER: Final = "SELECT num FROM search_scopes WHERE scope_key = :scope_key"
# The indexed trigrams a short needle begins (migrations/0013): search_trigrams holds every trigram the texts ever put
# into the index and is never pruned, so each one is kept only while the index still holds it (one FTS5 probe: the
# first entry of one term, where the vocabulary read every entry of every term). The same terms, in the same order.
TRIGRAMS_BEGINNING: Final = """
SELECT t.term FROM search_trigrams AS t
 WHERE t.term >= :low AND t.term < :high
   AND EXISTS (SELECT 1 FROM search_fts WHERE search_fts MATCH '"' || replace(t.term, '"', '""') || '"')
"""
TRIGRAMS_FROM: Final = """
SELECT t.term FROM search_trigrams AS t
 WHERE t.term >= :low
   AND EXISTS (SELECT 1 FROM search_fts WHERE search_fts MATCH '"' || replace(t.term, '"', '""') || '"')
"""
# The items a query names by id: the object's own id (an entity change's '<entity>#<key>' included), and
# for source references their original source id and the message or task id in their locator; the query as typed or
# width-folded (server/reader/fold.py: ＩＮＣ－４８２１ names INC-4821; stored ids are not folded).
IDENTIFIER_ITEMS: Final = """
SELECT i.item_id FROM search_items AS i
 WHERE i.item_id IN (SELECT item_id FROM search_items
                      WHERE object_id IN (:query, :narrow) AND scope_key = :scope_key
                     UNION
                     SELECT s.item_id FROM source_references AS r CROSS JOIN search_items AS s
                         ON s.object_type = 'source_reference' AND s.object_id = r.id AND s.result_key = r.result_id
                      WHERE r.original_source_id IN (:query, :narrow) AND r.scope_key = :scope_key
                     UNION
                     SELECT s.item_id FROM source_references AS r CROSS JOIN search_items AS s
                         ON s.object_type = 'source_reference' AND s.object_id = r.id AND s.result_key = r.result_id
                      WHERE json_extract(r.locator_json, '$.message_id') IN (:query, :narrow)
                        AND r.scope_key = :scope_key
                     UNION
                     SELECT s.item_id FROM source_references AS r CROSS JOIN search_items AS s
                         ON s.object_type = 'source_reference' AND s.object_id = r.id AND s.result_key = r.result_id
                      WHERE json_extract(r.locator_json, '$.task_id') IN (:query, :narrow)
                        AND r.scope_key = :scope_key)
{types}{time}
"""
# A query that is a review result's id (every item shows one) names no object: the result and its first summaries,
# for the query note. A primary-key lookup, then summaries_by_result.
RESULT_BY_ID: Final = """
SELECT r.review_generated_at,
       (SELECT json_group_array(id) FROM (SELECT id FROM summaries
                                           WHERE result_id = r.id AND scope_key = r.scope_key ORDER BY id LIMIT 3))
  FROM results AS r WHERE r.id = :query AND r.scope_key = :scope_key
"""
IDENTIFIER_TYPES: Final = "   AND (i.item_id >> 38) & 15 IN (SELECT value FROM json_each(:codes))"
# One index range, highest ids first: {text} adds the item's texts, {time} the time filter, {not_ids} leaves
# out items already listed (identifier and whole-query matches).
RANGE_PAGE: Final = """
SELECT f.rowid{text} FROM search_fts AS f{join}
 WHERE f.search_fts MATCH :expression AND f.rowid BETWEEN :low AND :high{time}{not_ids}
 ORDER BY f.rowid DESC LIMIT :limit
"""
# Every whole-query match, up to a limit, in the index's own order (ascending): a phrase of many trigrams read
# newest first cost about 40 % more (measured at 1M: 106 against 65 ms); the set is sorted afterwards.
WHOLE_SET: Final = """
SELECT f.rowid{text} FROM search_fts AS f{join}
 WHERE f.search_fts MATCH :expression AND f.rowid BETWEEN :low AND :high{time}{not_ids}
 LIMIT :limit
"""
CAPPED_COUNT: Final = """
SELECT count(*) FROM (SELECT 1 FROM search_fts AS f{join}
                       WHERE f.search_fts MATCH :expression AND f.rowid BETWEEN :low AND :high{time}{not_ids}
                       LIMIT :cap)
"""
# How many items of the whole index (every scope) hold a term, up to :cap: a query of several terms is planned
# rarest term first (search_query.plan).
TERM_FREQUENCY: Final = """
SELECT count(*) FROM (SELECT 1 FROM search_fts AS f WHERE f.search_fts MATCH :expression LIMIT :cap)
"""
# Every item of one id range holding a term, as a JSON array of their offsets from :low in the index's own order
# (ascending): read once into a bit set (server/reader/search_sets.py).
TERM_ITEMS: Final = """
SELECT json_group_array(f.rowid - :low) FROM search_fts AS f
 WHERE f.search_fts MATCH :expression AND f.rowid BETWEEN :low AND :high
"""
# A term's newest items in one scope (its first :limit, highest id first): the sample search_sets decides by.
TERM_SAMPLE: Final = """
SELECT f.rowid FROM search_fts AS f WHERE f.search_fts MATCH :expression AND f.rowid BETWEEN :low AND :high
 ORDER BY f.rowid DESC LIMIT :limit
"""
# The items of one id range with {time} (a clause of IN_RANGE or UNKNOWN_TIME), from the narrow index of their
# times (migrations/0007), as one JSON array of their offsets from :low: a time range for term sets
# (server/reader/search_sets.py).
TIMED_ITEMS: Final = """
SELECT json_group_array(i.item_id - :low) FROM search_items AS i INDEXED BY search_items_times
 WHERE i.item_id BETWEEN :low AND :high{time}
"""
# Above every sequence number a scope's items have (migrations/0003): the size of a bit set over them.
SCOPE_SEQUENCES: Final = "SELECT next_seq FROM search_scopes WHERE num = :number"
NOT_IDS: Final = "\n   AND f.rowid NOT IN (SELECT value FROM json_each(:ids))"
JOIN_ITEMS: Final = " CROSS JOIN search_items AS i ON i.item_id = f.rowid"
# Only the item's times (a time filter without texts): read from their narrow index (migrations/0007).
JOIN_TIMES: Final = " CROSS JOIN search_items AS i INDEXED BY search_items_times ON i.item_id = f.rowid"
# The item's time on each basis: in the range (intervals intersect), and unknown.
IN_RANGE: Final[dict[str, str]] = {
    "event_time": "\n   AND i.event_time_start <= :to AND i.event_time_end >= :from",
    "review_generated_at": "\n   AND i.review_generated_at BETWEEN :from AND :to",
    "recorded_at": "\n   AND i.recorded_at BETWEEN :from AND :to",
}
UNKNOWN_TIME: Final[dict[str, str]] = {
    "event_time": "\n   AND i.event_time_start IS NULL",
    "review_generated_at": "\n   AND i.review_generated_at IS NULL",
    "recorded_at": "\n   AND i.recorded_at IS NULL",
}


@dataclass(frozen=True)
class Filters:
    scope_number: int
    type_codes: list[int] | None
    """None: every type; else the requested type codes, highest first."""
    time_basis: str
    time_range: tuple[str, str] | None
    time_months: str | None = None
    """The range's month tokens (search_query.time_match): ANDed to every expression the range filters."""

    def ranges(self, own: bool | None = None) -> list[tuple[int, int]]:
        """The item id ranges to read, highest first: the whole scope (or its own or other rows), one
        range per requested type when the types are filtered."""
        low = self.scope_number << SCOPE_SHIFT
        span = 1 << SCOPE_SHIFT
        if own is not None:
            low |= int(own) << OWN_BIT
            span = 1 << OWN_BIT
        if self.type_codes is None:
            return [(low, low + span - 1)]
        flags = [low] if own is not None else [low | (1 << OWN_BIT), low]
        return [
            (base | (code << TYPE_SHIFT), base | (code << TYPE_SHIFT) | ((1 << TYPE_SHIFT) - 1))
            for base in flags
            for code in self.type_codes
        ]

    def key(self) -> tuple[Any, ...]:
        return (self.scope_number, tuple(self.type_codes or ()), self.time_basis, self.time_range)


def filter_parameters(filters: Filters) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if filters.type_codes is not None:
        params["codes"] = orjson.dumps(filters.type_codes).decode()
    if filters.time_range is not None:
        params["from"], params["to"] = filters.time_range
    return params


def statement(template: str, filters: Filters, leave_out: list[int], *, time: str | None = None, text: str = "") -> str:
    """A range or count query; `time` is the time clause (default: the time range filter, if any)."""
    if time is None:
        time = IN_RANGE[filters.time_basis] if filters.time_range is not None else ""
    return template.format(
        text=text,
        join=JOIN_ITEMS if text else JOIN_TIMES if time else "",
        time=time,
        not_ids=NOT_IDS if leave_out else "",
    )


def parameters(
    filters: Filters, leave_out: list[int], expression: str, bounds: tuple[int, int], *, time: str | None = None
) -> dict[str, Any]:
    """The parameters of a `statement` built with the same `time`. With the range's own clause (the default) the
    statement keeps items in the range, so the index may skip the other months (not when it counts unknown times)."""
    if time is None and filters.time_months is not None:
        expression = f"({expression}) AND ({filters.time_months})"
    params = {"expression": expression, "low": bounds[0], "high": bounds[1]} | filter_parameters(filters)
    if leave_out:
        params["ids"] = orjson.dumps(leave_out).decode()
    return params
