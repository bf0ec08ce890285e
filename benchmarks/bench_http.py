"""HTTP throughput: selective searches from 1, 4 and 16 concurrent clients against 1, 2 and 4 uvicorn workers.

    python benchmarks/bench_http.py --sizes 100k --seconds 60
    python benchmarks/bench_http.py --sizes 10k --seconds 5 --workers 1 --clients 1,4     # a quick check

For each size and worker count it starts, on a free loopback port, our server exactly as docs/deployment.md says
for several workers (`uvicorn --factory server.http:create_app --workers W`, configured by STORY_GRAPH_DB, a
policy file with one bearer token made for this run, and a shared cursor secret), then the floor server
(`uvicorn --factory floor_server:create_app --workers W`, one FTS5 query per call, no auth). For each client count
it runs the light load generator (http_load.py) for --seconds: every client keeps one keep-alive connection and
sends its next `tools/call` as soon as the answer arrives, rotating through selective queries. It samples the
server's RSS (all its processes) every half second and its CPU time, then stops the server.

Printed per run: calls/s, latency p50/p95 (ms, as the client sees it), errors (HTTP, JSON-RPC or tool errors),
server CPU ms per call, and RSS: at the start, at the end, the maximum, and the drift (median of the last tenth of
the samples minus the median of the first tenth) to show whether memory is flat over the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from bench_common import (
    BENCH_DIR,
    FLOOR_TOOL,
    PYTHON,
    REPO,
    SEARCH,
    SELECTIVE_QUERIES,
    default_cache_dir,
    ensure_graph,
    fmt_ms,
    free_port,
    graph_summary,
    machine_header,
    machine_report,
    machine_state,
    markdown_table,
    p50,
    p95,
    parse_sizes,
    process_tree,
    server_env,
    size_label,
    tree_rss_kib,
)
from http_load import LoadResult, McpCall, run_load, wait_healthy

SAMPLE_SECONDS: Final = 0.5
START_TIMEOUT: Final = 120.0


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    port: int

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class Run:
    server: str
    workers: int
    clients: int
    load: LoadResult
    rss_kib: list[int] = field(default_factory=list)
    cpu_seconds: float = 0.0

    def row(self) -> tuple[str, ...]:
        calls = len(self.load.latencies_ms)
        rss = [r / 1024 for r in self.rss_kib] or [0.0]
        tenth = max(1, len(rss) // 10)
        drift = p50(rss[-tenth:]) - p50(rss[:tenth])
        cpu = f"{1000 * self.cpu_seconds / calls:.1f}" if calls else "—"
        errors = str(self.load.errors) + (f" ({self.load.first_error})" if self.load.first_error else "")
        return (
            self.server,
            str(self.workers),
            str(self.clients),
            f"{calls / self.load.seconds:,.0f}",
            fmt_ms(p50(self.load.latencies_ms)),
            fmt_ms(p95(self.load.latencies_ms)),
            errors,
            cpu,
            f"{rss[0]:.0f} → {rss[-1]:.0f} (max {max(rss):.0f})",
            f"{drift:+.1f}",
        )


HEADER: Final = (
    "server",
    "workers",
    "clients",
    "calls/s",
    "p50 ms",
    "p95 ms",
    "errors",
    "server CPU ms/call",
    "RSS MiB start → end (max)",
    "RSS drift MiB",
)


def write_policy(directory: Path, token: str) -> Path:
    digest = hashlib.sha256(token.encode()).hexdigest()
    path = directory / "policy.toml"
    path.write_text(
        f'version = 1\n\n[clients.bench]\ntoken_sha256 = ["{digest}"]\nprojects = "*"\ndefault_project = "big"\n'
    )
    return path


def start_server(name: str, factory: str, workers: int, env: dict[str, str], access_log: bool, log: Path) -> Server:
    port = free_port()
    command = [PYTHON, "-m", "uvicorn", "--factory", factory, "--host", "127.0.0.1", "--port", str(port)]
    command += ["--workers", str(workers), "--log-level", "warning"]
    command += [] if access_log else ["--no-access-log"]
    if factory.startswith("floor_server:"):
        command += ["--app-dir", str(BENCH_DIR)]
    with log.open("ab") as errors:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True
        )
    return Server(name, process, port)


def stop_server(server: Server) -> None:
    """SIGTERM (uvicorn stops its workers), then SIGKILL to the process group we created if it lingers."""
    if server.alive():
        server.process.terminate()
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):  # workers left behind by a killed supervisor
        os.killpg(server.process.pid, signal.SIGKILL)


def _cpu_seconds(root: int) -> float:
    total = 0
    for pid in process_tree(root):
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


async def measure(server: Server, workers: int, clients: int, calls: Sequence[McpCall], seconds: float) -> Run:
    samples: list[int] = []
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            samples.append(tree_rss_kib(server.process.pid))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), SAMPLE_SECONDS)

    sampler = asyncio.create_task(sample())
    cpu_before = _cpu_seconds(server.process.pid)
    load = await run_load(server.port, calls, clients, seconds)
    cpu = _cpu_seconds(server.process.pid) - cpu_before
    done.set()
    await sampler
    return Run(server.name, workers, clients, load, samples, cpu)


async def serve_and_measure(
    server: Server, workers: int, client_counts: Sequence[int], calls: Sequence[McpCall], seconds: float
) -> list[Run]:
    await wait_healthy(server.port, START_TIMEOUT, server.alive)
    runs = []
    for clients in client_counts:
        print(
            f"  {server.name}: {workers} workers, {clients} clients, {seconds:.0f} s ...", file=sys.stderr, flush=True
        )
        runs.append(await measure(server, workers, clients, calls, seconds))
    return runs


def run_size(db: Path, args: argparse.Namespace, queries: Sequence[str]) -> list[Run]:
    token = "sgm_bench_" + secrets.token_hex(16)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="sg-bench-http-") as temp:
        policy = write_policy(Path(temp), token)
        log = Path(temp) / "servers.log"
        ours_env = server_env(STORY_GRAPH_DB=str(db), STORY_GRAPH_POLICY=str(policy))
        floor_env = server_env(FLOOR_DB=str(db))
        ours_calls = [McpCall.build(SEARCH, {"query": q}, token, args.protocol) for q in queries]
        floor_calls = [McpCall.build(FLOOR_TOOL, {"query": q}, None, args.protocol) for q in queries]
        targets: list[tuple[str, str, dict[str, str], list[McpCall]]] = [
            ("ours", "server.http:create_app", ours_env, ours_calls)
        ]
        if not args.no_floor:
            targets.append(("floor", "floor_server:create_app", floor_env, floor_calls))
        for workers in args.workers:
            for name, factory, env, calls in targets:
                server = start_server(name, factory, workers, env, args.access_log, log)
                try:
                    runs += asyncio.run(serve_and_measure(server, workers, args.clients, calls, args.seconds))
                except RuntimeError as exc:
                    tail = log.read_text(errors="replace")[-2000:]
                    raise SystemExit(f"{name} with {workers} workers: {exc}\n{tail}") from exc
                finally:
                    stop_server(server)
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100k", help="graph sizes, e.g. 10k,100k")
    parser.add_argument("--workers", default="1,2,4", help="uvicorn worker counts")
    parser.add_argument("--clients", default="1,4,16", help="concurrent clients")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each run")
    parser.add_argument("--queries", help="comma-separated queries (default: the selective set)")
    parser.add_argument("--protocol", choices=("modern", "legacy"), default="modern")
    parser.add_argument("--access-log", action="store_true", help="keep uvicorn's access log on (off by default)")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor server")
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir(), help="where built graphs are kept")
    parser.add_argument("--source-code-points", type=int, help="big source size of generated graphs")
    args = parser.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",")]
    args.clients = [int(c) for c in args.clients.split(",")]
    queries = args.queries.split(",") if args.queries else list(SELECTIVE_QUERIES)
    print(machine_header())
    print(f"queries (rotating): {', '.join(queries)}; protocol {args.protocol}; {args.seconds:.0f} s per run")
    for objects in parse_sizes(args.sizes):
        db = ensure_graph(args.cache_dir, objects, source_code_points=args.source_code_points)
        print(f"\n## {size_label(objects)}: {graph_summary(db) or f'{objects:,} objects'}; {db.name}\n")
        before = machine_state()
        started = time.perf_counter()
        runs = run_size(db, args, queries)
        print(markdown_table(HEADER, [run.row() for run in runs]))
        print(f"\n{time.perf_counter() - started:.0f} s in all")
        print("\n".join(machine_report(before, machine_state())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
