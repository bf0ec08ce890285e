"""The load generator of bench_http.py: MCP `tools/call` over raw HTTP/1.1 keep-alive connections, one per client.

Not the SDK client: its own CPU per call (session machinery, pydantic models, jsonschema validation of every
result) would count against the server on a 2-core machine, and the figures would measure the client. Requests are
prepared as bytes once (request line, headers, JSON-RPC body), sent as a stateless Streamable HTTP client sends
them (a POST to /mcp, no session), and each answer is read by its Content-Length (or its chunks) and parsed to check
that it is a tool result with structuredContent. `modern` is the 2026-07-28 protocol (per-request `_meta` and the
Mcp-Method/Mcp-Name headers), which the SDK's Client speaks by default; `legacy` is 2025-11-25 without a handshake
(stateless servers accept that).

Every client is a closed loop: it sends its next request as soon as the previous answer is in, rotating through
the requests. Its connection stays open from one `Clients.run` to the next (a warm-up, then the timed run), and is
reopened, the failure counted, when it drops or a call takes longer than CALL_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

HOST: Final = "127.0.0.1"
PROTOCOLS: Final = {"modern": "2026-07-28", "legacy": "2025-11-25"}
CLIENT_INFO: Final = {"name": "story-graph-bench-http", "version": "1"}
CALL_TIMEOUT: Final = 30.0
ERROR_SAMPLES: Final = 3


def tools_call(port: int, tool: str, arguments: dict[str, Any], *, token: str | None, protocol: str) -> bytes:
    """The whole HTTP request of one `tools/call`, ready to send."""
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    version = PROTOCOLS[protocol]
    headers = {
        "Host": f"{HOST}:{port}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
    }
    if protocol == "modern":
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers |= {"Mcp-Method": "tools/call", "Mcp-Name": tool}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    headers["Content-Length"] = str(len(body))
    head = "POST /mcp HTTP/1.1\r\n" + "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return (head + "\r\n").encode() + body


def healthz_request(port: int) -> bytes:
    return f"GET /healthz HTTP/1.1\r\nHost: {HOST}:{port}\r\n\r\n".encode()


def check_answer(status: int, body: bytes) -> str | None:
    """None for a successful tool result; otherwise what went wrong, briefly."""
    if status != 200:
        return f"HTTP {status}: {body[:160]!r}"
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return f"not JSON: {body[:160]!r}"
    if "error" in answer:
        return f"JSON-RPC error {answer['error'].get('code')}: {answer['error'].get('message')}"
    result = answer.get("result")
    if not isinstance(result, dict) or result.get("isError"):
        return "tool error: " + str(result)[:200]
    if result.get("structuredContent") is None:
        return "no structuredContent: " + str(result)[:200]
    return None


class Connection:
    """One keep-alive HTTP/1.1 connection to a loopback server; a request is prepared bytes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.closed = False

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def request(self, data: bytes) -> tuple[int, bytes]:
        """Send a request; its answer's status and body (the connection is closed when the server says so)."""
        self.writer.write(data)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length: int | None = None
        chunked = False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value
            elif name == b"connection" and value == b"close":
                self.closed = True
        if chunked:
            body = await self._chunks()
        elif length is None:
            body, self.closed = await self.reader.read(), True
        else:
            body = await self.reader.readexactly(length)
        if self.closed:
            await self.close()
        return status, body

    async def _chunks(self) -> bytes:
        parts = []
        while size := int((await self.reader.readline()).split(b";")[0], 16):
            parts.append(await self.reader.readexactly(size))
            await self.reader.readline()
        await self.reader.readline()  # the blank line after the last chunk (no trailers are sent to us)
        return b"".join(parts)

    async def close(self) -> None:
        self.closed = True
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


@dataclass
class Tally:
    """What one `Clients.run` saw: the latency of every successful call, and the failures."""

    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)

    def failed(self, problem: str) -> None:
        self.errors += 1
        if len(self.error_samples) < ERROR_SAMPLES:
            self.error_samples.append(problem)


class Clients:
    """`count` closed-loop clients, client i sending requests i, i + count, i + 2·count, … (modulo their number)."""

    def __init__(self, port: int, requests: Sequence[bytes], count: int) -> None:
        self.port = port
        self.requests = list(requests)
        self.connections: list[Connection | None] = [None] * count
        self.next_request = list(range(count))

    async def run(self, seconds: float) -> Tally:
        """Every client calls in a loop until `seconds` have passed (the calls in flight then are finished)."""
        tally = Tally()
        started = time.perf_counter()
        deadline = started + seconds
        await asyncio.gather(*(self._client(index, deadline, tally) for index in range(len(self.connections))))
        tally.seconds = time.perf_counter() - started
        return tally

    async def _client(self, index: int, deadline: float, tally: Tally) -> None:
        count = len(self.connections)
        while time.perf_counter() < deadline:
            data = self.requests[self.next_request[index] % len(self.requests)]
            self.next_request[index] += count
            started = time.perf_counter()
            try:
                connection = self.connections[index]
                if connection is None or connection.closed:
                    connection = self.connections[index] = await Connection.open(self.port)
                status, body = await asyncio.wait_for(connection.request(data), CALL_TIMEOUT)
                problem = check_answer(status, body)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
                await self._drop(index)
            if problem is None:
                tally.latencies_ms.append((time.perf_counter() - started) * 1000)
            else:
                tally.failed(problem)

    async def _drop(self, index: int) -> None:
        connection, self.connections[index] = self.connections[index], None
        if connection is not None:
            await connection.close()

    async def close(self) -> None:
        for index in range(len(self.connections)):
            await self._drop(index)


async def healthy(port: int) -> bool:
    """Whether GET /healthz answers 200 now."""
    try:
        connection = await Connection.open(port)
    except OSError:
        return False
    try:
        status, _ = await asyncio.wait_for(connection.request(healthz_request(port)), CALL_TIMEOUT)
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
        return False
    finally:
        await connection.close()
    return status == 200


async def call_once(port: int, request: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """One request on a new connection: the structured result, or what went wrong."""
    connection = await Connection.open(port)
    try:
        status, body = await asyncio.wait_for(connection.request(request), CALL_TIMEOUT)
    finally:
        await connection.close()
    problem = check_answer(status, body)
    if problem is not None:
        return None, problem
    content: dict[str, Any] = orjson.loads(body)["result"]["structuredContent"]
    return content, None
