"""One `Kind` per line kind of the graph: what is staged, its key, links, child rows and rules.

Stories, experiences and their event links are in kinds_stories.py; kind_model.py says what each
part of a `Kind` means, and merge.py turns them into SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from server.contracts.base import ProjectsScope, scope_key
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
from server.store.kind_model import Check, Children, Kind, Link, RefLink, Staged, as_json, end, ids, refs
from server.store.kinds_stories import EXPERIENCE, EXPERIENCE_EVENT, STORY, STORY_EVENT

CHUNK_CODE_POINTS: Final = 4096
"""Source text is stored in chunks of this many code points (see source_chunks in migrations/)."""


def _evidence(kind: str, address: str) -> Children:
    """`source_reference_ids` -> object_sources rows; `address` names the object (`{a}` is the row alias)."""
    return Children(
        "source_reference_ids",
        "object_sources",
        ("object_type", "object_id"),
        f"'{kind}', {address}",
        ("source_reference_id",),
        "j.value",
    )


EVIDENCE: Final = Link("source_reference_ids", "source_reference", many=True)
CHANGE_ADDRESS: Final = "{a}.entity_id || '#' || {a}.association_key"


def _project(line: ProjectLine) -> Staged:
    return (line.id, line.name, line.status)


def _scope(line: ScopeLine) -> Staged:
    projects = line.scope.projectIds if isinstance(line.scope, ProjectsScope) else []
    return (scope_key(line.scope), line.scope.kind, as_json(projects))


def _result(line: ResultLine) -> Staged:
    coverage = None if line.coverage is None else as_json(line.coverage.model_dump(mode="json"))
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
    return (line.source_id, line.version, len(text), line.recorded_at, as_json(chunks))


def _source_reference(line: SourceReferenceLine) -> Staged:
    locator = None if line.locator is None else as_json(line.locator.model_dump(exclude_none=True))
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
        ids("source_reference_ids", line.source_reference_ids),
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
        ids("entity_ids", line.entity_ids),
        ids("source_reference_ids", line.source_reference_ids),
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
        ids("source_reference_ids", line.source_reference_ids),
    )


def _relation(line: RelationLine) -> Staged:
    return (
        line.id,
        line.result_id,
        *end("from_ref", line.from_ref),
        *end("to_ref", line.to_ref),
        line.relation_type,
        line.reason,
        line.confirmation_state,
        line.recorded_at,
        line.revision,
        ids("source_reference_ids", line.source_reference_ids),
    )


def _summary(line: SummaryLine) -> Staged:
    interval = line.interval or {}
    return (
        line.id,
        line.result_id,
        interval.get("from"),
        interval.get("to"),
        line.body,
        as_json(line.open_items),
        line.recorded_at,
        line.revision,
        as_json(refs("fact_refs", line.fact_refs)),
        ids("source_reference_ids", line.source_reference_ids),
    )


def _leaf(line: LeafLine) -> Staged:
    pairs = refs("facts", [fact.object_ref for fact in line.facts], ".object_ref")
    facts = [[*pair, fact.description] for pair, fact in zip(pairs, line.facts, strict=True)]
    return (line.id, line.result_id, line.summary, line.recorded_at, as_json(facts))


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
                "scope_projects",
                ("scope_key",),
                "{a}.scope_key",
                ("project_id",),
                "j.value",
                scoped=False,
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
                " WHERE s.skip <> 1 AND s.current_version IS NOT NULL AND NOT EXISTS (SELECT 1 FROM source_versions"
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
                "source_chunks",
                ("source_id", "version"),
                "{a}.source_id, {a}.version",
                ("start", "text"),
                f"j.key * {CHUNK_CODE_POINTS}, j.value",
                scoped=False,
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
            Children("entity_ids", "event_entities", ("event_id",), "{a}.id", ("entity_id",), "j.value"),
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
                "fact_links",
                ("owner_type", "owner_id"),
                "'summary', {a}.id",
                ("object_type", "object_id", "description"),
                "j.value ->> 0, j.value ->> 1, NULL",
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
                "fact_links",
                ("owner_type", "owner_id"),
                "'leaf', {a}.id",
                ("object_type", "object_id", "description"),
                "j.value ->> 0, j.value ->> 1, j.value ->> 2",
            ),
        ),
        refs=(RefLink("facts", "j.value ->> 0", "j.value ->> 1", many=True, suffix=".object_ref"),),
    ),
    STORY,
    STORY_EVENT,
    EXPERIENCE,
    EXPERIENCE_EVENT,
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
