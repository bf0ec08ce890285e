"""Real server processes for transport tests: `story-graph-mcp serve` over HTTP (uvicorn on a free loopback
port) or stdio, started by the test and stopped after it. Only loopback, only processes we started."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import orjson
from anyio.abc import Process
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from server.policy import hash_token

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
SECRET = "transport-test-cursor-secret-0123456789"
TOKENS = {"alpha": "sgm_test-alpha-token-0000000000", "beta": "sgm_test-beta-token-1111111111"}
START_TIMEOUT = 30.0
REPLY_WAIT = 120.0
"""Seconds a raw stdio test waits for a reply or an exit before it fails (a wait, not a speed limit)."""
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("STORY_GRAPH_CURSOR_SECRET", None)
    return env


def write_secret(directory: Path, secret: str = SECRET) -> Path:
    path = directory / "cursor-secret"
    path.write_text(secret + "\n")
    return path


def policy_text(
    *,
    enabled: bool | None = None,
    stdio: dict[str, Any] | None = None,
    clients: dict[str, dict[str, Any]] | None = None,
) -> str:
    """A TOML policy. Each client gets the sha256 of TOKENS[client_id] unless it names its own token_sha256."""
    lines = ["version = 1"]
    if enabled is not None:
        lines.append(f"enabled = {_toml(enabled)}")
    if stdio is not None:
        lines.append("[stdio]")
        lines += [f"{key} = {_toml(value)}" for key, value in stdio.items()]
    for client_id, spec in (clients or {}).items():
        lines.append(f"[clients.{client_id}]")
        spec = {"token_sha256": [hash_token(TOKENS[client_id])], **spec}
        lines += [f"{key} = {_toml(value)}" for key, value in spec.items()]
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(value)


@dataclass
class HttpServer:
    port: int
    process: Process
    log: Path
    """The server's stderr."""
    out: Path
    """The server's stdout."""

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def output(self) -> str:
        """Everything the process wrote (stdout and stderr)."""
        return self.out.read_text(errors="replace") + self.log.read_text(errors="replace")


@asynccontextmanager
async def http_server(
    args: Sequence[str], log_dir: Path, *, command: Sequence[str] | None = None, env: dict[str, str] | None = None
) -> AsyncGenerator[HttpServer, None]:
    """Start `python -m server serve --transport http --port N ARGS` (or `command` with `{port}`), wait until
    /healthz answers, yield, then stop the process."""
    port = free_port()
    log, out = log_dir / f"server-{port}.stderr", log_dir / f"server-{port}.stdout"
    argv = (
        [part.format(port=port) for part in command]
        if command is not None
        else [PYTHON, "-m", "server", "serve", "--transport", "http", "--port", str(port), *args]
    )
    with log.open("wb") as err, out.open("wb") as std:
        process = await anyio.open_process(argv, stdout=std, stderr=err, cwd=REPO, env=env or server_env())
    server = HttpServer(port, process, log, out)
    try:
        with anyio.fail_after(START_TIMEOUT):
            async with httpx2.AsyncClient() as http:
                while True:
                    if process.returncode is not None:
                        raise RuntimeError(f"server exited early:\n{server.output()}")
                    try:
                        if (await http.get(f"{server.base}/healthz")).status_code == 200:
                            break
                    except httpx2.TransportError:
                        pass
                    await anyio.sleep(0.05)
        yield server
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.terminate()
                with anyio.move_on_after(10):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await process.aclose()


@asynccontextmanager
async def http_client(
    url: str, token: str | None, mode: str = "auto", *, origin: str | None = None
) -> AsyncGenerator[Client, None]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if origin is not None:
        headers["Origin"] = origin
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


@asynccontextmanager
async def stdio_session(args: Sequence[str], log_dir: Path, mode: str = "auto") -> AsyncGenerator[Client, None]:
    """`python -m server serve ARGS` as a stdio subprocess, with a real MCP client on its pipes."""
    params = StdioServerParameters(
        command=PYTHON, args=["-m", "server", "serve", *args], cwd=str(REPO), env=server_env()
    )
    with (log_dir / "stdio-server.log").open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            yield client


class RawStdio:
    """A `python -m server serve` subprocess on raw pipes, for what an SDK client will not do: send hostile
    bytes, cancel by hand, close one pipe and keep the other."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log = log
        assert process.stdin is not None and process.stdout is not None
        self.stdin = process.stdin
        self.stdout = process.stdout

    def send(self, message: dict[str, Any] | bytes) -> None:
        self.stdin.write((message if isinstance(message, bytes) else orjson.dumps(message)) + b"\n")
        self.stdin.flush()

    def receive(self) -> dict[str, Any]:
        ready, _, _ = select.select([self.stdout], [], [], REPLY_WAIT)
        assert ready, "no reply: the client would wait forever"
        line = self.stdout.readline()
        assert line.endswith(b"\n"), line
        reply: dict[str, Any] = orjson.loads(line)
        return reply

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        return self.receive()

    def initialize(self) -> None:
        assert self.call(INITIALIZE)["result"]["serverInfo"]["name"] == "story-graph-mcp"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def wait(self) -> int:
        return self.process.wait(timeout=REPLY_WAIT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def raw_stdio(args: Sequence[str], log_dir: Path) -> Iterator[RawStdio]:
    """`python -m server serve ARGS` with its pipes in the test's hands; killed afterwards if still running."""
    log = log_dir / "stdio-server.log"
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [PYTHON, "-m", "server", "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            cwd=REPO,
            env=server_env(),
        )
    try:
        yield RawStdio(process, log)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()
