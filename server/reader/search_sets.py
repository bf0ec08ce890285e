"""Term sets: an exact plan's term classes and total from each term's items held as bit sets.

An exact plan (search_query.plan, up to MAX_EXACT_TERMS terms) reads its tiers as FTS5 expressions, each stopped
once the page is full. When few items hold all of the terms or all but one, those tiers are read to their end, and
"exactly 7 of 8" reads every term once per place it has in the expression: for five to eight common words that is
0.1-1.2 s a page at 1M objects, and 3-5 s for the total (docs/performance.md, "Five to eight common words"). Read
once instead, each term's items in the scope are a bit set over their sequence numbers (unique in a scope:
migrations/0003), and the tiers, the classes and the total are a few operations on big integers: the same items in
the same order, the same total, for the cost of reading each term's list once (about 1 µs an item for both of its
reads, on the connections' threads: the call's own and a second free one, two lists at once) and then a few
milliseconds a page. The sets are remembered per scope revision
(SetStore), so later pages and later queries sharing a term read nothing.

Which way a query goes is decided once per scope revision from a sample (`sparse_top`): the newest SAMPLE items of
each term. Where the upper two tiers hold a page's worth among them, the expressions fill a page early and count
to the cap quickly, and reading whole lists (millions of entries for a common phrase) would cost more: those
queries keep the expressions. Only speed depends on the choice; every answer is the one the rank rule gives.
A time range is one more bit set, the scope's items with a time in it (and one of those whose time is unknown,
for the count the range leaves out), read once per scope revision and range from the index of the items' times.
Not for a query whose whole-query matches are too many to list.
"""

from __future__ import annotations

import functools
import sqlite3
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Final, TypeVar

import aiosqlite
import anyio
import orjson

from server.reader.db import Spare, on_thread, scalar
from server.reader.memo import MemoAt, weight_of_bytes
from server.reader.scope import read_graph_revision
from server.reader.search_query import Needle, Plan, counted_terms
from server.reader.search_sql import (
    IN_RANGE,
    OWN_BIT,
    SCOPE_SEQUENCES,
    SCOPE_SHIFT,
    TERM_ITEMS,
    TERM_SAMPLE,
    TIMED_ITEMS,
    TYPE_CODES,
    TYPE_SHIFT,
    UNKNOWN_TIME,
)

T = TypeVar("T")
SET_TERMS: Final = 5
"""Exact plans of at least this many usable terms may take the sets (fewer terms: the expressions stay small)."""
SAMPLE: Final = 2_000
"""Each term's newest items read to decide (`sparse_top`): a few milliseconds a term."""
SPARSE_TOP: Final = 11
"""Fewer items than this in the sample's upper two tiers (a default page and one more): the sets are read."""
STORE_BYTES: Final = 8 << 20
"""What one scope revision's term sets may hold; a query whose sets would not fit keeps the expressions (`fits`: above
about 1.6 million items in a scope for eight terms)."""
SEQUENCE: Final = (1 << TYPE_SHIFT) - 1
PREFIX_ORDER: Final = [(own << 4) | code for own in (1, 0) for code in sorted(TYPE_CODES.values(), reverse=True)]
"""Every prefix (own-row flag << 4 | type code: the bits of an item id between its scope number and its sequence
number), highest first."""


@dataclass(frozen=True)
class TermSet:
    anywhere: int
    """The items of the scope holding the term in any field, as a bit set over their sequence numbers."""
    heavy: int
    """Those holding it in a weight-3 field."""

    @property
    def size(self) -> int:
        return _bytes(self.anywhere, self.heavy)


class SetStore:
    """One scope revision's term sets, and for every item they hold its prefix (own-row flag and type code), as one
    bit set per prefix: the item ids a page lists are prefix and sequence number together. Remembered as one value,
    so the prefixes always cover the sets; the least recently used terms go past STORE_BYTES."""

    def __init__(self) -> None:
        self.terms: OrderedDict[str, TermSet] = OrderedDict()
        self.prefixes: dict[int, int] = {}

    @property
    def size(self) -> int:
        return sum(t.size for t in self.terms.values()) + _bytes(*self.prefixes.values())

    def get(self, text: str) -> TermSet | None:
        found = self.terms.get(text)
        if found is not None:
            self.terms.move_to_end(text)
        return found

    def add(self, text: str, term_set: TermSet, prefixes: dict[int, int], keep: set[str]) -> None:
        """Add a term's sets and the prefixes of its items; terms not in `keep` (the query's) go first when full."""
        for prefix, seqs in prefixes.items():
            self.prefixes[prefix] = self.prefixes.get(prefix, 0) | seqs
        self.terms[text] = term_set
        self.terms.move_to_end(text)
        while self.size > STORE_BYTES:
            old = next((t for t in self.terms if t not in keep), None)
            if old is None:
                return
            del self.terms[old]


@dataclass(frozen=True)
class QuerySets:
    """One query's term classes and matches, as bit sets over the scope's sequence numbers."""

    tiers: list[int]
    """The items of each tier of Plan.held, in its order."""
    heavy: int
    """Items holding a term in a weight-3 field."""
    matches: int
    """Items holding at least `need` of the terms (Plan.accept)."""
    prefixes: dict[int, int]
    """Prefix (own-row flag << 4 | type code) -> the sequence numbers of the scope's items with it (every item a term
    holds, at least)."""

    @property
    def size(self) -> int:
        return _bytes(*self.tiers, self.heavy, self.matches, *self.prefixes.values())

    def page(
        self,
        scope_number: int,
        tier: int,
        heavy: bool,
        own: bool,
        type_codes: list[int] | None,
        resume: int | None,
        leave_out: int,
        limit: int,
        keep: int = -1,
    ) -> list[int]:
        """A term class's items after `resume`, highest id first (by type code, then sequence number), at most
        `limit`; `leave_out`: items already listed, and `keep`: the items of the time range (default: all), as bit
        sets."""
        chosen = self.tiers[tier] & (self.heavy if heavy else ~self.heavy) & ~leave_out & keep
        found: list[int] = []
        for prefix in sorted(self.prefixes, reverse=True):
            if (prefix >> (OWN_BIT - TYPE_SHIFT)) != own:
                continue
            if type_codes is not None and prefix & 15 not in type_codes:
                continue
            base = (scope_number << SCOPE_SHIFT) | (prefix << TYPE_SHIFT)
            candidates = chosen & self.prefixes[prefix]
            if resume is not None:
                if resume <= base:
                    continue
                if resume <= base | SEQUENCE:
                    candidates &= (1 << (resume - base)) - 1
            while candidates and len(found) < limit:
                seq = candidates.bit_length() - 1
                found.append(base | seq)
                candidates ^= 1 << seq
            if len(found) == limit:
                break
        return found

    def count(self, type_codes: list[int] | None, leave_out: int, cap: int, keep: int = -1) -> int:
        """The matches of the requested types among `keep` (default: all), leaving out `leave_out`, up to `cap`."""
        kept = 0
        for prefix, seqs in self.prefixes.items():
            if type_codes is None or prefix & 15 in type_codes:
                kept |= seqs
        return min(cap, (self.matches & kept & keep & ~leave_out).bit_count())


def bits(item_ids: list[int]) -> int:
    """Item ids of one scope as a bit set over their sequence numbers."""
    return _bit_set([i & SEQUENCE for i in item_ids])


def _bit_set(seqs: list[int]) -> int:
    if not seqs:
        return 0
    field = bytearray(max(seqs) // 8 + 1)
    for seq in seqs:
        field[seq >> 3] |= 1 << (seq & 7)
    return int.from_bytes(field, "little")


def usable_terms(query_plan: Plan) -> list[Needle]:
    return [t for t in query_plan.terms if t.anywhere is not None]


def may_use(query_plan: Plan) -> bool:
    """An exact plan with at least SET_TERMS usable terms and some match possible."""
    return (
        not query_plan.checked
        and query_plan.accept is not None
        and bool(query_plan.held)
        and len(usable_terms(query_plan)) >= SET_TERMS
    )


async def fits(conn: aiosqlite.Connection, query_plan: Plan, scope_number: int) -> bool:
    """Whether the query's sets fit in STORE_BYTES: two per term, its prefixes, its tiers and two more."""
    top = int(await scalar(conn, SCOPE_SEQUENCES, {"number": scope_number}))
    terms = len(usable_terms(query_plan))
    return (top // 8 + 1) * (2 * terms + len(PREFIX_ORDER) + len(query_plan.held) + 2) <= STORE_BYTES


async def sparse_top(conn: aiosqlite.Connection, query_plan: Plan, scope_number: int) -> bool:
    """Whether fewer than SPARSE_TOP items of the scope's newest hold enough terms for the plan's upper two tiers.
    The newest SAMPLE items of each term, counted down to the highest id at which some term's sample ends (above
    it, every item holding a term is in its sample)."""
    usable = usable_terms(query_plan)
    low, high = _scope_bounds(scope_number)
    samples: list[tuple[str, list[int]]] = []
    for term in usable:
        params = {"expression": term.anywhere, "low": low, "high": high, "limit": SAMPLE}
        samples.append((term.text, [int(row[0]) for row in await conn.execute_fetchall(TERM_SAMPLE, params)]))
    floor = max((ids[-1] for _, ids in samples if len(ids) == SAMPLE), default=low)
    held: dict[int, set[str]] = {}
    for text, ids in samples:
        for item_id in ids:
            if item_id >= floor:
                held.setdefault(item_id, set()).add(text)
    counted = counted_terms(usable)
    second = query_plan.held[min(1, len(query_plan.held) - 1)][0]
    upper = sum(1 for terms in held.values() if len(terms & counted) >= second and len(terms) >= query_plan.need)
    return upper < SPARSE_TOP


async def query_sets(
    conns: list[aiosqlite.Connection], store: SetStore, query_plan: Plan, scope_number: int
) -> QuerySets:
    """The query's sets, reading the terms the store does not hold (`in_turn`): two lists a term, its items anywhere
    (all terms' first: the longer lists) and in weight-3 fields."""
    usable = usable_terms(query_plan)
    wanted = {t.text for t in usable}
    sets = {t.text: held for t in usable if (held := store.get(t.text)) is not None}
    lists = [(term, weighted) for weighted in (False, True) for term in usable if term.text not in sets]
    works = [functools.partial(_read_term, term=t, heavy=weighted, scope_number=scope_number) for t, weighted in lists]
    found = await in_turn(conns, works)
    read = {(t.text, weighted): by_prefix for (t, weighted), by_prefix in zip(lists, found, strict=True)}
    for (text, weighted), by_prefix in read.items():
        if not weighted:
            term_set = TermSet(_union(list(by_prefix.values())), _union(list(read[text, True].values())))
            store.add(text, term_set, by_prefix, wanted)
            sets[text] = term_set
    counted = counted_terms(usable)
    mine = Counts([sets[t].anywhere for t in sets if t in counted])
    others = Counts([sets[t].anywhere for t in sets if t not in counted])
    every = Counts([s.anywhere for s in sets.values()])
    tiers = [
        0 if expression is None else mine.exactly(k) & others.at_least(query_plan.need - k) & every.universe
        for k, expression in query_plan.held
    ]
    heavy = _union([s.heavy for s in sets.values()])
    return QuerySets(tiers, heavy, every.at_least(query_plan.need), dict(store.prefixes))


async def remembered_sets(
    conn: aiosqlite.Connection,
    memo_at: MemoAt,
    query_plan: Plan,
    scope_number: int,
    whole_text: str,
    graph_revision: str,
    spare: Spare | None = None,
) -> QuerySets | None:
    """The query's sets when it takes them (decided once per scope revision), else None. A term's set depends on the
    scope's data only, and is remembered with it; the query's tiers depend on its plan too, which the rest of the graph
    changes (a term no item held becomes usable), so they are remembered per graph revision as well. `spare`: a second
    connection to read terms on too, used when its snapshot reads the same graph revision."""
    if not may_use(query_plan):
        return None
    decided = memo_at.get(("sets?", whole_text))
    if decided is None:
        use = await fits(conn, query_plan, scope_number) and await sparse_top(conn, query_plan, scope_number)
        decided = memo_at.put(("sets?", whole_text), (use,))
    if not decided[0]:
        return None
    key = ("query sets", whole_text, graph_revision)
    found: QuerySets | None = memo_at.get(key)
    if found is None:
        store: SetStore = memo_at.get(("term sets",)) or SetStore()
        unread = any(store.get(t.text) is None for t in usable_terms(query_plan))
        async with readers(conn, spare if unread else None, graph_revision) as conns:
            found = await query_sets(conns, store, query_plan, scope_number)
        memo_at.put(("term sets",), store, weight_of_bytes(store.size))
        memo_at.put(key, found, weight_of_bytes(found.size))
    return found


@dataclass(frozen=True)
class TimeSets:
    """A time range's items of one scope on one basis, as bit sets over their sequence numbers."""

    in_range: int
    unknown: int
    """Those whose time on the basis is unknown (what the range leaves out and counts)."""

    @property
    def size(self) -> int:
        return _bytes(self.in_range, self.unknown)


async def time_sets(
    conn: aiosqlite.Connection,
    memo_at: MemoAt,
    number: int,
    basis: str,
    time_range: tuple[str, str],
    graph_revision: str,
    spare: Spare | None = None,
) -> TimeSets:
    """The scope's items in `time_range` on `basis`, and those of unknown time (`in_turn`); remembered per scope
    revision."""
    key = ("time sets", basis, time_range)
    found: TimeSets | None = memo_at.get(key)
    if found is None:
        params: dict[str, object] = {"from": time_range[0], "to": time_range[1]}
        works = [
            functools.partial(_read_bits, sql=TIMED_ITEMS.format(time=clause), params=params, scope_number=number)
            for clause in (IN_RANGE[basis], UNKNOWN_TIME[basis])
        ]
        async with readers(conn, spare, graph_revision) as conns:
            in_range, unknown = await in_turn(conns, works)
        found = TimeSets(_union(list(in_range.values())), _union(list(unknown.values())))
        memo_at.put(key, found, weight_of_bytes(found.size))
    return found


@asynccontextmanager
async def readers(
    conn: aiosqlite.Connection, spare: Spare | None, graph_revision: str
) -> AsyncIterator[list[aiosqlite.Connection]]:
    """The call's connection, and a spare one (Database.spare) when there is one whose snapshot reads the same graph
    revision (a write committed between the two snapshots would mix two revisions' items: then the call's alone)."""
    async with spare() if spare is not None else nullcontext() as other:
        conns = [conn]
        if other is not None and await read_graph_revision(other) == graph_revision:
            conns.append(other)
        yield conns


async def in_turn(conns: list[aiosqlite.Connection], works: Sequence[Callable[[sqlite3.Connection], T]]) -> list[T]:
    """Each work on a connection's thread, in order, each taken by the next connection free: with two, two lists are
    read at once (the index's reading releases the GIL). A cancel interrupts the statements of both."""
    results: dict[int, T] = {}
    queue = list(enumerate(works))

    async def take(conn: aiosqlite.Connection) -> None:
        while queue:
            n, work = queue.pop(0)
            results[n] = await on_thread(conn, work)

    try:
        async with anyio.create_task_group() as tasks:
            for conn in conns:
                tasks.start_soon(take, conn)
    except ExceptionGroup as group:  # a work's error as a statement raises it (sqlite3.Error: read_failed)
        raise group.exceptions[0] from None
    return [results[n] for n in range(len(works))]


def _scope_bounds(scope_number: int) -> tuple[int, int]:
    low = scope_number << SCOPE_SHIFT
    return low, low + (1 << SCOPE_SHIFT) - 1


def _read_term(raw: sqlite3.Connection, term: Needle, heavy: bool, scope_number: int) -> dict[int, int]:
    """On the connection's thread: the term's items in the scope (in any field, or `heavy`: in weight-3 fields), one bit
    set per prefix."""
    return _read_bits(raw, TERM_ITEMS, {"expression": term.heavy if heavy else term.anywhere}, scope_number)


def _read_bits(raw: sqlite3.Connection, sql: str, params: dict[str, object], scope_number: int) -> dict[int, int]:
    """The items a statement finds in the scope, one bit set per prefix: the statement (TERM_ITEMS, TIMED_ITEMS) run
    once per prefix's id range, :low to :high, each time returning its items' sequence numbers as one JSON array
    (fetched row by row, the rows cost twice what the index took to find them; one range at a time, the array of a
    scope's million items is never held at once)."""
    found: dict[int, int] = {}
    for prefix in PREFIX_ORDER:
        low = (scope_number << SCOPE_SHIFT) | (prefix << TYPE_SHIFT)
        [(listed,)] = raw.execute(sql, params | {"low": low, "high": low | SEQUENCE})
        seqs = _bit_set(orjson.loads(listed))
        if seqs:
            found[prefix] = seqs
    return found


def _bytes(*sets: int) -> int:
    """What bit sets hold in memory, about."""
    return sum(one.bit_length() for one in sets) // 8


def _union(sets: list[int]) -> int:
    result = 0
    for one in sets:
        result |= one
    return result


class Counts:
    """How many of some bit sets hold each item, as binary digits, one bit set per digit (bit-sliced counting)."""

    def __init__(self, sets: list[int]) -> None:
        self.sets = len(sets)
        self.universe = _union(sets)
        """The items in any of them."""
        self.digits = [0] * max(1, len(sets).bit_length())
        for one in sets:
            carry = one
            for d, digit in enumerate(self.digits):
                self.digits[d], carry = digit ^ carry, digit & carry
                if not carry:
                    break

    def exactly(self, k: int) -> int:
        """The items in exactly k of the sets (k = 0: none of them, as a set of infinitely many bits: intersect it)."""
        if k > self.sets:
            return 0
        result = -1
        for d, digit in enumerate(self.digits):
            result &= digit if (k >> d) & 1 else ~digit
        return result

    def at_least(self, k: int) -> int:
        """The items in at least k of the sets (every item when k <= 0: intersect it)."""
        if k <= 0:
            return -1
        result = 0
        for j in range(k, self.sets + 1):
            result |= self.exactly(j)
        return result
