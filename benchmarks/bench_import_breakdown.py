"""Time `db import` of a JSON Lines file into a fresh database: wall and CPU time, lines/s, peak RSS,
and (with --breakdown) where the time goes.

    python benchmarks/make_large_graph.py /tmp/g1m.db --objects 1000000
    story-graph-mcp db export --db /tmp/g1m.db /tmp/g1m.jsonl
    python benchmarks/bench_import.py /tmp/g1m.jsonl                  # the CLI in a child process
    python benchmarks/bench_import.py /tmp/g1m.jsonl --breakdown      # in this process, phase by phase
    python benchmarks/bench_import.py /tmp/g1m.jsonl --breakdown --drop-triggers revision

The plain run is what a user gets: `story-graph-mcp db import` in a child process, its peak RSS and
CPU time from the kernel's accounting of that child. `--breakdown` runs the same pipeline in this
process with timers around its parts: reading (parse and validate) and staging, each merge step,
and the search index rebuild (staging the items' rows in SQL, grams in Python, then each statement
of the schema's `search_apply_now` trigger one by one, as the trigger would run them).
`--drop-triggers revision|search` first drops the data-revision triggers, or the triggers that name
touched search items, in the fresh database: a measurement of what they cost, never a way to import.

The machine is shared and busy at times: CPU time is the steadier figure; wall time is printed too.
"""

from __future__ import annotations

import argparse
import re
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from server.store import importer, merge, search_index, staging  # noqa: E402
from server.store.jsonl import JsonlSource  # noqa: E402
from server.store.migrate import migrate, open_store  # noqa: E402
from server.store.progress import Progress  # noqa: E402

TRIGGERS: Final = {
    "revision": "name LIKE '%revision%'",
    "owner-revision": "name LIKE '%owner_revision%'",
    "search": "name LIKE '%search%' AND name NOT IN ('search_refresh_deferred', 'search_refresh_now',"
    " 'search_apply_now', 'scopes_search_ai', 'scopes_search_ad')",
}


def cpu() -> float:
    return time.process_time()


def peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Timers:
    """CPU and wall seconds per named part, in the order first seen."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.wall: dict[str, float] = defaultdict(float)

    def add(self, name: str, cpu_s: float, wall_s: float) -> None:
        self.cpu[name] += cpu_s
        self.wall[name] += wall_s

    def wrap(self, module: Any, name: str, label: str | None = None) -> None:
        original: Callable[..., Any] = getattr(module, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            c0, w0 = cpu(), time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(label or name.strip("_"), cpu() - c0, time.perf_counter() - w0)

        setattr(module, name, timed)


class TimedSource:
    """The JSONL source with its own time (reading, parsing, validating) counted apart."""

    def __init__(self, source: JsonlSource, timers: Timers) -> None:
        self.source = source
        self.timers = timers

    def __iter__(self) -> Iterator[Any]:
        lines = iter(self.source)
        while True:
            c0, w0 = cpu(), time.perf_counter()
            try:
                item = next(lines)
            except StopIteration:
                return
            finally:
                self.timers.add("read, parse, validate", cpu() - c0, time.perf_counter() - w0)
            yield item

    def fraction_read(self) -> float | None:
        return self.source.fraction_read()


def fresh_database(work: Path, drop: list[str]) -> Path:
    db = work / "graph.db"
    migrate(db)
    if drop:
        with sqlite3.connect(db) as conn:
            where = " OR ".join(f"({TRIGGERS[name]})" for name in drop)
            for (trigger,) in conn.execute(f"SELECT name FROM sqlite_schema WHERE type = 'trigger' AND ({where})"):
                conn.execute(f"DROP TRIGGER {trigger}")
    return db


def plain_run(jsonl: Path, db: Path) -> None:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "server", "db", "import", "--db", str(db), str(jsonl), "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(done.stderr)
    lines = int(re.search(r"imported (\d+) lines", done.stdout).group(1))  # type: ignore[union-attr]
    child_cpu = usage.ru_utime + usage.ru_stime
    print(done.stdout.strip())
    print(
        f"{lines:,} lines in {wall:.1f} s wall ({lines / wall:,.0f} lines/s), {child_cpu:.1f} s CPU"
        f" ({lines / child_cpu:,.0f} lines per CPU-second), peak RSS {usage.ru_maxrss / 1024:.0f} MiB"
    )


def breakdown_run(jsonl: Path, db: Path) -> None:
    timers = Timers()
    for name in ("_retire", "_index", "_repeats", "_stored", "_links", "_insert", "_after"):
        timers.wrap(merge, name, f"merge: {name.strip('_')}")
    conn = open_store(db, write=True)
    phases: list[tuple[str, float, float, float]] = []
    c_start, w_start = cpu(), time.perf_counter()

    def phase(name: str, run: Callable[[], Any]) -> Any:
        c0, w0 = cpu(), time.perf_counter()
        result = run()
        phases.append((name, cpu() - c0, time.perf_counter() - w0, peak_rss_mib()))
        return result

    for pragma in importer.IMPORT_PRAGMAS:
        conn.execute(pragma)
    conn.execute("BEGIN IMMEDIATE")
    source = TimedSource(JsonlSource(jsonl), timers)
    counts = phase("read and stage", lambda: staging.stage(conn, source, Progress.silent(), sync=False))
    search_index.defer(conn)
    merged = phase("merge", lambda: merge.merge(conn, counts, Progress.silent(), None))
    with search_index.rebuild_settings(conn):
        phase("index: stage items (SQL)", lambda: _stage_items(conn))
        phase("index: grams (Python)", lambda: _grams(conn))
        body = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'search_apply_now'").fetchone()[0]
        statements = [s.strip() for s in re.split(r";\s*\n", body[body.index("BEGIN") + 5 : body.rindex("END")])]
        for statement in filter(None, statements):
            words = " ".join(line for line in statement.splitlines() if not line.strip().startswith("--")).split()
            phase("index: apply: " + " ".join(words[:3]), lambda s=statement: conn.execute(s))  # type: ignore[misc]
        conn.execute(search_index.SET_MODE, {"mode": "immediate"})
    phase("commit", lambda: conn.execute("COMMIT"))
    staging.drop_tables(conn)
    conn.close()
    total_cpu, total_wall = cpu() - c_start, time.perf_counter() - w_start
    lines = sum(counts.values())
    print(f"{lines:,} lines ({sum(merged.written.values()):,} new)")
    print(f"{'part':<48} {'CPU s':>8} {'wall s':>8} {'peak RSS MiB':>13}")
    for name, c, w, rss in phases:
        print(f"{name:<48} {c:8.1f} {w:8.1f} {rss:13.0f}")
        if name == "read and stage":
            _sub(timers, ("read, parse, validate",), c, w)
        if name == "merge":
            _sub(timers, [key for key in timers.cpu if key.startswith("merge: ")], c, w)
    print(
        f"{'total':<48} {total_cpu:8.1f} {total_wall:8.1f} {peak_rss_mib():13.0f}   "
        f"{lines / total_wall:,.0f} lines/s wall, {lines / total_cpu:,.0f} lines per CPU-second"
    )


def _sub(timers: Timers, names: Any, parent_cpu: float, parent_wall: float) -> None:
    for name in names:
        print(f"  {name:<46} {timers.cpu[name]:8.1f} {timers.wall[name]:8.1f}")
    if names:
        rest_cpu = parent_cpu - sum(timers.cpu[name] for name in names)
        rest_wall = parent_wall - sum(timers.wall[name] for name in names)
        print(f"  {'(the rest)':<46} {rest_cpu:8.1f} {rest_wall:8.1f}")


def _stage_items(conn: sqlite3.Connection) -> None:
    conn.execute(search_index.SET_MODE, {"mode": "flush"})
    conn.execute(search_index.FLUSH)


def _grams(conn: sqlite3.Connection) -> None:
    search_index.add_grams(conn, Progress.silent())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", type=Path)
    parser.add_argument("--breakdown", action="store_true", help="run in this process and time each part")
    parser.add_argument("--drop-triggers", action="append", choices=sorted(TRIGGERS), default=[])
    parser.add_argument("--work", type=Path, help="directory for the database (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        db = fresh_database(Path(work), args.drop_triggers)
        if args.breakdown:
            breakdown_run(args.jsonl, db)
        else:
            plain_run(args.jsonl, db)


if __name__ == "__main__":
    main()
