"""Stored rows read back as interchange lines: one object at a time (import) or a whole kind (export).

The importer compares an incoming line with `load_line(...)` of the same key, and the exporter
writes `iter_lines(...)`, so both agree on what a stored object's content is.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from typing import Any, Final

import orjson
from pydantic import TypeAdapter, ValidationError

from server.contracts.base import scope_from_key, scope_key
from server.contracts.interchange import LINE, Coverage, Line
from server.store.errors import StoreError

Key = tuple[str, ...]
COVERAGE: Final[TypeAdapter[Coverage]] = TypeAdapter(Coverage)

# Each kind: a SELECT body, then `_ONE` (by key, for the importer) and `_ALL` (key order, for export).
PROJECTS: Final = "SELECT id, name, status FROM projects"
PROJECT_ONE: Final = PROJECTS + " WHERE id = :k0"
PROJECT_ALL: Final = PROJECTS + " ORDER BY id"

SCOPES: Final = "SELECT scope_key FROM scopes"
SCOPE_ONE: Final = SCOPES + " WHERE scope_key = :k0"
SCOPE_ALL: Final = SCOPES + " ORDER BY scope_key"

RESULTS: Final = (
    "SELECT id, scope_key, stage, status, review_generated_at, recorded_at, revision, coverage_json FROM results"
)
RESULT_ONE: Final = RESULTS + " WHERE id = :k0"
RESULT_ALL: Final = RESULTS + " ORDER BY id"

STORY_LINES: Final = "SELECT id, scope_key, topic, recorded_at, revision FROM story_lines"
STORY_LINE_ONE: Final = STORY_LINES + " WHERE id = :k0"
STORY_LINE_ALL: Final = STORY_LINES + " ORDER BY id"

SOURCES: Final = (
    "SELECT id, source_type, project_id, conversation_id, title, status, current_version, updated_at FROM sources"
)
SOURCE_ONE: Final = SOURCES + " WHERE id = :k0"
SOURCE_ALL: Final = SOURCES + " ORDER BY id"

SOURCE_VERSIONS: Final = "SELECT source_id, version, recorded_at FROM source_versions"
SOURCE_VERSION_ONE: Final = SOURCE_VERSIONS + " WHERE source_id = :k0 AND version = :k1"
SOURCE_VERSION_ALL: Final = SOURCE_VERSIONS + " ORDER BY source_id, version"
CHUNKS_ONE: Final = (
    "SELECT source_id, version, text FROM source_chunks WHERE source_id = :k0 AND version = :k1 ORDER BY start"
)
CHUNKS_ALL: Final = "SELECT source_id, version, text FROM source_chunks ORDER BY source_id, version, start"

SOURCE_REFERENCES: Final = (
    "SELECT id, result_id, source_type, original_source_id, source_version, locator_json, title, fragment,"
    " fragment_start, fragment_end, source_length, availability, source_record_time, recorded_at"
    " FROM source_references"
)
SOURCE_REFERENCE_ONE: Final = SOURCE_REFERENCES + " WHERE id = :k0"
SOURCE_REFERENCE_ALL: Final = SOURCE_REFERENCES + " ORDER BY id"

ENTITIES: Final = (
    "SELECT id, story_line_id, entity_type, canonical_label, description, confirmation_state, decision_status,"
    " work_status, updated_at, revision FROM entities"
)
ENTITY_ONE: Final = ENTITIES + " WHERE id = :k0"
ENTITY_ALL: Final = ENTITIES + " ORDER BY id"

ENTITY_REVISIONS: Final = (
    "SELECT entity_id, result_id, revision, canonical_label, description, confirmation_state, recorded_at"
    " FROM entity_revisions"
)
ENTITY_REVISION_ONE: Final = ENTITY_REVISIONS + " WHERE entity_id = :k0 AND result_id = :k1"
ENTITY_REVISION_ALL: Final = ENTITY_REVISIONS + " ORDER BY entity_id, result_id"

EVENTS: Final = (
    "SELECT id, result_id, story_line_id, event_type, title, description, event_time_start, event_time_end,"
    " event_time_precision, event_time_basis, recorded_at, confirmation_state, revision FROM events"
)
EVENT_ONE: Final = EVENTS + " WHERE id = :k0"
EVENT_ALL: Final = EVENTS + " ORDER BY id"
EVENT_ENTITIES_ONE: Final = "SELECT event_id, entity_id FROM event_entities WHERE event_id = :k0 ORDER BY entity_id"
EVENT_ENTITIES_ALL: Final = "SELECT event_id, entity_id FROM event_entities ORDER BY event_id, entity_id"

ENTITY_CHANGES: Final = (
    "SELECT entity_id, association_key, result_id, event_id, change_type, description, entity_revision,"
    " applicable_from, applicable_to, confirmation_state, recorded_at FROM entity_changes"
)
ENTITY_CHANGE_ONE: Final = ENTITY_CHANGES + " WHERE entity_id = :k0 AND association_key = :k1"
ENTITY_CHANGE_ALL: Final = ENTITY_CHANGES + " ORDER BY entity_id, association_key"

RELATIONS: Final = (
    "SELECT id, result_id, from_type, from_id, to_type, to_id, relation_type, reason, confirmation_state,"
    " recorded_at, revision FROM relations"
)
RELATION_ONE: Final = RELATIONS + " WHERE id = :k0"
RELATION_ALL: Final = RELATIONS + " ORDER BY id"

SUMMARIES: Final = (
    "SELECT id, result_id, interval_from, interval_to, body, open_items, recorded_at, revision FROM summaries"
)
SUMMARY_ONE: Final = SUMMARIES + " WHERE id = :k0"
SUMMARY_ALL: Final = SUMMARIES + " ORDER BY id"
SUMMARY_FACTS_ONE: Final = (
    "SELECT owner_id, object_type, object_id FROM fact_links"
    " WHERE owner_type = 'summary' AND owner_id = :k0 ORDER BY object_type, object_id"
)
SUMMARY_FACTS_ALL: Final = (
    "SELECT owner_id, object_type, object_id FROM fact_links"
    " WHERE owner_type = 'summary' ORDER BY owner_id, object_type, object_id"
)

LEAVES: Final = "SELECT id, result_id, summary, recorded_at FROM leaves"
LEAF_ONE: Final = LEAVES + " WHERE id = :k0"
LEAF_ALL: Final = LEAVES + " ORDER BY id"
LEAF_FACTS_ONE: Final = (
    "SELECT owner_id, object_type, object_id, description FROM fact_links"
    " WHERE owner_type = 'leaf' AND owner_id = :k0 ORDER BY object_type, object_id"
)
LEAF_FACTS_ALL: Final = (
    "SELECT owner_id, object_type, object_id, description FROM fact_links"
    " WHERE owner_type = 'leaf' ORDER BY owner_id, object_type, object_id"
)

STORIES: Final = (
    "SELECT id, scope_key, level, parent_story_id, name, description, state, state_event_id, started_at, ended_at,"
    " confirmation_state, recorded_at, revision FROM stories"
)
STORY_ONE: Final = STORIES + " WHERE id = :k0"
STORY_ALL: Final = STORIES + " ORDER BY id"

STORY_EVENTS: Final = "SELECT story_id, event_id, is_primary, user_set FROM story_events"
STORY_EVENT_ONE: Final = STORY_EVENTS + " WHERE story_id = :k0 AND event_id = :k1"
STORY_EVENT_ALL: Final = STORY_EVENTS + " ORDER BY story_id, event_id"

EXPERIENCES: Final = (
    "SELECT id, scope_key, statement, conditions, boundaries, confirmation_state, recorded_at, revision"
    " FROM experiences"
)
EXPERIENCE_ONE: Final = EXPERIENCES + " WHERE id = :k0"
EXPERIENCE_ALL: Final = EXPERIENCES + " ORDER BY id"

EXPERIENCE_EVENTS: Final = "SELECT experience_id, event_id, role, note FROM experience_events"
EXPERIENCE_EVENT_ONE: Final = EXPERIENCE_EVENTS + " WHERE experience_id = :k0 AND event_id = :k1 AND role = :k2"
EXPERIENCE_EVENT_ALL: Final = EXPERIENCE_EVENTS + " ORDER BY experience_id, event_id, role"

MEMORY_ITEMS: Final = "SELECT id, project_id, memory_type, body, confirmation_state, updated_at FROM memory_items"
MEMORY_ITEM_ONE: Final = MEMORY_ITEMS + " WHERE id = :k0"
MEMORY_ITEM_ALL: Final = MEMORY_ITEMS + " ORDER BY id"

# Evidence links of objects addressed by one id. The owner type is a fixed word from this module.
OBJECT_SOURCES_ONE: Final = (
    "SELECT object_id, source_reference_id FROM object_sources"
    " WHERE object_type = :object_type AND object_id = :k0 ORDER BY source_reference_id"
)
OBJECT_SOURCES_ALL: Final = (
    "SELECT object_id, source_reference_id FROM object_sources"
    " WHERE object_type = :object_type ORDER BY object_id, source_reference_id"
)
# Entity changes are addressed as '<entity_id>#<association_key>'; joining keeps export in their key order.
CHANGE_SOURCES_ONE: Final = (
    "SELECT :k0 AS entity_id, :k1 AS association_key, source_reference_id FROM object_sources"
    " WHERE object_type = 'entity_change' AND object_id = :k0 || '#' || :k1 ORDER BY source_reference_id"
)
CHANGE_SOURCES_ALL: Final = (
    "SELECT c.entity_id, c.association_key, s.source_reference_id FROM entity_changes AS c"
    " JOIN object_sources AS s"
    " ON s.object_type = 'entity_change' AND s.object_id = c.entity_id || '#' || c.association_key"
    " ORDER BY c.entity_id, c.association_key, s.source_reference_id"
)

Row = sqlite3.Row
Build = Callable[[Row, list[list[Row]]], dict[str, Any]]


class _Kind:
    """How one kind is read: its queries, key width, child queries and row-to-line mapping."""

    def __init__(
        self,
        one: str,
        every: str,
        width: int,
        build: Build,
        children: tuple[tuple[str, str, dict[str, str]], ...] = (),
    ) -> None:
        self.one = one
        self.every = every
        self.width = width
        self.build = build
        self.children = children  # (one-query, all-query, extra params); child rows start with the key


def _project(row: Row, _: list[list[Row]]) -> dict[str, Any]:
    return {"kind": "project", "id": row["id"], "name": row["name"], "status": row["status"]}


def _scope(row: Row, _: list[list[Row]]) -> dict[str, Any]:
    return {"kind": "scope", "scope": scope_from_key(row["scope_key"])}


def _result(row: Row, _: list[list[Row]]) -> dict[str, Any]:
    coverage = row["coverage_json"]
    return {
        "kind": "result",
        "id": row["id"],
        "scope": scope_from_key(row["scope_key"]),
        "stage": row["stage"],
        "status": row["status"],
        "review_generated_at": row["review_generated_at"],
        "recorded_at": row["recorded_at"],
        "revision": row["revision"],
        "coverage": None if coverage is None else COVERAGE.validate_json(coverage),
    }


def _story_line(row: Row, _: list[list[Row]]) -> dict[str, Any]:
    return {
        "kind": "story_line",
        "id": row["id"],
        "scope": scope_from_key(row["scope_key"]),
        **_plain(row, "topic", "recorded_at", "revision"),
    }


def _source(row: Row, _: list[list[Row]]) -> dict[str, Any]:
    fields = ("id", "source_type", "project_id", "conversation_id", "title", "status", "current_version", "updated_at")
    return {"kind": "source", **_plain(row, *fields)}


def _source_version(row: Row, children: list[list[Row]]) -> dict[str, Any]:
    text = "".join(chunk["text"] for chunk in children[0])
    return {"kind": "source_version", **_plain(row, "source_id", "version", "recorded_at"), "text": text}


def _source_reference(row: Row, _: list[list[Row]]) -> dict[str, Any]:
    fields = ("id", "result_id", "source_type", "original_source_id", "source_version", "title")
    locator = row["locator_json"]
    return {
        "kind": "source_reference",
        **_plain(row, *fields),
        "locator": None if locator is None else orjson.loads(locator),
        "fragment": {"text": row["fragment"], "start": row["fragment_start"], "end": row["fragment_end"]},
        **_plain(row, "source_length", "availability", "source_record_time", "recorded_at"),
    }


def _entity(row: Row, children: list[list[Row]]) -> dict[str, Any]:
    fields = (
        "id",
        "story_line_id",
        "entity_type",
        "canonical_label",
        "description",
        "confirmation_state",
        "decision_status",
        "work_status",
        "updated_at",
        "revision",
    )
    return {"kind": "entity", **_plain(row, *fields), "source_reference_ids": _column(children[0], -1)}


def _entity_revision(row: Row, _: list[list[Row]]) -> dict[str, Any]:
    fields = ("entity_id", "result_id", "revision", "canonical_label", "description", "confirmation_state")
    return {"kind": "entity_revision", **_plain(row, *fields, "recorded_at")}


def _event(row: Row, children: list[list[Row]]) -> dict[str, Any]:
    start = row["event_time_start"]
    time = None
    if start is not None:
        time = {
            "start": start,
            "end": row["event_time_end"],
            "precision": row["event_time_precision"],
            "basis": row["event_time_basis"],
        }
    return {
        "kind": "event",
        **_plain(row, "id", "result_id", "story_line_id", "event_type", "title", "description"),
        "event_time": time,
        **_plain(row, "recorded_at", "confirmation_state", "revision"),
        "entity_ids": _column(children[0], -1),
        "source_reference_ids": _column(children[1], -1),
    }


def _entity_change(row: Row, children: list[list[Row]]) -> dict[str, Any]:
    fields = (
        "entity_id",
        "association_key",
        "result_id",
        "event_id",
        "change_type",
        "description",
        "entity_revision",
        "applicable_from",
        "applicable_to",
        "confirmation_state",
        "recorded_at",
    )
    return {"kind": "entity_change", **_plain(row, *fields), "source_reference_ids": _column(children[0], -1)}


def _relation(row: Row, children: list[list[Row]]) -> dict[str, Any]:
    return {
        "kind": "relation",
        **_plain(row, "id", "result_id"),
        "from_ref": {"type": row["from_type"], "id": row["from_id"]},
        "to_ref": {"type": row["to_type"], "id": row["to_id"]},
        **_plain(row, "relation_type", "reason", "confirmation_state", "recorded_at", "revision"),
        "source_reference_ids": _column(children[0], -1),
    }


def _summary(row: Row, children: list[list[Row]]) -> dict[str, Any]:
    bounds = {"from": row["interval_from"], "to": row["interval_to"]}
    interval = {name: value for name, value in bounds.items() if value is not None}
    return {
        "kind": "summary",
        **_plain(row, "id", "result_id"),
        "interval": interval or None,
        "body": row["body"],
        "open_items": orjson.loads(row["open_items"]),
        **_plain(row, "recorded_at", "revision"),
        "fact_refs": [{"type": fact["object_type"], "id": fact["object_id"]} for fact in children[0]],
        "source_reference_ids": _column(children[1], -1),
    }


def _leaf(row: Row, children: list[list[Row]]) -> dict[str, Any]:
    facts = [
        {"object_ref": {"type": fact["object_type"], "id": fact["object_id"]}, "description": fact["description"]}
        for fact in children[0]
    ]
    return {"kind": "leaf", **_plain(row, "id", "result_id", "summary", "recorded_at"), "facts": facts}


def _story(row: Row, _: list[list[Row]]) -> dict[str, Any]:
    return {
        "kind": "story",
        **_plain(row, "id", "level"),
        "scope": scope_from_key(row["scope_key"]),
        **_plain(row, "parent_story_id", "name", "description", "state", "state_event_id", "started_at", "ended_at"),
        **_plain(row, "confirmation_state", "recorded_at", "revision"),
    }


def _story_event(row: Row, _: list[list[Row]]) -> dict[str, Any]:
    return {
        "kind": "story_event",
        **_plain(row, "story_id", "event_id"),
        "primary": bool(row["is_primary"]),
        "user_set": bool(row["user_set"]),
    }


def _experience(row: Row, _: list[list[Row]]) -> dict[str, Any]:
    return {
        "kind": "experience",
        "id": row["id"],
        "scope": scope_from_key(row["scope_key"]),
        **_plain(row, "statement", "conditions", "boundaries", "confirmation_state", "recorded_at", "revision"),
    }


def _experience_event(row: Row, _: list[list[Row]]) -> dict[str, Any]:
    return {"kind": "experience_event", **_plain(row, "experience_id", "event_id", "role", "note")}


def _memory_item(row: Row, _: list[list[Row]]) -> dict[str, Any]:
    fields = ("id", "project_id", "memory_type", "body", "confirmation_state", "updated_at")
    return {"kind": "memory_item", **_plain(row, *fields)}


def _plain(row: Row, *names: str) -> dict[str, Any]:
    return {name: row[name] for name in names}


def _column(rows: list[Row], index: int) -> list[Any]:
    return [row[index] for row in rows]


def _sources_of(object_type: str) -> tuple[str, str, dict[str, str]]:
    return (OBJECT_SOURCES_ONE, OBJECT_SOURCES_ALL, {"object_type": object_type})


KINDS: Final[dict[str, _Kind]] = {
    "project": _Kind(PROJECT_ONE, PROJECT_ALL, 1, _project),
    "scope": _Kind(SCOPE_ONE, SCOPE_ALL, 1, _scope),
    "result": _Kind(RESULT_ONE, RESULT_ALL, 1, _result),
    "story_line": _Kind(STORY_LINE_ONE, STORY_LINE_ALL, 1, _story_line),
    "source": _Kind(SOURCE_ONE, SOURCE_ALL, 1, _source),
    "source_version": _Kind(
        SOURCE_VERSION_ONE, SOURCE_VERSION_ALL, 2, _source_version, ((CHUNKS_ONE, CHUNKS_ALL, {}),)
    ),
    "source_reference": _Kind(SOURCE_REFERENCE_ONE, SOURCE_REFERENCE_ALL, 1, _source_reference),
    "entity": _Kind(ENTITY_ONE, ENTITY_ALL, 1, _entity, (_sources_of("entity"),)),
    "entity_revision": _Kind(ENTITY_REVISION_ONE, ENTITY_REVISION_ALL, 2, _entity_revision),
    "event": _Kind(
        EVENT_ONE, EVENT_ALL, 1, _event, ((EVENT_ENTITIES_ONE, EVENT_ENTITIES_ALL, {}), _sources_of("event"))
    ),
    "entity_change": _Kind(
        ENTITY_CHANGE_ONE, ENTITY_CHANGE_ALL, 2, _entity_change, ((CHANGE_SOURCES_ONE, CHANGE_SOURCES_ALL, {}),)
    ),
    "relation": _Kind(RELATION_ONE, RELATION_ALL, 1, _relation, (_sources_of("relation"),)),
    "summary": _Kind(
        SUMMARY_ONE,
        SUMMARY_ALL,
        1,
        _summary,
        ((SUMMARY_FACTS_ONE, SUMMARY_FACTS_ALL, {}), _sources_of("summary")),
    ),
    "leaf": _Kind(LEAF_ONE, LEAF_ALL, 1, _leaf, ((LEAF_FACTS_ONE, LEAF_FACTS_ALL, {}),)),
    "story": _Kind(STORY_ONE, STORY_ALL, 1, _story),
    "story_event": _Kind(STORY_EVENT_ONE, STORY_EVENT_ALL, 2, _story_event),
    "experience": _Kind(EXPERIENCE_ONE, EXPERIENCE_ALL, 1, _experience),
    "experience_event": _Kind(EXPERIENCE_EVENT_ONE, EXPERIENCE_EVENT_ALL, 3, _experience_event),
    "memory_item": _Kind(MEMORY_ITEM_ONE, MEMORY_ITEM_ALL, 1, _memory_item),
}


def _line(kind: str, row: Row, children: list[list[Row]]) -> Line:
    spec = KINDS[kind]
    try:
        return LINE.validate_python(spec.build(row, children))
    except ValidationError as exc:
        key = "/".join(str(row[i]) for i in range(spec.width))
        raise StoreError(f"stored {kind} {key!r} is not a valid interchange line: {exc.errors()[0]['msg']}") from None


def load_line(conn: sqlite3.Connection, kind: str, key: Key) -> Line | None:
    """The stored object with this key as its interchange line, or None when there is none."""
    spec = KINDS[kind]
    params = {f"k{i}": part for i, part in enumerate(key)}
    row = conn.execute(spec.one, params).fetchone()
    if row is None:
        return None
    children = [conn.execute(one, params | extra).fetchall() for one, _, extra in spec.children]
    return _line(kind, row, children)


def iter_lines(conn: sqlite3.Connection, kind: str) -> Iterator[Line]:
    """Every stored object of one kind in key order, children merged in without a query per object."""
    spec = KINDS[kind]
    streams = [_Children(conn.execute(every, extra), spec.width) for _, every, extra in spec.children]
    for row in conn.execute(spec.every):
        key = tuple(row[i] for i in range(spec.width))
        yield _line(kind, row, [stream.take(key) for stream in streams])


class _Children:
    """Child rows sorted by the same key as their parents; `take` hands out one parent's rows."""

    def __init__(self, rows: Iterator[Row], width: int) -> None:
        self._rows = rows
        self._width = width
        self._next: Row | None = next(rows, None)

    def take(self, key: tuple[Any, ...]) -> list[Row]:
        taken: list[Row] = []
        # Python orders str by code point, SQLite's BINARY collation by UTF-8 bytes: the same order.
        while self._next is not None and (child := tuple(self._next[: self._width])) <= key:
            if child == key:
                taken.append(self._next)
            self._next = next(self._rows, None)
        return taken


def line_key(line: Line) -> Key:
    """The stored key of a line: its id, or the columns that identify a keyless record."""
    match line.kind:
        case "scope":
            return (scope_key(line.scope),)
        case "source_version":
            return (line.source_id, line.version)
        case "entity_revision":
            return (line.entity_id, line.result_id)
        case "entity_change":
            return (line.entity_id, line.association_key)
        case "story_event":
            return (line.story_id, line.event_id)
        case "experience_event":
            return (line.experience_id, line.event_id, line.role)
        case _:
            return (line.id,)
