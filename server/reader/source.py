"""Read the text behind a source reference: its saved fragment, a stored version, or the current text.

Every read checks the reference's own scope; version and current reads also check where the source
lives now. Text is paged by code points and a page reads only the chunks it overlaps (an index range
on source_chunks), so page N of a 10 MB source costs what page 1 of a small one does. Cursors bind
the request and what a page reads, the reference and the source's state (source_fields.cursor_revision), so a
change to either gives stale_cursor; a write elsewhere in the scope does not. The scope itself is resolved again
on every page: a project hidden or removed is scope_unavailable, as on the first page.

A page is a fixed, small number of statements (each one hop to the connection's thread): the scope,
the reference with everything it points at (source_rows.py), the page's chunks, and on the first page
of a current read the saved fragment's range. The answer's fields are built in source_fields.py.
"""

from __future__ import annotations

from typing import Any, Final

import aiosqlite
import orjson

from server.contracts.base import GlobalScope, scope_from_key
from server.contracts.common import CURSOR_RESERVE, MAX_RESPONSE_BYTES, TEXT_LIMIT, Grant, Page, capped_texts
from server.contracts.errors import (
    StoryGraphError,
    id_difference,
    invalid_cursor,
    stale_cursor,
    stored_in_another_scope,
)
from server.contracts.source import ContentKind, ReadSourceArgs, ReadSourceResponse, TextPosition
from server.reader.coverage import read_coverage
from server.reader.cursor import CursorCodec, request_digest
from server.reader.db import Database
from server.reader.memo import Memo
from server.reader.scope import (
    Readable,
    ResolvedScope,
    is_readable,
    near_ids,
    readable_holding,
    readable_names,
    resolve_scope,
)
from server.reader.source_fields import (
    OUTSIDE_SCOPE_STATE,
    READABLE_STATUS,
    Text,
    common_fields,
    cursor_revision,
    differs,
    fitting_prefix,
    json_size,
    note,
    object_revision,
    response_size,
    state_digest,
    unavailable,
)
from server.reader.source_rows import (
    VERSION_LIST_LIMIT,
    Reference,
    Source,
    Stored,
    StoredTextBroken,
    newest_versions,
    read_slice,
    read_stored,
    references_carrying,
)

__all__ = ["TOOL", "StoredTextBroken", "read"]

TOOL: Final = "story_graph_read_source"
NEWEST_LISTED: Final = 5  # versions source_version_required names (newest first), with a count of the others
REFERENCE_SCOPE: Final = "SELECT scope_key FROM source_references WHERE id = :id"
# A story or experience has no evidence of its own (its events carry it): an id of one in the requested scope.
OWNER_IN_SCOPE: Final = """
SELECT 'story' FROM stories WHERE id = :id AND scope_key = :scope_key
UNION ALL SELECT 'experience' FROM experiences WHERE id = :id AND scope_key = :scope_key
LIMIT 1
"""


async def read(
    db: Database, grant: Grant, cursors: CursorCodec, memo: Memo, args: ReadSourceArgs, read_at: str
) -> ReadSourceResponse:
    request = request_digest(
        TOOL,
        {
            "source_reference_id": args.source_reference_id,
            "content_kind": args.content_kind,
            "source_version": args.source_version,
        },
    )
    cursor = cursors.decode(args.cursor, tool=TOOL, request=request)
    position: dict[str, Any] = cursor.position if cursor else {}

    async with db.snapshot() as conn:
        # Not resolve_page_scope: the cursor is bound to the reference and source below, not to the scope's data
        # revision (a write elsewhere in the scope changes no page of this text).
        try:
            scope = await resolve_scope(conn, grant, args.scope, cursor)
        except StoryGraphError as exc:
            if exc.code not in ("scope_required", "scope_unavailable"):
                raise
            # Where the reference is stored, if this caller may read it there: one call then fixes it.
            stored_id, holding = await _readable_scopes_holding(conn, grant, args.source_reference_id)
            differing = id_difference(args.source_reference_id, stored_id)
            what = f"source reference {stored_id!r}"
            raise exc.naming_where_stored(what, holding.scopes, holding.names, differing) from None
        stored = await _stored_in_scope(conn, grant, scope, args)
        reference, source = stored.reference, stored.source
        in_scope = source is not None and _located_in(scope, source)
        readable = source is not None and in_scope and source.status == READABLE_STATUS
        if args.content_kind == "version" and args.source_version is None:
            # Checked once the reference is known in this scope, so the refusal names the versions that can be sent.
            raise await _version_required(conn, stored, readable)

        wanted = _wanted_version(args, source)
        version_row = stored.version if wanted else None
        # A source living outside the scope counts only as that: its project, status and versions there are not
        # this caller's to see, and a digest of them in object_revision changed with every edit made over there.
        state = state_digest(source, wanted, version_row) if source is None or in_scope else OUTSIDE_SCOPE_STATE
        revision_of_object = object_revision(reference, state)
        revision = cursor_revision(reference, revision_of_object)
        if cursor is not None and cursor.revision != revision:
            raise stale_cursor("this source reference or the source it reads")
        if args.content_kind != "snapshot" and source is not None and not in_scope:
            raise StoryGraphError(
                "scope_mismatch",
                "source moved out of the requested scope: where it lives now is outside it.",
                # No scope reads both the reference and the moved source: only another content_kind works.
                field="content_kind",
                next_step="Read content_kind 'snapshot' for the fragment saved with this reference.",
            )

        version_count, versions = (stored.version_count, stored.versions) if readable else (0, [])
        kinds: list[ContentKind] = ["snapshot"]
        if version_count:
            kinds.append("version")
        if readable and source is not None and source.current_version is not None:
            kinds.append("current")

        text: Text | None
        if args.content_kind == "snapshot":
            text = Text(length=len(reference.fragment), fragment=reference.fragment)
        elif readable and version_row is not None and wanted is not None:
            text = Text(length=version_row.length, version=wanted)
        else:
            text = None

        coverage = await read_coverage(conn, memo, scope.key, scope.revision)
        common = common_fields(
            reference, source, scope, args, coverage, read_at, kinds, versions, version_count, in_scope
        )
        if text is None:
            return unavailable(common, args, reference, source, revision_of_object)

        offset = _offset(position, text.length) if args.cursor is not None else 0
        end = min(offset + args.page_size, text.length)
        page = await _page(conn, reference, text, offset, end)
        matches: bool | str | None = None
        if args.content_kind == "current":
            # Worked out once, on the first page, and carried in the signed cursor: it is bound to the same
            # source state, and later pages then read only the chunks they overlap.
            matches = _carried(position) if "matches" in position else await _fragment_matches(conn, reference, text)

    def answer(end: int, limit_reason: str) -> ReadSourceResponse:
        content = page[: end - offset]
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
        # A snapshot page maps into the source only through a whole saved range (read_stored drops a contradictory one).
        exact = not snapshot or reference.fragment_end is not None
        return ReadSourceResponse(
            **common,
            page=Page(
                returned_count=end - offset,
                total_count=text.length,
                has_more=has_more,
                complete=not has_more,
                next_cursor=next_cursor,
                limit_reason=limit_reason if has_more else None,
            ),
            content_extent="saved_fragment" if snapshot else "source_record",
            **capped_texts(
                {"source_version": (reference.source_version or "unknown") if snapshot else text.version}, TEXT_LIMIT
            ),
            differs_from_reference=differs(reference.source_version, None if snapshot else text.version),
            object_revision=revision_of_object,
            content=content,
            position=TextPosition(
                start=offset,
                end=end,
                source_start=base + offset if base is not None and exact else "unknown",
                source_end=base + end if base is not None and exact else "unknown",
            ),
            original_source_length=(reference.source_length if reference.source_length is not None else "unknown")
            if snapshot
            else text.length,
            fragment_matches_current=matches,
            error=None,
            content_note=note(
                args.content_kind, reference, source, in_scope, text, offset, end, has_more, args.source_version
            ),
        )

    # The page is counted in code points, the response limit in bytes: a page of 8,000 control characters is 48,000
    # bytes of JSON (each a 6-byte escape), and beside a frame of long ids and texts that was over the limit. Such a
    # page holds the code points that fit (at least one), limit_reason 'response_budget'; the next page reads on.
    response, room = answer(end, "page_size"), json_size(page)
    while (excess := response_size(response) - MAX_RESPONSE_BYTES) > 0 and response.page.returned_count > 1:
        # Measured again after the cut: the cut page gains a next_cursor (sized by the scope's project ids).
        room -= excess + CURSOR_RESERVE
        response = answer(offset + fitting_prefix(page, room), "response_budget")
    return response


async def _stored_in_scope(
    conn: aiosqlite.Connection, grant: Grant, scope: ResolvedScope, args: ReadSourceArgs
) -> Stored:
    """The reference, if it belongs to exactly this scope. One answer for 'no such reference' and 'a reference
    in a scope this caller may not read', so nothing outside the grant leaks."""
    stored = await read_stored(conn, args.source_reference_id, args.content_kind, args.source_version)
    scope_key = stored.reference.scope_key if stored is not None else None
    # Another scope's projects' names are read with the check that it is readable (one statement), for scope_mismatch.
    other_names = (
        await readable_names(conn, grant, scope_from_key(scope_key))
        if scope_key is not None and scope_key != scope.key
        else None
    )
    if scope_key is None or (scope_key != scope.key and other_names is None):
        carrying = await references_carrying(conn, scope.key, args.source_reference_id)
        near = await _near_reference(conn, grant, scope, args.source_reference_id)
        owner = None if carrying or near else await _owner_in_scope(conn, scope.key, args.source_reference_id)
        raise StoryGraphError(
            "source_not_found",
            "no such source reference is readable in this scope.",
            field="source_reference_id",
            next_step=(
                near
                if near is not None
                else f"That id names a source, message, task or object; the source references of this scope that "
                f"carry it: {', '.join(carrying)}. Call again with one of them."
                if carrying
                else owner
                if owner is not None
                else "Use a source_reference_id from a search or get_context item of this scope."
            ),
        )
    if scope_key != scope.key:
        other = scope_from_key(scope_key).model_dump(by_alias=True)
        raise stored_in_another_scope(f"source reference {args.source_reference_id!r}", other, other_names or {})
    assert stored is not None
    return stored


async def _readable_scopes_holding(conn: aiosqlite.Connection, grant: Grant, reference_id: str) -> tuple[str, Readable]:
    """The reference id as stored (the one sent, else a near id, as source_not_found names it) and the scope it is
    stored in, when this caller may read it (never one outside the grant)."""

    async def scopes_of(some_id: str) -> list[str]:
        return [str(row[0]) for row in await conn.execute_fetchall(REFERENCE_SCOPE, {"id": some_id})]

    return await readable_holding(conn, grant, reference_id, scopes_of)


async def _near_reference(conn: aiosqlite.Connection, grant: Grant, scope: ResolvedScope, some_id: str) -> str | None:
    """The next step for a reference id copied with whitespace around it or retyped in another letter case, when a
    near id is a reference of this scope or of another one the caller may read (never read in its place: ids are
    exact; a hidden scope stays unnamed)."""
    for near in near_ids(some_id):
        rows = list(await conn.execute_fetchall(REFERENCE_SCOPE, {"id": near}))
        if not rows:
            continue
        key = str(rows[0][0])
        where = ""
        if key != scope.key:
            if not await is_readable(conn, grant, scope_from_key(key)):
                continue
            where = f" and scope {orjson.dumps(scope_from_key(key).model_dump(by_alias=True)).decode()}"
        return f"{id_difference(some_id, near)}; {near!r} is stored: call again with that id{where}."
    return None


async def _owner_in_scope(conn: aiosqlite.Connection, scope_key: str, some_id: str) -> str | None:
    """The next step for a story's or experience's id: it cites no source itself, its listed events do, each in its
    own scope. Read only in the requested scope, so nothing leaks."""
    rows = list(await conn.execute_fetchall(OWNER_IN_SCOPE, {"id": some_id, "scope_key": scope_key}))
    if not rows:
        return None
    ref = orjson.dumps({"type": rows[0][0], "id": some_id}).decode()
    return (
        f"That id is a {rows[0][0]} of this scope, which has no source references of its own: its events carry "
        f"them. Call story_graph_get_context with object_ref {ref}; each event item lists its source_reference_ids "
        "and its own scope: read them with that scope."
    )


async def _version_required(conn: aiosqlite.Connection, stored: Stored, readable: bool) -> StoryGraphError:
    """content_kind 'version' without source_version, naming what can be sent: the source's newest stored versions
    (only when this scope may read the source: nothing about a source outside it is said) and the one the reference
    was saved from. The reference's reference_version alone is no answer: it is 'unknown' for a reference saved
    without one, and may name a version that is not stored."""
    reference, source = stored.reference, stored.source
    saved = reference.source_version
    newest = await newest_versions(conn, reference.original_source_id, NEWEST_LISTED) if readable else []
    if saved is None:
        origin = "the version this reference was saved from is not recorded (reference_version 'unknown')"
    elif not readable:
        origin = f"this reference was saved from {saved!r}"
    elif not stored.reference_version_stored:
        origin = f"this reference was saved from {saved!r}, which is not stored"
    elif saved not in newest:
        origin = f"this reference was saved from {saved!r}, an older stored version"
    else:
        origin = ""
    if newest and source is not None:

        def marked(name: str) -> str:
            marks = [
                mark
                for mark, is_it in (("current", name == source.current_version), ("reference_version", name == saved))
                if is_it
            ]
            return f"{name!r}" + (f" ({', '.join(marks)})" if marks else "")

        count = stored.version_count
        listed = ", ".join(marked(name) for name in newest)
        if count > len(newest):
            listed += (
                f" (and {count - len(newest)} older; a read's available_versions lists the oldest {VERSION_LIST_LIMIT})"
            )
        which = "the one stored version" if count == 1 else f"one of the {count} stored versions"
        current = "'current' (its current text) or " if source.current_version is not None else ""
        next_step = (
            f"Pass source_version, {which} of source {reference.original_source_id!r}"
            + (", newest first" if count > 1 else "")
            + f": {listed}"
            + (f"; {origin}" if origin else "")
            + f". Or read content_kind {current}'snapshot' (the fragment saved with this reference)."
        )
    else:
        next_step = (
            f"No version of this reference's source can be read in this scope ({origin}): read content_kind "
            "'snapshot', the fragment saved with this reference."
        )
    error = StoryGraphError(
        "source_version_required",
        "content_kind 'version' needs source_version.",
        field="source_version",
        next_step=next_step,
    )
    error.payload = error.payload.model_copy(
        update={
            "newest_versions": newest,
            "available_version_count": stored.version_count if readable else 0,
            "reference_version": saved if saved is not None else "unknown",
        }
    )
    return error


def _wanted_version(args: ReadSourceArgs, source: Source | None) -> str | None:
    if args.content_kind == "version":
        return args.source_version
    if args.content_kind == "current" and source is not None:
        return source.current_version
    return None


def _located_in(scope: ResolvedScope, source: Source) -> bool:
    """Global may read a source anywhere; a project scope only one that lives in one of its projects now."""
    return isinstance(scope.scope, GlobalScope) or source.project_id in scope.project_ids


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
    return await read_slice(conn, reference.original_source_id, text.version, start, end)


async def _fragment_matches(conn: aiosqlite.Connection, reference: Reference, text: Text) -> bool | str:
    """Whether the saved fragment still equals the current text at its saved range."""
    start, end = reference.fragment_start, reference.fragment_end
    if start is None or end is None or text.version is None:
        return "unknown"
    if end > text.length:
        return False
    return await read_slice(conn, reference.original_source_id, text.version, start, end) == reference.fragment
