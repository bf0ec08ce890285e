"""Scopes are named by their projects' stored names beside the ids, through a real MCP client session: a graph
imported from the GoodBuddy app has UUID project ids, and an agent asked about "Beacon" could not tell which scope
that is (`readable_scopes`, the scope hints, `no_match_note` and `resolved_scope` gave bare ids). The names are an
addition (SPEC §5b: we add, never rename): every scope object stays a valid `scope` argument."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import client_for, demo_db, error, ok

from server.contracts.common import COVERAGE_TEXT_LIMIT, PROJECT_NAMES_BYTES, Grant

pytestmark = pytest.mark.anyio

SEARCH, CONTEXT, SOURCE = "story_graph_search", "story_graph_get_context", "story_graph_read_source"
UUID = "3f2a9c4e-8b1d-4c7a-9e2f-5d6b7a8c9e01"
"""A GoodBuddy project id: it says nothing of the project."""
UUID_SCOPE = {"kind": "projects", "projectIds": [UUID]}
ATLAS, BEACON = "Atlas sync service", "Beacon mobile app"


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """The demo graph, with a project whose id is a UUID (as a GoodBuddy import stores it)."""
    db = demo_db(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO projects (id, name) VALUES (?, 'Cobalt')", (UUID,))
    return db


async def test_every_response_names_the_projects_of_its_resolved_scope(demo: Path) -> None:
    pair = {"kind": "projects", "projectIds": ["beacon", "atlas"]}
    async with client_for(demo) as client:
        search = await ok(client, SEARCH, {"query": "cache"})
        context = await ok(client, CONTEXT, {"object_ref": {"type": "entity", "id": "ent-decision-b"}})
        source = await ok(client, SOURCE, {"source_reference_id": "ref-revision-2"})
        shared = await ok(client, SEARCH, {"query": "release", "scope": pair})
        global_ = await ok(client, SEARCH, {"query": "cache", "scope": {"kind": "global"}})
        cobalt = await ok(client, SEARCH, {"query": "cache", "scope": UUID_SCOPE})
        # The scope objects are unchanged: resolved_scope, passed back as the scope argument, reads the same scope.
        again = await ok(client, SEARCH, {"query": "release", "scope": shared["resolved_scope"]})
    for response in (search, context, source):
        assert response["resolved_scope"] == {"kind": "projects", "projectIds": ["atlas"]}
        assert response["project_names"] == {"atlas": ATLAS}
    assert shared["resolved_scope"] == {"kind": "projects", "projectIds": ["atlas", "beacon"]}
    assert shared["project_names"] == {"atlas": ATLAS, "beacon": BEACON}
    assert again["resolved_scope"] == shared["resolved_scope"] and again["project_names"] == shared["project_names"]
    assert global_["project_names"] == {}
    assert cobalt["project_names"] == {UUID: "Cobalt"}


async def test_scope_errors_name_the_readable_projects_and_only_those(demo: Path) -> None:
    beacon_cobalt = Grant(default_project=None, projects=["beacon", "legacy", UUID], allow_global=False)
    async with client_for(demo, Grant(default_project=None)) as client:
        everyone = await error(client, SEARCH, {"query": "cache"})
    async with client_for(demo, beacon_cobalt) as client:
        required = await error(client, SEARCH, {"query": "cache"})
        unavailable = await error(client, SEARCH, {"query": "cache", "scope": {"kind": "global"}})
        asked = await error(client, SEARCH, {"query": "cache", "scope": {"kind": "projects", "projectIds": ["atlas"]}})
        # An entry of readable_scopes is still a scope argument as it stands.
        fixed = await ok(client, SEARCH, {"query": "cache", "scope": required["readable_scopes"][-1]})
    assert everyone["project_names"] == {"atlas": ATLAS, "beacon": BEACON, UUID: "Cobalt"}
    assert f'{{"kind":"projects","projectIds":["beacon"]}} ({BEACON})' in everyone["next_step"]
    assert f'{{"kind":"projects","projectIds":["{UUID}"]}} (Cobalt)' in everyone["next_step"]
    assert required["readable_scopes"] == [UUID_SCOPE, {"kind": "projects", "projectIds": ["beacon"]}]  # by id
    assert required["project_names"] == {"beacon": BEACON, UUID: "Cobalt"}
    assert required["next_step"].endswith(
        f'Scopes this client can read: {{"kind":"projects","projectIds":["{UUID}"]}} (Cobalt), '
        f'{{"kind":"projects","projectIds":["beacon"]}} ({BEACON}); a project set of readable projects is a scope too '
        "(work they share is stored there), though none holds data now."
    )
    # Its example was {Cobalt, Beacon} (the first two readable projects), where nothing is stored; a set holding data
    # is the example now: {atlas, beacon} for a caller reading both.
    assert everyone["next_step"].endswith(
        f'e.g. {{"kind":"projects","projectIds":["atlas","beacon"]}} ({ATLAS}, {BEACON}).'
    )
    # The grant alone decides what is named: never Atlas (not granted) nor the inactive Legacy importer.
    for refused in (required, unavailable, asked):
        assert refused["project_names"] == required["project_names"]
        assert ATLAS not in str(refused) and "Legacy importer" not in str(refused)
    assert fixed["project_names"] == {"beacon": BEACON}


async def test_hints_naming_where_an_object_is_stored_name_its_projects(demo: Path) -> None:
    async with client_for(demo, Grant(default_project=None)) as client:
        required = await error(client, CONTEXT, {"object_ref": {"type": "story_line", "id": "sl-beacon-sync"}})
        required_source = await error(client, SOURCE, {"source_reference_id": "ref-beacon-sync-1"})
    async with client_for(demo) as client:  # current project atlas
        mismatch = await error(client, CONTEXT, {"object_ref": {"type": "story_line", "id": "sl-beacon-sync"}})
        mismatch_source = await error(client, SOURCE, {"source_reference_id": "ref-beacon-sync-1"})
        nothing = await ok(client, SEARCH, {"query": "edge box infrastructure", "object_types": ["experience"]})
    named = f'{{"kind":"projects","projectIds":["beacon"]}} ({BEACON})'
    assert required["next_step"].startswith(
        f'object_ref {{"type":"story_line","id":"sl-beacon-sync"}} is stored in scope {named}: call again with '
        '"scope": {"kind":"projects","projectIds":["beacon"]}.'
    )
    assert required_source["next_step"].startswith(f"source reference 'ref-beacon-sync-1' is stored in scope {named}:")
    assert mismatch["error"] == mismatch_source["error"] == "scope_mismatch"
    assert mismatch["next_step"].startswith(f"Repeat with scope {named}, or search")
    assert mismatch_source["next_step"].startswith(f"Repeat with scope {named}, or search")
    assert nothing["no_match_note"].endswith(
        f'Only this scope was searched; other scopes this client can read: {{"kind":"global"}}, '
        f'{{"kind":"projects","projectIds":["{UUID}"]}} (Cobalt), {named}, and project sets holding shared work: '
        f'{{"kind":"projects","projectIds":["atlas","beacon"]}} ({ATLAS}, {BEACON}).'
    )


async def test_names_are_capped_and_their_map_fits_its_byte_budget(tmp_path: Path) -> None:
    """A name is stored free text: one of 300,000 characters, or 40 projects of long names that are each a run of
    6-byte JSON escapes, must not fill a response or an error."""
    db = demo_db(tmp_path)
    long = "\x01" * 300_000
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE projects SET name = ? WHERE id = 'atlas'", (long,))
        conn.executemany("INSERT INTO projects (id, name) VALUES (?, ?)", [(f"p{i:03d}", long) for i in range(40)])
    many = {"kind": "projects", "projectIds": [f"p{i:03d}" for i in range(40)]}
    async with client_for(db) as client:
        search = await ok(client, SEARCH, {"query": "cache"})
        wide = await ok(client, SEARCH, {"query": "cache", "scope": many})
    async with client_for(db, Grant(default_project=None)) as client:
        refused = await error(client, SEARCH, {"query": "cache"})
    assert search["project_names"] == {"atlas": "\x01" * (COVERAGE_TEXT_LIMIT - 1) + "…"}
    assert refused["project_names"]["beacon"] == BEACON
    capped = "\x01" * (COVERAGE_TEXT_LIMIT - 1) + "…"
    for names in (wide["project_names"], refused["project_names"]):
        assert 0 < len(names) < 40 and _size(names) <= PROJECT_NAMES_BYTES
        assert all(name == capped for pid, name in names.items() if pid != "beacon")
    assert list(wide["project_names"]) == [f"p{i:03d}" for i in range(len(wide["project_names"]))]
    assert len(orjson.dumps(refused)) < 3 * PROJECT_NAMES_BYTES + 8_000


def _size(value: Any) -> int:
    return len(orjson.dumps(value))


async def test_a_name_with_a_line_break_keeps_an_error_text_one_sentence_line_and_one_payload_line(
    tmp_path: Path,
) -> None:
    db = demo_db(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE projects SET name = 'Beacon\nmobile  app' WHERE id = 'beacon'")
    async with client_for(db, Grant(default_project=None)) as client:
        result = await client.call_tool(SEARCH, {"query": "cache"})
    text = result.content[0].text  # type: ignore[union-attr]
    first, payload = text.split("\n")
    assert f'{{"kind":"projects","projectIds":["beacon"]}} ({BEACON})' in first
    assert orjson.loads(payload)["project_names"]["beacon"] == "Beacon\nmobile  app"
