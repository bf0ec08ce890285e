"""Where the slowest calls' time goes: selective searches over stdio, each call split into CPU, waiting for a CPU
and garbage collection, in our server and in the client, beside the floor.

    python benchmarks/bench_tail.py                                      # the cached 1M graph, 20 rounds
    python benchmarks/bench_tail.py --objects 100000 --rounds 30
    python benchmarks/bench_tail.py --db /tmp/sg-1m.db --queries Kafka,xylophone

As bench_tools.py runs its selective class: `python -m server serve` and the floor as child processes, one MCP
client each on their pipes, every round calling each query on ours then on the floor. Around every call of ours
(outside its timed window) the script reads the scheduler's counters of every thread of the server and of this
process (/proc/<pid>/task/<tid>/schedstat, Linux): time on a CPU and time runnable but waiting for one. The
server is started through a wrapper that logs its collections (gc.callbacks) with their clock time, so each
call is charged the collections that ran inside it; this process's own are counted the same way.

Prints p50 / p95 / max of the wall time per call (ours and the floor), then the components at the median and the
mean of the slowest 5 % of calls: server CPU, server waiting for a CPU (all its threads), client CPU, client
waiting, and the collections on each side (inside the CPU figures, shown apart). The parts overlap (the two
processes, and the server's threads, can run at once on two CPUs), so they do not add up to the wall time; the
difference between the columns is what the tail is made of.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import anyio
from bench_common import (
    FLOOR_TOOL,
    SEARCH,
    SELECTIVE_QUERIES,
    add_graph_options,
    call_structured,
    ensure_graph,
    floor_stdio_args,
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

GC_WRAPPER: Final = """
import gc, runpy, sys, time
log = open(sys.argv[1], "a", buffering=1)
started = [0.0]
def note(phase, info):
    now = time.perf_counter()
    if phase == "start":
        started[0] = now
    else:
        log.write(f"{now:.6f} {(now - started[0]) * 1000:.4f} {info['generation']}\\n")
gc.callbacks.append(note)
sys.argv = ["server", *sys.argv[2:]]
runpy.run_module("server", run_name="__main__", alter_sys=True)
"""
"""`python -c GC_WRAPPER LOG serve ...`: the server as `python -m server` runs it, its collections logged."""
PARTS: Final = ("server CPU", "server waiting", "client CPU", "client waiting", "server GC", "client GC")


def sched_ns(pid: int) -> tuple[int, int]:
    """Nanoseconds on a CPU and runnable but waiting for one, summed over the process's live threads."""
    on_cpu = waiting = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as counters:
                run, wait, _ = counters.read().split()
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
        on_cpu, waiting = on_cpu + int(run), waiting + int(wait)
    return on_cpu, waiting


class Collections:
    """This process's collections, as (end time, milliseconds)."""

    def __init__(self) -> None:
        self.done: list[tuple[float, float]] = []
        self._started = 0.0
        gc.callbacks.append(self._note)

    def _note(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._started = now
        else:
            self.done.append((now, (now - self._started) * 1000))


def within(collections: list[tuple[float, float]], start: float, end: float) -> float:
    return sum(ms for at, ms in collections if start <= at <= end)


async def measure(
    db: Path, queries: Sequence[str], rounds: int, log: Path
) -> tuple[list[dict[str, float]], list[float]]:
    mine = Collections()
    calls: list[dict[str, float]] = []
    floor_ms: list[float] = []
    with (log.parent / "servers.log").open("a", encoding="utf-8") as errlog:
        async with (
            stdio_client_for(["-c", GC_WRAPPER, str(log), *ours_stdio_args(db)[2:]], errlog) as (ours, pid),
            stdio_client_for(floor_stdio_args(db), errlog) as (floor, _),
        ):
            assert pid is not None
            for query in queries:  # warm-up: the page cache, the memo, the SDK's validators
                await call_structured(ours, SEARCH, {"query": query})
                await call_structured(floor, FLOOR_TOOL, {"query": query})
            me = os.getpid()
            for _ in range(rounds):
                for query in queries:
                    server0, client0 = sched_ns(pid), sched_ns(me)
                    started = time.perf_counter()
                    await call_structured(ours, SEARCH, {"query": query})
                    ended = time.perf_counter()
                    server1, client1 = sched_ns(pid), sched_ns(me)
                    calls.append(
                        {
                            "wall": (ended - started) * 1000,
                            "start": started,
                            "end": ended,
                            "server CPU": (server1[0] - server0[0]) / 1e6,
                            "server waiting": (server1[1] - server0[1]) / 1e6,
                            "client CPU": (client1[0] - client0[0]) / 1e6,
                            "client waiting": (client1[1] - client0[1]) / 1e6,
                            "client GC": within(mine.done, started, ended),
                        }
                    )
                    floor_started = time.perf_counter()
                    await call_structured(floor, FLOOR_TOOL, {"query": query})
                    floor_ms.append((time.perf_counter() - floor_started) * 1000)
    return calls, floor_ms


def charge_server_collections(calls: list[dict[str, float]], log: Path) -> None:
    collections = [(float(at), float(ms)) for at, ms, _ in (line.split() for line in log.read_text().splitlines())]
    for call in calls:
        call["server GC"] = within(collections, call["start"], call["end"])


def report(calls: list[dict[str, float]], floor_ms: list[float]) -> str:
    walls = [call["wall"] for call in calls]
    slowest = sorted(calls, key=lambda call: call["wall"])[-max(1, math.ceil(len(calls) * 0.05)) :]
    median_call = sorted(calls, key=lambda call: call["wall"])[len(calls) // 2]
    ours, floor = (f"{fmt_ms(p50(v))} / {fmt_ms(p95(v))} / {fmt_ms(max(v))}" for v in (walls, floor_ms))
    lines = [f"{len(calls)} calls of ours; wall p50 / p95 / max: ours {ours} ms, floor {floor} ms", ""]
    rows = [["wall", fmt_ms(p50(walls)), fmt_ms(median_call["wall"]), fmt_ms(mean(slowest, "wall"))]]
    for part in PARTS:
        values = [call[part] for call in calls]
        rows.append([part, fmt_ms(p50(values)), fmt_ms(median_call[part]), fmt_ms(mean(slowest, part))])
    header = ["ms per call", "p50 of the part", "the median call", f"mean of the slowest {len(slowest)}"]
    lines.append(markdown_table(header, rows))
    return "\n".join(lines)


def mean(calls: list[dict[str, float]], part: str) -> float:
    return sum(call[part] for call in calls) / len(calls)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1_000_000, help="generated graph size (default 1M)")
    parser.add_argument("--db", type=Path, help="a graph of your own (opened read-only, used as it is)")
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds over the queries (default 20)")
    parser.add_argument("--queries", default=",".join(SELECTIVE_QUERIES), help="comma-separated (default: selective)")
    add_graph_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not Path("/proc/self/task").is_dir():
        raise SystemExit("bench_tail.py reads /proc/<pid>/task/<tid>/schedstat: Linux only")
    db = args.db or ensure_graph(args.cache_dir, args.objects, source_code_points=args.source_code_points)
    print(machine_header())
    before = machine_state()
    with tempfile.TemporaryDirectory(prefix="sg-bench-tail-") as folder:
        log = Path(folder) / "gc.log"
        calls, floor_ms = anyio.run(measure, db, args.queries.split(","), args.rounds, log)
        charge_server_collections(calls, log)
    print(report(calls, floor_ms))
    print("\n".join(machine_report(before, machine_state())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
