"""The in-process Memo: one revision per lineage (a scope, a scope with its memory items, or the whole graph),
bounded by total weight, least recently used out first; a value heavier than all of it is not kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from jsonl_graph import imported_graph
from mcp import Client
from support import all_pages, demo_db, ok, server_for

from server.reader.memo import DEFAULT_ENTRIES, GRAPH, Memo, weight_of, with_memory
from server.reader.search_query import query_terms

ATLAS = 'projects:["atlas"]'
BEACON = 'projects:["beacon"]'


def test_the_memo_keeps_at_most_its_capacity_in_weight_dropping_the_least_recently_used() -> None:
    memo = Memo(entries=10).at(ATLAS, "1")
    memo.put("a", "A", weight=4)
    memo.put("b", "B", weight=4)
    assert memo.get("a") == "A"  # now the most recently used
    memo.put("c", "C", weight=4)  # 12 > 10: the least recently used ("b") goes
    assert (memo.get("a"), memo.get("b"), memo.get("c")) == ("A", None, "C")
    assert memo.put("huge", "H", weight=11) == "H"  # returned to the caller, never kept
    assert memo.get("huge") is None and memo.get("a") == "A"
    memo.put("a", "A2", weight=1)  # replacing a key replaces its weight
    for n in range(5):
        memo.put(n, n)
    assert memo.get("a") == "A2" and memo.get("c") == "C" and memo.get(4) == 4


def test_a_value_stored_at_a_new_revision_drops_every_value_of_the_old_one_in_its_lineage_only() -> None:
    memo = Memo()
    for key in ("coverage", "total", "whole"):
        memo.at(ATLAS, "7").put(key, f"atlas {key} at 7")
    memo.at(BEACON, "3").put("coverage", "beacon at 3")
    memo.at(GRAPH, "40").put(("trigrams", "qv"), ["qva"])
    assert memo.at(ATLAS, "8").get("coverage") is None  # another revision never reads an older value
    assert memo.at(ATLAS, "7").get("coverage") == "atlas coverage at 7"  # ... and a miss drops nothing

    memo.at(ATLAS, "8").put("coverage", "atlas coverage at 8")

    assert [memo.at(ATLAS, "7").get(key) for key in ("coverage", "total", "whole")] == [None, None, None]
    assert memo.at(ATLAS, "8").get("coverage") == "atlas coverage at 8"
    assert memo.at(BEACON, "3").get("coverage") == "beacon at 3"
    assert memo.at(GRAPH, "40").get(("trigrams", "qv")) == ["qva"]
    assert len(memo) == 3
    assert memo.revisions() == {ATLAS: "8", BEACON: "3", GRAPH: "40"}


def test_the_revision_stored_last_is_the_one_kept_and_a_lineage_without_values_is_forgotten() -> None:
    memo = Memo(entries=2)
    memo.at(ATLAS, "8").put("total", 8)
    memo.at(ATLAS, "7").put("total", 7)  # a call still reading the older snapshot: correct, and now the one kept
    assert (memo.at(ATLAS, "8").get("total"), memo.at(ATLAS, "7").get("total")) == (None, 7)
    memo.at(BEACON, "1").put("a", 1)
    memo.at(BEACON, "1").put("b", 2)  # the capacity (2) pushes atlas's last value out: atlas is not listed any more
    assert memo.revisions() == {BEACON: "1"}
    assert memo.at(BEACON, "2").put("huge", 0, weight=3) == 0  # too heavy to keep, but still a newer revision
    assert memo.revisions() == {} and len(memo) == 0


@pytest.mark.anyio
async def test_a_remembered_match_list_weighs_by_its_length_so_broad_queries_cannot_grow_memory(
    tmp_path: Path,
) -> None:
    """A multi-word query remembers its whole-query matches (up to 2,000) and a short needle its trigrams; each
    weighed 1 whatever its length, so 1,024 broad queries could hold ~2 million matches. They now weigh one unit
    more per 256 listed, like a get_context selection."""
    lines = _events_of_one_result({f"evt-{i:03d}": f"cache rollback {i}" for i in range(600)})
    server = server_for(imported_graph(tmp_path, lines))
    async with Client(server) as client:
        await ok(client, "story_graph_search", {"query": "one word"})  # remembers coverage, a total, an empty list
        before = server.memo.weight()
        await ok(client, "story_graph_search", {"query": "cache rollback"})
    # A total (1) and the whole-query list of 600 matches (1 + 600 // 256); the scope's coverage was remembered.
    assert server.memo.weight() - before == 1 + weight_of(600) == 4


@pytest.mark.anyio
async def test_a_memory_write_refreshes_the_remembered_selection_and_keeps_the_scopes_other_values(
    tmp_path: Path,
) -> None:
    """get_context's selection holds the memory items, so it is remembered at the scope's data and memory revisions,
    in a lineage of its own (with_memory): a memory write gives a fresh selection showing the change, and the
    scope's values at its data revision alone (coverage, search) are neither dropped nor recomputed."""
    db = demo_db(tmp_path)
    server = server_for(db)
    context = {"object_ref": {"type": "event", "id": "evt-decision-a"}, "page_size": 50}
    async with Client(server) as client:
        await ok(client, "story_graph_search", {"query": "cache"})
        await ok(client, "story_graph_get_context", context)
        before, held = server.memo.revisions(), len(server.memo)
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE memory_items SET body = 'Prefer Postgres' WHERE id = 'mem-atlas-boring-tech'")
        pages = await all_pages(client, "story_graph_get_context", context)
        await ok(client, "story_graph_search", {"query": "cache"})
        after = server.memo.revisions()
    assert after[ATLAS] == before[ATLAS]
    assert after[with_memory(ATLAS, True)] != before[with_memory(ATLAS, True)]
    assert len(server.memo) == held  # the old selection replaced, nothing of the scope's recomputed beside it
    assert any("Prefer Postgres" in item["content"] for page in pages for item in page["background"])


@pytest.mark.anyio
async def test_a_pasted_paragraph_is_remembered_as_one_value_and_pushes_out_nothing(tmp_path: Path) -> None:
    """A query's terms (their needles, each term's count of items for its plan) were remembered one value per term:
    a pasted paragraph of more than a thousand Han pairs filled the memo (1,024) on its own, pushing out what every
    other call had remembered. They are now one value per query, weighed by its terms."""
    lines = _events_of_one_result({"ev": "会话缓存"})
    paragraph = "".join(chr(0x4E00 + (i * 7919) % 20_000) for i in range(1_400))
    assert len(query_terms(paragraph)) > DEFAULT_ENTRIES
    server = server_for(imported_graph(tmp_path, lines))
    async with Client(server) as client:
        await ok(client, "story_graph_search", {"query": "会话缓存 方案 决定"})
        before = server.memo.weight()
        await ok(client, "story_graph_search", {"query": paragraph})
    # The paragraph's terms (1 + 1,399 // 256), its total and whole-query list, its note's lookups: a few units.
    assert before < server.memo.weight() < before + 32


def _events_of_one_result(titles: dict[str, str]) -> list[dict[str, Any]]:
    """A graph of project atlas: one result and an event per id with its title."""
    atlas = {"kind": "projects", "projectIds": ["atlas"]}
    stamp = "2026-05-01T08:00:00Z"
    return [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": atlas},
        {"kind": "result", "id": "r", "scope": atlas, "review_generated_at": stamp, "recorded_at": stamp},
        *(
            {"kind": "event", "id": event_id, "result_id": "r", "event_type": "note", "title": title}
            | {"recorded_at": stamp}
            for event_id, title in titles.items()
        ),
    ]
