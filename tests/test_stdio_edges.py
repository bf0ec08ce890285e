"""Hostile bytes on stdio, sent raw to a real `python -m server serve` subprocess: every line that is not one
valid JSON-RPC message gets a JSON-RPC error (never silence, which would leave the client waiting forever),
and the server keeps serving the next request. Also how the answers are written: from the event loop when they
fit in the client's empty pipe, else on a thread, each one whole line either way."""

from __future__ import annotations

import fcntl
import inspect
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from http_support import INITIALIZE, PYTHON, REPO, RawStdio, http_server, raw_stdio, server_env
from support import demo_db

from server.jsonrpc_errors import MAX_MESSAGE_BYTES
from server.reader.db import Database
from server.stdio import LINE_TOO_LONG, AnswerPipe

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
SEARCH = "story_graph_search"


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
    # The SDK's reader replaced the byte with U+FFFD and served the request; over HTTP the same body is refused.
    "not UTF-8 inside a string": (b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"\xff"}}', PARSE_ERROR, None),
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
        headers = raw_http_headers(server.output())
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


TOO_LONG = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": LINE_TOO_LONG}}
MiB = 2**20


def padded_ping(request_id: int, size: int) -> bytes:
    """A valid ping of exactly `size` bytes (its params carry padding)."""
    head, tail = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"pad":"' % request_id, b'"}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def status_kib(pid: int, field: str) -> int:
    """`VmRSS` or `VmHWM` (the peak RSS) of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's peak RSS from /proc")
def test_a_line_without_end_is_refused_at_the_limit_and_dropped_as_it_arrives(stdio: RawStdio) -> None:
    """200 MiB with no newline: the SDK's reader gathered it all (RSS grew by several times that) and answered only
    at its end. Now the line is answered `-32600` once it passes 4 MiB, its rest is read and dropped, the server's
    peak RSS stays within a few MiB of where it was, and the next line is served."""
    pid = stdio.process.pid
    peak_before = status_kib(pid, "VmHWM")
    stdio.stdin.write(b'{"jsonrpc":"2.0","id":41,"method":"ping","params":{"pad":"')
    chunk = b"x" * MiB
    for sent in range(1, 201):
        stdio.stdin.write(chunk)
        if sent == 8:
            stdio.stdin.flush()
            # Answered before the line's end has arrived, with id null: what the line said is never read.
            assert stdio.receive() == TOO_LONG
        if sent % 50 == 0:
            stdio.stdin.flush()
            assert status_kib(pid, "VmRSS") < peak_before + 32 * 1024, sent
    stdio.stdin.flush()
    assert status_kib(pid, "VmHWM") < peak_before + 32 * 1024
    stdio.send(b'"}}')  # the end of the dropped line: it gets no second answer
    listed = stdio.call({"jsonrpc": "2.0", "id": 42, "method": "tools/list"})
    assert listed["id"] == 42 and len(listed["result"]["tools"]) == 3
    refused = [line for line in stdio.output().splitlines() if "refused an unreadable stdio line" in line]
    assert len(refused) == 1 and refused[0].endswith(LINE_TOO_LONG), refused


def test_a_line_of_the_limit_is_served_and_one_byte_more_is_refused(stdio: RawStdio) -> None:
    # The line end is not counted, whichever it is.
    for request_id, end in enumerate((b"\n", b"\r\n", b"\r"), start=10):
        stdio.stdin.write(padded_ping(request_id, MAX_MESSAGE_BYTES) + end)
        stdio.stdin.flush()
        assert stdio.receive() == {"jsonrpc": "2.0", "id": request_id, "result": {}}
    stdio.send(padded_ping(20, MAX_MESSAGE_BYTES + 1))
    assert stdio.receive() == TOO_LONG
    assert stdio.call({"jsonrpc": "2.0", "id": 21, "method": "ping"}) == {"jsonrpc": "2.0", "id": 21, "result": {}}
    # The largest request the tools take, every character a JSON escape of a surrogate pair (12 bytes), is far
    # below the limit: a 4,000-character query, 100 project ids of 256 characters and a 4,096-character cursor.
    emoji = "\\ud83d\\ude00"
    ids = ",".join(f'"{emoji * 255}{n:c}"' for n in range(ord("a"), ord("a") + 100))
    arguments = (
        f'{{"query":"{emoji * 4000}","scope":{{"kind":"projects","projectIds":[{ids}]}},"cursor":"{"c" * 4096}"}}'
    )
    largest = (
        '{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"story_graph_search","arguments":'
        + arguments
        + "}}"
    ).encode()
    assert 350_000 < len(largest) < MAX_MESSAGE_BYTES // 8
    stdio.send(largest)
    answer = stdio.receive()
    # Every argument is within its limits: the call gets as far as the cursor, which this server did not issue.
    assert answer["id"] == 22 and answer["result"]["content"][0]["text"].startswith("invalid_cursor:"), answer


def test_line_ends_are_the_sdk_readers(stdio: RawStdio) -> None:
    """`\\n`, `\\r\\n` and `\\r` end a line, also when a `\\r\\n` is split between two reads. (The SDK's reader held a
    line ended by a `\\r` until the next byte came, to see whether it was a `\\r\\n`: it is answered at once now.)"""
    # A notification first (no answer): had the `\r` not ended it, the two would be one line, a parse error.
    cancel = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}'
    stdio.stdin.write(cancel + b'\r{"jsonrpc":"2.0","id":1,"method":"ping"}\r')
    stdio.stdin.flush()
    assert stdio.receive() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    time.sleep(0.2)  # the `\n` of that `\r\n` arrives in a read of its own, and ends no empty line
    stdio.send(b'\n{"jsonrpc":"2.0","id":2,"method":"ping"}\r')
    assert stdio.receive() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert stdio.call({"jsonrpc": "2.0", "id": 3, "method": "ping"}) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    # The SDK's guard is kept: while serving, the server's fd 0 is the null device (a handler reading stdin gets
    # end of input), not the client's pipe.
    if Path("/proc/self/fd/0").exists():
        assert os.readlink(f"/proc/{stdio.process.pid}/fd/0") == os.devnull


@pytest.mark.parametrize(
    ("last", "answer"),
    [
        pytest.param(
            b'{"jsonrpc":"2.0","id":5,"method":"ping"}', {"jsonrpc": "2.0", "id": 5, "result": {}}, id="whole"
        ),
        pytest.param(b'{"jsonrpc":"2.0","id":5,"method":', PARSE_ERROR, id="cut short"),
        pytest.param(b'{"jsonrpc":"2.0","id":5,"method":"ping","x":"' + b"x" * (5 * MiB), TOO_LONG, id="over-long"),
    ],
)
def test_input_that_ends_inside_a_line(tmp_path: Path, last: bytes, answer: dict[str, Any] | int) -> None:
    """A last line without its newline is read and answered as any other, then the server exits 0."""
    with raw_stdio(["--db", str(demo_db(tmp_path)), "--project", "atlas"], tmp_path) as raw:
        raw.initialize()
        raw.stdin.write(last)
        raw.stdin.close()
        reply = raw.receive()
        if isinstance(answer, int):
            assert reply["id"] is None and reply["error"]["code"] == answer, reply
        else:
            assert reply == answer
        assert raw.wait() == 0
        assert raw.stdout.read() == b""


def test_requests_written_before_the_input_ends_are_all_answered(tmp_path: Path) -> None:
    """A client that writes its requests and closes our stdin (a script piping them in; closing stdin is how the spec
    stops a stdio server) lost answers: the session closed at the end of input and cancelled the calls still being
    served, answering some `Connection closed` and others not at all. Each is now answered, then the server exits 0;
    a request the client cancelled is not waited for (answered or not, as the SDK decides)."""
    calls = [
        ("story_graph_search", {"query": "cache"}),
        ("story_graph_get_context", {"object_ref": {"type": "entity", "id": "ent-decision-b"}}),
    ]
    for round_ in range(3):
        (tmp_path / str(round_)).mkdir()
        with raw_stdio(["--db", str(demo_db(tmp_path / str(round_))), "--project", "atlas"], tmp_path) as raw:
            raw.initialize()
            raw.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "story_graph_search"}})
            raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})
            for n, (name, arguments) in enumerate(calls, start=10):
                params = {"name": name, "arguments": arguments}
                raw.send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params})
            raw.stdin.close()
            replies = {reply["id"]: reply for reply in map(orjson.loads, raw.stdout.read().splitlines())}  # to exit
            assert raw.wait() == 0
        answered = [replies.get(n, {}).get("result", {}).get("isError") is False for n in range(10, 10 + len(calls))]
        assert answered == [True] * len(calls), replies


def raw_http_headers(server_output: str) -> dict[str, str]:
    """Headers of a raw JSON-RPC POST to a server that printed its generated token at start."""
    (token,) = set(re.findall(r"sgm_[A-Za-z0-9_-]{20,}", server_output))
    return {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }


@pytest.mark.anyio
async def test_http_takes_the_same_most_bytes_per_message(tmp_path: Path) -> None:
    """One limit on both transports: a body of `MAX_MESSAGE_BYTES` is served over HTTP, one byte more is 413."""
    async with http_server(["--db", str(demo_db(tmp_path)), "--project", "atlas"], tmp_path) as server:
        headers = raw_http_headers(server.output())
        async with httpx2.AsyncClient() as http:
            served = await http.post(server.url, content=padded_ping(1, MAX_MESSAGE_BYTES), headers=headers)
            assert served.status_code == 200 and served.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
            refused = await http.post(server.url, content=padded_ping(2, MAX_MESSAGE_BYTES + 1), headers=headers)
            assert refused.status_code == 413 and "at most 4 MiB" in refused.json()["error"]["message"]


LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pipe sizes, SIOCOUTQ and /proc are Linux's")


def search_request(request_id: int, page_size: int = 10) -> dict[str, Any]:
    arguments = {"query": "session cache", "page_size": page_size}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": SEARCH, "arguments": arguments},
    }


@LINUX
def test_an_answer_is_written_at_once_only_into_an_empty_pipe_it_fits_in(tmp_path: Path) -> None:
    """`AnswerPipe.write_now` writes from the event loop only when the write cannot wait for the client: the pipe
    holds nothing unread and has room for the whole answer. Otherwise it writes nothing (a thread writes it)."""
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "wb", closefd=True) as out, os.fdopen(read_end, "rb", buffering=0) as client:
        pipe = AnswerPipe.of(out)
        assert pipe is not None and pipe.socket_room is None
        size = fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ)
        assert pipe.write_now(b"a" * 100) == 100
        assert pipe.write_now(b"b") == 0  # the client has not read the answer before it
        assert client.read(1000) == b"a" * 100
        assert pipe.write_now(b"c" * (size + 1)) == 0  # more than the pipe holds
        assert pipe.write_now(b"d" * size) == size  # exactly a pipe's worth, into the empty pipe
        assert len(client.read(size)) == size
    with (tmp_path / "answers").open("wb") as file:
        assert AnswerPipe.of(file) is None  # a file: written on a thread


@LINUX
def test_an_answer_is_written_at_once_only_into_a_unix_socket_that_has_delivered_everything() -> None:
    """Node starts a stdio server with a Unix socket pair, not pipes (the Inspector, desktop clients): the same rule,
    with the socket's unread bytes (SIOCOUTQ) and half its send buffer as the room."""
    ours, client = socket.socketpair()
    with ours, client, os.fdopen(os.dup(ours.fileno()), "wb") as out:
        pipe = AnswerPipe.of(out)
        assert pipe is not None and pipe.socket_room == ours.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // 2
        assert pipe.write_now(b"a" * 30_000) == 30_000
        assert pipe.write_now(b"b") == 0  # the client has not read the answer before it
        received = b""
        while len(received) < 30_000:
            received += client.recv(65_536)
        assert received == b"a" * 30_000
        assert pipe.write_now(b"c" * (pipe.socket_room + 1)) == 0  # more than one write may send at once
        assert pipe.write_now(b"d") == 1


@LINUX
def test_answers_are_written_by_the_event_loop_not_a_worker_thread(stdio: RawStdio) -> None:
    """A client that reads each answer before its next request gets every one written by the server's event loop:
    the process runs its main thread, the thread reading stdin and the database connections' threads, and no
    worker thread for the writes (the SDK's transport handed each answer's write and flush to one and back:
    docs/performance.md, "The selective p95 at 1M")."""
    for request_id in range(10, 15):
        assert "result" in stdio.call(search_request(request_id))
    connections = inspect.signature(Database.open).parameters["size"].default
    threads = os.listdir(f"/proc/{stdio.process.pid}/task")
    assert len(threads) == 2 + connections, threads


@LINUX
def test_answers_over_a_unix_socket_are_written_by_the_event_loop_too(tmp_path: Path) -> None:
    """The same over the Unix socket pair Node gives a stdio server for its stdin and stdout."""
    ours, theirs = socket.socketpair()
    with theirs, (tmp_path / "server.log").open("wb") as log:
        process = subprocess.Popen(
            [PYTHON, "-m", "server", "serve", "--db", str(demo_db(tmp_path)), "--project", "atlas"],
            stdin=theirs.fileno(),
            stdout=theirs.fileno(),
            stderr=log,
            cwd=REPO,
            env=server_env(),
        )
    try:
        with ours, ours.makefile("rwb") as wire:
            for request_id, message in enumerate([INITIALIZE, *(search_request(n) for n in range(10, 15))]):
                wire.write(orjson.dumps(message | {"id": request_id}) + b"\n")
                wire.flush()
                assert "result" in orjson.loads(wire.readline())
            connections = inspect.signature(Database.open).parameters["size"].default
            threads = os.listdir(f"/proc/{process.pid}/task")
            assert len(threads) == 2 + connections, threads
    finally:
        process.kill()
        process.wait()


def test_answers_to_a_client_that_reads_late_arrive_whole(stdio: RawStdio) -> None:
    """Answers that find the pipe unread, or do not fit in it (the client reads them only once it has sent every
    request), are written on a thread instead, each still one whole line. (A page of 50 here is ~120 KB, over a
    pipe's 64 KiB; a page of 10 fits in an empty one.)"""
    count = 40
    requests = (orjson.dumps(search_request(100 + n, page_size=10 if n % 2 else 50)) for n in range(count))
    stdio.send(b"\n".join(requests))
    time.sleep(1)  # not a timing assertion: lets answers pile up in the pipe before the client reads any
    answers = [stdio.receive() for _ in range(count)]
    assert sorted(answer["id"] for answer in answers) == list(range(100, 100 + count))
    assert all(answer["result"]["structuredContent"]["page"]["returned_count"] > 0 for answer in answers)
