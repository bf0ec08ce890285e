"""The servers bench_http.py measures: ours and the floor, started on a free loopback port in a process group of
their own under one launcher (`serve` or `uvicorn`), waited for until every worker is up, and stopped with their
whole group."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bench_common import BENCH_DIR, PYTHON, REPO, free_port, process_tree, server_env
from http_load import HOST, healthy

START_TIMEOUT: Final = 120.0


@dataclass
class Server:
    name: str
    """`ours` or `floor`."""
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    stopped: bool = False

    def stop(self) -> None:
        """SIGTERM to its process group (uvicorn stops its workers), SIGKILL if it lingers, then SIGKILL to whatever
        is left in the group (workers of a supervisor that died first). Once: the group's id is not ours after."""
        if self.stopped:
            return
        self.stopped = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGTERM)
                try:
                    self.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait()
            os.killpg(self.process.pid, signal.SIGKILL)


STARTED: list[Server] = []
"""Every server this run started, so that any way out (an error, Ctrl-C, SIGTERM) stops them."""


@dataclass(frozen=True)
class Setup:
    db: Path
    policy: Path
    secret: Path
    token: str
    launcher: str
    uvicorn_args: tuple[str, ...]
    log_dir: Path


def start_server(name: str, workers: int, setup: Setup) -> Server:
    port = free_port()
    env = server_env(STORY_GRAPH_CURSOR_SECRET_FILE=str(setup.secret))
    if setup.launcher == "serve" and name == "ours":
        argv = [PYTHON, "-m", "server", "serve", "--transport", "http", "--db", str(setup.db)]
        argv += ["--policy", str(setup.policy), "--cursor-secret-file", str(setup.secret)]
        argv += ["--port", str(port), "--workers", str(workers)]
    elif setup.launcher == "serve":
        argv = [PYTHON, str(BENCH_DIR / "floor_server.py"), "--db", str(setup.db), "--transport", "http"]
        argv += ["--port", str(port), "--workers", str(workers)]
    else:
        if name == "ours":
            env |= {"STORY_GRAPH_DB": str(setup.db), "STORY_GRAPH_POLICY": str(setup.policy)}
            target = ["--factory", "server.http:create_app"]
        else:
            env["FLOOR_DB"] = str(setup.db)
            target = ["--factory", "floor_server:create_app", "--app-dir", str(BENCH_DIR)]
        argv = [PYTHON, "-m", "uvicorn", *target, "--host", HOST, "--port", str(port), "--workers", str(workers)]
        argv += ["--no-access-log", "--log-level", "warning", *setup.uvicorn_args]
    log = setup.log_dir / f"{name}-{setup.launcher}-{workers}w-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True
        )
    server = Server(name, process, port, log)
    STARTED.append(server)
    return server


async def wait_ready(server: Server, workers: int, launcher: str) -> None:
    """Until /healthz answers 200 and, with several workers, every worker is up: its process exists and, under
    `serve`, its own socket listens. Otherwise the clients' keep-alive connections, opened at the start of a cell,
    would all land on the workers that were ready first and stay there for the whole cell."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited during start-up:\n{server.log.read_text(errors='replace')}")
        if await healthy(server.port) and (
            workers == 1
            or (
                worker_processes(server.process.pid) >= workers
                and (launcher != "serve" or listening_sockets(server.port) >= workers)
            )
        ):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{server.name} not ready after {START_TIMEOUT:g} s:\n{server.log.read_text(errors='replace')}")


def worker_processes(root: int) -> int:
    """uvicorn's workers under the supervisor `root` (spawned processes; not multiprocessing's resource tracker)."""
    count = 0
    for pid in process_tree(root):
        with contextlib.suppress(OSError):
            count += b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return count


def listening_sockets(port: int) -> int:
    """TCP sockets in LISTEN state on `port` (one per worker under SO_REUSEPORT), from /proc/net/tcp."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                count += fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port
    return count
