"""Security review over real HTTP on loopback: what a client with a narrow grant can learn about what lies outside
it. Each test starts its own server on a free loopback port (tests/http_support.py) and reads with a real MCP
client holding a bearer token."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx2
import pytest
from http_support import TOKENS, http_client, http_server, policy_text, write_secret
from support import demo_db, error, ok

pytestmark = pytest.mark.anyio

READ = "story_graph_read_source"
CONTEXT = "story_graph_get_context"


def serve_args(db: Path, policy: Path, secret: Path) -> list[str]:
    return ["--db", str(db), "--policy", str(policy), "--cursor-secret-file", str(secret)]


async def test_a_source_outside_the_scope_changes_nothing_a_snapshot_read_shows(tmp_path: Path) -> None:
    """ref-moved-msg is saved in atlas; its source now lives in beacon, which this client may not read. Edits to
    that source over there (a new version, another status, a move to another project it cannot read) must not
    show in anything its snapshot read answers: object_revision was a digest of the source's project, status,
    current version and update time, so an atlas-only client could watch beacon's source change."""
    db = demo_db(tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text(clients={"alpha": {"projects": ["atlas"], "default_project": "atlas"}}))
    secret = write_secret(tmp_path)
    args = {"source_reference_id": "ref-moved-msg"}

    def change_source(sql: str) -> None:
        with sqlite3.connect(db) as conn:
            conn.execute(sql)

    async with (
        http_server(serve_args(db, policy, secret), tmp_path) as server,
        http_client(server.url, TOKENS["alpha"]) as alpha,
    ):
        before = await ok(alpha, READ, args)
        assert before["original_source_availability"] == "outside_scope"
        answers = []
        for sql in (
            "UPDATE sources SET current_version = 'v-elsewhere', updated_at = '2031-01-01T00:00:00Z'"
            " WHERE id = 'src-moved-msg'",
            "UPDATE sources SET status = 'deleted' WHERE id = 'src-moved-msg'",
            "UPDATE sources SET project_id = 'legacy' WHERE id = 'src-moved-msg'",
        ):
            change_source(sql)
            answers.append(await ok(alpha, READ, args))
        # Moved into the client's own project, it is its business again: the revision says so.
        change_source("UPDATE sources SET project_id = 'atlas', status = 'available' WHERE id = 'src-moved-msg'")
        back = await ok(alpha, READ, args)
    for after in answers:
        assert {k: v for k, v in after.items() if k != "read_at"} == {k: v for k, v in before.items() if k != "read_at"}
    assert back["original_source_availability"] == "available"
    assert back["object_revision"] != before["object_revision"]


async def test_a_path_cannot_write_a_line_of_its_own_into_the_access_log(tmp_path: Path) -> None:
    """The access line showed the percent-decoded path as it came, from anyone (no token needed): `%0A` started a
    forged access line (here one claiming client 'admin' read /mcp) and `%1B` sent terminal escapes."""
    db = demo_db(tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text(clients={"alpha": {"projects": ["atlas"]}}))
    forged = "2026-01-01 00:00:00,000 INFO [1] story_graph_mcp.access: 10.0.0.1 admin POST /mcp 200 1.0ms"
    async with (
        http_server(serve_args(db, policy, write_secret(tmp_path)), tmp_path) as server,
        httpx2.AsyncClient() as http,
    ):
        for path in (f"/x%0A{forged}%1B[31m", f"/mcp%0D%0A{forged}"):
            refused = await http.post(server.base + path.replace(" ", "%20"))
            assert refused.status_code in (401, 404)
    lines = server.output().splitlines()
    assert not any(line.startswith(forged[:19]) for line in lines)
    assert "\x1b" not in server.output()
    access = [line for line in lines if " story_graph_mcp.access: " in line and "/healthz" not in line]
    assert len(access) == 2
    assert " POST /x\\x0a2026-01-01\\x20" in access[0] and " 404 " in access[0]
    assert " POST /mcp\\x0d\\x0a2026-01-01\\x20" in access[1]


async def test_a_prompt_or_resource_request_is_refused_without_a_traceback_or_its_name_in_the_log(
    tmp_path: Path,
) -> None:
    """The server has no prompts and no resources; the SDK answered prompts/get with an exception its dispatcher
    logged as an ERROR with a traceback ending in the name as sent (a token holder filled the log with tracebacks at
    will, and a name with a newline in it wrote a line of its own), and logged resources/read's URI as sent. Neither
    method is served now: Method not found, and nothing of the request in the log."""
    db = demo_db(tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text(clients={"beta": {"projects": ["beacon"]}}))
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
        "Authorization": f"Bearer {TOKENS['beta']}",
    }
    prompt = {"jsonrpc": "2.0", "id": 7, "method": "prompts/get", "params": {"name": "x\nFORGED LINE"}}
    resource = {"jsonrpc": "2.0", "id": 8, "method": "resources/read", "params": {"uri": "file:///x\nFORGED LINE"}}
    async with (
        http_server(serve_args(db, policy, write_secret(tmp_path)), tmp_path) as server,
        httpx2.AsyncClient() as http,
    ):
        answers = [
            (await http.post(server.url, json=request, headers=headers)).json() for request in (prompt, resource)
        ]
    assert [answer["id"] for answer in answers] == [7, 8]
    assert [answer["error"]["code"] for answer in answers] == [-32601, -32601]  # Method not found
    assert "FORGED" not in str(answers)
    output = server.output()
    assert "FORGED" not in output and "Traceback" not in output and " ERROR " not in output


async def test_a_cursor_reads_only_what_the_grant_of_whoever_sends_it_allows(tmp_path: Path) -> None:
    """Cursors bind tool, request, scope, revision and position, not the client: one that reaches another client
    (pasted into another agent's context, say) is checked against that client's own grant on every page, and the
    refusal is the one any scope outside the grant gets, naming only what the sender may read."""
    db = demo_db(tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text(
        policy_text(
            clients={
                "alpha": {"projects": ["atlas", "beacon"], "default_project": "atlas"},
                "beta": {"projects": ["beacon"]},
            }
        )
    )
    beacon = {"kind": "projects", "projectIds": ["beacon"]}
    async with http_server(serve_args(db, policy, write_secret(tmp_path)), tmp_path) as server:
        async with http_client(server.url, TOKENS["alpha"]) as alpha:
            atlas_page = await ok(alpha, "story_graph_search", {"query": "session", "page_size": 1})
            beacon_page = await ok(alpha, "story_graph_search", {"query": "session", "page_size": 1, "scope": beacon})
        async with http_client(server.url, TOKENS["beta"]) as beta:
            replayed = await error(
                beta, "story_graph_search", {"query": "session", "cursor": atlas_page["page"]["next_cursor"]}
            )
            unknown = await error(
                beta,
                "story_graph_search",
                {"query": "session", "scope": {"kind": "projects", "projectIds": ["no-such-project"]}},
            )
            # A cursor of a scope beta may read pages on for beta too: it reads nothing beta could not ask for.
            own = await ok(
                beta, "story_graph_search", {"query": "session", "cursor": beacon_page["page"]["next_cursor"]}
            )
    assert atlas_page["page"]["next_cursor"] and replayed["error"] == "scope_unavailable"
    assert {k: v for k, v in replayed.items() if k != "field"} == {k: v for k, v in unknown.items() if k != "field"}
    assert "atlas" not in str(replayed)
    assert own["resolved_scope"] == beacon


async def test_a_grant_kept_out_of_global_does_not_see_its_memory_items(tmp_path: Path) -> None:
    """`allow_global = false` (the default for HTTP clients) kept a client out of the Global scope, yet get_context
    showed it the Global memory items (the user's confirmed preferences) as background in every scope. Now only a
    grant that reads Global sees them, also when another client's call of the same object was remembered first."""
    db = demo_db(tmp_path)
    policy = tmp_path / "policy.toml"
    atlas = {"projects": ["atlas"], "default_project": "atlas"}
    policy.write_text(
        policy_text(clients={"alpha": {**atlas, "allow_global": True}, "beta": {**atlas, "allow_global": False}})
    )
    decision = {"object_ref": {"type": "entity", "id": "ent-decision-b"}, "page_size": 50}
    async with http_server(serve_args(db, policy, write_secret(tmp_path)), tmp_path) as server:
        seen = {}
        for client_id in ("alpha", "beta", "alpha"):
            async with http_client(server.url, TOKENS[client_id]) as client:
                page = await ok(client, "story_graph_get_context", decision)
            seen[client_id] = ({m["memory_id"] for m in page["background"]}, page["header"]["background_count"])
    assert seen["alpha"] == ({"mem-global-answer-style", "mem-atlas-boring-tech"}, 2)
    assert seen["beta"] == ({"mem-atlas-boring-tech"}, 1)


async def test_a_global_memory_write_stales_only_the_cursors_of_a_grant_that_reads_global(tmp_path: Path) -> None:
    """A write to a Global memory item bumped every scope's memory revision (migrations/0015), and get_context's
    `current` cursors are bound to it: a client kept out of Global (beta), which never sees a Global item, got
    `stale_cursor` whenever the user wrote a Global note, and so learnt that and when Global memory changed. Now
    (migrations/0016) only alpha, which reads Global, is affected; a write to their scope's own memory item stales
    both. Each sees the memory revision it is bound to, beta's without the Global part."""
    db = demo_db(tmp_path)
    policy = tmp_path / "policy.toml"
    atlas = {"projects": ["atlas"], "default_project": "atlas"}
    policy.write_text(
        policy_text(clients={"alpha": {**atlas, "allow_global": True}, "beta": {**atlas, "allow_global": False}})
    )
    decision = {"object_ref": {"type": "entity", "id": "ent-decision-b"}, "page_size": 1}

    def write(sql: str) -> None:
        with sqlite3.connect(db) as conn:
            conn.execute(sql)

    async with (
        http_server(serve_args(db, policy, write_secret(tmp_path)), tmp_path) as server,
        http_client(server.url, TOKENS["alpha"]) as alpha,
        http_client(server.url, TOKENS["beta"]) as beta,
    ):
        alpha_first, beta_first = await ok(alpha, CONTEXT, decision), await ok(beta, CONTEXT, decision)
        write("UPDATE memory_items SET body = 'Answer briefly' WHERE id = 'mem-global-answer-style'")
        alpha_stale = await error(alpha, CONTEXT, decision | {"cursor": alpha_first["page"]["next_cursor"]})
        beta_next = await ok(beta, CONTEXT, decision | {"cursor": beta_first["page"]["next_cursor"]})
        alpha_again, beta_again = await ok(alpha, CONTEXT, decision), await ok(beta, CONTEXT, decision)
        write("UPDATE memory_items SET body = 'Prefer boring tech' WHERE id = 'mem-atlas-boring-tech'")
        both_stale = [
            await error(client, CONTEXT, decision | {"cursor": page["page"]["next_cursor"]})
            for client, page in ((alpha, alpha_again), (beta, beta_next))
        ]
        beta_after = await ok(beta, CONTEXT, decision)
    assert alpha_stale["error"] == "stale_cursor"
    assert [e["error"] for e in both_stale] == ["stale_cursor", "stale_cursor"]
    assert beta_next["page"]["returned_count"] == 1
    # The data revision never moved; the memory revision each is shown moved exactly when its cursors went stale.
    pages = [alpha_first, beta_first, beta_next, alpha_again, beta_again, beta_after]
    assert {page["data_revision"] for page in pages} == {alpha_first["data_revision"]}
    assert alpha_again["memory_revision"] != alpha_first["memory_revision"]
    assert beta_first["memory_revision"] == beta_next["memory_revision"] == beta_again["memory_revision"]
    assert beta_after["memory_revision"] != beta_again["memory_revision"]
    # beta is shown one number, its scope's own; alpha that and the Global items' revision.
    assert ":" not in beta_first["memory_revision"]
    assert alpha_first["memory_revision"].startswith(beta_first["memory_revision"] + ":")
