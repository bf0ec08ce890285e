"""A client that goes away while its calls are in flight: a real `python -m server serve` subprocess whose stdio
pipes the test closes mid-call. The server must stop by itself (an agent runtime does not reap a lingering
child), exit 0 and write no traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
from http_support import PYTHON, REPO, server_env
from support import demo_db

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
IN_FLIGHT = 100
EXIT_WAIT = 60.0
"""Seconds the test waits for the server to exit before it fails (it exits in about one second)."""


def test_stdio_server_exits_cleanly_when_the_client_closes_its_pipes_mid_call(tmp_path: Path) -> None:
    db = demo_db(tmp_path)
    log = tmp_path / "stderr.log"
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [PYTHON, "-m", "server", "serve", "--db", str(db), "--project", "atlas"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            cwd=REPO,
            env=server_env(),
        )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(orjson.dumps(INITIALIZE) + b"\n")
        process.stdin.flush()
        assert b'"story-graph-mcp"' in process.stdout.readline()
        lines = [orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})]
        for n in range(IN_FLIGHT):
            arguments = {"query": "session cache", "page_size": 50}
            params = {"name": "story_graph_search", "arguments": arguments}
            lines.append(orjson.dumps({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call", "params": params}))
        process.stdin.write(b"\n".join(lines) + b"\n")
        process.stdin.flush()
        # The client exits: both of its pipe ends close while the server is still answering.
        process.stdout.close()
        process.stdin.close()
        returncode = process.wait(timeout=EXIT_WAIT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = log.read_text(errors="replace")
    assert returncode == 0, output
    assert "Traceback" not in output and "Error" not in output, output
