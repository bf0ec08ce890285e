"""An object citing thousands of sources stays readable: items and header relations list the first 100 source
reference ids with the count of all, and get_context's content still holds every one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonl_graph import T1, imported_graph, small_graph
from support import all_pages, client_for, ok
from test_context_paging import reassemble

from server.contracts.common import Grant

CITED = 3000
"""Enough 40-character ids to pass the 100,000-byte response limit on their own."""
pytestmark = pytest.mark.anyio
REFS = [f"ref-many-{i:05d}-{'x' * 26}" for i in range(CITED)]


@pytest.fixture
def graph_db(tmp_path: Path) -> Path:
    lines: list[dict[str, Any]] = small_graph()
    for i, ref in enumerate(reversed(REFS)):  # stored out of id order: the listed ones are the first by id
        lines.append(
            {
                "kind": "source_reference",
                "id": ref,
                "result_id": "r-alpha",
                "source_type": "note",
                "original_source_id": f"note-{i}",
                "fragment": {"text": f"bulk fragment {i}"},
                "recorded_at": T1,
            }
        )
    cited = {"result_id": "r-alpha", "recorded_at": T1, "source_reference_ids": list(reversed(REFS))}
    lines.append({"kind": "event", "id": "ev-many", "event_type": "decision", "title": "Zebra decision", **cited})
    lines.append(
        {
            "kind": "relation",
            "id": "rel-many",
            "from_ref": {"type": "event", "id": "ev-many"},
            "to_ref": {"type": "entity", "id": "ent-a"},
            "relation_type": "supports",
            "reason": "cited everywhere",
            **cited,
        }
    )
    return imported_graph(tmp_path, lines)


def listed(part: dict[str, Any]) -> None:
    assert part["source_reference_ids"] == REFS[:100]
    assert part["source_reference_count"] == CITED


async def test_an_object_citing_thousands_of_sources_is_found_and_read_whole(graph_db: Path) -> None:
    async with client_for(graph_db, Grant(default_project="alpha")) as client:
        found = await ok(client, "story_graph_search", {"query": "zebra"})
        listed(next(i for i in found["items"] if i["object_ref"] == {"type": "event", "id": "ev-many"}))

        event = {"object_ref": {"type": "event", "id": "ev-many"}}
        pages = await all_pages(client, "story_graph_get_context", event)
        header = pages[0]["header"]
        relation = next(r for r in header["relations"] if r["relation_ref"]["id"] == "rel-many")
        listed(relation)
        many = [i for page in pages for i in page["items"] if i["object_ref"]["id"] in ("ev-many", "rel-many")]
        assert many
        for item in many:
            listed(item)
        # every id is still there, in the stored objects' content, page after page
        texts = reassemble(pages)
        whole = orjson.loads(texts[("event", "ev-many", "r-alpha")])
        assert sorted(whole["source_reference_ids"]) == REFS

        entity = await ok(client, "story_graph_get_context", {"object_ref": {"type": "entity", "id": "ent-a"}})
        listed(next(r for r in entity["header"]["relations"] if r["relation_ref"]["id"] == "rel-many"))

        # an object with few sources lists them all, with their count
        small = next(i for i in entity["items"] if i["object_ref"] == {"type": "entity", "id": "ent-a"})
        assert small["source_reference_count"] == len(small["source_reference_ids"])
