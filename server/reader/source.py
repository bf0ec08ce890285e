"""Read the text behind a source reference: its saved fragment, a stored version, or the current text.

Every read checks the reference's own scope; version and current reads also check where the source
lives now. Text is paged by code points and a page reads only the chunks it overlaps (an index range
on source_chunks), so page N of a 10 MB source costs what page 1 of a small one does. Cursors bind
the request, the scope's data revision and the source's state, so any change gives stale_cursor.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final

import aiosqlite
import orjson

from server.contracts.base import GlobalScope, scope_from_key
from server.contracts.common import COVERAGE_LIST_LIMIT, Grant, Page
from server.contracts.errors import StoryGraphError, invalid_cursor, stale_cursor
from server.contracts.source import (
    ContentKind,
    ReadSourceArgs,
    ReadSourceResponse,
    SavedFragment,
    SourceCoverage,
    SourceLocation,
    TextPosition,
    Unavailable,
)
from server.reader.coverage import read_coverage
from server.reader.cursor import CursorCodec, request_digest
from server.reader.db import Database
from server.reader.memo import Memo
from server.reader.scope import ResolvedScope, is_readable, resolve_page_scope

TOOL: Final = "story_graph_read_source"
VERSION_LIST_LIMIT: Final = 50
READABLE_STATUS: Final = "available"

REFERENCE: Final = """
SELECT r.id, r.result_id, r.scope_key, r.source_type, r.original_source_id, r.source_version, r.locator_json,
       r.title, r.fragment, r.fragment_start, r.fragment_end, r.source_length, r.availability,
       r.source_record_time, r.recorded_at, res.review_generated_at, res.coverage_json
  FROM source_references AS r JOIN results AS res ON res.id = r.result_id
 WHERE r.id = :reference_id"""
SOURCE: Final = """
SELECT id, project_id, conversation_id, status, current_version, updated_at
  FROM sources WHERE id = :source_id"""
SOURCE_VERSION: Final = """
SELECT version, length, recorded_at, text_revision FROM source_versions
 WHERE source_id = :source_id AND version = :version"""
SOURCE_VERSIONS: Final = """
SELECT version FROM source_versions WHERE source_id = :source_id ORDER BY recorded_at, version LIMIT :limit"""
SOURCE_VERSION_COUNT: Final = "SELECT count(*) FROM source_versions WHERE source_id = :source_id"
# The chunks overlapping [start, end): from the last chunk starting at or before `start` (one index seek)
# up to the last one starting before `end` (an index range). Chunk sizes are not assumed.
SOURCE_CHUNKS: Final = """
SELECT start, text FROM source_chunks
 WHERE source_id = :source_id AND version = :version AND start < :end
   AND start >= coalesce((SELECT c.start FROM source_chunks AS c
                           WHERE c.source_id = :source_id AND c.version = :version AND c.start <= :start
                           ORDER BY c.start DESC LIMIT 1), 0)
 ORDER BY start"""


class StoredTextBroken(RuntimeError):
    """The stored chunks of a version do not cover its recorded length: a read failure, not an empty page."""


@dataclass(frozen=True)
class Reference:
    id: str
    result_id: str
    scope_key: str
    source_type: str
    original_source_id: str
    source_version: str | None
    locator: dict[str, Any] | None
    title: str | None
    fragment: str
    fragment_start: int | None
    fragment_end: int | None
    source_length: int | None
    availability: str
    source_record_time: str | None
    recorded_at: str
    review_generated_at: str
    coverage: dict[str, Any] | None


@dataclass(frozen=True)
class Source:
    id: str
    project_id: str | None
    conversation_id: str | None
    status: str
    current_version: str | None
    updated_at: str


@dataclass(frozen=True)
class Text:
    """The text a read pages through: the saved fragment (held in memory, it is one row) or a stored version."""

    length: int
    version: str | None = None
    fragment: str | None = None


async def read(
    db: Database, grant: Grant, cursors: CursorCodec, memo: Memo, args: ReadSourceArgs, read_at: str
) -> ReadSourceResponse:
    if args.content_kind == "version" and args.source_version is None:
        raise StoryGraphError(
            "source_version_required",
            "content_kind 'version' needs source_version.",
            field="source_version",
            next_step="Pass source_version (e.g. a reference_version from an earlier read), or read 'snapshot'.",
        )
    request = request_digest(
        TOOL,
        {
            "source_reference_id": args.source_reference_id,
            "content_kind": args.content_kind,
            "source_version": args.source_version,
        },
    )
    cursor = cursors.decode(args.cursor, tool=TOOL, request=request)
    cursor_revision = cursor.revision if cursor else None
    position: dict[str, Any] = cursor.position if cursor else {}

    async with db.snapshot() as conn:
        scope = await resolve_page_scope(conn, grant, args.scope, cursor)
        reference = await _reference(conn, grant, scope, args.source_reference_id)
        source = await _source(conn, reference.original_source_id)
        in_scope = source is not None and _located_in(scope, source)
        readable = source is not None and in_scope and source.status == READABLE_STATUS

        wanted = _wanted_version(args, source)
        version_row = await _version(conn, reference.original_source_id, wanted) if wanted else None
        state = _state(source, wanted, version_row)
        revision = f"{scope.revision}:{state}"
        if cursor_revision is not None and cursor_revision != revision:
            raise stale_cursor()
        if args.content_kind != "snapshot" and source is not None and not in_scope:
            raise StoryGraphError(
                "scope_mismatch",
                "source moved out of the requested scope: where it lives now is outside it.",
                field="source_reference_id",
                next_step="Read content_kind 'snapshot' for the fragment saved with this reference.",
            )

        version_count, versions = 0, list[str]()
        if readable:
            version_count, versions = await _versions(conn, reference.original_source_id)
        kinds: list[ContentKind] = ["snapshot"]
        if version_count:
            kinds.append("version")
        if readable and source is not None and source.current_version is not None:
            kinds.append("current")

        text: Text | None
        if args.content_kind == "snapshot":
            text = Text(length=len(reference.fragment), fragment=reference.fragment)
        elif readable and version_row is not None and wanted is not None:
            text = Text(length=int(version_row["length"]), version=wanted)
        else:
            text = None

        coverage = await read_coverage(conn, memo, scope.key, scope.revision)
        common = _common(reference, source, scope, args, coverage, read_at, kinds, versions, version_count, in_scope)
        object_revision = _object_revision(reference, state)
        if text is None:
            return _unavailable(common, args, reference, source, object_revision)

        offset = _offset(position, text.length) if args.cursor is not None else 0
        end = min(offset + args.page_size, text.length)
        content = await _page(conn, reference, text, offset, end)
        matches: bool | str | None = None
        if args.content_kind == "current":
            # Worked out once, on the first page, and carried in the signed cursor: it is bound to the same
            # source state, and later pages then read only the chunks they overlap.
            matches = _carried(position) if "matches" in position else await _fragment_matches(conn, reference, text)

    has_more = end < text.length
    next_cursor = (
        cursors.encode(
            tool=TOOL,
            request=request,
            scope_key=scope.key,
            revision=revision,
            position={"offset": end} | ({"matches": matches} if matches is not None else {}),
        )
        if has_more
        else None
    )
    snapshot = args.content_kind == "snapshot"
    base = reference.fragment_start if snapshot else 0
    consistent = not snapshot or _fragment_range_consistent(reference)
    return ReadSourceResponse(
        **common,
        page=Page(
            returned_count=end - offset,
            total_count=text.length,
            has_more=has_more,
            complete=not has_more,
            next_cursor=next_cursor,
            limit_reason="page_size" if has_more else None,
        ),
        content_extent="saved_fragment" if snapshot else "source_record",
        source_version=(reference.source_version or "unknown") if snapshot else text.version,
        differs_from_reference=_differs(reference.source_version, None if snapshot else text.version),
        object_revision=object_revision,
        content=content,
        position=TextPosition(
            start=offset,
            end=end,
            source_start=base + offset if base is not None and consistent else "unknown",
            source_end=base + end if base is not None and consistent else "unknown",
        ),
        original_source_length=(reference.source_length if reference.source_length is not None else "unknown")
        if snapshot
        else text.length,
        fragment_matches_current=matches,
        error=None,
        content_note=_note(args.content_kind, reference, source, in_scope, text, offset, end, has_more),
    )


async def _reference(conn: aiosqlite.Connection, grant: Grant, scope: ResolvedScope, reference_id: str) -> Reference:
    """The reference, if it belongs to exactly this scope. One answer for 'no such reference' and 'a reference
    in a scope this caller may not read', so nothing outside the grant leaks."""
    async with conn.execute(REFERENCE, {"reference_id": reference_id}) as cur:
        row = await cur.fetchone()
    if row is None or (
        row["scope_key"] != scope.key and not await is_readable(conn, grant, scope_from_key(row["scope_key"]))
    ):
        raise StoryGraphError(
            "source_not_found",
            "no such source reference is readable in this scope.",
            field="source_reference_id",
            next_step="Use a source_reference_id from a search or get_context item of this scope.",
        )
    if row["scope_key"] != scope.key:
        raise StoryGraphError(
            "scope_mismatch",
            "the source reference belongs to another scope than the requested one.",
            field="source_reference_id",
            next_step="Repeat the call with the scope of the search or get_context call that returned this id.",
        )
    locator = row["locator_json"]
    coverage = row["coverage_json"]
    return Reference(
        id=row["id"],
        result_id=row["result_id"],
        scope_key=row["scope_key"],
        source_type=row["source_type"],
        original_source_id=row["original_source_id"],
        source_version=row["source_version"],
        locator=orjson.loads(locator) if locator is not None else None,
        title=row["title"],
        fragment=row["fragment"],
        fragment_start=row["fragment_start"],
        fragment_end=row["fragment_end"],
        source_length=row["source_length"],
        availability=row["availability"],
        source_record_time=row["source_record_time"],
        recorded_at=row["recorded_at"],
        review_generated_at=row["review_generated_at"],
        coverage=orjson.loads(coverage) if coverage is not None else None,
    )


async def _source(conn: aiosqlite.Connection, source_id: str) -> Source | None:
    async with conn.execute(SOURCE, {"source_id": source_id}) as cur:
        row = await cur.fetchone()
    if row is None:
        return None
    return Source(
        id=row["id"],
        project_id=row["project_id"],
        conversation_id=row["conversation_id"],
        status=row["status"],
        current_version=row["current_version"],
        updated_at=row["updated_at"],
    )


def _wanted_version(args: ReadSourceArgs, source: Source | None) -> str | None:
    if args.content_kind == "version":
        return args.source_version
    if args.content_kind == "current" and source is not None:
        return source.current_version
    return None


def _located_in(scope: ResolvedScope, source: Source) -> bool:
    """Global may read a source anywhere; a project scope only one that lives in one of its projects now."""
    return isinstance(scope.scope, GlobalScope) or source.project_id in scope.project_ids


async def _version(conn: aiosqlite.Connection, source_id: str, version: str) -> aiosqlite.Row | None:
    async with conn.execute(SOURCE_VERSION, {"source_id": source_id, "version": version}) as cur:
        return await cur.fetchone()


async def _versions(conn: aiosqlite.Connection, source_id: str) -> tuple[int, list[str]]:
    async with conn.execute(SOURCE_VERSION_COUNT, {"source_id": source_id}) as cur:
        row = await cur.fetchone()
    count = int(row[0]) if row else 0
    async with conn.execute(SOURCE_VERSIONS, {"source_id": source_id, "limit": VERSION_LIST_LIMIT}) as cur:
        versions = [str(r[0]) for r in await cur.fetchall()]
    return count, versions


def _state(source: Source | None, version: str | None, version_row: aiosqlite.Row | None) -> str:
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
        None
        if version_row is None
        else [version_row["length"], version_row["recorded_at"], version_row["text_revision"]],
    ]
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()[:16]


def _object_revision(reference: Reference, state: str) -> str:
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


def _offset(position: dict[str, Any], length: int) -> int:
    offset = position.get("offset")
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 < offset < length:
        raise invalid_cursor("the cursor position is outside the text; omit cursor to start again.")
    return offset


def _carried(position: dict[str, Any]) -> bool | str:
    matches = position["matches"]
    if matches not in (True, False, "unknown"):
        raise invalid_cursor("the cursor position is malformed.")
    return bool(matches) if isinstance(matches, bool) else "unknown"


async def _page(conn: aiosqlite.Connection, reference: Reference, text: Text, start: int, end: int) -> str:
    if text.fragment is not None:
        return text.fragment[start:end]
    assert text.version is not None
    return await _slice(conn, reference.original_source_id, text.version, start, end)


async def _slice(conn: aiosqlite.Connection, source_id: str, version: str, start: int, end: int) -> str:
    """Code points [start, end) of a stored version, from the chunks that overlap it only."""
    if end <= start:
        return ""
    params = {"source_id": source_id, "version": version, "start": start, "end": end}
    parts: list[str] = []
    expected: int | None = None
    async with conn.execute(SOURCE_CHUNKS, params) as cur:
        async for chunk_start, chunk in cur:
            if (expected is None and chunk_start > start) or (expected is not None and chunk_start != expected):
                raise StoredTextBroken(f"source {source_id!r} version {version!r} has a gap at code point {start}")
            expected = chunk_start + len(chunk)
            parts.append(chunk[max(start - chunk_start, 0) : end - chunk_start])
    text = "".join(parts)
    if len(text) != end - start:
        raise StoredTextBroken(f"source {source_id!r} version {version!r} is shorter than its recorded length")
    return text


async def _fragment_matches(conn: aiosqlite.Connection, reference: Reference, text: Text) -> bool | str:
    """Whether the saved fragment still equals the current text at its saved range."""
    start, end = reference.fragment_start, reference.fragment_end
    if start is None or end is None or text.version is None:
        return "unknown"
    if end > text.length or end - start != len(reference.fragment):
        return False
    return await _slice(conn, reference.original_source_id, text.version, start, end) == reference.fragment


def _fragment_range_consistent(reference: Reference) -> bool:
    start, end = reference.fragment_start, reference.fragment_end
    return start is not None and end is not None and end - start == len(reference.fragment)


def _differs(reference_version: str | None, read_version: str | None) -> bool | str:
    if reference_version is None:
        return "unknown"
    return read_version is not None and read_version != reference_version


def _common(
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
    return {
        "requested_scope": scope.requested,
        "resolved_scope": scope.scope,
        "read_at": read_at,
        "data_revision": scope.revision,
        "coverage": coverage,
        "source_reference_id": reference.id,
        "result_id": reference.result_id,
        "original_source_id": reference.original_source_id,
        "source_type": reference.source_type,
        "title": reference.title,
        "content_kind": args.content_kind,
        "requested_version": args.source_version,
        "reference_version": reference.source_version or "unknown",
        "source_location": _location(reference, source if current else None),
        "availability": reference.availability,
        "original_source_availability": original_availability,
        "source_record_time": reference.source_record_time,
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
        "available_versions": versions,
        "available_version_count": version_count,
        "source_coverage": _source_coverage(reference),
    }


def _location(reference: Reference, source: Source | None) -> SourceLocation:
    """The saved locator's fields as stored, 'missing' where absent; for a version/current read the project and
    conversation are the source's current ones (a source is only read there once it is inside the scope)."""
    saved = reference.locator or {}

    def field(name: str) -> Any:
        value = saved.get(name)
        return "missing" if value is None else value

    project: Any = field("project_id")
    conversation: Any = field("conversation_id")
    if source is not None:
        project = source.project_id if source.project_id is not None else "missing"
        conversation = source.conversation_id if source.conversation_id is not None else "missing"
    return SourceLocation(
        basis="current_source" if source is not None else "saved_reference",
        locator="stored" if reference.locator is not None else "missing",
        project_id=project,
        conversation_id=conversation,
        message_id=field("message_id"),
        order=field("order"),
        role=field("role"),
        document_id=field("document_id"),
        chunk_id=field("chunk_id"),
        external=field("external"),
        start=reference.fragment_start if reference.fragment_start is not None else "missing",
        end=reference.fragment_end if reference.fragment_end is not None else "missing",
    )


def _source_coverage(reference: Reference) -> SourceCoverage:
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
    return SourceCoverage(
        result_id=reference.result_id,
        record="detailed",
        processed=[s for s in record.get("sources", []) if s.get("source_id") == source_id][:COVERAGE_LIST_LIMIT],
        missing=[m for m in record.get("missing", []) if m.get("source_id") == source_id][:COVERAGE_LIST_LIMIT],
    )


def _unavailable(
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
        reason = f"the original source is {source.status}"
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


def _note(
    kind: ContentKind,
    reference: Reference,
    source: Source | None,
    in_scope: bool,
    text: Text,
    start: int,
    end: int,
    has_more: bool,
) -> str:
    more = " More follows: pass next_cursor." if has_more else " This is the last page."
    if kind == "snapshot":
        where = (
            f"saved from [{reference.fragment_start}, {reference.fragment_end}) of the source as reviewed"
            if reference.fragment_start is not None and reference.fragment_end is not None
            else "its position in the source is missing"
        )
        status = (
            f" The original source is {source.status}; this saved fragment is still readable."
            if source is not None and in_scope and source.status != READABLE_STATUS
            else ""
        )
        return (
            f"Code points [{start}, {end}) of the {text.length}-code-point fragment saved with this reference "
            f"({where}); a saved fragment is not the whole source.{status}{more}"
        )
    label = "current text" if kind == "current" else "stored text"
    return (
        f"Code points [{start}, {end}) of the {text.length}-code-point {label} of version {text.version!r} "
        f"of {reference.original_source_id}.{more}"
    )
