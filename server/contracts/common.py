"""The read contract every tool shares: inputs (scope, time, cursor) and the response frame."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, Final, Literal, TypeVar

import orjson
from pydantic import BaseModel, BeforeValidator, Field, ModelWrapValidatorHandler, model_validator

from server.contracts.base import (
    Contract,
    GlobalScope,
    Instant,
    ObjectRef,
    ProjectsScope,
    Scope,
    finer_than_a_millisecond,
    next_millisecond,
)
from server.contracts.field_docs import describe_fields

Unknown = Literal["unknown"]
LimitReason = Literal["page_size", "content_page_size", "response_budget", "work_budget", "content_unavailable"]
"""Why a page stopped (Page.limit_reason): a closed set, so the output schema lists it."""
TimeBasis = Literal["event_time", "review_generated_at", "recorded_at"]
CURSOR_MAX_CHARS: Final = 4_096
"""The longest cursor a tool takes (SPEC §4), so the longest it may issue."""
Cursor = Annotated[
    str,
    Field(
        min_length=1,
        max_length=CURSOR_MAX_CHARS,
        description="next_cursor from the previous page, passed back unchanged",
    ),
]
ScopeArg = Annotated[
    Scope | None,
    Field(
        description='{"kind":"global"} or {"kind":"projects","projectIds":[...]}; omit for the current project. '
        "Only results of exactly this scope are read: work shared by several projects is stored under their "
        "project set, not under each project."
    ),
]

INTERPRETATION = (
    "Stored claims within the selected evidence scope; no inferred supersession, completion, or historical state."
)
MAX_RESPONSE_BYTES: Final = 100_000
"""The most a tool answer may be, as compact JSON: over it a call answers response_too_large (docs/tools.md)."""
CURSOR_RESERVE: Final = 4_400
"""Room a page cut to the response budget keeps for the next_cursor it may gain (at most 4,096 characters) and its
page fields."""
COVERAGE_LIST_LIMIT = 10
"""How many entries each list of the scope's coverage holds. Every response repeats that block, so its lists are
examples beside exact counts: at 50 a scope with many count-only records sent ~6 KB of result ids on every page
(a third of a 10-item search page, and of the client's time spent checking it against the output schema)."""
COVERAGE_LIST_BYTES = 6_000
"""And how much JSON each of those lists (processed_source_versions, missing, results_without_detail,
source_types_not_included) may hold: its newest entries that fit (`fitting`), its count still of all. By count alone
the block was over the response limit with legal records: an id of 256 code points is up to 1,538 bytes of JSON
(each a 6-byte escape), an entry up to about 5,200, and four lists of 10 such entries about 140 KB on every
response. One such entry fits; ordinary entries (a few hundred bytes) are all listed, so ordinary answers are
unchanged. The two lists of times (processed_ranges, uncovered_parts) are at most 10 × 63 bytes by themselves."""
COVERAGE_TEXT_LIMIT = 256
"""How many code points each text of a coverage entry keeps (a missing part's `reason`, a `source_id`, a
`source_version`, a `status`): every response repeats the coverage block, so one review record with a
300,000-character reason made every call of its scope response_too_large, which no smaller page could fix. An
importable id or version is never longer (interchange `Id`: 256); a longer text is cut to its first
COVERAGE_TEXT_LIMIT code points and marked `<field>_is_excerpt` (as get_context's header marks its excerpts)."""
COVERAGE_NOTE = (
    "Exact stored scope only. Coverage reports what the stored review records say; reading every page proves all "
    f"matches were read, not that every source was processed or every fact recognised. Lists are capped at "
    f"{COVERAGE_LIST_LIMIT}, the newest (the latest reviews' entries, the latest ranges and gaps), oldest first, "
    f"those that fit in {COVERAGE_LIST_BYTES:,} bytes of JSON; an entry's own fragments or ranges are its first "
    f"{COVERAGE_LIST_LIMIT}, its texts their first {COVERAGE_TEXT_LIMIT} code points (<field>_is_excerpt: true when "
    "cut). The *_count fields give the totals."
)


TEXT_LIMIT = COVERAGE_TEXT_LIMIT
"""The same cap for the short texts every tool shows from a stored row beside the paged content: read_source's
title, versions, availability, record time and locator fields, an item's `object_revision`, `confirmation_state`
and event-time `precision`/`basis`, a search item's `title`. `db import` accepts each of them whole, and one of
200,000 characters made every answer showing it response_too_large at any page size."""

ExcerptFlag = Annotated[bool, Field(exclude_if=lambda cut: not cut)]
"""`<field>_is_excerpt` of a closed model: present, `true`, only beside a field that was cut (as in the open coverage
entries, `capped_texts`); absent when the field is whole, so answers about ordinary rows are unchanged."""


def excerpt(text: str, limit: int) -> tuple[str, bool]:
    """The first `limit` code points of `text`, and whether that cut anything (the `*_is_excerpt` flag)."""
    return text[:limit], len(text) > limit


def capped_texts(entry: dict[str, Any], limit: int = COVERAGE_TEXT_LIMIT) -> dict[str, Any]:
    """A stored coverage entry with each of its texts at most `limit` code points: a cut one is its first `limit`
    and `<field>_is_excerpt: true` is added beside it (absent when nothing was cut, so short entries stay as stored).
    The entry is an open dict as stored: every text is capped, not only the fields the interchange names."""
    capped = dict(entry)
    for key, value in entry.items():
        if isinstance(value, str) and len(value) > limit:
            capped[key], capped[f"{key}_is_excerpt"] = excerpt(value, limit)
    return capped


Entry = TypeVar("Entry")


def fitting(entries: Iterable[Entry], *, limit: int, budget: int) -> list[Entry]:
    """The first entries (at most `limit`) whose JSON list fits in `budget` bytes: one mechanism for every list a
    response shows beside a count of the whole (`*_count`), so a list of legal but long entries (ids of 256 code
    points cost up to 1,538 bytes of JSON each, in escapes) can never fill the response. Entries are dicts, texts or
    models, each measured as the response writes it (compact JSON)."""
    listed: list[Entry] = []
    used = 2  # the brackets
    for entry in entries:
        size = json_size(entry) + 1  # and a comma
        if len(listed) == limit or used + size > budget:
            break
        listed.append(entry)
        used += size
    return listed


def newest_fitting(entries: Sequence[Entry], *, limit: int, budget: int) -> list[Entry]:
    """As `fitting`, for a list that keeps its newest (last) entries: the last that fit, still oldest first."""
    return fitting(reversed(entries), limit=limit, budget=budget)[::-1]


def json_size(value: Any) -> int:
    """Bytes of `value` (a dict, text, list or model) as the response writes it (compact JSON)."""
    return len(orjson.dumps(value, default=_as_json))


def _as_json(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    raise TypeError(type(value))


def capped_name(text: str, limit: int = COVERAGE_TEXT_LIMIT) -> str:
    """A text inside a sentence or a list of names, which has no room for a flag: one over `limit` code points is its
    first `limit - 1` and '…'."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


PROJECT_NAMES_BYTES: Final = 6_000
"""How much JSON a `project_names` map may hold (the first projects, in id order, whose entries fit: `fitting`). A
project's name is stored free text, and a scope may name 100 projects: 100 names of 256 code points were up to
154 KB of JSON (each a 6-byte escape). Ordinary names (a few words) are all listed."""


def project_names(names: dict[str, str]) -> dict[str, str]:
    """`project_names` of a response or error: each project id mapped to its stored name, cut by `capped_name`
    (a name in a sentence or a map has no room for a flag), in id order, the first that fit in PROJECT_NAMES_BYTES;
    a project left out for room simply has no entry. `names` must hold only projects the caller may read."""
    entries = fitting(
        ({pid: capped_name(names[pid])} for pid in sorted(names)), limit=len(names), budget=PROJECT_NAMES_BYTES
    )
    return {pid: name for entry in entries for pid, name in entry.items()}


class ToolArgs(Contract):
    """A tool's arguments: null for any optional argument is that argument omitted. Clients that send every
    argument, null when unset, then work with every tool (null was taken for `scope`, `time_range` and `cursor`
    only); upstream's zod schemas refuse null everywhere, so every call they accept means the same here. The listed
    input schema says so (`anyOf` with `{"type": "null"}`, the default beside it); a required argument still
    refuses null."""

    model_config = Contract.model_config | {"json_schema_extra": lambda schema, cls: _optional_takes_null(schema, cls)}

    @model_validator(mode="before")
    @classmethod
    def _null_is_omitted(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        optional = {field.alias or name for name, field in cls.model_fields.items() if not field.is_required()}
        return {key: value for key, value in data.items() if not (value is None and key in optional)}


def _optional_takes_null(schema: dict[str, Any], cls: type[BaseModel]) -> None:
    describe_fields(schema, cls)  # the contracts' own json_schema_extra, which this one replaces
    required = set(schema.get("required", []))
    properties: dict[str, dict[str, Any]] = schema.get("properties", {})
    for name, prop in properties.items():
        if name in required or NULL in prop.get("anyOf", []):
            continue
        # The annotations stay on the property itself, where clients show them.
        kept: dict[str, Any] = {key: prop.pop(key) for key in ("title", "description", "default") if key in prop}
        properties[name] = {"anyOf": [prop, NULL], **kept}


NULL: dict[str, Any] = {"type": "null"}


BARE_DATE: Final = re.compile(r"\s*(\d{4}-\d{2}-\d{2})\s*")


def _range_end(end: Literal["from", "to"]) -> Callable[[Any], Any]:
    """An end of a time_range: an instant, and for a bare date (an agent asked about a day) the instant to send.
    The range is closed and compared as instants, so a day's end is its last millisecond: `23:59:59Z`, the form an
    agent reaches for, would leave out the day's last second."""

    def check(value: Any) -> Any:
        day = BARE_DATE.fullmatch(value) if isinstance(value, str) else None
        if day is not None:
            at = "00:00:00Z" if end == "from" else "23:59:59.999Z"
            raise ValueError(
                f"{value!r} is a date without a time; an end of time_range is an instant: send {day.group(1)}T{at} "
                f"for the {'start' if end == 'from' else 'end'} of that day in UTC (ends are inclusive), or the same "
                "time with your offset, e.g. +08:00, for the day in that time zone"
            )
        return value  # Instant parses it (or names what is wrong)

    return check


class TimeRange(Contract):
    """A closed interval `[from, to]`; both ends inclusive, compared as instants (a whole day: from
    2026-04-14T00:00:00Z to 2026-04-14T23:59:59.999Z)."""

    from_: Annotated[Instant, BeforeValidator(_range_end("from"))] = Field(alias="from")
    to: Annotated[Instant, BeforeValidator(_range_end("to"))]

    model_config = Contract.model_config | {"populate_by_name": True}

    @model_validator(mode="wrap")
    @classmethod
    def _ordered(cls, data: Any, handler: ModelWrapValidatorHandler[TimeRange]) -> TimeRange:
        parsed = handler(data)  # both ends in the stored form: cut down to the millisecond
        if parsed.to < parsed.from_:
            # Show both in UTC: with two offsets, ends that read as ordered may not be as instants.
            raise ValueError(
                f"time_range.from ({parsed.from_} in UTC) is after time_range.to ({parsed.to} in UTC); the ends are "
                "compared as instants: swap them or correct an offset"
            )
        # Stored times have millisecond precision. `to` cut down keeps exactly the stored times up to it; `from` cut
        # down would keep one before it (from 03:20:00.0001 kept an event at 03:20:00.000), so it is rounded up.
        # Both ends inside one millisecond then make an empty range, never a refusal of an ordered one.
        raw = data.get("from", data.get("from_")) if isinstance(data, dict) else None
        if isinstance(raw, str) and finer_than_a_millisecond(raw):
            try:
                return parsed.model_copy(update={"from_": next_millisecond(parsed.from_)})
            except OverflowError:
                raise ValueError(
                    f"time_range.from ({raw!r}) rounded up to the next millisecond is past the year 9999"
                ) from None
        return parsed


class Grant(Contract):
    """What one caller may read: from the launch configuration (stdio) or the client's policy entry (HTTP)."""

    client_id: str = "local"
    enabled: bool = True
    default_project: str | None = None
    """The caller's current project; the scope of a call that names none."""
    projects: list[str] | Literal["*"] = "*"
    """Projects this caller may read; '*' means every project in the database."""
    allow_global: bool = True
    """Whether the Global scope may be read."""

    def allows_project(self, project_id: str) -> bool:
        return self.projects == "*" or project_id in self.projects

    def allows(self, scope: GlobalScope | ProjectsScope) -> bool:
        if isinstance(scope, GlobalScope):
            return self.allow_global
        return all(self.allows_project(p) for p in scope.projectIds)


class Page(Contract):
    returned_count: int
    """On this page: items (search), fragments in `items` (get_context; `background` ones not counted) or code
    points (read_source)."""
    total_count: int | Unknown
    """All matching items (search), the objects selected (get_context: graph objects and memory items, not
    fragments) or the text length in code points (read_source); 'unknown' when not computed (search counts up to
    10,001 matches: see total_count_at_least)."""
    total_count_at_least: int | None = None
    """Set when total_count is 'unknown' but a lower bound is known (search: more matches than were counted)."""
    has_more: bool
    complete: bool
    """True when this is the last page of the matches (not a claim about coverage)."""
    next_cursor: str | None
    limit_reason: LimitReason | None
    """Why the page stopped: 'page_size', 'content_page_size', 'response_budget' (the byte budget),
    'work_budget' (search: a query of very many terms checked its candidates' text up to its budget; the next
    page continues the walk), 'content_unavailable' (read_source: the requested text cannot be read), or null on
    the last page."""


class CoverageMissing(Contract):
    result_id: str
    source_id: str
    ranges: list[tuple[int, int]]
    """The first COVERAGE_LIST_LIMIT ranges the record names, in its order (range_count: all of them)."""
    reason: str
    """As recorded, at most COVERAGE_TEXT_LIMIT code points (`reason_is_excerpt` says whether it was cut)."""
    range_count: int = 0
    """How many ranges the record names for this entry."""
    reason_is_excerpt: bool = False
    source_id_is_excerpt: bool = False
    """source_id is at most COVERAGE_TEXT_LIMIT code points too (an imported one is never longer)."""


class ResultWithoutDetail(Contract):
    result_id: str
    record: Literal["legacy_count", "absent"]
    review_generated_at: str
    """When that review ran: the period whose processing nobody can state."""
    count: int | Unknown
    """What a legacy_count record holds (items processed, with no time, version or range); 'unknown' when absent."""


def range_bounds(time_range: TimeRange | None) -> tuple[str, str] | None:
    """A call's time_range as the readers take it, (from, to) in the stored form; None without one."""
    return (time_range.from_, time_range.to) if time_range is not None else None


class TimeRangeCoverage(Contract):
    """How the recorded processed ranges meet the call's time_range (event_time basis only)."""

    status: Literal["covered", "partly_covered", "not_covered", "unknown"]
    """covered: every instant of the time_range lies in a recorded processed range (which covers the whole second its
    end falls in); partly_covered: some do;
    not_covered: none do; unknown: the processed ranges are unknown (the scope has no results, or a result without a
    recorded range may have processed any period), unless the ranges the other records name cover the whole
    time_range: covered. Covered periods may still hold parts the records name as missing."""
    uncovered_parts: list[dict[Literal["from", "to"], str]] | Unknown
    """The stretches of the time_range no processed range covers, in time order (the newest COVERAGE_LIST_LIMIT, as
    processed_ranges); each runs from an end of the time_range or of a processed range to the next start."""
    uncovered_part_count: int | Unknown


class Coverage(Contract):
    """What the stored review records of exactly this scope say about processing; 'unknown' where they are silent."""

    status: Literal["complete", "partial", "unknown"]
    """complete: every result has a detailed record showing nothing unprocessed; partial: a record shows gaps;
    unknown: no results, or a result with a count-only or absent record."""
    semantic_completeness: Unknown = "unknown"
    """Processing every selected text does not prove every fact was recognised."""
    unprocessed_sources: int | Unknown
    historical_reconstruction: Literal[False] = False
    note: str = COVERAGE_NOTE
    published_result_count: int
    result_records: dict[Literal["detailed", "legacy_count", "absent"], int]
    """How many results have each kind of coverage record."""
    processed_range: dict[Literal["from", "to"], str] | Unknown
    """The hull of the recorded processed ranges (UTC); 'unknown' unless every result records one whose times have
    an offset. It may span gaps no record covers: `processed_ranges` lists them."""
    processed_ranges: list[dict[Literal["from", "to"], str]] | Unknown = "unknown"
    """The recorded processed ranges, merged where they overlap or meet to the second (a range covers the whole second
    its end falls in), in time order: the newest COVERAGE_LIST_LIMIT, so the list ends where processing ends and the
    recent gaps show (`processed_range_count` says how many there are; a call with a time_range gets
    `time_range_coverage` for its own period). A time between two of them was not processed by any record. 'unknown'
    as processed_range."""
    processed_range_count: int | Unknown = "unknown"
    """How many merged processed ranges there are."""
    processed_source_version_count: int | Unknown
    """How many source versions the detailed records list; 'unknown' unless every result is detailed."""
    processed_source_versions: list[dict[str, Any]] | Unknown
    """Those of the newest reviews, with their processed fragment ranges: the last COVERAGE_LIST_LIMIT in review order
    (review_generated_at, then result id; each record's own order within it). See the count for the rest. Each
    entry's `fragments` holds its first COVERAGE_LIST_LIMIT ranges, `fragment_count` how many there are (every
    response repeats this block: a record of thousands of ranges made every call of its scope response_too_large).
    Each text (source_id, source_version, status) holds its first COVERAGE_TEXT_LIMIT code points, and
    `<field>_is_excerpt: true` is added when that cut it (absent otherwise)."""
    missing_count: int | Unknown
    """How many unprocessed parts the records name; 'unknown' unless every result is detailed (a count-only or absent
    record cannot say what it left out, so a number would claim none)."""
    missing: list[CoverageMissing]
    """The unprocessed parts the detailed records name (only what they name): the newest reviews', the last
    COVERAGE_LIST_LIMIT in the order of processed_source_versions."""
    results_without_detail: list[ResultWithoutDetail] = []
    """The results whose record is count-only or absent: the ones that make the scope-wide ranges, versions and
    missing parts 'unknown'. The newest COVERAGE_LIST_LIMIT in review order (review_generated_at, then result id)."""
    results_without_detail_count: int = 0
    """How many results have a count-only or absent record (result_records counts each kind)."""
    time_range_coverage: TimeRangeCoverage | None = None
    """For a call with a time_range on the event_time basis: whether the processed ranges cover it (the list above
    shows only the newest ranges). Null otherwise: processed ranges are periods of source material, not of
    recording or review."""
    source_types_not_included: list[str] | Unknown
    """The union of the records' lists ('unknown' unless every result is detailed and records one): the first
    COVERAGE_LIST_LIMIT in name order; a name over COVERAGE_TEXT_LIMIT code points is cut to end in '…'."""
    source_types_not_included_count: int | Unknown = "unknown"
    """How many names that union holds."""
    object_types_not_included: list[str]
    """Requested object types this server does not read: none (every type of the input enum is read, stories and
    experiences included). Kept so a client that checks it finds the answer."""


class Frame(Contract):
    """The parts every response has."""

    requested_scope: GlobalScope | ProjectsScope | Literal["current_project"]
    resolved_scope: GlobalScope | ProjectsScope
    project_names: dict[str, str]
    """The stored name of each project of `resolved_scope`, by id (empty for the Global scope; ids are what a scope
    argument takes, names are what people call the projects). Each name at most COVERAGE_TEXT_LIMIT code points (a
    longer one ends in '…'); in all at most PROJECT_NAMES_BYTES of JSON, the first projects in id order (a project
    left out for room has no entry). Every item's `scope` lies within `resolved_scope`, so this names its projects
    too."""
    read_at: str
    data_revision: str
    """The scope's data revision this page was read at (writes to memory items do not change it); search and
    get_context cursors are bound to it, read_source cursors to the reference and source they read."""
    coverage: Coverage
    page: Page


class EventInterval(Contract):
    start: str
    end: str | None
    """Null for an instant."""
    precision: str | None
    basis: str | None
    precision_is_excerpt: ExcerptFlag = False
    """`precision` and `basis` are at most TEXT_LIMIT code points; the flag is present when that cut one."""
    basis_is_excerpt: ExcerptFlag = False


SOURCE_REFERENCES_LISTED = 100
"""An object's `source_reference_ids` list at most this many (in id order); `source_reference_count` says how many
it has. Without the cap one object citing a few thousand sources would be over the 100,000-byte response limit at
any page size, and could not be read at all."""


SOURCE_REFERENCE_IDS_BYTES = 6_000
"""And at most this much JSON: the first ids that fit. 100 ids of 256 code points were up to 154 KB (each a 6-byte
escape), over the response limit with one item; 100 ordinary ids (up to 57 ASCII characters each) are all listed."""


def listed_sources(ids: list[str]) -> dict[str, Any]:
    """`source_reference_ids` (the first SOURCE_REFERENCES_LISTED that fit in SOURCE_REFERENCE_IDS_BYTES) and
    `source_reference_count` (all of them)."""
    listed = fitting(ids, limit=SOURCE_REFERENCES_LISTED, budget=SOURCE_REFERENCE_IDS_BYTES)
    return {"source_reference_ids": listed, "source_reference_count": len(ids)}


class ItemBase(Contract):
    """Fields every returned object carries."""

    object_ref: ObjectRef
    object_revision: str | Unknown
    """The row's stored revision, or 'unknown', at most TEXT_LIMIT code points (`object_revision_is_excerpt: true`
    when cut). An entity change has none of its own: its object_revision is the entity revision it points at (its
    stored entity_revision), shared by that entity's other changes of it."""
    object_revision_is_excerpt: ExcerptFlag = False
    result_id: str | None
    """The review result this row belongs to; null for a current projection, a story line, a story or an
    experience (they belong to no result)."""
    # Projects first: most items are stored in a project, and a client validating this anyOf stops at the first
    # alternative that matches (a failed one costs it an error object per item).
    scope: ProjectsScope | GlobalScope
    """The scope the object is stored in: the resolved scope (results are never mixed), except for an event a
    story or experience lists, which may be stored in a narrower scope within it; read its sources with
    story_graph_read_source in this scope."""
    event_time: str | None
    """Start of the event time (UTC) or null when unknown; `event_interval` has the detail."""
    event_interval: EventInterval | None
    review_generated_at: str | None
    recorded_at: str | None
    confirmation_state: str
    """As stored, at most TEXT_LIMIT code points (`confirmation_state_is_excerpt: true` when cut)."""
    confirmation_state_is_excerpt: ExcerptFlag = False
    validity: Unknown = "unknown"
    """No reliable validity data is stored yet; never derived from confirmation or record time."""
    source_reference_ids: list[str]
    """The stored evidence: ids for story_graph_read_source, the first 100 in id order (get_context's `content`
    holds every one)."""
    source_reference_count: int
    """How many source references the object has in all (more than listed when above 100)."""
    evidence_basis: Literal["row", "object"]
    """Whose evidence `source_reference_ids` is. `row`: this row's own stored evidence. `object`: this row stored
    none (an entity revision written without its own list, or a leaf's description standing in for a row), so
    what it rested on is unknown, and the list is the object's current evidence, which may be a later review's;
    never read it as this row's."""
