"""Streamable HTTP: the same server as stdio behind bearer tokens, Host/Origin checks and a health route.

Stateless (`stateless_http=True`, `json_response=True`): no session lives in a process, so any number of
workers or replicas serve the same clients, and a cursor signed by one is accepted by another that shares
the cursor secret. `/mcp` requires a bearer token listed (hashed) in the policy; `/healthz` is public and
says only whether the database is readable.

`serve --transport http` runs one process. For several workers use the factory, configured from the
environment (docs/deployment.md)::

    STORY_GRAPH_DB=graph.db STORY_GRAPH_POLICY=policy.toml STORY_GRAPH_CURSOR_SECRET_FILE=secret \\
        uvicorn --factory server.http:create_app --host 127.0.0.1 --port 8765 --workers 4
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import anyio.to_thread
import uvicorn
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse

from server.app import build_server
from server.policy import FixedPolicy, HttpPolicyAccess, PolicyFile, PolicySource, PolicyTokenVerifier, one_run_policy
from server.reader.cursor import CursorCodec
from server.reader.db import check_database
from server.store.errors import StoreError

log = logging.getLogger("story_graph_mcp.http")

MCP_PATH = "/mcp"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class HttpSettings:
    host: str = "127.0.0.1"
    """The bind address; loopback unless told otherwise."""
    port: int = 8765
    allowed_hosts: tuple[str, ...] = ()
    """Extra Host header values accepted (DNS-rebinding protection); `name` also accepts `name:<any port>`."""
    allowed_origins: tuple[str, ...] = ()
    """Extra Origin values accepted, e.g. `https://agents.example.com`."""
    public_url: str | None = None
    """The URL clients use for /mcp (behind a proxy); names the resource in the 401 `WWW-Authenticate` header."""
    loopback_hosts: tuple[str, ...] = field(default=("127.0.0.1:*", "localhost:*", "[::1]:*"))


def transport_security(settings: HttpSettings) -> TransportSecuritySettings:
    """Host/Origin validation, always on: loopback names, the bind address and the operator's extra names."""
    hosts = list(settings.loopback_hosts)
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
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


def _resource_url(settings: HttpSettings) -> str:
    if settings.public_url:
        return settings.public_url.rstrip("/")
    host = settings.host if settings.host not in ("0.0.0.0", "::") else "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{settings.port}{MCP_PATH}"


def build_http_app(
    db_path: Path, policy: PolicySource, cursors: CursorCodec, settings: HttpSettings | None = None
) -> Starlette:
    """The ASGI app: `/mcp` (Streamable HTTP, bearer tokens from the policy) and `/healthz` (public)."""
    settings = settings or HttpSettings()
    resource = _resource_url(settings)
    parts = urlsplit(resource)
    auth = AuthSettings(
        # No OAuth authorization server: tokens are issued out of band and listed (hashed) in the policy.
        # The SDK requires an issuer; this server's own origin is the honest value.
        issuer_url=AnyHttpUrl(f"{parts.scheme}://{parts.netloc}"),
        resource_server_url=AnyHttpUrl(resource),
        validate_token_resource=False,  # our tokens are bound to this server by being in its policy
    )
    server = build_server(
        db_path, HttpPolicyAccess(policy), cursors, token_verifier=PolicyTokenVerifier(policy), auth=auth
    )

    async def healthz(_: Request) -> JSONResponse:
        try:
            await anyio.to_thread.run_sync(check_database, db_path)
        except StoreError:
            return JSONResponse({"status": "unavailable", "database": "unreadable"}, status_code=503)
        return JSONResponse({"status": "ok", "database": "readable"})

    server.custom_route("/healthz", methods=["GET"])(healthz)

    return server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=transport_security(settings),
        host=settings.host,
    )


def settings_from_args(args: argparse.Namespace) -> HttpSettings:
    return HttpSettings(
        host=args.host,
        port=args.port,
        allowed_hosts=tuple(args.allowed_host),
        allowed_origins=tuple(args.allowed_origin),
        public_url=getattr(args, "public_url", None),
    )


def serve_http(args: argparse.Namespace, db_path: Path, project: str | None, cursors: CursorCodec) -> int:
    """`serve --transport http`: one uvicorn process. Without --policy, a one-run token is made and shown once."""
    settings = settings_from_args(args)
    policy: PolicySource
    if args.policy is not None:
        policy = PolicyFile(args.policy)
    else:
        one_run, token = one_run_policy(project)
        policy = FixedPolicy(one_run)
        url = _resource_url(settings)
        header = f'--header "Authorization: Bearer {token}"'
        print(
            "story-graph-mcp: no --policy given, so this run accepts one bearer token, made now and shown only "
            f"here (client id 'operator', every scope):\n  {token}\n"
            "Open it in the MCP Inspector (web UI, then CLI):\n"
            f"  npx @modelcontextprotocol/inspector --transport http --server-url {url} {header}\n"
            f"  npx @modelcontextprotocol/inspector --cli {url} --transport http {header} --method tools/list",
            file=sys.stderr,
            flush=True,
        )
    if settings.host not in LOOPBACK:
        print(
            f"story-graph-mcp: listening on {settings.host}, not loopback; put TLS in front "
            "(docs/deployment.md) and pass --allowed-host for the names clients use",
            file=sys.stderr,
            flush=True,
        )
    app = build_http_app(db_path, policy, cursors, settings)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="info", server_header=False)
    uvicorn.Server(config).run()
    return 0


def create_app() -> Starlette:
    """`uvicorn --factory server.http:create_app`: configured from the environment, for several workers.

    STORY_GRAPH_DB (required), STORY_GRAPH_POLICY (required: workers cannot share a one-run token),
    STORY_GRAPH_CURSOR_SECRET_FILE or STORY_GRAPH_CURSOR_SECRET (required: workers must share it),
    STORY_GRAPH_ALLOWED_HOSTS / STORY_GRAPH_ALLOWED_ORIGINS (comma-separated), STORY_GRAPH_PUBLIC_URL.
    """
    from server.serve import cursor_secret

    def env(name: str) -> str:
        value = os.environ.get(name, "").strip()
        if not value:
            raise StoreError(f"{name} is not set (see docs/deployment.md, 'Several workers')")
        return value

    db_path = Path(env("STORY_GRAPH_DB"))
    check_database(db_path)
    secret_file = os.environ.get("STORY_GRAPH_CURSOR_SECRET_FILE", "").strip()
    secret = cursor_secret(Path(secret_file) if secret_file else None)
    if secret is None:
        raise StoreError("set STORY_GRAPH_CURSOR_SECRET_FILE or STORY_GRAPH_CURSOR_SECRET: workers must share it")
    settings = HttpSettings(
        allowed_hosts=_csv("STORY_GRAPH_ALLOWED_HOSTS"),
        allowed_origins=_csv("STORY_GRAPH_ALLOWED_ORIGINS"),
        public_url=os.environ.get("STORY_GRAPH_PUBLIC_URL") or None,
    )
    return build_http_app(db_path, PolicyFile(Path(env("STORY_GRAPH_POLICY"))), CursorCodec(secret), settings)


def _csv(name: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in os.environ.get(name, "").split(",") if part.strip())
