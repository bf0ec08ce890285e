"""What get_context returns for one object in one exact scope, in a stable order, cut into fragment pages.

Selection (every query is bound to the resolved scope's key, so nothing of another scope is read):
- target rows: the current projection, each result's entity revision, and each successful leaf's
  independent description (its own item, id 'leaf:<leaf_id>:<object_id>'); none hides another;
- its direct neighbourhood: relations touching it (and, for a relation, its ends), the objects at
  their other ends when those are stored in the scope, entity changes and events (through
  event_entities and the changes' events), summaries that list it, and the saved source references
  behind all of these;
- a story line takes its entities and events as the neighbourhood, with their changes and relations.

`current` orders by role (target, relation, related, evolution, summary, evidence) then type, stable
id and result id; `timeline` by event time, then type, stable id and result id, with every object of
unknown event time after the dated ones. Pages are keyset positions: (sort key, code-point offset).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import aiosqlite
import orjson

from server.contracts.base import ObjectRef, scope_from_key
from server.contracts.common import Grant
from server.contracts.context import (
    TIME_FILTER_NOTE,
    Claim,
    Completion,
    Conflict,
    Gap,
    Header,
    OpenItem,
    RelationEnd,
    StoredRelation,
    TaskEvidence,
)
from server.contracts.errors import StoryGraphError, invalid_cursor
from server.reader.objects import ObjectRow, source_reference_ids
from server.reader.scope import check_readable

_IDS: Final = "(SELECT value FROM json_each(:ids))"

# --- Where an object is stored (any scope): for object_not_found vs scope_mismatch. -------------------------
LOCATE: Final[dict[str, str]] = {
    "story_line": "SELECT scope_key FROM story_lines WHERE id = :id",
    "event": "SELECT scope_key FROM events WHERE id = :id",
    "entity": "SELECT scope_key FROM entities WHERE id = :id",
    "relation": "SELECT scope_key FROM relations WHERE id = :id",
    "summary": "SELECT scope_key FROM summaries WHERE id = :id",
    "source_reference": "SELECT scope_key FROM source_references WHERE id = :id",
    "entity_change": "SELECT scope_key FROM entity_changes WHERE entity_id = :entity_id AND association_key = :key",
}
LOCATE_LEAF_FACT: Final = """
SELECT scope_key FROM fact_links
 WHERE owner_type = 'leaf' AND owner_id = :leaf_id AND object_type = :object_type AND object_id = :object_id
"""

# --- Rows, each with everything its content and its item fields need. -----------------------------------------
STORY_LINES_BY_ID: Final = f"""
SELECT id, scope_key, topic, recorded_at, revision FROM story_lines WHERE id IN {_IDS} AND scope_key = :scope_key
"""
ENTITIES_BY_ID: Final = f"""
SELECT id, story_line_id, entity_type, canonical_label, description, confirmation_state, decision_status,
       work_status, updated_at, revision
  FROM entities WHERE id IN {_IDS} AND scope_key = :scope_key
"""
ENTITY_REVISIONS_OF: Final = """
SELECT v.entity_id, v.result_id, v.revision, v.canonical_label, v.description, v.confirmation_state, v.recorded_at,
       r.review_generated_at
  FROM entity_revisions AS v JOIN results AS r ON r.id = v.result_id
 WHERE v.entity_id = :entity_id AND v.scope_key = :scope_key
"""
LEAF_FACTS_OF: Final = """
SELECT f.owner_id, l.result_id, f.object_type, f.object_id, f.description, l.recorded_at, r.review_generated_at
  FROM fact_links AS f JOIN leaves AS l ON l.id = f.owner_id JOIN results AS r ON r.id = l.result_id
 WHERE f.owner_type = 'leaf' AND f.object_type = :object_type AND f.object_id = :object_id
   AND f.scope_key = :scope_key AND l.scope_key = :scope_key
"""
_EVENT_COLUMNS: Final = """
SELECT e.id, e.result_id, e.story_line_id, e.event_type, e.title, e.description, e.event_time_start,
       e.event_time_end, e.event_time_precision, e.event_time_basis, e.recorded_at, e.confirmation_state,
       e.revision, r.review_generated_at
  FROM events AS e JOIN results AS r ON r.id = e.result_id"""
EVENTS_BY_ID: Final = _EVENT_COLUMNS + f" WHERE e.id IN {_IDS} AND e.scope_key = :scope_key"
EVENT_ENTITY_IDS: Final = f"""
SELECT event_id, entity_id FROM event_entities WHERE event_id IN {_IDS} ORDER BY event_id, entity_id
"""
EVENT_IDS_OF_ENTITIES: Final = f"""
SELECT DISTINCT event_id FROM event_entities WHERE entity_id IN {_IDS} AND scope_key = :scope_key
"""
ENTITY_IDS_OF_EVENTS: Final = f"""
SELECT DISTINCT entity_id FROM event_entities WHERE event_id IN {_IDS} AND scope_key = :scope_key
"""
_CHANGE_COLUMNS: Final = """
SELECT c.entity_id, c.association_key, c.result_id, c.event_id, c.change_type, c.description, c.entity_revision,
       c.applicable_from, c.applicable_to, c.confirmation_state, c.recorded_at, r.review_generated_at,
       e.event_time_start, e.event_time_end, e.event_time_precision, e.event_time_basis
  FROM entity_changes AS c JOIN results AS r ON r.id = c.result_id
  LEFT JOIN events AS e ON e.id = c.event_id AND e.scope_key = c.scope_key"""
CHANGES_OF_ENTITIES: Final = _CHANGE_COLUMNS + f" WHERE c.entity_id IN {_IDS} AND c.scope_key = :scope_key"
CHANGES_OF_EVENTS: Final = _CHANGE_COLUMNS + f" WHERE c.event_id IN {_IDS} AND c.scope_key = :scope_key"
_RELATION_COLUMNS: Final = """
SELECT l.id, l.result_id, l.from_type, l.from_id, l.to_type, l.to_id, l.relation_type, l.reason,
       l.confirmation_state, l.recorded_at, l.revision, r.review_generated_at
  FROM relations AS l JOIN results AS r ON r.id = l.result_id"""
RELATIONS_BY_ID: Final = _RELATION_COLUMNS + f" WHERE l.id IN {_IDS} AND l.scope_key = :scope_key"
RELATIONS_TOUCHING: Final = f"""
{_RELATION_COLUMNS} WHERE l.from_type = :object_type AND l.from_id IN {_IDS} AND l.scope_key = :scope_key
UNION
{_RELATION_COLUMNS} WHERE l.to_type = :object_type AND l.to_id IN {_IDS} AND l.scope_key = :scope_key
"""
SUMMARIES_BY_ID: Final = f"""
SELECT m.id, m.result_id, m.interval_from, m.interval_to, m.body, m.open_items, m.recorded_at, m.revision,
       r.review_generated_at
  FROM summaries AS m JOIN results AS r ON r.id = m.result_id WHERE m.id IN {_IDS} AND m.scope_key = :scope_key
"""
SUMMARY_FACT_REFS: Final = f"""
SELECT owner_id, object_type, object_id FROM fact_links
 WHERE owner_type = 'summary' AND owner_id IN {_IDS} ORDER BY owner_id, object_type, object_id
"""
SUMMARY_IDS_LISTING: Final = f"""
SELECT DISTINCT owner_id FROM fact_links
 WHERE owner_type = 'summary' AND object_type = :object_type AND object_id IN {_IDS} AND scope_key = :scope_key
"""
SOURCE_REFERENCES_BY_ID: Final = f"""
SELECT x.id, x.result_id, x.source_type, x.original_source_id, x.source_version, x.title, x.locator_json,
       x.fragment, x.fragment_start, x.fragment_end, x.source_length, x.availability, x.source_record_time,
       x.recorded_at, r.review_generated_at
  FROM source_references AS x JOIN results AS r ON r.id = x.result_id
 WHERE x.id IN {_IDS} AND x.scope_key = :scope_key
"""
OBJECTS_BACKED_BY: Final = """
SELECT object_type, object_id FROM object_sources
 WHERE source_reference_id = :source_reference_id AND scope_key = :scope_key ORDER BY object_type, object_id
"""
ENTITY_IDS_OF_STORY_LINE: Final = "SELECT id FROM entities WHERE story_line_id = :id AND scope_key = :scope_key"
EVENT_IDS_OF_STORY_LINE: Final = "SELECT id FROM events WHERE story_line_id = :id AND scope_key = :scope_key"
# Background: Global memory items and those of the scope's own projects.
MEMORY_ITEMS_FOR: Final = f"""
SELECT id, project_id, memory_type, body, confirmation_state, updated_at FROM memory_items
 WHERE project_id IS NULL OR project_id IN {_IDS} ORDER BY id
"""

ROLE_ORDER: Final[dict[str, int]] = {
    "target": 0,
    "relation": 1,
    "related": 2,
    "evolution": 3,
    "summary": 4,
    "evidence": 5,
}
BACKGROUND_SECTION: Final = 6
ROW_KIND_ORDER: Final[dict[str, int]] = {"current": 0, "result": 1, "leaf": 2}
CONFLICT_TYPES: Final = frozenset({"contrasts", "contradicts"})
GAP_REFS: Final = 10

Ref = tuple[str, str]
SortKey = tuple[int, str, int, str, str, str]


@dataclass
class Unit:
    """One stored graph object row: item fields, content data and how it relates to the target."""

    row: ObjectRow
    data: dict[str, Any]
    source_ids: list[str]
    label: str | None
    role: str = "target"
    describes: Ref | None = None
    leaf_id: str | None = None
    ends: tuple[Ref, Ref] | None = None
    """For a relation: (from, to)."""
    relation_type: str | None = None
    ends_in_scope: tuple[bool, bool] = (True, True)

    @property
    def ref(self) -> Ref:
        return (self.row.object_type, self.row.object_id)

    @property
    def key(self) -> tuple[str, str, str]:
        return self.row.key


@dataclass(frozen=True)
class Memory:
    memory_id: str
    project_id: str | None
    memory_type: str
    confirmation_state: str
    updated_at: str
    data: dict[str, Any]


@dataclass(frozen=True)
class Piece:
    """One object of the page stream: its sort key and its whole content JSON text."""

    key: SortKey
    text: str
    unit: Unit | Memory


@dataclass(frozen=True)
class Fragment:
    piece: Piece
    start: int
    end: int

    @property
    def text(self) -> str:
        return self.piece.text[self.start : self.end]


@dataclass(frozen=True)
class Window:
    fragments: list[Fragment]
    next_position: tuple[SortKey, int] | None
    limit_reason: str | None


@dataclass
class Selection:
    target: Ref
    target_units: list[Unit]
    """Every row of the target before any time filter (for the header)."""
    units: list[Unit]
    """Every selected row after the time filter."""
    memories: list[Memory]
    pieces: list[Piece]
    unknown_time_excluded: int
    missing_evidence: list[str] = field(default_factory=list)
    """Source reference ids named by selected objects but not stored in this scope."""
    present: dict[Ref, Unit | None] = field(default_factory=dict)
    """Primary rows looked up by ref (None: not stored in this scope)."""


# --- Finding the target -------------------------------------------------------------------------------------------


def _leaf_splits(object_id: str) -> list[tuple[str, str]]:
    """Candidate (leaf_id, object_id) pairs of a 'leaf:<leaf_id>:<object_id>' id (ids may contain ':')."""
    if not object_id.startswith("leaf:"):
        return []
    rest = object_id.removeprefix("leaf:")
    return [(rest[:i], rest[i + 1 :]) for i, ch in enumerate(rest) if ch == ":" and 0 < i < len(rest) - 1]


async def _stored_scopes(conn: aiosqlite.Connection, object_type: str, object_id: str) -> list[str]:
    sql = LOCATE.get(object_type)
    if sql is None:  # story / experience: not modelled in this phase
        return []
    if object_type == "entity_change":
        entity_id, hash_mark, key = object_id.rpartition("#")
        if not hash_mark:
            return []
        params: dict[str, str] = {"entity_id": entity_id, "key": key}
    else:
        params = {"id": object_id}
    async with conn.execute(sql, params) as cur:
        return [row[0] for row in await cur.fetchall()]


async def locate_target(
    conn: aiosqlite.Connection, grant: Grant, scope_key: str, object_type: str, object_id: str
) -> Ref:
    """The object to read in this scope, or object_not_found / scope_mismatch.

    An object stored only in scopes this caller may not read gets exactly the answer of a missing one.
    A leaf id resolves to the object the leaf describes.
    """
    target: Ref = (object_type, object_id)
    scopes = await _stored_scopes(conn, object_type, object_id)
    if not scopes:
        for leaf_id, described in _leaf_splits(object_id):
            params = {"leaf_id": leaf_id, "object_type": object_type, "object_id": described}
            async with conn.execute(LOCATE_LEAF_FACT, params) as cur:
                found = [row[0] for row in await cur.fetchall()]
            if found:
                scopes, target = found, (object_type, described)
                break
    if scope_key in scopes:
        return target
    for other in scopes:
        try:
            await check_readable(conn, grant, scope_from_key(other))
        except StoryGraphError:
            continue
        raise StoryGraphError(
            "scope_mismatch",
            f"{object_type} {object_id!r} is not stored in the requested scope; it is stored in another scope you "
            "may read.",
            field="scope",
            next_step=f"Repeat with scope {orjson.dumps(scope_from_key(other).model_dump()).decode()}, or search "
            "in the requested scope for its own objects.",
        )
    raise StoryGraphError(
        "object_not_found",
        f"no {object_type} with id {object_id!r} is stored in any scope this client may read.",
        field="object_ref",
        next_step="Use an object_ref returned by story_graph_search in this scope (story and experience objects "
        "are not modelled yet).",
    )


# --- Loading rows -------------------------------------------------------------------------------------------------


def _row(
    object_type: str,
    object_id: str,
    result_key: str,
    scope_key: str,
    row_kind: str,
    title: str | None,
    times: Sequence[str | None],
    review_generated_at: str | None,
    recorded_at: str | None,
    confirmation_state: str | None,
    revision: str | None,
) -> ObjectRow:
    start, end, precision, basis = times
    return ObjectRow(
        object_type,
        object_id,
        result_key,
        scope_key,
        row_kind,
        title,
        start,
        end,
        precision,
        basis,
        review_generated_at,
        recorded_at,
        confirmation_state,
        revision,
    )


_NO_TIME: Final = (None, None, None, None)


class _Loader:
    """Row loaders bound to one connection and one scope; primary rows are cached by ref."""

    def __init__(self, conn: aiosqlite.Connection, scope_key: str) -> None:
        self.conn = conn
        self.scope_key = scope_key
        self.primary_cache: dict[Ref, Unit | None] = {}

    async def rows(self, sql: str, **params: Any) -> list[aiosqlite.Row]:
        values = {
            k: (orjson.dumps(sorted(set(v))).decode() if isinstance(v, list | set) else v) for k, v in params.items()
        }
        async with self.conn.execute(sql, values) as cur:
            return list(await cur.fetchall())

    async def sources(self, object_type: str, ids: Iterable[str]) -> dict[str, list[str]]:
        ids = list(ids)
        if not ids:
            return {}
        return await source_reference_ids(self.conn, self.scope_key, object_type, ids)

    async def primary(self, refs: Iterable[Ref]) -> dict[Ref, Unit | None]:
        """The primary row of each ref in this scope (an entity's current projection), or None."""
        wanted: dict[str, set[str]] = {}
        for ref in refs:
            if ref not in self.primary_cache:
                wanted.setdefault(ref[0], set()).add(ref[1])
        for object_type, ids in wanted.items():
            loaded = await self._load(object_type, sorted(ids))
            for object_id in ids:
                self.primary_cache[(object_type, object_id)] = loaded.get(object_id)
        return {ref: self.primary_cache[ref] for ref in refs}

    async def _load(self, object_type: str, ids: list[str]) -> dict[str, Unit]:
        if object_type == "entity":
            return {u.row.object_id: u for u in await self.entities(ids)}
        if object_type == "event":
            return {u.row.object_id: u for u in await self.events(ids)}
        if object_type == "relation":
            return {u.row.object_id: u for u in await self.relations(RELATIONS_BY_ID, ids=ids)}
        if object_type == "summary":
            return {u.row.object_id: u for u in await self.summaries(ids)}
        if object_type == "source_reference":
            return {u.row.object_id: u for u in await self.source_references(ids)}
        if object_type == "story_line":
            return {u.row.object_id: u for u in await self.story_lines(ids)}
        if object_type == "entity_change":
            owners = sorted({i.rpartition("#")[0] for i in ids if "#" in i})
            changes = await self.changes(CHANGES_OF_ENTITIES, ids=owners)
            return {u.row.object_id: u for u in changes if u.row.object_id in ids}
        return {}

    async def story_lines(self, ids: list[str]) -> list[Unit]:
        units = []
        for r in await self.rows(STORY_LINES_BY_ID, ids=ids, scope_key=self.scope_key):
            data = {
                "id": r["id"],
                "scope": scope_from_key(r["scope_key"]).model_dump(),
                "topic": r["topic"],
                "recorded_at": r["recorded_at"],
                "revision": r["revision"],
            }
            row = _row(
                "story_line", r["id"], "", self.scope_key, "current", r["topic"], _NO_TIME, None, r["recorded_at"],
                None, r["revision"],
            )  # fmt: skip
            units.append(Unit(row, data, [], r["topic"]))
        return units

    async def entities(self, ids: list[str]) -> list[Unit]:
        rows = await self.rows(ENTITIES_BY_ID, ids=ids, scope_key=self.scope_key)
        sources = await self.sources("entity", [r["id"] for r in rows])
        units = []
        for r in rows:
            fields = ("id", "story_line_id", "entity_type", "canonical_label", "description", "confirmation_state")
            data = {name: r[name] for name in fields}
            data |= {name: r[name] for name in ("decision_status", "work_status", "updated_at", "revision")}
            data["source_reference_ids"] = sources.get(r["id"], [])
            row = _row(
                "entity", r["id"], "", self.scope_key, "current", r["canonical_label"], _NO_TIME, None,
                r["updated_at"], r["confirmation_state"], r["revision"],
            )  # fmt: skip
            units.append(Unit(row, data, data["source_reference_ids"], r["canonical_label"]))
        return units

    async def entity_revisions(self, entity_id: str) -> list[Unit]:
        units = []
        for r in await self.rows(ENTITY_REVISIONS_OF, entity_id=entity_id, scope_key=self.scope_key):
            fields = ("entity_id", "result_id", "revision", "canonical_label", "description", "confirmation_state")
            data = {name: r[name] for name in (*fields, "recorded_at")}
            row = _row(
                "entity", entity_id, r["result_id"], self.scope_key, "result", r["canonical_label"], _NO_TIME,
                r["review_generated_at"], r["recorded_at"], r["confirmation_state"], r["revision"],
            )  # fmt: skip
            units.append(Unit(row, data, [], r["canonical_label"]))
        return units

    async def leaf_facts(self, object_type: str, object_id: str) -> list[Unit]:
        params = {"object_type": object_type, "object_id": object_id, "scope_key": self.scope_key}
        units = []
        for r in await self.rows(LEAF_FACTS_OF, **params):
            data = {
                "leaf_id": r["owner_id"],
                "result_id": r["result_id"],
                "object_ref": {"type": object_type, "id": object_id},
                "description": r["description"],
            }
            row = _row(
                object_type, f"leaf:{r['owner_id']}:{object_id}", r["result_id"], self.scope_key, "leaf", None,
                _NO_TIME, r["review_generated_at"], r["recorded_at"], None, None,
            )  # fmt: skip
            units.append(Unit(row, data, [], None, describes=(object_type, object_id), leaf_id=r["owner_id"]))
        return units

    async def events(self, ids: list[str]) -> list[Unit]:
        rows = await self.rows(EVENTS_BY_ID, ids=ids, scope_key=self.scope_key)
        found = [r["id"] for r in rows]
        entity_ids: dict[str, list[str]] = {}
        if found:
            for event_id, entity_id in await self.rows(EVENT_ENTITY_IDS, ids=found):
                entity_ids.setdefault(event_id, []).append(entity_id)
        sources = await self.sources("event", found)
        units = []
        for r in rows:
            times = (r["event_time_start"], r["event_time_end"], r["event_time_precision"], r["event_time_basis"])
            data = {
                name: r[name] for name in ("id", "result_id", "story_line_id", "event_type", "title", "description")
            }
            data["event_time"] = (
                None
                if times[0] is None
                else {"start": times[0], "end": times[1], "precision": times[2], "basis": times[3]}
            )
            data |= {name: r[name] for name in ("recorded_at", "confirmation_state", "revision")}
            data["entity_ids"] = entity_ids.get(r["id"], [])
            data["source_reference_ids"] = sources.get(r["id"], [])
            row = _row(
                "event", r["id"], r["result_id"], self.scope_key, "result", r["title"], times,
                r["review_generated_at"], r["recorded_at"], r["confirmation_state"], r["revision"],
            )  # fmt: skip
            units.append(Unit(row, data, data["source_reference_ids"], r["title"]))
        return units

    async def changes(self, sql: str, ids: list[str]) -> list[Unit]:
        rows = await self.rows(sql, ids=ids, scope_key=self.scope_key)
        keys = [f"{r['entity_id']}#{r['association_key']}" for r in rows]
        sources = await self.sources("entity_change", keys)
        units = []
        for key, r in zip(keys, rows, strict=True):
            fields = ("entity_id", "association_key", "result_id", "event_id", "change_type", "description")
            data = {name: r[name] for name in fields}
            for name in ("entity_revision", "applicable_from", "applicable_to", "confirmation_state", "recorded_at"):
                data[name] = r[name]
            data["source_reference_ids"] = sources.get(key, [])
            times = (r["event_time_start"], r["event_time_end"], r["event_time_precision"], r["event_time_basis"])
            row = _row(
                "entity_change", key, r["result_id"], self.scope_key, "result", r["change_type"], times,
                r["review_generated_at"], r["recorded_at"], r["confirmation_state"], r["entity_revision"],
            )  # fmt: skip
            units.append(Unit(row, data, data["source_reference_ids"], r["change_type"]))
        return units

    async def relations(self, sql: str, **params: Any) -> list[Unit]:
        rows = await self.rows(sql, scope_key=self.scope_key, **params)
        sources = await self.sources("relation", [r["id"] for r in rows])
        units = []
        for r in rows:
            from_ref, to_ref = (r["from_type"], r["from_id"]), (r["to_type"], r["to_id"])
            data = {
                "id": r["id"],
                "result_id": r["result_id"],
                "from_ref": {"type": from_ref[0], "id": from_ref[1]},
                "to_ref": {"type": to_ref[0], "id": to_ref[1]},
            }
            data |= {name: r[name] for name in ("relation_type", "reason", "confirmation_state", "recorded_at")}
            data["revision"] = r["revision"]
            data["source_reference_ids"] = sources.get(r["id"], [])
            row = _row(
                "relation", r["id"], r["result_id"], self.scope_key, "result", r["relation_type"], _NO_TIME,
                r["review_generated_at"], r["recorded_at"], r["confirmation_state"], r["revision"],
            )  # fmt: skip
            units.append(
                Unit(
                    row,
                    data,
                    data["source_reference_ids"],
                    r["relation_type"],
                    ends=(from_ref, to_ref),
                    relation_type=r["relation_type"],
                )
            )
        return units

    async def summaries(self, ids: list[str]) -> list[Unit]:
        rows = await self.rows(SUMMARIES_BY_ID, ids=ids, scope_key=self.scope_key)
        found = [r["id"] for r in rows]
        facts: dict[str, list[dict[str, str]]] = {}
        if found:
            for owner_id, object_type, object_id in await self.rows(SUMMARY_FACT_REFS, ids=found):
                facts.setdefault(owner_id, []).append({"type": object_type, "id": object_id})
        sources = await self.sources("summary", found)
        units = []
        for r in rows:
            bounds = {"from": r["interval_from"], "to": r["interval_to"]}
            interval = {name: value for name, value in bounds.items() if value is not None}
            data = {
                "id": r["id"],
                "result_id": r["result_id"],
                "interval": interval or None,
                "body": r["body"],
                "open_items": _json_or_text(r["open_items"]),
                "recorded_at": r["recorded_at"],
                "revision": r["revision"],
                "fact_refs": facts.get(r["id"], []),
                "source_reference_ids": sources.get(r["id"], []),
            }
            # The covered interval, as the search tool reports it.
            times = (
                (r["interval_from"], r["interval_to"], "interval", "summary_interval")
                if r["interval_from"] is not None
                else _NO_TIME
            )
            row = _row(
                "summary", r["id"], r["result_id"], self.scope_key, "result", None, times,
                r["review_generated_at"], r["recorded_at"], None, r["revision"],
            )  # fmt: skip
            units.append(Unit(row, data, data["source_reference_ids"], None))
        return units

    async def source_references(self, ids: list[str]) -> list[Unit]:
        units = []
        for r in await self.rows(SOURCE_REFERENCES_BY_ID, ids=ids, scope_key=self.scope_key):
            fields = ("id", "result_id", "source_type", "original_source_id", "source_version", "title")
            data = {name: r[name] for name in fields}
            data["locator"] = None if r["locator_json"] is None else _json_or_text(r["locator_json"])
            data["fragment"] = {"text": r["fragment"], "start": r["fragment_start"], "end": r["fragment_end"]}
            for name in ("source_length", "availability", "source_record_time", "recorded_at"):
                data[name] = r[name]
            row = _row(
                "source_reference", r["id"], r["result_id"], self.scope_key, "result", r["title"], _NO_TIME,
                r["review_generated_at"], r["recorded_at"], None, None,
            )  # fmt: skip
            units.append(Unit(row, data, [r["id"]], r["title"]))
        return units

    async def column(self, sql: str, **params: Any) -> list[str]:
        return [row[0] for row in await self.rows(sql, scope_key=self.scope_key, **params)]


def _json_or_text(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


# --- Selecting the neighbourhood ----------------------------------------------------------------------------------


class _Selected:
    """Selected rows by (type, id, result key); the first role a row is added with is kept."""

    def __init__(self) -> None:
        self.units: dict[tuple[str, str, str], Unit] = {}

    def add(self, units: Iterable[Unit | None], role: str) -> list[Unit]:
        added = []
        for unit in units:
            if unit is not None and unit.key not in self.units:
                unit.role = role
                self.units[unit.key] = unit
                added.append(unit)
        return added


async def select(
    conn: aiosqlite.Connection,
    scope_key: str,
    project_ids: list[str],
    target: Ref,
    *,
    mode: Literal["current", "timeline"],
    time_range: tuple[str, str] | None,
    time_basis: str,
) -> Selection:
    load = _Loader(conn, scope_key)
    chosen = _Selected()
    object_type, object_id = target

    # The target: every row of it, none hiding another.
    primary = (await load.primary([target]))[target]
    target_units = [primary] if primary is not None else []
    if object_type == "entity":
        target_units.extend(await load.entity_revisions(object_id))
    target_units.extend(await load.leaf_facts(object_type, object_id))
    target_units = list(chosen.add(target_units, "target"))

    # Whose relations, changes, events and summaries count as the neighbourhood.
    anchors: list[Ref] = [target]
    entity_ids: list[str] = [object_id] if object_type == "entity" else []
    event_ids: list[str] = [object_id] if object_type == "event" else []
    if object_type == "story_line":
        members = await load.column(ENTITY_IDS_OF_STORY_LINE, id=object_id)
        chosen.add((await load.primary([("entity", i) for i in members])).values(), "related")
        entity_ids.extend(members)
        anchors.extend(("entity", i) for i in members)
        story_events = await load.column(EVENT_IDS_OF_STORY_LINE, id=object_id)
        chosen.add((await load.primary([("event", i) for i in story_events])).values(), "evolution")
    elif object_type == "event":
        linked = await load.column(ENTITY_IDS_OF_EVENTS, ids=[object_id])
        chosen.add((await load.primary([("entity", i) for i in linked])).values(), "related")
    elif object_type == "entity_change" and primary is not None:
        owner = primary.data["entity_id"]
        chosen.add((await load.primary([("entity", owner)])).values(), "related")
        if primary.data["event_id"] is not None:
            event_ids.append(primary.data["event_id"])
    elif object_type == "summary" and primary is not None:
        refs = [(f["type"], f["id"]) for f in primary.data["fact_refs"]]
        chosen.add((await load.primary(refs)).values(), "related")
    elif object_type == "source_reference":
        backed = await load.rows(OBJECTS_BACKED_BY, source_reference_id=object_id, scope_key=scope_key)
        chosen.add((await load.primary([(t, i) for t, i in backed])).values(), "related")

    # Relations touching the anchors (and a target relation's own ends).
    relations: list[Unit] = []
    by_type: dict[str, list[str]] = {}
    for anchor_type, anchor_id in anchors:
        by_type.setdefault(anchor_type, []).append(anchor_id)
    for anchor_type, ids in sorted(by_type.items()):
        relations.extend(await load.relations(RELATIONS_TOUCHING, object_type=anchor_type, ids=ids))
    relations.sort(key=lambda u: u.row.object_id)
    chosen.add(relations, "relation")
    relation_units = [u for u in chosen.units.values() if u.ends is not None]
    end_refs = sorted({end for u in relation_units if u.ends is not None for end in u.ends})
    present = await load.primary(end_refs)
    for unit in relation_units:
        assert unit.ends is not None
        unit.ends_in_scope = (present[unit.ends[0]] is not None, present[unit.ends[1]] is not None)
    chosen.add((present[end] for end in end_refs), "related")

    # Evolution: entity changes and events.
    if entity_ids:
        chosen.add(await load.changes(CHANGES_OF_ENTITIES, ids=entity_ids), "evolution")
        event_ids.extend(await load.column(EVENT_IDS_OF_ENTITIES, ids=entity_ids))
    if object_type == "event":
        chosen.add(await load.changes(CHANGES_OF_EVENTS, ids=[object_id]), "evolution")
    event_ids.extend(
        u.data["event_id"] for u in chosen.units.values() if u.row.object_type == "entity_change" and u.data["event_id"]
    )
    chosen.add((await load.primary([("event", i) for i in sorted(set(event_ids))])).values(), "evolution")

    # Summaries that list the target (or, for a story line, any of its members).
    listing: list[str] = []
    for anchor_type, ids in sorted(by_type.items()):
        listing.extend(await load.column(SUMMARY_IDS_LISTING, object_type=anchor_type, ids=ids))
    chosen.add((await load.primary([("summary", i) for i in sorted(set(listing))])).values(), "summary")

    # Evidence: the saved source references behind the target, its relations and its evolution. A related
    # object's or a summary's own evidence is one more hop away (its ids are on its item; read it by its ref),
    # except for a story line, whose members are its neighbourhood.
    evidence_roles = {"target", "relation", "evolution"} | ({"related"} if object_type == "story_line" else set())
    wanted = sorted({s for u in chosen.units.values() if u.role in evidence_roles for s in u.source_ids})
    evidence = await load.primary([("source_reference", i) for i in wanted])
    chosen.add(evidence.values(), "evidence")
    missing = [i for i in wanted if evidence[("source_reference", i)] is None]

    units, excluded = _filter(list(chosen.units.values()), time_range, time_basis)
    memories = await _memories(conn, project_ids) if mode == "current" else []
    pieces = sorted(
        [Piece(_sort_key(u, mode), _compact(u.data), u) for u in units]
        + [Piece((BACKGROUND_SECTION, "", 0, "memory_item", m.memory_id, ""), _compact(m.data), m) for m in memories],
        key=lambda p: p.key,
    )
    return Selection(
        target=target,
        target_units=target_units,
        units=units,
        memories=memories,
        pieces=pieces,
        unknown_time_excluded=excluded,
        missing_evidence=missing,
        present=dict(load.primary_cache),
    )


def _filter(units: list[Unit], time_range: tuple[str, str] | None, time_basis: str) -> tuple[list[Unit], int]:
    if time_range is None:
        return units, 0
    kept, excluded = [], 0
    for unit in units:
        span = unit.row.time_on(time_basis)
        if span is None:
            excluded += 1
        elif span[0] <= time_range[1] and span[1] >= time_range[0]:
            kept.append(unit)
    return kept, excluded


async def _memories(conn: aiosqlite.Connection, project_ids: list[str]) -> list[Memory]:
    async with conn.execute(MEMORY_ITEMS_FOR, {"ids": orjson.dumps(sorted(project_ids)).decode()}) as cur:
        rows = await cur.fetchall()
    memories = []
    for r in rows:
        data = {name: r[name] for name in ("id", "project_id", "memory_type", "body", "confirmation_state")}
        data["updated_at"] = r["updated_at"]
        memories.append(
            Memory(r["id"], r["project_id"], r["memory_type"], r["confirmation_state"], r["updated_at"], data)
        )
    return memories


def _compact(data: dict[str, Any]) -> str:
    """The stored data as compact JSON text, non-ASCII kept (what the fragments are cut from)."""
    return orjson.dumps(data).decode()


def _sort_key(unit: Unit, mode: str) -> SortKey:
    row = unit.row
    if mode == "timeline":
        if row.event_time_start is not None:
            return (0, row.event_time_start, 0, row.object_type, row.object_id, row.result_key)
        return (1, "", 0, row.object_type, row.object_id, row.result_key)
    time = ""
    if unit.role == "evolution":  # changes and events read best in event-time order; unknown last
        time = row.event_time_start or "~"
    return (ROLE_ORDER[unit.role], time, ROW_KIND_ORDER[row.row_kind], row.object_type, row.object_id, row.result_key)


# --- Pages --------------------------------------------------------------------------------------------------------


def parse_position(position: dict[str, Any] | None) -> tuple[SortKey, int] | None:
    """The (sort key, code-point offset) a cursor resumes at."""
    if position is None:
        return None
    try:
        section, time, kind, object_type, object_id, result_key = position["at"]
        offset = position["offset"]
        key: SortKey = (int(section), str(time), int(kind), str(object_type), str(object_id), str(result_key))
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(offset)
    except (KeyError, TypeError, ValueError):
        raise invalid_cursor("the cursor position is malformed.") from None
    return key, offset


def position_payload(position: tuple[SortKey, int]) -> dict[str, Any]:
    return {"at": list(position[0]), "offset": position[1]}


def paginate(
    pieces: list[Piece],
    position: tuple[SortKey, int] | None,
    *,
    page_size: int,
    content_page_size: int,
    fits: Callable[[Fragment, bool], bool],
) -> Window:
    """Up to page_size fragments from the position on. A page ends after a fragment that does not finish its
    object (the next page continues inside it), or before a fragment that would not fit the byte budget:
    `fits(fragment, first)` is asked for every fragment and must accept the first of a page."""
    index, offset = 0, 0
    if position is not None:
        keys = [p.key for p in pieces]
        index = bisect.bisect_left(keys, position[0])
        if index >= len(pieces) or pieces[index].key != position[0] or position[1] >= len(pieces[index].text):
            # Same scope revision and request, so the object must be there: this cursor was not issued for it.
            raise invalid_cursor("the cursor position does not name an object of this query.")
        offset = position[1]
    fragments: list[Fragment] = []
    while index < len(pieces):
        piece = pieces[index]
        if len(fragments) == page_size:
            return Window(fragments, (piece.key, offset), "page_size")
        fragment = Fragment(piece, offset, min(offset + content_page_size, len(piece.text)))
        if not fits(fragment, not fragments) and fragments:
            return Window(fragments, (piece.key, offset), "response_budget")
        fragments.append(fragment)
        if fragment.end < len(piece.text):
            return Window(fragments, (piece.key, fragment.end), "content_page_size")
        index, offset = index + 1, 0
    return Window(fragments, None, None)


# --- Views of the selection: the header of `current` and the known gaps ---------------------------------------


LABEL_LIMIT: Final = 160
REASON_LIMIT: Final = 400
DESCRIPTION_LIMIT: Final = 600
HEADER_LIMIT: Final = 10
_DESCRIPTION_FIELD: Final[dict[str, str]] = {
    "entity": "description",
    "event": "description",
    "entity_change": "description",
    "relation": "reason",
    "summary": "body",
    "story_line": "topic",
}


def _excerpt(text: str | None, limit: int) -> tuple[str | None, bool]:
    if text is None:
        return None, False
    return text[:limit], len(text) > limit


def object_ref(ref: Ref) -> ObjectRef:
    return ObjectRef.model_validate({"type": ref[0], "id": ref[1]})


def _description(unit: Unit) -> str | None:
    if unit.row.object_type == "source_reference":
        return str(unit.data["fragment"]["text"])
    name = _DESCRIPTION_FIELD.get(unit.row.object_type)
    value = unit.data.get(name) if name else None
    return value if isinstance(value, str) else None


def _time_order(unit: Unit) -> tuple[str, str, str, str]:
    return (unit.row.event_time_start or "~", unit.row.object_type, unit.row.object_id, unit.row.result_key)


def build_header(sel: Selection, *, time_range_used: bool) -> Header:
    """The compact view of `current`: stored states passed through, unknown where nothing is stored."""
    primary = next((u for u in sel.target_units if u.row.row_kind != "leaf" and u.row.result_key == ""), None)
    primary = primary or next((u for u in sel.target_units if u.row.row_kind != "leaf"), None)
    data = primary.data if primary is not None else {}
    is_entity = sel.target[0] == "entity" and primary is not None
    label, _ = _excerpt(primary.label if primary else None, LABEL_LIMIT)
    description, cut = _excerpt(_description(primary) if primary else None, DESCRIPTION_LIMIT)
    work_status = data.get("work_status") if is_entity else None

    touching = [u for u in sel.units if u.ends is not None and sel.target in u.ends]
    touching.sort(key=lambda u: u.row.object_id)
    relations = [_stored_relation(sel, u) for u in touching]
    conflicts = [
        _conflict(sel, u)
        for u in sorted(sel.units, key=lambda u: u.row.object_id)
        if u.ends is not None and u.relation_type in CONFLICT_TYPES and all(u.ends_in_scope)
    ]
    summaries = sorted(
        (u for u in sel.units if u.row.object_type == "summary" and u.role in ("summary", "target")),
        key=lambda u: (u.row.review_generated_at or "", u.row.object_id),
    )
    open_items = [
        OpenItem(summary_id=u.row.object_id, result_id=u.row.result_key, text=text)
        for u in summaries
        if isinstance(u.data["open_items"], list)
        for text in u.data["open_items"]
        if isinstance(text, str)
    ]
    evolution = sorted((u for u in sel.units if u.role == "evolution"), key=_time_order)
    evidence = [u for u in sel.units if u.row.object_type == "source_reference"]
    results = sorted(
        {(u.row.review_generated_at or "", u.row.result_key) for u in sel.target_units if u.row.result_key}
    )
    tasks = [
        TaskEvidence(
            ref=object_ref(other.ref),
            label=_excerpt(other.label, LABEL_LIMIT)[0],
            work_status=other.data.get("work_status") or "unknown",
            via_relation=u.row.object_id,
            relation_type=u.relation_type or "",
        )
        for u in touching
        if (other := _other_end(sel, u)) is not None
        and other.row.object_type == "entity"
        and other.data.get("entity_type") == "task"
    ]
    return Header(
        object_ref=object_ref(sel.target),
        label=label,
        description=description,
        description_is_excerpt=cut,
        decision_status=(data.get("decision_status") or "unknown") if is_entity else "unknown",
        work_status=work_status or "unknown",
        completion=Completion(
            work_status=work_status or "unknown",
            basis="stored_work_status" if work_status else "none",
            task_records=tasks[:HEADER_LIMIT],
            task_source_reference_ids=sorted(u.row.object_id for u in evidence if u.data.get("source_type") == "task")[
                :HEADER_LIMIT
            ],
        ),
        confirmation_state=(primary.row.confirmation_state if primary else None) or "unknown",
        time_note=TIME_FILTER_NOTE if time_range_used else None,
        open_items=open_items[:HEADER_LIMIT],
        open_item_count=len(open_items),
        relations=relations[:HEADER_LIMIT],
        relation_count=len(relations),
        conflicts=conflicts[:HEADER_LIMIT],
        conflict_count=len(conflicts),
        evolution_refs=[object_ref(u.ref) for u in evolution[:HEADER_LIMIT]],
        evolution_ref_count=len(evolution),
        evidence_ref_count=len(evidence),
        result_ids=[result_id for _, result_id in results],
        background_count=len(sel.memories),
    )


def _other_end(sel: Selection, unit: Unit) -> Unit | None:
    assert unit.ends is not None
    from_ref, to_ref = unit.ends
    other = to_ref if from_ref == sel.target else from_ref
    return sel.present.get(other)


def _stored_relation(sel: Selection, unit: Unit) -> StoredRelation:
    assert unit.ends is not None
    outgoing = unit.ends[0] == sel.target
    other_ref = unit.ends[1] if outgoing else unit.ends[0]
    other = sel.present.get(other_ref)
    reason, cut = _excerpt(str(unit.data["reason"]), REASON_LIMIT)
    return StoredRelation(
        relation_ref=object_ref(unit.ref),
        result_id=unit.row.result_key,
        relation_type=unit.relation_type or "",
        direction="outgoing" if outgoing else "incoming",
        other_end=RelationEnd(ref=object_ref(other_ref), in_scope=other is not None),
        other_label=_excerpt(other.label, LABEL_LIMIT)[0] if other is not None else None,
        reason=reason or "",
        reason_is_excerpt=cut,
        confirmation_state=unit.row.confirmation_state or "unknown",
        source_reference_ids=unit.source_ids,
    )


def _conflict(sel: Selection, unit: Unit) -> Conflict:
    assert unit.ends is not None
    claims = []
    for end in unit.ends:
        other = sel.present.get(end)
        claims.append(
            Claim(
                ref=object_ref(end),
                label=_excerpt(other.label, LABEL_LIMIT)[0] if other else None,
                confirmation_state=(other.row.confirmation_state if other else None) or "unknown",
            )
        )
    reason, cut = _excerpt(str(unit.data["reason"]), REASON_LIMIT)
    return Conflict(
        relation_ref=object_ref(unit.ref),
        result_id=unit.row.result_key,
        relation_type=unit.relation_type or "",
        reason=reason or "",
        reason_is_excerpt=cut,
        claims=claims,
        source_reference_ids=unit.source_ids,
    )


_VERSIONED: Final = frozenset({"story_line", "event", "entity", "entity_change", "relation", "summary"})


def known_gaps(sel: Selection, coverage_status: str) -> list[Gap]:
    """What the saved evidence is known to lack for this object; each gap is reported, never filled."""
    gaps: list[Gap] = []

    def add(kind: str, units_or_refs: Sequence[Ref], detail: str, count: int | None = None) -> None:
        if units_or_refs or count:
            refs = [object_ref(r) for r in list(dict.fromkeys(units_or_refs))[:GAP_REFS]]
            gaps.append(
                Gap.model_validate(
                    {"kind": kind, "count": count if count is not None else len(units_or_refs), "detail": detail,
                     "refs": refs}
                )
            )  # fmt: skip

    undated = [
        u.ref
        for u in sorted(sel.units, key=lambda u: (u.row.object_type, u.row.object_id))
        if u.row.object_type in ("event", "entity_change") and u.row.event_time_start is None
    ]
    add(
        "unknown_event_time",
        undated,
        "Events and entity changes whose event time is unknown: their order relative to dated ones is not known "
        "(timeline lists them apart; no time is filled in).",
    )
    if coverage_status != "complete":
        gaps.append(
            Gap(
                kind="coverage_not_complete",
                count="unknown",
                detail=f"Coverage of this scope is {coverage_status}: the stored reviews may not have processed every "
                "source, so history may be missing here (see coverage).",
                refs=[],
            )
        )
    outside = [u for u in sel.units if u.ends is not None and not all(u.ends_in_scope)]
    add(
        "relation_end_not_in_scope",
        [u.ref for u in outside],
        "Relations with an end that is not stored in this scope (missing or outside it); that end is not read.",
        count=sum(1 for u in outside for inside in u.ends_in_scope if not inside),
    )
    add(
        "evidence_not_in_scope",
        [("source_reference", i) for i in sel.missing_evidence],
        "Source reference ids named by selected objects but not stored in this scope.",
    )
    add(
        "no_reliable_revision",
        [
            u.ref
            for u in sel.units
            if u.row.revision is None and u.row.row_kind != "leaf" and u.row.object_type in _VERSIONED
        ],
        "Objects stored without a reliable revision: object_revision is 'unknown' (updated_at is not a version).",
    )
    add(
        "source_not_available",
        [u.ref for u in sel.units if u.row.object_type == "source_reference" and u.data["availability"] != "available"],
        "Saved source references whose original is no longer available; the saved fragment is still readable.",
    )
    if sel.target[0] == "entity" and not any(u.row.result_key for u in sel.target_units):
        add(
            "no_result_rows",
            [sel.target],
            "No review result holds a revision or leaf description of this entity: only the current projection is "
            "stored, so its history is missing.",
        )
    return gaps
