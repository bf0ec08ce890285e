"""The JSON Lines interchange format: one object per line, told apart by `kind`.

`story-graph-mcp db import` validates every line against these models, and `db export` writes
them back. docs/interchange.md documents each kind with an example. Times must carry an offset
and are stored as UTC. Lists of ids are links; every id they name must exist in the file or the
database.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field, Strict, TypeAdapter, ValidationInfo, field_validator, model_validator

from server.contracts.base import Contract, GlobalScope, Id, Instant, ObjectRef, ProjectsScope, Scope, no_nul
from server.contracts.fragment_range import length_problem, span_problem

Text = Annotated[str, Field(max_length=20_000_000)]


ChildText = Annotated[str, Field(max_length=20_000_000), AfterValidator(no_nul)]
"""Text stored in child rows (a source version's chunks, a leaf's description of a fact): without U+0000, which
SQLite's JSON functions (3.40) end a text at - a source cut there could not be read back at all."""
INT64: Final = 2**63 - 1
Int = Annotated[int, Strict(), Field(ge=-INT64 - 1, le=INT64)]
"""A whole number SQLite can store (64-bit): a larger one is refused on its line, not an overflow when written.
Strict: `"6"`, `6.0` and `true` are mistyped, not silently read as numbers."""
Flag = Annotated[bool, Strict()]
"""`true` or `false`; `"false"`, `0` or `"no"` are mistyped (lax parsing would read `"false"` as false)."""


def _span(value: dict[str, str]) -> dict[str, str]:
    missing = [name for name in ("from", "to") if name not in value]
    if missing:
        raise ValueError(f"needs both 'from' and 'to' (missing: {', '.join(missing)})")
    if value["to"] < value["from"]:  # UTC text: text order is time order
        raise ValueError("'to' is before 'from'")
    return value


Span = Annotated[dict[Literal["from", "to"], Instant], AfterValidator(_span)]
"""`{"from": T, "to": T}`, both given, `to` not before `from`. The readers take both ends of every span they
find (a processed range with one end made every search of its scope fail)."""


class ProjectLine(Contract):
    kind: Literal["project"]
    id: Id
    name: str
    status: str = "active"
    """Open set; only `active` projects can be read."""


class ScopeLine(Contract):
    """Declares a scope that results and story lines can belong to (its projects must exist)."""

    kind: Literal["scope"]
    scope: Scope


VersionName = Annotated[str, Field(max_length=256)]
"""A version of a source named where a `source_version` line is not required (a reference's, a coverage record's):
at most 256 characters, as the `version` of a `source_version` line (an `Id`) it names. It is an identifier, not free
text: one of 200,000 characters was stored whole, and every answer showing it could only show an excerpt."""


class CoverageSource(Contract):
    source_id: Id
    source_version: VersionName | None = None
    """The version processed; null when it was not recorded."""
    fragments: list[tuple[Int, Int]] = Field(default_factory=list)
    """Processed `[start, end)` code-point ranges."""
    status: Literal["processed", "partial", "unprocessed"] = "processed"


class CoverageMissing(Contract):
    source_id: Id
    ranges: list[tuple[Int, Int]] = Field(default_factory=list)
    reason: str = ""


class DetailedCoverage(Contract):
    """What one review run really recorded about its own progress."""

    kind: Literal["detailed"]
    processed_range: Span | None = None
    """`{"from", "to"}` of source time processed; null when not recorded."""
    sources: list[CoverageSource] = Field(default_factory=list)
    missing: list[CoverageMissing] = Field(default_factory=list)
    unprocessed_sources: Int | None = None
    """Count of selected sources not processed; null when not recorded (never 0 for unknown)."""
    source_types_included: list[str] | None = None
    source_types_not_included: list[str] | None = None


class LegacyCountCoverage(Contract):
    """An old record holding only a count: it yields no time, version or semantic coverage."""

    kind: Literal["legacy_count"]
    count: Int = Field(ge=0)


Coverage = Annotated[DetailedCoverage | LegacyCountCoverage, Field(discriminator="kind")]


class ResultLine(Contract):
    kind: Literal["result"]
    id: Id
    scope: Scope
    stage: str = "review"
    status: str = "published"
    review_generated_at: Instant
    recorded_at: Instant
    revision: str | None = None
    coverage: Coverage | None = None
    """Null: no coverage record; the reader reports `unknown`."""


class StoryLineLine(Contract):
    kind: Literal["story_line"]
    id: Id
    scope: Scope
    topic: str
    recorded_at: Instant
    revision: str | None = None


class EventTime(Contract):
    """When the recorded thing happened: an instant (`end` null) or an interval."""

    start: Instant
    end: Instant | None = None
    precision: str | None = None
    basis: str | None = None
    """What dates the event, e.g. `stated_in_source` or `message_time`."""

    @model_validator(mode="after")
    def _ordered(self) -> EventTime:
        if self.end is not None and self.end < self.start:
            raise ValueError("event_time.end is before event_time.start")
        return self


class EventLine(Contract):
    kind: Literal["event"]
    id: Id
    result_id: Id
    story_line_id: Id | None = None
    event_type: str
    title: str
    description: str = ""
    event_time: EventTime | None = None
    """Null: the event time is unknown (never filled from review or record time)."""
    recorded_at: Instant
    confirmation_state: str = "automatic"
    revision: str | None = None
    entity_ids: list[Id] = Field(default_factory=list)
    source_reference_ids: list[Id] = Field(default_factory=list)


class EntityLine(Contract):
    """The current projection of an entity; content per result goes in `entity_revision` lines."""

    kind: Literal["entity"]
    id: Id
    story_line_id: Id
    entity_type: str = "concept"
    canonical_label: str
    description: str = ""
    confirmation_state: str = "automatic"
    decision_status: str | None = None
    work_status: str | None = None
    """Only from a task record or explicit execution evidence; a decision is not completion."""
    updated_at: Instant
    revision: str | None = None
    source_reference_ids: list[Id] = Field(default_factory=list)


class EntityRevisionLine(Contract):
    kind: Literal["entity_revision"]
    entity_id: Id
    result_id: Id
    revision: str | None = None
    canonical_label: str
    description: str = ""
    confirmation_state: str = "automatic"
    recorded_at: Instant
    source_reference_ids: list[Id] | None = None
    """The evidence this result's snapshot of the entity rests on. Null (or absent): none was stored, so it is
    unknown (never the entity's current evidence, which may be a later review's); `[]`: stored empty."""


class EntityChangeLine(Contract):
    kind: Literal["entity_change"]
    entity_id: Id
    association_key: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^#]+$"), AfterValidator(no_nul)]
    """Stable within its entity; `#` is reserved (the change is addressed as `<entity_id>#<key>`)."""
    result_id: Id
    event_id: Id | None = None
    change_type: str
    description: str = ""
    entity_revision: str | None = None
    applicable_from: Instant | None = None
    applicable_to: Instant | None = None
    confirmation_state: str = "automatic"
    recorded_at: Instant
    source_reference_ids: list[Id] = Field(default_factory=list)


class RelationLine(Contract):
    kind: Literal["relation"]
    id: Id
    result_id: Id
    from_ref: ObjectRef
    to_ref: ObjectRef
    relation_type: str
    reason: str = ""
    confirmation_state: str = "automatic"
    recorded_at: Instant
    revision: str | None = None
    source_reference_ids: list[Id] = Field(default_factory=list)
    """The evidence for the relation."""


class SummaryLine(Contract):
    kind: Literal["summary"]
    id: Id
    result_id: Id
    interval: Span | None = None
    body: str
    open_items: list[str] = Field(default_factory=list)
    recorded_at: Instant
    revision: str | None = None
    fact_refs: list[ObjectRef] = Field(default_factory=list)
    source_reference_ids: list[Id] = Field(default_factory=list)


class LeafFact(Contract):
    object_ref: ObjectRef
    description: ChildText | None = None
    """The leaf's own description of the object, kept independent of the current projection."""


class LeafLine(Contract):
    """A successful leaf of a review run and the facts it produced."""

    kind: Literal["leaf"]
    id: Id
    result_id: Id
    summary: str | None = None
    recorded_at: Instant
    facts: list[LeafFact] = Field(default_factory=list)


class StoryLine(Contract):
    """A long-lived story: a `feature` of one project, a `thread` inside a feature, or a `cross` story
    that links the same work across projects. Its events are linked by `story_event` lines."""

    kind: Literal["story"]
    id: Id
    level: Literal["feature", "thread", "cross"]
    scope: Scope
    """A feature or thread: its one project's scope. A cross story: the project set it spans. Must be declared."""
    parent_story_id: Annotated[Id | None, Field(validate_default=True)] = None
    """A thread's feature (same scope); null for a feature or a cross story."""
    name: str
    description: str = ""
    state: Literal["active", "concluded"] = "active"
    state_event_id: Id | None = None
    """The event that set the state (e.g. the one saying the work is finished); null when none was recorded."""
    started_at: Instant | None = None
    """The story's span as recorded; null: unknown."""
    ended_at: Annotated[Instant | None, Field(validate_default=True)] = None
    started_at_precision: str | None = None
    """The precision of `started_at`, as an event time's: `day` when the bound is a whole UTC day (`started_at` its
    midnight); null: as precise as the instant, or not recorded."""
    ended_at_precision: str | None = None
    """The precision of `ended_at`, the same way (`day`: the span ends within that day, `ended_at` its midnight)."""
    confirmation_state: Literal["automatic", "user_edited"] = "automatic"
    """`user_edited`: a user renamed, merged or otherwise adjusted the story; `automatic` otherwise."""
    recorded_at: Instant
    revision: str | None = None

    @field_validator("scope")
    @classmethod
    def _project_scope(cls, scope: GlobalScope | ProjectsScope, info: ValidationInfo) -> GlobalScope | ProjectsScope:
        level = info.data.get("level")
        if isinstance(scope, GlobalScope):
            raise ValueError("a story belongs to projects, never to Global: use a projects scope")
        if level in ("feature", "thread") and len(scope.projectIds) != 1:
            raise ValueError(f"a {level} belongs to exactly one project; a story spanning projects has level 'cross'")
        return scope

    @field_validator("parent_story_id")
    @classmethod
    def _parent(cls, parent: str | None, info: ValidationInfo) -> str | None:
        level = info.data.get("level")
        if level == "thread" and parent is None:
            raise ValueError("a thread needs parent_story_id: the feature it belongs to")
        if level in ("feature", "cross") and parent is not None:
            raise ValueError(f"only a thread has a parent story; this story's level is {level!r}")
        return parent

    @field_validator("ended_at")
    @classmethod
    def _span(cls, ended: str | None, info: ValidationInfo) -> str | None:
        started = info.data.get("started_at")
        if ended is not None and (started is None or ended < started):
            raise ValueError("ended_at needs a started_at at or before it")
        return ended

    @model_validator(mode="after")
    def _precisions(self) -> StoryLine:
        for bound in ("started_at", "ended_at"):
            if getattr(self, f"{bound}_precision") is not None and getattr(self, bound) is None:
                raise ValueError(f"{bound}_precision needs a {bound}: it is the precision of that instant")
        return self


class StoryEventLine(Contract):
    """Links an event to a story. `primary`: the one feature or thread the event belongs to (at most one per
    event, never a cross story); otherwise a related story, such as a cross story spanning the event's project."""

    kind: Literal["story_event"]
    story_id: Id
    event_id: Id
    primary: Flag = False
    user_set: Flag = False
    """A user placed the event in this story (rather than the automatic assignment)."""


class ExperienceLine(Contract):
    """A lesson distilled from earlier work: advice, not a rule. Its events come in `experience_event` lines."""

    kind: Literal["experience"]
    id: Id
    scope: Scope
    """Exactly the projects of the events that formed it (Global when they are Global events). Must be declared."""
    statement: str
    conditions: str = ""
    """When the lesson applies."""
    boundaries: str = ""
    """Where it stops applying."""
    confirmation_state: Literal["automatic", "user_edited"] = "automatic"
    recorded_at: Instant
    revision: str | None = None


class ExperienceEventLine(Contract):
    """An event an experience was `formed` from, or one where it was `applied`, with a note."""

    kind: Literal["experience_event"]
    experience_id: Id
    event_id: Id
    role: Literal["formed", "applied"]
    note: str = ""


class SourceLine(Contract):
    kind: Literal["source"]
    id: Id
    source_type: str
    project_id: Id | None = None
    conversation_id: str | None = None
    title: str | None = None
    status: str = "available"
    """`available`, `deleted` or `inaccessible`."""
    current_version: str | None = None
    """Must name a `source_version` line of this source, or be null (no readable current text)."""
    updated_at: Instant


class SourceVersionLine(Contract):
    kind: Literal["source_version"]
    source_id: Id
    version: Id
    text: ChildText
    recorded_at: Instant


MAX_DEPTH: Final = 100
"""Levels of nesting a JSON value kept as stored may have; the JSON writer stops at 254 (the whole line's)."""


def _not_too_deep(value: dict[str, Any] | None) -> dict[str, Any] | None:
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH):
        level = [
            item
            for parent in level
            if isinstance(parent, dict | list)
            for item in (parent.values() if isinstance(parent, dict) else parent)
        ]
    if any(isinstance(item, dict | list) for item in level):
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep; keep a flatter locator")
    return value


class Locator(Contract):
    """Where a saved fragment came from. Absent fields are unknown and stay unknown."""

    project_id: str | None = None
    conversation_id: str | None = None
    message_id: str | None = None
    order: Int | None = None
    role: str | None = None
    document_id: str | None = None
    chunk_id: str | None = None
    task_id: str | None = None
    """A task fragment's task, as its tracker or app names it (`ATL-212`): searchable as an identifier."""
    external: Annotated[dict[str, Any] | None, AfterValidator(_not_too_deep)] = None
    """An external fragment's own locator, kept as stored (at most 100 levels of nesting)."""


class Fragment(Contract):
    text: Text
    start: Int | None = Field(default=None, ge=0)
    end: Int | None = Field(default=None, ge=0)

    @field_validator("end")
    @classmethod
    def _span(cls, end: int | None, info: ValidationInfo) -> int | None:
        # Only when text and start are valid (a field that failed is absent from info.data).
        if "text" in info.data and "start" in info.data:
            problem = span_problem(info.data["text"], info.data["start"], end)
            if problem is not None:
                raise ValueError(problem)
        return end


class SourceReferenceLine(Contract):
    kind: Literal["source_reference"]
    id: Id
    result_id: Id
    source_type: str
    original_source_id: Id
    source_version: VersionName | None = None
    locator: Locator | None = None
    """Null: an old reference without a locator (its position is reported missing)."""
    title: str | None = None
    fragment: Fragment
    source_length: Int | None = Field(default=None, ge=0)
    availability: str = "available"
    source_record_time: str | None = None
    recorded_at: Instant

    @field_validator("source_length")
    @classmethod
    def _holds_fragment(cls, source_length: int | None, info: ValidationInfo) -> int | None:
        fragment = info.data.get("fragment")
        if isinstance(fragment, Fragment):
            problem = length_problem(fragment.text, fragment.start, fragment.end, source_length)
            if problem is not None:
                raise ValueError(problem)
        return source_length


class MemoryItemLine(Contract):
    kind: Literal["memory_item"]
    id: Id
    project_id: Id | None = None
    """Null: a Global preference."""
    memory_type: str = "preference"
    body: str
    confirmation_state: str = "confirmed"
    updated_at: Instant


Line = Annotated[
    ProjectLine
    | ScopeLine
    | ResultLine
    | StoryLineLine
    | EventLine
    | EntityLine
    | EntityRevisionLine
    | EntityChangeLine
    | RelationLine
    | SummaryLine
    | LeafLine
    | StoryLine
    | StoryEventLine
    | ExperienceLine
    | ExperienceEventLine
    | SourceLine
    | SourceVersionLine
    | SourceReferenceLine
    | MemoryItemLine,
    Field(discriminator="kind"),
]
LINE: TypeAdapter[Line] = TypeAdapter(Line)

# Import and export order: every kind links only to kinds before it.
KIND_ORDER: tuple[str, ...] = (
    "project",
    "scope",
    "result",
    "story_line",
    "source",
    "source_version",
    "source_reference",
    "entity",
    "entity_revision",
    "event",
    "entity_change",
    "relation",
    "summary",
    "leaf",
    "story",
    "story_event",
    "experience",
    "experience_event",
    "memory_item",
)
