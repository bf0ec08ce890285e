"""Streamable HTTP: the same server as stdio behind bearer tokens, Host/Origin checks and a health route.

Stateless (`stateless_http=True`, `json_response=True`): no session lives in a process, so any number of
workers or replicas serve the same clients, and a cursor signed by one is accepted by another that shares
the cursor secret. `/mcp` requires a bearer token listed (hashed) in the policy and answers POST only (any
other method with a valid token is 405: there is no event stream); there is no OAuth authorization server, so
no OAuth metadata is served and a 401 says to send the operator's token; `/healthz` is public and says only
whether the policy file is valid and the database readable, and if not, why (locked, corrupt, missing,
replaced, unreadable).

`serve --transport http` runs one process. For several workers use the factory, configured from the
environment (docs/deployment.md)::

    STORY_GRAPH_DB=graph.db STORY_GRAPH_POLICY=policy.toml STORY_GRAPH_CURSOR_SECRET_FILE=secret \\
        uvicorn --factory server.http:create_app --host 127.0.0.1 --port 8765 --workers 4
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Final
from urllib.parse import urlsplit

import anyio.to_thread
import uvicorn
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp
from uvicorn.config import STARTUP_FAILURE

from server.app import StoryGraphServer, build_server
from server.http_connections import RequestHeadDeadline
from server.http_requests import MCP_PATH, AccessLog, McpGate, StopOnDisconnect
from server.jsonrpc_errors import MAX_MESSAGE_BYTES
from server.logs import configure_logging
from server.policy import (
    FixedPolicy,
    HttpPolicyAccess,
    PolicyFile,
    PolicySource,
    PolicyTokenVerifier,
    one_run_policy,
)
from server.reader.cursor import CursorCodec
from server.settings import (
    INSPECTOR,
    STORY_GRAPH_PORT_IGNORED,
    HttpSettings,
    ServeSettings,
    check_startup,
    settle_heap,
)
from server.store.errors import StoreError

log = logging.getLogger("story_graph_mcp.http")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
BACKLOG: Final = 2048
"""Pending connections per listening socket (uvicorn's default)."""
KEEP_ALIVE_SECONDS: Final = 75
"""How long an idle keep-alive connection stays open. Longer than the clients' and proxies' own idle limits
(httpx, which the MCP Python SDK uses, 5 s; Node 4 s; aiohttp 15 s; nginx and cloud load balancers 60 s), so
the client side always drops an idle connection first. uvicorn's default is 5 s, as long as httpx's: a
request sent on a pooled connection just as the server closed it failed with a connection error (a POST is
not retried)."""


def transport_security(settings: HttpSettings) -> TransportSecuritySettings:
    """Host/Origin validation, always on: loopback names, the bind address and the operator's extra names."""
    hosts = list(settings.loopback_hosts)
    origins = [f"http://{name}{port}" for name in ("127.0.0.1", "localhost", "[::1]") for port in (":*", "")]
    bind = settings.host
    if bind not in LOOPBACK and bind not in ("0.0.0.0", "::"):
        hosts.append(f"[{bind}]:*" if ":" in bind else f"{bind}:*")
    for name in settings.allowed_hosts:
        hosts.append(name)
        if not name.endswith(":*") and not name.rsplit("]", 1)[-1].count(":"):
            hosts.append(f"{name}:*")
    if settings.public_url:
        parts = urlsplit(settings.public_url)
        if parts.netloc:
            hosts.append(parts.netloc)
            origins.append(f"{parts.scheme}://{parts.netloc}")
    origins.extend(settings.allowed_origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=list(dict.fromkeys(hosts)), allowed_origins=origins
    )


def _endpoint_url(settings: HttpSettings) -> str:
    """The URL clients use for /mcp: `--public-url`, else the bind address (loopback for a wildcard bind)."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    host = settings.host if settings.host not in ("0.0.0.0", "::") else "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{settings.port}{MCP_PATH}"


def build_http_app(settings: ServeSettings, policy: PolicySource) -> ASGIApp:
    """The ASGI app: `/mcp` (Streamable HTTP, bearer tokens from the policy) and `/healthz` (public)."""
    http = settings.http
    verifier = PolicyTokenVerifier(policy)
    # No `token_verifier`/`auth` for the SDK: McpGate checks the token, once per request. With them the SDK adds its
    # own bearer middleware, which verified every token a second time (a stat of the policy file, a hash, a lookup).
    server = build_server(
        settings.db, HttpPolicyAccess(policy), CursorCodec(settings.cursor_secret), busy_timeout=settings.busy_timeout
    )
    server.custom_route("/healthz", methods=["GET"])(_health_route(server, policy))
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=transport_security(http),
        host=http.host,
        max_request_body_size=MAX_MESSAGE_BYTES,  # stdio takes the same per line
    )
    return AccessLog(StopOnDisconnect(McpGate(AuthContextMiddleware(app), verifier)))


POLICY_BROKEN: Final = (
    "the policy file is unreadable or invalid; every client is refused until it is fixed (the log says why)"
)


def _health_route(server: StoryGraphServer, policy: PolicySource) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def healthz(_: Request) -> JSONResponse:
        if await anyio.to_thread.run_sync(policy.broken):
            # Every client is refused until an operator fixes the file (the log says why; this public answer
            # names no path or content). A switch set to off is a decision, not a fault: that stays 200.
            broken = {"status": "unavailable", "policy": "invalid", "reason": POLICY_BROKEN}
            return JSONResponse(broken, status_code=503)
        problem = await anyio.to_thread.run_sync(server.database_problem)
        if problem is None:
            return JSONResponse({"status": "ok", "database": "readable"})
        log.warning("health check: database %s: %s", problem.kind, problem.detail)
        return JSONResponse(
            {"status": "unavailable", "database": problem.kind, "reason": problem.reason}, status_code=503
        )

    return healthz


def serve_http(settings: ServeSettings) -> int:
    """`serve --transport http`: one uvicorn process, or `--workers N` of them. Without --policy (one process
    only), a one-run token is made and shown once."""
    http = settings.http
    if http.workers > 1:
        from server.workers import serve_workers

        _warn_if_not_loopback(http)
        settle_heap()  # the supervisor serves nothing itself, but runs for as long as its workers
        return serve_workers(settings)
    sock = listening_socket(http.host, http.port, reuse_port=False)
    policy: PolicySource
    if settings.policy is not None:
        policy = PolicyFile(settings.policy)
    else:
        one_run, token = one_run_policy(settings.project)
        policy = FixedPolicy(one_run)
        url = _endpoint_url(http)
        header = f'--header "Authorization: Bearer {token}"'
        print(
            "story-graph-mcp: no --policy given, so this run accepts one bearer token, made now and shown only "
            f"here (client id 'operator', every scope):\n  {token}\n"
            "Open it in the MCP Inspector (web UI, then CLI; Node 22 or later):\n"
            f"  npx -y {INSPECTOR} --transport http --server-url {url} {header}\n"
            f"  npx -y {INSPECTOR} --cli {url} --transport http {header} --method tools/list",
            file=sys.stderr,
            flush=True,
        )
    _warn_if_not_loopback(http)
    app = build_http_app(settings, policy)
    settle_heap()
    # log_config=None: uvicorn's lines go through the root handler (server.logs), in one format on stderr;
    # access_log=False: AccessLog writes one line per request, with the client id.
    config = uvicorn.Config(
        app,
        host=http.host,
        port=http.port,
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        http=RequestHeadDeadline,  # a connection that sends no request head is closed too (server/http_connections)
        backlog=BACKLOG,
    )
    # Listening before the line is logged: a client that connects as soon as it reads it waits the few
    # milliseconds uvicorn takes to start accepting, in the backlog, rather than being refused.
    sock.listen(BACKLOG)
    # uvicorn logs the address only when it binds the socket itself; say it, as `--workers` does.
    log.info("serving on http://%s:%d%s", f"[{http.host}]" if ":" in http.host else http.host, http.port, MCP_PATH)
    with sock:
        uvicorn.Server(config).run(sockets=[sock])
    return 0


def listening_socket(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    """A TCP socket bound to host:port (listen() is called by the uvicorn server that serves it). Bound before
    anything is printed: a port in use (or an address this machine does not have) is one line and exit status 2,
    not a one-run token and Inspector commands for a server that never started."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by its connections
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise StoreError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(True)
    return sock


def _warn_if_not_loopback(http: HttpSettings) -> None:
    if http.host not in LOOPBACK:
        print(
            f"story-graph-mcp: listening on {http.host}, not loopback; put TLS in front "
            "(docs/deployment.md) and pass --allowed-host (or --public-url) for the names clients use",
            file=sys.stderr,
            flush=True,
        )


def create_app() -> ASGIApp:
    """`uvicorn --factory server.http:create_app`: configured from the environment, for several workers.

    STORY_GRAPH_DB (required), STORY_GRAPH_POLICY (required: workers cannot share a one-run token),
    STORY_GRAPH_CURSOR_SECRET_FILE or STORY_GRAPH_CURSOR_SECRET (required: workers must share it),
    STORY_GRAPH_BUSY_TIMEOUT (seconds), STORY_GRAPH_ALLOWED_HOSTS / STORY_GRAPH_ALLOWED_ORIGINS
    (comma-separated), STORY_GRAPH_PUBLIC_URL, STORY_GRAPH_HOST (the address uvicorn binds, uvicorn's --host;
    accepted by the Host check; default 127.0.0.1). The port is uvicorn's --port alone: a STORY_GRAPH_PORT is
    said to have no effect. A missing or bad setting is one line on stderr and exit status 3 (uvicorn's start-up
    failure, so its supervisor stops instead of restarting workers). `serve --transport http --workers N` runs this
    factory (server/workers.py).
    """
    configure_logging()
    if os.environ.get("STORY_GRAPH_PORT", "").strip():
        log.warning(STORY_GRAPH_PORT_IGNORED)
    try:
        settings = ServeSettings.from_env()
        check_startup(settings)
        assert settings.policy is not None
        app = build_http_app(settings, PolicyFile(settings.policy))
        settle_heap()
        return app
    except StoreError as exc:
        print(f"story-graph-mcp: {exc}", file=sys.stderr, flush=True)
        sys.exit(STARTUP_FAILURE)
