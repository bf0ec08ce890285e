"""HTTP throughput: selective searches against `uvicorn --factory server.http:create_app --workers W`.

    python benchmarks/bench_http_load.py                               # builds a 100,000-object graph first
    python benchmarks/bench_http_load.py --db /tmp/sg-100k.db          # reuse one (make_large_graph.py)
    python benchmarks/bench_http_load.py --db /tmp/sg-100k.db --seconds 10 --workers 1,2 --clients 16

A light load generator, not an MCP client: asyncio and raw HTTP/1.1 over keep-alive connections, one per
concurrent client, each sending its next `tools/call` as soon as the previous answer is in (a closed loop).
Requests are prepared once; per answer it reads the status line, the headers and `Content-Length` bytes,
and parses the JSON body to check that the result is not an error (any non-200, `isError`, missing
structuredContent or dropped connection counts as an error). The stateless server needs no `initialize`.

For each worker count it starts the server itself on a free loopback port, configured from the environment
as in docs/deployment.md (STORY_GRAPH_DB, STORY_GRAPH_POLICY with one bearer token made for the run,
STORY_GRAPH_CURSOR_SECRET_FILE), waits for /healthz, and for each client count runs `--warmup` seconds
untimed, then `--seconds` timed (the floor: `--floor-seconds`). It reports calls/s, p50/p95 latency,
errors, the server's CPU time per call (all its processes, from /proc: steadier than wall time on a
shared machine), the load generator's own CPU share, and the server's RSS (all processes) sampled every
`--sample` seconds over the timed run: first and last tenth of the samples (median of each) and the peak,
so a long run shows whether it stays flat.

Beside it, unless --no-floor, the same matrix against a floor: a minimal ASGI app under the same uvicorn
(`floor_app` below: reads the body, parses it, answers a canned result of the same size). The floor is
what this machine, uvicorn and this load generator allow at all; the gap to it is the cost of our server.

The queries (rotated per client) are selective: rare words (`xylophone`, `麒麟`), a medium-rare one
(`moderato`, first page of 10), and identifiers (an event id, an entity id, a source id) read from the
graph's big scope. Everything runs on 127.0.0.1 and every process started is stopped, by its own id.
Writes only inside a temporary directory it creates (the graph too unless --db is given; --db is only read).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import orjson

ROOT: Final = Path(__file__).resolve().parents[1]
HERE: Final = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from loadgen import (  # noqa: E402
    HOST,
    Connection,
    Server,
    Tally,
    client_loop,
    free_port,
    p95,
    rss_mib,
    server_cpu_seconds,
)

TOKEN: Final = "sgm_bench-http-load-token-0123456789"
SECRET: Final = "bench-http-load-cursor-secret-0123456789"
BIG_SCOPE: Final = 'projects:["big"]'
START_TIMEOUT: Final = 60.0
LAUNCHERS: Final = {
    "serve": "story-graph-mcp serve --transport http --workers W (a socket per worker: SO_REUSEPORT, TCP_NODELAY)",
    "uvicorn": "uvicorn --factory server.http:create_app --workers W (uvicorn's own socket)",
}
FLOOR_BODY_BYTES: Final = 7_000
"""About the size of a selective search answer (first page of `moderato`, 10 items, is larger; a rare word smaller)."""


# --- the floor: the least an ASGI app under uvicorn can do for a POST ----------------------------------------


def _floor_body() -> bytes:
    text = "x" * (FLOOR_BODY_BYTES // 2 - 100)
    result = {"content": [{"type": "text", "text": text}], "structuredContent": {"text": text}, "isError": False}
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": result})


_FLOOR_BODY: Final = _floor_body()


async def floor_app(
    scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
) -> None:
    """`uvicorn --app-dir benchmarks bench_http_load:floor_app`: read the body, parse it, answer a canned result."""
    if scope["type"] == "lifespan":
        while True:
            event = (await receive())["type"]
            if event == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif event == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["method"] == "POST":
        orjson.loads(body)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(_FLOOR_BODY)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": _FLOOR_BODY})


# --- the server under test ---------------------------------------------------------------------------------


STARTED: list[Server] = []
"""Every server this run started, so that any way out (an error, Ctrl-C) stops them."""


def start_server(
    kind: str, launcher: str, workers: int, env: dict[str, str], folder: Path, extra: Sequence[str]
) -> Server:
    """The story graph server or the floor, under `serve --transport http --workers W` (launcher `serve`; the floor
    under the same kind of socket, see `serve_floor`) or under `uvicorn --workers W` (launcher `uvicorn`)."""
    port = free_port()
    if launcher == "serve" and kind == "story":
        argv = [sys.executable, "-m", "server", "serve", "--transport", "http", "--db", env["STORY_GRAPH_DB"]]
        argv += ["--policy", env["STORY_GRAPH_POLICY"], "--cursor-secret-file", env["STORY_GRAPH_CURSOR_SECRET_FILE"]]
        argv += ["--port", str(port), "--workers", str(workers)]
    elif launcher == "serve":
        argv = [sys.executable, str(Path(__file__).resolve()), "--serve-floor", str(port), "--workers", str(workers)]
    else:
        target = ["--app-dir", str(HERE), "bench_http_load:floor_app"] if kind == "floor" else []
        target = target or ["--factory", "server.http:create_app"]
        argv = [sys.executable, "-m", "uvicorn", *target, "--host", HOST, "--port", str(port)]
        argv += ["--workers", str(workers), "--no-access-log", "--log-level", "warning", *extra]
    log = folder / f"{kind}-{launcher}-{workers}w-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
        )
    server = Server(process, port, log)
    STARTED.append(server)
    return server


def serve_floor(port: int, workers: int) -> None:
    """The floor as `serve --transport http --workers W` runs the server (server/workers.py): a listening socket
    per worker, or one uvicorn process."""
    import uvicorn

    from server.workers import SocketPerWorker

    # This file's folder is on sys.path (it is the script's), and spawned workers inherit sys.path.
    config = uvicorn.Config("bench_http_load:floor_app", host=HOST, port=port, workers=workers, log_level="warning")
    if workers == 1:
        uvicorn.Server(config).run()
    else:
        SocketPerWorker(config, HOST, port).run()


async def wait_ready(server: Server, workers: int) -> None:
    """Until /healthz (the floor: any path) answers 200 and every worker process exists."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{server.log.read_text(errors='replace')}")
        try:
            connection = await Connection.open(server.port)
            try:
                status, _ = await connection.request(f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
            finally:
                connection.close()
            if status == 200 and len(server.pids()) >= (workers + 1 if workers > 1 else 1):
                return
        except OSError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError(f"server not ready after {START_TIMEOUT:g} s:\n{server.log.read_text(errors='replace')}")


# --- the load generator -------------------------------------------------------------------------------------


def call_request(port: int, arguments: dict[str, Any]) -> bytes:
    body = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "story_graph_search", "arguments": arguments},
        }
    )
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {HOST}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"MCP-Protocol-Version: 2025-11-25\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def answer_ok(status: int, body: bytes) -> bool:
    if status != 200:
        return False
    result = orjson.loads(body).get("result")
    return isinstance(result, dict) and not result.get("isError") and result.get("structuredContent") is not None


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
    error_samples: list[str]


async def run_cell(
    server: Server,
    kind: str,
    workers: int,
    clients: int,
    requests: list[bytes],
    warmup: float,
    seconds: float,
    sample: float,
) -> Cell:
    pids = server.pids()
    for timed, duration in ((False, warmup), (True, seconds)):
        stop = asyncio.Event()
        tally = Tally()
        rss: list[float] = []
        tasks = [
            asyncio.create_task(client_loop(server.port, requests, n * 7, stop, tally, answer_ok))
            for n in range(clients)
        ]
        cpu_before, own_before, started = server_cpu_seconds(pids), time.process_time(), time.perf_counter()
        deadline = started + duration
        while (now := time.perf_counter()) < deadline:
            rss.append(rss_mib(pids))
            await asyncio.sleep(min(sample, deadline - now))
        stop.set()
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
        cpu = server_cpu_seconds(pids) - cpu_before
        own = time.process_time() - own_before
        if not timed:
            continue
        calls = len(tally.latencies)
        tenth = max(1, len(rss) // 10)
        return Cell(
            server=kind,
            workers=workers,
            clients=clients,
            seconds=round(elapsed, 2),
            calls=calls,
            errors=tally.errors,
            calls_per_s=calls / elapsed,
            p50_ms=statistics.median(tally.latencies) * 1000 if calls else float("nan"),
            p95_ms=p95(tally.latencies) * 1000 if calls else float("nan"),
            server_cpu_ms_per_call=cpu * 1000 / calls if calls else float("nan"),
            loadgen_cpu_share=own / elapsed,
            rss_first_mib=statistics.median(rss[:tenth]),
            rss_last_mib=statistics.median(rss[-tenth:]),
            rss_peak_mib=max(rss),
            error_samples=tally.error_samples,
        )
    raise AssertionError("unreachable")


# --- set-up: graph, policy, queries ---------------------------------------------------------------------------


def selective_queries(db: Path) -> list[dict[str, Any]]:
    """Rare words and identifiers that exist in the big scope of a make_large_graph.py graph."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:

        def first(sql: str) -> str:
            row = conn.execute(sql, {"scope": BIG_SCOPE}).fetchone()
            if row is None:
                raise SystemExit(f"{db}: not a make_large_graph.py graph (no rows for {sql!r})")
            return str(row[0])

        event = first("SELECT id FROM events WHERE scope_key = :scope ORDER BY id LIMIT 1 OFFSET 421")
        entity = first("SELECT id FROM entities WHERE scope_key = :scope ORDER BY id LIMIT 1 OFFSET 37")
        source = first(
            "SELECT original_source_id FROM source_references WHERE scope_key = :scope ORDER BY id LIMIT 1 OFFSET 55"
        )
    words = ["xylophone", "麒麟", "moderato"]
    return [{"query": q, "page_size": 10} for q in [*words, event, entity, source]]


def environment(db: Path, folder: Path) -> dict[str, str]:
    import hashlib

    policy = folder / "policy.toml"
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    policy.write_text(
        f'version = 1\n[clients.bench]\ntoken_sha256 = ["{digest}"]\nprojects = "*"\ndefault_project = "big"\n'
    )
    secret = folder / "cursor-secret"
    secret.write_text(SECRET + "\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("STORY_GRAPH_CURSOR_SECRET", None)
    env |= {
        "STORY_GRAPH_DB": str(db),
        "STORY_GRAPH_POLICY": str(policy),
        "STORY_GRAPH_CURSOR_SECRET_FILE": str(secret),
    }
    return env


def build_graph(path: Path, objects: int) -> None:
    sys.path.insert(0, str(HERE))
    from make_large_graph import build

    started = time.perf_counter()
    build(path, objects)
    print(f"built {objects:,} objects in {time.perf_counter() - started:.0f} s: {path}", flush=True)


async def check_queries(port: int, queries: list[dict[str, Any]]) -> None:
    """Each query answers without error, and says how many it found (so a reader sees they are selective)."""
    connection = await Connection.open(port)
    try:
        for arguments in queries:
            status, body = await connection.request(call_request(port, arguments))
            if not answer_ok(status, body):
                raise SystemExit(f"query {arguments} failed: HTTP {status} {body[:500]!r}")
            page = orjson.loads(body)["result"]["structuredContent"]["page"]
            print(f"  query {arguments['query']!r}: {page['returned_count']} returned of {page['total_count']}")
    finally:
        connection.close()


# --- the run ----------------------------------------------------------------------------------------------


def header() -> str:
    return (
        f"{'server':7} {'W':>2} {'C':>3} {'calls':>7} {'calls/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'errors':>6} "
        f"{'CPU ms/call':>11} {'loadgen':>7}  RSS first→last (peak) MiB"
    )


def row(cell: Cell) -> str:
    return (
        f"{cell.server:7} {cell.workers:>2} {cell.clients:>3} {cell.calls:>7,} {cell.calls_per_s:>8.1f} "
        f"{cell.p50_ms:>8.1f} {cell.p95_ms:>8.1f} {cell.errors:>6} {cell.server_cpu_ms_per_call:>11.2f} "
        f"{cell.loadgen_cpu_share * 100:>6.0f}%  "
        f"{cell.rss_first_mib:.0f}→{cell.rss_last_mib:.0f} ({cell.rss_peak_mib:.0f})"
    )


async def measure(args: argparse.Namespace, db: Path, folder: Path) -> list[Cell]:
    env = environment(db, folder)
    queries = selective_queries(db)
    kinds = ["story", *([] if args.no_floor else ["floor"])]
    cells: list[Cell] = []
    print(header(), flush=True)
    for repeat in range(args.repeat):
        for workers in args.workers:
            for kind in kinds:
                server = start_server(kind, args.launcher, workers, env, folder, args.uvicorn_args.split())
                try:
                    await wait_ready(server, workers)
                    if kind == "story" and repeat == 0 and workers == args.workers[0]:
                        await check_queries(server.port, queries)
                    requests = [call_request(server.port, q) for q in queries]
                    for clients in args.clients:
                        seconds = args.seconds if kind == "story" else args.floor_seconds
                        cell = await run_cell(
                            server, kind, workers, clients, requests, args.warmup, seconds, args.sample
                        )
                        cells.append(cell)
                        print(row(cell), flush=True)
                        for sample in cell.error_samples:
                            print(f"    error: {sample}", flush=True)
                finally:
                    server.stop()
    return cells


def medians(cells: list[Cell]) -> list[Cell]:
    """One cell per (server, workers, clients): the median of each figure over the repeats."""
    groups: dict[tuple[str, int, int], list[Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.server, cell.workers, cell.clients), []).append(cell)
    merged = []
    for (kind, workers, clients), group in groups.items():

        def med(name: str, group: list[Cell] = group) -> float:
            return float(statistics.median(float(getattr(c, name)) for c in group))

        merged.append(
            Cell(
                server=kind,
                workers=workers,
                clients=clients,
                seconds=med("seconds"),
                calls=int(med("calls")),
                errors=sum(c.errors for c in group),
                calls_per_s=med("calls_per_s"),
                p50_ms=med("p50_ms"),
                p95_ms=med("p95_ms"),
                server_cpu_ms_per_call=med("server_cpu_ms_per_call"),
                loadgen_cpu_share=med("loadgen_cpu_share"),
                rss_first_mib=med("rss_first_mib"),
                rss_last_mib=med("rss_last_mib"),
                rss_peak_mib=max(c.rss_peak_mib for c in group),
                error_samples=[],
            )
        )
    return sorted(merged, key=lambda c: (c.server != "story", c.workers, c.clients))


def numbers(text: str) -> list[int]:
    values = [int(part) for part in text.split(",") if part.strip()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got {text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, help="an existing graph from make_large_graph.py (opened read-only)")
    parser.add_argument("--objects", type=int, default=100_000, help="graph size to build without --db")
    parser.add_argument("--workers", type=numbers, default=[1, 2, 4], help="uvicorn worker counts (default 1,2,4)")
    parser.add_argument("--clients", type=numbers, default=[1, 4, 16], help="concurrent clients (default 1,4,16)")
    parser.add_argument("--seconds", type=float, default=60.0, help="timed seconds per cell (default 60)")
    parser.add_argument("--warmup", type=float, default=3.0, help="untimed seconds before each cell (default 3)")
    parser.add_argument("--sample", type=float, default=1.0, help="seconds between RSS samples (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="run the whole matrix this many times; print medians")
    parser.add_argument("--floor-seconds", type=float, default=10.0, help="timed seconds per floor cell (default 10)")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor server")
    parser.add_argument(
        "--launcher",
        choices=sorted(LAUNCHERS),
        default="serve",
        help="how the servers are started (default serve; uvicorn: the raw uvicorn factory command)",
    )
    parser.add_argument("--serve-floor", type=int, metavar="PORT", help=argparse.SUPPRESS)  # child: run the floor
    parser.add_argument(
        "--uvicorn-args", default="", help='more uvicorn options for both servers, e.g. "--loop asyncio --http h11"'
    )
    parser.add_argument("--json", type=Path, help="also write every cell (and the medians) to this file")
    args = parser.parse_args(argv)
    if args.serve_floor is not None:
        serve_floor(args.serve_floor, args.workers[0])
        return 0
    folder = Path(tempfile.mkdtemp(prefix="sg-bench-http-"))
    try:
        db = args.db
        if db is None:
            db = folder / "graph.db"
            build_graph(db, args.objects)
        elif not db.exists():
            raise SystemExit(f"{db}: no such file (make one with benchmarks/make_large_graph.py)")
        print(
            f"graph {db} ({db.stat().st_size / 1024 / 1024:.0f} MiB); {os.cpu_count()} CPUs; "
            f"load average {os.getloadavg()[0]:.2f}; {args.seconds:g} s per cell after {args.warmup:g} s warm-up",
            flush=True,
        )
        print(f"launcher: {LAUNCHERS[args.launcher]}", flush=True)
        cells = asyncio.run(measure(args, db, folder))
        merged = medians(cells)
        if args.repeat > 1:
            print(f"\nmedians of {args.repeat} repeats (errors summed, peak RSS the highest)")
            print(header())
            for cell in merged:
                print(row(cell))
        if args.json is not None:
            args.json.write_bytes(
                orjson.dumps({"cells": [asdict(c) for c in cells], "medians": [asdict(c) for c in merged]})
            )
    finally:
        for server in STARTED:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
