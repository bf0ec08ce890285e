"""Event-loop lag a stdio client sees while heavy searches run on the same session, and how soon a cancel lands.

    python benchmarks/bench_loop_lag.py                                # the cached 1M graph (built once, ~4 min)
    python benchmarks/bench_loop_lag.py --objects 100000 --seconds 10
    python benchmarks/bench_loop_lag.py --db /tmp/sg-1m.db --concurrent 2 --cancels 20

One `python -m server serve` child process, one MCP client session on its pipes (as an agent runtime has):

1. idle: probes alone, every --interval seconds, for --seconds: `tools/list` (no database work: pure event-loop
   latency) and a selective search (`Kafka`: a few indexed statements);
2. loaded: the same probes while --concurrent tasks keep heavy searches in flight (queries of 12 common words in a
   fresh order each time, so nothing is remembered between calls: their whole-query phrase has dozens of trigrams
   and their term classes walk the index in batches). A server that runs a long SQLite step on its event loop
   answers the probes late by that step;
3. cancel: --cancels times, a heavy search is started, cancelled after --cancel-after seconds (the client sends
   `notifications/cancelled`) and a `tools/list` is sent at once: its latency is how long the session stays
   deaf after a cancel.

Prints p50 / p95 / max per probe and phase (milliseconds, wall clock as the client sees them). The graph is --db
(opened read-only, used as it is), or the generated graph of --objects objects from the cache.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final

import anyio
from bench_common import (
    SEARCH,
    add_graph_options,
    call_structured,
    ensure_graph,
    fmt_ms,
    machine_header,
    machine_report,
    machine_state,
    markdown_table,
    ours_stdio_args,
    p50,
    p95,
    stdio_client_for,
)
from mcp import Client

HEAVY_WORDS: Final = [
    "cache",
    "rollback",
    "budget",
    "session",
    "decision",
    "export",
    "audit",
    "release",
    "deploy",
    "schema",
    "migration",
    "index",
]
PROBE_SEARCH: Final = {"query": "Kafka"}


def heavy_query(rng: random.Random) -> dict[str, Any]:
    words = list(HEAVY_WORDS)
    rng.shuffle(words)
    return {"query": " ".join(words), "page_size": 50}


async def probe_loop(
    probes: dict[str, Callable[[], Awaitable[Any]]], interval: float, seconds: float
) -> dict[str, list[float]]:
    """Each probe in turn, one every `interval` seconds, for `seconds`; their latencies in ms."""
    times: dict[str, list[float]] = {name: [] for name in probes}
    names = list(probes)
    deadline = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < deadline:
        name = names[n % len(names)]
        started = time.perf_counter()
        await probes[name]()
        times[name].append((time.perf_counter() - started) * 1000)
        n += 1
        await anyio.sleep(interval)
    return times


async def measure(db: Path, args: argparse.Namespace) -> list[str]:
    rng = random.Random(20261130)
    rows: list[list[str]] = []
    lines: list[str] = []
    log = Path(args.cache_dir) / "bench_loop_lag-server.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as errlog:
        async with stdio_client_for(ours_stdio_args(db), errlog) as (client, pid):
            probes: dict[str, Callable[[], Awaitable[Any]]] = {
                "tools/list": client.list_tools,
                "search `Kafka`": lambda: call_structured(client, SEARCH, PROBE_SEARCH),
            }
            await call_structured(client, SEARCH, PROBE_SEARCH)  # warm-up
            await call_structured(client, SEARCH, heavy_query(rng))

            before = machine_state()
            idle = await probe_loop(probes, args.interval, args.seconds)
            heavy_ms: list[float] = []
            loaded: dict[str, list[float]] = {}

            async def keep_heavy(client: Client) -> None:
                while True:
                    started = time.perf_counter()
                    await call_structured(client, SEARCH, heavy_query(rng))
                    heavy_ms.append((time.perf_counter() - started) * 1000)

            async with anyio.create_task_group() as tasks:
                for _ in range(args.concurrent):
                    tasks.start_soon(keep_heavy, client)
                await anyio.sleep(0.5)  # the heavy calls are under way
                loaded = await probe_loop(probes, args.interval, args.seconds)
                tasks.cancel_scope.cancel()

            deaf: list[float] = []
            for _ in range(args.cancels):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(call_structured, client, SEARCH, heavy_query(rng))
                    await anyio.sleep(args.cancel_after)
                    tasks.cancel_scope.cancel()  # the client sends notifications/cancelled
                started = time.perf_counter()
                await client.list_tools()
                deaf.append((time.perf_counter() - started) * 1000)
                await anyio.sleep(0.2)
            after = machine_state()
    for name in probes:
        for phase, found in (("idle", idle), (f"{args.concurrent} heavy searches in flight", loaded)):
            values = found[name]
            rows.append(
                [f"{name}, {phase}", f"{len(values)}", fmt_ms(p50(values)), fmt_ms(p95(values)), fmt_ms(max(values))]
            )
    rows.append(
        [
            f"`tools/list` right after a cancel ({args.cancel_after} s in)",
            f"{len(deaf)}",
            fmt_ms(p50(deaf)),
            fmt_ms(p95(deaf)),
            fmt_ms(max(deaf)),
        ]
    )
    rows.append(
        ["the heavy searches themselves", f"{len(heavy_ms)}"]
        + ([fmt_ms(p50(heavy_ms)), fmt_ms(p95(heavy_ms)), fmt_ms(max(heavy_ms))] if heavy_ms else ["—"] * 3)
    )
    lines.append(markdown_table(["probe", "calls", "p50 ms", "p95 ms", "max ms"], rows))
    lines.extend(machine_report(before, after, [pid] if pid else []))
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, help="a graph of your own (default: the generated graph of --objects)")
    parser.add_argument("--objects", type=int, default=1_000_000, help="size of the generated graph (default 1M)")
    parser.add_argument("--seconds", type=float, default=15.0, help="length of the idle and the loaded phase")
    parser.add_argument("--interval", type=float, default=0.02, help="seconds between probes")
    parser.add_argument("--concurrent", type=int, default=2, help="heavy searches kept in flight")
    parser.add_argument("--cancels", type=int, default=10, help="heavy searches started and cancelled")
    parser.add_argument("--cancel-after", type=float, default=0.3, help="seconds from a heavy call to its cancel")
    add_graph_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    db = args.db or ensure_graph(args.cache_dir, args.objects, source_code_points=args.source_code_points)
    print(machine_header())
    print(f"\n## {db.name}, {db.stat().st_size / 2**20:,.0f} MiB; probes every {args.interval * 1000:.0f} ms\n")
    print("\n".join(anyio.run(measure, db, args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
