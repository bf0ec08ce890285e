"""A client that goes away or cancels while its calls are in flight, against real `python -m server serve`
processes. Over stdio the server must stop by itself when the client's pipes close (an agent runtime does not
reap a lingering child), exit 0 and write no traceback; over HTTP a hung-up call is stopped, not answered to
nobody; a cancelled call leaves the server serving."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from http_support import (
    INITIALIZE,
    REPLY_WAIT,
    TOKENS,
    HttpServer,
    http_client,
    http_server,
    policy_text,
    raw_stdio,
    write_secret,
)
from support import demo_db, ok
from test_read_failures import rollback_journal, writer_holding_the_lock

IN_FLIGHT = 100


def test_stdio_server_exits_cleanly_when_the_client_closes_its_pipes_mid_call(tmp_path: Path) -> None:
    with raw_stdio(["--db", str(demo_db(tmp_path)), "--project", "atlas"], tmp_path) as server:
        server.call(INITIALIZE)
        lines = [orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})]
        for n in range(IN_FLIGHT):
            arguments = {"query": "session cache", "page_size": 50}
            params = {"name": "story_graph_search", "arguments": arguments}
            lines.append(orjson.dumps({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call", "params": params}))
        server.send(b"\n".join(lines))
        # The client exits: both of its pipe ends close while the server is still answering.
        server.stdout.close()
        server.stdin.close()
        returncode = server.wait()
        output = server.output()
    assert returncode == 0, output
    assert "Traceback" not in output and "Error" not in output, output


def test_stdio_server_exits_when_the_client_closes_its_output_but_keeps_its_input_open(tmp_path: Path) -> None:
    """A client that stops reading (closes our stdout) but leaves our stdin open: the server notices without
    having to write anything, stops, and exits 0 without a traceback."""
    with raw_stdio(["--db", str(demo_db(tmp_path)), "--project", "atlas"], tmp_path) as server:
        server.call(INITIALIZE)
        server.stdout.close()  # stdin stays open
        returncode = server.wait()
        output = server.output()
    assert returncode == 0, output
    assert "the client closed the server's output" in output, output
    assert "Traceback" not in output, output


def post(port: int, body: bytes) -> bytes:
    headers = {
        "Host": "127.0.0.1",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
        "Authorization": f"Bearer {TOKENS['alpha']}",
        "Content-Length": str(len(body)),
    }
    return (
        f"POST /mcp HTTP/1.1\r\n{''.join(f'{k}: {v}' + chr(13) + chr(10) for k, v in headers.items())}\r\n".encode()
        + body
    )


def search_call(request_id: int) -> dict[str, Any]:
    params = {"name": "story_graph_search", "arguments": {"query": "session cache"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def wait_for_line(server: HttpServer, prefix: str) -> str:
    with anyio.fail_after(REPLY_WAIT):
        while True:
            lines = [line for line in server.output().splitlines() if prefix in line]
            if lines:
                return lines[-1]
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_http_call_of_a_client_that_disconnects_is_stopped_and_the_server_keeps_serving(tmp_path: Path) -> None:
    """The call waits for a writer's lock (a slow call); its client hangs up. The server stops the call instead of
    answering nobody (access line 499), and every pooled connection serves the next calls."""
    db = rollback_journal(demo_db(tmp_path))
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text(clients={"alpha": {"projects": ["atlas"], "default_project": "atlas"}}))
    secret = write_secret(tmp_path)
    args = ["--db", str(db), "--policy", str(policy), "--cursor-secret-file", str(secret), "--busy-timeout", "20"]
    async with http_server(args, tmp_path) as server:
        with writer_holding_the_lock(db), socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(post(server.port, orjson.dumps(search_call(7))))
            await anyio.sleep(0.5)  # the call is waiting for the lock (a later hang-up gives the same line)
        # The lock is released once the client has hung up: unstopped, the call would now answer, to nobody.
        line = await wait_for_line(server, "alpha POST /mcp")
        assert " 499 " in line, line
        async with http_client(server.url, TOKENS["alpha"]) as client:
            for _ in range(8):  # more than the pool's connections: none was left inside a transaction
                page = await ok(client, "story_graph_search", {"query": "session cache"})
                assert page["items"]
    assert "Traceback" not in server.output()


def test_stdio_call_cancelled_while_waiting_for_a_lock_leaves_every_connection_usable(tmp_path: Path) -> None:
    """notifications/cancelled for a call waiting for a writer's lock: no answer for it, and the next calls, on
    every pooled connection, are answered (none was left inside a read transaction)."""
    db = rollback_journal(demo_db(tmp_path))
    with raw_stdio(["--db", str(db), "--project", "atlas", "--busy-timeout", "20"], tmp_path) as server:
        server.initialize()
        with writer_holding_the_lock(db):
            server.send(search_call(7))
            time.sleep(0.5)  # the call is waiting for the lock (a cancel before it starts gives the same outcome)
            server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
            time.sleep(0.5)
        for n in range(8):  # more than the pool's connections
            reply = server.call(search_call(100 + n))
            assert reply["id"] == 100 + n, reply  # never an answer to the cancelled call
            assert reply["result"]["isError"] is False, reply
        server.stdin.close()
        assert server.wait() == 0
        assert "Traceback" not in server.output()
