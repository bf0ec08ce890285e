"""Time our three tools through real MCP clients, beside the floor server, per query class and graph size.

    python benchmarks/bench_tools.py --sizes 10k,100k --runs 10
    python benchmarks/bench_tools.py --sizes 1M --runs 5 --classes selective,broad,deep
    python benchmarks/bench_tools.py --sizes 2000 --runs 2 --cache-dir /tmp/sg-cache     # a quick check

For each size it takes the generated graph from the cache directory (building it once with make_large_graph.py,
then `python -m server db migrate` on every use), starts `python -m server serve --db DB --project big` and
`benchmarks/floor_server.py --db DB` as stdio child processes with the MCP Python client on their pipes, and builds
our server in this process too (an in-memory MCP session). Deep and last pages are reached first, untimed, by
following cursors. After one untimed warm-up call per case and target, every round calls each case on ours over
stdio, then the floor over stdio, then ours in-process, back to back, so machine noise falls on all of them alike.

Printed per size: start-up to the first tools/list; per query class the p50/p95 (nearest rank) of every timed
call of its queries, ours over stdio, the floor, their ratio, ours in-process; per query the same (--per-query);
the servers' RSS; and what else the machine was doing (load average before/after, CPU busy, busiest other
processes). Wall-clock milliseconds per call, as the client sees them.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import orjson
from bench_common import (
    FLOOR_TOOL,
    SEARCH,
    add_graph_options,
    byte_compiled,
    call_structured,
    ensure_graph,
    floor_stdio_args,
    fmt_ms,
    fmt_ratio,
    graph_summary,
    in_process_client,
    machine_header,
    machine_report,
    machine_state,
    markdown_table,
    ours_stdio_args,
    p50,
    p95,
    parse_sizes,
    peak_rss_kib,
    rss_kib,
    size_label,
    stdio_client_for,
)
from mcp import Client
from tool_cases import CLASSES, DEEP_PAGE, OUTSIDE_MIXED, Case, all_cases

MODES: Final = ("stdio", "inproc")


@dataclass
class Measured:
    case: Case
    arguments: dict[str, Any] | None = None
    """The timed call's arguments (with the cursor of a deep or last page); None when the case failed."""
    failure: str | None = None
    total: str = ""
    """total_count of ours (matches, members or code points)."""
    floor_count: int | None = None
    ours: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    inproc: list[float] = field(default_factory=list)
    errors: int = 0


@dataclass
class Targets:
    ours: Client
    floor: Client
    inproc: Client | None
    ours_pid: int | None
    floor_pid: int | None
    startup_s: dict[str, float]


async def _timed(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    content = await call_structured(client, tool, arguments)
    return (time.perf_counter() - started) * 1000, content


async def page_arguments(client: Client, case: Case) -> dict[str, Any]:
    """The arguments of the page to time: page 1, page DEEP_PAGE, or the last page (cursors followed, untimed)."""
    if case.position == "first":
        return case.arguments
    if case.position == "deep":
        skip = (DEEP_PAGE - 1) * int(case.arguments.get("page_size", 10))
        arguments, done = dict(case.arguments), 0
        while done < skip:
            step = min(case.walk_page_size, skip - done)
            page = (await call_structured(client, case.tool, arguments | {"page_size": step}))["page"]
            if page["next_cursor"] is None:
                raise RuntimeError(f"fewer than {DEEP_PAGE} pages")
            arguments, done = case.arguments | {"cursor": page["next_cursor"]}, done + step
        return arguments
    # The last page: big steps to the last big page, then the case's own page size to its last page.
    cursor: str | None = None
    for page_size in (case.walk_page_size, None):
        while True:
            arguments = dict(case.arguments)
            if page_size is not None:
                arguments["page_size"] = page_size
            if cursor is not None:
                arguments["cursor"] = cursor
            following = (await call_structured(client, case.tool, arguments))["page"]["next_cursor"]
            if following is None:
                break
            cursor = following
    return case.arguments | ({"cursor": cursor} if cursor is not None else {})


async def start_targets(stack: AsyncExitStack, db: Path, modes: Sequence[str], log: Path) -> Targets:
    errlog = stack.enter_context(log.open("a", encoding="utf-8"))
    startup: dict[str, float] = {}
    pids: list[int | None] = []
    clients: list[Client] = []
    for name, args in (("ours", ours_stdio_args(db)), ("floor", floor_stdio_args(db))):
        started = time.perf_counter()
        client, pid = await stack.enter_async_context(stdio_client_for(args, errlog))
        await client.list_tools()
        startup[name] = time.perf_counter() - started
        clients.append(client)
        pids.append(pid)
    inproc = await stack.enter_async_context(in_process_client(db)) if "inproc" in modes else None
    return Targets(clients[0], clients[1], inproc, pids[0], pids[1], startup)


async def measure_size(db: Path, cases: list[Case], runs: int, modes: Sequence[str], log: Path) -> dict[str, Any]:
    before = machine_state()
    async with AsyncExitStack() as stack:
        targets = await start_targets(stack, db, modes, log)
        walker = targets.inproc or targets.ours
        measured = [Measured(case) for case in cases]
        for m in measured:
            print(f"  preparing {m.case.cls} {m.case.label}", file=sys.stderr, flush=True)
            try:
                m.arguments = await page_arguments(walker, m.case)
                _, content = await _timed(targets.ours, m.case.tool, m.arguments)  # warm-up, and the totals
                total = content["page"]["total_count"]
                m.total = f"{total:,}" if isinstance(total, int) else str(total)
                _, floor = await _timed(targets.floor, FLOOR_TOOL, {"query": m.case.floor_query})
                m.floor_count = int(floor["count"])
                if targets.inproc is not None:
                    await _timed(targets.inproc, m.case.tool, m.arguments)
            except Exception as exc:  # a case the server refuses is reported, the others still run
                m.arguments, m.failure = None, str(exc).splitlines()[0][:200]
                print(f"  {m.case.cls} {m.case.label}: FAILED {m.failure}", file=sys.stderr, flush=True)
        for round_number in range(runs):
            print(f"  round {round_number + 1}/{runs}", file=sys.stderr, flush=True)
            for m in measured:
                if m.arguments is None:
                    continue
                try:
                    m.ours.append((await _timed(targets.ours, m.case.tool, m.arguments))[0])
                    m.floor.append((await _timed(targets.floor, FLOOR_TOOL, {"query": m.case.floor_query}))[0])
                    if targets.inproc is not None:
                        m.inproc.append((await _timed(targets.inproc, m.case.tool, m.arguments))[0])
                except Exception:
                    m.errors += 1
        rss = {
            name: (rss_kib(pid) / 1024, peak_rss_kib(pid) / 1024)
            for name, pid in (("ours", targets.ours_pid), ("floor", targets.floor_pid))
            if pid is not None
        }
        pids = [pid for pid in (targets.ours_pid, targets.floor_pid) if pid is not None]
        after = machine_state()
        machine = machine_report(before, after, pids)
    return {"measured": measured, "startup_s": targets.startup_s, "rss_mib": rss, "machine": machine}


def _pair(values: list[float]) -> str:
    return f"{fmt_ms(p50(values))} / {fmt_ms(p95(values))}"


def _ratios(ours: list[float], floor: list[float]) -> str:
    return f"{fmt_ratio(p50(ours), p50(floor))} / {fmt_ratio(p95(ours), p95(floor))}"


def class_table(measured: list[Measured]) -> str:
    rows = []
    groups = [(c.title, [m for m in measured if m.case.cls == c.key]) for c in CLASSES]
    # The mixed workload is the one the issues' targets were set and measured on.
    searches = [
        m for m in measured if m.case.tool == SEARCH and m.arguments is not None and m.case.cls not in OUTSIDE_MIXED
    ]
    groups.append(("mixed workload: the searches above but sentences, paragraphs, common words", searches))
    for title, members in groups:
        ok = [m for m in members if m.arguments is not None]
        if not members:
            continue
        ours = [t for m in ok for t in m.ours]
        floor = [t for m in ok for t in m.floor]
        inproc = [t for m in ok for t in m.inproc]
        totals = ", ".join(m.total for m in ok) if title != groups[-1][0] else f"{len(ok)} queries"
        failed = len(members) - len(ok)
        errors = sum(m.errors for m in ok)
        note = (f"{failed} failed" if failed else "") + (f" {errors} errors" if errors else "")
        rows.append(
            (title, totals, _pair(ours), _pair(floor), _ratios(ours, floor), _pair(inproc), note.strip() or "—")
        )
    header = (
        "class",
        "matches (ours)",
        "ours stdio p50 / p95 ms",
        "floor p50 / p95 ms",
        "ratio p50 / p95",
        "ours in-process p50 / p95 ms",
        "failures",
    )
    return markdown_table(header, rows)


def query_table(measured: list[Measured]) -> str:
    rows = []
    for m in measured:
        if m.arguments is None:
            rows.append((m.case.cls, m.case.label, "FAILED: " + (m.failure or ""), "", "", "", ""))
            continue
        rows.append(
            (
                m.case.cls,
                m.case.label + (" (last page)" if m.case.position == "last" else ""),
                m.total,
                _pair(m.ours),
                f"{_pair(m.floor)} (rows: {m.floor_count})",
                _ratios(m.ours, m.floor),
                _pair(m.inproc),
            )
        )
    header = ("class", "case", "total", "ours stdio p50 / p95", "floor p50 / p95", "ratio", "in-process p50 / p95")
    return markdown_table(header, rows)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10k,100k", help="graph sizes in objects, e.g. 10k,100k,1M")
    parser.add_argument("--runs", type=int, default=10, help="timed rounds (each calls every case once per target)")
    parser.add_argument(
        "--classes", help="comma-separated class keys (default: all): " + ",".join(c.key for c in CLASSES)
    )
    parser.add_argument("--modes", default="stdio,inproc", help="stdio (always) and inproc")
    add_graph_options(parser)
    parser.add_argument("--per-query", action="store_true", help="also print one row per query")
    parser.add_argument("--json", type=Path, help="also write the raw timings here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    wanted = set(args.classes.split(",")) if args.classes else {c.key for c in CLASSES}
    unknown = wanted - {c.key for c in CLASSES}
    if unknown:
        parser.error(f"unknown classes: {', '.join(sorted(unknown))}")
    modes = [m for m in args.modes.split(",") if m in MODES]
    cases = [c for c in all_cases() if c.cls in wanted]
    print(machine_header())
    byte_compiled()  # the start-up measured is an installed server's: its byte code written (bench_common)
    dump: list[dict[str, Any]] = []
    for objects in parse_sizes(args.sizes):
        db = ensure_graph(args.cache_dir, objects, source_code_points=args.source_code_points)
        what = graph_summary(db) or f"{objects:,} objects"
        print(f"\n## {size_label(objects)}: {what}; {db.name}, {db.stat().st_size / 2**20:,.0f} MiB; {args.runs} runs")
        log = args.cache_dir / "bench_tools-servers.log"
        found = anyio.run(measure_size, db, cases, args.runs, modes, log)
        startup = found["startup_s"]
        print(f"start-up to the first tools/list: ours {startup['ours']:.2f} s, floor {startup['floor']:.2f} s")
        print()
        print(class_table(found["measured"]))
        if args.per_query:
            print()
            print(query_table(found["measured"]))
        print()
        for name, (now, peak) in found["rss_mib"].items():
            print(f"{name} stdio server RSS at the end {now:.0f} MiB, peak {peak:.0f} MiB")
        print("\n".join(found["machine"]))
        dump.append(
            {
                "objects": objects,
                "startup_s": startup,
                "rss_mib": found["rss_mib"],
                "machine": found["machine"],
                "cases": [asdict(m) for m in found["measured"]],
            }
        )
    if args.json is not None:
        args.json.write_bytes(orjson.dumps(dump, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
