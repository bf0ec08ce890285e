"""Benchmark story_graph_read_source: page N of a 10 MB source costs what page 1 of a small source does.

    python benchmarks/bench_read_source.py                     # builds the database in a temp dir
    python benchmarks/bench_read_source.py --code-points 20000000 --runs 200
    python benchmarks/bench_read_source.py --graph /tmp/sg-100k.db   # the sources inside a large graph's big scope

The database holds one big source (default 10,000,000 code points, mostly ASCII with CJK and emoji, about
10.5 MB of UTF-8 in 4,096-code-point chunks) and one small source (a few hundred code points), each with one
source reference in project `bench`. It is built in a child process, so the measuring process never holds the
big text. With `--graph`, a copy of that graph (from make_large_graph.py) gets the two sources and their references
in its `big` project instead, so each page also pays that scope's coverage and revision reads at full size.

The measuring process talks to the real server stack through an in-process MCP `Client`, and also calls the
reader directly ("reader only": SQL and paging, no MCP round trip). It walks the big source's current text page by
page (page_size 4,000) to reach the last page, timing every page. Then, in `--runs` rounds where the cases take
turns (so background load falls on all alike), it times: page 1 of the small source, page 1 of the big source,
and the last page of the big source (re-using its cursor). For each it reports the median and p95 wall time and
the peak of Python allocations during one more call (tracemalloc), and the median CPU time of the process per
call (steadier than wall time on a shared machine). For contrast it reports the allocation peak of loading the
whole big text, which a page read never does, the process's peak RSS, and two figures independent of machine
load: the SQLite virtual-machine steps of one reader call, and its hops to the connection's thread (each
aiosqlite statement, fetch or close is one round trip between the event loop and that thread, ~40–100 µs).

Writes only inside a temporary directory it creates and removes (a --graph file is copied, never written).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import orjson
from bench_common import machine_header, machine_report, machine_state, p95, vm_step_counter
from graph_plants import big_text

ROOT: Final = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mcp import Client  # noqa: E402

from server.app import StaticAccess, build_server  # noqa: E402
from server.contracts.common import Grant  # noqa: E402
from server.contracts.source import ReadSourceArgs  # noqa: E402
from server.reader import source as reader  # noqa: E402
from server.reader.cursor import CursorCodec  # noqa: E402
from server.reader.db import Database  # noqa: E402
from server.reader.memo import Memo  # noqa: E402
from server.store.importer import import_file  # noqa: E402
from server.store.migrate import migrate  # noqa: E402

READ: Final = "story_graph_read_source"
PAGE: Final = 4000
T: Final = "2026-07-01T10:00:00Z"
BIG_PROJECT: Final = "big"
"""The project of make_large_graph.py that holds 90 % of its data (used with --graph)."""
CODEC: Final = CursorCodec(b"bench-secret-0123456789")


def build(path: Path, code_points: int, project: str) -> None:
    """A new database with project `bench`, or (project `big`) the sources added to an existing graph at `path`."""
    text = big_text(code_points)
    small = "A short message: we keep SQLite in WAL mode for the session cache. 短消息：保持 WAL 模式。 ✅" * 3
    scope = {"kind": "projects", "projectIds": [project]}
    lines: list[dict[str, Any]] = (
        [{"kind": "project", "id": project, "name": "Bench"}, {"kind": "scope", "scope": scope}]
        if project == "bench"
        else []
    )
    lines.append({"kind": "result", "id": "res-bench", "scope": scope, "review_generated_at": T, "recorded_at": T})
    for source_id, body in (("src-big", text), ("src-small", small)):
        fragment = body[100:600]
        lines += [
            {
                "kind": "source",
                "id": source_id,
                "source_type": "note",
                "project_id": project,
                "current_version": "v1",
                "updated_at": T,
            },
            {"kind": "source_version", "source_id": source_id, "version": "v1", "text": body, "recorded_at": T},
            {
                "kind": "source_reference",
                "id": f"ref-{source_id.removeprefix('src-')}",
                "result_id": "res-bench",
                "source_type": "note",
                "original_source_id": source_id,
                "source_version": "v1",
                "locator": {"project_id": project, "document_id": source_id},
                "fragment": {"text": fragment, "start": 100, "end": 100 + len(fragment)},
                "source_length": len(body),
                "recorded_at": T,
            },
        ]
    jsonl = path.with_suffix(".jsonl")
    jsonl.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    if project == "bench":
        migrate(path)
    import_file(path, jsonl)
    jsonl.unlink()


Case = tuple[str, Callable[[], Awaitable[dict[str, Any]]]]


@dataclass
class Timing:
    times: list[float]
    """Wall seconds per call."""
    cpu: list[float]
    """Process CPU seconds per call (all threads: SQLite's worker thread too)."""
    peak: int
    """tracemalloc peak of one more call, bytes."""
    result: dict[str, Any]


async def timed(cases: list[Case], runs: int) -> list[Timing]:
    """Per case: wall and CPU times of `runs` calls, the tracemalloc peak of one more call, and its result.

    The cases take turns (one call each per round), so background load falls on all of them alike."""
    times: list[list[float]] = [[] for _ in cases]
    cpu: list[list[float]] = [[] for _ in cases]
    for _ in range(runs):
        for index, (_, call) in enumerate(cases):
            start, start_cpu = time.perf_counter(), time.process_time()
            await call()
            times[index].append(time.perf_counter() - start)
            cpu[index].append(time.process_time() - start_cpu)
    measured = []
    for index, (_, call) in enumerate(cases):
        tracemalloc.start()
        tracemalloc.reset_peak()
        result = await call()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        measured.append(Timing(times[index], cpu[index], peak, result))
    return measured


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.2f} ms"


async def measure(path: Path, runs: int, project: str) -> None:
    grant = Grant(default_project=project)
    server = build_server(path, StaticAccess(grant), CODEC)
    async with Client(server) as client:

        async def read(reference: str, cursor: str | None = None) -> dict[str, Any]:
            arguments: dict[str, Any] = {"source_reference_id": reference, "content_kind": "current", "page_size": PAGE}
            if cursor is not None:
                arguments["cursor"] = cursor
            result = await client.call_tool(READ, arguments)
            assert not result.is_error and result.structured_content is not None, result.content
            content: dict[str, Any] = result.structured_content
            return content

        # Walk the big source to its last page, timing each page.
        walk: list[float] = []
        cursor: str | None = None
        previous: str | None = None
        page: dict[str, Any] = {}
        while True:
            start = time.perf_counter()
            page = await read("ref-big", cursor)
            walk.append(time.perf_counter() - start)
            previous, cursor = cursor, page["page"]["next_cursor"]
            if cursor is None:
                break
        total = page["page"]["total_count"]
        print(
            f"big source: {total:,} code points, {len(walk):,} pages of {PAGE:,}; last page starts at "
            f"{page['position']['start']:,}"
        )
        tenth = max(1, len(walk) // 10)
        print(
            f"walk: median of the first {tenth} pages {ms(statistics.median(walk[1 : tenth + 1]))}, "
            f"of the last {tenth} pages {ms(statistics.median(walk[-tenth:]))}, "
            f"p95 of all pages {ms(p95(walk[1:]))}"
        )

        cases: list[Case] = [
            ("small source, page 1", lambda: read("ref-small")),
            ("big source, page 1", lambda: read("ref-big")),
            (f"big source, page {len(walk):,} (last)", lambda: read("ref-big", previous)),
        ]
        db = await Database.open(path)
        memo = Memo()  # shared by the calls, as in the server (coverage is remembered per scope revision)

        async def direct(reference: str, cursor: str | None = None) -> dict[str, Any]:
            arguments = ReadSourceArgs(
                source_reference_id=reference, content_kind="current", page_size=PAGE, cursor=cursor
            )
            response = await reader.read(db, grant, CODEC, memo, arguments, "2026-07-01T10:00:00.000Z")
            return response.model_dump(mode="json")

        cases += [
            ("reader only: small source, page 1", lambda: direct("ref-small")),
            ("reader only: big source, page 1", lambda: direct("ref-big")),
            (f"reader only: big, page {len(walk):,}", lambda: direct("ref-big", previous)),
        ]
        print(f"\n{'case':34} {'median':>10} {'p95':>10} {'CPU':>10} {'alloc peak':>12}  returned")
        for (name, _), timing in zip(cases, await timed(cases, runs), strict=True):
            position = timing.result["position"]
            print(
                f"{name:34} {ms(statistics.median(timing.times))} {ms(p95(timing.times))} "
                f"{ms(statistics.median(timing.cpu))} {timing.peak / 1024:9.1f} KiB  "
                f"[{position['start']:,}, {position['end']:,})"
            )

        # Load-independent: SQLite virtual-machine steps (all statements on the thread, so that the progress
        # handler counting them is the only one), and the hops to the connection's thread as the server runs.
        async with vm_step_counter(path) as steps:
            hopped = await Database.open(path, size=1)
            hops = [0]
            async with hopped.snapshot() as conn:
                # Every aiosqlite operation is one call of this: one round trip to the connection's thread.
                hop: Callable[..., Awaitable[Any]] = conn._execute

                async def counting_hop(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
                    hops[0] += 1
                    return await hop(function, *args, **kwargs)

                conn._execute = counting_hop  # type: ignore[method-assign,assignment]
            warm_up = ReadSourceArgs(source_reference_id="ref-small", content_kind="current")
            for counted in (steps.db, hopped):  # loads the schema
                await reader.read(counted, grant, CODEC, memo, warm_up, "2026-07-01T10:00:00.000Z")
            print()
            for name, reference, cursor in (
                ("small source, page 1", "ref-small", None),
                ("big source, page 1", "ref-big", None),
                (f"big source, page {len(walk):,}", "ref-big", previous),
            ):
                steps.count = hops[0] = 0
                arguments = ReadSourceArgs(
                    source_reference_id=reference, content_kind="current", page_size=PAGE, cursor=cursor
                )
                for counted in (steps.db, hopped):
                    await reader.read(counted, grant, CODEC, memo, arguments, "2026-07-01T10:00:00.000Z")
                print(f"reader call, {name:26} SQLite VM steps {steps.count:8,}   thread hops {hops[0]:3}")
            await hopped.close()
        await db.close()

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of this process after all the reads above: {rss:.0f} MiB")
    tracemalloc.start()
    text = "".join(row for row in _all_chunks(path))
    whole_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(
        f"for contrast, loading the whole big text once: {whole_peak / 1024 / 1024:.1f} MiB allocated "
        f"({len(text):,} code points)"
    )
    del text


def _all_chunks(path: Path) -> list[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT text FROM source_chunks WHERE source_id = 'src-big' ORDER BY start").fetchall()
    return [row[0] for row in rows]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code-points", type=int, default=10_000_000, help="size of the big source")
    parser.add_argument("--runs", type=int, default=100, help="timed calls per case")
    parser.add_argument("--graph", type=Path, help="a make_large_graph.py graph to copy and add the sources to")
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)  # child process: build this file and exit
    parser.add_argument("--project", default="bench", help=argparse.SUPPRESS)  # child process: where to add them
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.build is not None:
        build(args.build, args.code_points, args.project)
        return 0
    print(machine_header())
    folder = Path(tempfile.mkdtemp(prefix="sg-bench-read-source-"))
    try:
        path = folder / "bench.db"
        project = "bench"
        start = time.perf_counter()
        if args.graph is not None:
            with sqlite3.connect(f"file:{args.graph}?mode=ro", uri=True) as source, sqlite3.connect(path) as copy:
                source.backup(copy)  # a consistent copy, WAL included
            project = BIG_PROJECT
        command = [sys.executable, __file__, "--build", str(path), "--code-points", str(args.code_points)]
        subprocess.run([*command, "--project", project], check=True)
        print(f"built {path.stat().st_size / 1024 / 1024:.1f} MiB database in {time.perf_counter() - start:.1f} s")
        before = machine_state()
        anyio.run(measure, path, args.runs, project, backend="asyncio")
        print("\n".join(machine_report(before, machine_state())))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
