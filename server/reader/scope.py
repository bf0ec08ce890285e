"""Resolve the scope of a call against the caller's grant, and read that scope's data and memory revisions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

import aiosqlite
import orjson

from server.contracts.base import GlobalScope, ProjectsScope, normalise_scope, scope_from_key, scope_key
from server.contracts.common import COVERAGE_TEXT_LIMIT, CURSOR_MAX_CHARS, Grant
from server.contracts.errors import (
    StoryGraphError,
    invalid_cursor,
    scope_required,
    scope_unavailable,
    stale_cursor,
)
from server.reader.cursor import DecodedCursor, scope_digest
from server.reader.db import IDS, json_ids, scalar

READABLE_SCOPES_LISTED: Final = 20
"""How many readable scopes a next step names (scope_required, scope_unavailable, a search that found nothing)."""
NAME_CUT: Final = COVERAGE_TEXT_LIMIT + 1
"""Code points of a project's name read with it: enough for `capped_name` to tell a longer name, never a whole
200,000-character one (a name is stored free text)."""
ACTIVE_PROJECTS: Final = (
    f"SELECT id, substr(name, 1, {NAME_CUT}) AS name FROM projects WHERE status = 'active' AND id IN {IDS}"
)
# One statement (one hop to the connection's thread) for what every call reads first: which of the scope's
# projects exist and are active, with their names ([[id, name], ...]: the responses' `project_names`), the scope's
# data and memory revisions, the graph's data revision and the revision of the Global memory items (migrations/0016).
GRAPH_REVISION: Final = "SELECT data_revision FROM graph_state WHERE id = 1"
SCOPE_STATE: Final = f"""
SELECT (SELECT json_group_array(json_array(id, name)) FROM ({ACTIVE_PROJECTS})),
       (SELECT data_revision FROM scopes WHERE scope_key = :scope_key),
       (SELECT memory_revision FROM scopes WHERE scope_key = :scope_key),
       ({GRAPH_REVISION}),
       (SELECT global_memory_revision FROM graph_state WHERE id = 1)"""


@dataclass(frozen=True)
class ResolvedScope:
    requested: GlobalScope | ProjectsScope | Literal["current_project"]
    scope: GlobalScope | ProjectsScope
    key: str
    revision: str
    """The scope's data revision as read in this snapshot ('0' when nothing was ever stored for it): every write
    to the graph data it reads bumps it, a write to a memory item does not."""
    memory_revision: str
    """The revision of the memory items this caller is shown in the scope, as read in this snapshot: the scope's
    own memory revision (its projects' items; the Global scope's: the Global ones), followed by ':' and the revision
    of the Global items when the caller's grant reads Global (only then does it see them: migrations/0016). Only
    get_context's `current` mode reads memory items (migrations/0015)."""
    graph_revision: str
    """The whole graph's data revision, as read in this snapshot: a source edited later changes no scope's revision,
    only this one (get_context's source states are remembered by it)."""
    names: dict[str, str]
    """The stored name of each of the scope's projects (read with the scope, so a readable project's only; at most
    NAME_CUT code points): the responses' `project_names`."""

    @property
    def project_ids(self) -> list[str]:
        return [] if isinstance(self.scope, GlobalScope) else list(self.scope.projectIds)

    def cursor_revision(self, *, with_memory: bool) -> str:
        """What a cursor of this scope is bound to: the data revision, followed by the caller's memory revision for
        a read that shows memory items (a write to a memory item the caller is shown must stale those pages, and
        only those)."""
        return f"{self.revision}:{self.memory_revision}" if with_memory else self.revision


async def resolve_scope(
    conn: aiosqlite.Connection,
    grant: Grant,
    requested: GlobalScope | ProjectsScope | None,
    cursor: DecodedCursor | None = None,
) -> ResolvedScope:
    """The scope a call reads: the explicit one, else the cursor's (paging keeps the first request's scope),
    else the caller's current project. Arguments may only narrow what the grant allows."""
    if requested is not None:
        scope = normalise_scope(requested)
        if cursor is not None and cursor.scope_digest != scope_digest(scope_key(scope)):
            omit = " or omit it" if cursor.scope_key is not None else ""
            raise invalid_cursor(
                f"the cursor was issued for another scope; repeat the original scope{omit}.", fields=["scope"]
            )
    elif cursor is not None:
        if cursor.scope_key is None:
            raise invalid_cursor(
                f"the cursor's scope was too long to carry in its {CURSOR_MAX_CHARS:,} characters; send the scope "
                "of the first page with it.",
                fields=["scope"],
            )
        scope = scope_from_key(cursor.scope_key)
    elif grant.default_project is not None:
        scope = ProjectsScope(kind="projects", projectIds=[grant.default_project])
    else:
        raise scope_required(grant.allow_global)
    if not grant.allows(scope):
        raise await _unavailable(conn, grant, scope, named=requested is not None and cursor is None)
    key = scope_key(scope)
    project_ids = [] if isinstance(scope, GlobalScope) else scope.projectIds
    rows = await conn.execute_fetchall(SCOPE_STATE, {"ids": json_ids(project_ids), "scope_key": key})
    active, revision, memory_revision, graph_revision, global_memory_revision = next(iter(rows))
    names: dict[str, str] = dict(orjson.loads(active))
    if len(names) != len(set(project_ids)):  # every project must exist and be active
        raise await _unavailable(conn, grant, scope, named=requested is not None and cursor is None)
    return ResolvedScope(
        requested=requested if requested is not None else "current_project",
        scope=scope,
        key=key,
        revision=_revision(revision),
        memory_revision=_memory_revision(memory_revision, global_memory_revision, reads_global=grant.allow_global),
        graph_revision=_revision(graph_revision),
        names=names,
    )


async def _unavailable(
    conn: aiosqlite.Connection, grant: Grant, scope: GlobalScope | ProjectsScope, *, named: bool
) -> StoryGraphError:
    """scope_unavailable, saying to omit scope only when that works: the call named its scope (`named`: with no
    cursor, which would keep its own scope), and the caller's current project is another one it may read now. It
    depends on the grant and the call only, never on what the refused scope holds."""
    current = grant.default_project
    works = (
        named
        and current is not None
        and scope != ProjectsScope(kind="projects", projectIds=[current])
        and await is_readable(conn, grant, ProjectsScope(kind="projects", projectIds=[current]))
    )
    return scope_unavailable(omit_reads_current_project=works)


def _memory_revision(own: int | None, global_: int | None, *, reads_global: bool) -> str:
    """What a caller is shown of the memory revisions (ResolvedScope.memory_revision): the scope's own, and the
    Global one only for a grant that reads Global, so that a Global memory write changes nothing a client kept out
    of Global can see. Two forms ('3', '3:5'), so a cursor of one never matches the other."""
    own_part = str(own) if own is not None else "0"
    return f"{own_part}:{global_ if global_ is not None else 0}" if reads_global else own_part


async def resolve_page_scope(
    conn: aiosqlite.Connection,
    grant: Grant,
    requested: GlobalScope | ProjectsScope | None,
    cursor: DecodedCursor | None,
    *,
    with_memory: bool = False,
) -> ResolvedScope:
    """The scope of a page: a continued page keeps its cursor's scope, and is stale once that scope's data (and,
    `with_memory`, the memory items it shows) changed since the first page (pages from different revisions never
    mix). The cursor must have been issued with scope.cursor_revision(with_memory=...) alike."""
    scope = await resolve_scope(conn, grant, requested, cursor)
    if cursor is not None and cursor.revision != scope.cursor_revision(with_memory=with_memory):
        raise stale_cursor(
            "stored evidence or memory items in this scope" if with_memory else "stored evidence in this scope"
        )
    return scope


async def readable_names(
    conn: aiosqlite.Connection, grant: Grant, scope: GlobalScope | ProjectsScope
) -> dict[str, str] | None:
    """The names of the scope's projects by id (none for Global) when this caller may read the scope at all
    (granted, and every project exists and is active); None when it may not. One statement reads both."""
    if not grant.allows(scope):
        return None
    if isinstance(scope, GlobalScope):
        return {}
    found = {
        row[0]: row[1] for row in await conn.execute_fetchall(ACTIVE_PROJECTS, {"ids": json_ids(scope.projectIds)})
    }
    return found if found.keys() == set(scope.projectIds) else None


async def is_readable(conn: aiosqlite.Connection, grant: Grant, scope: GlobalScope | ProjectsScope) -> bool:
    """Whether this caller may read the scope at all (granted, and every project exists and is active)."""
    return await readable_names(conn, grant, scope) is not None


@dataclass(frozen=True)
class Readable:
    """Scopes this caller may read, as `scope` arguments, and the stored names of their projects by id (names only
    of projects it may read: the raw names, at most NAME_CUT code points; `project_names` caps and fits them)."""

    scopes: list[dict[str, Any]]
    names: dict[str, str]


async def readable_among(conn: aiosqlite.Connection, grant: Grant, scope_keys: list[str]) -> Readable:
    """The scopes of `scope_keys` this caller may read, in key order, as a `scope` argument (an error's next step
    names where something is stored: never a scope outside the grant, nor one with an inactive project), with their
    projects' names (read by the same statement that checks each scope)."""
    scopes: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for key in sorted(set(scope_keys)):
        found = await readable_names(conn, grant, scope_from_key(key))
        if found is not None:
            scopes.append(scope_from_key(key).model_dump(by_alias=True))
            names |= found
    return Readable(scopes, names)


SHARED_SCOPES: Final = f"""
SELECT DISTINCT p.scope_key FROM scope_projects AS p JOIN scopes AS s ON s.scope_key = p.scope_key
 WHERE p.project_id IN {IDS} AND s.data_revision > 0
   AND (SELECT count(*) FROM scope_projects AS o WHERE o.scope_key = p.scope_key) > 1
 ORDER BY p.scope_key LIMIT :limit"""
SHARED_SCOPES_READ: Final = 50
"""Project sets read as candidates for `shared_scopes` (a bounded lookup: a search that found nothing names a few)."""


async def shared_scopes(
    conn: aiosqlite.Connection, grant: Grant, project_ids: list[str], but: str, limit: int
) -> Readable:
    """Project sets (two projects or more) holding stored data that share a project with `project_ids`, other than
    the scope `but`, that this caller may read (`readable_among`: only sets of projects in its grant, all active), the
    first `limit` in key order. Work shared by projects is stored under their set: a search that found nothing names
    these rather than a set that may hold nothing (a set of readable projects reveals nothing outside the grant)."""
    rows = await conn.execute_fetchall(SHARED_SCOPES, {"ids": json_ids(project_ids), "limit": SHARED_SCOPES_READ})
    readable = await readable_among(conn, grant, [row[0] for row in rows if row[0] != but])
    return Readable(readable.scopes[:limit], readable.names)


def near_ids(some_id: str) -> list[str]:
    """The stored ids an agent may have meant by `some_id` when it is not stored as sent: the id without the
    whitespace around it (search trims its query, so the same text finds the object there), and that in lower and
    in upper case (an agent retypes EVT-1 for evt-1). Ids stay exact: these are only named in a refusal, never read
    in its place. Each is looked up on the id's own index (no index folds case), so an error costs a few lookups and
    never a scan; an id stored in mixed case is found only when sent in its own case."""
    trimmed = some_id.strip()
    return [near for near in dict.fromkeys((trimmed, trimmed.lower(), trimmed.upper())) if near and near != some_id]


async def readable_holding(
    conn: aiosqlite.Connection,
    grant: Grant,
    some_id: str,
    scopes_of: Callable[[str], Awaitable[list[str]]],
) -> tuple[str, Readable]:
    """Where an id is stored, for scope_required / scope_unavailable to name: the id as stored (`some_id`, else the
    first of its `near_ids` stored in a scope this caller may read) and the scopes holding it that this caller may
    read (`readable_among`), with their projects' names; none: (`some_id`, no scopes). `scopes_of` gives the scope
    keys an exact id is stored in."""
    for candidate in (some_id, *near_ids(some_id)):
        readable = await readable_among(conn, grant, await scopes_of(candidate))
        if readable.scopes:
            return candidate, readable
    return some_id, Readable([], {})


ACTIVE_PROJECT_PAGE: Final = (
    f"SELECT id, substr(name, 1, {NAME_CUT}) FROM projects WHERE status = 'active' ORDER BY id LIMIT :limit"
)
ACTIVE_PROJECT_COUNT: Final = "SELECT count(*) FROM projects WHERE status = 'active'"
GRANTED_PROJECT_PAGE: Final = f"{ACTIVE_PROJECTS} ORDER BY id LIMIT :limit"
GRANTED_PROJECT_COUNT: Final = f"SELECT count(*) FROM projects WHERE status = 'active' AND id IN {IDS}"


async def readable_scopes(
    conn: aiosqlite.Connection, grant: Grant, limit: int
) -> tuple[list[GlobalScope | ProjectsScope], int, dict[str, str]]:
    """The scopes this caller can read now: Global if granted, then each granted active project (by id);
    the first `limit` of them, the total, and the listed projects' names by id (read with them). Only the grant
    decides, never what was asked for."""
    params: dict[str, object] = {"limit": limit}
    if grant.projects == "*":
        page, count = ACTIVE_PROJECT_PAGE, ACTIVE_PROJECT_COUNT
    else:
        page, count = GRANTED_PROJECT_PAGE, GRANTED_PROJECT_COUNT
        params["ids"] = json_ids(grant.projects)
    scopes: list[GlobalScope | ProjectsScope] = [GlobalScope(kind="global")] if grant.allow_global else []
    rows = list(await conn.execute_fetchall(page, params))
    scopes += [ProjectsScope(kind="projects", projectIds=[row[0]]) for row in rows]
    total = int(await scalar(conn, count, params)) + (1 if grant.allow_global else 0)
    listed = scopes[:limit]
    shown = {pid for scope in listed if isinstance(scope, ProjectsScope) for pid in scope.projectIds}
    return listed, total, {row[0]: row[1] for row in rows if row[0] in shown}


async def read_graph_revision(conn: aiosqlite.Connection) -> str:
    """The graph's data revision as this connection's snapshot reads it (ResolvedScope.graph_revision)."""
    return _revision(await scalar(conn, GRAPH_REVISION))  # graph_state's one row: migrations/0001


def _revision(value: object) -> str:
    return str(value) if value is not None else "0"
