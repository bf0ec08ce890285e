"""A light MCP-over-HTTP load generator: asyncio streams, raw HTTP/1.1 with keep-alive, one connection per client.

It sends `tools/call` as a stateless Streamable HTTP client does (a POST to /mcp with a JSON-RPC body, no session)
and reads the JSON answer. Not the SDK client: its own CPU per call would dominate what we measure on a 2-core
machine. `modern` is the 2026-07-28 protocol (per-request `_meta` and the Mcp-Method/Mcp-Name headers), which the
SDK's Client speaks by default; `legacy` is the 2025-11-25 protocol without a handshake (stateless servers accept
that).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

MODERN: Final = "2026-07-28"
LEGACY: Final = "2025-11-25"
CLIENT_INFO: Final = {"name": "story-graph-bench-http", "version": "1"}


class HttpError(Exception):
    pass


class Connection:
    """One keep-alive HTTP/1.1 connection to a loopback server."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, bytes]:
        if self.writer is None or self.reader is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{self.port}", f"Content-Length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        try:
            status, close, payload = await self._response(self.reader)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            await self.close()
            raise HttpError(f"connection lost: {exc}") from exc
        if close:
            await self.close()
        return status, payload

    @staticmethod
    async def _response(reader: asyncio.StreamReader) -> tuple[int, bool, bytes]:
        status_line = await reader.readline()
        if not status_line:
            raise asyncio.IncompleteReadError(b"", None)
        status = int(status_line.split()[1])
        length: int | None = None
        chunked = close = False
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value:
                chunked = True
            elif name == "connection" and value == "close":
                close = True
        if chunked:
            parts = []
            while True:
                size = int((await reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await reader.readline()
                    break
                parts.append(await reader.readexactly(size))
                await reader.readline()
            return status, close, b"".join(parts)
        if length is None:
            return status, True, await reader.read()
        return status, close, await reader.readexactly(length)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self.writer.wait_closed()
        self.reader = self.writer = None


@dataclass(frozen=True)
class McpCall:
    """A prepared tools/call request: headers and body bytes built once per argument set."""

    headers: dict[str, str]
    body_template: bytes
    """The JSON body with `"id":0`; the id is patched per request."""

    @classmethod
    def build(cls, tool: str, arguments: dict[str, Any], token: str | None, protocol: str) -> McpCall:
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if protocol == "modern":
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            headers |= {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool}
        else:
            headers["MCP-Protocol-Version"] = LEGACY
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        body = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": params})
        return cls(headers, body)

    def body(self, request_id: int) -> bytes:
        return self.body_template.replace(b'"id":0', f'"id":{request_id}'.encode(), 1)


def check_answer(status: int, payload: bytes) -> str | None:
    """None for a successful tool result; otherwise what went wrong, briefly."""
    if status != 200:
        return f"HTTP {status}: {payload[:120]!r}"
    try:
        answer = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return f"not JSON: {payload[:120]!r}"
    if "error" in answer:
        return f"JSON-RPC error {answer['error'].get('code')}: {answer['error'].get('message')}"
    if answer.get("result", {}).get("isError"):
        return "tool error: " + str(answer["result"].get("content"))[:160]
    return None


@dataclass
class LoadResult:
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None


async def run_load(port: int, calls: Sequence[McpCall], clients: int, seconds: float) -> LoadResult:
    """`clients` connections, each sending its next call as soon as the previous answer arrived, for `seconds`."""
    result = LoadResult(seconds)
    connections = [Connection(port) for _ in range(clients)]
    counter = iter(range(1, 1 << 62))

    async def one(connection: Connection, call: McpCall) -> None:
        started = time.perf_counter()
        try:
            status, payload = await connection.request("POST", "/mcp", call.headers, call.body(next(counter)))
            problem = check_answer(status, payload)
        except HttpError as exc:
            problem = str(exc)
        if problem is None:
            result.latencies_ms.append((time.perf_counter() - started) * 1000)
        else:
            result.errors += 1
            result.first_error = result.first_error or problem

    # One untimed call per connection: connects, and warms every worker the kernel hands connections to.
    await asyncio.gather(*(one(c, calls[i % len(calls)]) for i, c in enumerate(connections)))
    result.latencies_ms.clear()
    result.errors, result.first_error = 0, None
    deadline = time.perf_counter() + seconds

    async def client(index: int, connection: Connection) -> None:
        n = index
        while time.perf_counter() < deadline:
            await one(connection, calls[n % len(calls)])
            n += clients

    started = time.perf_counter()
    await asyncio.gather(*(client(i, c) for i, c in enumerate(connections)))
    result.seconds = time.perf_counter() - started
    for connection in connections:
        await connection.close()
    return result


async def wait_healthy(port: int, limit_seconds: float, alive: Callable[[], bool]) -> None:
    """Poll GET /healthz until 200; `alive()` false means the server process died."""
    deadline = time.perf_counter() + limit_seconds
    while time.perf_counter() < deadline:
        if not alive():
            raise RuntimeError("the server exited during start-up")
        connection = Connection(port)
        try:
            status, _ = await connection.request("GET", "/healthz", {})
            if status == 200:
                return
        except (OSError, HttpError):
            pass
        finally:
            await connection.close()
        await asyncio.sleep(0.1)
    raise RuntimeError(f"no healthy answer on port {port} within {limit_seconds:.0f} s")
