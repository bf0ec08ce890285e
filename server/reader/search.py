"""Search over one exact scope: ranked pages the index produces in order, so a page costs bounded work.

The rank (docs/tools.md, "How search ranks") is a list of classes, each read from the index in item
id order and stopped as soon as the page is full:

  0  identifier: the query (or its width-folded form) equals the object's id, its source id, or a message/task
     id in its locator
  1, 2  the whole query in a weight-3 field (title, label, topic, summary): own rows, then other rows
  3, 4  the whole query in weight-1 fields only: own rows, then other rows
  then  at least half of the terms, one of them in a weight-3 field: own rows, then other rows; then
        at least half of the terms, none in a weight-3 field: own rows, then other rows. Each of these
        four, for a query of at most MAX_EXACT_TERMS terms, in tiers by how many distinct terms the item
        holds, most first (the coordination level), function words not counted (search_query.tiers).

An object's own rows are its current projection or its row in its own result; its other rows are
earlier result snapshots and leaf descriptions under other results. Within a class, items come in
item id order, highest first (migrations/0003): by type (stories, experiences, entities, events,
relations, entity changes, story lines, summaries, source references), then most recently stored
first. A cursor names a class and the last item returned, so page 20 costs what page 1 costs.

A query of five to eight terms that few items hold all or all but one of reads its term classes and its total
from each term's items held as bit sets instead (server/reader/search_sets.py): the same hits and total.

Totals are exact up to TOTAL_CAP matching items; above it the total is unknown and TOTAL_CAP is the
lower bound. Whole-query matches of a query of several terms are found once and remembered for the
scope's data revision (a long phrase is the costliest expression), as are the total and the count of
matches a time range leaves out for their unknown time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Final

import aiosqlite

from server.contracts.common import LimitReason
from server.reader.db import Spare, scalar
from server.reader.fold import Folder
from server.reader.memo import Memo, weight_of
from server.reader.search_ids import identifier_items
from server.reader.search_needles import term_needles_of, whole_needle
from server.reader.search_query import MARKERS as INDEX_MARKERS
from server.reader.search_query import (
    Plan,
    both,
    but_not,
    plan,
    query_terms,
    time_match,
)
from server.reader.search_sets import QuerySets, TimeSets, bits, remembered_sets, time_sets
from server.reader.search_sql import (
    CAPPED_COUNT,
    OWN_BIT,
    RANGE_PAGE,
    SCOPE_NUMBER,
    TYPE_CODES,
    UNKNOWN_TIME,
    WHOLE_SET,
    Filters,
    parameters,
    statement,
)

RANK_RULE: Final = 1
"""The version of the rank classes: a search cursor binds it (server/tools/search.py), since it names a class by its
index. Raise it whenever the classes change, so a cursor of another server version (a restart on an upgrade, or
replicas of two versions, sharing the cursor secret) is refused instead of resuming in another class. 1: term tiers
that do not count function words (search_query.tiers); cursors made before carry no version."""
TOTAL_CAP: Final = 10_001
"""Totals are counted up to this many items; a total that reaches it is reported as unknown."""
WHOLE_SET_CAP: Final = 2_000
"""A query of several terms lists its whole-query matches at once when there are at most this many."""
CHECK_BATCH: Final = 500
CHECK_WORK: Final = 180_000
"""What one call may spend checking candidates against their text (only for queries of more than MAX_EXACT_TERMS
terms), in candidates times distinct terms: 20,000 candidates for 9 terms, fewer for more. A candidate costs about
its query's terms (it is read through an OR of half of them, its text is searched for each): a pasted paragraph of
hundreds of terms spent 1-2 s per call at 1M on 20,000."""


@dataclass(frozen=True)
class Hit:
    item_id: int
    rank_class: int
    """0 identifier; 1–4 whole query; 5 on: term classes (term_classes), as in the module docstring."""

    @property
    def match_kind(self) -> str:
        return "identifier" if self.rank_class == 0 else "whole_query" if self.rank_class <= 4 else "terms"

    @property
    def own_row(self) -> bool:
        return bool((self.item_id >> OWN_BIT) & 1)


@dataclass(frozen=True)
class TermClass:
    """One class of term-only matches: weight-3 field or not, own rows or not, and (exact plans) how many
    distinct counted terms its items hold (Plan.held)."""

    heavy: bool
    own: bool
    expression: str | None
    """Exact plans: the items holding exactly that many terms; checked plans: the candidates."""
    tier: int
    """Exact plans: the index of its tier in Plan.held."""


def term_classes(query_plan: Plan) -> list[TermClass]:
    """The term classes in rank order (rank classes 5, 6, ...)."""
    levels: list[str | None] = [expression for _, expression in query_plan.held] or [query_plan.accept]
    return [
        TermClass(heavy, own, level, tier)
        for heavy in (True, False)
        for own in (True, False)
        for tier, level in enumerate(levels)
    ]


@dataclass(frozen=True)
class Total:
    count: int
    exact: bool


@dataclass(frozen=True)
class SearchPage:
    needle: str
    """The folded whole query."""
    terms: list[str]
    hits: list[Hit]
    total: Total
    unknown_time_excluded: Total | None
    next_position: tuple[int, int] | None
    """(class, item id after which the next page starts); None on the last page."""
    limit_reason: LimitReason | None

    @property
    def has_more(self) -> bool:
        return self.next_position is not None


@dataclass(frozen=True)
class Query:
    """One search call's fixed parts."""

    conn: aiosqlite.Connection
    folder: Folder
    plan: Plan
    filters: Filters
    ids: list[int]
    """Identifier matches, in rank order."""
    whole: list[tuple[int, bool]] | None
    """For a query of several terms: its whole-query matches (item id, in a weight-3 field), highest id first;
    None when there are too many to list (they are then read class by class)."""
    sets: QuerySets | None = None
    """The term classes and the total as bit sets (server/reader/search_sets.py), when the query takes them."""
    times: TimeSets | None = None
    """With them and a time range: its items, and those of unknown time, as bit sets."""

    @property
    def listed(self) -> list[int]:
        """Items the term classes leave out: identifier matches and listed whole-query matches."""
        return self.ids + [item_id for item_id, _ in self.whole or []]

    @property
    def in_range_bits(self) -> int:
        """The time range's items as a bit set (search_sets; every item without a range)."""
        return self.times.in_range if self.times is not None else -1

    @cached_property
    def listed_bits(self) -> int:
        """`listed` as a bit set over sequence numbers (search_sets)."""
        return bits(self.listed)


async def search(
    conn: aiosqlite.Connection,
    folder: Folder,
    memo: Memo,
    *,
    query: str,
    scope_key: str,
    scope_revision: str,
    graph_revision: str,
    object_types: Sequence[str],
    time_range: tuple[str, str] | None,
    time_basis: str,
    page_size: int,
    position: tuple[int, int] | None,
    spare: Spare | None = None,
) -> SearchPage:
    """One page of a search. `spare`: a second connection, when one is free, to read term sets on in parallel."""
    whole_text = folder.fold(query).translate(INDEX_MARKERS)
    term_texts = query_terms(whole_text)
    number = await _scope_number(conn, scope_key)
    codes = sorted((TYPE_CODES[t] for t in set(object_types)), reverse=True)
    excluded_none = Total(0, True) if time_range is not None else None
    if number is None or not codes or not whole_text:
        return SearchPage(whole_text, term_texts, [], Total(0, True), excluded_none, None, None)
    months = time_match(time_basis, time_range) if time_range is not None else None
    filters = Filters(number, None if len(codes) == len(TYPE_CODES) else codes, time_basis, time_range, months)
    whole = await whole_needle(conn, memo, graph_revision, whole_text)
    term_needles, frequency = await term_needles_of(conn, memo, graph_revision, whole, term_texts)
    query_plan = plan(whole, term_needles, frequency)
    ids = await identifier_items(conn, filters, query, scope_key)
    memo_at, remembered = memo.at(scope_key, scope_revision), (whole_text, filters.key())
    listed: list[tuple[int, bool]] | None = None
    if query_plan.terms:
        # Remembered as a one-element tuple: None inside means "too many to list". The set leaves out the
        # identifier matches, which depend on the exact query (ids are case-sensitive), so the key holds it.
        cached = memo_at.get(("whole", *remembered, query))
        if cached is None:
            whole_items = await _whole_items(conn, folder, query_plan, filters, ids)
            weight = weight_of(len(whole_items) if whole_items is not None else 0)
            cached = memo_at.put(("whole", *remembered, query), (whole_items,), weight)
        listed = cached[0]
    sets, times = None, None
    if listed is not None:  # not when there are too many whole-query matches to list
        sets = await remembered_sets(conn, memo_at, query_plan, number, whole_text, graph_revision, spare)
    if sets is not None and time_range is not None:
        times = await time_sets(conn, memo_at, number, time_basis, time_range, graph_revision, spare)
    q = Query(conn, folder, query_plan, filters, ids, listed, sets, times)
    hits, position_after, reason = await _page(q, page_size, position)
    total = memo_at.get(("total", *remembered, query)) or memo_at.put(("total", *remembered, query), await _total(q))
    unknown_time = memo_at.get(("unknown_time", *remembered, query)) if time_range is not None else None
    if unknown_time is None and time_range is not None:
        unknown_ids = await identifier_items(conn, filters, query, scope_key, time=UNKNOWN_TIME[time_basis])
        unknown_time = memo_at.put(("unknown_time", *remembered, query), await _unknown_time_excluded(q, unknown_ids))
    return SearchPage(
        needle=whole_text,
        terms=term_texts,
        hits=hits,
        total=total,
        unknown_time_excluded=unknown_time,
        next_position=position_after,
        limit_reason=reason,
    )


async def _scope_number(conn: aiosqlite.Connection, scope_key: str) -> int | None:
    rows = list(await conn.execute_fetchall(SCOPE_NUMBER, {"scope_key": scope_key}))
    return int(rows[0][0]) if rows else None


async def _whole_items(
    conn: aiosqlite.Connection, folder: Folder, query_plan: Plan, filters: Filters, ids: list[int]
) -> list[tuple[int, bool]] | None:
    """Every whole-query match of a query of several terms, with whether a weight-3 field holds it; None when
    there are more than WHOLE_SET_CAP."""
    expression = query_plan.whole.anywhere
    if expression is None:
        return []
    sql = statement(WHOLE_SET, filters, ids, text=", i.hi")
    found: list[tuple[int, bool]] = []
    needle_text = query_plan.whole.text
    for bounds in filters.ranges():
        params = parameters(filters, ids, expression, bounds) | {"limit": WHOLE_SET_CAP + 1 - len(found)}
        rows = await conn.execute_fetchall(sql, params)
        found.extend((int(item_id), needle_text in folder.fold(hi)) for item_id, hi in rows)
        if len(found) > WHOLE_SET_CAP:
            return None
    found.sort(reverse=True)  # item id order, highest first, like every class
    return found


# --- Pages -------------------------------------------------------------------------------------------------------


async def _page(
    q: Query, page_size: int, position: tuple[int, int] | None
) -> tuple[list[Hit], tuple[int, int] | None, LimitReason | None]:
    """The next page_size hits after `position`, the position after them (None on the last page) and why the
    page stopped. One hit more than the page is looked for, to know whether another page follows."""
    start_class, after = position if position is not None else (0, None)
    wanted = page_size + 1
    hits: list[Hit] = []
    budget = _check_budget(q.plan)
    terms = term_classes(q.plan) if q.plan.terms else []
    for rank_class in range(start_class, 5 + len(terms)):
        resume = after if rank_class == start_class else None
        limit = wanted - len(hits)
        if rank_class == 0:
            found = [i for i in q.ids if resume is None or i < resume][:limit]
        elif rank_class <= 4:
            found = await _whole_class(q, rank_class, resume, limit)
        elif q.plan.checked:
            found, stopped_at, budget = await _checked(q, terms[rank_class - 5], resume, limit, budget)
            if stopped_at is not None and len(hits) + len(found) < wanted:
                # Out of budget inside this class: the page ends here, and the next one resumes the walk
                # after the last candidate checked.
                hits.extend(Hit(item_id, rank_class) for item_id in found)
                return hits, (rank_class, stopped_at), "work_budget"
        elif q.sets is not None:
            found = _set_class(q, q.sets, terms[rank_class - 5], resume, limit)
        else:
            found = await _term_class(q, terms[rank_class - 5], resume, limit)
        hits.extend(Hit(item_id, rank_class) for item_id in found)
        if len(hits) >= wanted:
            break
    if len(hits) <= page_size:
        return hits, None, None
    last = hits[page_size - 1]
    return hits[:page_size], (last.rank_class, last.item_id), "page_size"


def _own(rank_class: int) -> bool:
    return rank_class % 2 == 1


async def _whole_class(q: Query, rank_class: int, resume: int | None, limit: int) -> list[int]:
    """Classes 1–4: the whole query in a weight-3 field (1, 2) or in weight-1 fields only (3, 4)."""
    heavy, own = rank_class <= 2, _own(rank_class)
    if q.whole is not None:  # listed at once (a query of several terms)
        return [
            item_id
            for item_id, in_heavy in q.whole
            if in_heavy == heavy and bool((item_id >> OWN_BIT) & 1) == own and (resume is None or item_id < resume)
        ][:limit]
    whole = q.plan.whole
    expression = whole.heavy if heavy else but_not(whole.anywhere, whole.heavy)
    return await _range_hits(q, expression, _after(q.filters.ranges(own), resume), q.ids, limit)


async def _term_class(q: Query, term_class: TermClass, resume: int | None, limit: int) -> list[int]:
    """Term-only matches: one term in a weight-3 field or none; own rows or other rows; exact plans by how many
    terms the item holds."""
    terms_heavy = q.plan.terms_heavy
    expression = (both if term_class.heavy else but_not)(term_class.expression, terms_heavy)
    if q.whole is None:  # too many whole-query matches to list: leave them out in the index
        expression = but_not(expression, q.plan.whole.anywhere)
    ranges = _after(q.filters.ranges(term_class.own), resume)
    return await _range_hits(q, expression, ranges, q.listed, limit)


def _set_class(q: Query, sets: QuerySets, term_class: TermClass, resume: int | None, limit: int) -> list[int]:
    """`_term_class` from the query's term sets: the same items, in the same order."""
    f, c = q.filters, term_class
    return sets.page(
        f.scope_number, c.tier, c.heavy, c.own, f.type_codes, resume, q.listed_bits, limit, q.in_range_bits
    )


def _after(ranges: list[tuple[int, int]], resume: int | None) -> list[tuple[int, int]]:
    """The parts of descending, disjoint id ranges below `resume` (all of them without one)."""
    if resume is None:
        return ranges
    return [(low, min(high, resume - 1)) for low, high in ranges if low < resume]


async def _range_hits(
    q: Query, expression: str | None, ranges: list[tuple[int, int]], leave_out: list[int], limit: int
) -> list[int]:
    found: list[int] = []
    if expression is None:
        return found
    sql = statement(RANGE_PAGE, q.filters, leave_out)
    for bounds in ranges:
        params = parameters(q.filters, leave_out, expression, bounds) | {"limit": limit - len(found)}
        found.extend(int(row[0]) for row in await q.conn.execute_fetchall(sql, params))
        if len(found) == limit:
            break
    return found


async def _checked(
    q: Query, term_class: TermClass, resume: int | None, limit: int, budget: int
) -> tuple[list[int], int | None, int]:
    """Term classes of a query of very many terms: candidates checked against their text, in batches.
    Returns the accepted ids, the last candidate checked when the budget ran out first, and the budget left."""
    ranges = _after(q.filters.ranges(term_class.own), resume)
    return await _walk(q, ranges, limit, budget, heavy=term_class.heavy)


async def _walk(
    q: Query,
    ranges: list[tuple[int, int]],
    limit: int,
    budget: int,
    *,
    heavy: bool | None,
    unknown_time: list[int] | None = None,
) -> tuple[list[int], int | None, int]:
    """Candidates checked against their text, in batches. `unknown_time`: walk instead the items whose time on the
    basis is unknown, leaving out these identifier matches, and accept whole-query matches too (every whole-query
    match holds every term)."""
    found: list[int] = []
    expression = q.plan.accept
    if expression is None:
        return found, None, budget
    leave_out = q.listed if unknown_time is None else unknown_time
    time = None if unknown_time is None else UNKNOWN_TIME[q.filters.time_basis]
    sql = statement(RANGE_PAGE, q.filters, leave_out, time=time, text=", i.hi, i.lo")
    for low, high in ranges:
        while True:
            if budget <= 0:
                return found, high + 1, budget
            batch = min(CHECK_BATCH, budget)
            params = parameters(q.filters, leave_out, expression, (low, high), time=time) | {"limit": batch}
            rows = list(await q.conn.execute_fetchall(sql, params))
            budget -= len(rows)
            for item_id, hi, lo in rows:
                if _accepts(q, hi, lo, heavy, whole_too=unknown_time is not None):
                    found.append(int(item_id))
                    if len(found) == limit:
                        return found, None, budget
            if len(rows) < batch:
                break
            high = int(rows[-1][0]) - 1
    return found, None, budget


def _check_budget(query_plan: Plan) -> int:
    """How many candidates one call may check against their text."""
    return max(1, CHECK_WORK // max(1, len(query_plan.terms)))


def _accepts(q: Query, hi: str, lo: str, heavy: bool | None, *, whole_too: bool = False) -> bool:
    """Whether an item's text holds enough terms and — unless `whole_too` — not the whole query (listed in classes
    1–4), and — unless `heavy` is None — whether one of the terms is in a weight-3 field."""
    matcher = q.plan.matcher
    if matcher.cannot_hold(q.plan.need, len(hi), len(lo)):  # folding keeps lengths
        return False
    hi_folded, lo_folded = q.folder.fold(hi), q.folder.fold(lo)
    if not whole_too and q.whole is None and (q.plan.whole.text in hi_folded or q.plan.whole.text in lo_folded):
        return False
    in_heavy = matcher.held(hi_folded)
    if heavy is not None and bool(in_heavy) != heavy:
        return False
    return len(in_heavy | matcher.held(lo_folded)) >= q.plan.need


# --- Totals ------------------------------------------------------------------------------------------------------


async def _count(q: Query, expression: str, leave_out: list[int], *, time: str | None = None) -> int:
    """Items of the scope matching `expression`, up to TOTAL_CAP. `time`: the time clause (default: in range)."""
    sql = statement(CAPPED_COUNT, q.filters, leave_out, time=time)
    count = 0
    for bounds in q.filters.ranges():
        params = parameters(q.filters, leave_out, expression, bounds, time=time) | {"cap": TOTAL_CAP - count}
        count += int(await scalar(q.conn, sql, params))
        if count >= TOTAL_CAP:
            break
    return count


async def _total(q: Query) -> Total:
    """Identifier matches plus the text matches. Every whole-query match holds every term, so for a query of
    several terms the matches are those holding at least half of the terms."""
    if not q.plan.terms:
        expression = q.plan.whole.anywhere
        found = 0 if expression is None else await _count(q, expression, q.ids)
        return Total(len(q.ids) + found, found < TOTAL_CAP)
    if q.sets is not None:
        found = q.sets.count(q.filters.type_codes, bits(q.ids), TOTAL_CAP, q.in_range_bits)
        return Total(len(q.ids) + found, found < TOTAL_CAP)
    if not q.plan.checked:
        found = 0 if q.plan.accept is None else await _count(q, q.plan.accept, q.ids)
        return Total(len(q.ids) + found, found < TOTAL_CAP)
    # More terms than one expression holds: whole-query matches, then candidates checked against their text
    # up to the check budget (beyond it the total is unknown).
    if q.whole is None:
        return Total(len(q.ids) + WHOLE_SET_CAP, False)
    count = len(q.ids) + len(q.whole)
    budget = _check_budget(q.plan)
    accepted, stopped_at, _ = await _walk(q, q.filters.ranges(), TOTAL_CAP - count, budget, heavy=None)
    count += len(accepted)
    return Total(count, count < TOTAL_CAP and stopped_at is None)


async def _unknown_time_excluded(q: Query, unknown_ids: list[int]) -> Total | None:
    """Matches the time range left out because their time on the basis is unknown: identifier matches
    (`unknown_ids`) and text matches, counted as `_total` counts (a query of very many terms: its candidates
    checked against their text, up to the check budget; beyond it the number is unknown)."""
    if q.filters.time_range is None:
        return None
    if q.sets is not None and q.times is not None:
        found = q.sets.count(q.filters.type_codes, bits(unknown_ids), TOTAL_CAP, q.times.unknown)
        return Total(len(unknown_ids) + found, found < TOTAL_CAP)
    if q.plan.checked:
        cap = TOTAL_CAP - len(unknown_ids)
        accepted, stopped_at, _ = await _walk(
            q, q.filters.ranges(), cap, _check_budget(q.plan), heavy=None, unknown_time=unknown_ids
        )
        return Total(len(unknown_ids) + len(accepted), len(accepted) < cap and stopped_at is None)
    expression = q.plan.whole.anywhere if not q.plan.terms else q.plan.accept
    found = (
        0 if expression is None else await _count(q, expression, unknown_ids, time=UNKNOWN_TIME[q.filters.time_basis])
    )
    return Total(len(unknown_ids) + found, found < TOTAL_CAP)
