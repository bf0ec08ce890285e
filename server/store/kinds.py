"""What the importer stores for each kind of line, as data: merge.py turns it into SQL.

A line is staged as one row of `temp.stage_<kind>`: the columns of its real table (same names,
stored form) followed by JSON lists of what goes to child tables (`entity_ids`, evidence, facts,
text chunks). Each kind says its key, the links to check and how its child rows are written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from server.contracts.base import NOT_YET_MODELLED_TYPES, ObjectRef, ProjectsScope, scope_key
from server.contracts.interchange import (
    KIND_ORDER,
    EntityChangeLine,
    EntityLine,
    EntityRevisionLine,
    EventLine,
    LeafLine,
    MemoryItemLine,
    ProjectLine,
    RelationLine,
    ResultLine,
    ScopeLine,
    SourceLine,
    SourceReferenceLine,
    SourceVersionLine,
    StoryLineLine,
    SummaryLine,
)

CHUNK_CODE_POINTS: Final = 4096
"""Source text is stored in chunks of this many code points (see source_chunks in migrations/)."""

Staged = tuple[object, ...]


class Invalid(Exception):
    """A line the contracts accept but the store cannot: a repeated id in a list, a link to an unstored type."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


@dataclass(frozen=True)
class Target:
    """A kind of object a link can name: its table, key column, and whether it belongs to a scope."""

    table: str
    key: str
    scoped: bool


TARGETS: Final[dict[str, Target]] = {
    "project": Target("projects", "id", scoped=False),
    "scope": Target("scopes", "scope_key", scoped=False),
    "result": Target("results", "id", scoped=True),
    "story_line": Target("story_lines", "id", scoped=True),
    "source": Target("sources", "id", scoped=False),
    "entity": Target("entities", "id", scoped=True),
    "event": Target("events", "id", scoped=True),
    "source_reference": Target("source_references", "id", scoped=True),
}


@dataclass(frozen=True)
class Link:
    """A staged column naming other stored objects: they must exist, and be in the row's scope when both have one."""

    column: str
    target: str
    field: str = ""
    """The field path in errors (default: the column)."""
    many: bool = False
    """The column is a JSON list of ids; errors name `field[i]`."""

    @property
    def name(self) -> str:
        return self.field or self.column


@dataclass(frozen=True)
class RefLink:
    """Object refs (type + id), checked once every line is written: they may name any later line.

    `type_sql`/`id_sql` read the ref from the staged row `s` or, for a list, from its item `j`.
    """

    field: str
    type_sql: str
    id_sql: str
    many: bool = False
    suffix: str = ""
    """Appended to `field[i]` in errors, e.g. `.object_ref`."""


@dataclass(frozen=True)
class Check:
    """A check run once every line is written. `sql` returns `seq, location, *args` of the first offender."""

    sql: str
    field: str
    problem: Callable[[Sequence[Any]], str]


@dataclass(frozen=True)
class Children:
    """A JSON list column written to a child table.

    `values` are SELECT expressions over the staged row `s`, its list item `j` and `{scope}`;
    `item` the comparable columns of one item; `stored` the same columns of the stored children
    of a stored row `{r}`, so that content can be compared with the database.
    """

    column: str
    insert: str
    values: str
    item: str
    stored: str


@dataclass(frozen=True)
class Kind:
    name: str
    table: str
    key: tuple[str, ...]
    columns: tuple[str, ...]
    """Real-table columns staged as they are stored (`scope_key` only where the line itself carries it)."""
    row: Callable[[Any], Staged]
    """Line -> staged values: `columns`, then each child list as JSON. Raises Invalid."""
    owner: Link | None = None
    """The link whose target's scope is the row's scope; None when the row carries or has no scope."""
    links: tuple[Link, ...] = ()
    children: tuple[Children, ...] = ()
    refs: tuple[RefLink, ...] = ()
    after: tuple[Check, ...] = ()

    @property
    def stage(self) -> str:
        return f"stage_{self.name}"

    @property
    def staged_columns(self) -> tuple[str, ...]:
        return self.columns + tuple(child.column for child in self.children)

    @property
    def scoped(self) -> bool:
        return self.owner is not None or "scope_key" in self.columns


def _json(value: object) -> str:
    return orjson.dumps(value).decode()


def _ids(field: str, ids: list[str]) -> str:
    """A list of ids as JSON, in file order (so errors can name `field[i]`); a repeated id is refused."""
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        for index, value in enumerate(ids):
            if value in seen:
                raise Invalid(f"{field}[{index}]", f"{value!r} is listed more than once")
            seen.add(value)
    return _json(ids)


def _refs(field: str, refs: Sequence[ObjectRef], suffix: str = "") -> list[list[str]]:
    seen: set[tuple[str, str]] = set()
    pairs: list[list[str]] = []
    for index, ref in enumerate(refs):
        if ref.type in NOT_YET_MODELLED_TYPES:
            raise Invalid(
                f"{field}[{index}]{suffix}.type", f"{ref.type!r} objects are not stored yet; nothing can link to one"
            )
        if (ref.type, ref.id) in seen:
            raise Invalid(f"{field}[{index}]", f"{ref.model_dump()!r} is listed more than once")
        seen.add((ref.type, ref.id))
        pairs.append([ref.type, ref.id])
    return pairs


def _end(field: str, ref: ObjectRef) -> tuple[str, str]:
    if ref.type in NOT_YET_MODELLED_TYPES:
        raise Invalid(f"{field}.type", f"{ref.type!r} objects are not stored yet; nothing can link to one")
    return ref.type, ref.id


def _evidence(kind: str, address: str) -> Children:
    """`source_reference_ids` -> object_sources rows; `address` names the object (`{a}` is the row alias)."""
    return Children(
        "source_reference_ids",
        "INSERT INTO object_sources (object_type, object_id, source_reference_id, scope_key)",
        f"'{kind}', {address.format(a='s')}, j.value, {{scope}}",
        "j.value",
        f"SELECT source_reference_id FROM object_sources WHERE object_type = '{kind}'"
        f" AND object_id = {address.format(a='{r}')}",
    )


EVIDENCE: Final = Link("source_reference_ids", "source_reference", many=True)
CHANGE_ADDRESS: Final = "{a}.entity_id || '#' || {a}.association_key"


def _project(line: ProjectLine) -> Staged:
    return (line.id, line.name, line.status)


def _scope(line: ScopeLine) -> Staged:
    projects = line.scope.projectIds if isinstance(line.scope, ProjectsScope) else []
    return (scope_key(line.scope), line.scope.kind, _json(projects))


def _result(line: ResultLine) -> Staged:
    coverage = None if line.coverage is None else _json(line.coverage.model_dump(mode="json"))
    return (
        line.id,
        scope_key(line.scope),
        line.stage,
        line.status,
        line.review_generated_at,
        line.recorded_at,
        line.revision,
        coverage,
    )


def _story_line(line: StoryLineLine) -> Staged:
    return (line.id, scope_key(line.scope), line.topic, line.recorded_at, line.revision)


def _source(line: SourceLine) -> Staged:
    return (
        line.id,
        line.source_type,
        line.project_id,
        line.conversation_id,
        line.title,
        line.status,
        line.current_version,
        line.updated_at,
    )


def _source_version(line: SourceVersionLine) -> Staged:
    text = line.text
    chunks = [text[start : start + CHUNK_CODE_POINTS] for start in range(0, len(text), CHUNK_CODE_POINTS)]
    return (line.source_id, line.version, len(text), line.recorded_at, _json(chunks))


def _source_reference(line: SourceReferenceLine) -> Staged:
    locator = None if line.locator is None else _json(line.locator.model_dump(exclude_none=True))
    return (
        line.id,
        line.result_id,
        line.source_type,
        line.original_source_id,
        line.source_version,
        locator,
        line.title,
        line.fragment.text,
        line.fragment.start,
        line.fragment.end,
        line.source_length,
        line.availability,
        line.source_record_time,
        line.recorded_at,
    )


def _entity(line: EntityLine) -> Staged:
    return (
        line.id,
        line.story_line_id,
        line.entity_type,
        line.canonical_label,
        line.description,
        line.confirmation_state,
        line.decision_status,
        line.work_status,
        line.updated_at,
        line.revision,
        _ids("source_reference_ids", line.source_reference_ids),
    )


def _entity_revision(line: EntityRevisionLine) -> Staged:
    return (
        line.entity_id,
        line.result_id,
        line.revision,
        line.canonical_label,
        line.description,
        line.confirmation_state,
        line.recorded_at,
    )


def _event(line: EventLine) -> Staged:
    time = line.event_time
    return (
        line.id,
        line.result_id,
        line.story_line_id,
        line.event_type,
        line.title,
        line.description,
        None if time is None else time.start,
        None if time is None else time.end,
        None if time is None else time.precision,
        None if time is None else time.basis,
        line.recorded_at,
        line.confirmation_state,
        line.revision,
        _ids("entity_ids", line.entity_ids),
        _ids("source_reference_ids", line.source_reference_ids),
    )


def _entity_change(line: EntityChangeLine) -> Staged:
    return (
        line.entity_id,
        line.association_key,
        line.result_id,
        line.event_id,
        line.change_type,
        line.description,
        line.entity_revision,
        line.applicable_from,
        line.applicable_to,
        line.confirmation_state,
        line.recorded_at,
        _ids("source_reference_ids", line.source_reference_ids),
    )


def _relation(line: RelationLine) -> Staged:
    return (
        line.id,
        line.result_id,
        *_end("from_ref", line.from_ref),
        *_end("to_ref", line.to_ref),
        line.relation_type,
        line.reason,
        line.confirmation_state,
        line.recorded_at,
        line.revision,
        _ids("source_reference_ids", line.source_reference_ids),
    )


def _summary(line: SummaryLine) -> Staged:
    interval = line.interval or {}
    return (
        line.id,
        line.result_id,
        interval.get("from"),
        interval.get("to"),
        line.body,
        _json(line.open_items),
        line.recorded_at,
        line.revision,
        _json(_refs("fact_refs", line.fact_refs)),
        _ids("source_reference_ids", line.source_reference_ids),
    )


def _leaf(line: LeafLine) -> Staged:
    pairs = _refs("facts", [fact.object_ref for fact in line.facts], ".object_ref")
    facts = [[*pair, fact.description] for pair, fact in zip(pairs, line.facts, strict=True)]
    return (line.id, line.result_id, line.summary, line.recorded_at, _json(facts))


def _memory_item(line: MemoryItemLine) -> Staged:
    return (line.id, line.project_id, line.memory_type, line.body, line.confirmation_state, line.updated_at)


def _missing_version(row: Sequence[Any]) -> str:
    return f"source {row[2]!r} has no version {row[3]!r}: add a source_version line for it"


_KINDS: Final = (
    Kind("project", "projects", ("id",), ("id", "name", "status"), _project),
    Kind(
        "scope",
        "scopes",
        ("scope_key",),
        ("scope_key", "kind"),
        _scope,
        links=(Link("project_ids", "project", field="scope.projectIds", many=True),),
        children=(
            Children(
                "project_ids",
                "INSERT INTO scope_projects (scope_key, project_id)",
                "s.scope_key, j.value",
                "j.value",
                "SELECT project_id FROM scope_projects WHERE scope_key = {r}.scope_key",
            ),
        ),
    ),
    Kind(
        "result",
        "results",
        ("id",),
        ("id", "scope_key", "stage", "status", "review_generated_at", "recorded_at", "revision", "coverage_json"),
        _result,
        links=(Link("scope_key", "scope", field="scope"),),
    ),
    Kind(
        "story_line",
        "story_lines",
        ("id",),
        ("id", "scope_key", "topic", "recorded_at", "revision"),
        _story_line,
        links=(Link("scope_key", "scope", field="scope"),),
    ),
    Kind(
        "source",
        "sources",
        ("id",),
        ("id", "source_type", "project_id", "conversation_id", "title", "status", "current_version", "updated_at"),
        _source,
        links=(Link("project_id", "project"),),
        after=(
            Check(
                "SELECT s.seq, s.location, s.id, s.current_version FROM stage_source AS s"
                " WHERE s.skip = 0 AND s.current_version IS NOT NULL AND NOT EXISTS (SELECT 1 FROM source_versions"
                " AS v WHERE v.source_id = s.id AND v.version = s.current_version) ORDER BY s.seq LIMIT 1",
                "current_version",
                _missing_version,
            ),
        ),
    ),
    Kind(
        "source_version",
        "source_versions",
        ("source_id", "version"),
        ("source_id", "version", "length", "recorded_at"),
        _source_version,
        links=(Link("source_id", "source"),),
        children=(
            Children(
                "chunks",
                "INSERT INTO source_chunks (source_id, version, start, text)",
                f"s.source_id, s.version, j.key * {CHUNK_CODE_POINTS}, j.value",
                f"j.key * {CHUNK_CODE_POINTS}, j.value",
                "SELECT start, text FROM source_chunks WHERE source_id = {r}.source_id AND version = {r}.version",
            ),
        ),
    ),
    Kind(
        "source_reference",
        "source_references",
        ("id",),
        (
            "id",
            "result_id",
            "source_type",
            "original_source_id",
            "source_version",
            "locator_json",
            "title",
            "fragment",
            "fragment_start",
            "fragment_end",
            "source_length",
            "availability",
            "source_record_time",
            "recorded_at",
        ),
        _source_reference,
        owner=Link("result_id", "result"),
    ),
    Kind(
        "entity",
        "entities",
        ("id",),
        (
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
        ),
        _entity,
        owner=Link("story_line_id", "story_line"),
        links=(EVIDENCE,),
        children=(_evidence("entity", "{a}.id"),),
    ),
    Kind(
        "entity_revision",
        "entity_revisions",
        ("entity_id", "result_id"),
        ("entity_id", "result_id", "revision", "canonical_label", "description", "confirmation_state", "recorded_at"),
        _entity_revision,
        owner=Link("entity_id", "entity"),
        links=(Link("result_id", "result"),),
    ),
    Kind(
        "event",
        "events",
        ("id",),
        (
            "id",
            "result_id",
            "story_line_id",
            "event_type",
            "title",
            "description",
            "event_time_start",
            "event_time_end",
            "event_time_precision",
            "event_time_basis",
            "recorded_at",
            "confirmation_state",
            "revision",
        ),
        _event,
        owner=Link("result_id", "result"),
        links=(Link("story_line_id", "story_line"), Link("entity_ids", "entity", many=True), EVIDENCE),
        children=(
            Children(
                "entity_ids",
                "INSERT INTO event_entities (event_id, entity_id, scope_key)",
                "s.id, j.value, {scope}",
                "j.value",
                "SELECT entity_id FROM event_entities WHERE event_id = {r}.id",
            ),
            _evidence("event", "{a}.id"),
        ),
    ),
    Kind(
        "entity_change",
        "entity_changes",
        ("entity_id", "association_key"),
        (
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
        ),
        _entity_change,
        owner=Link("entity_id", "entity"),
        links=(Link("result_id", "result"), Link("event_id", "event"), EVIDENCE),
        children=(_evidence("entity_change", CHANGE_ADDRESS),),
    ),
    Kind(
        "relation",
        "relations",
        ("id",),
        (
            "id",
            "result_id",
            "from_type",
            "from_id",
            "to_type",
            "to_id",
            "relation_type",
            "reason",
            "confirmation_state",
            "recorded_at",
            "revision",
        ),
        _relation,
        owner=Link("result_id", "result"),
        links=(EVIDENCE,),
        children=(_evidence("relation", "{a}.id"),),
        refs=(RefLink("from_ref", "s.from_type", "s.from_id"), RefLink("to_ref", "s.to_type", "s.to_id")),
    ),
    Kind(
        "summary",
        "summaries",
        ("id",),
        ("id", "result_id", "interval_from", "interval_to", "body", "open_items", "recorded_at", "revision"),
        _summary,
        owner=Link("result_id", "result"),
        links=(EVIDENCE,),
        children=(
            Children(
                "fact_refs",
                "INSERT INTO fact_links (owner_type, owner_id, object_type, object_id, scope_key, description)",
                "'summary', s.id, j.value ->> 0, j.value ->> 1, {scope}, NULL",
                "j.value ->> 0, j.value ->> 1",
                "SELECT object_type, object_id FROM fact_links WHERE owner_type = 'summary' AND owner_id = {r}.id",
            ),
            _evidence("summary", "{a}.id"),
        ),
        refs=(RefLink("fact_refs", "j.value ->> 0", "j.value ->> 1", many=True),),
    ),
    Kind(
        "leaf",
        "leaves",
        ("id",),
        ("id", "result_id", "summary", "recorded_at"),
        _leaf,
        owner=Link("result_id", "result"),
        children=(
            Children(
                "facts",
                "INSERT INTO fact_links (owner_type, owner_id, object_type, object_id, scope_key, description)",
                "'leaf', s.id, j.value ->> 0, j.value ->> 1, {scope}, j.value ->> 2",
                "j.value ->> 0, j.value ->> 1, j.value ->> 2",
                "SELECT object_type, object_id, description FROM fact_links"
                " WHERE owner_type = 'leaf' AND owner_id = {r}.id",
            ),
        ),
        refs=(RefLink("facts", "j.value ->> 0", "j.value ->> 1", many=True, suffix=".object_ref"),),
    ),
    Kind(
        "memory_item",
        "memory_items",
        ("id",),
        ("id", "project_id", "memory_type", "body", "confirmation_state", "updated_at"),
        _memory_item,
        links=(Link("project_id", "project"),),
    ),
)

KINDS: Final[dict[str, Kind]] = {kind.name: kind for kind in _KINDS}
assert tuple(KINDS) == KIND_ORDER, "kinds are staged and written in KIND_ORDER"

# JSON columns compared by content, not by text, when a line meets a stored object.
JSON_LISTS: Final = frozenset({"source_reference_ids", "entity_ids", "fact_refs", "facts", "project_ids"})
# Staged column -> the interchange field it comes from, where the names differ.
FIELD_OF_COLUMN: Final[dict[str, str]] = {
    "scope_key": "scope",
    "kind": "scope",
    "project_ids": "scope",
    "coverage_json": "coverage",
    "locator_json": "locator",
    "fragment": "fragment",
    "fragment_start": "fragment",
    "fragment_end": "fragment",
    "event_time_start": "event_time",
    "event_time_end": "event_time",
    "event_time_precision": "event_time",
    "event_time_basis": "event_time",
    "from_type": "from_ref",
    "from_id": "from_ref",
    "to_type": "to_ref",
    "to_id": "to_ref",
    "interval_from": "interval",
    "interval_to": "interval",
    "length": "text",
    "chunks": "text",
}


def differing_fields(kind: Kind, first: Staged, second: Staged) -> list[str]:
    """The interchange fields in which two staged rows of one kind differ (lists compared as sets)."""
    fields: list[str] = []
    for column, a, b in zip(kind.staged_columns, first, second, strict=True):
        if column in JSON_LISTS:
            same = sorted(map(_hashable, orjson.loads(str(a)))) == sorted(map(_hashable, orjson.loads(str(b))))
        else:
            same = a == b
        field = FIELD_OF_COLUMN.get(column, column)
        if not same and field not in fields:
            fields.append(field)
    return fields


def _hashable(item: Any) -> Any:
    return tuple(item) if isinstance(item, list) else item
