"""Copied from the project's shared tooling (`shared/tools/stdio_http_bridge.py`, written for this project's
conformance runbook and validated there: the MCP SDK's conformance "everything server" scored 40/40 both over
HTTP and through this bridge over stdio). Local changes: lint and type fixes only, no behaviour change.

Expose a *stdio* MCP server as a Streamable HTTP endpoint on 127.0.0.1, for HTTP-only test tools
(e.g. `@modelcontextprotocol/conformance server --url ...`, which has no stdio mode).

Each new HTTP session (a POST without Mcp-Session-Id, i.e. `initialize`) spawns a fresh copy of the
stdio server; JSON-RPC messages are pumped verbatim both ways (no re-interpretation), so initialize,
capabilities, tools/list, tools/call ... are answered by the real server. The HTTP layer itself
(SSE framing, session ids, Host/Origin checks) is the mcp SDK's StreamableHTTPServerTransport, so
transport-level scenarios (dns-rebinding-protection, server-sse-*) test the bridge, not your server.

Server-originated notifications/requests are attached to the in-flight POST stream (progress by
progressToken, anything else to the most recent in-flight request), else to the GET stream.

Usage (needs the mcp>=2 venv):
  python stdio_http_bridge.py --port 8799 -- python my_server.py --flag
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import uuid
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import uvicorn
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp.types import JSONRPCError, JSONRPCRequest, JSONRPCResponse
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

log = logging.getLogger("stdio-http-bridge")


class Bridge:
    def __init__(self, params: StdioServerParameters, errlog: Any, idle_timeout: float = 60.0) -> None:
        self.params = params
        self.idle_timeout = idle_timeout
        self.errlog = errlog
        self.sessions: dict[str, StreamableHTTPServerTransport] = {}
        self.tg: anyio.abc.TaskGroup | None = None
        self.security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncGenerator[None, None]:
        async with anyio.create_task_group() as tg:
            self.tg = tg
            yield
            tg.cancel_scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sid = Headers(scope=scope).get("mcp-session-id")
        if sid is not None:
            transport = self.sessions.get(sid)
            if transport is None:
                await JSONResponse(
                    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}, 404
                )(scope, receive, send)
                return
            await transport.handle_request(scope, receive, send)
            return
        transport = StreamableHTTPServerTransport(
            mcp_session_id=uuid.uuid4().hex, security_settings=self.security, idle_timeout=self.idle_timeout
        )
        assert transport.mcp_session_id and self.tg is not None
        self.sessions[transport.mcp_session_id] = transport
        try:
            await self.tg.start(self._run_session, transport)
        except Exception as exc:  # could not spawn the server
            self.sessions.pop(transport.mcp_session_id, None)
            log.error("failed to start stdio server: %r", exc)
            await JSONResponse({"error": f"failed to start stdio server: {exc}"}, 502)(scope, receive, send)
            return
        await transport.handle_request(scope, receive, send)

    async def _run_session(
        self, transport: StreamableHTTPServerTransport, *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        sid = transport.mcp_session_id
        assert sid is not None
        inflight: list[Any] = []  # ids of client requests not yet answered, oldest first
        tokens: dict[Any, Any] = {}  # progressToken -> request id

        async def http_to_child(h_read: Any, c_write: Any) -> None:
            async for item in h_read:
                if isinstance(item, Exception):
                    continue
                msg = item.message
                if isinstance(msg, JSONRPCRequest):
                    inflight.append(msg.id)
                    token = ((msg.params or {}).get("_meta") or {}).get("progressToken")
                    if token is not None:
                        tokens[token] = msg.id
                await c_write.send(SessionMessage(msg))

        async def child_to_http(c_read: Any, h_write: Any) -> None:
            async for item in c_read:
                if isinstance(item, Exception):
                    continue
                msg = item.message
                meta = None
                if isinstance(msg, JSONRPCResponse | JSONRPCError):
                    if msg.id in inflight:
                        inflight.remove(msg.id)
                else:  # notification or server->client request: ride the in-flight POST stream if any
                    params = getattr(msg, "params", None) or {}
                    related = tokens.get(params["progressToken"]) if "progressToken" in params else None
                    if related is None and inflight:
                        related = inflight[-1]
                    if related is not None:
                        meta = ServerMessageMetadata(related_request_id=related)
                await h_write.send(SessionMessage(msg, metadata=meta))

        async def pump(tg: anyio.abc.TaskGroup, fn: Any, *args: Any) -> None:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await fn(*args)
            tg.cancel_scope.cancel()  # either side finished: client DELETE, transport closed, or child exited

        try:
            async with (
                transport.connect() as (h_read, h_write),
                stdio_client(self.params, errlog=self.errlog) as (c_read, c_write),
            ):
                task_status.started()
                # Sessions a client never DELETEs (conformance runs, discover probes) end after idle_timeout.
                with transport.idle_scope or anyio.CancelScope():
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(pump, tg, http_to_child, h_read, c_write)
                        tg.start_soon(pump, tg, child_to_http, c_read, h_write)
        except Exception:  # never let one session take the bridge (and its other sessions) down
            log.exception("session %s ended with an error", sid)
        finally:
            self.sessions.pop(sid, None)
            if not transport.is_terminated:
                with anyio.CancelScope(shield=True):
                    await transport.terminate()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8799)
    ap.add_argument("--path", default="/mcp")
    ap.add_argument("--server-log", default=None, help="file for the stdio server's stderr (default: our stderr)")
    ap.add_argument("--idle-timeout", type=float, default=60.0, help="seconds before an idle session is reaped")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...] of the stdio server")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("missing stdio server command (after --)")
    errlog = open(a.server_log, "a") if a.server_log else sys.stderr  # noqa: SIM115 - lives as long as the process
    bridge = Bridge(StdioServerParameters(command=cmd[0], args=cmd[1:]), errlog, a.idle_timeout)
    app = Starlette(
        routes=[
            Route(a.path, endpoint=bridge),
            Route("/healthz", endpoint=lambda r: JSONResponse({"ok": True, "sessions": len(bridge.sessions)})),
        ],
        lifespan=bridge.lifespan,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    uvicorn.run(app, host=a.host, port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
