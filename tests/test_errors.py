"""The error contract (SPEC §5b) through a real MCP client session on the demo graph, in both protocol eras:
no structuredContent on an error, the code first in the text, the JSON payload last, every offending field
named, and the scopes a caller may read named in its next step (from its grant only)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # the MCP client's validator
from support import client_for, demo_db, error, ok

from server.contracts.common import Grant
from server.contracts.errors import ERROR_CODES

pytestmark = pytest.mark.anyio

SEARCH, CONTEXT, SOURCE = "story_graph_search", "story_graph_get_context", "story_graph_read_source"
ATLAS = {"kind": "projects", "projectIds": ["atlas"]}
BEACON = {"kind": "projects", "projectIds": ["beacon"]}
# One valid call per tool; the tests below break one thing at a time.
VALID: dict[str, dict[str, Any]] = {
    SEARCH: {"query": "session cache"},
    CONTEXT: {"object_ref": {"type": "entity", "id": "ent-decision-b"}},
    SOURCE: {"source_reference_id": "ref-revision-2"},
}


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    return demo_db(tmp_path)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_error_has_no_structured_content_and_carries_its_payload_in_the_text(demo: Path, mode: str) -> None:
    async with client_for(demo, mode=mode) as client:
        result = await client.call_tool(SEARCH, {"query": "cache", "as_of": "2026-05-01T00:00:00Z"})
        payload = await error(client, SEARCH, {"query": "cache", "as_of": "2026-05-01T00:00:00Z"})
    assert result.is_error and result.structured_content is None
    text = result.content[0].text  # type: ignore[union-attr]
    first, _ = text.split("\n")
    assert first == f"unsupported_mode: {payload['message']} {payload['next_step']}"
    assert payload == {
        "error": "unsupported_mode",
        "message": "as_of is not supported.",
        "field": "as_of",
        "next_step": "Remove as_of and search the stored graph as it is now; time_range with time_basis filters "
        "objects by their stored times, it does not rebuild an earlier state.",
    }
    assert payload["error"] in ERROR_CODES


OPTIONAL_ARGUMENTS = {
    SEARCH: ["cursor", "object_types", "page_size", "scope", "time_basis", "time_range"],
    CONTEXT: ["content_page_size", "cursor", "mode", "page_size", "scope", "time_basis", "time_range"],
    SOURCE: ["content_kind", "cursor", "page_size", "scope", "source_version"],
}


@pytest.mark.parametrize("tool", [SEARCH, CONTEXT, SOURCE])
async def test_null_for_any_optional_argument_is_the_argument_omitted(demo: Path, tool: str) -> None:
    """null was the argument omitted for scope, time_range and cursor, but refused for page_size, mode, time_basis,
    content_kind and content_page_size: clients that fill every optional argument (null when unset) failed on
    some and not others. Every optional argument of every tool now takes null as omitted, and the listed input
    schema says so (the MCP client's own validator accepts the call); a required argument still refuses null."""
    async with client_for(demo) as client:
        schema = {t.name: t for t in (await client.list_tools()).tools}[tool].input_schema
        nulls = dict.fromkeys(OPTIONAL_ARGUMENTS[tool])
        omitted = await ok(client, tool, VALID[tool])
        with_nulls = await ok(client, tool, VALID[tool] | nulls)
        required_null = await error(client, tool, dict.fromkeys(schema["required"]))
    assert sorted(set(schema["properties"]) - set(schema["required"])) == OPTIONAL_ARGUMENTS[tool]
    Draft202012Validator(schema).validate(VALID[tool] | nulls)
    assert with_nulls | {"read_at": ""} == omitted | {"read_at": ""}
    assert required_null["error"] == "invalid_arguments" and [required_null["field"]] == schema["required"]


async def test_as_of_is_refused_with_a_next_step_that_tool_accepts(demo: Path) -> None:
    """Each tool's refusal names what that tool can do instead: only get_context has modes, only read_source
    reads a stored version."""
    as_of = {"as_of": "2026-05-01T00:00:00Z"}
    async with client_for(demo) as client:
        steps = {tool: (await error(client, tool, VALID[tool] | as_of))["next_step"] for tool in VALID}
        follow_context = await ok(client, CONTEXT, VALID[CONTEXT] | {"mode": "timeline", "page_size": 1})
        follow_source = await ok(client, SOURCE, VALID[SOURCE] | {"content_kind": "version", "source_version": "v1"})
    assert "mode 'current' or 'timeline'" in steps[CONTEXT] and follow_context["mode"] == "timeline"
    assert "mode" not in steps[SEARCH] and "time_range" in steps[SEARCH]
    assert "mode" not in steps[SOURCE] and "content_kind 'version'" in steps[SOURCE]
    assert follow_source["source_version"] == "v1"


async def test_every_offending_field_is_named(demo: Path) -> None:
    async with client_for(demo) as client:
        both = await error(client, CONTEXT, VALID[CONTEXT] | {"mode": "as_of", "as_of": "2026-05-01T00:00:00Z"})
        many = await error(
            client,
            SEARCH,
            {"query": " ", "page_size": 0, "object_types": ["story_line", "nope"], "limit": 3},
        )
    assert both["field"] == "as_of, mode"
    fields = [p["field"] for p in many["problems"]]
    assert sorted(fields) == ["limit", "object_types.1", "page_size", "query"]
    assert many["field"] == ", ".join(fields)
    assert many["message"].startswith("4 problem(s): ")


@pytest.mark.parametrize("tool", [SEARCH, CONTEXT, SOURCE])
@pytest.mark.parametrize("value", ["5", True, 5.0, 2.5])  # null is the size omitted (see above)
async def test_page_sizes_accept_integers_only_as_upstream(demo: Path, tool: str, value: Any) -> None:
    sizes = ["page_size"] + (["content_page_size"] if tool == CONTEXT else [])
    async with client_for(demo) as client:
        for size in sizes:
            refused = await error(client, tool, VALID[tool] | {size: value})
            assert refused["error"] == "invalid_arguments" and refused["field"] == size, refused
        accepted = await ok(client, tool, VALID[tool] | dict.fromkeys(sizes, 5))
    assert accepted["page"]["returned_count"] <= 5


async def test_a_time_offset_pushing_an_instant_out_of_years_1_to_9999_lists_every_problem(demo: Path) -> None:
    low, high = "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-01:00"
    async with client_for(demo) as client:
        search = await error(client, SEARCH, {"query": "cache", "time_range": {"from": low, "to": high}})
        context = await error(client, CONTEXT, VALID[CONTEXT] | {"time_range": {"from": low, "to": high}})
        # The extremes themselves, in UTC, are fine.
        edges = {"from": "0001-01-01T00:00:00Z", "to": "9999-12-31T23:59:59Z"}
        assert (await ok(client, SEARCH, {"query": "cache", "time_range": edges}))["time_range"] == {
            "from": "0001-01-01T00:00:00.000Z",
            "to": "9999-12-31T23:59:59.000Z",
        }
    for refused in (search, context):
        assert refused["error"] == "invalid_arguments"
        assert refused["field"] == "time_range.from, time_range.to"
        assert all("outside the years 1-9999" in p["problem"] for p in refused["problems"])


async def test_invalid_cursor_does_not_ask_to_repeat_page_sizes(demo: Path) -> None:
    async with client_for(demo) as client:
        first = await ok(client, SEARCH, {"query": "cache", "page_size": 2})
        cursor = first["page"]["next_cursor"]
        smaller = await ok(client, SEARCH, {"query": "cache", "page_size": 1, "cursor": cursor})
        other = await error(client, SEARCH, {"query": "redis", "page_size": 2, "cursor": cursor})
        # Matching ignores case, but an id query does not: the cursor binds the query as typed. The refusal names
        # the argument that differs, so the agent repeats it instead of guessing among all its filters.
        retyped = await error(client, SEARCH, {"query": "Cache", "page_size": 2, "cursor": cursor})
        widened = await error(client, SEARCH, {"query": "cache", "object_types": ["event"], "cursor": cursor})
        elsewhere = await error(client, SEARCH, {"query": "cache", "scope": {"kind": "global"}, "cursor": cursor})
        first_ctx = await ok(client, CONTEXT, {"object_ref": {"type": "entity", "id": "ent-decision-b"}})
        timeline = await error(
            client,
            CONTEXT,
            {
                "object_ref": {"type": "entity", "id": "ent-decision-b"},
                "mode": "timeline",
                "time_basis": "recorded_at",
                "cursor": first_ctx["page"]["next_cursor"],
            },
        )
    assert smaller["page"]["returned_count"] == 1
    assert other["error"] == "invalid_cursor" and other["field"] == "cursor, query"
    text = f"{other['message']} {other['next_step']}"
    assert "page size" not in text.replace("page sizes may change", "")
    assert "repeat the original query" in text
    assert retyped["field"] == "cursor, query"
    assert retyped["message"] == (
        "the cursor was issued for a request with another query; repeat the original query with it."
    )
    assert widened["field"] == "cursor, object_types"
    assert elsewhere["field"] == "cursor, scope"  # omitting scope keeps the cursor's
    assert elsewhere["message"] == "the cursor was issued for another scope; repeat the original scope or omit it."
    assert timeline["field"] == "cursor, mode, time_basis"
    assert "another mode and time_basis" in timeline["message"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_caller_without_a_current_project_is_told_what_it_may_read(demo: Path, mode: str) -> None:
    everything = Grant(default_project=None)
    beacon_only = Grant(default_project=None, projects=["beacon", "legacy", "no-such"], allow_global=False)
    async with client_for(demo, everything, mode=mode) as client:
        wide = await error(client, SEARCH, {"query": "cache"})
    async with client_for(demo, beacon_only, mode=mode) as client:
        narrow = await error(client, SEARCH, {"query": "cache"})
        asked = await error(client, SEARCH, {"query": "cache", "scope": ATLAS})
        inactive = await error(
            client, SEARCH, {"query": "cache", "scope": {"kind": "projects", "projectIds": ["legacy"]}}
        )
        found = await ok(client, SEARCH, {"query": "session", "scope": narrow["readable_scopes"][0]})
    # Every active project and Global for a grant of everything; inactive 'legacy' is not readable.
    assert wide["error"] == "scope_required"
    assert wide["readable_scopes"] == [{"kind": "global"}, ATLAS, BEACON]
    assert wide["readable_scope_count"] == 3
    assert '{"kind":"projects","projectIds":["atlas"]}' in wide["next_step"]
    # A narrow grant: only what it can read now (not the inactive or missing projects it names, never atlas).
    assert narrow["readable_scopes"] == [BEACON] and narrow["readable_scope_count"] == 1
    assert "atlas" not in narrow["next_step"] and "legacy" not in narrow["next_step"]
    # Nor is Global offered as an example to a caller that may not read it.
    assert '{"kind":"global"}' in wide["next_step"] and "global" not in narrow["next_step"]
    # An unreadable scope gets the same list: it depends on the grant only, so nothing about what was asked leaks.
    assert asked["error"] == inactive["error"] == "scope_unavailable"
    assert asked == inactive
    assert asked["readable_scopes"] == [BEACON]
    assert found["resolved_scope"] == BEACON


async def test_the_project_set_hint_is_given_only_to_a_caller_that_can_read_two_projects(demo: Path) -> None:
    """Every scope_required / scope_unavailable ended 'a project set of readable projects works too', also for a
    caller that can read one project, or none: a set of one is that project, and no set was there to try. The
    hint is now given only with two readable projects or more, with an example of one it may pass."""
    grants = {
        "one": Grant(default_project=None, projects=["beacon", "legacy"], allow_global=False),
        "global": Grant(default_project=None, projects=[], allow_global=True),
        "all": Grant(default_project=None),
    }
    refused: dict[str, dict[str, Any]] = {}
    for name, grant in grants.items():
        async with client_for(demo, grant) as client:
            refused[name] = await error(client, SEARCH, {"query": "cache"})
            refused[f"{name}-asked"] = await error(
                client, SEARCH, {"query": "cache", "scope": {"kind": "projects", "projectIds": ["no-such"]}}
            )
    for name in ("one", "global"):
        assert "project set" not in refused[name]["next_step"]
        assert "project set" not in refused[f"{name}-asked"]["next_step"]
    assert refused["one"]["next_step"].endswith(
        'Scopes this client can read: {"kind":"projects","projectIds":["beacon"]} (Beacon mobile app).'
    )
    assert refused["global"]["next_step"].endswith('Scopes this client can read: {"kind":"global"}.')
    assert refused["all"]["next_step"].endswith(
        "; a project set of readable projects is a scope too (work they share is stored there), e.g. "
        '{"kind":"projects","projectIds":["atlas","beacon"]} (Atlas sync service, Beacon mobile app).'
    )
    assert refused["all-asked"]["error"] == "scope_unavailable" and "e.g. {" in refused["all-asked"]["next_step"]


async def test_scope_required_names_the_readable_scope_an_object_or_reference_is_stored_in(demo: Path) -> None:
    """A caller without a current project asked for an object by id, without a scope: scope_required listed the
    scopes it may read but not which one holds the object, so it had to try each. The next step now names the
    scope (the exact scope argument) when the caller may read it there, and nothing when it may not."""
    pair = {"kind": "projects", "projectIds": ["atlas", "beacon"]}
    beacon_only = Grant(default_project=None, projects=["beacon", "legacy"], allow_global=False)

    def story(story_id: str) -> dict[str, Any]:
        return {"object_ref": {"type": "story_line", "id": story_id}}

    async with client_for(demo, Grant(default_project=None)) as client:
        shared = await error(client, CONTEXT, story("sl-pair-release"))
        fixed = await ok(client, CONTEXT, {**story("sl-pair-release"), "scope": pair})
    async with client_for(demo, beacon_only) as client:
        own = await error(client, CONTEXT, story("sl-beacon-sync"))
        reference = await error(client, SOURCE, {"source_reference_id": "ref-beacon-sync-1"})
        quoted = await ok(client, SOURCE, {"source_reference_id": "ref-beacon-sync-1", "scope": BEACON})
        hidden = {
            "atlas": await error(client, CONTEXT, story("sl-atlas-cache")),
            "pair": await error(client, CONTEXT, story("sl-pair-release")),
            "inactive": await error(client, CONTEXT, story("sl-legacy-import")),
            "none": await error(client, CONTEXT, story("no-such-story")),
        }
        hidden_references = [
            await error(client, SOURCE, {"source_reference_id": some_id})
            for some_id in ("ref-decision-a-msg", "ref-pair-api-freeze", "no-such-ref")
        ]
    assert shared["error"] == "scope_required"
    assert shared["next_step"].startswith(
        'object_ref {"type":"story_line","id":"sl-pair-release"} is stored in scope '
        '{"kind":"projects","projectIds":["atlas","beacon"]} (Atlas sync service, Beacon mobile app): call again '
        'with "scope": {"kind":"projects","projectIds":["atlas","beacon"]}.'
    )
    assert fixed["resolved_scope"] == pair
    assert own["next_step"].startswith(
        'object_ref {"type":"story_line","id":"sl-beacon-sync"} is stored in scope '
        '{"kind":"projects","projectIds":["beacon"]} (Beacon mobile app): call again with "scope": '
        '{"kind":"projects","projectIds":["beacon"]}.'
    )
    assert reference["error"] == "scope_required"
    assert reference["next_step"].startswith(
        'source reference \'ref-beacon-sync-1\' is stored in scope {"kind":"projects","projectIds":["beacon"]}'
    )
    assert quoted["resolved_scope"] == BEACON
    # Outside the grant (atlas, the pair holding atlas) or inactive (legacy): the answer of an id stored nowhere.
    assert hidden["atlas"] == hidden["pair"] == hidden["inactive"] == hidden["none"]
    assert hidden["none"]["error"] == "scope_required" and "stored" not in hidden["none"]["next_step"]
    assert hidden_references[0] == hidden_references[1] == hidden_references[2]
    assert "atlas" not in str(hidden_references[0]) and "stored" not in hidden_references[0]["next_step"]


async def test_scope_unavailable_names_the_readable_scope_an_object_or_reference_is_stored_in(demo: Path) -> None:
    """A scope the caller may not read (or that does not exist) asked for an object stored in one it may read: the
    refusal listed the readable scopes, not which one holds the object. It now names that scope; the answer still
    depends only on the object and the grant, never on the scope asked for, and names no scope outside the grant."""
    beacon_only = Grant(default_project=None, projects=["beacon"], allow_global=False)
    nowhere = {"kind": "projects", "projectIds": ["no-such"]}
    story = {"object_ref": {"type": "story_line", "id": "sl-beacon-sync"}}
    async with client_for(demo, beacon_only) as client:
        asked_atlas = await error(client, CONTEXT, {**story, "scope": ATLAS})
        asked_nowhere = await error(client, CONTEXT, {**story, "scope": nowhere})
        reference = await error(client, SOURCE, {"source_reference_id": "ref-beacon-sync-1", "scope": ATLAS})
        atlas_story = await error(
            client, CONTEXT, {"object_ref": {"type": "story_line", "id": "sl-atlas-cache"}, "scope": ATLAS}
        )
        no_story = await error(client, CONTEXT, {"object_ref": {"type": "story_line", "id": "no-such"}, "scope": ATLAS})
    assert asked_atlas == asked_nowhere
    assert asked_atlas["error"] == reference["error"] == "scope_unavailable"
    assert asked_atlas["next_step"].startswith(
        'object_ref {"type":"story_line","id":"sl-beacon-sync"} is stored in scope '
        '{"kind":"projects","projectIds":["beacon"]} (Beacon mobile app): call again with "scope": '
        '{"kind":"projects","projectIds":["beacon"]}.'
    )
    assert reference["next_step"].startswith("source reference 'ref-beacon-sync-1' is stored in scope {")
    assert atlas_story == no_story and "stored" not in atlas_story["next_step"]


async def test_scope_required_names_where_an_id_is_stored_as_get_context_and_read_source_would_read_it(
    demo: Path,
) -> None:
    """scope_required named the scope holding an exact id only: an id with whitespace around it or in another letter
    case (which object_not_found / source_not_found name the stored id for) got the bare refusal. The same near ids
    are looked up, the stored id is named with its scope, and still only scopes the caller may read."""
    beacon_only = Grant(default_project=None, projects=["beacon"], allow_global=False)
    async with client_for(demo, Grant(default_project=None)) as client:
        padded = await error(client, CONTEXT, {"object_ref": {"type": "event", "id": " evt-decision-a"}})
        upper = await error(client, CONTEXT, {"object_ref": {"type": "event", "id": "EVT-DECISION-A"}})
        leaf = await error(
            client, CONTEXT, {"object_ref": {"type": "entity", "id": "LEAF:LEAF-ATLAS-2026-03-A:ENT-DECISION-A"}}
        )
        reference = await error(client, SOURCE, {"source_reference_id": "REF-REVISION-2\n"})
        nowhere = {"kind": "projects", "projectIds": ["no-such"]}
        unavailable = await error(client, SOURCE, {"source_reference_id": " ref-revision-2", "scope": nowhere})
    assert padded["error"] == upper["error"] == reference["error"] == "scope_required"
    assert padded["next_step"].startswith(
        'The id has whitespace around it: object_ref {"type":"event","id":"evt-decision-a"} is stored in scope '
        '{"kind":"projects","projectIds":["atlas"]} (Atlas sync service): call again with that id and "scope": '
        '{"kind":"projects","projectIds":["atlas"]}.'
    )
    assert upper["next_step"].startswith(
        'The id differs in letter case (ids are exact): object_ref {"type":"event","id":"evt-decision-a"} is stored'
    )
    assert leaf["next_step"].startswith(
        'The id differs in letter case (ids are exact): object_ref {"type":"entity","id":'
        '"leaf:leaf-atlas-2026-03-a:ent-decision-a"} is stored in scope {"kind":"projects","projectIds":["atlas"]}'
    )
    assert reference["next_step"].startswith(
        "The id has whitespace around it and differs in letter case (ids are exact): source reference "
        '\'ref-revision-2\' is stored in scope {"kind":"projects","projectIds":["atlas"]} (Atlas sync service): '
        "call again"
    )
    assert unavailable["error"] == "scope_unavailable"
    assert unavailable["next_step"].startswith("The id has whitespace around it: source reference 'ref-revision-2'")
    async with client_for(demo, beacon_only) as client:
        hidden = await error(client, CONTEXT, {"object_ref": {"type": "event", "id": "EVT-DECISION-A"}})
        missing = await error(client, CONTEXT, {"object_ref": {"type": "event", "id": "EVT-NO-SUCH-EVENT"}})
    assert hidden == missing and "stored" not in hidden["next_step"]


async def test_the_readable_scope_list_is_capped_with_its_total(tmp_path: Path) -> None:
    import sqlite3

    db = demo_db(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.executemany("INSERT INTO projects (id, name) VALUES (?, ?)", [(f"p{i:03d}", "P") for i in range(40)])
    async with client_for(db, Grant(default_project=None, allow_global=False)) as client:
        refused = await error(client, SEARCH, {"query": "cache"})
    assert len(refused["readable_scopes"]) == 20 and refused["readable_scope_count"] == 42
    assert "(and 22 more)" in refused["next_step"]


# Where each tool first calls into the reader: a fault planted there stands for any bug of ours.
FIRST_READ = {
    SEARCH: ("server.reader.search", "search"),
    CONTEXT: ("server.tools.context", "locate_target"),
    SOURCE: ("server.reader.source", "read"),
}


@pytest.mark.parametrize("tool", [SEARCH, CONTEXT, SOURCE])
async def test_a_fault_in_the_server_is_internal_error_with_an_incident_id_and_serving_goes_on(
    demo: Path, tool: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug of ours reaches the caller as `internal_error` with an incident id and what to do, not as the bare
    exception text with internals in it; the log has the traceback under the same id; the next call is served."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError(f"internal detail {demo}")

    async with client_for(demo) as client:
        with monkeypatch.context() as patched:
            module, name = FIRST_READ[tool]
            patched.setattr(importlib.import_module(module), name, broken)
            payload = await error(client, tool, VALID[tool])
        await ok(client, tool, VALID[tool])
    assert payload["error"] == "internal_error" and payload["error"] in ERROR_CODES
    assert "incident" in payload["message"] and "nothing was changed" in payload["message"]
    assert "internal detail" not in str(payload) and str(demo) not in str(payload)
    incident = payload["message"].split("incident ", 1)[1].split(")", 1)[0]
    logged = [record for record in caplog.records if incident in record.getMessage()]
    assert logged and logged[0].exc_info is not None and "internal detail" in str(logged[0].exc_info[1])


async def test_a_problem_inside_the_scope_names_the_argument_as_sent_not_the_union_tag(demo: Path) -> None:
    """Pydantic puts the tag of the scope union in its error path (`scope.projects.projectIds`); a caller
    fixing its arguments must be told `scope.projectIds`, the key it sent."""
    async with client_for(demo) as client:
        duplicate = await error(
            client, SEARCH, VALID[SEARCH] | {"scope": {"kind": "projects", "projectIds": ["a", "a"]}}
        )
        missing = await error(client, CONTEXT, VALID[CONTEXT] | {"scope": {"kind": "projects"}})
        empty_id = await error(client, SOURCE, VALID[SOURCE] | {"scope": {"kind": "projects", "projectIds": ["x", ""]}})
        extra = await error(client, SEARCH, VALID[SEARCH] | {"scope": {"kind": "global", "projects": ["atlas"]}})
    assert duplicate["field"] == "scope.projectIds" and "unique" in duplicate["message"]
    assert missing["field"] == "scope.projectIds" and "scope.projectIds: Field required" in missing["message"]
    assert empty_id["field"] == "scope.projectIds.1"
    assert extra["field"] == "scope.projects" and extra["problems"][0]["field"] == "scope.projects"


async def test_an_offset_without_its_colon_is_named_as_such_not_as_missing(demo: Path) -> None:
    """`+0800` is an offset written the basic way; telling the caller it has none sends it the wrong way."""
    bad = ["2026-05-01T00:00:00+0800", "2026-05-01T00:00:00+08", "2026-05-01T00:00:00+08:00:30"]
    async with client_for(demo) as client:
        refused = [
            await error(client, SEARCH, {"query": "cache", "time_range": {"from": time, "to": "2026-06-01T00:00:00Z"}})
            for time in bad
        ]
        local = await error(
            client,
            SEARCH,
            {"query": "cache", "time_range": {"from": "2026-05-01T00:00:00", "to": "2026-06-01T00:00:00Z"}},
        )
    for payload, time in zip(refused, bad, strict=True):
        assert payload["field"] == "time_range.from"
        (problem,) = payload["problems"]
        assert problem["problem"].endswith(
            f"'{time}': write the UTC offset as 'Z' or '+HH:MM' with a colon, e.g. 2026-09-28T10:00:00+08:00"
        )
    assert "has no UTC offset" in local["problems"][0]["problem"]


async def test_rfc_3339_lower_case_and_space_forms_are_the_same_instants(demo: Path) -> None:
    """`2026-03-10t03:00:00z` and `2026-03-10 03:00:00Z` are RFC 3339 date-times (the `T` and `Z` may be lower case, a
    space may stand for the `T`); the lower-case `t` was refused as "not an ISO 8601 date-time"."""
    upper = {"from": "2026-03-10T03:00:00Z", "to": "2026-03-10T04:00:00+00:00"}
    forms = [
        {"from": "2026-03-10t03:00:00z", "to": "2026-03-10t04:00:00+00:00"},
        {"from": "2026-03-10 03:00:00Z", "to": "2026-03-10 04:00:00+00:00"},
    ]
    async with client_for(demo) as client:
        expected = await ok(client, SEARCH, {"query": "Redis", "time_range": upper})
        answers = [await ok(client, SEARCH, {"query": "Redis", "time_range": form}) for form in forms]
    assert expected["items"], "the range holds a Redis event"
    in_utc = {"from": "2026-03-10T03:00:00.000Z", "to": "2026-03-10T04:00:00.000Z"}
    for answer in answers:
        assert answer["time_range"] == expected["time_range"] == in_utc
        assert answer["items"] == expected["items"]


async def test_a_bare_date_is_answered_with_the_instants_that_cover_that_day(demo: Path) -> None:
    """An agent asked about a day sends `2026-04-14`. The refusal said only "not an ISO 8601 date-time such as
    2026-09-28T10:00:00Z", and the form an agent then reaches for as the end, `2026-04-14T23:59:59Z`, leaves out the
    day's last second (the range is closed and compared as instants). It now names the instants to send, and those
    find the load test, whose window ends at 2026-04-14T23:59:59.999Z."""
    query = {"query": "SQLite", "object_types": ["event"]}
    async with client_for(demo) as client:
        refused = await error(client, SEARCH, query | {"time_range": {"from": "2026-04-14", "to": "2026-04-14"}})
        sent = {
            p["field"].removeprefix("time_range."): p["problem"].split(" send ")[1].split(" ")[0]
            for p in refused["problems"]
        }
        found = await ok(client, SEARCH, query | {"time_range": sent})
    assert refused["field"] == "time_range.from, time_range.to"
    assert sent == {"from": "2026-04-14T00:00:00Z", "to": "2026-04-14T23:59:59.999Z"}
    assert all("date without a time" in p["problem"] and "offset" in p["problem"] for p in refused["problems"])
    assert [i["object_ref"]["id"] for i in found["items"]] == ["evt-load-test-window"]


async def test_a_bare_id_or_name_where_an_object_is_expected_is_answered_with_the_shape_to_send(demo: Path) -> None:
    """Agents pass `"scope": "atlas"` or `"object_ref": "ent-decision-b"`; the problem shows the shape with what
    they sent in place, so the next call can be written from the error alone."""
    async with client_for(demo) as client:
        ref = await error(client, CONTEXT, {"object_ref": "ent-decision-b"})
        scope = await error(client, SEARCH, {"query": "cache", "scope": "atlas"})
        kind = await error(client, SOURCE, VALID[SOURCE] | {"scope": {"kind": "project", "projectIds": ["atlas"]}})
        types = await error(client, SEARCH, {"query": "cache", "object_types": "event"})
        fixed_ref = await ok(client, CONTEXT, {"object_ref": {"type": "entity", "id": "ent-decision-b"}})
        fixed_scope = await ok(client, SEARCH, {"query": "cache", "scope": ATLAS, "object_types": ["event"]})
    assert ref["problems"] == [
        {
            "field": "object_ref",
            "problem": "Input should be a valid dictionary or instance of ObjectRef; expected the shape "
            '{"type":"<object type>","id":"ent-decision-b"}',
        }
    ]
    assert scope["field"] == "scope"
    assert scope["problems"][0]["problem"].endswith(
        'expected the shape {"kind":"projects","projectIds":["atlas"]} or {"kind":"global"}'
    )
    assert kind["field"] == "scope" and '{"kind":"projects","projectIds":["<project id>"]}' in kind["message"]
    assert types["problems"][0]["problem"].endswith('expected the shape ["event"]')
    assert fixed_ref["items"] and fixed_scope["items"]


async def test_a_bare_project_id_and_a_blank_query_are_answered_with_what_to_send(demo: Path) -> None:
    """`"projectIds": "atlas"` got 'Input should be a valid list' with no shape, and a query of spaces got 'String
    should have at least 1 character' though three were sent (it is trimmed first): neither said what to send."""
    async with client_for(demo) as client:
        bare = await error(client, SEARCH, {"query": "cache", "scope": {"kind": "projects", "projectIds": "atlas"}})
        blank = await error(client, SEARCH, {"query": "   "})
        empty = await error(client, SEARCH, {"query": ""})
    assert bare["problems"] == [
        {
            "field": "scope.projectIds",
            "problem": 'Input should be a valid list; expected the shape ["atlas"] (a list, even for one project)',
        }
    ]
    assert blank["problems"] == [
        {
            "field": "query",
            "problem": "the query holds only whitespace, which is trimmed before searching; send words or an id",
        }
    ]
    assert empty["problems"] == [{"field": "query", "problem": "String should have at least 1 character"}]


async def test_a_cursor_from_before_a_restart_says_why_it_is_refused(demo: Path) -> None:
    """serve --demo without --cursor-secret-file signs with a new secret each start: an agent resuming after a
    restart was told only 'not one this server issued' and suspected its own copy of the cursor."""
    async with client_for(demo, secret=b"first-process-secret-0123") as client:
        cursor = (await ok(client, SEARCH, {"query": "cache", "page_size": 2}))["page"]["next_cursor"]
    async with client_for(demo, secret=b"second-process-secret-012") as client:
        refused = await error(client, SEARCH, {"query": "cache", "page_size": 2, "cursor": cursor})
    assert refused["error"] == "invalid_cursor" and refused["field"] == "cursor"
    assert "before this server restarted without a fixed cursor secret" in refused["message"]


async def test_a_project_listed_twice_is_named_with_the_fix(demo: Path) -> None:
    """{"projectIds": ["atlas", "beacon", "atlas"]} got 'Project IDs must be unique': the rule, not which id repeats
    nor what to send. The problem now names the repeated id and says to list each project once."""
    scope = {"kind": "projects", "projectIds": ["atlas", "beacon", "atlas"]}
    async with client_for(demo) as client:
        payloads = [await error(client, tool, args | {"scope": scope}) for tool, args in VALID.items()]
    for payload in payloads:
        assert payload["error"] == "invalid_arguments" and payload["field"] == "scope.projectIds"
        assert payload["problems"] == [
            {
                "field": "scope.projectIds",
                "problem": "Project IDs must be unique: 'atlas' listed more than once; list each project once",
            }
        ]


async def test_scope_unavailable_says_to_omit_scope_only_when_that_reads_a_current_project(demo: Path) -> None:
    """scope_unavailable always said 'Omit scope to use the current project': an HTTP client granted Atlas and Beacon
    with no default project that asked for Global did so, and got scope_required; a caller whose current project is
    the inactive one got the same refusal again. Said only when omitting scope reads a project the caller may read."""
    no_current = Grant(default_project=None, projects=["atlas", "beacon"], allow_global=False)
    elsewhere = {"query": "cache", "scope": {"kind": "projects", "projectIds": ["x"]}}
    inactive_current = Grant(default_project="legacy")
    async with client_for(demo, no_current) as client:
        asked_global = await error(client, SEARCH, {"query": "cache", "scope": {"kind": "global"}})
        omitted = await error(client, SEARCH, {"query": "cache"})
    async with client_for(demo, inactive_current) as client:
        current_refused = await error(client, SEARCH, {"query": "cache"})
        asked_other = await error(client, SEARCH, elsewhere)
    async with client_for(demo) as client:  # current project atlas
        asked_missing = await error(client, SEARCH, elsewhere)
        followed = await ok(client, SEARCH, {"query": "cache"})
    assert omitted["error"] == "scope_required"  # what following 'Omit scope' led to
    for refused in (asked_global, current_refused, asked_other):
        assert refused["error"] == "scope_unavailable"
        assert refused["next_step"].startswith("Choose a scope this client may read. Scopes this client can read: ")
        assert "Omit scope" not in refused["next_step"]
    assert asked_missing["next_step"].startswith("Omit scope to use the current project, or choose a scope this client")
    assert followed["resolved_scope"] == ATLAS


async def test_a_source_id_sent_as_a_source_reference_names_the_references_saved_from_it(tmp_path: Path) -> None:
    """read_source named the references carrying a source's id; get_context answered a bare object_not_found (found by
    the agent review). Its next step now names them, and following it literally reads one."""
    ref = {"type": "source_reference", "id": "src-msg-decision-a"}
    async with client_for(demo_db(tmp_path)) as client:
        refused = await error(client, "story_graph_get_context", {"object_ref": ref})
        assert refused["error"] == "object_not_found"
        assert refused["next_step"] == (
            "That id names a source, message or task; the source references of this scope saved from it: "
            'ref-decision-a-msg, ref-ttl-30m. Call again with object_ref {"type":"source_reference",'
            '"id":"ref-decision-a-msg"} (or another of them), or read their text with story_graph_read_source.'
        )
        page = await ok(
            client, "story_graph_get_context", {"object_ref": {"type": "source_reference", "id": "ref-decision-a-msg"}}
        )
    assert page["object_ref"] == {"type": "source_reference", "id": "ref-decision-a-msg"}
