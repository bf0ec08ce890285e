"""story_graph_search through a real MCP client session against real SQLite files."""

from __future__ import annotations

import base64
import copy
import sqlite3
import unicodedata
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonl_graph import ALPHA, imported_graph, leaf_times_graph, small_graph
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # the MCP client's validator
from mcp import Client
from support import all_items, client_for, demo_db, error, ok

from server.contracts.base import OBJECT_TYPES
from server.contracts.common import Grant
from server.contracts.search import SearchResponse
from server.reader.cursor import CursorCodec, request_digest
from server.reader.search_query import terms_as_query

pytestmark = pytest.mark.anyio

ATLAS = {"kind": "projects", "projectIds": ["atlas"]}
BEACON = {"kind": "projects", "projectIds": ["beacon"]}
PAIR = {"kind": "projects", "projectIds": ["beacon", "atlas"]}
GLOBAL = {"kind": "global"}
T = "2026-05-01T08:00:00+08:00"
SEARCH = "story_graph_search"
CONTEXT = "story_graph_get_context"


def _graph(event_count: int = 23) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "project", "id": "beacon", "name": "Beacon"},
        {"kind": "project", "id": "empty", "name": "Empty"},
        {"kind": "project", "id": "old", "name": "Old", "status": "inactive"},
        *({"kind": "scope", "scope": s} for s in (ATLAS, BEACON, PAIR, GLOBAL)),
        {
            "kind": "result",
            "id": "r-atlas",
            "scope": ATLAS,
            "review_generated_at": T,
            "recorded_at": T,
            "coverage": {"kind": "detailed", "unprocessed_sources": 0, "processed_range": {"from": T, "to": T}},
        },
        {"kind": "result", "id": "r-beacon", "scope": BEACON, "review_generated_at": T, "recorded_at": T},
        {
            "kind": "story_line",
            "id": "sl-atlas",
            "scope": ATLAS,
            "topic": "会话缓存方案 session cache",
            "recorded_at": T,
        },
        {"kind": "story_line", "id": "sl-beacon", "scope": BEACON, "topic": "Beacon session cache", "recorded_at": T},
        {
            "kind": "entity",
            "id": "ent-b",
            "story_line_id": "sl-atlas",
            "canonical_label": "Decision B: SQLite WAL 会话缓存",
            "description": "STRAßE ΣΑΣ mixed case",
            "updated_at": T,
        },
        {
            "kind": "event",
            "id": "evt-unknown-time",
            "result_id": "r-atlas",
            "event_type": "decision",
            "title": "方案 without a date",
            "recorded_at": T,
        },
    ]
    lines.extend(
        {
            "kind": "event",
            "id": f"evt-{i:03d}",
            "result_id": "r-atlas",
            "event_type": "discussion",
            "title": f"Cache review {i}: 方案 {'session cache' if i % 3 == 0 else 'tuning'}",
            "description": "回顾调度 notes",
            "event_time": {"start": f"2026-04-{1 + i % 28:02d}T10:00:00Z"},
            "recorded_at": T,
        }
        for i in range(event_count)
    )
    return lines


@pytest.fixture
def graph_db(tmp_path: Path) -> Path:
    return imported_graph(tmp_path, _graph())


def _keys(items: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(i["object_ref"]["type"], i["object_ref"]["id"], i["result_id"]) for i in items]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_two_character_chinese_query_finds_every_object_containing_it(graph_db: Path, mode: str) -> None:
    async with client_for(graph_db, mode=mode) as client:
        page = await ok(client, SEARCH, {"query": "方案", "page_size": 50})
    ids = {i["object_ref"]["id"] for i in page["items"]}
    assert ids == {"sl-atlas", "evt-unknown-time", *(f"evt-{i:03d}" for i in range(23))}
    assert page["page"]["total_count"] == 25
    assert all(i["match_kind"] == "whole_query" for i in page["items"])


async def test_one_character_and_case_insensitive_unicode_queries_match(graph_db: Path) -> None:
    async with client_for(graph_db) as client:
        one = await ok(client, SEARCH, {"query": "存"})
        sharp = await ok(client, SEARCH, {"query": "straße σας"})
        ascii_upper = await ok(client, SEARCH, {"query": "SQLITE wal"})
    assert {"sl-atlas", "ent-b"} <= {i["object_ref"]["id"] for i in one["items"]}
    assert [i["object_ref"]["id"] for i in sharp["items"]] == ["ent-b"]
    assert ascii_upper["items"][0]["object_ref"]["id"] == "ent-b"
    position = ascii_upper["items"][0]["match_position"]
    assert position["field"] == "canonical_label"
    assert "Decision B: SQLite WAL 会话缓存"[position["start"] : position["end"]] == "SQLite WAL"


async def test_every_whole_query_match_ranks_above_every_term_only_match(graph_db: Path) -> None:
    async with client_for(graph_db) as client:
        items = await all_items(client, SEARCH, {"query": "session cache 调度", "page_size": 50})
    kinds = [i["match_kind"] for i in items]
    assert "terms" in kinds and "whole_query" not in kinds[kinds.index("terms") :]
    assert kinds.count("whole_query") == 0 or kinds[0] == "whole_query"


@pytest.mark.parametrize("page_size", [1, 2, 7, 50])
async def test_reading_every_page_yields_the_full_match_set_once(graph_db: Path, page_size: int) -> None:
    async with client_for(graph_db) as client:
        everything = await ok(client, SEARCH, {"query": "cache", "page_size": 50})
        paged = await all_items(client, SEARCH, {"query": "cache", "page_size": page_size})
    assert everything["page"]["complete"] is True
    assert _keys(paged) == _keys(everything["items"])
    assert len(set(_keys(paged))) == len(paged) == everything["page"]["total_count"]


async def test_a_write_to_the_scope_between_pages_gives_stale_cursor_but_another_scope_does_not(
    graph_db: Path,
) -> None:
    async with client_for(graph_db) as client:
        first = await ok(client, SEARCH, {"query": "cache", "page_size": 2})
        cursor = first["page"]["next_cursor"]
        with sqlite3.connect(graph_db) as conn:
            conn.execute("UPDATE events SET title = title || ' x' WHERE id = 'evt-001' AND result_id = 'r-beacon'")
            conn.execute("UPDATE story_lines SET topic = 'Beacon cache v2' WHERE id = 'sl-beacon'")
        second = await ok(client, SEARCH, {"query": "cache", "page_size": 2, "cursor": cursor})
        assert second["items"] and _keys(second["items"]) != _keys(first["items"])
        with sqlite3.connect(graph_db) as conn:
            conn.execute("UPDATE events SET description = 'changed' WHERE id = 'evt-005'")
        stale = await error(client, SEARCH, {"query": "cache", "page_size": 2, "cursor": cursor})
    assert stale["error"] == "stale_cursor"


async def test_a_memory_item_written_between_pages_leaves_the_search_cursor_valid(graph_db: Path) -> None:
    """Search never reads memory items, so a live writer of memory notes (a Global one shows in every scope) must
    not stale its cursors: memory writes bump the scopes' memory revisions, not their data revisions
    (migrations/0015). Each page is read after another insert, update or delete."""
    query = {"query": "cache", "page_size": 1}
    stored = "2026-05-01T00:00:00.000Z"  # as stored: UTC with milliseconds
    writes = [
        f"INSERT INTO memory_items (id, body, updated_at) VALUES ('mem-live', 'Prefers short answers', '{stored}')",
        f"INSERT INTO memory_items (id, project_id, body, updated_at) VALUES ('mem-p', 'atlas', 'cache', '{stored}')",
        "UPDATE memory_items SET body = 'Prefers long answers' WHERE id = 'mem-live'",
        "UPDATE memory_items SET project_id = NULL WHERE id = 'mem-p'",
        "DELETE FROM memory_items WHERE id = 'mem-live'",
    ]
    async with client_for(graph_db) as client:
        whole = await all_items(client, SEARCH, query | {"page_size": 50})
        pages = [await ok(client, SEARCH, query)]
        for sql in writes:
            with sqlite3.connect(graph_db) as conn:
                conn.execute(sql)
            cursor = pages[-1]["page"]["next_cursor"]
            assert cursor is not None
            pages.append(await ok(client, SEARCH, query | {"cursor": cursor}))
        assert {page["data_revision"] for page in pages} == {pages[0]["data_revision"]}
    assert _keys([item for page in pages for item in page["items"]]) == _keys(whole)[: len(pages)]


async def test_tampered_truncated_foreign_and_mismatched_cursors_are_refused(graph_db: Path) -> None:
    async with client_for(graph_db) as client:
        cursor = (await ok(client, SEARCH, {"query": "cache", "page_size": 2}))["page"]["next_cursor"]
        body, _, mac = cursor.partition(".")
        tampered = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + mac
        for bad in (tampered, cursor[:-3], "not-a-cursor", body):
            assert (await error(client, SEARCH, {"query": "cache", "page_size": 2, "cursor": bad}))[
                "error"
            ] == "invalid_cursor"
        other_filter = await error(
            client, SEARCH, {"query": "cache", "page_size": 2, "object_types": ["event"], "cursor": cursor}
        )
        smaller_page = await ok(client, SEARCH, {"query": "cache", "page_size": 1, "cursor": cursor})
        other_scope = await error(client, SEARCH, {"query": "cache", "page_size": 2, "cursor": cursor, "scope": BEACON})
    assert other_filter["error"] == other_scope["error"] == "invalid_cursor"
    assert smaller_page["page"]["returned_count"] == 1  # page sizes may change between pages
    async with client_for(graph_db, secret=b"another-server-secret-000") as other_server:
        foreign = await error(other_server, SEARCH, {"query": "cache", "page_size": 2, "cursor": cursor})
    assert foreign["error"] == "invalid_cursor"


async def test_a_cursor_of_a_server_with_another_rank_rule_is_refused(graph_db: Path) -> None:
    """A cursor names a rank class by its index. Servers sharing the cursor secret accept each other's cursors, so
    after an upgrade that changed the classes (function words no longer count toward a tier) a cursor of the old
    server was accepted and resumed in another class: items skipped or repeated. The rank rule is bound, and a
    cursor of another is refused."""
    async with client_for(graph_db) as client:
        cursor = (await ok(client, SEARCH, {"query": "cache", "page_size": 2}))["page"]["next_cursor"]
        body = orjson.loads(base64.urlsafe_b64decode(cursor.partition(".")[0] + "=="))
        normalised = {"query": "cache", "object_types": sorted(OBJECT_TYPES), "time_range": None}
        normalised["time_basis"] = "event_time"
        codec = CursorCodec(b"test-secret-0123456789")  # client_for's

        def signed(request: str) -> str:
            return codec.encode(
                tool=SEARCH, request=request, scope_key=body["s"], revision=body["r"], position=body["p"]
            )

        same = await ok(client, SEARCH, {"query": "cache", "page_size": 2, "cursor": signed(body["q"])})
        refused = [
            await error(client, SEARCH, {"query": "cache", "page_size": 2, "cursor": signed(request)})
            for request in (request_digest(SEARCH, normalised), request_digest(SEARCH, normalised | {"rank_rule": 0}))
        ]
    assert same["items"]  # re-signed as issued: accepted
    assert [answer["error"] for answer in refused] == ["invalid_cursor", "invalid_cursor"]
    assert "another version of this server" in refused[0]["message"]  # made before the rule was bound


async def test_scopes_outside_the_grant_look_exactly_like_missing_ones(graph_db: Path) -> None:
    grant = Grant(default_project="atlas", projects=["atlas"], allow_global=False)
    async with client_for(graph_db, grant) as client:
        answers = [
            await error(client, SEARCH, {"query": "cache", "scope": scope})
            for scope in (BEACON, {"kind": "projects", "projectIds": ["nope"]}, PAIR, GLOBAL)
        ]
        inactive = await error(client, SEARCH, {"query": "cache", "scope": {"kind": "projects", "projectIds": ["old"]}})
        mine = await ok(client, SEARCH, {"query": "Beacon"})
    assert all(a == answers[0] for a in [*answers, inactive])
    assert answers[0]["error"] == "scope_unavailable"
    assert "beacon" not in str(answers[0]).lower()
    assert mine["items"] == []


async def test_results_of_other_scopes_are_never_mixed_in(graph_db: Path) -> None:
    async with client_for(graph_db) as client:
        atlas = await ok(client, SEARCH, {"query": "session cache", "page_size": 50})
        beacon = await ok(client, SEARCH, {"query": "session cache", "scope": BEACON})
    assert "sl-beacon" not in {i["object_ref"]["id"] for i in atlas["items"]}
    assert [i["object_ref"]["id"] for i in beacon["items"]] == ["sl-beacon"]
    assert all(i["scope"] == ATLAS for i in atlas["items"])
    assert beacon["resolved_scope"] == BEACON and atlas["requested_scope"] == "current_project"


async def test_an_empty_scope_with_unknown_coverage_differs_from_zero_hits_in_a_processed_scope(
    graph_db: Path,
) -> None:
    async with client_for(graph_db) as client:
        processed = await ok(client, SEARCH, {"query": "no such words anywhere"})
        empty = await ok(client, SEARCH, {"query": "no such words anywhere", "scope": GLOBAL})
    assert processed["items"] == empty["items"] == []
    assert processed["coverage"]["status"] == "complete"
    assert processed["coverage"]["published_result_count"] == 1
    assert empty["coverage"]["status"] == "unknown"
    assert empty["coverage"]["published_result_count"] == 0
    assert empty["coverage"]["unprocessed_sources"] == "unknown"


def _reviewed_graph(*ranges: tuple[str, str, str]) -> list[dict[str, Any]]:
    """Atlas with one story line about `cache` and a result per (id, from, to) whose detailed record processed that
    range."""
    results = [
        {
            "kind": "result",
            "id": result_id,
            "scope": ATLAS,
            "review_generated_at": T,
            "recorded_at": T,
            "coverage": {"kind": "detailed", "processed_range": {"from": start, "to": end}, "unprocessed_sources": 0},
        }
        for result_id, start, end in ranges
    ]
    return [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        *results,
        {"kind": "story_line", "id": "sl", "scope": ATLAS, "topic": "cache", "recorded_at": T},
    ]


async def test_coverage_lists_the_processed_ranges_so_a_gap_between_them_is_never_claimed(tmp_path: Path) -> None:
    """January and March were reviewed, February was not: the hull (January to March) alone would say February was
    processed. The ranges themselves are listed, merged where they meet to the second."""

    db = imported_graph(
        tmp_path,
        _reviewed_graph(
            ("r-mar-2", "2026-03-16T00:00:00+08:00", "2026-03-31T23:59:59+08:00"),
            ("r-jan", "2026-01-01T00:00:00Z", "2026-01-31T23:59:59Z"),
            ("r-mar-1", "2026-03-01T00:00:00+08:00", "2026-03-15T23:59:59+08:00"),  # meets r-mar-2 to the second
            ("r-mar-3", "2026-03-10T00:00:00Z", "2026-03-20T00:00:00Z"),  # inside March
        ),
    )
    february = {"from": "2026-02-01T00:00:00Z", "to": "2026-02-28T23:59:59Z"}
    async with client_for(db) as client:
        page = await ok(client, SEARCH, {"query": "cache", "time_range": february})
    coverage = page["coverage"]
    assert coverage["status"] == "complete"  # every record says its own range was processed whole
    assert coverage["processed_range"] == {"from": "2026-01-01T00:00:00.000Z", "to": "2026-03-31T15:59:59.000Z"}
    assert coverage["processed_ranges"] == [
        {"from": "2026-01-01T00:00:00.000Z", "to": "2026-01-31T23:59:59.000Z"},
        {"from": "2026-02-28T16:00:00.000Z", "to": "2026-03-31T15:59:59.000Z"},
    ]
    assert coverage["processed_range_count"] == 2


async def test_missing_parts_are_counted_only_when_every_record_could_name_them(tmp_path: Path) -> None:
    """A count-only or absent coverage record cannot say what its review left out: beside one, the number of missing
    parts is unknown, never the detailed records' count passed off as the whole (0 when they name none)."""
    gap = {"source_id": "src-1", "ranges": [[0, 40]], "reason": "too long"}
    detailed = {"kind": "detailed", "unprocessed_sources": 0, "missing": [gap]}
    times = {"review_generated_at": T, "recorded_at": T}
    base: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "result", "id": "r-1", "scope": ATLAS, **times, "coverage": detailed},
        {"kind": "story_line", "id": "sl", "scope": ATLAS, "topic": "cache", "recorded_at": T},
    ]
    legacy = {
        "kind": "result",
        "id": "r-2",
        "scope": ATLAS,
        **times,
        "coverage": {"kind": "legacy_count", "count": 3},
    }
    absent = {"kind": "result", "id": "r-2", "scope": ATLAS, **times}
    counted: list[Any] = []
    for name, extra in (("detailed", []), ("legacy", [legacy]), ("absent", [absent])):
        db = imported_graph(tmp_path, [*base, *extra], name=name)
        async with client_for(db) as client:
            coverage = (await ok(client, SEARCH, {"query": "cache"}))["coverage"]
        assert [m["source_id"] for m in coverage["missing"]] == ["src-1"]  # what the detailed record names
        counted.append(coverage["missing_count"])
    assert counted == [1, "unknown", "unknown"]


async def test_time_range_filters_before_paging_and_counts_unknown_times(graph_db: Path) -> None:
    window = {"from": "2026-04-01T00:00:00Z", "to": "2026-04-05T23:59:59+00:00"}
    async with client_for(graph_db) as client:
        page = await ok(client, SEARCH, {"query": "方案", "time_range": window, "page_size": 50})
        recorded = await ok(client, SEARCH, {"query": "方案", "time_range": window, "time_basis": "recorded_at"})
    assert page["time_basis"] == "event_time"
    assert page["time_range"] == {"from": "2026-04-01T00:00:00.000Z", "to": "2026-04-05T23:59:59.000Z"}
    assert {i["event_time"][:10] for i in page["items"]} <= {f"2026-04-0{d}" for d in range(1, 6)}
    assert page["page"]["total_count"] == len(page["items"]) == 5
    assert page["unknown_time_excluded_count"] == 2  # the undated event and the story line
    assert recorded["time_basis"] == "recorded_at" and recorded["items"] == []


async def test_every_type_is_read_so_coverage_names_none_as_not_included(graph_db: Path) -> None:
    # This graph holds no story or experience: asking for them is zero hits in a read type, not an unread type.
    async with client_for(graph_db) as client:
        page = await ok(client, SEARCH, {"query": "cache", "object_types": ["story", "experience"]})
        events = await ok(client, SEARCH, {"query": "cache", "object_types": ["event"], "page_size": 50})
    assert page["items"] == [] and page["page"]["total_count"] == 0
    assert page["coverage"]["object_types_not_included"] == []
    assert {i["object_ref"]["type"] for i in events["items"]} == {"event"}
    assert events["coverage"]["object_types_not_included"] == []


async def test_as_of_unknown_arguments_and_bad_times_are_refused_clearly(graph_db: Path) -> None:
    async with client_for(graph_db) as client:
        as_of = await error(client, SEARCH, {"query": "x", "as_of": "2026-01-01T00:00:00Z", "bogus": 1})
        unknown = await error(client, SEARCH, {"query": "x", "limit": 5})
        naive = await error(client, SEARCH, {"query": "x", "time_range": {"from": "2026-01-01T00:00:00", "to": T}})
        blank = await error(client, SEARCH, {"query": "   "})
        padding = await ok(client, SEARCH, {"query": "\x01\x01"})
    assert as_of["error"] == "unsupported_mode"
    assert unknown["error"] == "invalid_arguments" and unknown["field"] == "limit"
    assert naive["error"] == "invalid_arguments" and "offset" in naive["message"]
    assert blank["error"] == "invalid_arguments" and blank["field"] == "query"
    assert padding["items"] == [] and padding["page"]["total_count"] == 0


async def test_a_range_whose_ends_are_reversed_once_in_utc_says_so_with_both_instants(graph_db: Path) -> None:
    """Written with two offsets the ends look ordered (00:00 before 08:00) but are not as instants: the refusal
    shows both in UTC so the caller sees why."""
    reversed_ = {"from": "2026-01-01T00:00:00-05:00", "to": "2026-01-01T08:00:00+08:00"}
    async with client_for(graph_db) as client:
        refused = await error(client, SEARCH, {"query": "x", "time_range": reversed_})
        one_instant = await ok(
            client,
            SEARCH,
            {"query": "x", "time_range": {"from": "2026-01-01T05:00:00Z"} | {"to": "2026-01-01T13:00:00+08:00"}},
        )
    assert refused["error"] == "invalid_arguments" and refused["field"] == "time_range"
    [problem] = refused["problems"]
    assert "2026-01-01T05:00:00.000Z" in problem["problem"] and "2026-01-01T00:00:00.000Z" in problem["problem"]
    assert "compared as instants" in problem["problem"] and "Value error" not in problem["problem"]
    assert one_instant["time_range"] == {"from": "2026-01-01T05:00:00.000Z", "to": "2026-01-01T05:00:00.000Z"}


async def test_without_a_current_project_a_scope_is_required_never_global(graph_db: Path) -> None:
    async with client_for(graph_db, Grant(default_project=None)) as client:
        missing = await error(client, SEARCH, {"query": "cache"})
        explicit = await ok(client, SEARCH, {"query": "cache", "scope": GLOBAL})
    assert missing["error"] == "scope_required"
    assert explicit["resolved_scope"] == GLOBAL


async def test_search_lists_a_read_only_tool_with_schemas(graph_db: Path) -> None:
    async with client_for(graph_db) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    tool = tools[SEARCH]
    assert tool.annotations is not None and tool.annotations.read_only_hint is True
    assert tool.input_schema["additionalProperties"] is False
    assert "query" in tool.input_schema["required"]
    assert tool.output_schema is not None and "items" in tool.output_schema["properties"]
    assert tool.title and tool.description and "story_graph_get_context" in tool.description
    # An agent in one project cannot guess that shared work has a scope of its own, nor where an empty
    # result says what to try: the listing tells it, on every tool that takes a scope.
    assert "no_match_note" in tool.description and "no_match_note" in tool.output_schema["properties"]
    for listed in tools.values():
        assert "project set" in listed.input_schema["properties"]["scope"]["description"]
        # Said at the property, where clients show it (inside anyOf, the Inspector's list showed none).
        assert "next_cursor of the previous page" in listed.input_schema["properties"]["cursor"]["description"]


async def test_the_listed_object_types_filter_describes_what_it_finds(tmp_path: Path) -> None:
    """An agent reads the input schema to choose a filter: it must not say stories and experiences match
    nothing when a search for them finds them (the demo's session-cache story, the pair's experience)."""
    async with client_for(demo_db(tmp_path)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        stories = await ok(client, SEARCH, {"query": "cache", "object_types": ["story"]})
        lessons = await ok(client, SEARCH, {"query": "edge", "object_types": ["experience"], "scope": PAIR})
    described = tools[SEARCH].input_schema["properties"]["object_types"]["description"]
    assert {i["object_ref"]["type"] for i in stories["items"]} == {"story"}
    assert {i["object_ref"]["type"] for i in lessons["items"]} == {"experience"}
    assert "nothing" not in described and "story" in described and "experience" in described


async def test_listed_output_schemas_are_self_contained_and_as_strict_as_the_models(graph_db: Path) -> None:
    """Clients validate every result against the listed schema: references inlined, nullable fields as type
    lists (cheaper to validate), yet a wrong type in a nested, optional field is still refused."""
    async with client_for(graph_db) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        page = await ok(client, SEARCH, {"query": "cache"})
    schema = tools[SEARCH].output_schema
    assert schema is not None and b"$ref" not in orjson.dumps(schema)
    validator = Draft202012Validator(schema)
    Draft202012Validator.check_schema(schema)
    assert page["items"] and not list(validator.iter_errors(page))
    for path, bad in (
        (("items", 0, "result_id"), 5),
        (("items", 0, "object_ref", "type"), "nothing"),
        (("page", "total_count_at_least"), "many"),
        (("coverage", "missing_count"), None),
    ):
        broken = copy.deepcopy(page)
        target: Any = broken
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = bad
        assert list(validator.iter_errors(broken)), path


async def test_listed_output_schema_accepts_exactly_what_the_model_schema_accepts(graph_db: Path) -> None:
    """The reshaping (nullable objects and enums as type lists, inlined references) changes the cost of
    validating, never the verdict: each variation of a real page gets the same answer from both schemas."""
    async with client_for(graph_db) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        window = {"from": "2026-01-01T00:00:00Z", "to": "2026-12-31T00:00:00Z"}
        page = await ok(client, SEARCH, {"query": "cache", "time_range": window})
    listed = Draft202012Validator(tools[SEARCH].output_schema)
    model = Draft202012Validator(SearchResponse.model_json_schema(by_alias=True, mode="serialization"))
    interval = {"start": "2026-05-01T00:00:00.000Z", "end": None, "precision": "day", "basis": "message_time"}
    position = {"field": "title", "start": 0, "end": 5, "unit": "unicode_code_point"}
    variations: list[tuple[tuple[Any, ...], Any]] = [
        (("items", 0, "event_interval"), None),
        (("items", 0, "event_interval"), interval),
        (("items", 0, "event_interval"), {**interval, "end": 5}),
        (("items", 0, "event_interval"), {**interval, "extra": 1}),
        (("items", 0, "event_interval"), {"start": "x"}),
        (("items", 0, "event_interval"), "2026-05-01"),
        (("items", 0, "match_position"), None),
        (("items", 0, "match_position"), position),
        (("items", 0, "match_position"), {**position, "unit": "byte"}),
        (("items", 0, "match_position"), []),
        (("items", 0, "field_weight"), None),
        (("items", 0, "field_weight"), 1),
        (("items", 0, "field_weight"), 2),
        (("items", 0, "field_weight"), "3"),
        (("items", 0, "scope"), {"kind": "global"}),
        (("items", 0, "scope"), {"kind": "projects", "projectIds": ["a"]}),
        (("items", 0, "scope"), {"kind": "projects"}),
        (("items", 0, "scope"), {"kind": "global", "projectIds": ["a"]}),
        (("items", 0, "scope"), None),
        (("time_range",), None),
        (("time_range",), {"from": "a", "to": "b"}),
        (("time_range",), {"from": "a"}),
        (("page", "total_count"), "unknown"),
        (("page", "total_count"), "many"),
        (("page", "total_count_at_least"), None),
        (("page", "total_count_at_least"), 10001),
    ]
    verdicts = []
    for path, value in variations:
        varied = copy.deepcopy(page)
        target: Any = varied
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        accepted = not list(model.iter_errors(varied))
        assert accepted == (not list(listed.iter_errors(varied))), (path, value)
        verdicts.append(accepted)
    assert 0 < sum(verdicts) < len(verdicts)  # both answers occur


_WORDS = ["cache", "方案", "session", "回顾", "调度", "review", "1", "存", "tuning 方案", "SQLite WAL"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    page_size=st.integers(min_value=1, max_value=50), words=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3)
)
def test_any_page_size_walks_every_match_exactly_once(graph_db: Path, page_size: int, words: list[str]) -> None:
    query = " ".join(words)

    async def walk() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with client_for(graph_db) as client:
            return await all_items(client, SEARCH, {"query": query, "page_size": page_size}), await ok(
                client, SEARCH, {"query": query, "page_size": 50}
            )

    paged, whole = anyio.run(walk, backend="asyncio")
    if whole["page"]["total_count"] <= 50:
        assert _keys(paged) == _keys(whole["items"])
    assert len(paged) == len(set(_keys(paged))) == whole["page"]["total_count"]


async def test_time_filters_follow_raw_sql_writes_to_the_rows_they_copy(graph_db: Path) -> None:
    window = {"from": "2026-04-30T00:00:00Z", "to": "2026-05-02T00:00:00Z"}
    args = {"query": "方案", "time_range": window, "time_basis": "review_generated_at", "page_size": 50}
    async with client_for(graph_db) as client:
        before = await ok(client, SEARCH, args)
        with sqlite3.connect(graph_db) as conn:
            conn.execute("UPDATE results SET review_generated_at = '2027-01-01T00:00:00.000Z' WHERE id = 'r-atlas'")
            conn.execute("UPDATE events SET event_time_start = NULL WHERE id = 'evt-000'")
        after = await ok(client, SEARCH, args)
        undated = await ok(client, SEARCH, {"query": "方案", "time_range": window, "page_size": 50})
    assert before["page"]["total_count"] == 24  # every event of r-atlas; the story line has no review time
    assert before["unknown_time_excluded_count"] == 1
    assert after["items"] == [] and after["unknown_time_excluded_count"] == 1
    assert undated["unknown_time_excluded_count"] == 3  # the story line and two undated events


def _key(item: dict[str, Any]) -> tuple[str, str, str | None]:
    return item["object_ref"]["type"], item["object_ref"]["id"], item["result_id"]


# Meets ev-1 (2026-03-01T10:00Z to 2026-03-02T10:30Z) and sum-1 by their end only.
MARCH_2 = {"from": "2026-03-02T00:00:00Z", "to": "2026-03-02T23:59:59Z"}
APRIL = {"from": "2026-04-01T00:00:00Z", "to": "2026-04-30T23:59:59Z"}
LEAF_DATED = {
    ("event", "ev-1", "r-alpha-2"),
    ("entity_change", "ent-a#decided", "r-alpha-2"),
    ("summary", "sum-1", "r-alpha-2"),
}
LEAF_UNDATED = {("event", "ev-2", "r-alpha-2"), ("entity", "ent-a", "r-alpha-2")}


async def test_a_leaf_item_under_a_result_without_its_objects_row_takes_the_objects_event_time(tmp_path: Path) -> None:
    """A leaf stores no event time. A later review's leaf describing ev-1 (stored under r-alpha only) is the item
    (event, ev-1, r-alpha-2), which holds no row of ev-1: it had no event time at all, so a time_range around ev-1
    left it out and counted it in unknown_time_excluded_count, a range elsewhere counted it too, and its
    event_interval was null, while get_context shows it at ev-1's time. It now takes the event time of the object's
    own row: the event's, an entity change's event's, a summary's interval. A leaf of an undated event or of an
    entity stays undated. Its review and record times stay its own."""
    async with client_for(imported_graph(tmp_path, leaf_times_graph()), Grant(default_project="alpha")) as client:
        every = await ok(client, SEARCH, {"query": "zephyr", "page_size": 50})
        march = await ok(client, SEARCH, {"query": "zephyr", "time_range": MARCH_2, "page_size": 50})
        april = await ok(client, SEARCH, {"query": "zephyr", "time_range": APRIL, "page_size": 50})
        own: dict[tuple[str, str], dict[str, Any]] = {}
        for identifier in ("ev-1", "ent-a#decided", "sum-1"):
            rows = (await ok(client, SEARCH, {"query": identifier, "page_size": 50}))["items"]
            own |= {_key(i)[:2]: i for i in rows if i["result_id"] == "r-alpha"}

    found = {_key(i): i for i in every["items"]}
    assert set(found) == LEAF_DATED | LEAF_UNDATED
    for key, item in found.items():
        assert item["own_row"] is False and item["review_generated_at"] == "2026-04-01T00:00:00.000Z"
        if key in LEAF_DATED:
            row = own[key[:2]]  # the object's own row, under r-alpha
            assert item["event_interval"] is not None
            assert (item["event_time"], item["event_interval"]) == (row["event_time"], row["event_interval"])
        else:
            assert (item["event_time"], item["event_interval"]) == (None, None)
    assert {_key(i) for i in march["items"]} == LEAF_DATED and march["page"]["total_count"] == 3
    assert march["unknown_time_excluded_count"] == len(LEAF_UNDATED)
    assert april["items"] == [] and april["unknown_time_excluded_count"] == len(LEAF_UNDATED)


async def test_get_context_and_search_give_a_leaf_row_the_same_event_time(tmp_path: Path) -> None:
    """The same leaf description, read by get_context (leaf:leaf-2:<id>) and found by search (the item under the
    leaf's result): one event time, the described object's, for an event and an entity change."""
    async with client_for(imported_graph(tmp_path, leaf_times_graph()), Grant(default_project="alpha")) as client:
        searched = {_key(i): i for i in (await ok(client, SEARCH, {"query": "zephyr", "page_size": 50}))["items"]}
        read: dict[tuple[str, str], dict[str, Any]] = {}
        for object_type, object_id in (("event", "ev-1"), ("entity_change", "ent-a#decided")):
            args = {"object_ref": {"type": object_type, "id": object_id}, "mode": "timeline", "page_size": 50}
            leaf_id = f"leaf:leaf-2:{object_id}"
            read[(object_type, object_id)] = next(
                i for i in await all_items(client, CONTEXT, args) if i["object_ref"]["id"] == leaf_id
            )
    for (object_type, object_id), leaf in read.items():
        item = searched[(object_type, object_id, "r-alpha-2")]
        assert leaf["event_interval"] is not None and leaf["undated"] is False
        assert (leaf["event_time"], leaf["event_interval"]) == (item["event_time"], item["event_interval"])


async def test_a_search_that_finds_nothing_says_what_to_try_and_which_other_scopes_may_hold_it(tmp_path: Path) -> None:
    """The lesson about the edge boxes belongs to the Atlas+Beacon set; searched from Atlas, nothing matches and
    nothing told the agent that other scopes exist. The note names them (from the grant only), and following it
    finds the experience."""
    demo = demo_db(tmp_path)
    question = {"query": "edge box infrastructure", "object_types": ["experience"]}
    both = Grant(default_project="atlas", projects=["atlas", "beacon"], allow_global=False)
    async with client_for(demo, both) as client:
        empty = await ok(client, SEARCH, question)
        found = await ok(client, SEARCH, question | {"scope": PAIR})
        dated = await ok(
            client,
            SEARCH,
            {
                "query": "staging",
                "object_types": ["event"],
                "time_range": {"from": "2026-03-01T00:00:00Z", "to": "2026-03-31T00:00:00Z"},
            },
        )
        hit = await ok(client, SEARCH, {"query": "staging"})
        # A Chinese question splits into many pairs; only Redis is stored, so 1 of 5 terms is under the 3 needed.
        asked = await ok(client, SEARCH, {"query": "为什么放弃 Redis"})
        retried = await ok(client, SEARCH, {"query": "放弃 Redis"})
    assert empty["items"] == [] and empty["page"]["total_count"] == 0
    note = empty["no_match_note"]
    assert "at least 2 of its 3 terms" in note and "Coverage of this scope is partial" in note
    assert '{"kind":"projects","projectIds":["beacon"]}' in note
    assert '{"kind":"projects","projectIds":["atlas","beacon"]}' in note
    assert '{"kind":"global"}' not in note  # not granted
    assert '{"kind":"projects","projectIds":["atlas"]}' not in note  # the scope searched
    assert [i["object_ref"]["id"] for i in found["items"]] == ["exp-edge-box-infra"]
    assert found["no_match_note"] is None and hit["no_match_note"] is None
    assert dated["unknown_time_excluded_count"] == 1
    assert "have no event_time: 1; search without time_range" in dated["no_match_note"]
    assert asked["query_terms"] == ["为什", "什么", "么放", "放弃", "redis"] and asked["items"] == []
    assert "at least 3 of its 5 terms" in asked["no_match_note"]
    assert "Terms that match alone: redis." in asked["no_match_note"]
    assert "evt-revision-a-to-b" in {i["object_ref"]["id"] for i in retried["items"]}

    async with client_for(demo, Grant(default_project="atlas", projects=["atlas"], allow_global=False)) as client:
        alone = await ok(client, SEARCH, question)
    assert alone["no_match_note"].endswith("Only this scope was searched.")


async def test_an_event_lists_the_entity_changes_it_carried_as_its_evolution(tmp_path: Path) -> None:
    """The revision event carried two entity changes (A revised, B proposed): search gave it evolution_ref_count 0
    while get_context on the same event listed both, so an agent skipping an event 'with no evolution' missed
    the revision itself."""
    async with client_for(demo_db(tmp_path)) as client:
        found = await ok(client, SEARCH, {"query": "evt-revision-a-to-b", "object_types": ["event"]})
        context = await ok(
            client, "story_graph_get_context", {"object_ref": {"type": "event", "id": "evt-revision-a-to-b"}}
        )
    event = found["items"][0]
    assert event["object_ref"] == {"type": "event", "id": "evt-revision-a-to-b"}
    changes = [{"type": "entity_change", "id": "ent-decision-a#revised-2026-05"},
               {"type": "entity_change", "id": "ent-decision-b#proposed-2026-05"}]  # fmt: skip
    assert event["evolution_refs"] == changes and event["evolution_ref_count"] == 2
    assert context["header"]["evolution_refs"] == changes


async def test_no_match_note_says_when_a_filter_not_the_words_left_the_matches_out(tmp_path: Path) -> None:
    """'What happened at the kickoff, recorded in February?': the kickoff was recorded in July, so nothing was
    recorded in February, and the note said 'try fewer or other words' although the word matched 4 items: an
    agent would drop the right word. It now says how many match without the filter. A query of symbols only
    (an agent's wildcard) was told the same, though it held no term at all."""
    demo = demo_db(tmp_path)
    february = {"from": "2026-02-01T00:00:00+08:00", "to": "2026-02-28T23:59:59+08:00"}
    async with client_for(demo) as client:
        recorded = await ok(client, SEARCH, {"query": "kickoff", "time_range": february, "time_basis": "recorded_at"})
        everything = await ok(client, SEARCH, {"query": "kickoff"})
        typed = await ok(client, SEARCH, {"query": "edge box infrastructure", "object_types": ["experience"]})
        untyped = await ok(client, SEARCH, {"query": "edge box infrastructure"})
        wildcard = await ok(client, SEARCH, {"query": "*"})
        one_term = await ok(client, SEARCH, {"query": "撤回"})
    assert recorded["items"] == [] and everything["page"]["total_count"] == 4
    note = recorded["no_match_note"]
    assert note.startswith("No object within time_range holds the whole query. Without time_range (time_basis")
    assert "recorded_at) it matches 4 items: widen time_range or try another time_basis." in note
    assert "other words" not in note
    assert untyped["page"]["total_count"] == 27
    assert f"Without object_types it matches {untyped['page']['total_count']} items" in typed["no_match_note"]
    assert "other words" not in typed["no_match_note"]
    assert wildcard["query_terms"] == [] and "holds no search term" in wildcard["no_match_note"]
    assert "there is no wildcard" in wildcard["no_match_note"] and "fewer" not in wildcard["no_match_note"]
    assert one_term["query_terms"] == ["撤回"] and "; try other words." in one_term["no_match_note"]


async def test_coverage_names_the_results_whose_record_cannot_say_what_they_processed(tmp_path: Path) -> None:
    """'Is there anything we don't know about the review coverage?': the counts said one Atlas result is
    count-only, not which review run, so an agent could not say which period is unknown. Every response's
    coverage now names it, with when it ran and the count it holds; an absent record says unknown, never 0."""
    demo = demo_db(tmp_path)
    async with client_for(demo) as client:
        atlas = await ok(client, SEARCH, {"query": "session cache"})
        beacon = await ok(client, SEARCH, {"query": "offline", "scope": BEACON})
        quoted = await ok(client, "story_graph_read_source", {"source_reference_id": "ref-revision-2"})
    assert atlas["coverage"]["result_records"] == {"detailed": 2, "legacy_count": 1, "absent": 0}
    assert atlas["coverage"]["results_without_detail"] == [
        {
            "result_id": "res-atlas-2026-07",
            "record": "legacy_count",
            "review_generated_at": "2026-07-15T10:00:00.000Z",
            "count": 14,
        }
    ]
    assert quoted["coverage"]["results_without_detail"] == atlas["coverage"]["results_without_detail"]
    assert beacon["coverage"]["results_without_detail"] == [
        {
            "result_id": "res-beacon-2026-06",
            "record": "absent",
            "review_generated_at": "2026-06-30T01:00:00.000Z",
            "count": "unknown",
        }
    ]


async def test_coverage_lists_are_ten_examples_beside_exact_counts(tmp_path: Path) -> None:
    """Every response repeats the scope's coverage: with 50 entries per list a scope of many reviews sent ~6 KB of
    result ids on every page. Each list now holds its first 10 entries; its *_count says how many there are."""
    days = [f"2026-03-{day:02d}" for day in range(1, 25, 2)]  # 12 reviews a day apart: 12 separate ranges
    detailed: list[dict[str, Any]] = [
        {
            "kind": "result",
            "id": f"r-{day}",
            "scope": ATLAS,
            "review_generated_at": f"{day}T23:00:00Z",
            "recorded_at": f"{day}T23:00:00Z",
            "coverage": {
                "kind": "detailed",
                "processed_range": {"from": f"{day}T00:00:00Z", "to": f"{day}T12:00:00Z"},
                "sources": [{"source_id": f"src-{day}", "source_version": "v1", "fragments": [[0, 10]]}],
                "missing": [{"source_id": f"src-{day}", "ranges": [[10, 20]], "reason": "too long"}],
                "unprocessed_sources": 0,
            },
        }
        for day in days
    ]
    legacy: list[dict[str, Any]] = [
        {
            "kind": "result",
            "id": f"r-legacy-{n:02d}",
            "scope": ATLAS,
            "review_generated_at": T,
            "recorded_at": T,
            "coverage": {"kind": "legacy_count", "count": n},
        }
        for n in range(15)
    ]
    base: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "story_line", "id": "sl", "scope": ATLAS, "topic": "cache", "recorded_at": T},
    ]
    async with client_for(imported_graph(tmp_path, [*base, *detailed], name="detailed")) as client:
        every = (await ok(client, SEARCH, {"query": "cache"}))["coverage"]
    async with client_for(imported_graph(tmp_path, [*base, *detailed, *legacy], name="mixed")) as client:
        mixed = (await ok(client, SEARCH, {"query": "cache"}))["coverage"]
    assert (every["processed_range_count"], len(every["processed_ranges"])) == (12, 10)
    assert every["processed_ranges"][0] == {"from": "2026-03-05T00:00:00.000Z", "to": "2026-03-05T12:00:00.000Z"}
    assert (every["processed_source_version_count"], len(every["processed_source_versions"])) == (12, 10)
    assert (every["missing_count"], len(every["missing"])) == (12, 10)
    assert (every["results_without_detail_count"], every["results_without_detail"]) == (0, [])
    assert mixed["results_without_detail_count"] == 15 == mixed["result_records"]["legacy_count"]
    # One review time: the newest 10 are the last 10 by id.
    assert [r["result_id"] for r in mixed["results_without_detail"]] == [f"r-legacy-{n:02d}" for n in range(5, 15)]
    assert mixed["missing_count"] == "unknown" and len(mixed["missing"]) == 10
    assert "capped at 10" in mixed["note"]


async def test_coverage_lists_the_newest_processed_ranges_where_the_recent_gaps_are(tmp_path: Path) -> None:
    """A scope reviewed in 12 separate stretches listed its oldest 10 ranges: the two newest reviews, and the gap
    between them an agent continuing the latest work needs to see, were left out, and the list ended two weeks
    before processed_range did. The newest 10 are listed now, still in time order, ending where the hull ends."""
    days = [f"2026-03-{day:02d}" for day in range(1, 25, 2)]
    lines = _reviewed_graph(*((f"r-{day}", f"{day}T00:00:00Z", f"{day}T12:00:00Z") for day in days))
    async with client_for(imported_graph(tmp_path, lines)) as client:
        found = await ok(client, SEARCH, {"query": "cache"})
        context = await ok(client, "story_graph_get_context", {"object_ref": {"type": "story_line", "id": "sl"}})
        source_scope = context["coverage"]
    coverage = found["coverage"]
    assert coverage["processed_range_count"] == 12
    assert [r["from"][:10] for r in coverage["processed_ranges"]] == days[2:]
    assert coverage["processed_ranges"][-1]["to"] == coverage["processed_range"]["to"] == "2026-03-23T12:00:00.000Z"
    assert "capped at 10, the newest" in coverage["note"]
    assert source_scope == coverage


async def test_every_coverage_list_holds_the_newest_reviews_entries_in_review_order(tmp_path: Path) -> None:
    """processed_ranges lists the newest 10, but results_without_detail, missing and processed_source_versions listed
    the first 10 by result id (an arbitrary choice for UUID ids: here the oldest reviews and the newest in no order),
    and uncovered_parts the oldest 10 gaps: the latest review, the one current work continues from, could be left
    out. Each now holds the newest 10 in review order (review_generated_at, then id), or time order for the gaps."""
    days = [f"2026-03-{day:02d}" for day in range(1, 25, 2)]  # 12 reviews, two days apart
    ids = [f"res-{(n * 5) % 12:02x}-{n}" for n in range(12)]  # id order is not review order, as with UUIDs

    def result(n: int, coverage: dict[str, Any]) -> dict[str, Any]:
        times = {"review_generated_at": f"{days[n]}T23:00:00Z", "recorded_at": f"{days[n]}T23:00:00Z"}
        return {"kind": "result", "id": ids[n], "scope": ATLAS, **times, **coverage}

    detailed = [
        result(
            n,
            {
                "coverage": {
                    "kind": "detailed",
                    "processed_range": {"from": f"{day}T00:00:00Z", "to": f"{day}T12:00:00Z"},
                    "sources": [{"source_id": f"src-{day}", "source_version": "v1", "fragments": [[0, 10]]}],
                    "missing": [{"source_id": f"src-{day}", "ranges": [[10, 20]], "reason": "too long"}],
                    "unprocessed_sources": 0,
                }
            },
        )
        for n, day in enumerate(days)
    ]
    legacy = [result(n, {"coverage": {"kind": "legacy_count", "count": n}}) for n in range(12)]
    base: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "story_line", "id": "sl", "scope": ATLAS, "topic": "cache", "recorded_at": T},
    ]
    march = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-31T00:00:00Z"}
    async with client_for(imported_graph(tmp_path, [*base, *detailed], name="detailed")) as client:
        reviewed = (await ok(client, SEARCH, {"query": "cache", "time_range": march}))["coverage"]
    async with client_for(imported_graph(tmp_path, [*base, *legacy], name="legacy")) as client:
        counted = (await ok(client, SEARCH, {"query": "cache"}))["coverage"]
        context = await ok(client, "story_graph_get_context", {"object_ref": {"type": "story_line", "id": "sl"}})
    assert counted["results_without_detail_count"] == 12
    assert [r["result_id"] for r in counted["results_without_detail"]] == ids[2:]
    assert [r["count"] for r in counted["results_without_detail"]] == list(range(2, 12))
    assert context["coverage"] == counted
    assert (reviewed["processed_source_version_count"], reviewed["missing_count"]) == (12, 12)
    newest = list(zip(ids[2:], (f"src-{day}" for day in days[2:]), strict=True))
    assert [(v["result_id"], v["source_id"]) for v in reviewed["processed_source_versions"]] == newest
    assert [(m["result_id"], m["source_id"]) for m in reviewed["missing"]] == newest
    gaps = reviewed["time_range_coverage"]
    assert gaps["uncovered_part_count"] == 12  # from each review's range's end to the next one's start, or March 31
    assert [part["from"] for part in gaps["uncovered_parts"]] == [f"{day}T12:00:01.000Z" for day in days[2:]]
    assert gaps["uncovered_parts"][-1]["to"] == "2026-03-31T00:00:00.000Z"


def graph_with_coverage(record: dict[str, Any]) -> list[dict[str, Any]]:
    """One result recording `record` as its coverage, with a story line, and a reference into a stored source: each
    tool's response then carries that coverage."""
    return [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "result", "id": "r-1", "scope": ATLAS, "review_generated_at": T, "recorded_at": T, "coverage": record},
        {"kind": "story_line", "id": "sl", "scope": ATLAS, "topic": "cache", "recorded_at": T},
        {"kind": "source", "id": "src-1", "source_type": "note", "current_version": "v1", "updated_at": T},
        {"kind": "source_version", "source_id": "src-1", "version": "v1", "text": "cache notes", "recorded_at": T},
        {
            "kind": "source_reference",
            "id": "ref-1",
            "result_id": "r-1",
            "source_type": "note",
            "original_source_id": "src-1",
            "fragment": {"text": "cache", "start": 0, "end": 5},
            "recorded_at": T,
        },
    ]


async def test_a_record_of_thousands_of_ranges_leaves_the_scope_readable(tmp_path: Path) -> None:
    """Every response repeats the scope's coverage, and its lists were capped by entry, not by what an entry holds:
    one review whose record named 8,000 processed fragments and missing ranges of a source made every search and
    get_context in its scope response_too_large (221 KB), and the error's advice, a smaller page_size, could not fix
    it; read_source of its references too. Each entry now holds its first ranges and their count."""
    ranges = [[i * 10, i * 10 + 5] for i in range(8000)]
    record = {
        "kind": "detailed",
        "unprocessed_sources": 0,
        "sources": [{"source_id": "src-1", "source_version": "v1", "fragments": ranges}],
        "missing": [{"source_id": "src-1", "ranges": ranges, "reason": "timeout"}],
    }
    async with client_for(imported_graph(tmp_path, graph_with_coverage(record))) as client:
        found = await ok(client, SEARCH, {"query": "cache"})
        await ok(client, "story_graph_get_context", {"object_ref": {"type": "story_line", "id": "sl"}})
        read = await ok(client, "story_graph_read_source", {"source_reference_id": "ref-1"})
    [version] = found["coverage"]["processed_source_versions"]
    [missing] = found["coverage"]["missing"]
    assert (version["fragments"], version["fragment_count"]) == (ranges[:10], 8000)
    assert (missing["ranges"], missing["range_count"], missing["reason"]) == (ranges[:10], 8000, "timeout")
    [processed] = read["source_coverage"]["processed"]
    [unprocessed] = read["source_coverage"]["missing"]
    assert (processed["fragments"], processed["fragment_count"]) == (ranges[:50], 8000)
    assert (unprocessed["ranges"], unprocessed["range_count"]) == (ranges[:50], 8000)


async def test_a_record_with_a_huge_reason_or_version_leaves_the_scope_readable(tmp_path: Path) -> None:
    """Every response repeats the scope's coverage, and its texts were passed through whole: one review whose record
    gave a missing part a 300,000-character reason (or a processed source a 300,000-character version) made every
    search, get_context and read_source of its scope response_too_large, which no smaller page_size could fix. Each
    text now keeps its first 256 code points and says it was cut; short ones, counts and shapes stay as stored."""
    huge = "timeout while reading; " * 13_044  # 300,012 code points
    long_version = "v" + "é" * 299_999
    long_type = "t" * 300_000
    ranges = [[0, 5], [10, 15]]
    importable = {"source_id": "src-1", "source_version": "v1", "fragments": ranges, "status": "partial"}
    record: dict[str, Any] = {
        "kind": "detailed",
        "unprocessed_sources": 0,
        "sources": [{"source_id": "src-1", "source_version": long_version, "fragments": ranges}, importable],
        "missing": [
            {"source_id": "src-1", "ranges": ranges, "reason": huge},
            {"source_id": "src-1", "ranges": ranges, "reason": "skipped"},
        ],
        "source_types_not_included": ["task", long_type, *(f"u{i:02}" for i in range(11))],
    }
    # An import now refuses a version over 256 characters (it names a version: an id); a database imported before, or
    # another writer, may still hold one.
    db = imported_graph(tmp_path, graph_with_coverage({**record, "sources": [importable]}))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE results SET coverage_json = ? WHERE id = 'r-1'", (orjson.dumps(record).decode(),))
    async with client_for(db) as client:
        found = await ok(client, SEARCH, {"query": "cache"})
        context = await ok(client, "story_graph_get_context", {"object_ref": {"type": "story_line", "id": "sl"}})
        read = await ok(client, "story_graph_read_source", {"source_reference_id": "ref-1"})
    assert context["coverage"] == found["coverage"] == read["coverage"]
    coverage = found["coverage"]
    assert (coverage["missing_count"], coverage["processed_source_version_count"]) == (2, 2)
    cut, short = coverage["missing"]
    assert (cut["reason"], cut["reason_is_excerpt"]) == (huge[:256], True)
    assert (cut["ranges"], cut["range_count"], cut["source_id"], cut["source_id_is_excerpt"]) == (
        ranges,
        2,
        "src-1",
        False,
    )
    assert (short["reason"], short["reason_is_excerpt"]) == ("skipped", False)
    long, exact = coverage["processed_source_versions"]
    assert (long["source_version"], long["source_version_is_excerpt"]) == (long_version[:256], True)
    assert (long["fragments"], long["fragment_count"]) == (ranges, 2)
    assert exact == {"result_id": "r-1", "source_id": "src-1", "source_version": "v1", "fragments": ranges,
                     "status": "partial", "fragment_count": 2}  # fmt: skip
    # Counted whole, then the first 10 by name, each name capped (a list of names has no room for a flag: '…').
    others = [f"u{i:02}" for i in range(11)]
    assert coverage["source_types_not_included"] == ["task", "t" * 255 + "…", *others[:8]]
    assert coverage["source_types_not_included_count"] == 13
    processed = read["source_coverage"]["processed"]
    assert [(p["source_version"], p.get("source_version_is_excerpt")) for p in processed] == [
        (long_version[:256], True),
        ("v1", None),
    ]
    missing = read["source_coverage"]["missing"]
    assert [(m["reason"], m.get("reason_is_excerpt")) for m in missing] == [(huge[:256], True), ("skipped", None)]
    assert [m["range_count"] for m in missing] == [2, 2]


async def test_coverage_says_which_parts_of_the_time_range_no_review_processed(tmp_path: Path) -> None:
    """'Was February reviewed?': reviews processed January and March. The coverage lists processed ranges (the
    first 10 only) and their hull, January to March, spans February; a call with a time_range now gets the
    answer for its own range: not covered, or the uncovered stretches. Unknown when a record cannot say."""

    lines = _reviewed_graph(
        ("r-jan", "2026-01-01T00:00:00Z", "2026-01-31T23:59:59Z"),
        ("r-mar", "2026-03-01T00:00:00Z", "2026-03-31T23:59:59Z"),
    )
    legacy = {"kind": "result", "id": "r-old", "scope": ATLAS, "review_generated_at": T, "recorded_at": T}
    february = {"from": "2026-02-01T00:00:00Z", "to": "2026-02-28T23:59:59Z"}
    january_to_march = {"from": "2026-01-10T00:00:00Z", "to": "2026-03-10T00:00:00Z"}
    story = {"object_ref": {"type": "story_line", "id": "sl"}}
    async with client_for(imported_graph(tmp_path, lines, name="reviewed")) as client:
        feb_page = await ok(client, SEARCH, {"query": "cache", "time_range": february})
        feb = feb_page["coverage"]
        wide = (await ok(client, SEARCH, {"query": "cache", "time_range": january_to_march}))["coverage"]
        jan = (
            await ok(
                client, SEARCH, {"query": "cache", "time_range": {**january_to_march, "to": "2026-01-20T00:00:00Z"}}
            )
        )["coverage"]
        plain = (await ok(client, SEARCH, {"query": "cache"}))["coverage"]
        recorded = await ok(client, SEARCH, {"query": "cache", "time_range": february, "time_basis": "recorded_at"})
        context = await ok(client, "story_graph_get_context", {**story, "time_range": february})
    async with client_for(imported_graph(tmp_path, [*lines, legacy], name="with-legacy")) as client:
        unsure = (await ok(client, SEARCH, {"query": "cache", "time_range": february}))["coverage"]
    assert feb["processed_range"] == {"from": "2026-01-01T00:00:00.000Z", "to": "2026-03-31T23:59:59.000Z"}
    assert feb["time_range_coverage"] == {
        "status": "not_covered",
        "uncovered_parts": [{"from": "2026-02-01T00:00:00.000Z", "to": "2026-02-28T23:59:59.000Z"}],
        "uncovered_part_count": 1,
    }
    assert wide["time_range_coverage"] == {
        "status": "partly_covered",
        "uncovered_parts": [{"from": "2026-02-01T00:00:00.000Z", "to": "2026-03-01T00:00:00.000Z"}],
        "uncovered_part_count": 1,
    }
    assert jan["time_range_coverage"] == {"status": "covered", "uncovered_parts": [], "uncovered_part_count": 0}
    # Nothing found in February: every review is complete, yet none processed February, and the note says so.
    assert (feb["status"], feb_page["page"]["total_count"]) == ("complete", 0)
    assert "No review processed any of time_range (coverage.time_range_coverage)" in feb_page["no_match_note"]
    assert plain["time_range_coverage"] is None  # no time_range
    assert recorded["coverage"]["time_range_coverage"] is None  # processed ranges are source time, not recording
    assert context["coverage"]["time_range_coverage"] == feb["time_range_coverage"]
    gap = next(g for g in context["known_gaps"] if g["kind"] == "coverage_not_complete")  # the same warning
    assert gap["detail"].startswith("No review processed any of time_range (coverage.time_range_coverage)")
    assert unsure["time_range_coverage"] == {
        "status": "unknown",
        "uncovered_parts": "unknown",
        "uncovered_part_count": "unknown",
    }


async def test_a_time_range_the_recorded_ranges_cover_is_covered_beside_a_result_without_one(tmp_path: Path) -> None:
    """'What happened in Atlas in March?' on the demo: March's review records March as processed, but Atlas also holds
    a count-only review, and time_range_coverage said 'unknown' for March, as for any period. A review without a
    range may have processed any period, so it leaves uncovered parts unknown; it cannot undo what a detailed record
    says was processed. A range the recorded ranges cover whole is now 'covered'."""

    lines = _reviewed_graph(
        ("r-jan", "2026-01-01T00:00:00Z", "2026-01-31T23:59:59Z"),
        ("r-mar", "2026-03-01T00:00:00Z", "2026-03-31T23:59:59Z"),
    )
    legacy = {
        "kind": "result",
        "id": "r-old",
        "scope": ATLAS,
        "review_generated_at": T,
        "recorded_at": T,
        "coverage": {"kind": "legacy_count", "count": 3},
    }
    january = {"from": "2026-01-10T00:00:00Z", "to": "2026-01-20T00:00:00Z"}
    february = {"from": "2026-02-01T00:00:00Z", "to": "2026-02-28T23:59:59Z"}
    january_to_march = {"from": "2026-01-10T00:00:00Z", "to": "2026-03-10T00:00:00Z"}
    story = {"object_ref": {"type": "story_line", "id": "sl"}}
    async with client_for(imported_graph(tmp_path, [*lines, legacy])) as client:
        jan_page = await ok(client, SEARCH, {"query": "cache", "time_range": january})
        feb = (await ok(client, SEARCH, {"query": "cache", "time_range": february}))["coverage"]
        wide = (await ok(client, SEARCH, {"query": "cache", "time_range": january_to_march}))["coverage"]
        context = await ok(client, "story_graph_get_context", {**story, "time_range": january})
    jan = jan_page["coverage"]
    assert (jan["status"], jan["processed_range"]) == ("unknown", "unknown")  # the scope-wide answer is unchanged
    assert jan["time_range_coverage"] == {"status": "covered", "uncovered_parts": [], "uncovered_part_count": 0}
    unknown = {"status": "unknown", "uncovered_parts": "unknown", "uncovered_part_count": "unknown"}
    assert feb["time_range_coverage"] == unknown == wide["time_range_coverage"]  # r-old may have processed February
    assert context["coverage"]["time_range_coverage"] == jan["time_range_coverage"]
    gap = next(g for g in context["known_gaps"] if g["kind"] == "coverage_not_complete")
    assert "time_range" not in gap["detail"]  # the scope's own status is still unknown, and said


async def test_the_demo_s_march_is_covered_though_atlas_holds_a_count_only_review(tmp_path: Path) -> None:
    march = {"from": "2026-03-01T00:00:00+08:00", "to": "2026-03-31T23:59:59+08:00"}
    async with client_for(demo_db(tmp_path)) as client:
        found = await ok(client, SEARCH, {"query": "decision", "time_range": march})
    assert found["coverage"]["result_records"]["legacy_count"] == 1
    assert found["coverage"]["time_range_coverage"]["status"] == "covered"


async def test_a_processed_range_ending_within_a_second_covers_that_second_and_no_more(tmp_path: Path) -> None:
    """Stored times keep milliseconds. A range ending 12:00:00.500 covers until 12:00:01 (its last second whole),
    not until 12:00:01.500: the next review started at 12:00:01.400, so 12:00:01.000-12:00:01.399 was processed
    by neither; it was merged into one range and a time_range inside that stretch was called covered."""

    lines = _reviewed_graph(
        ("r-morning", "2026-01-01T08:00:00+08:00", "2026-01-01T12:00:00.500Z"),
        ("r-afternoon", "2026-01-01T12:00:01.400Z", "2026-01-01T19:00:00-05:00"),
    )

    async def coverage(start: str, end: str) -> dict[str, Any]:
        found = await ok(client, SEARCH, {"query": "cache", "time_range": {"from": start, "to": end}})
        return dict(found["coverage"])

    async with client_for(imported_graph(tmp_path, lines)) as client:
        between = await coverage("2026-01-01T12:00:01.000Z", "2026-01-01T12:00:01.300Z")
        last_second = await coverage("2026-01-01T12:00:00.600Z", "2026-01-01T12:00:00.999Z")
        day = await coverage("2026-01-01T09:00:00+09:00", "2026-01-02T09:00:00+09:00")
    assert between["processed_ranges"] == [
        {"from": "2026-01-01T00:00:00.000Z", "to": "2026-01-01T12:00:00.500Z"},
        {"from": "2026-01-01T12:00:01.400Z", "to": "2026-01-02T00:00:00.000Z"},
    ]
    assert between["time_range_coverage"] == {
        "status": "not_covered",
        "uncovered_parts": [{"from": "2026-01-01T12:00:01.000Z", "to": "2026-01-01T12:00:01.300Z"}],
        "uncovered_part_count": 1,
    }
    assert last_second["time_range_coverage"]["status"] == "covered"
    assert day["time_range_coverage"] == {
        "status": "partly_covered",
        "uncovered_parts": [{"from": "2026-01-01T12:00:01.000Z", "to": "2026-01-01T12:00:01.400Z"}],
        "uncovered_part_count": 1,
    }


async def test_a_processed_range_to_the_last_representable_second_is_read(tmp_path: Path) -> None:
    """A review recorded as processed until 9999-12-31T23:59:59Z (import accepts years 1-9999) made every call in its
    scope an internal_error once a second range followed it, and every call with a time_range: the instant after
    its end does not exist."""

    lines = _reviewed_graph(
        ("r-open", "2026-01-01T00:00:00Z", "9999-12-31T23:59:59Z"),
        ("r-feb", "2027-02-01T00:00:00Z", "2027-03-01T00:00:00Z"),
    )
    last_second = {"from": "9999-12-31T23:59:59Z", "to": "9999-12-31T23:59:59.999Z"}
    async with client_for(imported_graph(tmp_path, lines)) as client:
        plain = (await ok(client, SEARCH, {"query": "cache"}))["coverage"]
        ranged = (await ok(client, SEARCH, {"query": "cache", "time_range": last_second}))["coverage"]
    assert plain["processed_ranges"] == [{"from": "2026-01-01T00:00:00.000Z", "to": "9999-12-31T23:59:59.000Z"}]
    assert ranged["time_range_coverage"] == {"status": "covered", "uncovered_parts": [], "uncovered_part_count": 0}


async def test_processed_ranges_another_writer_stored_with_offsets_are_compared_as_instants(tmp_path: Path) -> None:
    """docs/interchange.md asks other writers for UTC text; one that wrote `+08:00` (or no offset) got a hull taken
    by text order, in its own form: from 2026-01-01T00:00:00Z when a range started at 2025-12-31T23:00:00Z, and a
    hull of times without an offset beside processed_ranges and time_range_coverage 'unknown'."""
    db = imported_graph(tmp_path, _reviewed_graph(("r-a", T, T), ("r-b", T, T)))

    def written(a: tuple[str, str], b: tuple[str, str]) -> None:
        with sqlite3.connect(db) as conn:
            for result_id, (start, end) in (("r-a", a), ("r-b", b)):
                record = {"kind": "detailed", "processed_range": {"from": start, "to": end}, "unprocessed_sources": 0}
                conn.execute(
                    "UPDATE results SET coverage_json = ? WHERE id = ?", (orjson.dumps(record).decode(), result_id)
                )

    written(
        ("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"), ("2026-01-01T07:00:00+08:00", "2026-01-01T08:00:00+08:00")
    )
    async with client_for(db) as client:
        offsets = (await ok(client, SEARCH, {"query": "cache"}))["coverage"]
    written(("2026-01-01T00:00:00", "2026-01-02T00:00:00"), ("2026-01-03T00:00:00", "2026-01-04T00:00:00"))
    async with client_for(db) as client:
        naive = (await ok(client, SEARCH, {"query": "cache"}))["coverage"]
    assert offsets["processed_range"] == {"from": "2025-12-31T23:00:00.000Z", "to": "2026-01-02T00:00:00.000Z"}
    assert offsets["processed_ranges"] == [offsets["processed_range"]]
    assert (naive["processed_range"], naive["processed_ranges"]) == ("unknown", "unknown")


async def test_a_term_match_deep_in_a_long_fragment_previews_where_the_terms_are(tmp_path: Path) -> None:
    """The 8,623-code-point design-note fragment holds 'SD card … 58% full' in §53; its preview showed the
    fragment's opening (§40, 'when the SD card is 90% full'), which hid the match and read like an answer."""
    async with client_for(demo_db(tmp_path)) as client:
        found = await ok(client, SEARCH, {"query": "SD card 58% full"})
    doc = next(i for i in found["items"] if i["object_ref"]["id"] == "ref-long-doc")
    assert doc["match_kind"] == "terms" and doc["match_position"] is None
    assert doc["preview"].startswith("fragment: …")
    assert "when the SD card is 58% full" in doc["preview"] and "90% full" not in doc["preview"]
    # A short field whose terms the preview shows anyway keeps its opening.
    revision = next(i for i in found["items"] if i["object_ref"]["id"] == "evt-revision-a-to-b")
    assert revision["preview"].startswith("description: Mei Lin revises")


async def test_a_task_id_in_a_locator_is_searched_as_an_identifier_and_named_by_read_source(tmp_path: Path) -> None:
    # The demo's task ATL-212: its reference's locator holds the task id, which an agent copies from the tracker.
    async with client_for(demo_db(tmp_path)) as client:
        found = await ok(client, SEARCH, {"query": "ATL-212"})
        read = await ok(client, "story_graph_read_source", {"source_reference_id": "ref-task-cache-migration"})
        refused = await error(client, "story_graph_read_source", {"source_reference_id": "ATL-212"})
    first = found["items"][0]
    assert (first["object_ref"]["id"], first["match_kind"]) == ("ref-task-cache-migration", "identifier")
    assert read["source_location"]["task_id"] == "ATL-212"
    assert (refused["error"], refused["field"]) == ("source_not_found", "source_reference_id")
    assert "ref-task-cache-migration" in refused["next_step"]


async def test_the_call_a_query_note_shows_is_the_one_it_counted_with_the_same_filters(tmp_path: Path) -> None:
    """query_note counts the other words with the request's filters, but showed only `{"query": "change plan"}`:
    for a search of entities it said that call matches nothing, while the call as shown matches 2 items (an event
    and a story), so an agent that believed it dropped the right next query, and one that made it got other hits
    than counted. The call shown now carries the filters, and making it gives the count the note states."""
    question = "why did we change the plan"
    may = {"from": "2026-05-01T00:00:00+08:00", "to": "2026-05-31T23:59:59.999+08:00"}
    asks: list[dict[str, Any]] = [
        {"object_types": ["entity"]},
        {"object_types": ["event", "story"], "time_range": may, "time_basis": "event_time"},
        {"scope": ATLAS, "time_range": may, "time_basis": "recorded_at"},
    ]
    async with client_for(demo_db(tmp_path)) as client:
        for filters in asks:
            note = (await ok(client, SEARCH, {"query": question} | filters))["query_note"]
            shown, claim = note.split("The other words alone (")[1].rsplit(") match ", 1)
            made = await ok(client, SEARCH, orjson.loads(shown) | {"page_size": 50})
            total = made["page"]["total_count"]
            assert claim == ("nothing." if total == 0 else f"{total} item{'s' if total != 1 else ''}."), (filters, note)
            assert orjson.loads(shown)["query"] == "change plan"
            # The default time_basis is left out, as the caller may leave it out.
            default = {"time_basis"} if filters.get("time_basis") == "event_time" else set()
            assert set(orjson.loads(shown)) == {"query", *filters} - default


async def test_a_common_word_matching_alone_is_not_offered_as_the_next_query(tmp_path: Path) -> None:
    """`why did we change the plan` over entities finds nothing, and the note said "Terms that match alone: the.":
    the one hint an agent acts on was a stop word. Common words are now named as such, never as the next query."""
    async with client_for(demo_db(tmp_path)) as client:
        only_common = await ok(client, SEARCH, {"query": "why did we change the plan", "object_types": ["entity"]})
        both = await ok(client, SEARCH, {"query": "the Redis zebra quokka narwhal", "object_types": ["entity"]})
    assert only_common["items"] == [] and both["items"] == []
    note = only_common["no_match_note"]
    assert "Terms that match alone" not in note
    assert "Only common words match alone (the), which says little: search for the words that name what" in note
    assert "Terms that match alone: redis (and common words: the)." in both["no_match_note"]


async def test_a_question_typed_as_a_sentence_is_told_which_terms_are_common_words(tmp_path: Path) -> None:
    # 9 terms, 5 needed, 6 of them common words: the hits hold `we`, `for`, `the` ..., and Decision B (the answer)
    # is not among them; the note says so and what the other words match alone.
    question = "what should we use for the session cache now"
    async with client_for(demo_db(tmp_path)) as client:
        asked = await ok(client, SEARCH, {"query": question})
        first = await ok(client, SEARCH, {"query": question, "page_size": 2})
        later = await ok(client, SEARCH, {"query": question, "page_size": 2, "cursor": first["page"]["next_cursor"]})
        other = await ok(client, SEARCH, {"query": "use session cache", "page_size": 50})
        plain = await ok(client, SEARCH, {"query": "session cache decision"})
        only_common = await ok(client, SEARCH, {"query": "what is the"})
    assert "ent-decision-b" not in {i["object_ref"]["id"] for i in asked["items"]}
    note = asked["query_note"]
    assert note is not None
    assert "6 of the query's 9 terms are common words (what, should, we, for, the, now)" in note
    assert "any 5 of the 9 terms" in note
    assert f'({{"query": "use session cache"}}) match {other["page"]["total_count"]} items' in note
    assert "ent-decision-b" in {i["object_ref"]["id"] for i in other["items"]}
    assert first["query_note"] == note
    assert later["query_note"] is None  # first page only, like no_match_note
    assert plain["query_note"] is None
    assert only_common["query_note"] is not None and "name what you look for" in only_common["query_note"]


async def test_a_from_finer_than_a_millisecond_never_keeps_a_time_before_it(tmp_path: Path) -> None:
    """Stored times have millisecond precision. `from` 03:20:00.0001 was cut down to 03:20:00.000, so the demo's
    Decision A event, at 03:20:00.000 (before `from`), was kept, and the echo showed a bound nobody sent. `from` is
    now rounded up to the next stored millisecond and `to` down: exactly the stored times in [from, to]."""
    db = demo_db(tmp_path)
    query = {"query": "Redis", "object_types": ["event"]}
    async with client_for(db) as client:
        after = await ok(
            client, SEARCH, query | {"time_range": {"from": "2026-03-10T03:20:00.0001Z", "to": "2026-03-10T04:00:00Z"}}
        )
        sub_micro = await ok(
            client,
            SEARCH,
            query | {"time_range": {"from": "2026-03-10T11:20:00.0000001+08:00", "to": "2026-03-10T04:00:00Z"}},
        )
        until = await ok(
            client, SEARCH, query | {"time_range": {"from": "2026-03-10T03:00:00Z", "to": "2026-03-10T03:20:00.0009Z"}}
        )
        within_one_ms = await ok(
            client,
            SEARCH,
            query | {"time_range": {"from": "2026-03-10T03:20:00.0001Z", "to": "2026-03-10T03:20:00.0002Z"}},
        )
        context = await ok(
            client,
            CONTEXT,
            {
                "object_ref": {"type": "entity", "id": "ent-decision-a"},
                "mode": "timeline",
                "time_range": {"from": "2026-03-10T03:20:00.0001Z", "to": "2026-03-10T04:00:00Z"},
            },
        )
    assert after["items"] == [] and after["time_range"]["from"] == "2026-03-10T03:20:00.001Z"
    assert sub_micro["items"] == [] and sub_micro["time_range"]["from"] == "2026-03-10T03:20:00.001Z"
    assert [i["object_ref"]["id"] for i in until["items"]] == ["evt-decision-a"]
    assert until["time_range"]["to"] == "2026-03-10T03:20:00.000Z"
    # Both ends inside one millisecond: an ordered range (not refused) that no stored time lies in.
    assert within_one_ms["items"] == []
    assert "evt-decision-a" not in {i["object_ref"]["id"] for i in context["items"]}


async def test_a_preview_is_cut_between_words_and_character_clusters_and_marks_its_cut_end(tmp_path: Path) -> None:
    """A preview opened 60 code points before the match wherever that fell ("…es per second" for "writes per
    second", or a lone skin tone or accent without its base), and was cut at 400 code points in the middle of a
    word ("when t") with nothing saying text followed. It now opens after a word boundary and a whole character
    cluster, and a cut end is a whole word and `…`."""
    async with client_for(demo_db(tmp_path)) as client:
        opening = await ok(client, SEARCH, {"query": "§53"})
        deep = await ok(client, SEARCH, {"query": "SD card 58% full"})
        fragment = await ok(client, "story_graph_read_source", {"source_reference_id": "ref-long-doc"})
        rest = await ok(
            client,
            "story_graph_read_source",
            {"source_reference_id": "ref-long-doc", "cursor": fragment["page"]["next_cursor"]},
        )
    text = fragment["content"] + rest["content"]
    for found in (opening, deep):
        preview = next(i["preview"] for i in found["items"] if i["object_ref"]["id"] == "ref-long-doc")
        assert len(preview) <= 400 and preview.startswith("fragment: …") and preview.endswith("…")
        body = preview.removeprefix("fragment: …").removesuffix("…")
        at = text.index(body)
        assert not (text[at - 1].isalnum() and text[at].isalnum()), preview[:40]
        assert not (text[at + len(body) - 1].isalnum() and text[at + len(body)].isalnum()), preview[-40:]
    # Clusters: a family emoji (joined by U+200D) and a combining accent, the 60-code-point opening just after their
    # first code point.
    family = "\U0001f469\u200d\U0001f469\u200d\U0001f467"
    for lead in (family, "e\u0301"):
        description = "x" * 40 + " " + lead + "y" * (60 - len(lead)) + " NEEDLE done"
        assert description.index("NEEDLE") - 60 == 42  # the code point after the cluster's first
        db = imported_graph(
            tmp_path,
            [
                {"kind": "project", "id": "atlas", "name": "Atlas"},
                {"kind": "scope", "scope": ATLAS},
                {"kind": "result", "id": "r", "scope": ATLAS, "review_generated_at": T, "recorded_at": T},
                {
                    "kind": "event",
                    "id": "evt",
                    "result_id": "r",
                    "event_type": "note",
                    "title": "t",
                    "description": description,
                    "recorded_at": T,
                },
            ],
            name=f"cluster-{len(lead)}",
        )
        async with client_for(db) as client:
            [item] = (await ok(client, SEARCH, {"query": "NEEDLE"}))["items"]
        shown = item["preview"].split(" | ")[0].removeprefix("description: …")
        assert description.endswith(shown) and "NEEDLE" in shown
        first = description.index(shown)
        assert unicodedata.category(shown[0]) not in ("Mn", "Me", "Mc", "Cf") and description[first - 1] != "\u200d"


async def test_a_story_or_experience_counts_the_events_get_context_lists_as_its_evolution(tmp_path: Path) -> None:
    """Search gave every story and experience evolution_ref_count 0 (it counted changes and relations only) while
    get_context's header listed their events (3 for story-atlas-sqlite-wal): an agent read 0 as 'this story has no
    evolution' and skipped it. The count is now what the header lists (plus relations), in the same one query."""
    async with client_for(demo_db(tmp_path)) as client:
        for object_type, object_id, scope in (
            ("story", "story-atlas-sqlite-wal", None),
            ("story", "story-atlas-session-cache", None),  # a feature: its own and its threads' primary events
            ("story", "story-pair-edge-stack", {"kind": "projects", "projectIds": ["atlas", "beacon"]}),
            ("experience", "exp-edge-box-infra", {"kind": "projects", "projectIds": ["atlas", "beacon"]}),
        ):
            where = {"scope": scope} if scope else {}
            found = await ok(client, SEARCH, {"query": object_id, "object_types": [object_type]} | where)
            ref = {"type": object_type, "id": object_id}
            header = (await ok(client, "story_graph_get_context", {"object_ref": ref} | where))["header"]
            item = next(i for i in found["items"] if i["object_ref"] == ref)
            assert item["evolution_ref_count"] == header["evolution_ref_count"] + header["relation_count"] > 0, ref
            events = sorted(r["id"] for r in header["evolution_refs"])
            assert sorted(r["id"] for r in item["evolution_refs"] if r["type"] == "event") == events, ref
    assert item["evolution_ref_count"] == 4  # the experience: two events formed it, it was applied in two


async def test_a_story_line_counts_its_own_events(tmp_path: Path) -> None:
    """A story line's item counted 0 although it has events; it now counts its own events (its entities' changes
    are get_context's to list, as documented)."""
    async with client_for(demo_db(tmp_path)) as client:
        found = await ok(client, SEARCH, {"query": "sl-beacon-sync", "object_types": ["story_line"],
                                          "scope": {"kind": "projects", "projectIds": ["beacon"]}})  # fmt: skip
    item = found["items"][0]
    assert item["object_ref"] == {"type": "story_line", "id": "sl-beacon-sync"}
    assert item["evolution_ref_count"] == 3 and {r["type"] for r in item["evolution_refs"]} == {"event"}


async def test_an_entity_or_change_counts_the_events_get_context_lists_with_it(tmp_path: Path) -> None:
    """ent-beacon-offline-queue and each change carried by an event were given evolution_ref_count 0 while
    get_context's header listed the event: the same 'no evolution' misreading as for a story."""
    beacon = {"kind": "projects", "projectIds": ["beacon"]}
    async with client_for(demo_db(tmp_path)) as client:
        entity = await ok(
            client, SEARCH, {"query": "ent-beacon-offline-queue", "object_types": ["entity"], "scope": beacon}
        )
        change = await ok(
            client, SEARCH, {"query": "ent-decision-a#revised-2026-05", "object_types": ["entity_change"]}
        )
    assert entity["items"][0]["evolution_ref_count"] == 1
    assert [r["type"] for r in entity["items"][0]["evolution_refs"]] == ["event"]
    item = next(i for i in change["items"] if i["object_ref"]["id"] == "ent-decision-a#revised-2026-05")
    assert item["evolution_refs"] == [{"type": "event", "id": "evt-revision-a-to-b"}]


async def _search_and_header(
    client: Client, ref: dict[str, str], where: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Search's item of `ref` (found by its id) and get_context's header of it, in the same scope."""
    found = await ok(client, SEARCH, {"query": ref["id"], "object_types": [ref["type"]], "page_size": 50} | where)
    item = next(i for i in found["items"] if i["object_ref"] == ref)
    header = (await ok(client, CONTEXT, {"object_ref": ref} | where))["header"]
    return item, header


def _assert_counts_as_header(item: dict[str, Any], header: dict[str, Any]) -> None:
    """Search's evolution refs are the header's evolution refs and relations, counted and listed alike (every list
    here is shorter than the header's 10)."""
    ref = item["object_ref"]
    assert item["evolution_ref_count"] == header["evolution_ref_count"] + header["relation_count"], ref
    listed = sorted((r["type"], r["id"]) for r in item["evolution_refs"])
    relations = [("relation", r["relation_ref"]["id"]) for r in header["relations"]]
    assert listed == sorted([(r["type"], r["id"]) for r in header["evolution_refs"]] + relations), ref


async def test_an_entitys_evolution_count_is_get_contexts_header_count(tmp_path: Path) -> None:
    """ent-decision-b's item counted 13 while get_context's header counted 6 + 6: evt-load-test-window is linked to
    the entity and is the other end of rel-load-test-supports-b, so search counted it as evolution and as a relation;
    get_context selects a relation's other end as a related object before the evolution, so its header counts it
    once, under relation_count. Search now leaves such an end out of an entity's (event's, change's) evolution."""
    async with client_for(demo_db(tmp_path), Grant(default_project="atlas", allow_global=True)) as client:
        for scope, entity_ids in (
            (ATLAS, ["ent-decision-a", "ent-decision-b", "ent-edge-box-constraint", "ent-option-c", "ent-ttl-2h",
                     "ent-ttl-30m", "ent-option-redis-cluster", "ent-task-cache-migration"]),
            (BEACON, ["ent-beacon-offline-queue", "ent-beacon-session-cache"]),
            (PAIR, ["ent-pair-sync-api-v3"]),
            (GLOBAL, ["ent-global-adr-practice"]),
        ):  # fmt: skip
            for entity_id in entity_ids:
                item, header = await _search_and_header(client, {"type": "entity", "id": entity_id}, {"scope": scope})
                _assert_counts_as_header(item, header)
        item, header = await _search_and_header(client, {"type": "entity", "id": "ent-decision-b"}, {"scope": ATLAS})
    assert item["evolution_ref_count"] == 12 and header["relation_count"] == 6
    load_test = {"type": "event", "id": "evt-load-test-window"}
    assert load_test not in item["evolution_refs"] and load_test not in header["evolution_refs"]


async def test_an_end_of_ones_own_relation_is_no_evolution_of_entity_event_or_change(tmp_path: Path) -> None:
    """Constructed: ev-x is linked to ent-x and supports it (rel-x-ev); ent-x's own change ent-x#c (carried by
    ev-c) is the other end of rel-x-c; ent-x also relates to ent-a#decided, another entity's change (carried by
    ev-1); and ev-1 supports the change it carried (rel-1). Search counted each such end as evolution and as a
    relation; get_context's header counted it once (a related object), and listed ev-1 as ent-x's evolution though
    it carried no change of ent-x. Both now count an entity's changes and the events linked to it or carrying its
    changes, less the other ends of its relations, plus its relations."""
    t = "2026-03-05T09:00:00Z"

    def event(event_id: str, **more: Any) -> dict[str, Any]:
        return {"kind": "event", "id": event_id, "result_id": "r-alpha", "event_type": "change", "title": event_id,
                "event_time": {"start": t}, "recorded_at": t} | more  # fmt: skip

    def relation(relation_id: str, from_ref: tuple[str, str], to_ref: tuple[str, str]) -> dict[str, Any]:
        return {"kind": "relation", "id": relation_id, "result_id": "r-alpha", "relation_type": "supports",
                "from_ref": {"type": from_ref[0], "id": from_ref[1]}, "to_ref": {"type": to_ref[0], "id": to_ref[1]},
                "recorded_at": t}  # fmt: skip

    lines = [
        *small_graph(),
        {"kind": "entity", "id": "ent-x", "story_line_id": "sl-alpha", "canonical_label": "Cache", "updated_at": t},
        event("ev-x", entity_ids=["ent-x"]),
        event("ev-c"),
        {
            "kind": "entity_change",
            "entity_id": "ent-x",
            "association_key": "c",
            "result_id": "r-alpha",
            "event_id": "ev-c",
            "change_type": "added",
            "recorded_at": t,
        },
        relation("rel-x-ev", ("event", "ev-x"), ("entity", "ent-x")),
        relation("rel-x-c", ("entity", "ent-x"), ("entity_change", "ent-x#c")),
        relation("rel-x-a", ("entity", "ent-x"), ("entity_change", "ent-a#decided")),
    ]
    where = {"scope": ALPHA}
    async with client_for(imported_graph(tmp_path, lines), Grant(default_project="alpha")) as client:
        entity, entity_header = await _search_and_header(client, {"type": "entity", "id": "ent-x"}, where)
        for ref in ({"type": "event", "id": "ev-1"}, {"type": "entity_change", "id": "ent-a#decided"},
                    {"type": "event", "id": "ev-c"}, {"type": "entity_change", "id": "ent-x#c"},
                    {"type": "entity", "id": "ent-a"}):  # fmt: skip
            _assert_counts_as_header(*await _search_and_header(client, ref, where))
    _assert_counts_as_header(entity, entity_header)
    # ev-c carried ent-x's own change: its evolution though that change is a related object; ev-1 is not.
    assert entity_header["evolution_refs"] == [{"type": "event", "id": "ev-c"}]
    assert (entity_header["relation_count"], entity["evolution_ref_count"]) == (3, 4)


async def test_no_match_note_in_a_scope_holding_nothing_says_so_and_names_the_sets_that_hold_shared_work(
    tmp_path: Path,
) -> None:
    """A search in a project set nobody stored anything under said 'try other words', and named as a project set to
    try the searched set plus one more project ({alpha, beta, gamma}), which held nothing either and answered with
    the same advice: an agent could walk empty sets. The note now says the scope holds nothing, and names the
    readable project sets that hold data and share a project with the one searched ({alpha, beta} here)."""
    from jsonl_graph import small_graph

    at = "2026-03-05T00:00:00Z"
    pair = {"kind": "projects", "projectIds": ["alpha", "beta"]}
    lines = [
        *small_graph(),
        {"kind": "project", "id": "gamma", "name": "Gamma"},
        {"kind": "scope", "scope": pair},
        {"kind": "result", "id": "r-pair", "scope": pair, "review_generated_at": at, "recorded_at": at},
        {"kind": "event", "id": "ev-pair", "result_id": "r-pair", "event_type": "decision", "title": "Shared API",
         "recorded_at": at},
    ]  # fmt: skip
    db = imported_graph(tmp_path, lines)
    alpha_gamma = {"kind": "projects", "projectIds": ["alpha", "gamma"]}
    async with client_for(db, Grant(default_project="alpha")) as client:
        empty = await ok(client, SEARCH, {"query": "shared api", "scope": alpha_gamma})
        missed = await ok(client, SEARCH, {"query": "kubernetes"})
        found = await ok(client, SEARCH, {"query": "shared api", "scope": pair})
    assert empty["data_revision"] == "0" and empty["coverage"]["published_result_count"] == 0
    note = empty["no_match_note"]
    assert note.startswith("Nothing is stored in this scope (no review result, object or story), so no query matches")
    assert "other words" not in note and '"alpha","beta","gamma"' not in note
    assert note.endswith(
        'project sets holding shared work: {"kind":"projects","projectIds":["alpha","beta"]} (Alpha, Beta).'
    )
    assert missed["no_match_note"].endswith(
        'project sets holding shared work: {"kind":"projects","projectIds":["alpha","beta"]} (Alpha, Beta).'
    )
    assert [i["object_ref"]["id"] for i in found["items"]] == ["ev-pair"]


async def test_a_leaf_id_from_get_context_names_its_object_in_search_and_read_source(tmp_path: Path) -> None:
    """get_context shows a leaf's description as an item whose id is `leaf:<leaf_id>:<id>`, and accepts that id back.
    Searched as 'an id you already hold', it matched by terms ('2026', '05', 'edge', 'box': 14 items, none of them the
    entity described); passed to read_source, it got the plain source_not_found. Both now read it as the object it
    describes: search lists that object's items first, as identifier matches, and read_source names the references
    the leaf item lists (the object's current evidence)."""
    async with client_for(demo_db(tmp_path)) as client:
        context = await ok(
            client, CONTEXT, {"object_ref": {"type": "entity", "id": "ent-edge-box-constraint"}, "page_size": 50}
        )
        leaf = next(i for i in context["items"] if i["row_kind"] == "leaf")
        leaf_id = leaf["object_ref"]["id"]
        found = await ok(client, SEARCH, {"query": leaf_id})
        refused = await error(client, "story_graph_read_source", {"source_reference_id": leaf_id})
    assert leaf_id == "leaf:leaf-atlas-2026-05-a:ent-edge-box-constraint"
    identified = [i for i in found["items"] if i["match_kind"] == "identifier"]
    assert identified and identified == found["items"][: len(identified)]
    assert {i["object_ref"]["id"] for i in identified} == {"ent-edge-box-constraint"}
    assert refused["error"] == "source_not_found"
    assert refused["next_step"] == (
        "That id names a source, message, task or object; the source references of this scope that carry it: "
        f"{', '.join(leaf['source_reference_ids'])}. Call again with one of them."
    )


async def test_a_sentence_with_no_hit_checks_its_naming_words_alone_before_its_common_words(tmp_path: Path) -> None:
    """A question typed as a sentence, with no hit: the note checked its first eight terms alone, four of them common
    words ('could', 'me', 'what', 'the'), and named 'team, said' as the terms that match, while 'edge' and 'boxes',
    which name what was asked about, were never checked. The words that are not common are checked first, and the
    terms left unchecked are named."""
    question = "could you tell me what the team said about running things on the edge boxes"
    async with client_for(demo_db(tmp_path)) as client:
        asked = await ok(client, SEARCH, {"query": question})
        chinese = await ok(client, SEARCH, {"query": "我们为什么放弃了 Redis，现在用什么做会话缓存？"})
    assert asked["items"] == [] and len(asked["query_terms"]) == 14
    note = asked["no_match_note"]
    checked = note.split("Terms that match alone (of the 8 checked; not checked: ")[1]
    unchecked, _, matched = checked.partition("): ")
    assert {"edge", "boxes"} <= set(matched.split(". ")[0].replace(",", " ").split())
    assert set(unchecked.split(", ")) <= {"could", "you", "me", "what", "the", "about", "on"}
    # Sixteen Han pairs and 'redis': the pairs that are Chinese question words (为什, 什么) or hold a particle or
    # pronoun (弃了, 用什, 么做: two words' edges) are checked last; 会话 and 缓存 were once left unchecked.
    checked_last = "not checked: 我们, 为什, 什么, 弃了, 现在, 在用, 用什, 么做): redis, 会话, 话缓, 缓存."
    assert checked_last in chinese["no_match_note"]


async def test_a_query_that_is_a_result_id_is_told_so_with_the_results_summary(tmp_path: Path) -> None:
    """Every item shows its result_id; searching one matched 24 items on 'atlas', '2026', '05', which read like that
    review's objects. The query note now says it is a result's id and names the result's summary to read."""
    async with client_for(demo_db(tmp_path)) as client:
        named = await ok(client, "story_graph_search", {"query": " res-atlas-2026-05 "})
        with_words = await ok(client, "story_graph_search", {"query": "res-atlas-2026-05 cache"})
        elsewhere = await ok(client, "story_graph_search", {"query": "res-beacon-2026-06"})
    assert named["query_note"] == (
        "res-atlas-2026-05 is the id of a review result (generated 2026-05-31T12:00:00.000Z), not of an object: search "
        "finds objects by their words and ids, so the items found only share words with it. Each item's result_id "
        "names the result that stored that row. What it covered is in its summary (sum-atlas-2026-05): read it with "
        "story_graph_get_context."
    )
    assert with_words["query_note"] is None
    assert elsewhere["query_note"] is None  # a result of another scope is not named (the scope is exact)


async def test_a_chinese_sentence_with_no_hit_is_offered_the_words_that_match_as_the_next_query(tmp_path: Path) -> None:
    """为什么会话缓存方案被修改了 splits into 12 Han pairs and needs 6; the note listed the pairs that match alone, 话缓
    and 存方 among them, which no agent would search for. It now joins them back in the query's order into the next
    query, with the call's own filters and what it matches, and that call finds the decision story."""
    question = "为什么会话缓存方案被修改了"
    async with client_for(demo_db(tmp_path)) as client:
        asked = await ok(client, SEARCH, {"query": question, "object_types": ["entity", "event"]})
        note = asked["no_match_note"]
        assert asked["items"] == [] and len(asked["query_terms"]) == 12
        assert "Terms that match alone (of the 8 checked; not checked: 为什, 什么, 被修, 改了): " in note
        offered = note.split("As a next query, ")[1].split(" matches ")
        suggested = orjson.loads(offered[0])
        assert suggested == {"query": "会话缓存方案", "object_types": ["entity", "event"]}  # 修改: only in a source
        found = await ok(client, SEARCH, suggested)
        assert offered[1].startswith(f"{found['page']['total_count']} items.")
        first_page = {(item["object_ref"]["type"], item["object_ref"]["id"]) for item in found["items"]}
        decision = {("event", "evt-revision-a-to-b"), ("entity", "ent-decision-b"), ("event", "evt-decision-a")}
        assert decision <= first_page
        # As docs/tools.md quotes it, without the filters.
        unfiltered = await ok(client, SEARCH, {"query": question})
        assert 'As a next query, {"query": "会话缓存方案 修改"} matches 17 items.' in unfiltered["no_match_note"]
        # The query itself offered again would be no next step: a one-word query gets no such line.
        alone = await ok(client, SEARCH, {"query": "zyzzogeton"})
        assert "As a next query" not in alone["no_match_note"]


def test_terms_joined_back_into_the_stretches_they_came_from() -> None:
    # Consecutive kept pairs of a Han run rejoin; a particle at a stretch's edge is dropped; other terms stay apart.
    kept = {"么会", "会话", "话缓", "缓存", "修改", "改了"}
    assert terms_as_query("什么会话缓存方案被修改了", kept) == "会话缓存 修改"
    assert terms_as_query("redis 会话 缓存 redis", {"redis", "缓存"}) == "redis 缓存"
    assert terms_as_query("的了", {"的了"}) == "的了"


def _offered(note: str, lead: str) -> tuple[dict[str, Any], str]:
    """The call a note offers after `lead` (`As a next query, ` or `The other words alone (`), and what it claims."""
    offer = note.split(lead)[1]
    end = offer.index("} match") + 1 if "} match" in offer else offer.index("}) match") + 1
    claim = offer[end:].removeprefix(")").removeprefix(" matches ").removeprefix(" match ").split(".")[0]
    return orjson.loads(offer[:end]), claim


def _claim(total: int) -> str:
    return "nothing" if total == 0 else f"{total} item{'s' if total != 1 else ''}"


async def test_the_next_query_is_offered_as_typed_and_its_call_finds_what_it_claims(tmp_path: Path) -> None:
    """The next query was made of folded terms: `why did Redis stall ATL-212 ...` offered `redis atl 212`, a query
    the agent never typed, with the task id cut in two. It now offers the words as typed, an id whose parts are both
    kept stays whole, and the call made as offered finds the count the note states and the task on page 1."""
    question = "why did Redis stall ATL-212 zebra quokka narwhal"
    asks: list[dict[str, Any]] = [{}, {"object_types": ["entity", "source_reference"], "time_basis": "recorded_at"}]
    async with client_for(demo_db(tmp_path)) as client:
        for filters in asks:
            asked = await ok(client, SEARCH, {"query": question} | filters)
            assert asked["items"] == []
            suggested, claim = _offered(asked["no_match_note"], "As a next query, ")
            assert suggested == {"query": "Redis ATL-212"} | filters
            made = await ok(client, SEARCH, suggested)
            assert claim == _claim(made["page"]["total_count"])
            first_page = {item["object_ref"]["id"] for item in made["items"]}
            assert {"ent-task-cache-migration", "ref-task-cache-migration"} <= first_page


async def test_the_next_query_is_at_most_four_words(tmp_path: Path) -> None:
    """Eight words of a pasted paragraph that matched alone were offered as one next query, which cost a second to
    count at 1M and is no query an agent would type: the note offers the first four, in the query's order."""
    question = "Redis SQLite kickoff migration cache session zebra quokka narwhal wombat yak ibex okapi"
    async with client_for(demo_db(tmp_path)) as client:
        asked = await ok(client, SEARCH, {"query": question})
        assert asked["items"] == []
        note = asked["no_match_note"]
        assert (
            "Terms that match alone (of the 8 checked; not checked: narwhal, wombat, yak, ibex, okapi): redis, " in note
        )
        suggested, claim = _offered(note, "As a next query, ")
        assert suggested == {"query": "Redis SQLite kickoff migration"}
        made = await ok(client, SEARCH, suggested)
        assert claim == _claim(made["page"]["total_count"])
    assert terms_as_query("a1 b2 c3", {"a1", "b2", "c3"}, most=2) == "a1 b2"


def test_terms_are_joined_back_as_typed() -> None:
    typed = "Why did INC-4821 hit Redis, then redis again? v2.1 foo-x-bar Ｒｅｄｉｓ缓存"
    folded = typed.casefold().replace("ｒｅｄｉｓ", "redis")  # as the index folds width and case (one to one)
    assert terms_as_query(folded, {"inc", "4821", "redis"}, typed) == "INC-4821 Redis"
    assert terms_as_query(folded, {"4821", "hit"}, typed) == "4821 hit"
    assert terms_as_query(folded, {"v2", "1", "foo", "bar"}, typed) == "v2.1 foo bar"  # a letter between: two words
    assert terms_as_query(folded, {"again", "缓存"}, typed) == "again 缓存"
    with pytest.raises(ValueError, match="same length"):
        terms_as_query(folded, {"inc"}, typed + " ")


def _chatter_graph() -> list[dict[str, Any]]:
    """A decision worded other than the question, and chat messages that ask back in the question's function words:
    `为什么会这样？是不是被修改了？` holds 为什, 什么, 么会, 被修, 修改 and 改了, six of the question's twelve pairs."""
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "result", "id": "r-atlas", "scope": ATLAS, "review_generated_at": T, "recorded_at": T},
        {
            "kind": "event",
            "id": "evt-decision",
            "result_id": "r-atlas",
            "event_type": "decision",
            "title": "会话缓存从 Redis 修改为 SQLite",
            "description": "决定：边缘节点上改用 SQLite WAL",
            "event_time": {"start": "2026-05-02T09:00:00Z"},
            "recorded_at": T,
        },
    ]
    lines.extend(
        {
            "kind": "event",
            "id": f"evt-chatter-{i}",
            "result_id": "r-atlas",
            "event_type": "discussion",
            "title": f"群聊 {i}",
            "description": "为什么会这样？是不是被修改了？我们什么时候改的？",
            "event_time": {"start": f"2026-05-{3 + i:02d}T09:00:00Z"},
            "recorded_at": T,
        }
        for i in range(3)
    )
    return lines


async def test_hits_that_match_through_function_words_get_the_other_words_as_a_next_query(tmp_path: Path) -> None:
    """A question whose hits are chatter: `为什么会话缓存方案被修改了` needs 6 of its 12 pairs, and chat messages
    asking back (`为什么会这样？是不是被修改了？`) hold six pairs that name nothing (为什, 么会, 被修, 改了 ...), while
    the decision, worded `会话缓存从 Redis 修改为 SQLite`, holds four and did not match. Page 1 was the chatter, with no
    note: only 为什 and 什么 were common words, and the next query was offered only when nothing matched. So too in
    English: `the load test window for edge boxes` put five items holding `the`, `for` and two other words on page 1.
    The note now counts Han pairs holding a particle, pronoun or question character with the common words, names
    the page's hits that match through them, and offers the other words, whose call finds the decision."""
    question = "为什么会话缓存方案被修改了"
    async with client_for(imported_graph(tmp_path, _chatter_graph())) as client:
        asked = await ok(client, SEARCH, {"query": question})
        assert {item["object_ref"]["id"] for item in asked["items"]} == {f"evt-chatter-{i}" for i in range(3)}
        assert asked["no_match_note"] is None
        note = asked["query_note"]
        assert note is not None
        assert note.startswith(
            "6 of the query's 12 terms are common words or Han pairs holding a particle, pronoun or question "
            "character (为什, 什么, 么会, 案被, 被修, 改了): an item matches with any 6 of the 12 terms, so a hit may "
            "hold only such terms"
        )
        suggested, claim = _offered(note, "The other words alone (")
        assert suggested == {"query": "会话缓存方案 修改"}
        made = await ok(client, SEARCH, suggested)
        assert claim == _claim(made["page"]["total_count"]) == "1 item"
        assert [item["object_ref"]["id"] for item in made["items"]] == ["evt-decision"]
    async with client_for(demo_db(tmp_path)) as client:
        english = await ok(client, SEARCH, {"query": "the load test window for edge boxes"})
        note = english["query_note"]
        assert note is not None
        assert note.startswith(
            "5 of the 9 items this page matched by terms hold fewer than 3 of the 5 terms of the query's other words, "
            "matching through its common words (the, for): an item matches with any 4 of the 7 terms."
        )
        suggested, claim = _offered(note, "The other words alone (")
        assert suggested == {"query": "load test window edge boxes"}
        made = await ok(client, SEARCH, suggested | {"page_size": 50})
        assert claim == _claim(made["page"]["total_count"])
        found = {item["object_ref"]["id"] for item in made["items"]}
        assert "evt-load-test-window" in found and not found & {"sl-atlas-cache", "ent-ttl-2h", "rel-b-replaces-a"}
        # Hits that hold enough of the other words get no note: `in` is one of three terms, two needed.
        plain = await ok(client, SEARCH, {"query": "migration in progress"})
        assert plain["items"] and plain["query_note"] is None
        # An empty page counts common words only: no_match_note offers the terms that match alone.
        empty = await ok(client, SEARCH, {"query": question})
        assert empty["items"] == [] and empty["query_note"] is None
        assert 'As a next query, {"query": "会话缓存方案 修改"}' in empty["no_match_note"]
