"""story_graph_search: input and output."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, Strict, field_validator

from server.contracts.base import Contract, ObjectRef, ObjectType
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


class SearchArgs(ToolArgs):
    query: Annotated[str, Field(min_length=1, max_length=4000)]
    """Text to find, any script, case-insensitive and width-insensitive (full-width ASCII such as Ｒｅｄｉｓ matches
    Redis); 1–4,000 characters after trimming. Two to four keywords work well; short Chinese queries such as 方案
    are normal."""
    scope: ScopeArg = None
    object_types: Annotated[list[ObjectType] | None, Field(min_length=1)] = None
    """Restrict to these object types (default: all), e.g. ["story", "experience"] for long-lived work and lessons."""
    time_range: TimeRange | None = None
    """Keep objects whose time on `time_basis` lies in [from, to]; intervals match when they intersect."""
    time_basis: TimeBasis = "event_time"
    """Which time `time_range` filters on; objects with no such time are excluded and counted."""
    page_size: Annotated[int, Strict(), Field(ge=1, le=50)] = 10
    """Objects per page (1–50)."""
    cursor: Cursor | None = None
    """next_cursor of the previous page, unchanged, with the same query and filters (page_size may change);
    omit for the first page."""

    @field_validator("query", mode="before")
    @classmethod
    def _trim(cls, value: object) -> object:
        return value.strip() if isinstance(value, str) else value


class MatchPosition(Contract):
    field: str
    start: int
    """Zero-based code-point offset of the first whole-query match in that field's text."""
    end: int
    unit: Literal["unicode_code_point"] = "unicode_code_point"


class SearchItem(ItemBase):
    matched_fields: list[str]
    """The fields that contain the whole query or a query term."""
    match_kind: Literal["identifier", "whole_query", "terms"]
    """identifier: the query equals the object's id, its source id or a message/task id in its locator;
    whole_query: a field holds the whole query; terms: its fields together hold at least half of the terms."""
    field_weight: Literal[3, 1] | None
    """The heaviest matched field: 3 for titles, labels, topics, summaries, story names and experience
    statements; 1 for the others (null when only the identifier matched)."""
    own_row: bool
    """True for the object's own row (its current projection, or its row in its own result); false for its
    other stored rows (earlier result snapshots, leaf descriptions under other results)."""
    matched_terms: list[str]
    preview: str
    """At most 400 code points of the object's searchable text, led by the best matching field."""
    preview_is_excerpt: bool
    """Always true: a preview never holds an object's status, relations or evolution; read it with
    story_graph_get_context."""
    match_position: MatchPosition | None
    """Where the whole query first matches; null when no single field holds it."""
    title: str | None
    """The object's title, label, topic or type-specific headline (a summary's opening words): at most 160 code
    points, `title_is_excerpt: true` when cut."""
    title_is_excerpt: ExcerptFlag = False
    evolution_refs: list[ObjectRef]
    """The object's evolution, then the relations touching it (the first 20, by type then id). Per type: an entity
    its entity changes and the events linked to it or carrying them; an event the changes it carried; a change the
    event that carried it; a story the events get_context lists for it (its primary events, its threads' and the
    event that set its state; a cross story every linked event); an experience the events that formed it or where
    it was applied; a story line its own events only (its entities' changes and their events: get_context). Other
    types: relations only."""
    evolution_ref_count: int
    """How many evolution_refs there are in all (0: none of the kinds above is stored for it); get_context lists
    every one. For a story, experience, event or change it is get_context's header evolution_ref_count plus
    relation_count; for a story line a lower bound."""


class SearchResponse(Frame):
    time_basis: TimeBasis
    time_range: dict[Literal["from", "to"], str] | None
    """The range used, in UTC, or null."""
    interpretation: str
    unknown_time_excluded_count: int | Unknown
    """Matches dropped by time_range because their time on time_basis is unknown (0 without a time_range)."""
    query_terms: list[str]
    """The distinct terms the query was split into (Han runs as overlapping pairs)."""
    items: list[SearchItem]
    no_match_note: str | None = None
    """Only when nothing matched (first page, total 0), or the first page is empty because checking candidates
    against a query of very many terms ran out of its work budget: what was searched and what to try next (fewer
    words, no time_range, or another scope this client can read). Null otherwise."""
    query_note: str | None = None
    """First page only, when function terms (common words such as the, for, what, 为什么, and Han pairs holding a
    particle, pronoun or question character such as 案被, 改了) are at least as many as the terms an item needed, or
    hits on this page match through them: which terms those are, and the query's other words as a next query with
    how many items it matches. Null otherwise."""
