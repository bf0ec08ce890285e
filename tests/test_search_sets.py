"""Term sets (server/reader/search_sets.py): a query of five to eight terms answered from its terms' items held as
bit sets pages and counts exactly as the index's expressions do, and the rank rule says; which way a query goes is
decided from a sample, and a term read once serves later queries."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any, Final

import aiosqlite
import anyio
import pytest
from jsonl_graph import imported_graph, write_jsonl
from mcp import Client
from support import all_pages, client_for, ok, server_for
from test_read_failures import rollback_journal
from test_search_rank import ATLAS, FUNCTION_WORDS, TYPE_ORDER, WORDS, _pages_follow_the_rank, random_graph

from server.contracts.base import OBJECT_TYPES
from server.contracts.common import Grant
from server.reader import search as reader
from server.reader import search_sets
from server.reader.db import Database
from server.reader.fold import Folder
from server.reader.memo import Memo
from server.reader.scope import ResolvedScope, resolve_page_scope
from server.store.importer import import_file

pytestmark = pytest.mark.anyio

SEARCH = "story_graph_search"
TYPES = [t for t in TYPE_ORDER if t not in ("story", "experience")]
BASES = ["event_time", "review_generated_at", "recorded_at"]
MANY_TERMS = [
    "session cache 会话 缓存 方案 redis",
    "cache rollback budget sqlite redis",
    "什么 is the 会话 about for rollback budget",  # function words: tiers count the others
    "what is the session cache",
    "redis session budget rollback sqlite cache ab",  # `ab`: a short needle, read through its trigrams
    "zyzzyva session qqqq cache 方案",  # terms no item holds
    "回顾调度 budget cache",  # a Han run's pairs
    "Ｒｅｄｉｓ ｓｅｓｓｉｏｎ ｃａｃｈｅ budget rollback",
]


class Taken:
    """Counts the queries answered from term sets, the term lists and time sets read (the real functions run)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.queries = 0
        self.terms: list[str] = []
        self.connections: list[list[int]] = []
        """Per query answered from term sets: the connection each of its term lists was read on."""
        real_query_sets, real_read = search_sets.query_sets, search_sets._read_term

        async def query_sets(*args: Any, **kwargs: Any) -> Any:
            self.queries += 1
            self.connections.append([])
            return await real_query_sets(*args, **kwargs)

        def read_term(raw: Any, term: Any, heavy: bool, scope_number: int) -> Any:
            if not heavy:
                self.terms.append(term.text)
            self.connections[-1].append(id(raw))
            return real_read(raw, term=term, heavy=heavy, scope_number=scope_number)

        self.timed: list[int] = []
        """The connection each statement reading a time set ran on."""
        real_read_bits = search_sets._read_bits

        def read_bits(raw: sqlite3.Connection, sql: str, params: dict[str, object], scope_number: int) -> Any:
            if "search_items_times" in sql:
                self.timed.append(id(raw))
            return real_read_bits(raw, sql, params, scope_number)

        monkeypatch.setattr(search_sets, "query_sets", query_sets)
        monkeypatch.setattr(search_sets, "_read_term", read_term)
        monkeypatch.setattr(search_sets, "_read_bits", read_bits)


def _always(monkeypatch: pytest.MonkeyPatch, sets: bool) -> None:
    """Every query of enough terms takes the sets (True) or the expressions (False), whatever the sample says."""
    monkeypatch.setattr(search_sets, "SPARSE_TOP", 10**9 if sets else 0)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_pages_from_term_sets_follow_the_rank_exactly(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _always(monkeypatch, sets=True)
    taken = Taken(monkeypatch)
    lines = random_graph(seed, size=80, words=WORDS + FUNCTION_WORDS)
    await _pages_follow_the_rank(tmp_path, lines, MANY_TERMS)
    assert taken.queries >= len(MANY_TERMS)  # the first page of each (later pages may reuse the remembered sets)


@pytest.mark.parametrize("seed", [4, 5])
async def test_term_sets_and_expressions_give_the_same_pages_and_totals(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every page and total, with types or a time range filtered, other rows, and identifier and whole-query matches
    listed first."""
    lines = random_graph(seed, size=120, words=WORDS + FUNCTION_WORDS)
    lines.append(
        {
            "kind": "event",
            "id": "whole",
            "result_id": "r0",
            "event_type": "decision",
            "title": "session cache 会话 缓存 方案 redis",
            "recorded_at": "2026-04-02T10:00:00Z",
        }
    )
    # An object whose id is a query: an identifier match, first, and counted once.
    named = {"kind": "entity", "id": MANY_TERMS[1], "story_line_id": "sl", "updated_at": "2026-04-03T10:00:00Z"}
    lines.append(named | {"canonical_label": "cache budget", "description": "rollback sqlite redis"})
    db = imported_graph(tmp_path, lines)
    filters: list[tuple[int, dict[str, Any]]] = [
        (3, {}),
        (10, {"object_types": ["event", "summary"]}),
        (4, {"object_types": ["entity", "source_reference", "relation"]}),
        (6, {"time_range": {"from": "2026-04-03T00:00:00Z", "to": "2026-04-17T23:59:59Z"}}),
        (
            5,
            {
                "time_range": {"from": "2026-04-01T00:00:00Z", "to": "2026-04-09T23:59:59Z"},
                "time_basis": "recorded_at",
            },
        ),
    ]
    requests = [{"query": query, "page_size": size, **more} for query in MANY_TERMS for size, more in filters]
    answers = await _both_ways(db, requests, monkeypatch, least=1)
    assert any(page["items"] for pages in answers[True] for page in pages)
    first = answers[True][5][0]["items"][0]  # MANY_TERMS[1], every type
    assert first["object_ref"]["id"] == MANY_TERMS[1] and first["match_kind"] == "identifier"


async def test_the_sample_sends_sparse_upper_tiers_to_the_sets_and_dense_ones_to_the_expressions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five words each in many items, all five together in many (dense) or few (sparse)."""
    words = ["alpha", "bravo", "charlie", "delta", "echo"]
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {
            "kind": "result",
            "id": "r",
            "scope": ATLAS,
            "review_generated_at": "2026-04-01T00:00:00Z",
            "recorded_at": "2026-04-01T00:00:00Z",
        },
    ]
    for i in range(200):
        # Items 0-149 hold two of the words each; 150-199 all five.
        text = " ".join(words) if i >= 150 else f"{words[i % 5]} {words[(i + 1) % 5]} note {i}"
        lines.append(
            {"kind": "summary", "id": f"s{i}", "result_id": "r", "body": text, "recorded_at": "2026-04-01T00:00:00Z"}
        )
    db = imported_graph(tmp_path, lines)
    taken = Taken(monkeypatch)
    async with client_for(db) as client:
        dense = await ok(client, SEARCH, {"query": "alpha bravo charlie delta echo"})
        assert taken.queries == 0 and dense["page"]["total_count"] == 50
        # No item holds four of these: the upper two tiers (5 and 4 terms) are empty.
        sparse = await ok(client, SEARCH, {"query": "alpha bravo charlie foxtrot golf"})
        assert taken.queries == 1 and sparse["page"]["total_count"] == 50
        assert sorted(taken.terms) == ["alpha", "bravo", "charlie", "foxtrot", "golf"]
        # The next query sharing terms reads only the new one, and each page after the first reads nothing.
        pages = await all_pages(client, SEARCH, {"query": "alpha bravo charlie foxtrot india", "page_size": 7})
        assert taken.terms[5:] == ["india"] and len(pages) == 8


def test_bit_sliced_counts_agree_with_counting_each_item() -> None:
    rng = random.Random(7)
    for _ in range(200):
        sets = [rng.getrandbits(64) & rng.getrandbits(64) for _ in range(rng.randint(0, 9))]
        counts = search_sets.Counts(sets)
        held = [sum((s >> bit) & 1 for s in sets) for bit in range(64)]
        for k in range(-1, len(sets) + 2):
            at_least = {bit for bit in range(64) if held[bit] >= k}  # every item when k <= 0
            exactly = {bit for bit in range(64) if held[bit] == k}
            universe = counts.universe
            assert {b for b in range(64) if (counts.at_least(k) & ((1 << 64) - 1)) >> b & 1} == at_least
            if k >= 1:
                assert {b for b in range(64) if counts.exactly(k) >> b & 1} == exactly
            assert {b for b in range(64) if universe >> b & 1} == {b for b in range(64) if held[b] >= 1}


@pytest.mark.parametrize("seed", [6, 7])
async def test_random_queries_of_five_to_eight_terms_page_and_count_alike_both_ways(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    words = WORDS + FUNCTION_WORDS
    db = imported_graph(tmp_path, random_graph(seed, size=100, words=words))
    requests = [
        {"query": " ".join(rng.sample(words, rng.randint(5, 8))), "page_size": rng.choice([2, 5, 9])}
        | ({"object_types": rng.sample(TYPES, rng.randint(1, 3))} if rng.random() < 0.4 else {})
        | (_time_filter(rng) if rng.random() < 0.4 else {})
        for _ in range(40)
    ]
    await _both_ways(db, requests, monkeypatch, least=20)  # most of them have five usable terms or more


async def test_a_querys_terms_are_read_on_two_connections_with_the_answers_of_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The terms a query has not read yet, and a time range's two sets, are shared between its snapshot's connection
    and a free one (two lists read at once); every page and total is the one reading them all on one connection
    gives."""
    _always(monkeypatch, sets=True)
    db = imported_graph(tmp_path, random_graph(6, size=100, words=WORDS + FUNCTION_WORDS))
    requests = [{"query": query, "page_size": 4} for query in MANY_TERMS]
    requests += [{"query": MANY_TERMS[1], "time_range": {"from": "2026-04-05T00:00:00Z", "to": "2026-04-12T23:59:59Z"}}]
    answers: list[list[list[dict[str, Any]]]] = []
    for spare in (True, False):
        if not spare:
            monkeypatch.setattr(Database, "spare", _no_spare)
        taken = Taken(monkeypatch)
        async with client_for(db) as client:
            answers.append([await all_pages(client, SEARCH, request) for request in requests])
        # Two lists a term (anywhere, and in weight-3 fields): any query reading a term reads on both connections.
        read_on = [len(set(connections)) for connections in taken.connections if connections]
        assert read_on and set(read_on) == {2 if spare else 1}, read_on
        assert len(set(taken.timed)) == (2 if spare else 1), taken.timed  # the range's two sets
    with_spare, without = ([[_answer(p) for p in pages] for pages in answer] for answer in answers)
    assert with_spare == without


async def test_more_calls_at_once_than_connections_share_the_pool_and_answer_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight first calls at once on four connections, each wanting a second: those that find none read on their own,
    none waits for another's, and every page is the one the calls give one after another."""
    _always(monkeypatch, sets=True)
    db = imported_graph(tmp_path, random_graph(10, size=100, words=WORDS + FUNCTION_WORDS))
    requests = [{"query": query, "page_size": 5} for query in MANY_TERMS]
    async with client_for(db) as client:
        one_by_one = [await all_pages(client, SEARCH, request) for request in requests]
    taken = Taken(monkeypatch)
    at_once: dict[int, list[dict[str, Any]]] = {}
    async with client_for(db) as client:

        async def answer(n: int) -> None:
            at_once[n] = await all_pages(client, SEARCH, requests[n])

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tasks:
                for n in range(len(requests)):
                    tasks.start_soon(answer, n)
    assert taken.queries >= len(requests)
    assert [[_answer(p) for p in at_once[n]] for n in range(len(requests))] == [
        [_answer(p) for p in pages] for pages in one_by_one
    ]


async def test_a_spare_connection_whose_snapshot_reads_a_later_write_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write committed after a call's snapshot began: a spare connection begun after it sees another graph revision,
    so every term is read on the call's own connection and the answer is the one of the call's snapshot."""
    _always(monkeypatch, sets=True)
    query = MANY_TERMS[0]
    db = imported_graph(tmp_path, random_graph(7, size=60, words=WORDS + FUNCTION_WORDS))
    database = await Database.open(db)
    spare = Offered(database)

    async def page(conn: aiosqlite.Connection, scope: ResolvedScope, with_spare: bool) -> tuple[Any, ...]:
        found = await _first_page(conn, scope, query, spare if with_spare else None)
        return [(hit.item_id, hit.rank_class) for hit in found.hits], found.total

    grant = Grant(default_project="atlas")
    late = {"kind": "event", "id": "late", "result_id": "r0", "event_type": "decision", "title": query}
    try:
        async with database.snapshot() as conn:
            before = await resolve_page_scope(conn, grant, None, None)
            import_file(db, write_jsonl(tmp_path / "late.jsonl", [late | {"recorded_at": "2026-04-28T10:00:00Z"}]))
            answers = []
            for with_spare in (True, False):
                taken = Taken(monkeypatch)
                answers.append(await page(conn, before, with_spare))
                assert [len(set(read_on)) for read_on in taken.connections] == [1]
            assert spare.offered == [True]  # a spare was free, and was not read
            assert answers[0] == answers[1]
        async with database.snapshot() as conn:
            after = await resolve_page_scope(conn, grant, None, None)
            assert after.graph_revision != before.graph_revision
            taken = Taken(monkeypatch)
            hits, total = await page(conn, after, True)
            assert [len(set(read_on)) for read_on in taken.connections] == [2]  # the same revision: read at once
            assert total.count == answers[0][1].count + 1 and hits[0] not in answers[0][0]  # the late event, first
    finally:
        await database.close()


async def test_no_call_waits_for_a_spare_connection_a_writer_keeps_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollback journal, a call's snapshot begun, then a writer committing: the writer waits for the call's read
    lock and keeps new readers out meanwhile. The call's spare connection does not wait for it (which would wait for
    the writer, which waits for the call): every term is read on the call's own connection, the call is answered, and
    the writer commits after it."""
    _always(monkeypatch, sets=True)
    db = rollback_journal(imported_graph(tmp_path, random_graph(9, size=60, words=WORDS + FUNCTION_WORDS)))
    database = await Database.open(db, busy_timeout=3)
    spare = Offered(database)
    writer = sqlite3.connect(db, isolation_level=None, timeout=30, check_same_thread=False)
    try:
        async with database.snapshot() as conn:
            scope = await resolve_page_scope(conn, Grant(default_project="atlas"), None, None)
            writer.execute("BEGIN IMMEDIATE")
            writer.execute("UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1")
            committing = threading.Thread(target=writer.execute, args=("COMMIT",))
            committing.start()
            for _ in range(500):  # until the writer's COMMIT keeps new readers out
                if _reader_kept_out(db):
                    break
                await anyio.sleep(0.01)
            else:
                pytest.fail("the writer's COMMIT never kept a new reader out")
            taken = Taken(monkeypatch)
            found = await _first_page(conn, scope, MANY_TERMS[0], spare)
            assert found.hits and spare.offered == [False]
            assert [len(set(read_on)) for read_on in taken.connections] == [1]
        committing.join(20)
        assert not committing.is_alive()
        assert writer.execute("SELECT data_revision FROM graph_state").fetchone()[0] == int(scope.graph_revision) + 1
    finally:
        writer.close()
        await database.close()


async def test_a_call_cancelled_while_its_terms_are_read_on_two_connections_stops_both_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client cancels a call while its term lists are read on two connections (each read here first runs a
    statement only an interrupt ends): both statements are interrupted, both connections go back to the pool outside
    any transaction, and later calls, several at once, are answered as a fresh server answers them."""
    _always(monkeypatch, sets=True)
    db = imported_graph(tmp_path, random_graph(8, size=60, words=WORDS + FUNCTION_WORDS))
    request = {"query": MANY_TERMS[0], "page_size": 3}
    async with client_for(db) as client:
        expected = await all_pages(client, SEARCH, request)
    started: list[int] = []
    stopped: list[str] = []
    real_read = search_sets._read_term

    def endless_read(raw: sqlite3.Connection, term: Any, heavy: bool, scope_number: int) -> Any:
        started.append(id(raw))
        deadline = time.monotonic() + 20

        def too_long() -> bool:  # a bound for the test, not the server: it ends the statement if nothing did
            if time.monotonic() > deadline:
                stopped.append("not interrupted")
                return True
            return False

        raw.set_progress_handler(too_long, 10_000)
        try:
            raw.execute(ENDLESS).fetchall()
        except sqlite3.OperationalError as exc:
            stopped.append(str(exc))
            raise
        finally:
            raw.set_progress_handler(None, 0)
        return real_read(raw, term=term, heavy=heavy, scope_number=scope_number)

    monkeypatch.setattr(search_sets, "_read_term", endless_read)
    server = server_for(db)
    async with Client(server) as client:
        with anyio.fail_after(60):
            cancelled = anyio.CancelScope()

            async def search() -> None:
                with cancelled:
                    await client.call_tool(SEARCH, request)
                    raise AssertionError("the call was answered")

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(search)
                while len(set(started)) < 2:  # noqa: ASYNC110 - the reads start on the connections' threads
                    await anyio.sleep(0.01)
                cancelled.cancel()
            database = server._db
            assert database is not None
            # Each cancelled snapshot ends once its statement has stopped, on its connection's thread.
            while len(database._free) < len(database._all):  # noqa: ASYNC110
                await anyio.sleep(0.01)
            assert stopped == ["interrupted", "interrupted"] and len(set(started)) == 2
            assert not any(conn._raw is not None and conn._raw.in_transaction for conn in database._all)
            monkeypatch.setattr(search_sets, "_read_term", real_read)
            answers: list[list[dict[str, Any]]] = []

            async def answer() -> None:
                answers.append(await all_pages(client, SEARCH, request))

            async with anyio.create_task_group() as tasks:
                for _ in range(3):
                    tasks.start_soon(answer)
    assert [[_answer(p) for p in pages] for pages in answers] == [[_answer(p) for p in expected]] * 3


ENDLESS: Final = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
"""A statement that runs until it is interrupted."""


class Offered:
    """A Database's spare connections, recording whether each use found one."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.offered: list[bool] = []

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[aiosqlite.Connection | None]:
        async with self.database.spare() as other:
            self.offered.append(other is not None)
            yield other


async def _first_page(
    conn: aiosqlite.Connection, scope: ResolvedScope, query: str, spare: Offered | None
) -> reader.SearchPage:
    """The reader's first page of 50 of `query`, with nothing remembered (a new Memo)."""
    return await reader.search(
        conn,
        Folder(),
        Memo(),
        query=query,
        scope_key=scope.key,
        scope_revision=scope.revision,
        graph_revision=scope.graph_revision,
        object_types=list(OBJECT_TYPES),
        time_range=None,
        time_basis="event_time",
        page_size=50,
        position=None,
        spare=spare,
    )


def _reader_kept_out(db: Path) -> bool:
    """Whether a new reader is refused at once (a writer holds, or waits for, the exclusive lock)."""
    with closing(sqlite3.connect(db, timeout=0)) as conn:
        try:
            conn.execute("SELECT count(*) FROM graph_state").fetchall()
        except sqlite3.OperationalError as exc:
            return "locked" in str(exc)
    return False


@asynccontextmanager
async def _no_spare(self: Database) -> AsyncIterator[None]:
    yield None


async def _both_ways(
    db: Path, requests: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, least: int
) -> dict[bool, list[list[dict[str, Any]]]]:
    """Every page of each request from term sets (at least `least` of them taking the sets) and from the index's
    expressions, checked alike: items, page and total, and the count a time range leaves out."""
    answers: dict[bool, list[list[dict[str, Any]]]] = {}
    for sets in (True, False):
        _always(monkeypatch, sets)
        taken = Taken(monkeypatch)
        async with client_for(db) as client:
            answers[sets] = [await all_pages(client, SEARCH, request) for request in requests]
        assert (taken.queries >= least) if sets else taken.queries == 0
    for request, with_sets, with_expressions in zip(requests, answers[True], answers[False], strict=True):
        assert [_answer(p) for p in with_sets] == [_answer(p) for p in with_expressions], request
    return answers


def _time_filter(rng: random.Random) -> dict[str, Any]:
    """A range of days of the graph's April, on any basis (items of unknown time are left out and counted)."""
    first = rng.randint(1, 20)
    low, high = f"2026-04-{first:02d}T00:00:00Z", f"2026-04-{first + rng.randint(0, 8):02d}T23:59:59Z"
    return {"time_range": {"from": low, "to": high}, "time_basis": rng.choice(BASES)}


def _answer(page: dict[str, Any]) -> tuple[Any, ...]:
    return page["items"], page["page"], page.get("unknown_time_excluded_count")
