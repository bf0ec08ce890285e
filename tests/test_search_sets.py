"""Term sets (server/reader/search_sets.py): a query of five to eight terms answered from its terms' items held as
bit sets pages and counts exactly as the index's expressions do, and the rank rule says; which way a query goes is
decided from a sample, and a term read once serves later queries."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from jsonl_graph import imported_graph
from support import all_pages, client_for, ok
from test_search_rank import ATLAS, FUNCTION_WORDS, TYPE_ORDER, WORDS, _pages_follow_the_rank, random_graph

from server.reader import search_sets

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
    """Counts the queries answered from term sets and the term lists read (the real functions run)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.queries = 0
        self.terms: list[str] = []
        real_query_sets, real_read = search_sets.query_sets, search_sets._read_term

        async def query_sets(*args: Any, **kwargs: Any) -> Any:
            self.queries += 1
            return await real_query_sets(*args, **kwargs)

        def read_term(raw: Any, term: Any, scope_number: int) -> Any:
            self.terms.append(term.text)
            return real_read(raw, term=term, scope_number=scope_number)

        monkeypatch.setattr(search_sets, "query_sets", query_sets)
        monkeypatch.setattr(search_sets, "_read_term", read_term)


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
