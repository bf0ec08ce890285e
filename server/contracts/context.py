"""story_graph_get_context: input and output.

The output is the common frame plus one stream of paged JSON fragments, split into two lists by
what they are: `items` (stored graph objects; in `timeline`, objects whose event time is unknown come
after every dated one, each marked `undated`, as upstream orders nulls last) and `background` (current
only: confirmed memory items, never history). The first page of `current` also carries a compact
`header`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, Strict

from server.contracts.base import Contract, GlobalScope, ObjectRef, ProjectsScope
from server.contracts.common import (
    Cursor,
    ExcerptFlag,
    Frame,
    ItemBase,
    ScopeArg,
    TimeBasis,
    TimeRange,
    ToolArgs,
    Unknown,
)

Role = Literal["target", "relation", "related", "evolution", "summary", "evidence"]
RowKind = Literal["current", "result", "leaf"]

DECIDED_IS_NOT_COMPLETED = (
    "decided is not completed: completion is only reported from a stored work_status; task records are listed "
    "for you to check, and no status is inferred from a decision, a plan or a later review."
)
VALIDITY_NOTE = (
    "validity is unknown: no reliable validity data is stored, and it is never derived from confirmation_state, "
    "record time or a newer review."
)
RELATIONS_NOTE = (
    "Relations are returned as stored, with their raw relation_type and reason; none is mapped to replaces or "
    "contradicts, and a newer date, option or firmer wording is not evidence of replacement."
)
CONFLICT_NOTE = (
    "A stored contrasts/contradicts relation with both claims in scope; no stored evidence resolves it, so both "
    "claims are kept side by side for you to check. Nobody is declared right."
)
TIME_FILTER_NOTE = (
    "Within the selected evidence (time_range on time_basis): this is not the state at the end of the range. "
    "Objects whose time on that basis is unknown were excluded and counted in unknown_time_excluded_count."
)
TIMELINE_NOTE = (
    "The history saved now, ordered by event time then type, stable id and result id. A late-recorded event keeps "
    "its event-time position; nothing here claims what was known at the time. Objects whose event time is unknown "
    "come after every dated item, each marked undated (undated_count says how many); old decisions stay beside "
    "their revisions."
)
REASSEMBLY_NOTE = (
    "content is a fragment of the object's compact JSON: join fragments per (object_ref.type, object_ref.id, "
    "result_id) — per memory_id for background — in position.start order, then parse. Follow next_cursor; a page "
    "may stop inside an object. page_size and content_page_size may change between pages; the other arguments must "
    "repeat."
)
OWN_SCOPE_NOTE = (
    "The events a story or experience lists may be stored in narrower scopes within this one: each item's scope "
    "says where. Quote an event's source_reference_ids with story_graph_read_source in that item's scope."
)
_BACKGROUND_ONLY = (
    "shown as background only: not events, not history, not a replacement. Their updated_at is not an event time "
    "and never fills a gap; a graph claim that differs from a preference is a difference for you to check."
)
BACKGROUND_NOTE = (
    "Confirmed long-term preferences of the Global scope and of this scope's projects, " + _BACKGROUND_ONLY
)
PROJECT_BACKGROUND_NOTE = (
    "Confirmed long-term preferences of this scope's projects (this client does not read the Global scope's), "
    + _BACKGROUND_ONLY
)
"""For a grant kept out of Global, which is shown none of its memory items: the note must not say it was."""


class ContextArgs(ToolArgs):
    object_ref: ObjectRef
    """The object to read, e.g. {"type":"entity","id":"ent-decision-b"} (ids come from story_graph_search)."""
    scope: ScopeArg = None
    mode: Literal["current", "timeline"] = "current"
    """current: what is stored about the object now, with its neighbourhood; timeline: the same evidence in
    event-time order, undated objects last. as_of is not supported."""
    time_range: TimeRange | None = None
    """Keep evidence whose time on `time_basis` lies in [from, to] (intervals match when they intersect)."""
    time_basis: TimeBasis = "event_time"
    """Which time `time_range` filters on; objects with no such time are excluded and counted."""
    page_size: Annotated[int, Strict(), Field(ge=1, le=50)] = 10
    """Fragments per page (1–50); an object longer than content_page_size spans several pages."""
    cursor: Cursor | None = None
    """next_cursor of the previous page, unchanged, with the same object_ref, mode, time_range and time_basis
    (the page sizes may change); it keeps the first page's scope, so scope may be omitted. Omit for the first
    page."""
    content_page_size: Annotated[int, Strict(), Field(ge=1, le=8000)] = 4000
    """Unicode code points per content fragment (1–8,000)."""


class Position(Contract):
    start: int
    """Zero-based code-point offset of this fragment in the object's whole JSON text."""
    end: int
    """End (exclusive) of this fragment."""
    length: int
    """Code-point length of the whole JSON text; the object is complete when a fragment ends at it."""
    unit: Literal["unicode_code_point"] = "unicode_code_point"


class RelationEnd(Contract):
    ref: ObjectRef
    in_scope: bool
    """Whether the end is stored in the resolved scope. False means missing or outside it — never which; nothing
    about an object outside the scope is read or returned."""


class RelationEnds(Contract):
    relation_type: str
    """As stored (e.g. revised, replaces, contrasts); never mapped to another type."""
    relation_type_is_excerpt: ExcerptFlag = False
    """Each stored status or type text of get_context (this, a header's states, a task's status, a memory item's
    type) is at most 256 code points, an open item at most 400: the flag is present, true, beside one that was cut."""
    from_end: RelationEnd = Field(alias="from")
    to_end: RelationEnd = Field(alias="to")

    model_config = Contract.model_config | {"populate_by_name": True}


class ContextItem(ItemBase):
    role: Role
    """target: a row of the requested object; relation: a relation touching it; related: an object at the other
    end of a relation, an entity of a target event, a fact of a target summary, or a story's threads (a thread's
    feature); evolution: entity changes and events (a story's events; an experience's formed and applied events);
    summary: summaries that list it; evidence: saved source references behind any of these."""
    row_kind: RowKind
    """current: the current projection (result_id null); result: a row of one review result; leaf: a successful
    leaf's independent description (object_ref.id 'leaf:<leaf_id>:<id>', see `describes`)."""
    describes: ObjectRef | None = None
    """For a leaf description: the object it describes."""
    leaf_id: str | None = None
    relation: RelationEnds | None = None
    """For a relation: its raw type and both ends."""
    undated: bool
    """True when the object's event time is unknown; in timeline, undated items follow every dated one."""
    content: str
    content_format: Literal["json_fragment"] = "json_fragment"
    position: Position


class MemoryBackground(Contract):
    """A confirmed long-term preference: background, never an event or history."""

    label: Literal["background_preference"] = "background_preference"
    memory_id: str
    memory_type: str
    memory_scope: GlobalScope | ProjectsScope
    memory_type_is_excerpt: ExcerptFlag = False
    """Where it applies: Global, or its one project."""
    updated_at: str
    """When the memory item was last updated; not an event time, not a version chain."""
    confirmation_state: str
    confirmation_state_is_excerpt: ExcerptFlag = False
    content: str
    content_format: Literal["json_fragment"] = "json_fragment"
    position: Position


class Claim(Contract):
    ref: ObjectRef
    label: str | None
    """The claim's label or title, at most 160 code points (read the item for the whole object)."""
    confirmation_state: str | Unknown
    confirmation_state_is_excerpt: ExcerptFlag = False
    validity: Unknown = "unknown"


class StoredRelation(Contract):
    relation_ref: ObjectRef
    result_id: str
    relation_type: str
    """As stored."""
    relation_type_is_excerpt: ExcerptFlag = False
    direction: Literal["outgoing", "incoming"]
    """outgoing: the target is the `from` end."""
    other_end: RelationEnd
    other_label: str | None
    """The other end's label (at most 160 code points), only when it is in scope."""
    reason: str
    """The raw stored reason, at most 400 code points (`reason_is_excerpt` says whether it was cut)."""
    reason_is_excerpt: bool
    confirmation_state: str
    confirmation_state_is_excerpt: ExcerptFlag = False
    validity: Unknown = "unknown"
    source_reference_ids: list[str]
    """The stored evidence for the relation (the first 100 in id order); empty means none is stored."""
    source_reference_count: int


class Conflict(Contract):
    status: Literal["needs_check"] = "needs_check"
    relation_ref: ObjectRef
    result_id: str
    relation_type: str
    relation_type_is_excerpt: ExcerptFlag = False
    reason: str
    """The raw stored reason, at most 400 code points."""
    reason_is_excerpt: bool
    claims: list[Claim]
    """Both claims, side by side, in stored from/to order."""
    source_reference_ids: list[str]
    """The first 100 in id order."""
    source_reference_count: int
    validity: Unknown = "unknown"
    note: str = CONFLICT_NOTE


class OpenItem(Contract):
    summary_id: str
    result_id: str
    text: str
    """As stored in the summary's open_items, at most 400 code points (`text_is_excerpt: true` when cut)."""
    text_is_excerpt: ExcerptFlag = False


class TaskEvidence(Contract):
    ref: ObjectRef
    label: str | None
    work_status: str | Unknown
    """The task's stored work_status."""
    work_status_is_excerpt: ExcerptFlag = False
    via_relation: str
    relation_type: str
    relation_type_is_excerpt: ExcerptFlag = False


class Completion(Contract):
    work_status: str | Unknown
    """The target's stored work_status, else 'unknown'."""
    work_status_is_excerpt: ExcerptFlag = False
    basis: Literal["stored_work_status", "none"]
    task_records: list[TaskEvidence]
    """Related task entities (through a stored relation), with their own stored status, for you to check."""
    task_source_reference_ids: list[str]
    """Saved task-record fragments behind the selected evidence (read them with story_graph_read_source)."""
    note: str = DECIDED_IS_NOT_COMPLETED


STORY_STATE_NOTE = (
    "state is the story's stored state, with the event that set it where one was recorded; concluded means the "
    "story line of work was closed, not that any decision in it was carried out."
)
EXPERIENCE_NOTE = (
    "An experience is a lesson distilled from earlier work: advice, not a rule. Check its conditions and "
    "boundaries against the case at hand; confirmation_state is automatic unless a user edited it."
)


class StoryView(Contract):
    """A story's state and shape (header of a story only)."""

    level: Literal["feature", "thread", "cross"]
    state: Literal["active", "concluded"]
    state_event: ObjectRef | None
    """The event that set the state; null when none was recorded."""
    state_event_title: str | None
    """Its title (at most 160 code points), when the event is stored."""
    state_event_scope: GlobalScope | ProjectsScope | None
    """The scope the state event is stored in (read its sources there)."""
    started_at: str | None
    ended_at: str | None
    started_at_precision: str | None
    """The precision of started_at, as an event time's: `day` when the bound is a whole UTC day (started_at is its
    midnight, which alone reads as an instant); null: as precise as the instant, or not recorded. At most TEXT_LIMIT
    code points (flagged when cut)."""
    ended_at_precision: str | None
    """The precision of ended_at, the same way (`day`: the story ends within that day)."""
    started_at_precision_is_excerpt: ExcerptFlag = False
    ended_at_precision_is_excerpt: ExcerptFlag = False
    parent: ObjectRef | None
    """A thread's feature."""
    threads: list[ObjectRef]
    """A feature's threads (first 10; thread_count has them all)."""
    thread_count: int
    event_count: int
    """The events the story lists: a feature or thread its own and its threads' primary events, a cross story
    every linked event (all within this scope; each an item with its own scope)."""
    note: str = STORY_STATE_NOTE


class ExperienceView(Contract):
    """An experience's lesson (header of an experience only)."""

    statement: str
    conditions: str
    """At most 600 code points each (the item holds them whole)."""
    boundaries: str
    formed_count: int
    """Links to events that formed it."""
    applied_count: int
    """Links to events where it was applied."""
    note: str = EXPERIENCE_NOTE


class Header(Contract):
    """A compact view of the target, first page of `current` only. Every list is capped at 10 with its total
    count, and the lists together at 24,000 bytes of JSON (long stored values list fewer); the full objects are all
    in the paged items."""

    object_ref: ObjectRef
    label: str | None
    """Label, title or topic (at most 160 code points): search's `title` (a summary's opening words)."""
    description: str | None
    """The target's current description (current projection, or its stored row), at most 600 code points."""
    description_is_excerpt: bool
    decision_status: str | Unknown
    """Stored decision state (e.g. decided), else 'unknown'."""
    decision_status_is_excerpt: ExcerptFlag = False
    work_status: str | Unknown
    work_status_is_excerpt: ExcerptFlag = False
    completion: Completion
    confirmation_state: str | Unknown
    """The stored review state, passed through; not validity."""
    confirmation_state_is_excerpt: ExcerptFlag = False
    validity: Unknown = "unknown"
    validity_note: str = VALIDITY_NOTE
    time_note: str | None
    """Set when time_range is used: the answer is within the selected evidence, not the state at its end; it says how
    many rows of which types had no time on the basis and were left out, of this header's lists and counts too."""
    open_items: list[OpenItem]
    """From the stored open_items of summaries that list the target (or, for a summary, its own), in review order:
    the last 10, the newest reviews' (open_item_count counts them all)."""
    open_item_count: int
    relations: list[StoredRelation]
    relation_count: int
    relations_note: str = RELATIONS_NOTE
    conflicts: list[Conflict]
    """Stored contrasts/contradicts relations among the selected ones whose both claims are in scope."""
    conflict_count: int
    evolution_refs: list[ObjectRef]
    """Entity changes and events: the newest 10 dated ones in event-time order, then undated ones while fewer than 10
    are listed (evolution_ref_count counts them all)."""
    evolution_ref_count: int
    evidence_ref_count: int
    """Distinct source references among the selected evidence (all of them are items with role 'evidence')."""
    result_ids: list[str]
    """The review results that hold a row of the target: the newest 10, oldest review first (result_count counts them
    all); each row is its own item."""
    result_count: int
    background_count: int
    """Memory items in `background`: this scope's projects', and the Global scope's for a grant that reads Global."""
    story: StoryView | None = None
    """For a story: its state (with the event that set it), level, span, feature or threads."""
    experience: ExperienceView | None = None
    """For an experience: statement, conditions, boundaries and how many events formed it or applied it."""


class Gap(Contract):
    """A known gap in the saved evidence for this object; never filled."""

    kind: Literal[
        "unknown_event_time",
        "coverage_not_complete",
        "listed_event_coverage_not_complete",
        "relation_end_not_in_scope",
        "evidence_not_in_scope",
        "no_reliable_revision",
        "source_not_available",
        "source_changed_since_saved",
        "no_result_rows",
    ]
    count: int | Unknown
    detail: str
    refs: list[ObjectRef]
    """The first 10 objects concerned."""


class ContextResponse(Frame):
    memory_revision: str | None
    """current: the revision of the memory items this caller is shown in the scope (`background`), as this page was
    read: changed by every write to one of them (the scope's projects' items; the Global ones only for a grant that
    reads Global), never by a write to graph data, which changes data_revision. A current cursor is bound to both,
    so a page refused as stale_cursor while data_revision stayed the same had a memory write before it. Opaque:
    compare it for equality only. Null in timeline, whose pages show no memory items and whose cursors ignore them."""
    time_basis: TimeBasis
    time_range: dict[Literal["from", "to"], str] | None
    """The range used, in UTC, or null."""
    interpretation: str
    unknown_time_excluded_count: int | Unknown
    """Selected objects dropped by time_range because their time on time_basis is unknown (0 without a range)."""
    mode: Literal["current", "timeline"]
    object_ref: ObjectRef
    """The requested object (a leaf id resolves to the object it describes)."""
    items: list[ContextItem]
    """Fragments of graph objects in page order (timeline: dated first, then undated, each marked). Every
    selected object is here; page.returned_count counts these."""
    undated_count: int
    """Selected graph objects whose event time is unknown (in timeline they are the last items of the stream)."""
    background: list[MemoryBackground]
    """current only: confirmed memory items, labelled background."""
    background_note: str | None
    header: Header | None
    """current, first page only."""
    known_gaps: list[Gap]
    notes: list[str]
