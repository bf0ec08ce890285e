"""Every id and text at its maximum legal length, in its costliest JSON, and every tool still answers at page_size 1
within the 100,000-byte response limit (docs/tools.md, get_context "Sizes").

An id is at most 256 code points; in U+0001 each is a 6-byte JSON escape (\\u0001), so one id is 1,538 bytes of
JSON. The scope's coverage block, which every response repeats, then held four lists of 10 entries of such ids:
about 140 KB, response_too_large for every call of the scope at any page size. So did an item's 100
`source_reference_ids` (154 KB) and read_source's 50 `available_versions` (77 KB).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonl_graph import imported_graph
from mcp import Client
from support import all_pages, client_for, server_for

from server.app import response_too_large
from server.contracts.common import Grant
from server.reader.context_header import HEADER_LISTS_BYTES

pytestmark = pytest.mark.anyio

LIMIT = 100_000
T = "2026-05-01T08:00:00Z"
EXTREME = [-(2**63), 2**63 - 1]
"""The widest range a record may hold: 44 bytes of JSON with its comma."""
COSTLY = "\x01"
"""A code point whose JSON costs the most: \\u0001, 6 bytes."""


def max_id(tag: str) -> str:
    """An id of 256 code points (the interchange limit), all but its tag in 6-byte escapes."""
    return COSTLY * (256 - len(tag)) + tag


PROJECT = max_id("p")
SCOPE = {"kind": "projects", "projectIds": [PROJECT]}
SOURCE = max_id("src")
REFERENCE = max_id("ref")
EVENT = max_id("ev")
ENTITY = max_id("ent")
LINE = max_id("sl")
TEXT = COSTLY * 300
"""Free text over every cap (256 code points), in 6-byte escapes."""
PAGE = "🚀" * 9_000
"""Text whose code points cost the most UTF-8 (4 bytes): a get_context fragment's costliest content."""
SOURCE_TEXT = COSTLY * 9_000
"""A source's raw text in 6-byte escapes: a read_source page of 8,000 code points is 48,000 bytes of JSON."""


def _coverage(index: int) -> dict[str, Any]:
    """A detailed record whose every list is over the coverage block's caps, with every text at its longest."""
    return {
        "kind": "detailed",
        "processed_range": {"from": T, "to": T},
        "unprocessed_sources": 1,
        "sources": [
            {
                "source_id": max_id(f"s{index}-{n}"),
                "source_version": max_id(f"v{index}-{n}"),
                "fragments": [EXTREME] * 12,
                "status": "unprocessed",
            }
            for n in range(12)
        ],
        "missing": [
            {"source_id": max_id(f"m{index}-{n}"), "ranges": [EXTREME] * 12, "reason": TEXT} for n in range(12)
        ],
        "source_types_not_included": [TEXT + f"{index}-{n}" for n in range(12)],
    }


def worst_graph() -> list[dict[str, Any]]:
    results = [max_id(f"r{n:02}") for n in range(12)]
    references = [max_id(f"ref{n:03}") for n in range(110)]
    versions = [max_id(f"ver{n:02}") for n in range(60)]
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": PROJECT, "name": TEXT},
        {"kind": "scope", "scope": SCOPE},
        *(
            {
                "kind": "result",
                "id": result,
                "scope": SCOPE,
                "review_generated_at": T,
                "recorded_at": T,
                "revision": TEXT,
                "coverage": _coverage(n),
            }
            for n, result in enumerate(results)
        ),
        {
            "kind": "source",
            "id": SOURCE,
            "source_type": TEXT,
            "project_id": PROJECT,
            "conversation_id": max_id("conv"),
            "title": TEXT,
            "current_version": versions[-1],
            "updated_at": T,
        },
        *(
            {"kind": "source_version", "source_id": SOURCE, "version": version, "text": SOURCE_TEXT, "recorded_at": T}
            for version in versions
        ),
        *(
            {
                "kind": "source_reference",
                "id": reference,
                "result_id": results[0],
                "source_type": TEXT,
                "original_source_id": SOURCE,
                "source_version": versions[0],
                "locator": dict.fromkeys(
                    ("project_id", "conversation_id", "message_id", "role", "document_id", "chunk_id", "task_id"),
                    TEXT,
                ),
                "title": TEXT,
                "fragment": {"text": SOURCE_TEXT},
                "availability": TEXT,
                "source_record_time": TEXT,
                "recorded_at": T,
            }
            for reference in [REFERENCE, *references]
        ),
        {"kind": "story_line", "id": LINE, "scope": SCOPE, "topic": TEXT, "recorded_at": T},
        {
            "kind": "entity",
            "id": ENTITY,
            "story_line_id": LINE,
            "entity_type": TEXT,
            "canonical_label": "word " + TEXT,
            "description": PAGE,
            "confirmation_state": TEXT,
            "decision_status": TEXT,
            "work_status": TEXT,
            "revision": TEXT,
            "updated_at": T,
            "source_reference_ids": references,
        },
        {
            "kind": "event",
            "id": EVENT,
            "result_id": results[0],
            "event_type": TEXT,
            "title": "word " + TEXT,
            "description": PAGE,
            "confirmation_state": TEXT,
            "revision": TEXT,
            "event_time": {"start": T, "precision": TEXT, "basis": TEXT},
            "recorded_at": T,
            "entity_ids": [ENTITY],
            "source_reference_ids": references,
        },
    ]
    return lines


@pytest.fixture
async def worst_client(tmp_path: Path) -> Any:
    db = imported_graph(tmp_path, worst_graph())
    async with client_for(db, Grant(default_project=PROJECT)) as client:
        yield client


async def _size(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert not result.is_error, text[:300]
    return len(text.encode()), orjson.loads(text)


async def test_every_tool_answers_page_size_1_with_every_id_and_text_at_its_costliest(worst_client: Client) -> None:
    """Before: every call of the scope was response_too_large (the coverage block alone was about 140 KB)."""
    event = {"type": "event", "id": EVENT}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("story_graph_search", {"query": "word"}),
        ("story_graph_get_context", {"object_ref": event, "content_page_size": 8000}),
        ("story_graph_get_context", {"object_ref": event, "mode": "timeline", "content_page_size": 8000}),
        ("story_graph_get_context", {"object_ref": {"type": "entity", "id": ENTITY}, "content_page_size": 8000}),
        ("story_graph_get_context", {"object_ref": {"type": "source_reference", "id": REFERENCE}}),
        *(
            ("story_graph_read_source", {"source_reference_id": REFERENCE, "content_kind": kind})
            for kind in ("snapshot", "current")
        ),
    ]
    sizes = {}
    for tool, arguments in calls:
        size, answer = await _size(worst_client, tool, arguments | {"page_size": 1})
        sizes[(tool, orjson.dumps(arguments).decode()[-40:])] = (size, len(orjson.dumps(answer["coverage"])))
        assert size < LIMIT
        coverage = answer["coverage"]
        assert len(orjson.dumps(coverage)) < 30_000
        # Nothing is hidden: each list is shorter than its count says.
        assert coverage["processed_source_version_count"] == coverage["missing_count"] == 144
        assert coverage["source_types_not_included_count"] == 144
        for name in ("processed_source_versions", "missing", "source_types_not_included"):
            assert 1 <= len(coverage[name]) < 10 and len(orjson.dumps(coverage[name])) <= 6_000, name
    print(sizes)


async def test_coverage_lists_keep_their_newest_entries_that_fit(worst_client: Client) -> None:
    _, answer = await _size(worst_client, "story_graph_search", {"query": "word", "page_size": 1})
    coverage = answer["coverage"]
    newest = max_id("r11")
    listed = coverage["processed_source_versions"]
    assert [(e["result_id"], e["source_id"]) for e in listed] == [
        (newest, max_id(f"s11-{n}")) for n in range(12 - len(listed), 12)
    ]
    missing = coverage["missing"]
    assert [(e["result_id"], e["source_id"]) for e in missing] == [
        (newest, max_id(f"m11-{n}")) for n in range(12 - len(missing), 12)
    ]
    names = coverage["source_types_not_included"]
    assert names == [TEXT[:255] + "…"] * len(names)


async def test_source_reference_ids_and_available_versions_list_what_fits_beside_their_counts(
    worst_client: Client,
) -> None:
    _, search = await _size(worst_client, "story_graph_search", {"query": "word", "page_size": 1})
    [item] = search["items"]
    assert item["source_reference_count"] == 110
    listed = item["source_reference_ids"]
    assert 1 <= len(listed) < 100 and len(orjson.dumps(listed)) <= 6_000
    assert listed == sorted(max_id(f"ref{n:03}") for n in range(110))[: len(listed)]
    _, read = await _size(worst_client, "story_graph_read_source", {"source_reference_id": REFERENCE, "page_size": 1})
    assert read["available_version_count"] == 60
    assert 1 <= len(read["available_versions"]) < 50
    assert len(orjson.dumps(read["available_versions"])) <= 4_000


async def test_a_read_source_page_of_control_characters_holds_what_fits_and_reads_on(worst_client: Client) -> None:
    """8,000 code points of U+0001 are 48,000 bytes of JSON: beside this frame the answer was 102 KB,
    response_too_large. The page now holds the code points that fit (limit_reason response_budget); all pages
    together are the whole text."""
    arguments = {"source_reference_id": REFERENCE, "content_kind": "snapshot", "page_size": 8000}
    size, first = await _size(worst_client, "story_graph_read_source", arguments)
    assert size < LIMIT
    assert first["page"]["limit_reason"] == "response_budget"
    assert 1 < first["page"]["returned_count"] < 8000
    assert first["content"] == SOURCE_TEXT[: first["page"]["returned_count"]]
    pages = await all_pages(worst_client, "story_graph_read_source", arguments)
    assert "".join(page["content"] for page in pages) == SOURCE_TEXT
    assert pages[-1]["page"]["limit_reason"] is None


async def test_get_context_fragments_are_json_text_so_escapes_cost_no_more_than_32000_bytes(
    worst_client: Client,
) -> None:
    """A get_context fragment is cut from the object's compact JSON, where a control character is already the
    escape \\u0001 (6 ASCII code points, 7 bytes in the response): a fragment of 8,000 code points is at most 32,000
    bytes (emoji, 4 bytes each). The stored reference's fragment text is 9,000 control characters."""
    arguments = {"object_ref": {"type": "source_reference", "id": REFERENCE}, "content_page_size": 8000}
    size, page = await _size(worst_client, "story_graph_get_context", arguments | {"page_size": 1})
    [item] = page["items"]
    assert size < LIMIT and "\\u0001" * 100 in item["content"]
    assert len(orjson.dumps(item["content"])) <= 32_000


def hub_graph() -> list[dict[str, Any]]:
    """The worst graph, and its entity at the centre of twelve `contradicts` relations (so twelve conflicts), each
    with every stored value at its longest and 100 evidence ids, listed by twelve summaries of twelve open items."""
    lines = worst_graph()
    results = [line["id"] for line in lines if line["kind"] == "result"]
    references = [line["id"] for line in lines if line["kind"] == "source_reference"][1:101]
    for n in range(12):
        event = max_id(f"hub-ev{n:02}")
        lines.append(
            {"kind": "event", "id": event, "result_id": results[n], "event_type": TEXT, "title": TEXT, "recorded_at": T}
        )
        lines.append(
            {
                "kind": "relation",
                "id": max_id(f"hub-rel{n:02}"),
                "result_id": results[n],
                "from_ref": {"type": "entity", "id": ENTITY},
                "to_ref": {"type": "event", "id": event},
                "relation_type": "contradicts",
                "reason": TEXT,
                "recorded_at": T,
                "source_reference_ids": references,
            }
        )
        lines.append(
            {
                "kind": "summary",
                "id": max_id(f"hub-sum{n:02}"),
                "result_id": results[n],
                "body": TEXT,
                "open_items": [TEXT + f"{n}-{i}" for i in range(12)],
                "recorded_at": T,
                "fact_refs": [{"type": "entity", "id": ENTITY}],
            }
        )
    return lines


async def test_the_header_lists_share_a_byte_budget_beside_their_counts(tmp_path: Path) -> None:
    """One relation of legal but long values is about 17 KB of JSON; ten of them, the conflicts and the open items
    made the first page of `current` over the limit at every page size (it could only be read in timeline mode).
    The lists now share HEADER_LISTS_BYTES; each count still counts everything."""
    db = imported_graph(tmp_path, hub_graph())
    async with client_for(db, Grant(default_project=PROJECT)) as client:
        size, page = await _size(
            client,
            "story_graph_get_context",
            {"object_ref": {"type": "entity", "id": ENTITY}, "page_size": 1, "content_page_size": 1},
        )
    assert size < LIMIT
    header = page["header"]
    assert header["relation_count"] == header["conflict_count"] == 12 and header["open_item_count"] == 144
    assert 1 <= len(header["relations"]) < 10
    lists = [header[name] for name in ("relations", "conflicts", "open_items", "evolution_refs", "result_ids")]
    assert sum(len(orjson.dumps(listed)) for listed in lists) <= HEADER_LISTS_BYTES


async def test_a_search_page_of_heavily_cited_items_holds_what_fits_and_reads_on(tmp_path: Path) -> None:
    """Each item lists up to 100 source ids (about 5 KB an item here): `page_size` 50 was response_too_large, though
    every item alone fits. The page now holds the items that fit (`limit_reason: "response_budget"`) and its cursor
    continues after the last one kept: every match comes once, in the order smaller pages give."""
    scope = {"kind": "projects", "projectIds": ["atlas"]}
    references = [f"ref-{n:03}-" + "s" * 40 for n in range(100)]
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": scope},
        {"kind": "result", "id": "r1", "scope": scope, "review_generated_at": T, "recorded_at": T},
        {"kind": "source", "id": "src", "source_type": "message", "project_id": "atlas", "updated_at": T},
        {"kind": "source_version", "source_id": "src", "version": "v1", "text": "quartz notes", "recorded_at": T},
        *(
            {
                "kind": "source_reference",
                "id": reference,
                "result_id": "r1",
                "source_type": "message",
                "original_source_id": "src",
                "source_version": "v1",
                "fragment": {"text": "quartz"},
                "recorded_at": T,
            }
            for reference in references
        ),
        *(
            {
                "kind": "event",
                "id": f"ev-{n:02}",
                "result_id": "r1",
                "event_type": "note",
                "title": f"quartz finding {n}",
                "recorded_at": T,
                "source_reference_ids": references,
            }
            for n in range(60)
        ),
    ]
    db = imported_graph(tmp_path, lines)
    arguments = {"query": "quartz", "object_types": ["event"], "scope": scope}
    async with client_for(db, Grant(default_project="atlas")) as client:
        size, first = await _size(client, "story_graph_search", arguments | {"page_size": 50})
        walked = await all_pages(client, "story_graph_search", arguments | {"page_size": 50})
        small = await all_pages(client, "story_graph_search", arguments | {"page_size": 7})
    assert size < LIMIT
    assert first["page"]["limit_reason"] == "response_budget" and 1 < first["page"]["returned_count"] < 50
    assert first["page"]["total_count"] == 60
    order = [item["object_ref"]["id"] for page in walked for item in page["items"]]
    assert order == [item["object_ref"]["id"] for page in small for item in page["items"]]
    assert sorted(order) == [f"ev-{n:02}" for n in range(60)]


async def test_a_first_fragment_too_large_for_the_page_is_cut_to_fit(tmp_path: Path) -> None:
    """The hub entity's first `current` page at content_page_size 8,000 (its description is emoji, 4 bytes each) was
    103 KB, response_too_large at any page_size: a page always held its first fragment whole, beside a 62 KB frame
    (and a 6,758-character cursor, now compressed: test_cursor_length). That fragment is now halved until the page
    fits (`limit_reason: "response_budget"`), and the pages still join into the whole object."""
    db = imported_graph(tmp_path, hub_graph())
    arguments = {"object_ref": {"type": "entity", "id": ENTITY}, "page_size": 1, "content_page_size": 8000}
    async with client_for(db, Grant(default_project=PROJECT)) as client:
        size, page = await _size(client, "story_graph_get_context", arguments)
        assert size < LIMIT
        assert page["page"]["limit_reason"] == "response_budget"
        assert len(page["items"]) == 1 and len(page["items"][0]["content"]) == 4000
        pages = await all_pages(client, "story_graph_get_context", arguments)
    target = [i for p in pages for i in p["items"] if i["role"] == "target"]
    assert orjson.loads("".join(i["content"] for i in target))["id"] == ENTITY


def test_response_too_large_names_only_arguments_of_the_tool(tmp_path: Path) -> None:
    """search and read_source have no content_page_size, yet their refusal named it (as get_context's): each now
    names its own arguments that shrink a page, every one in its input schema."""
    specs = server_for(tmp_path / "unused.db").specs
    for name, fields in (
        ("story_graph_search", ["page_size"]),
        ("story_graph_read_source", ["page_size"]),
        ("story_graph_get_context", ["content_page_size", "page_size"]),
    ):
        spec = specs[name]
        refusal = response_too_large(123_456, spec).payload
        properties = spec.input_model.model_json_schema(by_alias=True)["properties"]
        assert refusal.field == fields[0] and all(field in properties for field in fields), name
        assert sorted(f for f in properties if f.endswith("page_size") and f in refusal.next_step) == sorted(fields)
        assert ("content_page_size" in refusal.model_dump_json()) == ("content_page_size" in fields), name
