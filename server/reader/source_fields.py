"""What a read_source answer says besides the text: the fields shared by a page and an 'unavailable' result,
the source location and coverage, the digests that bind cursors, and the one-sentence note.

Projections only: no SQL here (source_rows.py reads the rows).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import orjson
from pydantic import BaseModel

from server.contracts.common import TEXT_LIMIT, Page, capped_name, capped_texts, fitting, project_names
from server.contracts.source import (
    AVAILABLE_VERSIONS_BYTES,
    EXTERNAL_LOCATOR_BYTES,
    SOURCE_COVERAGE_BYTES,
    SOURCE_COVERAGE_LIST_LIMIT,
    ContentKind,
    ReadSourceArgs,
    ReadSourceResponse,
    SavedFragment,
    SourceCoverage,
    SourceLocation,
    Unavailable,
)
from server.reader.scope import ResolvedScope
from server.reader.source_rows import VERSION_LIST_LIMIT, Reference, Source, Version

READABLE_STATUS: Final = "available"
OUTSIDE_SCOPE_STATE: Final = "outside_scope"
"""state_digest's stand-in for a source that lives outside the read's scope: nothing of its state is read, so edits
to it there stale no cursor and change no object_revision of a reader who may not see them."""


@dataclass(frozen=True)
class Text:
    """The text a read pages through: the saved fragment (held in memory, it is one row) or a stored version."""

    length: int
    version: str | None = None
    fragment: str | None = None


def state_digest(source: Source | None, version: str | None, version_row: Version | None) -> str:
    """A short digest of the source state a read depends on: any change to it makes cursors stale."""
    parts: list[Any] = [
        None
        if source is None
        else [
            source.project_id,
            source.conversation_id,
            source.status,
            source.current_version,
            source.updated_at,
        ],
        version,
        # text_revision changes with any write to the version's chunks: a text rewritten in place is stale too.
        None if version_row is None else [version_row.length, version_row.recorded_at, version_row.text_revision],
    ]
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()[:16]


def object_revision(reference: Reference, state: str) -> str:
    parts = [
        reference.id,
        reference.result_id,
        reference.scope_key,
        reference.source_type,
        reference.original_source_id,
        reference.source_version,
        reference.locator,
        reference.title,
        reference.fragment,
        reference.fragment_start,
        reference.fragment_end,
        reference.source_length,
        reference.availability,
        reference.source_record_time,
        reference.recorded_at,
        state,
    ]
    return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).hexdigest()


def cursor_revision(reference: Reference, revision_of_object: str) -> str:
    """What a read_source cursor is bound to: everything a page reads of the reference and its source, not the
    scope's data revision, so a write elsewhere in the scope leaves the paging alone. object_revision covers the
    reference's own row, its saved range as checked against its version's stored text, and the source's state
    (state_digest: location, status, current version and the read version's text revision); the reference's
    result adds its review time and coverage, which every page shows."""
    parts = [revision_of_object, reference.review_generated_at, reference.coverage]
    return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


def differs(reference_version: str | None, read_version: str | None) -> bool | str:
    if reference_version is None:
        return "unknown"
    return read_version is not None and read_version != reference_version


def common_fields(
    reference: Reference,
    source: Source | None,
    scope: ResolvedScope,
    args: ReadSourceArgs,
    coverage: Any,
    read_at: str,
    kinds: list[ContentKind],
    versions: list[str],
    version_count: int,
    in_scope: bool,
) -> dict[str, Any]:
    """Fields shared by a text page and an 'unavailable' result."""
    if source is None:
        original_availability = "unknown"
    elif not in_scope:
        original_availability = "outside_scope"
    else:
        original_availability = source.status
    current = args.content_kind != "snapshot" and source is not None
    # Every text shown from the reference or source row is free text to an import: one of 200,000 characters (a
    # title, a version, a record time) made every read of the reference response_too_large at any page_size. Each
    # keeps its first TEXT_LIMIT code points, `<field>_is_excerpt: true` beside a cut one.
    texts = {
        "source_type": reference.source_type,
        "title": reference.title,
        "reference_version": reference.source_version or "unknown",
        "availability": reference.availability,
        "original_source_availability": original_availability,
        "source_record_time": reference.source_record_time,
    }
    return capped_texts(texts, TEXT_LIMIT) | {
        "requested_scope": scope.requested,
        "resolved_scope": scope.scope,
        "project_names": project_names(scope.names),
        "read_at": read_at,
        "data_revision": scope.revision,
        "coverage": coverage,
        "source_reference_id": reference.id,
        "result_id": reference.result_id,
        "original_source_id": reference.original_source_id,
        "content_kind": args.content_kind,
        "requested_version": args.source_version,
        "source_location": location(reference, source if current else None),
        "event_time": None,
        "review_generated_at": reference.review_generated_at,
        "recorded_at": reference.recorded_at,
        "saved_fragment": SavedFragment(
            start=reference.fragment_start if reference.fragment_start is not None else "unknown",
            end=reference.fragment_end if reference.fragment_end is not None else "unknown",
            length=len(reference.fragment),
        ),
        "reviewed_source_length": reference.source_length if reference.source_length is not None else "unknown",
        "available_content_kinds": kinds,
        # Version names are ids (256 code points, up to 1,538 bytes of JSON): 50 of them were 77 KB.
        "available_versions": fitting(versions, limit=VERSION_LIST_LIMIT, budget=AVAILABLE_VERSIONS_BYTES),
        "available_version_count": version_count,
        "source_coverage": source_coverage(reference),
    }


LOCATOR_TEXTS: Final = ("project_id", "conversation_id", "message_id", "role", "document_id", "chunk_id", "task_id")


def location(reference: Reference, source: Source | None) -> SourceLocation:
    """The saved locator's fields as stored, 'missing' where absent; for a version/current read the project and
    conversation are the source's current ones (a source is only read there once it is inside the scope)."""
    saved = reference.locator or {}

    def field(name: str) -> Any:
        value = saved.get(name)
        return "missing" if value is None else value

    texts: dict[str, Any] = {name: field(name) for name in LOCATOR_TEXTS}
    if source is not None:
        texts["project_id"] = source.project_id if source.project_id is not None else "missing"
        texts["conversation_id"] = source.conversation_id if source.conversation_id is not None else "missing"
    external = field("external")
    external, external_cut = bounded_external(external) if isinstance(external, dict) else (external, False)
    return SourceLocation(
        basis="current_source" if source is not None else "saved_reference",
        locator="stored" if reference.locator is not None else "missing",
        order=field("order"),
        external=external,
        external_is_excerpt=external_cut,
        start=reference.fragment_start if reference.fragment_start is not None else "missing",
        end=reference.fragment_end if reference.fragment_end is not None else "missing",
        # A locator's fields are open texts as stored (an import bounds none of them): each at most TEXT_LIMIT.
        **capped_texts(texts, TEXT_LIMIT),
    )


def bounded_external(external: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The `external` locator whole when its JSON fits in EXTERNAL_LOCATOR_BYTES; otherwise its first entries, in
    stored order, each text capped as a coverage entry's (`<key>_is_excerpt: true` beside it), while they fit, and
    True (`external_is_excerpt`). A nested value or a key too large to fit ends the list."""
    if len(orjson.dumps(external)) <= EXTERNAL_LOCATOR_BYTES:
        return external, False
    kept: dict[str, Any] = {}
    used = 2  # the braces
    for key, value in external.items():
        entry = capped_texts({key: value}, TEXT_LIMIT)
        size = len(orjson.dumps(entry)) - 1  # its members and a comma
        if used + size > EXTERNAL_LOCATOR_BYTES:
            break
        kept |= entry
        used += size
    return kept, True


def source_coverage(reference: Reference) -> SourceCoverage:
    record = reference.coverage
    kind = "absent" if record is None else str(record.get("kind"))
    if record is None or kind != "detailed":
        return SourceCoverage(
            result_id=reference.result_id,
            record="legacy_count" if kind == "legacy_count" else "absent",
            processed="unknown",
            missing="unknown",
        )
    source_id = reference.original_source_id
    processed = [s for s in record.get("sources", []) if s.get("source_id") == source_id]
    missing = [m for m in record.get("missing", []) if m.get("source_id") == source_id]
    return SourceCoverage(
        result_id=reference.result_id,
        record="detailed",
        # An entry's own ranges are capped alike (with their count): thousands of them made the read too large.
        # So are its texts (a reason, a version: COVERAGE_TEXT_LIMIT code points, `<field>_is_excerpt` when cut).
        processed=_source_coverage_fitting(capped_texts(_capped(s, "fragments", "fragment_count")) for s in processed),
        processed_count=len(processed),
        missing=_source_coverage_fitting(capped_texts(_capped(m, "ranges", "range_count")) for m in missing),
        missing_count=len(missing),
    )


def json_size(value: Any) -> int:
    """Bytes of `value` as the response writes it (compact JSON)."""
    return len(orjson.dumps(value))


def response_size(response: BaseModel) -> int:
    return json_size(response.model_dump(mode="json", by_alias=True))


def fitting_prefix(text: str, budget: int) -> int:
    """How many leading code points of `text` fit in `budget` bytes of JSON (a control character costs 6, an emoji
    4); at least one, so every page reads on."""
    used = 2  # the quotes
    for count, char in enumerate(text):
        used += len(orjson.dumps(char)) - 2
        if used > budget:
            return max(count, 1)
    return len(text)


def _source_coverage_fitting(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first entries (at most SOURCE_COVERAGE_LIST_LIMIT) whose JSON fits in SOURCE_COVERAGE_BYTES: 50 entries of
    50 ranges each were over the response limit by themselves (the count beside the list gives them all)."""
    return fitting(entries, limit=SOURCE_COVERAGE_LIST_LIMIT, budget=SOURCE_COVERAGE_BYTES)


def _capped(entry: dict[str, Any], key: str, count_key: str) -> dict[str, Any]:
    """The entry with its first SOURCE_COVERAGE_LIST_LIMIT ranges under `key`, and how many there are."""
    ranges = entry.get(key)
    if not isinstance(ranges, list):
        return entry
    return {**entry, key: ranges[:SOURCE_COVERAGE_LIST_LIMIT], count_key: len(ranges)}


def unavailable(
    common: dict[str, Any],
    args: ReadSourceArgs,
    reference: Reference,
    source: Source | None,
    object_revision: str,
) -> ReadSourceResponse:
    """A normal result saying the requested kind cannot be read; no other kind's text is put in its place."""
    error: Unavailable = (
        "historical_version_unavailable" if args.content_kind == "version" else "current_source_unavailable"
    )
    if source is None:
        reason = "no record of the original source is stored"
    elif source.status != READABLE_STATUS:
        reason = f"the original source is {capped_name(source.status)}"
    elif args.content_kind == "version":
        reason = f"version {args.source_version!r} of the source is not stored"
    else:
        reason = "the source has no readable current text"
    kinds = ", ".join(common["available_content_kinds"])
    return ReadSourceResponse(
        **common,
        page=Page(
            returned_count=0,
            total_count="unknown",
            has_more=False,
            complete=False,
            next_cursor=None,
            limit_reason="content_unavailable",
        ),
        content_extent=None,
        source_version=None,
        differs_from_reference="unknown",
        object_revision=object_revision,
        content=None,
        position=None,
        original_source_length="unknown",
        fragment_matches_current=None,
        error=error,
        content_note=(
            f"The requested {args.content_kind} text of {reference.original_source_id} cannot be read: {reason}. "
            f"No other text was substituted; readable kinds here: {kinds}."
        ),
    )


def note(
    kind: ContentKind,
    reference: Reference,
    source: Source | None,
    in_scope: bool,
    text: Text,
    start: int,
    end: int,
    has_more: bool,
    requested_version: str | None = None,
) -> str:
    more = " More follows: pass next_cursor." if has_more else " This is the last page."
    more += _version_not_used(kind, reference, text, requested_version)
    more = _not_current(kind, reference, source, in_scope, text) + more
    if kind == "snapshot":
        where = (
            f"saved from [{reference.fragment_start}, {reference.fragment_end}) of the source as reviewed"
            if reference.fragment_start is not None and reference.fragment_end is not None
            else f"{reference.contradiction}, so its position in the source is unknown"
            if reference.contradiction is not None
            else "its position in the source is missing"
        )
        status = (
            f" The original source is {capped_name(source.status)}; this saved fragment is still readable."
            if source is not None and in_scope and source.status != READABLE_STATUS
            else " The original source has moved out of this scope; this saved fragment is still readable."
            if source is not None and not in_scope
            else ""
        )
        return (
            f"Code points [{start}, {end}) of the {text.length}-code-point fragment saved with this reference "
            f"({where}); a saved fragment is not the whole source.{status}{more}"
        )
    label = "current text" if kind == "current" else "stored text"
    return (
        f"Code points [{start}, {end}) of the {text.length}-code-point {label} of version "
        f"{capped_name(text.version or '')!r} "
        f"of {reference.original_source_id}.{more}"
    )


def _not_current(kind: ContentKind, reference: Reference, source: Source | None, in_scope: bool, text: Text) -> str:
    """A snapshot or a stored version of a source edited since: the text read is not what the source says now, and
    nothing else in the answer says so (differs_from_reference compares with the referenced version only). Quoting it
    as the source's wording would be wrong: name the current version and the read that shows it."""
    if kind == "current" or source is None or not in_scope or source.status != READABLE_STATUS:
        return ""  # current is the current text; a source deleted or moved out has no current text to read here
    shown = reference.source_version if kind == "snapshot" else text.version
    now = source.current_version
    if shown is None or now is None or shown == now:
        return ""
    shown, now = capped_name(shown), capped_name(now)  # a sentence has no room for a flag: '…'
    if kind == "snapshot":
        return (
            f" The source has changed since this reference was saved: its current version is {now!r} (the fragment is "
            f"from {shown!r}); read content_kind 'current' for what it says now."
        )
    return f" This is not the source's current version, {now!r}: read content_kind 'current' for what it says now."


def _version_not_used(kind: ContentKind, reference: Reference, text: Text, requested: str | None) -> str:
    """source_version selects text only with 'version': with the other kinds it is echoed, and the page shows
    another version's text. Say so when it differs from the version read, so the text is not quoted as it."""
    shown = reference.source_version if kind == "snapshot" else text.version
    if requested is None or kind == "version" or requested == shown:
        return ""
    what = "a snapshot is the fragment saved with the reference" if kind == "snapshot" else "this is the current text"
    of = f" (version {capped_name(shown)!r})" if shown is not None else " (its version is unknown)"
    return (
        f" source_version {requested!r} was not used: {what}{of}; read content_kind 'version' with source_version "
        f"{requested!r} for that version's text."
    )
