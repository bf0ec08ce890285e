"""HTTP throughput: selective searches from 1, 4 and 16 concurrent clients against 1, 2 and 4 workers, beside the floor.

    python benchmarks/bench_http.py --sizes 100k --seconds 60                   # the full matrix, ~12 min
    python benchmarks/bench_http.py --db /tmp/sg-100k.db --repeat 3 --json /tmp/http.json
    python benchmarks/bench_http.py --sizes 100k --clients 16 --workers 1,2 --launcher uvicorn
    python benchmarks/bench_http.py --sizes 2000 --seconds 2 --warmup 1 --workers 1 --clients 1,4   # a quick check

The graph is a generated one from the cache (--sizes, see bench_common.ensure_graph) or --db (a make_large_graph.py
graph, used as it is). For each worker count it starts, on a free loopback port and in a process group of its own,
our server as docs/deployment.md says: `story-graph-mcp serve --transport http --workers W` with a policy file (one
bearer token made for this run) and a cursor secret file (launcher `serve`, the default: a listening socket per
worker), or `uvicorn --factory server.http:create_app --workers W` configured by the environment (launcher
`uvicorn`: uvicorn's one shared socket). Then the floor (floor_server.py: the MCP SDK and one FTS5 query per call,
no token) under the same launcher. It waits until /healthz answers and every worker process exists, and for each
client count drives the load generator (http_load.py: raw HTTP/1.1, one keep-alive connection per client, a closed
loop) for --warmup seconds untimed, then --seconds timed on the same connections (the floor: --floor-seconds).

Queries (rotating, page 1 of 10): `xylophone`, `麒麟`, `moderato` and three identifiers read from the graph's big
scope (an event, an entity and a source id), or --queries. The floor gets the same query texts.

Printed per cell: calls/s (successful calls over wall time), p50/p95 latency as the client saw it, errors (HTTP,
JSON-RPC, tool errors, dropped connections, the first one shown), the server's CPU time per call (all its
processes, from /proc: steadier than wall time on a shared machine), the load generator's own CPU share, and the
server's RSS (all processes) sampled every --sample seconds: median of the first and of the last tenth of the
samples, the peak, and the drift between the two (near 0 when memory is flat). Then what else the machine did.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import secrets
import shlex
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

import orjson
from bench_common import (
    BIG_PROJECT,
    FLOOR_TOOL,
    SEARCH,
    add_graph_options,
    ensure_graph,
    fmt_ms,
    graph_summary,
    machine_header,
    machine_report,
    machine_state,
    markdown_table,
    p50,
    p95,
    parse_sizes,
    positive_ints,
    size_label,
    tree_cpu_seconds,
    tree_rss_kib,
)
from http_load import Clients, call_once, tools_call
from http_servers import STARTED, Server, Setup, start_server, wait_ready

LAUNCHERS: Final = {
    "serve": "story-graph-mcp serve --transport http --workers W (a socket per worker: SO_REUSEPORT, TCP_NODELAY)",
    "uvicorn": "uvicorn --factory server.http:create_app --workers W (uvicorn's one shared socket)",
}
QUERY_WORDS: Final = ("xylophone", "麒麟", "moderato")


# --- one cell: a server, a worker count, a client count -----------------------------------------------------


@dataclass
class Cell:
    server: str
    workers: int
    clients: int
    seconds: float
    calls: int
    errors: int
    calls_per_s: float
    p50_ms: float
    p95_ms: float
    server_cpu_ms_per_call: float
    loadgen_cpu_share: float
    rss_first_mib: float
    rss_last_mib: float
    rss_peak_mib: float
    error_samples: list[str] = field(default_factory=list)

    def row(self) -> tuple[str, ...]:
        errors = f"{self.errors:,}" + (f" ({self.error_samples[0]})" if self.error_samples else "")
        cpu = f"{self.server_cpu_ms_per_call:.2f}" if self.calls else "—"
        return (
            self.server,
            str(self.workers),
            str(self.clients),
            f"{self.calls_per_s:,.1f}",
            fmt_ms(self.p50_ms),
            fmt_ms(self.p95_ms),
            errors,
            cpu,
            f"{100 * self.loadgen_cpu_share:.0f} %",
            f"{self.rss_first_mib:.0f} → {self.rss_last_mib:.0f} ({self.rss_peak_mib:.0f})",
            f"{self.rss_last_mib - self.rss_first_mib:+.1f}",
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
    "load generator CPU",
    "RSS MiB first → last (peak)",
    "RSS drift MiB",
)


async def measure_cell(
    server: Server, workers: int, clients: int, requests: list[bytes], args: argparse.Namespace
) -> Cell:
    seconds = args.seconds if server.name == "ours" else args.floor_seconds
    load = Clients(server.port, requests, clients)
    try:
        await load.run(args.warmup)
        samples: list[float] = []
        done = asyncio.Event()

        async def sample() -> None:
            while not done.is_set():
                samples.append(tree_rss_kib(server.process.pid) / 1024)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), args.sample)

        sampler = asyncio.create_task(sample())
        cpu_before, own_before = tree_cpu_seconds(server.process.pid), time.process_time()
        tally = await load.run(seconds)
        cpu = tree_cpu_seconds(server.process.pid) - cpu_before
        own = time.process_time() - own_before
        done.set()
        await sampler
    finally:
        await load.close()
    samples = samples or [float("nan")]
    calls, tenth = len(tally.latencies_ms), max(1, len(samples) // 10)
    return Cell(
        server=server.name,
        workers=workers,
        clients=clients,
        seconds=round(tally.seconds, 2),
        calls=calls,
        errors=tally.errors,
        calls_per_s=calls / tally.seconds,
        p50_ms=p50(tally.latencies_ms),
        p95_ms=p95(tally.latencies_ms),
        server_cpu_ms_per_call=1000 * cpu / calls if calls else float("nan"),
        loadgen_cpu_share=own / tally.seconds,
        rss_first_mib=statistics.median(samples[:tenth]),
        rss_last_mib=statistics.median(samples[-tenth:]),
        rss_peak_mib=max(samples),
        error_samples=tally.error_samples,
    )


def medians(cells: list[Cell]) -> list[Cell]:
    """One cell per (server, workers, clients): the median of each figure over the repeats, errors summed, the
    highest peak RSS."""
    groups: dict[tuple[str, int, int], list[Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.server, cell.workers, cell.clients), []).append(cell)
    merged = []
    for (name, workers, clients), group in groups.items():

        def med(figure: str, group: list[Cell] = group) -> float:
            return float(statistics.median(float(getattr(c, figure)) for c in group))

        merged.append(
            Cell(
                name,
                workers,
                clients,
                med("seconds"),
                int(med("calls")),
                sum(c.errors for c in group),
                med("calls_per_s"),
                med("p50_ms"),
                med("p95_ms"),
                med("server_cpu_ms_per_call"),
                med("loadgen_cpu_share"),
                med("rss_first_mib"),
                med("rss_last_mib"),
                max(c.rss_peak_mib for c in group),
            )
        )
    return merged


# --- a whole graph: every repeat, worker count, server and client count -----------------------------------------


def default_queries(db: Path, project: str) -> list[str]:
    """Rare words, and identifiers that exist in the big scope of a make_large_graph.py graph."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:

        def first(sql: str) -> str:
            row = conn.execute(sql, {"scope": f'projects:["{project}"]'}).fetchone()
            if row is None:
                raise SystemExit(f"{db}: not a make_large_graph.py graph (nothing for {sql!r}); pass --queries")
            return str(row[0])

        event = first("SELECT id FROM events WHERE scope_key = :scope ORDER BY id LIMIT 1 OFFSET 421")
        entity = first("SELECT id FROM entities WHERE scope_key = :scope ORDER BY id LIMIT 1 OFFSET 37")
        source = first(
            "SELECT original_source_id FROM source_references WHERE scope_key = :scope ORDER BY id LIMIT 1 OFFSET 55"
        )
    return [*QUERY_WORDS, event, entity, source]


def requests_for(server: Server, queries: Sequence[str], setup: Setup, protocol: str) -> list[bytes]:
    if server.name == "ours":
        return [
            tools_call(server.port, SEARCH, {"query": q, "page_size": 10}, token=setup.token, protocol=protocol)
            for q in queries
        ]
    return [tools_call(server.port, FLOOR_TOOL, {"query": q}, token=None, protocol=protocol) for q in queries]


async def show_queries(server: Server, requests: list[bytes], queries: Sequence[str]) -> None:
    """Each query answers, and how many it finds (so a reader sees that they are selective)."""
    for query, request in zip(queries, requests, strict=True):
        content, problem = await call_once(server.port, request)
        if content is None:
            raise RuntimeError(f"query {query!r} failed: {problem}")
        page = content["page"]
        print(f"query {query!r}: {page['returned_count']} returned of {page['total_count']}", flush=True)


async def measure_graph(setup: Setup, queries: Sequence[str], args: argparse.Namespace) -> list[Cell]:
    names = ["ours", *([] if args.no_floor else ["floor"])]
    cells: list[Cell] = []
    for repeat in range(args.repeat):
        if args.repeat > 1:
            print(f"\nrepeat {repeat + 1} of {args.repeat}", flush=True)
        table_started = False
        for workers in args.workers:
            for name in names:
                server = start_server(name, workers, setup)
                try:
                    await wait_ready(server, workers, setup.launcher)
                    requests = requests_for(server, queries, setup, args.protocol)
                    if name == "ours" and repeat == 0 and workers == args.workers[0]:
                        await show_queries(server, requests, queries)
                    if not table_started:
                        print("\n" + markdown_table(HEADER, []), flush=True)
                        table_started = True
                    for clients in args.clients:
                        print(f"  {name}: {workers} workers, {clients} clients ...", file=sys.stderr, flush=True)
                        cell = await measure_cell(server, workers, clients, requests, args)
                        cells.append(cell)
                        print(markdown_table(HEADER, [cell.row()]).splitlines()[-1], flush=True)
                        for problem in cell.error_samples:
                            print(f"  {name}, {workers} workers, {clients} clients: {problem}", file=sys.stderr)
                finally:
                    server.stop()
    return cells


def write_policy(folder: Path, token: str, project: str) -> Path:
    digest = hashlib.sha256(token.encode()).hexdigest()
    path = folder / "policy.toml"
    path.write_text(
        f'version = 1\n\n[clients.bench]\ntoken_sha256 = ["{digest}"]\nprojects = "*"\ndefault_project = "{project}"\n'
    )
    return path


def graphs(args: argparse.Namespace) -> list[tuple[str, Path]]:
    if args.db is not None:
        if not args.db.is_file():
            raise SystemExit(f"{args.db}: no such file (make one with benchmarks/make_large_graph.py)")
        return [(f"{args.db}", args.db)]
    found = []
    for objects in parse_sizes(args.sizes):
        db = ensure_graph(args.cache_dir, objects, source_code_points=args.source_code_points)
        found.append((f"{size_label(objects)}: {graph_summary(db) or f'{objects:,} objects'}; {db.name}", db))
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    graph = parser.add_mutually_exclusive_group()
    graph.add_argument("--sizes", default="100k", help="generated graph sizes, e.g. 10k,100k (default 100k)")
    graph.add_argument("--db", type=Path, help="an existing make_large_graph.py graph instead (used as it is)")
    add_graph_options(parser)
    parser.add_argument("--workers", type=positive_ints, default=[1, 2, 4], help="worker counts (default 1,2,4)")
    parser.add_argument("--clients", type=positive_ints, default=[1, 4, 16], help="concurrent clients (default 1,4,16)")
    parser.add_argument("--seconds", type=float, default=60.0, help="timed seconds per cell (default 60)")
    parser.add_argument(
        "--floor-seconds", type=float, help="timed seconds per floor cell (default: --seconds, at most 10)"
    )
    parser.add_argument("--warmup", type=float, default=3.0, help="untimed seconds before each cell (default 3)")
    parser.add_argument("--sample", type=float, default=1.0, help="seconds between RSS samples (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="run the whole matrix this many times; print medians")
    parser.add_argument("--queries", help="comma-separated queries (default: 3 rare words and 3 ids of the graph)")
    parser.add_argument(
        "--project",
        default=BIG_PROJECT,
        help=f"the project the searches read (default {BIG_PROJECT!r}, a make_large_graph.py graph's; with --db, one"
        " of your graph's)",
    )
    parser.add_argument(
        "--protocol",
        choices=("modern", "legacy"),
        default="modern",
        help="modern: 2026-07-28 with _meta and Mcp-Method/Mcp-Name headers, as the SDK client; legacy: 2025-11-25",
    )
    parser.add_argument("--launcher", choices=sorted(LAUNCHERS), default="serve", help="how the servers are started")
    parser.add_argument(
        "--uvicorn-args", default="", help='launcher uvicorn: more uvicorn options, e.g. "--loop asyncio --http h11"'
    )
    parser.add_argument("--no-floor", action="store_true", help="skip the floor server")
    parser.add_argument("--json", type=Path, help="also write every cell (and the medians) to this file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.uvicorn_args and args.launcher != "uvicorn":
        parser.error("--uvicorn-args needs --launcher uvicorn")
    args.floor_seconds = args.floor_seconds if args.floor_seconds is not None else min(args.seconds, 10.0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` stops the servers
    print(machine_header())
    print(f"launcher: {LAUNCHERS[args.launcher]}; protocol {args.protocol}")
    print(
        f"{args.seconds:g} s per cell (the floor {args.floor_seconds:g} s) after {args.warmup:g} s of warm-up; "
        f"RSS sampled every {args.sample:g} s"
    )
    dump = []
    try:
        with tempfile.TemporaryDirectory(prefix="sg-bench-http-") as temp:
            folder = Path(temp)
            secret = folder / "cursor-secret"
            secret.write_text(secrets.token_hex(32) + "\n")
            token = "sgm_bench_" + secrets.token_hex(16)
            policy = write_policy(folder, token, args.project)
            for title, db in graphs(args):
                print(f"\n## {title}", flush=True)
                queries = args.queries.split(",") if args.queries else default_queries(db, args.project)
                setup = Setup(db, policy, secret, token, args.launcher, tuple(shlex.split(args.uvicorn_args)), folder)
                before = machine_state()
                started = time.perf_counter()
                cells = asyncio.run(measure_graph(setup, queries, args))
                merged = medians(cells)
                if args.repeat > 1:
                    print(f"\nmedians of {args.repeat} repeats (errors summed, peak RSS the highest)\n")
                    print(markdown_table(HEADER, [cell.row() for cell in merged]))
                print(f"\n{time.perf_counter() - started:.0f} s in all")
                print("\n".join(machine_report(before, machine_state())))
                dump.append(
                    {
                        "graph": str(db),
                        "queries": queries,
                        "cells": [asdict(c) for c in cells],
                        "medians": [asdict(c) for c in merged],
                    }
                )
    finally:
        for server in STARTED:
            server.stop()
    if args.json is not None:
        args.json.write_bytes(orjson.dumps({"args": vars(args), "graphs": dump}, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
