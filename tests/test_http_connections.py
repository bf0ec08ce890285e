"""HTTP connections as clients' pools use them, against real `serve --transport http` processes (one process, and
several workers): a keep-alive connection left idle for as long as a client pool keeps one is still served, and a
client that connects as soon as the server says `serving on` is served (by every worker)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
import uvicorn
from http_support import PYTHON, REPO, START_TIMEOUT, free_port, http_server, policy_text, server_env, write_secret
from support import demo_db

from server.http import build_http_app
from server.http_connections import RequestHeadDeadline
from server.policy import FixedPolicy, one_run_policy
from server.settings import ServeSettings

pytestmark = pytest.mark.anyio

CLIENT_POOL_IDLE = 6.0
"""Seconds a connection idles before its next request: past the pool expiry of httpx (5 s, the MCP Python SDK's
HTTP client) and of Node (4 s). A server that closes idle connections at about the same moment races the
client, which then sends its request into a closing connection and gets a connection error."""


FRESH_CONNECTIONS = 32
"""New connections made right after `serving on`: all on one of 2 workers has a chance of 2 in 2**32."""


def serve_args(tmp_path: Path, workers: int) -> list[str]:
    db = demo_db(tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text(clients={"alpha": {"projects": ["atlas"], "default_project": "atlas"}}))
    args = ["--db", str(db), "--policy", str(policy), "--cursor-secret-file", str(write_secret(tmp_path))]
    return args + (["--workers", str(workers)] if workers > 1 else [])


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


def health_on_a_new_connection(port: int) -> bytes:
    """The status line of GET /healthz on a connection of its own, or the error that refused it."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request("/healthz"))
            return read_response(sock)[:15]
    except OSError as exc:
        return repr(exc).encode()


@pytest.mark.parametrize("workers", [1, 2])
async def test_an_idle_keep_alive_connection_outlives_the_client_pool_expiry(tmp_path: Path, workers: int) -> None:
    async with http_server(serve_args(tmp_path, workers), tmp_path) as server:
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


@pytest.mark.parametrize("workers", [1, 2])
def test_serving_on_is_said_once_every_worker_answers(tmp_path: Path, workers: int) -> None:
    """A script that waits for `serving on` and then sends requests is served at once, by every worker. With
    `--workers` the line used to come before the workers had even imported the app (seconds on a busy machine):
    the first requests were refused. One process says it as before, with its socket already listening."""
    port = free_port()
    log = tmp_path / "server.stderr"
    argv = [PYTHON, "-m", "server", "serve", "--transport", "http", "--port", str(port), *serve_args(tmp_path, workers)]
    suffix = f" with {workers} worker processes" if workers > 1 else ""
    line = f"serving on http://127.0.0.1:{port}/mcp{suffix}\n"
    with log.open("wb") as err:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO, env=server_env())
    try:
        deadline = time.monotonic() + START_TIMEOUT * 2
        while line not in log.read_text(errors="replace"):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.005)
        # A new connection each: the kernel picks a worker for each.
        answers = [health_on_a_new_connection(port) for _ in range(FRESH_CONNECTIONS)]
        assert answers == [b"HTTP/1.1 200 OK"] * FRESH_CONNECTIONS, log.read_text(errors="replace")
    finally:
        process.terminate()
        process.wait(timeout=30)
    output = log.read_text(errors="replace")
    if workers > 1:
        started = {int(pid) for pid in re.findall(r"Started server process \[(\d+)\]", output)}
        served = {int(pid) for pid in re.findall(r"INFO \[(\d+)\] story_graph_mcp\.access: ", output)}
        assert len(started) == workers and served == started, output
        assert output.count("serving on ") == 1 and "starting 2 worker processes for " in output
    else:
        assert output.count("serving on ") == 1 and "Application startup complete" in output.split(line)[1]


def test_serve_with_workers_that_cannot_start_exits_non_zero(tmp_path: Path) -> None:
    """Workers that fail at start (here the database vanished after `serve` checked it) stop the supervisor, as
    uvicorn does; `serve` then exited with status 0, so a service manager saw a clean stop and did not restart it,
    and a script saw success. It exits with uvicorn's start-up failure status, 3, and never says `serving on`."""
    args = serve_args(tmp_path, 2)
    db = Path(args[args.index("--db") + 1])
    log = tmp_path / "server.stderr"
    argv = [PYTHON, "-m", "server", "serve", "--transport", "http", "--port", str(free_port()), *args]
    with log.open("wb") as err:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO, env=server_env())
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while "starting 2 worker processes" not in log.read_text(errors="replace"):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.005)
        db.unlink()  # before the workers, which import the app first (a second or more), check it
        status = process.wait(timeout=START_TIMEOUT * 2)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = log.read_text(errors="replace")
    assert "failed to start, stopping the parent process" in output, output
    assert status == 3 and "serving on" not in output, output


def test_sighup_replaces_the_workers_one_at_a_time_without_refusing_a_request(tmp_path: Path) -> None:
    """What deployment.md tells an operator to use after an upgrade (`systemctl reload`): each new worker serves
    before the one it replaces stops, so requests sent all along are served."""
    port = free_port()
    log = tmp_path / "server.stderr"
    argv = [PYTHON, "-m", "server", "serve", "--transport", "http", "--port", str(port), *serve_args(tmp_path, 2)]
    with log.open("wb") as err:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO, env=server_env())
    try:
        deadline = time.monotonic() + START_TIMEOUT * 2
        while "serving on " not in log.read_text(errors="replace"):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.01)
        process.send_signal(signal.SIGHUP)
        # Two workers started one after the other, each as slow to start as the first two on a loaded machine.
        deadline = time.monotonic() + START_TIMEOUT * 2
        answers = []
        while log.read_text(errors="replace").count("Finished server process") < 2:
            assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            answers.append(health_on_a_new_connection(port))
            time.sleep(0.01)
        assert answers and set(answers) == {b"HTTP/1.1 200 OK"}, answers
    finally:
        process.terminate()
        process.wait(timeout=30)
    output = log.read_text(errors="replace")
    assert output.count("Started server process") == 4 and process.returncode == 0, output


@contextmanager
def head_deadline_server(tmp_path: Path, keep_alive: int) -> Iterator[int]:
    """The app `serve --transport http` runs, in uvicorn with serve's protocol, on a loopback port, in a thread, with a
    short keep-alive (the deadline of a request head); stopped afterwards."""
    settings = ServeSettings(db=demo_db(tmp_path), project="atlas")
    app = build_http_app(settings, FixedPolicy(one_run_policy("atlas")[0]))
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_config=None, timeout_keep_alive=keep_alive, http=RequestHeadDeadline
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def closed_after(sock: socket.socket, trickle: bytes = b"") -> float:
    """Seconds until the server closes the connection, sending `trickle` a byte every 0.2 s meanwhile."""
    started = time.monotonic()
    sock.settimeout(0.2)
    for byte in [trickle[i : i + 1] for i in range(len(trickle))] + [b""] * 100:
        try:
            if byte:
                sock.sendall(byte)
            if sock.recv(65536) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except ConnectionError:
            return time.monotonic() - started
    return time.monotonic() - started


def test_a_connection_that_sends_no_request_head_is_closed_after_the_keep_alive_timeout(tmp_path: Path) -> None:
    """uvicorn alone timed out only idle connections after an answer, and stopped the timer at the first byte: a
    connection that sent nothing, or a request head a byte at a time (slowloris), or a body nobody reads after its
    answer, stayed open forever; a few hundred of them, made without a token, used up the file descriptors."""
    keep_alive = 1
    slow_head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 40
    with head_deadline_server(tmp_path, keep_alive) as port:
        with socket.create_connection(("127.0.0.1", port)) as silent:
            assert keep_alive - 0.5 < closed_after(silent) < keep_alive + 3
        with socket.create_connection(("127.0.0.1", port)) as slow:
            assert keep_alive - 0.5 < closed_after(slow, slow_head) < keep_alive + 3, "each byte does not restart it"
        with socket.create_connection(("127.0.0.1", port)) as unread_body:
            unread_body.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n")
            unread_body.settimeout(10)
            assert unread_body.recv(65536).startswith(b"HTTP/1.1 200")
            assert closed_after(unread_body, b"x" * 40) < keep_alive + 3, "a body sent after the answer does not"
        # A client that sends its requests is served as before, on one connection, with pauses under the timeout.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            for _ in range(3):
                time.sleep(keep_alive / 2)
                client.sendall(request("/healthz"))
                assert read_response(client).startswith(b"HTTP/1.1 200")
            assert closed_after(client) < keep_alive + 3, "and an idle one is closed as before"
