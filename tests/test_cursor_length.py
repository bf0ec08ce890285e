"""Every cursor a tool issues is one the tools take back: at most 4,096 characters (SPEC §4), whatever the scope.

A cursor carries its scope, and a scope of 100 random UUID project ids is 3.9 KB of key: its cursors were 5.7 K
characters, so following one was refused as invalid_arguments (cursor longer than 4,096) by the server that issued
it. Such a cursor is now compressed; a scope too long even for that (100 ids of 256 code points) is carried as a
digest, and its cursor is followed with the scope sent beside it (docs/tools.md, Paging).
"""

from __future__ import annotations

import random
import string
import uuid
from pathlib import Path
from typing import Any

import pytest
from jsonl_graph import imported_graph
from mcp import Client
from support import client_for, error, ok
from test_response_budget import EVENT, PROJECT, worst_graph

from server.contracts.common import CURSOR_MAX_CHARS, Grant

pytestmark = pytest.mark.anyio

T = "2026-05-01T08:00:00Z"
RANDOM = random.Random(20261201)
UUIDS = [str(uuid.UUID(int=RANDOM.getrandbits(128), version=4)) for _ in range(100)]
LONG_IDS = ["".join(RANDOM.choices(string.ascii_letters + string.digits, k=256)) for _ in range(100)]


def graph(project_ids: list[str]) -> list[dict[str, Any]]:
    """Three events, an entity and a source of 12,000 code points, all under one scope of the given projects."""
    scope = {"kind": "projects", "projectIds": project_ids}
    return [
        *({"kind": "project", "id": p, "name": f"P{n}"} for n, p in enumerate(project_ids)),
        {"kind": "scope", "scope": scope},
        {"kind": "result", "id": "r1", "scope": scope, "review_generated_at": T, "recorded_at": T},
        {"kind": "story_line", "id": "sl", "scope": scope, "topic": "word line", "recorded_at": T},
        {"kind": "entity", "id": "ent", "story_line_id": "sl", "canonical_label": "word entity", "updated_at": T},
        *(
            {
                "kind": "event",
                "id": f"ev{n}",
                "result_id": "r1",
                "story_line_id": "sl",
                "event_type": "decision",
                "title": f"word {n}",
                "event_time": None,
                "recorded_at": T,
                "entity_ids": ["ent"],
                "source_reference_ids": ["ref"],
            }
            for n in range(3)
        ),
        {
            "kind": "source",
            "id": "src",
            "source_type": "conversation",
            "project_id": project_ids[0],
            "title": "chat",
            "current_version": "v1",
            "updated_at": T,
        },
        {"kind": "source_version", "source_id": "src", "version": "v1", "text": "word " * 2_400, "recorded_at": T},
        {
            "kind": "source_reference",
            "id": "ref",
            "result_id": "r1",
            "source_type": "conversation",
            "original_source_id": "src",
            "source_version": "v1",
            "fragment": {"text": "word", "start": 0, "end": 4},
            "recorded_at": T,
        },
    ]


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("story_graph_search", {"query": "word", "page_size": 1}),
    ("story_graph_get_context", {"object_ref": {"type": "entity", "id": "ent"}, "page_size": 1}),
    ("story_graph_read_source", {"source_reference_id": "ref", "content_kind": "current", "page_size": 1_000}),
]


async def _first_cursor(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    cursor = (await ok(client, tool, arguments))["page"]["next_cursor"]
    assert cursor is not None
    assert len(cursor) <= CURSOR_MAX_CHARS, (tool, len(cursor))
    return str(cursor)


@pytest.mark.parametrize(("tool", "arguments"), CALLS, ids=[tool for tool, _ in CALLS])
async def test_a_scope_of_100_uuid_projects_pages_on_with_the_cursor_alone(
    tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    """Before: the cursor was about 5,700 characters and following it was refused (invalid_arguments)."""
    scope = {"kind": "projects", "projectIds": UUIDS}
    async with client_for(imported_graph(tmp_path, graph(UUIDS)), Grant(allow_global=True)) as client:
        cursor = await _first_cursor(client, tool, arguments | {"scope": scope})
        page = await ok(client, tool, arguments | {"cursor": cursor})
        assert page["resolved_scope"] == {"kind": "projects", "projectIds": sorted(UUIDS)}
        assert page["page"]["returned_count"] >= 1


@pytest.mark.parametrize(("tool", "arguments"), CALLS, ids=[tool for tool, _ in CALLS])
async def test_a_scope_too_long_to_carry_is_sent_beside_its_cursor(
    tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    """100 project ids of 256 random letters: 26 KB of scope, which no cursor can carry."""
    scope = {"kind": "projects", "projectIds": LONG_IDS}
    async with client_for(imported_graph(tmp_path, graph(LONG_IDS)), Grant(allow_global=True)) as client:
        cursor = await _first_cursor(client, tool, arguments | {"scope": scope})
        page = await ok(client, tool, arguments | {"cursor": cursor, "scope": scope})
        assert page["page"]["returned_count"] >= 1
        alone = await error(client, tool, arguments | {"cursor": cursor})
        assert alone["error"] == "invalid_cursor"
        assert alone["field"] == "cursor, scope"
        assert "send the scope of the first page with it" in alone["message"]
        other = {"kind": "projects", "projectIds": LONG_IDS[:99]}
        refused = await error(client, tool, arguments | {"cursor": cursor, "scope": other})
        assert refused["error"] == "invalid_cursor"
        assert refused["field"] == "cursor, scope"
        assert refused["message"] == "the cursor was issued for another scope; repeat the original scope."


async def test_get_context_cursors_fit_with_every_id_at_its_costliest(tmp_path: Path) -> None:
    """Ids of 256 code points in 6-byte JSON escapes (test_response_budget): the cursor was 6,758 characters."""
    arguments = {"object_ref": {"type": "event", "id": EVENT}, "page_size": 1, "content_page_size": 1}
    async with client_for(imported_graph(tmp_path, worst_graph()), Grant(default_project=PROJECT)) as client:
        cursor = await _first_cursor(client, "story_graph_get_context", arguments)
        await ok(client, "story_graph_get_context", arguments | {"cursor": cursor})
