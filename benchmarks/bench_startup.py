"""Start-up: from spawning the server to its answer to the first `tools/list`, ours beside the floor, many rounds.

    python benchmarks/bench_startup.py --sizes 1M --rounds 9                  # the target: ≤ 1.5 s at 1M
    python benchmarks/bench_startup.py --sizes 10k --rounds 15 --compare /tmp/old-checkout

bench_tools.py measures start-up once per run, one sample beside a whole workload; on a shared machine one
sample says little. Here each round spawns every server once, alternating (ours, the floor, and each
`--compare` checkout: its `python -m server serve` started from that directory, so its own code), and writes
`initialize`, `notifications/initialized` and `tools/list` as raw JSON-RPC lines at once: no client library's
own start-up or validation is counted, only the server's. Printed per server: the median and p95 wall time, and
the median CPU time (user + system) the process used up to the answer, which other processes on the machine disturb
less than the wall time (read from /proc, in clock ticks of 10 ms; until 2026-12-02 the CPU of the whole process,
its exit included). The process is then told to stop by closing its input (its exit is not timed). Each checkout's
`server` package is byte-compiled first, as installing the wheel does (`byte_compiled`): started from a checkout
without it, every start compiled our modules from source.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import orjson
from bench_common import (
    PYTHON,
    REPO,
    add_graph_options,
    byte_compiled,
    ensure_graph,
    floor_stdio_args,
    fmt_ratio,
    graph_summary,
    machine_header,
    machine_report,
    machine_state,
    markdown_table,
    ours_stdio_args,
    p50,
    p95,
    parse_sizes,
    server_env,
    size_label,
    tree_cpu_seconds,
)

HANDSHAKE = b"".join(
    orjson.dumps(message) + b"\n"
    for message in (
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench_startup", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    )
)


def start_once(args: Sequence[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds to the `tools/list` answer, and the process's CPU seconds up to it."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [PYTHON, *args], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(HANDSHAKE)
    process.stdin.flush()
    for line in process.stdout:
        if orjson.loads(line).get("id") == 2:
            break
    else:
        raise RuntimeError(f"{' '.join(args)} exited before answering tools/list (run it by hand to see why)")
    wall = time.perf_counter() - started
    cpu = tree_cpu_seconds(process.pid)  # before its exit, which is not start-up
    process.stdin.close()
    _, status, _ = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return wall, cpu


def measure(db: Path, rounds: int, compare: Sequence[Path]) -> dict[str, list[tuple[float, float]]]:
    env = server_env()
    servers: dict[str, tuple[list[str], Path, dict[str, str]]] = {
        "ours": (ours_stdio_args(db), REPO, env),
        "floor": (floor_stdio_args(db), REPO, env),
    }
    for checkout in compare:
        # That checkout's code: first on the path, and `python -m server` started from its directory.
        other = dict(env, PYTHONPATH=os.pathsep.join([str(checkout), env["PYTHONPATH"]]))
        servers[str(checkout)] = (ours_stdio_args(db), checkout, other)
    for checkout in (REPO, *compare):
        byte_compiled(checkout)  # as an installed server starts: its modules' byte code written (bench_common)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in servers}
    for _ in range(rounds):
        for name, (args, cwd, server_env_) in servers.items():
            samples[name].append(start_once(args, cwd, server_env_))
    return samples


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1M", help="graph sizes in objects, e.g. 10k,1M")
    parser.add_argument("--rounds", type=int, default=9, help="start-ups per server (alternating)")
    parser.add_argument(
        "--compare",
        type=Path,
        action="append",
        default=[],
        help="another checkout of this repository (e.g. a `git worktree add --detach`) to start beside ours",
    )
    add_graph_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    print(machine_header())
    for objects in parse_sizes(args.sizes):
        db = ensure_graph(args.cache_dir, objects, source_code_points=args.source_code_points)
        print(f"\n## {size_label(objects)}: {graph_summary(db) or f'{objects:,} objects'}; {args.rounds} rounds")
        before = machine_state()
        samples = measure(db, args.rounds, args.compare)
        after = machine_state()
        floor_wall = p50([wall for wall, _ in samples["floor"]])
        rows = []
        for name, found in samples.items():
            walls, cpus = [wall for wall, _ in found], [cpu for _, cpu in found]
            ratio = fmt_ratio(p50(walls), floor_wall) if name != "floor" else ""
            rows.append([name, f"{p50(walls):.2f}", f"{p95(walls):.2f}", ratio, f"{p50(cpus):.2f}"])
        header = ["server", "wall p50 s", "wall p95 s", "p50 to the floor", "CPU to the answer p50 s"]
        print(markdown_table(header, rows))
        print("\n".join(machine_report(before, after)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
