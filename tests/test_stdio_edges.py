"""Hostile bytes on stdio, sent raw to a real `python -m server serve` subprocess: every line that is not one
valid JSON-RPC message gets a JSON-RPC error (never silence, which would leave the client waiting forever),
and the server keeps serving the next request."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from http_support import RawStdio, http_server, raw_stdio
from support import demo_db

PARSE_ERROR, INVALID_REQUEST = -32700, -32600


@pytest.fixture
def stdio(tmp_path: Path) -> Iterator[RawStdio]:
    with raw_stdio(["--db", str(demo_db(tmp_path)), "--project", "atlas"], tmp_path) as raw:
        raw.initialize()
        yield raw
        raw.stdin.close()
        assert raw.wait() == 0


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


@pytest.mark.anyio
async def test_json_that_is_not_one_message_gets_the_same_answer_over_http(tmp_path: Path) -> None:
    """Over HTTP the SDK answered these bodies `-32602` with pydantic's whole validation report (1-2 KB) where stdio
    answers `-32600 Invalid Request` and the request's id: the same body now gets the same answer on both (status
    400), and the access line says why."""
    invalid = {name: line for name, (line, code, _) in HOSTILE.items() if code == INVALID_REQUEST}
    db = demo_db(tmp_path)
    with raw_stdio(["--db", str(db), "--project", "atlas"], tmp_path) as raw:
        raw.initialize()
        over_stdio = {}
        for name, line in invalid.items():
            raw.send(line)
            over_stdio[name] = raw.receive()
        raw.stdin.close()
        assert raw.wait() == 0
    async with http_server(["--db", str(db), "--project", "atlas"], tmp_path) as server:
        (token,) = set(re.findall(r"sgm_[A-Za-z0-9_-]{20,}", server.output()))
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        }
        async with httpx2.AsyncClient() as http:
            for name, line in invalid.items():
                answer = await http.post(server.url, content=line, headers=headers)
                assert answer.status_code == 400, name
                assert answer.json() == over_stdio[name], name
            # A valid message is untouched, and so is the SDK's own answer to what is not JSON at all.
            tools_list = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
            listed = await http.post(server.url, content=tools_list, headers=headers)
            assert listed.status_code == 200 and listed.json()["result"]["tools"]
            broken = await http.post(server.url, content=b'{"jsonrpc":', headers=headers)
            assert broken.status_code == 400 and broken.json()["error"]["code"] == PARSE_ERROR
    access = [line for line in server.output().splitlines() if "story_graph_mcp.access:" in line]
    refused = [line for line in access if re.search(r" operator POST /mcp 400 \S+ms", line)]
    assert sum(line.endswith(' reason="Invalid Request"') for line in refused) == len(invalid), refused
