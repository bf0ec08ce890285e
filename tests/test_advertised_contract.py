"""What tools/list tells an agent (each tool's description and the descriptions in its output schema) names the
values the tools really return. Agents read these, not docs/tools.md: a value named there that the tool never
returns sends an agent looking for the wrong thing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from support import all_pages, client_for, demo_db, ok

pytestmark = pytest.mark.anyio

READ, CONTEXT, SEARCH = "story_graph_read_source", "story_graph_get_context", "story_graph_search"
PAIR = {"kind": "projects", "projectIds": ["atlas", "beacon"]}


async def listed(client: Client) -> dict[str, Any]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


def described(schema: dict[str, Any], *path: str) -> str:
    """The description of a property (output schemas are listed with every reference inlined; a list is its
    items)."""
    node = schema
    for name in path:
        node = node.get("items", node)["properties"][name]
    text: str = node["description"]
    return text


async def test_read_source_names_the_availability_and_the_placeholders_it_returns(tmp_path: Path) -> None:
    """The output schema said a moved source is `moved_out_of_scope` (the tool returns `outside_scope`), and the
    description said a missing position is "missing" (a range that was not saved is "unknown"; only locator fields
    are "missing")."""
    async with client_for(demo_db(tmp_path)) as client:
        tool = (await listed(client))[READ]
        moved = await ok(client, READ, {"source_reference_id": "ref-moved-msg"})
        old = await ok(client, READ, {"source_reference_id": "ref-no-locator"})
    availability = described(tool.output_schema, "original_source_availability")
    assert moved["original_source_availability"] == "outside_scope"
    assert all(value in availability for value in ("available", "deleted", "inaccessible", "outside_scope", "unknown"))
    assert "moved_out_of_scope" not in availability
    assert old["source_location"]["message_id"] == "missing" and old["source_location"]["start"] == "missing"
    assert old["saved_fragment"]["start"] == "unknown" and old["position"]["source_start"] == "unknown"
    assert 'locator field never saved is "missing"' in tool.description
    assert 'a range or length not known is "unknown"' in tool.description


async def test_item_descriptions_name_what_stories_and_experiences_return(tmp_path: Path) -> None:
    """`result_id` was described as null only for a current projection or a story line, and `role` named no story
    or experience: a story's and an experience's own items have no result, its threads come as `related` and its
    events as `evolution`."""
    story = {"type": "story", "id": "story-atlas-session-cache"}
    lesson = {"type": "experience", "id": "exp-edge-box-infra"}
    async with client_for(demo_db(tmp_path)) as client:
        tools = await listed(client)
        found = await ok(client, SEARCH, {"query": "edge box infrastructure", "scope": PAIR})
        feature = await ok(client, CONTEXT, {"object_ref": story, "page_size": 50})
        experience = await ok(client, CONTEXT, {"object_ref": lesson, "scope": PAIR, "page_size": 50})
    own = [i for i in found["items"] if i["object_ref"]["type"] in ("story", "experience")]
    assert {i["object_ref"]["type"] for i in own} == {"story", "experience"}
    assert all(i["result_id"] is None for i in own)
    roles = {(i["object_ref"]["type"], i["role"]) for i in feature["items"][1:] + experience["items"][1:]}
    assert ("story", "related") in roles and ("event", "evolution") in roles, roles
    for name in (SEARCH, CONTEXT):
        result_id = described(tools[name].output_schema, "items", "result_id")
        assert "a story or an" in result_id and "experience" in result_id, result_id
    role = described(tools[CONTEXT].output_schema, "items", "role")
    assert "a story's threads" in role and "a story's events" in role and "an experience's formed" in role, role


SPEC_OUTPUT_NAMES = {
    # SPEC §5b: the upstream names every result keeps (docs/tools.md: "output names are a superset of its").
    "frame": {"requested_scope", "resolved_scope", "read_at", "coverage", "page"},
    "coverage": {"status", "semantic_completeness", "unprocessed_sources", "historical_reconstruction", "note"},
    "page": {"returned_count", "total_count", "has_more", "complete", "next_cursor", "limit_reason"},
    "listing": {"time_basis", "time_range", "interpretation", "unknown_time_excluded_count", "items"},
    "item": {
        "object_ref", "object_revision", "result_id", "scope", "event_time", "review_generated_at", "recorded_at",
        "confirmation_state", "validity", "source_reference_ids",
    },
    SEARCH: {"matched_fields", "preview", "preview_is_excerpt", "match_position"},
    CONTEXT: {"mode", "content", "content_format", "position"},
}  # fmt: skip


async def test_search_and_context_list_every_output_name_upstream_has(tmp_path: Path) -> None:
    async with client_for(demo_db(tmp_path)) as client:
        tools = await listed(client)
    for name in (SEARCH, CONTEXT, READ):
        schema = tools[name].output_schema
        properties = set(schema["properties"])
        assert SPEC_OUTPUT_NAMES["frame"] <= properties, name
        assert SPEC_OUTPUT_NAMES["coverage"] | {"published_result_count"} <= set(
            schema["properties"]["coverage"]["properties"]
        )
        assert SPEC_OUTPUT_NAMES["page"] <= set(schema["properties"]["page"]["properties"])
        if name == READ:
            continue
        assert SPEC_OUTPUT_NAMES["listing"] <= properties, name
        item = set(schema["properties"]["items"]["items"]["properties"])
        own = SPEC_OUTPUT_NAMES[name] - properties  # `mode` is the response's, the rest the item's
        assert SPEC_OUTPUT_NAMES["item"] | own <= item, name


async def test_the_page_counts_of_get_context_are_described_as_they_are_counted(tmp_path: Path) -> None:
    """`page.returned_count` and `total_count` were described as items and matches for search and get_context
    alike; get_context counts the fragments in `items` on the page, and the objects (memory items included) in
    all."""
    decision = {"object_ref": {"type": "entity", "id": "ent-decision-b"}, "page_size": 50, "content_page_size": 100}
    async with client_for(demo_db(tmp_path)) as client:
        schema = (await listed(client))[CONTEXT].output_schema
        pages = await all_pages(client, CONTEXT, decision)
    items = [item for page in pages for item in page["items"]]
    assert all(page["page"]["returned_count"] == len(page["items"]) for page in pages)
    assert len(items) > len({(i["object_ref"]["id"], i["result_id"]) for i in items})  # fragments, not objects
    memories = {m["memory_id"] for page in pages for m in page["background"]}
    assert memories == {"mem-atlas-boring-tech", "mem-global-answer-style"}
    objects = {(i["object_ref"]["type"], i["object_ref"]["id"], i["result_id"]) for i in items}
    assert {page["page"]["total_count"] for page in pages} == {len(objects) + len(memories)}
    assert "fragments in `items` (get_context" in described(schema, "page", "returned_count")
    assert "get_context: graph objects and memory items" in described(schema, "page", "total_count")


async def test_page_limit_reason_is_listed_as_the_closed_set_it_is(tmp_path: Path) -> None:
    """`page.limit_reason` was listed as any string, its values only in prose; a client could not know the set
    (docs/tools.md lists each value where a tool uses it). It is an enum now, holding every value the tools send."""
    decision = {"object_ref": {"type": "entity", "id": "ent-decision-b"}}
    async with client_for(demo_db(tmp_path)) as client:
        tools = await listed(client)
        sent = {
            (await ok(client, SEARCH, {"query": "Redis", "page_size": 1}))["page"]["limit_reason"],
            (await ok(client, CONTEXT, decision | {"page_size": 1}))["page"]["limit_reason"],
            (await ok(client, CONTEXT, decision | {"content_page_size": 10}))["page"]["limit_reason"],
            (await ok(client, READ, {"source_reference_id": "ref-deleted-msg", "content_kind": "current"}))["page"][
                "limit_reason"
            ],
        }
    assert sent == {"page_size", "content_page_size", "content_unavailable"}
    reasons = {"page_size", "content_page_size", "response_budget", "work_budget", "content_unavailable", None}
    for tool in tools.values():
        limit_reason = tool.output_schema["properties"]["page"]["properties"]["limit_reason"]
        assert set(limit_reason["enum"]) == reasons, tool.name


async def test_the_query_description_says_it_is_width_insensitive(tmp_path: Path) -> None:
    """docs/tools.md says matching folds full-width ASCII (as Chinese and Japanese input methods type it); the
    `query` description an agent reads said only case-insensitive."""
    async with client_for(demo_db(tmp_path)) as client:
        query = (await listed(client))[SEARCH].input_schema["properties"]["query"]["description"]
        wide = await ok(client, SEARCH, {"query": "Ｒｅｄｉｓ"})
        narrow = await ok(client, SEARCH, {"query": "Redis"})
    assert wide["page"]["total_count"] == narrow["page"]["total_count"] > 0
    assert "width-insensitive" in query and "Ｒｅｄｉｓ" in query
