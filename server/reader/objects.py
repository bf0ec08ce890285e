"""Uniform rows for stored objects: the columns every tool reports, read by type with index lookups.

An object row is keyed by (object_type, object_id, result_key); result_key is '' for a current
projection or a story line. A successful leaf's independent description of an object appears as a
'leaf' row under that leaf's result when the result has no row of its own for the object, at the event time
of the object's own row (a leaf stores none).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Final, TypeVar

import aiosqlite

from server.reader.db import IDS, json_ids

Key = tuple[str, str, str]
T = TypeVar("T")
SUMMARY_TITLE_LIMIT: Final = 160
"""Code points of a summary's title (its opening line), as get_context's header cuts every label."""
SENTENCE_END: Final = re.compile(r"[.!?](?=\s)|[。！？]")
"""Where a sentence ends: '.', '!' or '?' before a space, or a full-width stop, exclamation or question mark."""
SUMMARY_TITLE_READ: Final = 1_000
"""Code points of a summary's text read for its title: blank lines before its first line fit, a whole body need not."""

# Each query selects the ObjectRow fields after object_type, in order. A unary + on a scope or owner-type
# test keeps SQLite on the primary key: without ANALYZE statistics it would scan the scope's index instead.
OBJECT_ROWS: Final[dict[str, str]] = {
    "story_line": f"""
SELECT s.id AS object_id, '' AS result_key, s.scope_key, 'current' AS row_kind, s.topic AS title,
       NULL AS event_time_start, NULL AS event_time_end, NULL AS event_time_precision, NULL AS event_time_basis,
       NULL AS review_generated_at, s.recorded_at, NULL AS confirmation_state, s.revision
  FROM story_lines AS s WHERE s.id IN {IDS} AND +s.scope_key = :scope_key""",
    "event": f"""
SELECT e.id, e.result_id, e.scope_key, 'result', e.title, e.event_time_start, e.event_time_end,
       e.event_time_precision, e.event_time_basis, r.review_generated_at, e.recorded_at, e.confirmation_state,
       e.revision
  FROM events AS e JOIN results AS r ON r.id = e.result_id WHERE e.id IN {IDS} AND +e.scope_key = :scope_key""",
    "entity": f"""
SELECT n.id, '', n.scope_key, 'current', n.canonical_label, NULL, NULL, NULL, NULL, NULL, n.updated_at,
       n.confirmation_state, n.revision
  FROM entities AS n WHERE n.id IN {IDS} AND +n.scope_key = :scope_key
UNION ALL
SELECT v.entity_id, v.result_id, v.scope_key, 'result', v.canonical_label, NULL, NULL, NULL, NULL,
       r.review_generated_at, v.recorded_at, v.confirmation_state, v.revision
  FROM entity_revisions AS v JOIN results AS r ON r.id = v.result_id
 WHERE v.entity_id IN {IDS} AND v.scope_key = :scope_key""",
    "entity_change": f"""
SELECT c.entity_id || '#' || c.association_key, c.result_id, c.scope_key, 'result', c.change_type,
       e.event_time_start, e.event_time_end, e.event_time_precision, e.event_time_basis, r.review_generated_at,
       c.recorded_at, c.confirmation_state, c.entity_revision
  FROM entity_changes AS c JOIN results AS r ON r.id = c.result_id
  LEFT JOIN events AS e ON e.id = c.event_id AND e.scope_key = c.scope_key
 WHERE c.entity_id IN {IDS} AND c.scope_key = :scope_key""",
    "relation": f"""
SELECT l.id, l.result_id, l.scope_key, 'result', l.relation_type, NULL, NULL, NULL, NULL,
       r.review_generated_at, l.recorded_at, l.confirmation_state, l.revision
  FROM relations AS l JOIN results AS r ON r.id = l.result_id WHERE l.id IN {IDS} AND l.scope_key = :scope_key""",
    # A summary stores no title: its title is its text's opening line (summary_title), read from its start only.
    "summary": f"""
SELECT m.id, m.result_id, m.scope_key, 'result', substr(m.body, 1, {SUMMARY_TITLE_READ}), m.interval_from,
       m.interval_to,
       CASE WHEN m.interval_from IS NULL THEN NULL ELSE 'interval' END,
       CASE WHEN m.interval_from IS NULL THEN NULL ELSE 'summary_interval' END,
       r.review_generated_at, m.recorded_at, NULL, m.revision
  FROM summaries AS m JOIN results AS r ON r.id = m.result_id WHERE m.id IN {IDS} AND m.scope_key = :scope_key""",
    "source_reference": f"""
SELECT x.id, x.result_id, x.scope_key, 'result', x.title, NULL, NULL, NULL, NULL,
       r.review_generated_at, x.recorded_at, NULL, NULL
  FROM source_references AS x JOIN results AS r ON r.id = x.result_id
 WHERE x.id IN {IDS} AND x.scope_key = :scope_key""",
    # A story's time is its recorded span; it belongs to no review result. The span's precision is its bounds' when
    # they agree (or it has no end), unknown when they differ: get_context's header gives each.
    "story": f"""
SELECT s.id, '', s.scope_key, 'current', s.name, s.started_at, s.ended_at,
       CASE WHEN s.ended_at IS NULL OR s.ended_at_precision IS s.started_at_precision THEN s.started_at_precision END,
       CASE WHEN s.started_at IS NULL THEN NULL ELSE 'story_span' END, NULL, s.recorded_at, s.confirmation_state,
       s.revision
  FROM stories AS s WHERE s.id IN {IDS} AND +s.scope_key = :scope_key""",
    # An experience's time is its first formation: the earliest event time of the events that formed it.
    "experience": f"""
SELECT x.id, '', x.scope_key, 'current', x.statement, f.first_formed, NULL, NULL,
       CASE WHEN f.first_formed IS NULL THEN NULL ELSE 'first_formed_event' END, NULL, x.recorded_at,
       x.confirmation_state, x.revision
  FROM experiences AS x
  LEFT JOIN (SELECT l.experience_id, min(e.event_time_start) AS first_formed
               FROM experience_events AS l JOIN events AS e ON e.id = l.event_id
              WHERE l.experience_id IN {IDS} AND l.role = 'formed' GROUP BY l.experience_id) AS f
    ON f.experience_id = x.id
 WHERE x.id IN {IDS} AND +x.scope_key = :scope_key""",
}
LEAF_ROWS: Final = f"""
SELECT f.object_id, l.result_id, f.scope_key, 'leaf', NULL, NULL, NULL, NULL, NULL,
       r.review_generated_at, l.recorded_at, NULL, NULL
  FROM fact_links AS f JOIN leaves AS l ON l.id = f.owner_id JOIN results AS r ON r.id = l.result_id
 WHERE +f.owner_type = 'leaf' AND f.object_type = :object_type AND f.object_id IN {IDS} AND f.scope_key = :scope_key
"""
SOURCE_REFERENCE_IDS: Final = f"""
SELECT object_id, source_reference_id FROM object_sources
 WHERE object_type = :object_type AND object_id IN {IDS} AND scope_key = :scope_key
 ORDER BY object_id, source_reference_id
"""
# An entity's current evidence (result_key '') and the own lists of its revisions that have one stored, in one
# query: a revision stored empty comes as one row with a NULL reference; one with none stored does not come.
ENTITY_EVIDENCE: Final = f"""
SELECT object_id, '', source_reference_id FROM object_sources
 WHERE object_type = 'entity' AND object_id IN {IDS} AND scope_key = :scope_key
UNION ALL
SELECT v.entity_id, v.result_id, s.source_reference_id
  FROM entity_revisions AS v
  LEFT JOIN entity_revision_sources AS s ON s.entity_id = v.entity_id AND s.result_id = v.result_id
 WHERE v.entity_id IN {IDS} AND v.scope_key = :scope_key AND v.sources_stored = 1
 ORDER BY 1, 2, 3
"""


@dataclass(frozen=True)
class ObjectRow:
    object_type: str
    object_id: str
    result_key: str
    scope_key: str
    row_kind: str
    title: str | None = None
    event_time_start: str | None = None
    event_time_end: str | None = None
    event_time_precision: str | None = None
    event_time_basis: str | None = None
    review_generated_at: str | None = None
    recorded_at: str | None = None
    confirmation_state: str | None = None
    revision: str | None = None

    key: Key = field(init=False, repr=False, compare=False)
    """(object_type, object_id, result_key): built once, as a selection looks its rows up by key many times."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.object_type, self.object_id, self.result_key))

    @property
    def event_interval(self) -> dict[str, str | None] | None:
        """The event time as {start, end, precision, basis}; None when unknown."""
        if self.event_time_start is None:
            return None
        return {
            "start": self.event_time_start,
            "end": self.event_time_end,
            "precision": self.event_time_precision,
            "basis": self.event_time_basis,
        }

    def time_on(self, basis: str) -> tuple[str, str] | None:
        """The (start, end) of this row's time on a basis; None when unknown."""
        if basis == "event_time":
            if self.event_time_start is None:
                return None
            return (self.event_time_start, self.event_time_end or self.event_time_start)
        value = self.review_generated_at if basis == "review_generated_at" else self.recorded_at
        return None if value is None else (value, value)


def summary_title(text: str | None) -> str | None:
    """A summary's title: the first line of its text that is not blank, trimmed; when it is longer than
    SUMMARY_TITLE_LIMIT code points, its sentences that fit, else its first SUMMARY_TITLE_LIMIT - 1 code points and
    '…'. Its own opening words: nothing is made up, and a text with no line (blank, or only blanks within what was
    read) has no title (null)."""
    line = next((line.strip() for line in (text or "").splitlines() if line.strip()), None)
    if line is None or len(line) <= SUMMARY_TITLE_LIMIT:
        return line
    ends = [m.end() for m in SENTENCE_END.finditer(line, 0, SUMMARY_TITLE_LIMIT + 1) if m.end() <= SUMMARY_TITLE_LIMIT]
    if ends:
        return line[: ends[-1]]
    return line[: SUMMARY_TITLE_LIMIT - 1].rstrip() + "…"


def _object_row(object_type: str, values: Iterable[Any]) -> ObjectRow:
    row = ObjectRow(object_type, *values)
    if object_type == "summary" and row.row_kind != "leaf":
        return replace(row, title=summary_title(row.title))
    return row


def split_change_id(change_id: str) -> tuple[str, str] | None:
    """(entity_id, association_key) of an entity change id '<entity_id>#<association_key>'; None without '#'."""
    entity_id, hash_mark, key = change_id.rpartition("#")
    return (entity_id, key) if hash_mark else None


def leaf_splits(object_id: str) -> list[tuple[str, str]]:
    """Candidate (leaf_id, object_id) pairs of a 'leaf:<leaf_id>:<object_id>' id (ids may contain ':'): the id a
    get_context item shows for a leaf's description, which names the object described."""
    if not object_id.startswith("leaf:"):
        return []
    rest = object_id.removeprefix("leaf:")
    return [(rest[:i], rest[i + 1 :]) for i, ch in enumerate(rest) if ch == ":" and 0 < i < len(rest) - 1]


def in_time_range(
    items: Iterable[T], row_of: Callable[[T], ObjectRow], time_range: tuple[str, str] | None, basis: str
) -> tuple[list[T], int]:
    """The items whose row's time on `basis` intersects [from, to], in order, and how many have no such time."""
    if time_range is None:
        return list(items), 0
    kept: list[T] = []
    excluded = 0
    for item in items:
        span = row_of(item).time_on(basis)
        if span is None:
            excluded += 1
        elif span[0] <= time_range[1] and span[1] >= time_range[0]:
            kept.append(item)
    return kept, excluded


async def object_rows(conn: aiosqlite.Connection, scope_key: str, keys: Iterable[Key]) -> dict[Key, ObjectRow]:
    """The rows for these keys in this scope (keys not found are absent). One indexed query per type."""
    wanted: dict[str, set[Key]] = {}
    for key in keys:
        wanted.setdefault(key[0], set()).add(key)
    found: dict[Key, ObjectRow] = {}
    for object_type, type_keys in wanted.items():
        sql = OBJECT_ROWS.get(object_type)
        if sql is None:
            continue
        ids = {k[1] for k in type_keys}
        # An entity change is found through its owner's primary key; the exact key is checked below.
        owner_ids = {p[0] for i in ids if (p := split_change_id(i))} if object_type == "entity_change" else ids
        own: dict[str, ObjectRow] = {}  # the object's own row by id (an entity's current projection), if stored
        for query, lookup, extra in ((sql, owner_ids, {}), (LEAF_ROWS, ids, {"object_type": object_type})):
            if type_keys <= found.keys():  # leaf rows only stand in for objects without a row of their own
                break
            params = {"ids": json_ids(lookup), "scope_key": scope_key} | extra
            for row in await conn.execute_fetchall(query, params):  # one hop to the connection's thread
                item = _object_row(object_type, row)
                if item.row_kind == "leaf":
                    item = _dated_as(item, own.get(item.object_id))
                else:
                    own.setdefault(item.object_id, item)
                if item.key in type_keys and item.key not in found:
                    found[item.key] = item
    return found


def _dated_as(leaf: ObjectRow, described: ObjectRow | None) -> ObjectRow:
    """A leaf's row stores no event time: it takes the event time of the object's own row (None: not stored in this
    scope, so unknown), as get_context's leaf rows do (context_rows.leaf_facts) and as the search index dates the
    leaf's item (migrations/0017). Its review and record times stay its own."""
    if described is None:
        return leaf
    return replace(
        leaf,
        event_time_start=described.event_time_start,
        event_time_end=described.event_time_end,
        event_time_precision=described.event_time_precision,
        event_time_basis=described.event_time_basis,
    )


async def rows_by_id(
    conn: aiosqlite.Connection, scope_key: str, object_type: str, ids: Iterable[str]
) -> dict[str, ObjectRow]:
    """The row of each id stored in this scope (ids not found are absent), for a type with one row per id: what
    object_rows gives for their keys, without knowing their result keys first."""
    if object_type in ("entity", "entity_change"):  # revisions share an entity's id; a change is read by owner
        raise ValueError(f"rows_by_id: a {object_type} id may have several rows")
    params = {"ids": json_ids(ids), "scope_key": scope_key}
    rows = await conn.execute_fetchall(OBJECT_ROWS[object_type], params)  # one hop to the connection's thread
    return {item.object_id: item for item in (_object_row(object_type, row) for row in rows)}


@dataclass(frozen=True)
class Evidence:
    """The evidence of the objects of one type: each object's current list and, for entities, the own lists of
    their revisions that have one stored."""

    objects: dict[str, list[str]]
    revisions: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    """(entity_id, result_id) -> the revision's own stored list; absent when none was stored (unknown)."""

    def of(self, row: ObjectRow) -> tuple[list[str], str]:
        """The evidence a row shows and its `evidence_basis`: 'row' when it is the row's own stored evidence,
        'object' when the row stored none and the object's current evidence stands in (an entity revision
        written without a list; a leaf's description of an object under a result where it has no row)."""
        current = self.objects.get(row.object_id, [])
        if row.row_kind == "leaf":
            return current, "object"
        if row.object_type != "entity" or row.row_kind != "result":
            return current, "row"
        own = self.revisions.get((row.object_id, row.result_key))
        return (current, "object") if own is None else (own, "row")


async def evidence(conn: aiosqlite.Connection, scope_key: str, object_type: str, object_ids: Iterable[str]) -> Evidence:
    """The evidence of these objects and of their rows, in one query (Evidence.of gives a row's)."""
    if object_type != "entity":
        return Evidence(await source_reference_ids(conn, scope_key, object_type, object_ids))
    ids = sorted(set(object_ids))
    objects: dict[str, list[str]] = {object_id: [] for object_id in ids}
    revisions: dict[tuple[str, str], list[str]] = {}
    params = {"ids": json_ids(ids), "scope_key": scope_key}
    for object_id, result_key, reference_id in await conn.execute_fetchall(ENTITY_EVIDENCE, params):
        listed = objects[object_id] if result_key == "" else revisions.setdefault((object_id, result_key), [])
        if reference_id is not None:  # NULL: a revision stored with an empty list
            listed.append(reference_id)
    return Evidence(objects, revisions)


async def source_reference_ids(
    conn: aiosqlite.Connection, scope_key: str, object_type: str, object_ids: Iterable[str]
) -> dict[str, list[str]]:
    """Evidence links per object id; a source reference's own id is its evidence."""
    ids = sorted(set(object_ids))
    if object_type == "source_reference":
        return {object_id: [object_id] for object_id in ids}
    params = {"object_type": object_type, "ids": json_ids(ids), "scope_key": scope_key}
    links: dict[str, list[str]] = {object_id: [] for object_id in ids}
    for object_id, reference_id in await conn.execute_fetchall(SOURCE_REFERENCE_IDS, params):
        links[object_id].append(reference_id)
    return links
