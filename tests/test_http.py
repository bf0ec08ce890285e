"""Streamable HTTP against real uvicorn processes on free loopback ports, started and stopped by each test:
bearer tokens and 401s, Host/Origin checks, /healthz, per-client grants and switches, the one-run token,
and statelessness (a cursor from one process is accepted by another sharing the secret; several workers)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
import orjson
import pytest
import uvicorn
from http_support import (
    PYTHON,
    SECRET,
    TOKENS,
    HttpServer,
    free_port,
    http_client,
    http_server,
    policy_text,
    server_env,
    write_secret,
)
from mcp import Client, MCPError
from support import demo_db, error, error_payload, ok

from server.cli import _parser
from server.http import build_http_app
from server.http_requests import REASON_SHOWN, _error_head, _quotable
from server.policy import Policy, PolicyFile, hash_token
from server.settings import STORY_GRAPH_PORT_IGNORED, ServeSettings
from server.tools import TOOLS

pytestmark = pytest.mark.anyio

STORY_TOOLS = {spec.name for spec in TOOLS}
ATLAS = {"kind": "projects", "projectIds": ["atlas"]}
BEACON = {"kind": "projects", "projectIds": ["beacon"]}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
JSON_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


def write_policy(path: Path, *, server_on: bool = True, alpha_on: bool = True) -> Path:
    text = policy_text(
        enabled=server_on,
        clients={
            "alpha": {"projects": ["atlas", "beacon"], "default_project": "atlas", "enabled": alpha_on},
            "beta": {"projects": ["beacon"]},
        },
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    return demo_db(tmp_path), write_policy(tmp_path / "policy.toml"), write_secret(tmp_path)


def another_secret(tmp_path: Path) -> Path:
    (tmp_path / "other").mkdir()
    return write_secret(tmp_path / "other", "another-cursor-secret-" + "x" * 20)


def serve_args(db: Path, policy: Path, secret: Path, *extra: str) -> list[str]:
    return ["--db", str(db), "--policy", str(policy), "--cursor-secret-file", str(secret), *extra]


async def listed(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools} & STORY_TOOLS


async def assert_pages_across_connections(url: str, query: dict[str, Any]) -> None:
    """Walk every page of a search with a new client (a new connection) per page, as behind a load balancer:
    the pages may land on different worker processes, and each accepts the others' cursors."""
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        async with http_client(url, TOKENS["alpha"]) as client:
            page = await ok(client, "story_graph_search", {**query, **({"cursor": cursor} if cursor else {})})
        pages.append(page)
        cursor = page["page"]["next_cursor"]
        if cursor is None:
            break
    assert len(pages) > 2 and all(p["resolved_scope"] == ATLAS for p in pages)


def assert_no_secrets_logged(server: HttpServer, *secrets: str) -> None:
    output = server.output()
    for secret in secrets:
        assert secret not in output


def test_http_binds_loopback_by_default() -> None:
    args = _parser().parse_args(["serve", "--transport", "http", "--db", "x.db"])
    settings = ServeSettings.from_args(args, Path("x.db"), None)
    assert (settings.http.host, settings.http.port) == ("127.0.0.1", 8765)


DISCOVERY_PATHS = (
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
)
"""Where an OAuth client (the MCP Inspector, the TypeScript SDK) looks after a 401 on /mcp."""


def assert_refused_with_the_fix(refused: httpx2.Response, fix: str) -> None:
    """A 401 that says what to send and points at no OAuth metadata, in its header and its body alike."""
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert "resource_metadata" not in challenge, "no metadata is served, so none is named"
    body = refused.json()
    description = body["error"]["message"]
    assert (body["jsonrpc"], body["error"]["data"]) == ("2.0", {"error": "invalid_token"})
    assert fix in description and "there is no OAuth authorization server" in description
    assert f'error_description="{description}"' in challenge


@pytest.mark.parametrize("public_url", [None, "https://mcp.example.test/story/mcp"])
async def test_a_401_says_to_send_the_operators_token_and_no_oauth_metadata_is_served(
    tmp_path: Path, public_url: str | None
) -> None:
    """There is no OAuth authorization server: tokens come from the operator. So no protected-resource metadata
    (RFC 9728) is served, whose MCP form must name an authorization server (it named this origin, where clients
    then found no OAuth endpoints and reported an OAuth error), the 401 names none, and it says what to send."""
    db, policy, secret = setup(tmp_path)
    args = serve_args(db, policy, secret, *(["--public-url", public_url] if public_url else []))
    async with http_server(args, tmp_path) as server, httpx2.AsyncClient() as http:
        send_token = "send the token this server's operator issued you as the header 'Authorization: Bearer <token>'"
        assert_refused_with_the_fix(await http.post(server.url, json=LIST, headers=JSON_HEADERS), send_token)
        assert_refused_with_the_fix(await http.get(server.url), send_token)  # every method: the same answer
        basic = {**JSON_HEADERS, "Authorization": "Basic YWxwaGE6eA=="}
        assert_refused_with_the_fix(await http.post(server.url, json=LIST, headers=basic), send_token)
        for wrong in ("sgm_wrong", hash_token(TOKENS["alpha"])):
            unknown = {**JSON_HEADERS, "Authorization": f"Bearer {wrong}"}
            refused = await http.post(server.url, json=LIST, headers=unknown)
            assert_refused_with_the_fix(refused, "this bearer token is not accepted (unknown or revoked)")
        paths = [*DISCOVERY_PATHS, "/.well-known/oauth-protected-resource/story/mcp"]
        for path in paths:
            assert (await http.get(f"{server.base}{path}")).status_code == 404, path
        alpha = {**JSON_HEADERS, "Authorization": f"Bearer {TOKENS['alpha']}"}
        assert (await http.post(server.url, json=LIST, headers=alpha)).status_code == 200
        # What the Python SDK client shows its user (it read no fix from the old OAuth-style body: "Server returned
        # an error response").
        for token, fix in ((None, send_token), ("sgm_wrong", "this bearer token is not accepted")):
            with pytest.RaisesGroup(pytest.RaisesExc(MCPError, match=re.escape(fix)), flatten_subgroups=True):
                async with http_client(server.url, token):
                    pass


async def test_a_refused_call_names_the_token_it_sent_by_its_hash_in_the_access_line(tmp_path: Path) -> None:
    """After a token is rotated out of the policy, the operator needs to see who still sends it: every refused
    access line showed the client as '-' alike. It now ends with `token=none` or the first hex digits of the sent
    token's sha256 (what `policy hash-token` prints and the policy lists); the token itself is never logged."""
    db, policy, secret = setup(tmp_path)
    revoked = "sgm_revoked_0123456789abcdef"
    async with http_server(serve_args(db, policy, secret), tmp_path) as server, httpx2.AsyncClient() as http:
        assert (await http.post(server.url, json=LIST, headers=JSON_HEADERS)).status_code == 401
        sent = {**JSON_HEADERS, "Authorization": f"Bearer {revoked}"}
        assert (await http.post(server.url, json=LIST, headers=sent)).status_code == 401
        alpha = {**JSON_HEADERS, "Authorization": f"Bearer {TOKENS['alpha']}"}
        assert (await http.post(server.url, json=LIST, headers=alpha)).status_code == 200
    access = [line for line in server.output().splitlines() if "story_graph_mcp.access:" in line]
    assert any(re.search(r" - POST /mcp 401 \S+ms token=none$", line) for line in access), access
    shown = f" - POST /mcp 401 \\S+ms token=sha256:{hash_token(revoked)[:8]}$"
    assert any(re.search(shown, line) for line in access), access
    assert any(re.search(r" alpha POST /mcp 200 \S+ms$", line) for line in access), access
    assert revoked not in server.output()


class CountingPolicy:
    """A real policy file, counting how often a bearer token is checked against it (`last_good` is read only for
    that: the tools read `current`)."""

    def __init__(self, path: Path) -> None:
        self.file = PolicyFile(path)
        self.token_checks = 0

    def current(self) -> Policy | None:
        return self.file.current()

    def last_good(self) -> Policy:
        self.token_checks += 1
        return self.file.last_good()

    def broken(self) -> bool:
        return self.file.broken()


@asynccontextmanager
async def in_process_server(settings: ServeSettings, policy: CountingPolicy) -> AsyncIterator[str]:
    """The app `serve --transport http` runs, served by uvicorn in this process on a free loopback port (so the test
    can read the policy's counter); yields the /mcp URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(build_http_app(settings, policy), log_config=None, access_log=False)
        server = uvicorn.Server(config)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(server.serve, [sock])
            with anyio.fail_after(30):
                while not server.started:  # noqa: ASYNC110 - uvicorn's Server has no event to wait on
                    await anyio.sleep(0.01)
            try:
                yield f"http://127.0.0.1:{port}/mcp"
            finally:
                server.should_exit = True


async def test_a_bearer_token_is_checked_once_per_request(tmp_path: Path) -> None:
    """McpGate is the one place a token is checked: the SDK's own bearer middleware checked it a second time on every
    request (a stat of the policy file, a sha256 and a lookup), for nothing. The grant still reaches the tools."""
    db, policy_path, _ = setup(tmp_path)
    policy = CountingPolicy(policy_path)
    settings = ServeSettings(db=db, policy=policy_path, cursor_secret=SECRET.encode())
    alpha = {**JSON_HEADERS, "Authorization": f"Bearer {TOKENS['alpha']}"}
    search = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    search["params"] = {"name": "story_graph_search", "arguments": {"query": "session cache"}}
    async with in_process_server(settings, policy) as url, httpx2.AsyncClient() as http:
        requests = [
            http.post(url, json=LIST, headers=alpha),
            http.post(url, json=search, headers=alpha),
            http.get(url, headers=alpha),
            http.post(url, json=LIST, headers={**JSON_HEADERS, "Authorization": "Bearer sgm_wrong"}),
        ]
        answers = [await request for request in requests]
        assert [answer.status_code for answer in answers] == [200, 200, 405, 401]
        found = answers[1].json()["result"]["structuredContent"]
        assert found["resolved_scope"] == ATLAS, "alpha's grant (its default project) reached the tool"
        assert policy.token_checks == len(requests)
        assert (await http.post(url, json=LIST, headers=JSON_HEADERS)).status_code == 401
        assert policy.token_checks == len(requests), "no token: nothing to check"


async def test_mcp_with_a_trailing_slash_is_the_same_endpoint_behind_the_same_token_check(tmp_path: Path) -> None:
    """`/mcp/` answered 307 (a redirect to `/mcp`) before the token was checked, so a request without a token learned
    that the endpoint exists, and MCP clients follow a redirected POST badly. Now it is `/mcp`: 401 without a valid
    token, served with one; the access line shows the path the client sent."""
    db, policy, secret = setup(tmp_path)
    async with http_server(serve_args(db, policy, secret), tmp_path) as server, httpx2.AsyncClient() as http:
        url = f"{server.url}/"
        send_token = "'Authorization: Bearer <token>'"
        assert_refused_with_the_fix(await http.post(url, json=LIST, headers=JSON_HEADERS), send_token)
        wrong = {**JSON_HEADERS, "Authorization": "Bearer sgm_wrong"}
        assert_refused_with_the_fix(await http.post(url, json=LIST, headers=wrong), "is not accepted")
        alpha = {**JSON_HEADERS, "Authorization": f"Bearer {TOKENS['alpha']}"}
        listing = await http.post(url, json=LIST, headers=alpha)
        assert listing.status_code == 200 and "location" not in listing.headers
        assert {t["name"] for t in listing.json()["result"]["tools"]} == STORY_TOOLS
        assert (await http.get(url, headers=alpha)).status_code == 405
        assert (await http.post(f"{server.url}/other", json=LIST, headers=alpha)).status_code == 404
        async with http_client(url, TOKENS["alpha"]) as client:  # an MCP client configured with the slash
            assert (await ok(client, "story_graph_search", {"query": "session cache"}))["resolved_scope"] == ATLAS
    access = [line for line in server.output().splitlines() if "story_graph_mcp.access:" in line]
    assert any(re.search(r" - POST /mcp/ 401 \S+ms token=none$", line) for line in access), access
    assert any(" alpha POST /mcp/ 200 " in line for line in access), access
    assert not any(" 307 " in line for line in access), access


async def test_tokens_host_origin_and_health(tmp_path: Path) -> None:
    db, policy, secret = setup(tmp_path)
    extra = ["--allowed-host", "mcp.example.test", "--allowed-origin", "https://agents.example.test"]
    async with http_server(serve_args(db, policy, secret, *extra), tmp_path) as server, httpx2.AsyncClient() as http:
        health = await http.get(f"{server.base}/healthz")
        assert health.status_code == 200 and health.json() == {"status": "ok", "database": "readable"}
        # No Host check on /healthz, on purpose (docs/deployment.md): probes name the server by its address.
        probed = await http.get(f"{server.base}/healthz", headers={"Host": "10.1.2.3:8765"})
        assert probed.status_code == 200 and probed.json() == health.json()

        for headers in ({}, {"Authorization": "Bearer sgm_wrong"}, {"Authorization": f"Bearer {hash_token('x')}"}):
            refused = await http.post(server.url, json=LIST, headers={**JSON_HEADERS, **headers})
            assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer ")

        alpha = {**JSON_HEADERS, "Authorization": f"Bearer {TOKENS['alpha']}"}
        listing = await http.post(server.url, json=LIST, headers=alpha)
        assert listing.status_code == 200
        assert {t["name"] for t in listing.json()["result"]["tools"]} == STORY_TOOLS
        # DNS rebinding: unknown Host or Origin refused; the configured real names accepted
        assert (await http.post(server.url, json=LIST, headers={**alpha, "Host": "evil.example"})).status_code == 421
        bad_origin = {**alpha, "Origin": "https://evil.example"}
        assert (await http.post(server.url, json=LIST, headers=bad_origin)).status_code == 403
        for good in ({"Host": "mcp.example.test"}, {"Host": "mcp.example.test:8443"}):
            assert (await http.post(server.url, json=LIST, headers={**alpha, **good})).status_code == 200
        good_origin = {**alpha, "Origin": "https://agents.example.test"}
        assert (await http.post(server.url, json=LIST, headers=good_origin)).status_code == 200
        # loopback names are always allowed, with a port or without (port 80, or a local proxy's `Host: localhost`)
        for local in (
            {"Origin": f"http://localhost:{server.port}"},
            {"Origin": "http://localhost"},
            {"Host": "localhost"},
            {"Host": "127.0.0.1"},
            {"Host": "[::1]"},
        ):
            assert (await http.post(server.url, json=LIST, headers={**alpha, **local})).status_code == 200, local

        # /healthz says only whether the database is readable, and if not, why (no path)
        moved = db.with_name("moved.db")
        db.rename(moved)
        try:
            down = await http.get(f"{server.base}/healthz")
            assert down.status_code == 503
            assert down.json() == {
                "status": "unavailable",
                "database": "missing",
                "reason": "the database file is gone (deleted or moved) since the server opened it",
            }
        finally:
            moved.rename(db)
        assert (await http.get(f"{server.base}/healthz")).status_code == 200
    assert_no_secrets_logged(server, *TOKENS.values(), "sgm_wrong")


async def test_a_refused_request_says_what_to_fix_in_a_json_rpc_error(tmp_path: Path) -> None:
    """The SDK refused a request with a valid token in plain text (`Invalid Host header`) or with an empty body (406):
    an MCP client reads only a JSON-RPC error from a non-2xx answer (the Python SDK showed `Server returned an error
    response`), so neither the client nor its user learned the cause. Same statuses, now JSON-RPC with the fix."""
    db, policy, secret = setup(tmp_path)
    alpha = {**JSON_HEADERS, "Authorization": f"Bearer {TOKENS['alpha']}"}
    modern = {**alpha, "MCP-Protocol-Version": "2026-07-28", "Accept": "text/html"}
    accept = "'Accept: application/json, text/event-stream'"
    refusals = [
        ({**alpha, "Host": "evil.example"}, LIST, 421, "Invalid Host header", "--allowed-host"),
        ({**alpha, "Origin": "https://evil.example"}, LIST, 403, "Invalid Origin header", "--allowed-origin"),
        ({**alpha, "Content-Type": "text/plain"}, LIST, 400, "Invalid Content-Type header", "application/json"),
        (modern, LIST, 406, "Not Acceptable", accept),
        # Without MCP-Protocol-Version (curl, older clients) the SDK answers 406 with its own JSON-RPC error,
        # which named no fix and left the access line without a reason.
        ({**alpha, "Accept": "text/html"}, LIST, 406, "Not Acceptable", accept),
        (alpha, {**LIST, "padding": "x" * (4 * 2**20)}, 413, "Request body too large", "at most 4 MiB"),
    ]
    async with http_server(serve_args(db, policy, secret), tmp_path) as server, httpx2.AsyncClient() as http:
        for headers, message, status, said, fix in refusals:
            refused = await http.post(server.url, json=message, headers=headers)
            assert (refused.status_code, refused.headers["content-type"]) == (status, "application/json"), said
            error = refused.json()
            assert (error["jsonrpc"], error["id"], error["error"]["code"]) == ("2.0", None, -32600)
            assert error["error"]["message"].startswith(said) and fix in error["error"]["message"], error
        # What the Python SDK client shows its user: the cause and the fix.
        with pytest.RaisesGroup(pytest.RaisesExc(MCPError, match="--allowed-origin"), flatten_subgroups=True):
            async with http_client(server.url, TOKENS["alpha"], origin="https://evil.example"):
                pass
    # The access line says why (the SDK itself logs only a refused Host or Origin).
    access = [line for line in server.output().splitlines() if "story_graph_mcp.access:" in line]
    for _, _, status, said, _ in refusals:
        lines = [line for line in access if re.search(rf" alpha POST /mcp {status} \S+ms", line)]
        assert len(lines) >= [s for _, _, s, _, _ in refusals].count(status), access
        assert all(line.endswith(f' reason="{said}"') for line in lines), lines


async def test_every_refusal_of_a_valid_token_says_why_in_its_access_line(tmp_path: Path) -> None:
    """A body that is not JSON (200,000 levels of `[`, bytes that are not UTF-8, an empty body) was refused with 400 and
    an access line without a reason, unlike every other refusal; so were the SDK's other JSON-RPC refusals and the
    405. Each now ends with why, the error's name as the client got it."""
    db, policy, secret = setup(tmp_path)
    alpha = {**JSON_HEADERS, "Authorization": f"Bearer {TOKENS['alpha']}"}
    modern = {**alpha, "MCP-Protocol-Version": "2026-07-28"}
    parse_errors = [b"[" * 200_000, b'{"jsonrpc":"2.0","id":1,"method":"tools/list","x":"\xff"}', b"", b'{"jsonrpc":']
    async with http_server(serve_args(db, policy, secret), tmp_path) as server, httpx2.AsyncClient(timeout=60) as http:
        for body in parse_errors:
            refused = await http.post(server.url, content=body, headers=alpha)
            assert (refused.status_code, refused.json()["error"]["code"]) == (400, -32700), body[:20]
        for headers in (alpha, modern):  # the SDK's two transports: the handshake era's and 2026-07-28's
            assert (await http.post(server.url, content=b"[" * 200_000, headers=headers)).status_code == 400
        batch = await http.post(server.url, json=[LIST], headers=modern)
        assert (batch.status_code, batch.json()["error"]["code"]) == (400, -32600)
        assert (await http.get(server.url, headers=alpha)).status_code == 405
    access = [line for line in server.output().splitlines() if " alpha " in line and "story_graph_mcp.access:" in line]
    parse = [line for line in access if line.endswith(' reason="Parse error"')]
    assert len(parse) == len(parse_errors) + 2 and all(" POST /mcp 400 " in line for line in parse), access
    assert access[-2].endswith(' reason="Body must be a single JSON-RPC request or notification object"'), access
    assert access[-1].endswith(' reason="Method Not Allowed"') and " GET /mcp 405 " in access[-1], access
    assert len(access) == len(parse_errors) + 4 and all(" reason=" in line for line in access), access


def test_a_reason_from_an_error_message_cannot_break_the_access_line() -> None:
    """A JSON-RPC error's message may quote what the client sent: its head is shown with quotes, backslashes and
    control characters escaped, and cut short."""
    message = 'a "b"\\c\nd' + "x" * 200 + ": detail"
    head = _error_head(orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}))
    assert head is not None and len(head) == REASON_SHOWN and head.endswith("...")
    assert _quotable(head).startswith("a \\x22b\\x22\\x5cc\\x0ad") and "\n" not in _quotable(head)
    assert _error_head(b"not json") is None and _error_head(b'{"error": {"message": 3}}') is None


async def test_project_with_a_policy_over_http_is_said_to_have_no_effect(tmp_path: Path) -> None:
    """`serve --transport http --policy P --project beacon` served every client its grant's default project and
    dropped --project without a word: the log now says so at start."""
    db, policy, secret = setup(tmp_path)
    args = serve_args(db, policy, secret, "--project", "beacon")
    async with http_server(args, tmp_path) as server, http_client(server.url, TOKENS["alpha"]) as alpha:
        found = await ok(alpha, "story_graph_search", {"query": "session cache"})
    assert found["resolved_scope"] == ATLAS  # alpha's grant, not --project
    assert "--project 'beacon' has no effect over HTTP with --policy" in server.output()


async def test_a_wrong_path_is_answered_with_the_endpoint_to_use(tmp_path: Path) -> None:
    """A client given the server's root or an old SSE URL got Starlette's plain-text `Not Found`, which MCP clients
    report as a bare failure: the 404 is a JSON-RPC error naming /mcp."""
    db, policy, secret = setup(tmp_path)
    async with http_server(serve_args(db, policy, secret), tmp_path) as server, httpx2.AsyncClient() as http:
        root = server.url.removesuffix("/mcp")
        for path in ("/", "/sse", "/mcp/extra"):
            missing = await http.post(root + path, json=LIST, headers=JSON_HEADERS)
            assert (missing.status_code, missing.headers["content-type"]) == (404, "application/json"), path
            message = missing.json()["error"]["message"]
            assert message.startswith("Not Found: this server's MCP endpoint is /mcp"), message
        health = await http.get(root + "/healthz")
    assert health.status_code == 200 and health.headers["content-type"] == "application/json"
    assert any(re.search(r' POST /sse 404 \S+ms reason="Not Found"$', line) for line in server.output().splitlines())


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_each_client_reads_with_its_own_grant(tmp_path: Path, mode: str) -> None:
    db, policy, secret = setup(tmp_path)
    async with http_server(serve_args(db, policy, secret), tmp_path) as server:
        async with http_client(server.url, TOKENS["alpha"], mode) as alpha:
            found = await ok(alpha, "story_graph_search", {"query": "session cache"})
            assert found["requested_scope"] == "current_project" and found["resolved_scope"] == ATLAS
            assert (await ok(alpha, "story_graph_search", {"query": "s", "scope": BEACON}))["resolved_scope"] == BEACON
            glob = await error(alpha, "story_graph_search", {"query": "s", "scope": {"kind": "global"}})
            assert glob["error"] == "scope_unavailable"
            # the grant comes from the token, never from arguments
            smuggled = await error(alpha, "story_graph_search", {"query": "s", "grant": {"projects": "*"}})
            assert smuggled["error"] == "invalid_arguments"
        async with http_client(server.url, TOKENS["beta"], mode) as beta:
            required = await error(beta, "story_graph_search", {"query": "session"})
            assert required["error"] == "scope_required"
            # The next step names what the token's grant can read: beacon only, never atlas or Global.
            assert required["readable_scopes"] == [BEACON] and required["readable_scope_count"] == 1
            assert "atlas" not in str(required)
            other = await error(beta, "story_graph_search", {"query": "session", "scope": ATLAS})
            assert other["error"] == "scope_unavailable" and other["readable_scopes"] == [BEACON]
            assert (await ok(beta, "story_graph_search", {"query": "session", "scope": BEACON}))["items"]
    assert_no_secrets_logged(server, *TOKENS.values())


async def test_switches_per_client_and_for_the_server(tmp_path: Path) -> None:
    db, policy, secret = setup(tmp_path)
    search: dict[str, Any] = {"query": "session", "scope": BEACON}

    async def state(alpha: Client, beta: Client) -> tuple[bool, bool]:
        seen = []
        for client in (alpha, beta):
            tools = await listed(client)
            result = await client.call_tool("story_graph_search", search)
            assert (tools == STORY_TOOLS) is (not result.is_error)
            if result.is_error:
                assert error_payload(result)["error"] == "story_graph_unavailable"
            seen.append(not result.is_error)
        return seen[0], seen[1]

    async with (
        http_server(serve_args(db, policy, secret), tmp_path) as server,
        http_client(server.url, TOKENS["alpha"]) as alpha,
        http_client(server.url, TOKENS["beta"]) as beta,
    ):
        assert await state(alpha, beta) == (True, True)
        write_policy(policy, alpha_on=False)
        assert await state(alpha, beta) == (False, True), "one client off leaves the other on"
        write_policy(policy, server_on=False, alpha_on=False)
        assert await state(alpha, beta) == (False, False)
        write_policy(policy, server_on=True, alpha_on=False)
        assert await state(alpha, beta) == (False, True), "the server switch does not erase a client's own switch"
        write_policy(policy, server_on=False)
        assert await state(alpha, beta) == (False, False), "the server switch overrides every client"
        async with httpx2.AsyncClient() as http:
            health = f"{server.base}/healthz"
            assert (await http.get(health)).status_code == 200, "switched off on purpose is not a fault"
            broken = policy.with_suffix(".tmp")
            broken.write_text("version = 1\n[clients\n")  # a typo: every client refused until it is fixed
            broken.replace(policy)
            down = await http.get(health)
            assert down.status_code == 503 and down.json()["policy"] == "invalid", down.text
            assert str(policy) not in down.text and "clients" not in down.text  # the log says why, not this answer
            assert await state(alpha, beta) == (False, False)
            write_policy(policy)
            assert (await http.get(health)).status_code == 200
            assert await state(alpha, beta) == (True, True)
        write_policy(policy)
        assert await state(alpha, beta) == (True, True)
        found = await ok(alpha, "story_graph_search", {"query": "session cache"})
        assert found["resolved_scope"] == ATLAS, "the grant survived the switches unchanged"


async def test_a_cursor_from_one_process_is_accepted_by_another(tmp_path: Path) -> None:
    db, policy, secret = setup(tmp_path)
    other_secret = another_secret(tmp_path)
    query = {"query": "cache", "page_size": 5}
    async with (
        http_server(serve_args(db, policy, secret), tmp_path) as first,
        http_server(serve_args(db, policy, secret), tmp_path) as second,
        http_server(serve_args(db, policy, other_secret), tmp_path) as foreign,
        http_client(first.url, TOKENS["alpha"]) as a,
        http_client(second.url, TOKENS["alpha"]) as b,
        http_client(foreign.url, TOKENS["alpha"]) as c,
    ):
        page1 = await ok(a, "story_graph_search", query)
        cursor = page1["page"]["next_cursor"]
        from_a = await ok(a, "story_graph_search", {**query, "cursor": cursor})
        from_b = await ok(b, "story_graph_search", {**query, "cursor": cursor})
        assert {**from_a, "read_at": None} == {**from_b, "read_at": None}
        assert (await error(c, "story_graph_search", {**query, "cursor": cursor}))["error"] == "invalid_cursor"


async def test_without_a_policy_a_one_run_token_is_printed_once(tmp_path: Path) -> None:
    async with http_server(["--demo"], tmp_path) as server:
        stderr = server.log.read_text()
        tokens = re.findall(r"sgm_[A-Za-z0-9_-]{20,}", stderr)
        assert len(tokens) == 3 and len(set(tokens)) == 1, "the token line and two ready-to-paste commands"
        token = tokens[0]
        assert f"inspector@2.12.0 --transport http --server-url {server.url} --header" in stderr
        assert f"inspector@2.12.0 --cli {server.url} --transport http" in stderr
        assert f'--header "Authorization: Bearer {token}"' in stderr
        assert token not in server.out.read_text()
        async with httpx2.AsyncClient() as http:
            assert (await http.post(server.url, json=LIST, headers=JSON_HEADERS)).status_code == 401
        async with http_client(server.url, token) as client:
            found = await ok(client, "story_graph_search", {"query": "session cache"})
            assert found["resolved_scope"] == ATLAS, "the demo's main project is the default"
            assert (await ok(client, "story_graph_search", {"query": "a", "scope": {"kind": "global"}}))["items"]
        # the token is not repeated in anything logged afterwards
        assert server.log.read_text().count(token) == 3


async def test_several_workers_from_the_factory(tmp_path: Path) -> None:
    """`uvicorn --factory server.http:create_app --workers 2`: fresh connections land on either worker."""
    db, policy, secret = setup(tmp_path)
    env = {
        **server_env(),
        "STORY_GRAPH_DB": str(db),
        "STORY_GRAPH_POLICY": str(policy),
        "STORY_GRAPH_CURSOR_SECRET_FILE": str(secret),
    }
    command = [PYTHON, "-m", "uvicorn", "--factory", "server.http:create_app", "--host", "127.0.0.1"]
    command += ["--port", "{port}", "--workers", "2", "--log-level", "warning"]
    query: dict[str, Any] = {"query": "cache", "page_size": 5}
    async with http_server([], tmp_path, command=command, env=env) as server:
        await assert_pages_across_connections(server.url, query)
        async with httpx2.AsyncClient() as http:
            assert (await http.post(server.url, json=LIST, headers=JSON_HEADERS)).status_code == 401
    assert STORY_GRAPH_PORT_IGNORED not in server.output()


async def test_the_factory_says_that_story_graph_port_has_no_effect(tmp_path: Path) -> None:
    """uvicorn binds the port of its own --port; the factory cannot change it and needs none. The docs said to set
    STORY_GRAPH_PORT as well, and a factory given only STORY_GRAPH_PORT listened on uvicorn's default port without a
    word. It still starts (deployments set both), and says so."""
    db, policy, secret = setup(tmp_path)
    env = {
        **server_env(),
        "STORY_GRAPH_DB": str(db),
        "STORY_GRAPH_POLICY": str(policy),
        "STORY_GRAPH_CURSOR_SECRET_FILE": str(secret),
        "STORY_GRAPH_PORT": "9",
    }
    command = [PYTHON, "-m", "uvicorn", "--factory", "server.http:create_app", "--port", "{port}"]
    async with (
        http_server([], tmp_path, command=command, env=env) as server,
        http_client(server.url, TOKENS["alpha"]) as client,
    ):
        assert (await ok(client, "story_graph_search", {"query": "session cache"}))["resolved_scope"] == ATLAS
    assert server.output().count(STORY_GRAPH_PORT_IGNORED) == 1, server.output()


def test_serve_hands_its_workers_every_setting(tmp_path: Path) -> None:
    """`serve --workers N` builds each worker with the factory from the environment it sets: every option comes back
    as it was given (the port is the supervisor's own socket; the project has no effect over HTTP with a policy)."""
    db, policy, secret = setup(tmp_path)
    argv = ["serve", "--transport", "http", *serve_args(db, policy, secret), "--workers", "2", "--host", "10.0.0.7"]
    argv += ["--allowed-host", "mcp.example.test", "--allowed-host", "other.example.test:8443"]
    argv += ["--allowed-origin", "https://agents.example.test", "--public-url", "https://mcp.example.test/x/mcp"]
    argv += ["--busy-timeout", "0.25"]
    given = ServeSettings.from_args(_parser().parse_args(argv), db, None)
    with pytest.MonkeyPatch.context() as env:
        for name, value in given.worker_env().items():
            env.setenv(name, value)
        handed = ServeSettings.from_env()
    assert handed.http == replace(given.http, port=handed.http.port, workers=1)
    assert (handed.db, handed.policy, handed.cursor_secret_file) == (db, policy, secret)
    assert (handed.cursor_secret, handed.busy_timeout) == (given.cursor_secret, 0.25)


FRESH_CONNECTIONS = 32
"""Connections SO_REUSEPORT spreads over 2 workers: all on one worker has a chance of 2 in 2**32."""


async def test_serve_with_workers_pages_across_processes_and_names_its_own_port(tmp_path: Path) -> None:
    """`serve --transport http --workers 2`: the workers share the secret, the policy and the real port."""
    db, policy, secret = setup(tmp_path)
    query: dict[str, Any] = {"query": "cache", "page_size": 5}
    async with http_server(serve_args(db, policy, secret, "--workers", "2"), tmp_path) as server:
        await assert_pages_across_connections(server.url, query)
        async with httpx2.AsyncClient() as http:
            refused = await http.post(server.url, json=LIST, headers=JSON_HEADERS)
            assert_refused_with_the_fix(refused, "'Authorization: Bearer <token>'")
            for path in DISCOVERY_PATHS:
                assert (await http.get(f"{server.base}{path}")).status_code == 404, path
        for _ in range(FRESH_CONNECTIONS):
            async with httpx2.AsyncClient() as http:  # a new connection each: the kernel picks a worker for each
                assert (await http.get(f"{server.base}/healthz")).status_code == 200
    output = server.output()
    workers = {int(pid) for pid in re.findall(r"Started server process \[(\d+)\]", output)}
    assert len(workers) == 2, output
    # Every access line names the worker process that served it, and both workers served.
    access = re.findall(r"^\S+ \S+ INFO \[(\d+)\] story_graph_mcp\.access: ", output, re.MULTILINE)
    served = [int(pid) for pid in access]
    assert len(served) >= FRESH_CONNECTIONS and set(served) == workers, output
    assert f"serving on http://127.0.0.1:{server.port}/mcp with 2 worker processes" in server.output()


async def test_serve_with_workers_says_when_a_worker_died_and_when_all_serve_again(tmp_path: Path) -> None:
    """A worker killed (as the OOM killer does): the supervisor names it, how it ended and its replacement, then says
    once more that every worker serves, and the server answers on new connections."""
    db, policy, secret = setup(tmp_path)
    async with http_server(serve_args(db, policy, secret, "--workers", "2"), tmp_path) as server:
        with anyio.fail_after(60):
            while "with 2 worker processes" not in server.output():  # noqa: ASYNC110 - a log file, no event
                await anyio.sleep(0.05)
            victim = int(re.findall(r"Started server process \[(\d+)\]", server.output())[0])
            os.kill(victim, signal.SIGKILL)
            while "with 2 worker processes again" not in server.output():  # noqa: ASYNC110 - a log file, no event
                await anyio.sleep(0.05)
        output = server.output()
        replaced = re.search(rf"worker process {victim} was killed by SIGKILL; started worker process (\d+)", output)
        assert replaced is not None, output
        assert f"serving on http://127.0.0.1:{server.port}/mcp with 2 worker processes again" in output
        await assert_pages_across_connections(server.url, {"query": "cache", "page_size": 5})
        for _ in range(8):
            async with httpx2.AsyncClient() as http:
                assert (await http.get(f"{server.base}/healthz")).status_code == 200


@pytest.mark.parametrize(
    ("dropped", "message"),
    [("--policy", "--workers needs --policy"), ("--cursor-secret-file", "--workers needs --cursor-secret-file")],
)
def test_serve_with_workers_needs_a_policy_and_a_shared_secret(tmp_path: Path, dropped: str, message: str) -> None:
    db, policy, secret = setup(tmp_path)
    args = serve_args(db, policy, secret, "--workers", "2")
    at = args.index(dropped)
    del args[at : at + 2]
    done = subprocess.run(
        [PYTHON, "-m", "server", "serve", "--transport", "http", "--port", str(free_port()), *args],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("story-graph-mcp:")] == [
        next(line for line in done.stderr.splitlines() if message in line)
    ]


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("STORY_GRAPH_DB", "STORY_GRAPH_DB is not set"),
        ("STORY_GRAPH_CURSOR_SECRET_FILE", "set STORY_GRAPH_CURSOR_SECRET_FILE or STORY_GRAPH_CURSOR_SECRET"),
        ("STORY_GRAPH_POLICY", "STORY_GRAPH_POLICY is not set"),
    ],
)
def test_the_factory_without_a_setting_says_so_in_one_line(tmp_path: Path, missing: str, message: str) -> None:
    """`uvicorn --factory server.http:create_app` with a setting missing: one line, no traceback, and uvicorn's
    start-up failure status, so a multi-worker supervisor stops instead of restarting workers forever."""
    db, policy, secret = setup(tmp_path)
    env = {
        **server_env(),
        "STORY_GRAPH_DB": str(db),
        "STORY_GRAPH_POLICY": str(policy),
        "STORY_GRAPH_CURSOR_SECRET_FILE": str(secret),
    }
    del env[missing]
    command = [PYTHON, "-m", "uvicorn", "--factory", "server.http:create_app", "--port", str(free_port())]
    for workers in ("1", "2"):
        # It ends (timeout otherwise): 2 workers would be restarted forever on any other exit status.
        done = subprocess.run(
            [*command, "--workers", workers], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert "Traceback" not in done.stderr, done.stderr
        ours = {line for line in done.stderr.splitlines() if line.startswith("story-graph-mcp:")}
        assert len(ours) == 1 and message in ours.pop(), done.stderr
        if workers == "1":
            assert done.returncode == 3  # uvicorn's STARTUP_FAILURE (with workers, uvicorn's parent exits 0)


def test_the_factory_starts_with_its_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from server.http import create_app

    db, policy, secret = setup(tmp_path)
    monkeypatch.setenv("STORY_GRAPH_DB", str(db))
    monkeypatch.setenv("STORY_GRAPH_POLICY", str(policy))
    monkeypatch.setenv("STORY_GRAPH_CURSOR_SECRET_FILE", str(secret))
    monkeypatch.setenv("STORY_GRAPH_BUSY_TIMEOUT", "0.5")
    assert create_app() is not None
    monkeypatch.setenv("STORY_GRAPH_BUSY_TIMEOUT", "soon")
    with pytest.raises(SystemExit):
        create_app()


async def test_only_post_is_served_and_the_log_has_a_line_per_request_and_no_noise(tmp_path: Path) -> None:
    db, policy, secret = setup(tmp_path)
    alpha = {"Authorization": f"Bearer {TOKENS['alpha']}", "Accept": "application/json, text/event-stream"}
    async with http_server(serve_args(db, policy, secret), tmp_path) as server:
        async with httpx2.AsyncClient(timeout=10) as http:
            for method in ("GET", "DELETE", "PUT"):
                # With a valid token: 405 at once (a GET used to open an event stream that never closed).
                refused = await http.request(method, server.url, headers=alpha)
                assert refused.status_code == 405 and refused.headers["allow"] == "POST", method
                assert refused.json()["error"]["message"].startswith("Method Not Allowed")
                # Without one: 401, as for POST.
                assert (await http.request(method, server.url)).status_code == 401
            for _ in range(3):
                listing = await http.post(server.url, json=LIST, headers={**JSON_HEADERS, **alpha})
                assert listing.status_code == 200
        # A client that hangs up halfway through its request body.
        async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
            head = (
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {TOKENS['alpha']}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                'Content-Length: 1000\r\n\r\n{"jsonrpc":'
            )
            await stream.send(head.encode())
        async with http_client(server.url, TOKENS["alpha"]) as client:
            await error(client, "story_graph_search", {"query": "s", "scope": {"kind": "global"}})
            write_policy(policy, alpha_on=False)
            await error(client, "story_graph_search", {"query": "s"})
        await anyio.sleep(0.5)
    log = server.log.read_text()
    access = [line for line in log.splitlines() if "story_graph_mcp.access:" in line]
    assert sum(" alpha GET /mcp 405 " in line for line in access) == 1
    assert sum(" - GET /mcp 401 " in line for line in access) == 1
    assert sum(" alpha POST /mcp 200 " in line for line in access) >= 3 + 3  # 3 lists, 1+ per client call
    assert "Terminating session" not in log
    assert "Traceback" not in log and "client disconnected before sending the whole request" in log
    assert "story_graph_search refused for alpha: scope_unavailable" in log
    assert "story_graph_search refused for alpha: story_graph_unavailable" in log  # switched off: still named
    assert "policy reloaded from" in log and "switched off: alpha" in log
    assert server.out.read_text() == "", "stdout stays empty; every log line goes to stderr"
    assert_no_secrets_logged(server, *TOKENS.values(), hash_token(TOKENS["alpha"]))


def test_workers_are_for_http_only(tmp_path: Path) -> None:
    done = subprocess.run(
        [PYTHON, "-m", "server", "serve", "--db", str(demo_db(tmp_path)), "--workers", "2"],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "story-graph-mcp: --workers applies to --transport http" in done.stderr


def test_serve_with_workers_refuses_a_port_in_use(tmp_path: Path) -> None:
    """Each worker binds its own socket with SO_REUSEPORT; that must never share a port another server holds."""
    db, policy, secret = setup(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        command = [PYTHON, "-m", "server", "serve", "--transport", "http", "--port", str(port), "--workers", "2"]
        done = subprocess.run(
            [*command, *serve_args(db, policy, secret)],
            env=server_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"story-graph-mcp: cannot listen on 127.0.0.1:{port}:" in done.stderr


def test_serve_refuses_a_port_in_use_before_it_prints_a_token(tmp_path: Path) -> None:
    """One process without --policy prints a one-run token and Inspector commands: never for a server that cannot
    start (uvicorn used to bind only after them, then logged `address already in use` and exited 3)."""
    db, _, _ = setup(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            [PYTHON, "-m", "server", "serve", "--transport", "http", "--port", str(port), "--db", str(db)],
            env=server_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"story-graph-mcp: cannot listen on 127.0.0.1:{port}: Address already in use"
