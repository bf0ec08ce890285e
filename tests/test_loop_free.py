"""A long search does not hold up its stdio session: another call sent while it runs is answered first, and a cancel
sent while it runs stops it (no answer) while the session keeps answering, on every pooled connection.

The graph makes each full-text statement of the search long inside one SQLite step (server/reader/db.py): every
trigram of the queries is in every description, the whole query in none, so FTS5 reads every description's
positions to find no match, in the step that opens the statement. Run on the event loop's thread, such a step
held every other message of the session until it ended.

These tests assert what the user sees, not how soon: before the fix the server also passed them at this scale (each
long step ran inline for at most ~0.2 s and then the statement moved to the thread, where the loop was free again),
so the late answers showed only as latency (benchmarks/bench_loop_lag.py). The rule itself, a full-text statement
never runs on the loop, is pinned by test_reader_db.py::test_a_full_text_statement_never_runs_on_the_event_loop.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Final

import anyio
import pytest
from http_support import raw_stdio, stdio_session
from jsonl_graph import ALPHA, T0, T1, imported_graph
from support import ok

pytestmark = pytest.mark.slow

SEARCH: Final = "story_graph_search"
ENTITIES: Final = 3000
DESCRIPTION: Final = ("alphabravocharliedeltaechofoxtrotgolfhotelindiajulietkilolimacharliezulu" * 300)[:20_000]
HEAVY: Final = (  # "...limacharliedelta" is in no description; each of its trigrams is in all of them
    "alphabravocharliedeltaechofoxtrotgolfhotelindiajulietkilolimacharliedelta",
    "bravocharliedeltaechofoxtrotgolfhotelindiajulietkilolimacharliedelta",
)
UNDER_WAY: Final = 0.3
"""Seconds the test gives the server to start the long search before it sends the next message (the search's
statements take several times longer; a message sent before they start would prove nothing)."""


@pytest.fixture(scope="module")
def heavy_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("loop-free")
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "alpha", "name": "Alpha"},
        {"kind": "scope", "scope": ALPHA},
        {"kind": "result", "id": "r-alpha", "scope": ALPHA, "review_generated_at": T0, "recorded_at": T1},
        {"kind": "story_line", "id": "sl-alpha", "scope": ALPHA, "topic": "Alphabet", "recorded_at": T0},
    ]
    lines += [
        {
            "kind": "entity",
            "id": f"ent-{i:05d}",
            "story_line_id": "sl-alpha",
            "canonical_label": f"Entity {i}",
            "description": DESCRIPTION,
            "updated_at": T0,
        }
        for i in range(ENTITIES)
    ]
    return imported_graph(folder, lines, name="heavy")


@pytest.mark.anyio
async def test_a_call_sent_while_a_long_search_runs_is_answered_before_it(heavy_db: Path, tmp_path: Path) -> None:
    async with stdio_session(["--db", str(heavy_db), "--project", "alpha"], tmp_path) as client:
        await client.list_tools()
        answered: list[str] = []

        async def long_search() -> None:
            found = await ok(client, SEARCH, {"query": HEAVY[0]})
            assert found["items"] == []
            answered.append("search")

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(long_search)
            await anyio.sleep(UNDER_WAY)
            tools = await client.list_tools()
            assert SEARCH in {tool.name for tool in tools.tools}
            answered.append("tools/list")
            found = await ok(client, SEARCH, {"query": "ent-00007"})  # a cheap search, on another connection
            assert found["items"][0]["object_ref"]["id"] == "ent-00007"
            answered.append("cheap search")
        assert answered == ["tools/list", "cheap search", "search"]


def test_a_long_search_cancelled_while_it_runs_is_stopped_and_the_session_keeps_answering(
    heavy_db: Path, tmp_path: Path
) -> None:
    """notifications/cancelled during the long statement: the call gets no answer, the next message is answered at
    once (before the search would have ended), and so are searches on every pooled connection afterwards."""

    def search(request_id: int, query: str) -> dict[str, Any]:
        params = {"name": SEARCH, "arguments": {"query": query}}
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}

    with raw_stdio(["--db", str(heavy_db), "--project", "alpha"], tmp_path) as server:
        server.initialize()
        server.send(search(7, HEAVY[1]))
        time.sleep(UNDER_WAY)
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
        server.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})
        server.send(search(9, HEAVY[1]))  # the same search again, not cancelled: it runs to its end
        assert server.receive()["id"] == 8  # answered while the cancelled search's statement was still running
        assert server.receive()["id"] == 9  # never an answer to the cancelled call
        for n in range(8):  # more than the pool's connections
            reply = server.call(search(100 + n, f"ent-{n:05d}"))
            assert reply["id"] == 100 + n, reply
            assert reply["result"]["isError"] is False, reply
        server.stdin.close()
        assert server.wait() == 0
        assert "Traceback" not in server.output()
