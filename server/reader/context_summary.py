"""What every page of one get_context query shares, computed once per scope revision, and a page's objects.

The summary of a query (object, time filter, scope revision) is its whole selection (context.select)
reduced to what pages need: the header, the known gaps and the counts (exact: they are counted from the
selection itself), the keyset arms that serve the large direct sections, and, in stream order, every
other selected object, the background memory items included. It is remembered in the server's Memo under
the scope's data revision and the caller's memory revision (memo.with_memory), so it is never stale: a write to
the scope's data or to a memory item the caller is shown changes them, and the cursors of the old ones are refused
as stale before the summary is looked up (a timeline's cursor only after a data write: its pages hold no memory
items).

A page then costs what it holds: the remembered objects from its position on (a bisection), the arms'
rows from its position on (one keyset query each, LIMIT the page), and the content of those objects.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

import aiosqlite

from server.contracts.common import Coverage
from server.contracts.context import Gap, Header
from server.reader.context import Selection, select
from server.reader.context_arms import BoundArm, Candidate, Mode, SortKey, sort_key
from server.reader.context_header import (
    SOURCE_NOT_AVAILABLE_DETAIL,
    ScopeState,
    build_header,
    gap_refs,
    known_gaps,
    with_listed_event_coverage,
)
from server.reader.context_pages import Piece, compact
from server.reader.context_rows import Memory, Ref, RowLoader, Unit
from server.reader.coverage import read_coverage
from server.reader.db import IDS, json_ids
from server.reader.memo import GRAPH, Memo, weight_of, with_memory
from server.reader.objects import Key

LISTED_SCOPES_READ: Final = 20
"""The scopes of a story's or experience's listed events whose coverage one call reads (each is one summary of its
results' records, remembered per scope revision); further ones are reported as not read."""
SCOPE_REVISIONS: Final = f"SELECT scope_key, data_revision FROM scopes WHERE scope_key IN {IDS}"
# The selected references whose source is not what was saved: `gone` when the reference was saved as unavailable,
# or its source is now deleted, inaccessible or moved out of the scope (read_source's `current` reads only a source
# living in the scope's projects, any for Global; a source with no stored record is unknown, not gone); `changed`
# when the source, readable here, has another current version than the one saved (the fragment may be outdated).
SOURCE_STATES: Final = f"""
SELECT id, gone, changed FROM (
  SELECT id, saved_unavailable OR (stored AND NOT readable) AS gone,
         readable AND saved_version IS NOT NULL AND current_version IS NOT NULL AND current_version <> saved_version
           AS changed
    FROM (
      SELECT r.id, r.availability <> 'available' AS saved_unavailable, r.source_version AS saved_version,
             s.id IS NOT NULL AS stored, s.current_version,
             coalesce(s.status = 'available'
                      AND (:anywhere OR s.project_id IN (SELECT value FROM json_each(:projects))), 0) AS readable
        FROM source_references AS r LEFT JOIN sources AS s ON s.id = r.original_source_id
       WHERE r.id IN {IDS} AND r.scope_key = :scope_key
    )
) WHERE gone OR changed
 ORDER BY id
"""
CHANGED_SOURCE_DETAIL: Final = (
    "Saved source references whose source has changed since: its current version is not the one the reference was "
    "saved from, so the saved fragment is what the source said then, not necessarily what it says now. "
    "story_graph_read_source with content_kind 'current' shows the current text and whether the fragment still matches."
)


@dataclass
class Summary:
    header: Header
    """The compact view of `current` (sent on its first page only)."""
    gaps: list[Gap]
    graph_count: int
    """Selected graph objects (after the time filter)."""
    undated_count: int
    unknown_time_excluded: int
    memories: dict[str, Memory]
    arms: list[BoundArm]
    gathered: list[Candidate]
    target_units: dict[Key, tuple[Unit, str]]
    """The target's rows with their content text (a story's lists all its events: built once, not per page)."""
    elsewhere: dict[str, list[Ref]]
    """The selected objects stored in another scope than the one read, by scope key: the events a story or
    experience lists that lie in narrower scopes (whose coverage known_gaps_now reads)."""
    references: list[str] = field(default_factory=list)
    """The selected source references of the scope read, by id (known_gaps_now asks which sources changed since)."""
    end_stored: dict[Ref, bool] = field(default_factory=dict)
    """Whether each end of a selected relation is stored in the scope read, as the selection found (a page's
    relations show it as `in_scope` without reading their ends' rows again)."""
    ordered: dict[Mode, tuple[list[SortKey], list[Candidate]]] = field(default_factory=dict)

    def total(self, mode: Mode) -> int:
        """Objects in the stream: graph objects, and in `current` the background memory items."""
        return self.graph_count + (len(self.memories) if mode == "current" else 0)

    def in_order(self, mode: Mode) -> tuple[list[SortKey], list[Candidate]]:
        """The remembered objects of the stream in sort-key order (sorted once per mode)."""
        found = self.ordered.get(mode)
        if found is None:
            wanted = [c for c in self.gathered if mode == "current" or c.role != "background"]
            pairs = sorted(((sort_key(c, mode), c) for c in wanted), key=lambda pair: pair[0])
            found = self.ordered[mode] = ([k for k, _ in pairs], [c for _, c in pairs])
        return found


async def summarise(
    conn: aiosqlite.Connection,
    memo: Memo,
    scope_key: str,
    revisions: str,
    project_ids: list[str],
    target: Ref,
    *,
    time_range: tuple[str, str] | None,
    time_basis: str,
    coverage: Coverage,
    global_memory: bool,
) -> Summary:
    """The summary of a query, remembered per `revisions`: the scope's data revision and the caller's memory
    revision (ResolvedScope.cursor_revision(with_memory=True)), since it holds the memory items; in the lineage of
    `global_memory`, whether the caller's grant reads Global and so sees Global memory items."""
    remembered = memo.at(with_memory(scope_key, global_memory), revisions)
    key = ("context", target, time_range, time_basis)
    found: Summary | None = remembered.get(key)
    if found is not None:
        return found
    sel = await select(
        conn,
        scope_key,
        project_ids,
        target,
        time_range=time_range,
        time_basis=time_basis,
        global_memory=global_memory,
    )
    summary = _summary(sel, scope_key, time_range is not None, coverage)
    return remembered.put(key, summary, weight=weight_of(len(summary.gathered) + len(summary.end_stored)))


def _summary(sel: Selection, scope_key: str, time_range_used: bool, coverage: Coverage) -> Summary:
    return Summary(
        header=build_header(sel, time_range_used=time_range_used),
        gaps=known_gaps(sel, coverage),
        graph_count=len(sel.units),
        undated_count=sum(1 for u in sel.units if u.row.event_time_start is None),
        unknown_time_excluded=sel.unknown_time_excluded,
        memories={m.memory_id: m for m in sel.memories},
        arms=sel.arms,
        gathered=sel.gathered,
        target_units={u.key: (u, compact(u.content)) for u in sel.units if u.role == "target"},
        elsewhere=_elsewhere(sel, scope_key),
        references=sorted(
            {
                u.row.object_id
                for u in sel.units
                if u.row.object_type == "source_reference" and u.row.scope_key == scope_key and u.row.row_kind != "leaf"
            }
        ),
        end_stored=_end_stored(sel),
    )


def _end_stored(sel: Selection) -> dict[Ref, bool]:
    found: dict[Ref, bool] = {}
    for u in sel.units:
        if u.ends is not None:
            found[u.ends[0]], found[u.ends[1]] = u.ends_in_scope
    return found


def _elsewhere(sel: Selection, scope_key: str) -> dict[str, list[Ref]]:
    found: dict[str, set[Ref]] = {}
    for u in sel.units:
        if u.row.scope_key != scope_key:
            found.setdefault(u.row.scope_key, set()).add(u.ref)
    return {key: sorted(refs) for key, refs in sorted(found.items())}


async def known_gaps_now(
    conn: aiosqlite.Connection,
    memo: Memo,
    summary: Summary,
    time_range: tuple[str, str] | None,
    time_basis: str,
    *,
    scope_key: str,
    project_ids: list[str] | None,
    graph_revision: str,
) -> list[Gap]:
    """The summary's known gaps, plus the saved references whose source changed since (project_ids None: Global),
    plus the coverage of the narrower scopes its listed events are stored in, read at
    their current revisions: a new review there changes their coverage without changing this scope's revision,
    so it is read per call, not remembered with the summary. Bounded: one query for the revisions of at most
    LISTED_SCOPES_READ scopes, then each scope's coverage summary (remembered per scope revision, as every call in
    that scope reads it); a scope beyond them is reported as not read."""
    gaps = await _with_source_states(
        conn, memo, summary, scope_key, project_ids, graph_revision, time_range, time_basis
    )
    if not summary.elsewhere:
        return gaps
    keys = list(summary.elsewhere)
    read = keys[:LISTED_SCOPES_READ]
    revisions = {row[0]: str(row[1]) for row in await conn.execute_fetchall(SCOPE_REVISIONS, {"ids": json_ids(read)})}
    states: list[ScopeState] = []
    for number, key in enumerate(keys):
        coverage = (
            await read_coverage(conn, memo, key, revisions.get(key, "0"), time_range, time_basis)
            if number < LISTED_SCOPES_READ
            else None
        )
        states.append((key, coverage, summary.elsewhere[key]))
    return with_listed_event_coverage(gaps, states)


async def _with_source_states(
    conn: aiosqlite.Connection,
    memo: Memo,
    summary: Summary,
    scope_key: str,
    project_ids: list[str] | None,
    graph_revision: str,
    time_range: tuple[str, str] | None,
    time_basis: str,
) -> list[Gap]:
    """The summary's gaps with what the selected references' sources are now: `source_not_available` (saved as
    unavailable, or deleted, inaccessible or moved out of the scope since: read_source reports the source's state
    now, and the reference row keeps what was stored then) and `source_changed_since_saved`. A source edited later
    changes no scope's revision (only the graph's: read_source binds its cursors to the source's state), so this is
    remembered per graph revision (read with the scope's revisions, in the call's first statement), not with the
    summary: the join once per graph revision."""
    if not summary.references:
        return summary.gaps
    graph = memo.at(GRAPH, graph_revision)
    target = (summary.header.object_ref.type, summary.header.object_ref.id)
    key = ("source_states", scope_key, target, time_range, time_basis)
    states: tuple[list[str], list[str]] | None = graph.get(key)
    if states is None:
        params = {
            "ids": json_ids(summary.references),
            "scope_key": scope_key,
            "anywhere": project_ids is None,
            "projects": json_ids(project_ids or []),
        }
        rows = list(await conn.execute_fetchall(SOURCE_STATES, params))
        states = graph.put(
            key,
            ([str(row[0]) for row in rows if row[1]], [str(row[0]) for row in rows if row[2]]),
            weight_of(len(rows)),
        )
    gaps = list(summary.gaps)
    at = next((n for n, g in enumerate(gaps) if g.kind == "no_result_rows"), len(gaps))
    added = [
        Gap(
            kind=kind,
            count=len(ids),
            detail=detail,
            refs=gap_refs([("source_reference", i) for i in ids]),
        )
        for kind, ids, detail in (
            ("source_not_available", states[0], SOURCE_NOT_AVAILABLE_DETAIL),
            ("source_changed_since_saved", states[1], CHANGED_SOURCE_DETAIL),
        )
        if ids
    ]
    return [*gaps[:at], *added, *gaps[at:]]


async def read_stream(
    conn: aiosqlite.Connection, summary: Summary, mode: Mode, after: SortKey | None, limit: int
) -> list[tuple[SortKey, Candidate]]:
    """The first `limit` objects of the stream at or after `after`: the remembered ones merged with each arm's."""
    keys, candidates = summary.in_order(mode)
    start = bisect.bisect_left(keys, after) if after is not None else 0
    sources: list[Iterable[tuple[SortKey, Candidate]]] = [
        zip(keys[start : start + limit], candidates[start : start + limit], strict=True)
    ]
    sources.extend([[(sort_key(c, mode), c) for c in await arm.page(conn, mode, after, limit)] for arm in summary.arms])
    found: list[tuple[SortKey, Candidate]] = []
    for entry in heapq.merge(*sources, key=lambda pair: pair[0]):
        if found and found[-1][0] == entry[0]:  # one object from two arms of a role (a relation to itself)
            continue
        found.append(entry)
        if len(found) == limit:
            break
    return found


async def load_pieces(
    conn: aiosqlite.Connection, summary: Summary, scope_key: str, entries: list[tuple[SortKey, Candidate]]
) -> list[Piece]:
    """The content of a page's objects, read by key (each in the scope it is stored in)."""
    wanted: dict[str, set[Ref]] = {}
    for _, c in entries:
        if c.role not in ("target", "background"):
            wanted.setdefault(c.scope_key, set()).add((c.object_type, c.object_id))
    loaded: dict[tuple[str, Ref], Unit | None] = {}
    for where, refs in wanted.items():
        for ref, unit in (await RowLoader(conn, where).primary(sorted(refs))).items():
            loaded[(where, ref)] = unit
    pieces: list[Piece] = []
    relations: list[Unit] = []
    for key, c in entries:
        if c.role == "background":
            memory = summary.memories[c.object_id]
            pieces.append(Piece(key, compact(memory.data), memory))
            continue
        if c.role == "target":
            unit, text = summary.target_units[c.key]
            pieces.append(Piece(key, text, unit))
            continue
        found = loaded[(c.scope_key, (c.object_type, c.object_id))]
        if found is None or found.key != c.key:  # cannot happen within one scope revision
            raise RuntimeError(f"get_context: selected object not readable: {c.key}")
        found.role = c.role
        if found.ends is not None:
            relations.append(found)
        pieces.append(Piece(key, compact(found.content), found))
    # Whether each end is stored: as the selection found at this revision, which saw every selected relation's ends
    # (an end it did not see would be read here). Reading them again cost 2-5 statements per page of relations.
    unseen = sorted({end for u in relations if u.ends is not None for end in u.ends} - summary.end_stored.keys())
    present = await RowLoader(conn, scope_key, content=False).primary(unseen) if unseen else {}

    def stored(end: Ref) -> bool:
        known = summary.end_stored.get(end)
        return known if known is not None else present[end] is not None

    for u in relations:
        assert u.ends is not None
        u.ends_in_scope = (stored(u.ends[0]), stored(u.ends[1]))
    return pieces
