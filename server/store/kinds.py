"""One `Kind` per line kind of the graph: its fields and the columns that store them, its key, links,
child rows and rules. The one place a stored field is written down: staging.py stages lines with it,
merge.py turns it into SQL, lines.py reads stored rows back as lines with it (export and compare).

Stories, experiences and their event links are in kinds_stories.py; kind_model.py says what each
part of a `Kind` means.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson
from pydantic import TypeAdapter

from server.contracts.base import ObjectRef, ProjectsScope, Scope, scope_key
from server.contracts.interchange import KIND_ORDER, Coverage, EventTime, LeafFact, Locator
from server.reader.saved_range import own_length_sql, reach_sql, stored_there_sql, text_differs_sql
from server.store.kind_model import (
    SCOPE,
    Check,
    Children,
    Kind,
    Link,
    RefLink,
    Row,
    Staged,
    Stored,
    as_json,
    end,
    ids,
    refs,
)
from server.store.kinds_stories import EXPERIENCE, EXPERIENCE_EVENT, STORY, STORY_EVENT

CHUNK_CODE_POINTS: Final = 4096
"""Source text is stored in chunks of this many code points (see source_chunks in migrations/)."""
COVERAGE: Final[TypeAdapter[Coverage]] = TypeAdapter(Coverage)


def _evidence_ids(values: list[str]) -> str:
    return ids("source_reference_ids", values)


def _entity_ids(values: list[str]) -> str:
    return ids("entity_ids", values)


def _evidence(kind: str, address: str) -> Children:
    """`source_reference_ids` -> object_sources rows; `address` names the object (`{a}` is the row alias)."""
    return Children(
        "source_reference_ids",
        "object_sources",
        ("object_type", "object_id"),
        f"'{kind}', {address}",
        ("source_reference_id",),
        "j.value",
        _evidence_ids,
    )


EVIDENCE: Final = Link("source_reference_ids", "source_reference", many=True)


def _revision_evidence_ids(values: list[str] | None) -> str:
    """An entity revision's evidence; null (not stored) has no child rows, as `[]` has: SOURCES_STORED tells."""
    return _evidence_ids([] if values is None else values)


SOURCES_STORED: Final = Stored(
    "source_reference_ids", ("sources_stored",), lambda values: (0 if values is None else 1,), None
)
"""Whether an entity revision has its own evidence list stored (1, even when empty) or none (0: unknown); the
list itself is child rows (entity_revision_sources), read back by lines.py."""
CHANGE_ADDRESS: Final = "{a}.entity_id || '#' || {a}.association_key"


# --- fields stored in other columns or another form than one column of their own name ---------------------

SCOPE_WITH_KIND: Final = Stored(
    "scope", ("scope_key", "kind"), lambda scope: (scope_key(scope), scope.kind), SCOPE.load
)
"""A scope line's scope: its key, and its kind beside it."""


def _project_ids(scope: Scope) -> str:
    return as_json(scope.projectIds if isinstance(scope, ProjectsScope) else [])


def _load_coverage(row: Row) -> Coverage | None:
    coverage = row["coverage_json"]
    return None if coverage is None else COVERAGE.validate_json(coverage)


COVERAGE_JSON: Final = Stored(
    "coverage",
    ("coverage_json",),
    lambda coverage: (None if coverage is None else as_json(coverage.model_dump(mode="json")),),
    _load_coverage,
)


def _chunks(text: str) -> str:
    return as_json([text[start : start + CHUNK_CODE_POINTS] for start in range(0, len(text), CHUNK_CODE_POINTS)])


TEXT_LENGTH: Final = Stored("text", ("length",), lambda text: (len(text),), None)
"""A source version's length; its text is stored in chunks (child rows)."""


def _stage_locator(locator: Locator | None) -> Staged:
    return (None if locator is None else as_json(locator.model_dump(exclude_none=True)),)


def _load_locator(row: Row) -> Any:
    locator = row["locator_json"]
    return None if locator is None else orjson.loads(locator)


LOCATOR_JSON: Final = Stored("locator", ("locator_json",), _stage_locator, _load_locator)
FRAGMENT: Final = Stored(
    "fragment",
    ("fragment", "fragment_start", "fragment_end"),
    lambda fragment: (fragment.text, fragment.start, fragment.end),
    lambda row: {"text": row["fragment"], "start": row["fragment_start"], "end": row["fragment_end"]},
)


def _stage_event_time(time: EventTime | None) -> Staged:
    return (None, None, None, None) if time is None else (time.start, time.end, time.precision, time.basis)


def _load_event_time(row: Row) -> dict[str, Any] | None:
    if row["event_time_start"] is None:
        return None
    return {
        "start": row["event_time_start"],
        "end": row["event_time_end"],
        "precision": row["event_time_precision"],
        "basis": row["event_time_basis"],
    }


EVENT_TIME: Final = Stored(
    "event_time",
    ("event_time_start", "event_time_end", "event_time_precision", "event_time_basis"),
    _stage_event_time,
    _load_event_time,
)


def _end(field: str, prefix: str) -> Stored:
    """One end of a relation, stored as `<prefix>_type` and `<prefix>_id`."""
    type_column, id_column = f"{prefix}_type", f"{prefix}_id"

    def stage(ref: ObjectRef) -> Staged:
        return end(field, ref)

    def load(row: Row) -> dict[str, Any]:
        return {"type": row[type_column], "id": row[id_column]}

    return Stored(field, (type_column, id_column), stage, load)


def _stage_interval(interval: dict[str, str] | None) -> Staged:
    bounds = interval or {}
    return (bounds.get("from"), bounds.get("to"))


def _load_interval(row: Row) -> dict[str, str] | None:
    bounds = {"from": row["interval_from"], "to": row["interval_to"]}
    return {name: value for name, value in bounds.items() if value is not None} or None


INTERVAL: Final = Stored("interval", ("interval_from", "interval_to"), _stage_interval, _load_interval)
OPEN_ITEMS: Final = Stored(
    "open_items", ("open_items",), lambda items: (as_json(items),), lambda row: orjson.loads(row["open_items"])
)


def _fact_refs(values: Sequence[ObjectRef]) -> str:
    return as_json(refs("fact_refs", values))


def _facts(facts: list[LeafFact]) -> str:
    pairs = refs("facts", [fact.object_ref for fact in facts], ".object_ref")
    return as_json([[*pair, fact.description] for pair, fact in zip(pairs, facts, strict=True)])


def _missing_version(row: Sequence[Any]) -> str:
    return f"source {row[2]!r} has no version {row[3]!r}: add a source_version line for it"


# A saved fragment against the stored text of the version it names (server/reader/saved_range.py, the rule both
# tools apply to stored rows): that version is written before any reference (KIND_ORDER), whether this file or an
# earlier import holds it and wherever its line is in the file.
OWN_LENGTH, REACH, DIFFERS = own_length_sql("s"), reach_sql("s"), text_differs_sql("s")
REFERENCES: Final = "stage_source_reference"
FRAGMENT_NOT_THERE: Final = (
    "saved fragments whose [start, end) does not hold their text in the stored version they name"
    " (position stored as unknown)"
)


def _fix_length(row: Sequence[Any]) -> str:
    _, _, length, own, source, version = row
    return (
        f"source_length {length} is not the length of source {source!r} version {version!r}, whose stored text is"
        f" {own} code points long: set it to {own}, or null if unknown"
    )


def _fix_reach(row: Sequence[Any]) -> str:
    _, _, start, end, reach, own, source, version = row
    bound = f"fragment.end {end}" if end is not None else f"the fragment's end ({start} + its length = {reach})"
    return (
        f"{bound} is past the end of source {source!r} version {version!r}, whose stored text is {own} code points"
        " long: give the range where the text is in that version, the version it was saved from, or null start and"
        " end if unknown"
    )


def _quoted(text: object) -> str:
    text = str(text or "")
    return repr(text if len(text) <= 40 else f"{text[:40]}…")


def _fix_text(row: Sequence[Any]) -> str:
    _, _, start, _, there, source, version, end, text = row
    reach = end if end is not None else start + len(text)  # len: SQL's length() ends a text at U+0000
    return (
        f"fragment.text is not the text of source {source!r} version {version!r} at [{start}, {reach}), which reads"
        f" {_quoted(there)}: give the start and end where the text is in that version, the version it was saved"
        " from, or null start and end if unknown"
    )


FRAGMENT_CHECKS: Final = (
    Check(
        f"SELECT s.seq, s.location, s.source_length, {OWN_LENGTH}, s.original_source_id, s.source_version"
        f" FROM {REFERENCES} AS s WHERE s.skip <> 1 AND s.source_length <> {OWN_LENGTH} ORDER BY s.seq LIMIT 1",
        "source_length",
        _fix_length,
        repair=f"UPDATE {REFERENCES} AS s SET source_length = NULL WHERE s.source_length <> {OWN_LENGTH}",
        note="saved fragments whose source length is not the stored length of their version (stored as unknown)",
    ),
    Check(
        f"SELECT s.seq, s.location, s.fragment_start, s.fragment_end, {REACH}, {OWN_LENGTH}, s.original_source_id,"
        f" s.source_version FROM {REFERENCES} AS s WHERE s.skip <> 1 AND {REACH} > {OWN_LENGTH}"
        " ORDER BY s.seq LIMIT 1",
        "fragment.end",
        _fix_reach,
        repair=f"UPDATE {REFERENCES} AS s SET fragment_start = NULL, fragment_end = NULL WHERE {REACH} > {OWN_LENGTH}",
        note=FRAGMENT_NOT_THERE,
    ),
    Check(
        f"SELECT s.seq, s.location, s.fragment_start, {REACH}, {stored_there_sql('s')}, s.original_source_id,"
        f" s.source_version, s.fragment_end, s.fragment FROM {REFERENCES} AS s WHERE s.skip <> 1 AND {DIFFERS}"
        " ORDER BY s.seq LIMIT 1",
        "fragment.text",
        _fix_text,
        repair=f"UPDATE {REFERENCES} AS s SET fragment_start = NULL, fragment_end = NULL WHERE {DIFFERS}",
        note=FRAGMENT_NOT_THERE,
    ),
)


# The same rule from the other side: a reference stored by an earlier import, naming a version not stored then, against
# that version's text when this import stores it (a version never changes, so only a new one can contradict it). Only
# the references naming a version this import wrote are read (by source, then version). A reference line of this
# import for the same id settles it when it is written (new or, in a sync, changed: the checks above took it) or
# when it agrees with the version: a line with null start and end matches the stored row, which the tools (and so
# the importer's comparison, lines.py) read with that range unknown. A line equal to the stored row does not.
def _contradicted(r: str) -> str:
    """SQL: reference row `r` (stored or staged) breaks a rule above against its version's stored text; 0 or 1."""
    return (
        f"coalesce({reach_sql(r)} > {own_length_sql(r)} OR {text_differs_sql(r)}"
        f" OR {r}.source_length <> {own_length_sql(r)}, 0)"
    )


STORED_AGAINST_NEW_VERSIONS: Final = (
    "FROM stage_source_version AS v JOIN source_references AS r"
    " ON r.original_source_id = v.source_id AND r.source_version = v.version WHERE v.skip = 0"
)
"""SQL: the stored references (`r`) naming a version (`v`) this import writes."""
_SETTLED: Final = (
    f"EXISTS (SELECT 1 FROM {REFERENCES} AS s WHERE s.id = r.id"
    f" AND CASE WHEN s.skip <> 1 THEN 1 ELSE NOT {_contradicted('s')} END)"
)


def _unsettled(condition: str) -> str:
    """SQL: `condition` of stored reference `r`, 0 when a reference line of this import settles it.

    `:before` is the largest rowid of source_references before this import: a row above it is one this import
    inserted, settled without a look at the staged lines (a first import inserts every reference it names: looking
    each one up in the staging file read 600 MiB at 100k objects). CASE, not AND or OR, keeps that order (SQLite may
    evaluate the terms of an AND in any order), and compares no text for a settled reference."""
    return f"CASE WHEN r.rowid > :before THEN 0 WHEN {_SETTLED} THEN 0 ELSE {condition} END"


STORED_RANGE_WRONG: Final = f"coalesce({reach_sql('r')} > {own_length_sql('r')} OR {text_differs_sql('r')}, 0)"
STORED_LENGTH_WRONG: Final = f"coalesce(r.source_length <> {own_length_sql('r')}, 0)"
STORED_FRAGMENT: Final = (
    f"SELECT v.seq, v.location, r.id, r.original_source_id, r.source_version, r.fragment, r.fragment_start,"
    f" {reach_sql('r')}, r.source_length, {own_length_sql('r')}, {text_differs_sql('r')}, {stored_there_sql('r')}"
    f" {STORED_AGAINST_NEW_VERSIONS} AND {_unsettled(_contradicted('r'))} ORDER BY v.seq, r.id LIMIT 1"
)
"""SQL: the first stored reference a version this import writes contradicts (`v.seq, v.location, ...`), or nothing;
`:before` as in `_unsettled`."""
STORED_FRAGMENT_NOTES: Final = (
    (
        STORED_RANGE_WRONG,
        "saved fragments stored before whose [start, end) does not hold their text in the version this import stored"
        " (kept; read as unknown)",
    ),
    (
        STORED_LENGTH_WRONG,
        "saved fragments stored before whose source length is not the length of the version this import stored"
        " (kept; read as unknown)",
    ),
)
"""Sync mode with repair: each rule a stored reference may break, and its note. Such a reference is kept as it is
(the tools read its contradicted part as unknown, saved_range.py) and counted."""
STORED_FRAGMENT_COUNTS: Final = (
    f"SELECT {', '.join(f'coalesce(sum({_unsettled(wrong)}), 0)' for wrong, _ in STORED_FRAGMENT_NOTES)}"
    f" {STORED_AGAINST_NEW_VERSIONS}"
)
"""SQL: how many stored references break each rule of STORED_FRAGMENT_NOTES, in its order."""


def stored_fragment_problem(row: Sequence[Any], *, sync: bool) -> str:
    """What a version line contradicts in a stored reference (a row of STORED_FRAGMENT), and the fix; `sync`: a
    reference line of the same import can replace the stored reference."""
    _, _, ref, source, version, text, start, reach, length, own, differs, there = row
    if start is not None and (reach > own or differs):
        saved = f"saved {_quoted(text)} at [{start}, {reach}) of source {source!r} version {version!r}"
        holds = f"this text reads {_quoted(there)} there" if reach <= own else f"this text is {own} code points long"
        what = "start, end and source_length" if length not in (None, own) else "start and end"
    else:
        saved = f"saved source_length {length} for source {source!r} version {version!r}"
        holds = f"this text is {own} code points long"
        what = "source_length"
    fix = (
        f"correct this text, or add a corrected source_reference line for {ref!r} to this import (null {what} if"
        " unknown)"
        if sync
        else f"correct this text, or add a source_reference line for {ref!r} with null {what} to this file (an import"
        " does not change a stored reference: it keeps what it saved, read as unknown)"
    )
    return f"source_reference {ref!r}, stored before this import, {saved}, but {holds}: {fix}"


_KINDS: Final = (
    Kind("project", "projects", ("id",), ("id", "name", "status")),
    Kind(
        "scope",
        "scopes",
        ("scope_key",),
        (SCOPE_WITH_KIND,),
        links=(Link("project_ids", "project", field="scope.projectIds", many=True),),
        children=(
            Children(
                "project_ids",
                "scope_projects",
                ("scope_key",),
                "{a}.scope_key",
                ("project_id",),
                "j.value",
                _project_ids,
                field="scope",
                scoped=False,
            ),
        ),
    ),
    Kind(
        "result",
        "results",
        ("id",),
        ("id", SCOPE, "stage", "status", "review_generated_at", "recorded_at", "revision", COVERAGE_JSON),
        links=(Link("scope_key", "scope", field="scope"),),
    ),
    Kind(
        "story_line",
        "story_lines",
        ("id",),
        ("id", SCOPE, "topic", "recorded_at", "revision"),
        links=(Link("scope_key", "scope", field="scope"),),
    ),
    Kind(
        "source",
        "sources",
        ("id",),
        ("id", "source_type", "project_id", "conversation_id", "title", "status", "current_version", "updated_at"),
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
        ("source_id", "version", TEXT_LENGTH, "recorded_at"),
        links=(Link("source_id", "source"),),
        children=(
            Children(
                "chunks",
                "source_chunks",
                ("source_id", "version"),
                "{a}.source_id, {a}.version",
                ("start", "text"),
                f"j.key * {CHUNK_CODE_POINTS}, j.value",
                _chunks,
                field="text",
                scoped=False,
                ordered=True,
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
            LOCATOR_JSON,
            "title",
            FRAGMENT,
            "source_length",
            "availability",
            "source_record_time",
            "recorded_at",
        ),
        owner=Link("result_id", "result"),
        checks=FRAGMENT_CHECKS,
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
        owner=Link("story_line_id", "story_line"),
        links=(EVIDENCE,),
        children=(_evidence("entity", "{a}.id"),),
    ),
    Kind(
        "entity_revision",
        "entity_revisions",
        ("entity_id", "result_id"),
        (
            "entity_id",
            "result_id",
            "revision",
            "canonical_label",
            "description",
            "confirmation_state",
            "recorded_at",
            SOURCES_STORED,
        ),
        owner=Link("entity_id", "entity"),
        links=(Link("result_id", "result"), EVIDENCE),
        children=(
            Children(
                "source_reference_ids",
                "entity_revision_sources",
                ("entity_id", "result_id"),
                "{a}.entity_id, {a}.result_id",
                ("source_reference_id",),
                "j.value",
                _revision_evidence_ids,
            ),
        ),
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
            EVENT_TIME,
            "recorded_at",
            "confirmation_state",
            "revision",
        ),
        owner=Link("result_id", "result"),
        links=(Link("story_line_id", "story_line"), Link("entity_ids", "entity", many=True), EVIDENCE),
        children=(
            Children("entity_ids", "event_entities", ("event_id",), "{a}.id", ("entity_id",), "j.value", _entity_ids),
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
            _end("from_ref", "from"),
            _end("to_ref", "to"),
            "relation_type",
            "reason",
            "confirmation_state",
            "recorded_at",
            "revision",
        ),
        owner=Link("result_id", "result"),
        links=(EVIDENCE,),
        children=(_evidence("relation", "{a}.id"),),
        refs=(RefLink("from_ref", "s.from_type", "s.from_id"), RefLink("to_ref", "s.to_type", "s.to_id")),
    ),
    Kind(
        "summary",
        "summaries",
        ("id",),
        ("id", "result_id", INTERVAL, "body", OPEN_ITEMS, "recorded_at", "revision"),
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
                _fact_refs,
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
        owner=Link("result_id", "result"),
        children=(
            Children(
                "facts",
                "fact_links",
                ("owner_type", "owner_id"),
                "'leaf', {a}.id",
                ("object_type", "object_id", "description"),
                "j.value ->> 0, j.value ->> 1, j.value ->> 2",
                _facts,
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
        links=(Link("project_id", "project"),),
    ),
)

KINDS: Final[dict[str, Kind]] = {kind.name: kind for kind in _KINDS}
assert tuple(KINDS) == KIND_ORDER, "kinds are staged and written in KIND_ORDER"
