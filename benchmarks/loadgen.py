"""The parts of bench_http_load.py that know HTTP and processes, not MCP: raw HTTP/1.1 keep-alive connections,
a closed-loop client, the server process group we start, and its CPU time and RSS from /proc (Linux)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

CALL_TIMEOUT: Final = 30.0
Check = Callable[[int, bytes], bool]
"""Whether an answer (status, body) is a success."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    """A uvicorn process group we started (the supervisor and, with --workers > 1, its worker processes)."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    def pids(self) -> list[int]:
        """The supervisor and all its descendants, from /proc."""
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
        found, todo = [], [self.process.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo += children.get(pid, [])
        return found

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # its own process group (start_new_session)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


HOST: Final = "127.0.0.1"


class Connection:
    """One keep-alive HTTP/1.1 connection; a request is prepared bytes, an answer is (status, body)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def request(self, data: bytes) -> tuple[int, bytes]:
        self.writer.write(data)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)


async def client_loop(
    port: int, requests: list[bytes], offset: int, stop: asyncio.Event, tally: Tally, ok: Check
) -> None:
    """One client: a request, its whole answer, the next request, until `stop`; a dropped connection is
    reopened (and counted as an error)."""
    connection: Connection | None = None
    index = offset
    while not stop.is_set():
        data = requests[index % len(requests)]
        index += 1
        started = time.perf_counter()
        try:
            if connection is None:
                connection = await Connection.open(port)
            status, body = await asyncio.wait_for(connection.request(data), CALL_TIMEOUT)
            good = ok(status, body)
            problem = "" if good else f"HTTP {status}: {body[:300]!r}"
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
            good, problem = False, f"{type(exc).__name__}: {exc}"
            if connection is not None:
                connection.close()
            connection = None
        tally.latencies.append(time.perf_counter() - started)
        if not good:
            tally.errors += 1
            if len(tally.error_samples) < 3:
                tally.error_samples.append(problem)
    if connection is not None:
        connection.close()


def server_cpu_seconds(pids: Sequence[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def rss_mib(pids: Sequence[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]
