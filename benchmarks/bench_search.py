"""Benchmark story_graph_search on a large generated story graph.

    python benchmarks/bench_search.py                          # the cached 100,000-object graph (built once)
    python benchmarks/bench_search.py --objects 1000000        # the same at 1M objects (first build ~4 minutes)
    python benchmarks/bench_search.py --db /tmp/sg-1m.db       # reuse a graph made by make_large_graph.py
    python benchmarks/bench_search.py --db /tmp/sg-1m.db --breakdown   # where the time of one call goes

The graph is --db, or the generated graph of --objects objects from the cache (bench_common.ensure_graph).
Every case runs in its own child process, so its peak RSS is its own. A child opens the database through the
real server stack (`build_server` + `StaticAccess(Grant(default_project="big"))`) and an in-process MCP
`Client` (mode `client`, bench_common.in_process_client), or calls `server.reader.search.search` directly on a
read snapshot (mode `reader`: matching, ranking and paging only, no items, coverage or MCP). It makes one
untimed warm-up call (reported as `first`), then `--runs` timed calls, and reports the median, p95 (nearest
rank) and the process's peak RSS. Paging cases walk to the page first, untimed, then time only the call for
that page with its cursor.

The script writes only to the graph cache (a graph it builds there); the database given by --db is opened
read-only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
from bench_common import (
    BIG_PROJECT,
    SEARCH,
    SMALL_SCOPE,
    add_graph_options,
    ensure_graph,
    in_process_client,
    machine_header,
    machine_report,
    machine_state,
    markdown_table,
    p95,
    peak_rss_kib,
)

MONTH: Final = {"from": "2025-03-01T00:00:00+00:00", "to": "2025-03-31T23:59:59+00:00"}


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    query: str
    page: int = 1
    page_size: int = 10
    time_range: dict[str, str] | None = None
    scope: dict[str, Any] | None = None

    def arguments(self) -> dict[str, Any]:
        args: dict[str, Any] = {"query": self.query, "page_size": self.page_size}
        if self.time_range is not None:
            args["time_range"] = self.time_range
        if self.scope is not None:
            args["scope"] = self.scope
        return args


CASES_COMMON8: Final = "budget import batch sync client audit timeout review"
CASES: Final[tuple[Case, ...]] = (
    Case("rare", "rare 3+ char word (~20 hits at 1M)", "xylophone"),
    Case("common", "common 3+ char word", "cache"),
    Case("common_p20", "common word, page 20 via cursor", "cache", page=20),
    Case("medium", "medium-rare word (~0.2 % of events), 5 a page", "moderato", page_size=5),
    Case("medium_p20", "medium-rare word, page 20 via cursor, 5 a page", "moderato", page=20, page_size=5),
    Case("zh2", "2-char Chinese (common)", "方案"),
    Case("zh2_rare", "2-char Chinese (rare)", "麒麟"),
    Case("zh2_p20", "2-char Chinese, page 20 via cursor", "方案", page=20),
    Case("zh1", "1-char Chinese (common)", "缓"),
    Case("en1", "1-char latin (in most texts)", "e"),
    Case("en1_upper", "1-char latin, upper case (the trigrams of `c`)", "C"),
    Case("en2", "2-char latin (common prefix: decision, design, deploy)", "De"),
    Case("en2_rare", "2-char latin (few trigrams)", "AI"),
    Case("en2_none", "2-char latin and digit (no trigram begins it)", "x8"),
    Case("multi", "multi-term (term path, 4 terms)", "cache rollback 回顾调度 budget"),
    Case("multi_rare", "multi-term, rare terms, no object has half", "xylophone 麒麟 moderato"),
    Case("common_time", "common word + time_range (1 month)", "cache", time_range=MONTH),
    Case("zh2_time", "2-char Chinese + time_range (1 month)", "方案", time_range=MONTH),
    Case("rare_time", "rare word + time_range (1 month)", "xylophone", time_range=MONTH),
    Case("small_scope", "common word in the small scope (1 %)", "cache", scope=SMALL_SCOPE),
    Case("small_zh2", "2-char Chinese in the small scope", "方案", scope=SMALL_SCOPE),
    # Five to eight common words (docs/performance.md): few items hold all or all but one of the first four, so
    # their classes are read from term sets; the last is often together, so it keeps the index's expressions.
    Case("common5", "five common words, rarely together", "budget import batch sync client"),
    Case("common6", "six common words, rarely together", "budget import batch sync client audit"),
    Case("common7", "seven common words, rarely together", "decision deploy release stream metric cluster replica"),
    Case("common8", "eight common words, rarely together", CASES_COMMON8),
    Case("common6_dense", "six common words, often together", "cache decision session plan review schedule"),
    Case("common8_time", "eight common words + time_range (1 month)", CASES_COMMON8, time_range=MONTH),
)


@dataclass
class Measurement:
    case: str
    mode: str
    total: int | str
    returned: int
    first_ms: float
    times_ms: list[float]
    cpu_ms: list[float]
    rss_base_mib: float
    rss_peak_mib: float
    breakdown: dict[str, float] = field(default_factory=dict)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def cpu_median_ms(self) -> float:
        return statistics.median(self.cpu_ms)

    @property
    def p95_ms(self) -> float:
        return p95(self.times_ms)


_BREAKDOWN: dict[str, float] = {}
"""Phase timings (ms, summed) collected by `_instrument`; cleared after the warm-up call."""


def _steps(items: int) -> list[int]:
    """Page sizes (each at most 50) that skip exactly `items` results."""
    return [min(50, items - done) for done in range(0, items, 50)]


def _rss_mib() -> float:
    """This process's peak RSS so far."""
    return peak_rss_kib(os.getpid()) / 1024


# --- child process: one case, one mode ------------------------------------------------------------------------


@dataclass
class Timings:
    first_ms: float = 0.0
    times_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    """Process CPU time (all threads, so SQLite's worker thread too) per timed call."""


async def _timed(call: Callable[[], Awaitable[tuple[int | str, int]]], runs: int) -> tuple[Timings, Any]:
    timings = Timings()
    started = time.perf_counter()
    outcome = await call()
    timings.first_ms = (time.perf_counter() - started) * 1000
    _BREAKDOWN.clear()
    for _ in range(runs):
        started, cpu = time.perf_counter(), time.process_time()
        outcome = await call()
        timings.times_ms.append((time.perf_counter() - started) * 1000)
        timings.cpu_ms.append((time.process_time() - cpu) * 1000)
    return timings, outcome


async def _run_client(db: Path, case: Case, runs: int) -> Measurement:
    async with in_process_client(db) as client:
        base = _rss_mib()
        args = case.arguments()

        async def page(arguments: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool(SEARCH, arguments)
            if result.is_error or result.structured_content is None:
                raise RuntimeError(f"{case.name}: {result.content}")
            content: dict[str, Any] = result.structured_content
            return content

        # Walk to the page, untimed, in steps of up to 50 items (the cursor does not bind page_size).
        for step in _steps((case.page - 1) * case.page_size):
            cursor = (await page(args | {"page_size": step}))["page"]["next_cursor"]
            if cursor is None:
                raise RuntimeError(f"{case.name}: fewer than {case.page} pages")
            args = case.arguments() | {"cursor": cursor}

        async def once() -> tuple[int | str, int]:
            content = await page(args)
            return content["page"]["total_count"], content["page"]["returned_count"]

        timings, (total, returned) = await _timed(once, runs)
    return Measurement(
        case.name, "client", total, returned, timings.first_ms, timings.times_ms, timings.cpu_ms, base, _rss_mib()
    )


async def _run_reader(db: Path, case: Case, runs: int) -> Measurement:
    from server.contracts.base import scope_key
    from server.contracts.common import Grant, TimeRange
    from server.contracts.search import SearchArgs
    from server.reader import search as reader
    from server.reader.db import Database
    from server.reader.fold import Folder
    from server.reader.memo import Memo
    from server.reader.scope import resolve_scope

    database = await Database.open(db)
    folder, memo = Folder(), Memo()
    parsed = SearchArgs.model_validate(case.arguments())
    time_range = (parsed.time_range.from_, parsed.time_range.to) if isinstance(parsed.time_range, TimeRange) else None
    try:
        async with database.snapshot() as conn:
            scope = await resolve_scope(conn, Grant(default_project=BIG_PROJECT), parsed.scope)
        key = scope_key(scope.scope)
        base = _rss_mib()
        types = ["story_line", "event", "entity", "entity_change", "relation", "summary", "source_reference"]
        after: tuple[int, int] | None = None

        async def page(size: int = parsed.page_size) -> reader.SearchPage:
            async with database.snapshot() as conn:
                return await reader.search(
                    conn,
                    folder,
                    memo,
                    query=parsed.query,
                    scope_key=key,
                    scope_revision=scope.revision,
                    graph_revision=scope.graph_revision,
                    object_types=types,
                    time_range=time_range,
                    time_basis=parsed.time_basis,
                    page_size=size,
                    position=after,
                )

        for step in _steps((case.page - 1) * case.page_size):
            found = await page(step)
            if not found.has_more:
                raise RuntimeError(f"{case.name}: fewer than {case.page} pages")
            after = found.next_position

        async def once() -> tuple[int | str, int]:
            found = await page()
            return (found.total.count if found.total.exact else "unknown"), len(found.hits)

        timings, (total, returned) = await _timed(once, runs)
    finally:
        await database.close()
    return Measurement(
        case.name, "reader", total, returned, timings.first_ms, timings.times_ms, timings.cpu_ms, base, _rss_mib()
    )


def _instrument(breakdown: dict[str, float]) -> None:
    """Wrap the coroutines a search call goes through so one call reports where its time went."""
    import server.reader.search as reader_search
    import server.reader.search_items as reader_items
    import server.tools.search as tool_search

    def wrap(module: Any, name: str, label: str) -> None:
        original = getattr(module, name, None)
        if original is None:  # the server changed shape: time what is still there
            return

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                breakdown[label] = breakdown.get(label, 0.0) + (time.perf_counter() - started) * 1000
                breakdown[f"{label} (calls)"] = breakdown.get(f"{label} (calls)", 0.0) + 1

        setattr(module, name, timed)

    wrap(reader_search, "search", "reader.search total (match, rank, count, page in SQL)")
    wrap(reader_search, "_whole_items", "reader: whole-query set (multi-word)")
    wrap(reader_search, "_page", "reader: the page's rank classes")
    wrap(reader_search, "_total", "reader: total")
    wrap(tool_search, "object_rows", "items: object_rows")
    wrap(reader_items, "item_texts", "items: item_texts")
    wrap(reader_items, "evolution_refs", "items: evolution_refs")
    wrap(tool_search, "source_reference_ids", "items: source_reference_ids")
    wrap(tool_search, "read_coverage", "frame: read_coverage")
    wrap(tool_search, "resolve_page_scope", "frame: resolve_page_scope")


def worker(db: Path, case_name: str, mode: str, runs: int, breakdown: bool) -> None:
    case = next(c for c in CASES if c.name == case_name)
    if breakdown:
        _instrument(_BREAKDOWN)
    runner = _run_client if mode == "client" else _run_reader
    measured = asyncio.run(runner(db, case, max(runs, 1)))
    if breakdown:  # per timed call
        measured.breakdown = {k: v / len(measured.times_ms) for k, v in _BREAKDOWN.items()}
    sys.stdout.write(orjson.dumps(asdict(measured)).decode() + "\n")


# --- parent: orchestrate, print ----------------------------------------------------------------------------------


def run_case(db: Path, case: Case, mode: str, runs: int, breakdown: bool, timeout: float) -> Measurement | str:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", case.name, "--mode", mode, "--db", str(db)]
    command += ["--runs", str(runs)] + (["--breakdown"] if breakdown else [])
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"timeout > {timeout:.0f} s"
    if done.returncode != 0:
        lines = [line.strip(" |+-") for line in done.stderr.splitlines() if "Error" in line or "error" in line]
        return "error: " + (lines or ["?"])[-1]
    data = orjson.loads(done.stdout.strip().splitlines()[-1])
    return Measurement(**data)


def table(rows: list[tuple[Case, str, Measurement | str]]) -> str:
    header = ("case", "query", "mode", "total", "first ms", "median ms", "p95 ms", "CPU ms", "RSS base→peak MiB")
    cells = []
    for case, mode, m in rows:
        label = case.name + (f" (page {case.page})" if case.page > 1 else "")
        if isinstance(m, str):
            cells.append((label, f"`{case.query}`", mode, m, "", "", "", "", ""))
            continue
        total = f"{m.total:,}" if isinstance(m.total, int) else m.total
        cells.append(
            (
                label,
                f"`{case.query}`",
                mode,
                total,
                f"{m.first_ms:,.1f}",
                f"{m.median_ms:,.1f}",
                f"{m.p95_ms:,.1f}",
                f"{m.cpu_median_ms:,.1f}",
                f"{m.rss_base_mib:.0f}→{m.rss_peak_mib:.0f}",
            )
        )
    return markdown_table(header, cells)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, help="an existing graph from make_large_graph.py (opened read-only)")
    parser.add_argument("--objects", type=int, default=100_000, help="size of the generated graph without --db")
    add_graph_options(parser)
    parser.add_argument("--runs", type=int, default=7, help="timed calls per case (after one warm-up call)")
    parser.add_argument("--mode", choices=("client", "reader", "both"), default="both")
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per case process")
    parser.add_argument("--breakdown", action="store_true", help="time the phases of one call per case instead")
    parser.add_argument("--json", type=Path, help="also write the measurements to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    if args.worker:
        worker(args.db, args.worker, args.mode, args.runs, args.breakdown)
        return 0

    cases = [c for c in CASES if not args.cases or c.name in args.cases.split(",")]
    modes = ["client", "reader"] if args.mode == "both" else [args.mode]
    if args.db is not None and not args.db.exists():
        parser.error(f"{args.db} does not exist (make one with benchmarks/make_large_graph.py)")
    print(machine_header())
    db: Path = args.db or ensure_graph(args.cache_dir, args.objects, source_code_points=args.source_code_points)
    print(f"db {db} ({db.stat().st_size / 2**20:.0f} MiB), {args.runs} runs\n")
    before = machine_state()
    rows: list[tuple[Case, str, Measurement | str]] = []
    for case in cases:
        for mode in modes:
            measured = run_case(db, case, mode, args.runs, args.breakdown, args.timeout)
            rows.append((case, mode, measured))
            if isinstance(measured, str):
                print(f"{case.name} [{mode}]: {measured}", flush=True)
            elif args.breakdown:
                print(f"{case.name} [{mode}] total={measured.total}")
                for label, ms in measured.breakdown.items():
                    print(f"    {label:<34} {ms:10.1f}" + ("" if "(calls)" in label else " ms"))
            else:
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    if not args.breakdown:
        print("\n" + table(rows))
    print("\n".join(machine_report(before, machine_state())))
    if args.json is not None:
        args.json.write_bytes(
            orjson.dumps(
                [
                    {"case": asdict(c), "mode": mode, "measurement": m if isinstance(m, str) else asdict(m)}
                    for c, mode, m in rows
                ],
                option=orjson.OPT_INDENT_2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
