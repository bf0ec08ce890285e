"""A server keeps serving while its graph is imported into by another writer: every call answers from the
revision it read, and the server's memo holds one revision per scope (and of the graph), never the history.

A real server (in process, behind a real MCP client session) on a real SQLite file, imported into with the same
code as `db import` on a connection of its own between calls."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Final

import pytest
from jsonl_graph import write_jsonl
from mcp import Client
from support import demo_db, ok, server_for

from server.reader.memo import GRAPH, with_memory
from server.store.importer import import_file

pytestmark = pytest.mark.anyio

ATLAS: Final = {"kind": "projects", "projectIds": ["atlas"]}
ATLAS_KEY: Final = 'projects:["atlas"]'
ROUNDS: Final = 12
MARKER: Final = "livemarker"
"""A word in every imported event (and nowhere in the demo graph)."""
SHORT: Final = "qv"
"""A two-letter needle, matched through the trigrams it begins (remembered per graph revision): round n adds the
trigram `qv` + its own letter, so a list remembered at an earlier revision would miss the newest event."""


def round_lines(n: int) -> list[dict[str, Any]]:
    at = f"2026-05-{n:02d}T10:00:00Z"
    letter = chr(ord("a") + n)
    return [
        {
            "kind": "result",
            "id": f"res-live-{n}",
            "scope": ATLAS,
            "review_generated_at": at,
            "recorded_at": at,
            "coverage": {"kind": "legacy_count", "count": n},
        },
        {
            "kind": "event",
            "id": f"evt-live-{n}",
            "result_id": f"res-live-{n}",
            "event_type": "decision",
            "title": f"{MARKER} round {n} qv{letter}{letter}",
            "event_time": {"start": at, "precision": "minute", "basis": "message_time"},
            "recorded_at": at,
        },
    ]


def revisions(db: Path) -> dict[object, str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        graph, global_memory = conn.execute(
            "SELECT data_revision, global_memory_revision FROM graph_state WHERE id = 1"
        ).fetchone()
        atlas, memory = conn.execute(
            "SELECT data_revision, memory_revision FROM scopes WHERE scope_key = ?", (ATLAS_KEY,)
        ).fetchone()
    finally:
        conn.close()
    # get_context's selections hold the memory items: remembered at the scope's data revision and the memory revision
    # its caller is shown, the Global one included for this grant, which reads Global (memo.with_memory).
    return {
        ATLAS_KEY: str(atlas),
        with_memory(ATLAS_KEY, True): f"{atlas}:{memory}:{global_memory}",
        GRAPH: str(graph),
    }


async def read_everything(client: Client, rounds_imported: int) -> None:
    """Searches (whole-query, several terms, a short needle), get_context and read_source; checked against what
    the rounds imported so far."""
    live = {f"evt-live-{n}" for n in range(1, rounds_imported + 1)}
    marked = await ok(client, "story_graph_search", {"query": MARKER, "page_size": 50})
    assert {item["object_ref"]["id"] for item in marked["items"]} == live
    assert marked["page"]["total_count"] == rounds_imported
    results = marked["coverage"]["published_result_count"]
    short = await ok(client, "story_graph_search", {"query": SHORT, "page_size": 50})
    assert {item["object_ref"]["id"] for item in short["items"]} == live
    may = {"from": "2026-05-01T00:00:00Z", "to": "2026-05-31T23:59:59Z"}
    in_may = await ok(client, "story_graph_search", {"query": MARKER, "time_range": may, "page_size": 50})
    assert {item["object_ref"]["id"] for item in in_may["items"]} == live
    both = await ok(client, "story_graph_search", {"query": f"{MARKER} round", "page_size": 50})
    assert {item["object_ref"]["id"] for item in both["items"]} >= live
    redis = await ok(client, "story_graph_search", {"query": "Redis session cache"})
    assert redis["items"] and redis["coverage"]["published_result_count"] == results
    context = await ok(client, "story_graph_get_context", {"object_ref": {"type": "event", "id": "evt-decision-a"}})
    assert context["data_revision"] == marked["data_revision"]
    await ok(client, "story_graph_read_source", {"source_reference_id": "ref-decision-a-msg"})
    if rounds_imported:
        newest = await ok(
            client, "story_graph_get_context", {"object_ref": {"type": "event", "id": f"evt-live-{rounds_imported}"}}
        )
        assert newest["data_revision"] == marked["data_revision"]


async def test_a_server_imported_into_while_it_serves_answers_each_revision_and_remembers_only_the_current(
    tmp_path: Path,
) -> None:
    db = demo_db(tmp_path)
    server = server_for(db)
    async with Client(server) as client:
        await read_everything(client, 0)
        before = await ok(client, "story_graph_search", {"query": MARKER})
        remembered = []
        for n in range(1, ROUNDS + 1):
            import_file(db, write_jsonl(tmp_path / f"round-{n}.jsonl", round_lines(n)))
            await read_everything(client, n)
            coverage = (await ok(client, "story_graph_search", {"query": MARKER}))["coverage"]
            assert coverage["published_result_count"] == before["coverage"]["published_result_count"] + n
            assert server.memo.revisions() == revisions(db)  # what it read: atlas and the graph, now
            remembered.append(len(server.memo))
    # The same calls every round: the memo holds the same number of values after each, not one round's more.
    assert remembered == [remembered[0]] * ROUNDS, remembered
