"""Hostile bytes on stdio, sent raw to a real `python -m server serve` subprocess: every line that is not one
valid JSON-RPC message gets a JSON-RPC error (never silence, which would leave the client waiting forever),
and the server keeps serving the next request."""

from __future__ import annotations

import select
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from http_support import PYTHON, REPO, server_env
from support import demo_db

REPLY_TIMEOUT = 15.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
PARSE_ERROR, INVALID_REQUEST = -32700, -32600


class RawStdio:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], REPLY_TIMEOUT)
        assert ready, "no reply: the client would wait forever"
        line = self.process.stdout.readline()
        assert line.endswith(b"\n"), line
        reply: dict[str, Any] = orjson.loads(line)
        return reply

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(orjson.dumps(message))
        return self.receive()


@pytest.fixture
def stdio(tmp_path: Path) -> Iterator[RawStdio]:
    db = demo_db(tmp_path)
    with (tmp_path / "stderr.log").open("wb") as log:
        process = subprocess.Popen(
            [PYTHON, "-m", "server", "serve", "--db", str(db), "--project", "atlas"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=REPO,
            env=server_env(),
        )
    raw = RawStdio(process)
    try:
        assert raw.call(INITIALIZE)["result"]["serverInfo"]["name"] == "story-graph-mcp"
        raw.send(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        yield raw
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=10)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.stdout is not None
        process.stdout.close()


HOSTILE: dict[str, tuple[bytes, int, Any]] = {
    # name: (line, expected error code, expected id)
    "lone surrogate": (b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"\\ud800"}}', PARSE_ERROR, None),
    "lone low surrogate": (b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"\\udc00"}}', PARSE_ERROR, None),
    "malformed JSON": (b'{"jsonrpc":"2.0","id":3,"method":', PARSE_ERROR, None),
    "not UTF-8": (b"\xff\xfe\x00garbage", PARSE_ERROR, None),
    "empty array": (b"[]", INVALID_REQUEST, None),
    "empty object": (b"{}", INVALID_REQUEST, None),
    "a batch": (
        b'[{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","id":5,"method":"ping"}]',
        INVALID_REQUEST,
        None,
    ),
    "5,000-deep nesting": (b"[" * 5000 + b"]" * 5000, PARSE_ERROR, None),
    "5,000-deep object": (b'{"a":' * 5000 + b"1" + b"}" * 5000, PARSE_ERROR, None),
    "a string": (b'"ping"', INVALID_REQUEST, None),
    "a request with bad params keeps its id": (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"x"}',
        INVALID_REQUEST,
        7,
    ),
}


def test_every_hostile_line_gets_a_json_rpc_error_and_the_server_keeps_serving(stdio: RawStdio) -> None:
    for number, (name, (line, code, request_id)) in enumerate(HOSTILE.items()):
        stdio.send(line)
        reply = stdio.receive()
        assert reply["jsonrpc"] == "2.0" and "result" not in reply, name
        assert reply["id"] == request_id, name
        assert reply["error"]["code"] == code, (name, reply)
        assert reply["error"]["message"].startswith("Parse error" if code == PARSE_ERROR else "Invalid Request")
        # ... and the very next request is answered normally.
        assert stdio.call({"jsonrpc": "2.0", "id": 100 + number, "method": "ping"}) == {
            "jsonrpc": "2.0",
            "id": 100 + number,
            "result": {},
        }, name
    found = stdio.call(
        {
            "jsonrpc": "2.0",
            "id": 999,
            "method": "tools/call",
            "params": {"name": "story_graph_search", "arguments": {"query": "session cache"}},
        }
    )
    assert found["result"]["isError"] is False and found["result"]["structuredContent"]["items"]
