"""Read-side edges: ids that differ by case, queries at the edge of Unicode, identifier matches with unknown time,
and an experience that shows a story of a narrower scope (real SQLite, real MCP client)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonl_graph import PAIR, imported_graph, story_graph
from support import all_pages, client_for, ok

from server.contracts.common import Grant

pytestmark = pytest.mark.anyio

SEARCH = "story_graph_search"
ATLAS = {"kind": "projects", "projectIds": ["atlas"]}
T0 = "2026-04-01T10:00:00Z"


def _graph(extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "story_line", "id": "sl", "scope": ATLAS, "topic": "storage", "recorded_at": T0},
        *extra,
    ]


def _db(tmp_path: Path, lines: list[dict[str, Any]]) -> Path:
    return imported_graph(tmp_path, lines)


def _db_lines(tmp_path: Path, lines: list[dict[str, Any]]) -> Path:
    return _db(tmp_path, lines)


def _any() -> Grant:
    return Grant(default_project=None)


async def test_an_identifier_query_lists_its_object_once_whatever_was_searched_before(tmp_path: Path) -> None:
    # The whole-query set is remembered per folded query, but it leaves out the identifier matches of the
    # exact (case-sensitive) query that computed it: another spelling must not reuse it.
    entity = {
        "kind": "entity",
        "id": "Session-Cache",
        "story_line_id": "sl",
        "canonical_label": "Session-Cache",
        "description": "where sessions live",
        "updated_at": T0,
    }
    db = _db(tmp_path, _graph([entity]))
    async with client_for(db) as client:
        await ok(client, SEARCH, {"query": "session-cache"})
        pages = await all_pages(client, SEARCH, {"query": "Session-Cache", "page_size": 1})
        items, last = [item for page in pages for item in page["items"]], pages[-1]
    refs = [(i["object_ref"]["id"], i["result_id"], i["match_kind"]) for i in items]
    assert refs == [("Session-Cache", None, "identifier")]
    assert last["page"]["total_count"] == 1


@pytest.mark.parametrize("query", ["\U0010ffff", "a\U0010ffff", "\ud7ff", "a\ud7ff"])
async def test_a_short_query_at_the_edge_of_unicode_is_just_text(tmp_path: Path, query: str) -> None:
    # A one- or two-character needle is looked up through the trigrams it begins, bounded above by the
    # "next" string: U+10FFFF has no next code point, and the one after U+D7FF is a surrogate SQLite refuses.
    entity = {
        "kind": "entity",
        "id": "en-edge",
        "story_line_id": "sl",
        "canonical_label": f"edge {query}x marks",
        "updated_at": T0,
    }
    db = _db(tmp_path, _graph([entity]))
    async with client_for(db) as client:
        page = await ok(client, SEARCH, {"query": query})
    assert [i["object_ref"]["id"] for i in page["items"]] == ["en-edge"]
    assert page["page"]["total_count"] == 1


async def test_renaming_the_primary_story_of_an_event_an_experience_lists_reaches_the_experience(
    tmp_path: Path,
) -> None:
    # ex-pair ({alpha, beta}) lists ev-1 (alpha) with its primary story's id and name (st-thread, alpha). The
    # rename is a write to alpha only; the pair scope reads it too, so its revision must change (else the
    # remembered get_context selection, and any cursor, keep the old name).
    db = imported_graph(tmp_path, story_graph())
    args = {"object_ref": {"type": "experience", "id": "ex-pair"}, "scope": PAIR, "page_size": 50}

    def story_names(page: dict[str, Any]) -> set[str]:
        target = next(i for i in page["items"] if i["object_ref"]["id"] == "ex-pair")
        return {e["storyName"] for e in orjson.loads(target["content"])["events"] if e["storyId"] == "st-thread"}

    async with client_for(db) as client:
        before = await ok(client, "story_graph_get_context", args)
        assert story_names(before) == {"SQLite 迁移"}
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE stories SET name = 'Renamed thread' WHERE id = 'st-thread'")
        after = await ok(client, "story_graph_get_context", args)
        with sqlite3.connect(db) as conn:  # ev-1 loses its primary story: the experience reads that too
            conn.execute("UPDATE story_events SET is_primary = 0 WHERE story_id = 'st-thread' AND is_primary = 1")
        unlinked = await ok(client, "story_graph_get_context", args)
    assert story_names(after) == {"Renamed thread"}
    assert after["data_revision"] != before["data_revision"]
    assert story_names(unlinked) == set()
    assert unlinked["data_revision"] != after["data_revision"]


async def test_an_identifier_match_left_out_for_its_unknown_time_is_counted(tmp_path: Path) -> None:
    # ref-1 is found by its message id (m-7), which is in no searchable field. A reference has no event time,
    # so an event_time range leaves it out: the response must say one match was excluded, not 0.
    from jsonl_graph import ALPHA, small_graph

    db = _db_lines(tmp_path, small_graph())
    window = {"from": "2026-01-01T00:00:00Z", "to": "2026-12-31T00:00:00Z"}
    async with client_for(db, grant=_any()) as client:
        unfiltered = await ok(client, SEARCH, {"query": "m-7", "scope": ALPHA})
        filtered = await ok(client, SEARCH, {"query": "m-7", "scope": ALPHA, "time_range": window})
    assert [i["object_ref"]["id"] for i in unfiltered["items"]] == ["ref-1"]
    assert filtered["items"] == []
    assert filtered["unknown_time_excluded_count"] == 1
