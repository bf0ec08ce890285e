"""story_graph_read_source: input and output.

Positions are zero-based, half-open `[start, end)` Unicode code-point ranges. What is not stored is
`"unknown"` (a number that could not be known) or `"missing"` (a locator field that was never saved);
nothing is invented.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, Strict

from server.contracts.base import Contract
from server.contracts.common import Cursor, ExcerptFlag, Frame, ScopeArg, ToolArgs, Unknown

ContentKind = Literal["snapshot", "version", "current"]
ContentExtent = Literal["saved_fragment", "current_reference_fragment", "source_record"]
Missing = Literal["missing"]
Unavailable = Literal["historical_version_unavailable", "current_source_unavailable"]
UNIT: Literal["unicode_code_point"] = "unicode_code_point"


class ReadSourceArgs(ToolArgs):
    source_reference_id: Annotated[str, Field(min_length=1, max_length=256)]
    """A `source_reference_ids` entry from a search or get_context item (not a message or task id)."""
    scope: ScopeArg = None
    content_kind: ContentKind = "snapshot"
    """snapshot: only the fragment saved with the reference (default); version: the stored text of
    `source_version`; current: the source's current text, read through its stored location."""
    source_version: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    """Required with content_kind 'version'; echoed as requested_version otherwise."""
    page_size: Annotated[int, Strict(), Field(ge=1, le=8000)] = 4000
    """Unicode code points per page (1–8,000)."""
    cursor: Cursor | None = None
    """next_cursor of the previous page, unchanged, with the same source_reference_id, content_kind and
    source_version (page_size may change); omit for the first page."""


EXTERNAL_LOCATOR_BYTES = 4_000
"""How much of an `external` locator read_source shows, as compact JSON: a locator names where a fragment lives (a
system, a key, a URL), so a real one is far smaller, but the object is open and kept as stored, and one of 200,000
characters made every read of its reference response_too_large. A larger one shows its first entries that fit, each
text at most TEXT_LIMIT code points, and `external_is_excerpt: true`; get_context's content of the reference holds
it whole."""


AVAILABLE_VERSIONS_BYTES = 4_000
"""How much JSON `available_versions` may hold: its first names (at most 50) that fit. A version name is an id, up to
256 code points and 1,538 bytes of JSON (in 6-byte escapes), so 50 of them were 77 KB, with the rest of an answer
over the response limit at any page_size; 50 ordinary names (a UUID each) are under 2,000 bytes, all listed."""


class SourceLocation(Contract):
    """Where the text comes from. Fields never saved are 'missing'; no link or position is invented. Each text is at
    most TEXT_LIMIT (256) code points, with `<field>_is_excerpt: true` beside one that was cut."""

    basis: Literal["saved_reference", "current_source"]
    """saved_reference: the locator saved with the reference; current_source: project and conversation are the
    source's current ones (the other fields still come from the saved locator)."""
    locator: Literal["stored", "missing"]
    """'missing': an old reference saved without a locator."""
    project_id: str | Missing
    conversation_id: str | Missing
    message_id: str | Missing
    order: int | Missing
    role: str | Missing
    document_id: str | Missing
    chunk_id: str | Missing
    task_id: str | Missing
    external: dict[str, Any] | Missing
    """An external fragment's own locator, as stored; one over EXTERNAL_LOCATOR_BYTES (4,000) bytes of JSON shows its
    first entries that fit (each text its first 256 code points, `<key>_is_excerpt: true` beside it) and
    `external_is_excerpt: true` (get_context's content of the reference holds it whole)."""
    start: int | Missing
    """Where the saved fragment starts in the source it was saved from."""
    end: int | Missing
    unit: Literal["unicode_code_point"] = UNIT
    project_id_is_excerpt: ExcerptFlag = False
    conversation_id_is_excerpt: ExcerptFlag = False
    message_id_is_excerpt: ExcerptFlag = False
    role_is_excerpt: ExcerptFlag = False
    document_id_is_excerpt: ExcerptFlag = False
    chunk_id_is_excerpt: ExcerptFlag = False
    task_id_is_excerpt: ExcerptFlag = False
    external_is_excerpt: ExcerptFlag = False


class TextPosition(Contract):
    """This page within the text being read."""

    start: int
    end: int
    unit: Literal["unicode_code_point"] = UNIT
    source_start: int | Unknown
    """The page's start in the whole source (equals start for version/current; for a snapshot, the saved
    fragment's start plus start, or 'unknown' when the fragment's range was not saved)."""
    source_end: int | Unknown


class SavedFragment(Contract):
    """The fragment saved with the reference: its range in the source as reviewed, and its own length."""

    start: int | Unknown
    end: int | Unknown
    length: int
    """Code points of the saved fragment text."""


SOURCE_COVERAGE_LIST_LIMIT = 50
"""How many entries read_source's `source_coverage` lists give: they concern the one source being read, so they
are longer than the scope coverage's examples (COVERAGE_LIST_LIMIT)."""
SOURCE_COVERAGE_BYTES = 8_000
"""And how much JSON each of its two lists may hold: its first entries (at most SOURCE_COVERAGE_LIST_LIMIT) that fit.
By count alone a legal record could not be shown: 50 entries of 50 ranges each are 50 × 50 × up to 44 bytes, 110 KB
for one list, over the 100,000-byte response limit at any page_size. With this bound the whole answer fits by
construction: two lists of 8,000 bytes, a content page of 8,000 code points (at most 48,000 bytes, a control
character escaped), the texts beside it (each at most 256 code points) and the frame. One entry always fits: at most
50 ranges (2,200 bytes) and two texts of 256 code points (at most 1,536 bytes each). `processed_count` and
`missing_count` say how many entries there are."""


class SourceCoverage(Contract):
    """What the reference's own review result recorded about processing this source."""

    result_id: str
    record: Literal["detailed", "legacy_count", "absent"]
    """The kind of coverage record that result has; only a detailed one names sources."""
    processed: list[dict[str, Any]] | Unknown
    """Entries for this source in the detailed record (version, fragments, status): the first 50 that fit in
    SOURCE_COVERAGE_BYTES (8,000) bytes of JSON, `processed_count` how many there are; 'unknown' without one. Each
    entry's `fragments` holds its first 50 ranges, `fragment_count` how many there are; each text (version, status)
    its first COVERAGE_TEXT_LIMIT (256) code points, with `<field>_is_excerpt: true` when cut."""
    processed_count: int | Unknown = "unknown"
    """How many entries the record has for this source (`processed` lists the first that fit)."""
    missing: list[dict[str, Any]] | Unknown
    """Unprocessed ranges of this source the record names (the first 50 entries that fit in 8,000 bytes of JSON,
    each with its first 50 `ranges` and `range_count`, its `reason` the first 256 code points, `reason_is_excerpt:
    true` when cut); 'unknown' without a detailed record."""
    missing_count: int | Unknown = "unknown"
    """How many unprocessed parts of this source the record names (`missing` lists the first that fit)."""


class ReadSourceResponse(Frame):
    source_reference_id: str
    result_id: str
    """The review result that saved the reference."""
    original_source_id: str
    source_type: str
    """Open set: conversation, task, note, memory, knowledge, ..."""
    title: str | None
    """At most TEXT_LIMIT (256) code points, as every text this answer shows from the reference or source row
    (source_type, the versions, availability, original_source_availability, source_record_time, the locator's):
    `<field>_is_excerpt: true` is added beside one that was cut (absent otherwise)."""
    title_is_excerpt: ExcerptFlag = False
    source_type_is_excerpt: ExcerptFlag = False
    content_kind: ContentKind
    requested_version: str | None
    """The source_version argument, or null."""
    content_extent: ContentExtent | None
    """saved_fragment (snapshot) or source_record (the whole stored text of a version); null when nothing was read."""
    source_version: str | Unknown | None
    """The version whose text is returned ('unknown' for a snapshot whose version was not saved; null when
    nothing was read)."""
    source_version_is_excerpt: ExcerptFlag = False
    reference_version: str | Unknown
    """The version the reference was saved from."""
    reference_version_is_excerpt: ExcerptFlag = False
    differs_from_reference: bool | Unknown
    """Whether source_version differs from reference_version; 'unknown' when either is unknown."""
    object_revision: str
    """A digest of everything this read depends on (reference, source state, version read)."""
    source_location: SourceLocation
    availability: str
    """The reference's stored availability (e.g. available, source_deleted)."""
    availability_is_excerpt: ExcerptFlag = False
    original_source_availability: str
    """The original source now: its stored status (available, deleted, inaccessible), outside_scope when it has
    moved out of the requested scope (nothing says where), or unknown when no source record is stored."""
    original_source_availability_is_excerpt: ExcerptFlag = False
    source_record_time: str | None
    """The source record's own time, as stored (not normalised)."""
    source_record_time_is_excerpt: ExcerptFlag = False
    event_time: None
    """Always null: a source reference is not an event; read event times with get_context."""
    review_generated_at: str
    recorded_at: str
    """When the reference was recorded."""
    content: str | None
    """This page of text; null when the requested kind is unavailable (never another kind's text)."""
    position: TextPosition | None
    saved_fragment: SavedFragment
    reviewed_source_length: int | Unknown
    """Code points of the whole source when the reference was saved."""
    original_source_length: int | Unknown
    """Code points of the whole text of the version read (version/current); for a snapshot, as reviewed."""
    fragment_matches_current: bool | Unknown | None
    """content_kind current only: whether the saved fragment still equals the current text at its saved range
    ('unknown' without a saved range); null for the other kinds."""
    available_content_kinds: list[ContentKind]
    """The kinds that can be read for this reference in this scope now."""
    available_versions: list[str]
    """Readable stored versions of the source (first 50, oldest first, as many as fit in AVAILABLE_VERSIONS_BYTES
    (4,000) of JSON: `available_version_count` counts them all); empty when version reads are refused."""
    available_version_count: int
    error: Unavailable | None = Field(default=None, exclude_if=lambda value: value is None)
    """Present only when the requested kind cannot be read (a normal result; content is null); omitted on
    success, as upstream does."""
    content_note: str
    """One sentence on what this page is, and what it is not (a saved fragment or a stored version of a source that
    has changed since names the current version: read 'current' for what the source says now)."""
    source_coverage: SourceCoverage
