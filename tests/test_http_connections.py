"""HTTP connections as clients' pools use them, against real `serve --transport http` processes (one process, and
several workers): a keep-alive connection left idle for as long as a client pool keeps one is still served."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest
from http_support import http_server, policy_text, write_secret
from support import demo_db

pytestmark = pytest.mark.anyio

CLIENT_POOL_IDLE = 6.0
"""Seconds a connection idles before its next request: past the pool expiry of httpx (5 s, the MCP Python SDK's
HTTP client) and of Node (4 s). A server that closes idle connections at about the same moment races the
client, which then sends its request into a closing connection and gets a connection error."""


def request(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n".encode()


def read_response(sock: socket.socket) -> bytes:
    """One response (headers and a Content-Length body); b'' when the server had closed the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.mark.parametrize("workers", [1, 2])
async def test_an_idle_keep_alive_connection_outlives_the_client_pool_expiry(tmp_path: Path, workers: int) -> None:
    db = demo_db(tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text(clients={"alpha": {"projects": ["atlas"], "default_project": "atlas"}}))
    args = ["--db", str(db), "--policy", str(policy), "--cursor-secret-file", str(write_secret(tmp_path))]
    if workers > 1:
        args += ["--workers", str(workers)]
    async with http_server(args, tmp_path) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(request("/healthz"))
            assert read_response(sock).startswith(b"HTTP/1.1 200"), server.output()
            await anyio.sleep(CLIENT_POOL_IDLE)  # the connection idles in the client's pool
            try:
                sock.sendall(request("/healthz"))
                second = read_response(sock)
            except ConnectionError as exc:
                second = repr(exc).encode()
            assert second.startswith(b"HTTP/1.1 200"), f"the server closed the idle connection: {second!r}"
