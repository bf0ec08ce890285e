"""Time `db import` of JSON Lines files into a fresh database: objects/s, CPU and peak RSS, or (--breakdown) where
the time goes.

    python benchmarks/bench_import.py --sizes 100k,300k,1M                  # generated files, cached
    python benchmarks/bench_import.py /tmp/g1m.jsonl                        # any interchange file (e.g. `db export`)
    python benchmarks/bench_import.py --sizes 1M --breakdown                # in this process, phase by phase
    python benchmarks/bench_import.py /tmp/g1m.jsonl --breakdown --drop-triggers revision
    python benchmarks/bench_import.py /tmp/g100k.jsonl --breakdown --pragma 'PRAGMA threads = 1'
    python benchmarks/bench_import.py --sizes 2000 --cache-dir /tmp/sg-cache   # a quick check

The files: FILE arguments as they are, or per --sizes a file make_jsonl.py writes once into the cache directory.
Each import goes into a fresh database, created with the migrations (not timed) in a temporary directory (or
--work); `--drop-triggers revision|owner-revision|search` first drops the data-revision triggers, or the triggers
that name touched search items, in it: a measurement of what they cost, never a way to import.

The plain run is what a user gets: `python -m server db import --db DB FILE` in a child process, waited for with
wait4(), which reports that child's own CPU time and peak RSS; --repeat times, each on a fresh database (median wall
and CPU time, the largest peak RSS). Its report is shown, and the last line of its progress on stderr.

`--breakdown` runs the same pipeline in this process with timers around its parts: reading (parse and validate) and
staging, each merge step, and the search index rebuild (staging the items' rows in SQL, grams in Python, then each
statement of the schema's `search_apply_now` trigger one by one, as the trigger would run them, then the FTS insert
and the trigrams the importer writes itself, between dropping and creating again `search_items`' plain indexes as
the importer does), with CPU and wall time, this process's peak RSS after each part, and the MiB it read and wrote
through system calls during each part (/proc/self/io: the JSONL file, the database, its WAL and SQLite's temporary
files, page cache included). `--pragma SQL` (repeatable) runs a statement after the importer's own pragmas, e.g. to
measure a setting.

The machine is shared and busy at times: CPU time is the steadier figure; every block ends with what else the
machine was doing.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench_common import (
    BENCH_DIR,
    PYTHON,
    REPO,
    cache_lock,
    default_cache_dir,
    machine_header,
    machine_report,
    machine_state,
    markdown_table,
    parse_sizes,
    peak_rss_kib,
    server_env,
    size_label,
)
from make_jsonl import JSONL_VERSION, SEARCHABLE
from make_large_graph import DEFAULT_SEED

from server.store import importer, link_checks, merge, search_index, staging
from server.store.bulk_indexes import built_after, doubles
from server.store.jsonl import JsonlSource
from server.store.migrate import migrate, open_store
from server.store.progress import Progress

TRIGGERS: Final = {
    "revision": "name LIKE '%revision%'",
    "owner-revision": "name LIKE '%owner_revision%'",
    "search": "name LIKE '%search%' AND name NOT IN ('search_refresh_deferred', 'search_refresh_now',"
    " 'search_apply_now', 'scopes_search_ai', 'scopes_search_ad')",
}


# --- the files and the databases (both modes) ---------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    label: str
    path: Path
    lines: int
    objects: int
    """Searchable objects (the kinds make_large_graph counts)."""

    @property
    def mib(self) -> float:
        return self.path.stat().st_size / 2**20


def ensure_jsonl(cache_dir: Path, objects: int) -> Path:
    """The generated file of `objects` objects from the cache, written by make_jsonl.py when missing."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"import-{objects}-seed{DEFAULT_SEED}-v{JSONL_VERSION}.jsonl"
    with cache_lock(path):
        if not path.exists():
            partial = path.with_name(path.name + ".writing")
            print(f"writing {path} ...", file=sys.stderr, flush=True)
            command = [PYTHON, str(BENCH_DIR / "make_jsonl.py"), str(partial), "--objects", str(objects)]
            subprocess.run(command, cwd=REPO, env=server_env(), check=True)
            os.replace(partial, path)
    return path


def workload(label: str, path: Path) -> Workload:
    """The file with its lines and searchable objects, by a cheap scan of each line's kind (written first)."""
    lines = objects = 0
    kinds = {f'"kind":"{kind}"'.encode() for kind in SEARCHABLE}
    with path.open("rb") as data:
        for line in data:
            lines += 1
            objects += any(kind in line[:40] for kind in kinds)
    return Workload(label, path, lines, objects)


def fresh_database(folder: Path, drop: Sequence[str]) -> Path:
    """A new database at the current schema in `folder`, without the triggers named by `drop`."""
    db = folder / "import.db"
    migrate(db)
    if drop:
        with sqlite3.connect(db) as conn:
            where = " OR ".join(f"({TRIGGERS[name]})" for name in drop)
            for (trigger,) in conn.execute(f"SELECT name FROM sqlite_schema WHERE type = 'trigger' AND ({where})"):
                conn.execute(f"DROP TRIGGER {trigger}")
    return db


# --- the plain run: the CLI in a child process ----------------------------------------------------------------


@dataclass
class Imported:
    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    db_mib: float
    report: str
    progress: str


def import_in_child(path: Path, db: Path, folder: Path) -> Imported:
    out, err = folder / "stdout", folder / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(
            [PYTHON, "-m", "server", "db", "import", "--db", str(db), str(path)],
            cwd=REPO,
            env=server_env(),
            stdout=stdout,
            stderr=stderr,
        )
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
    report = out.read_text(errors="replace").strip()
    progress = err.read_text(errors="replace").strip()
    if process.returncode != 0:
        raise RuntimeError(f"import failed ({process.returncode}): {progress[-1000:]}")
    db_size = sum(Path(f"{db}{s}").stat().st_size for s in ("", "-wal") if Path(f"{db}{s}").exists())
    last = progress.splitlines()[-1] if progress else ""
    return Imported(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, db_size / 2**20, report, last)


def plain_run(work: Workload, args: argparse.Namespace) -> tuple[str, ...]:
    runs = []
    for n in range(args.repeat):
        print(f"importing {work.path.name} ({n + 1}/{args.repeat}) ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="sg-bench-import-", dir=args.work) as temp:
            db = fresh_database(Path(temp), args.drop_triggers)
            runs.append(import_in_child(work.path, db, Path(temp)))
    print(f"importer said: {runs[-1].report}")
    # Linux counts into a child's peak RSS the peak of the process that started it (exec keeps the high-water mark).
    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"(this benchmark's own peak RSS, a floor under the import's: {floor:.0f} MiB)")
    if runs[-1].progress:
        print(f"its last stderr line: {runs[-1].progress}")
    wall = statistics.median(r.wall_s for r in runs)
    cpu = statistics.median(r.cpu_s for r in runs)
    return (
        work.label,
        f"{work.objects:,}",
        f"{work.lines:,}",
        f"{work.mib:,.0f}",
        f"{wall:,.1f}",
        f"{work.objects / wall:,.0f}",
        f"{work.lines / wall:,.0f}",
        f"{cpu:,.1f}",
        f"{work.lines / cpu:,.0f}",
        f"{max(r.peak_rss_mib for r in runs):,.0f}",
        f"{runs[-1].db_mib:,.0f}",
    )


PLAIN_HEADER: Final = (
    "file",
    "objects",
    "lines",
    "file MiB",
    "wall s",
    "objects/s",
    "lines/s",
    "CPU s",
    "lines per CPU-s",
    "peak RSS MiB",
    "db MiB",
)


# --- the breakdown: the same pipeline in this process, timed part by part -------------------------------------


def cpu() -> float:
    return time.process_time()


def peak_rss_mib() -> float:
    return peak_rss_kib(os.getpid()) / 1024


def io_mib() -> tuple[float, float]:
    """MiB this process has read and written through system calls so far (`rchar`, `wchar` of /proc/self/io): the
    database, its WAL and SQLite's temporary files, whether the kernel served them from its page cache or not."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["rchar"]) / 2**20, int(fields["wchar"]) / 2**20


class Timers:
    """CPU and wall seconds per named part, in the order first seen."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.wall: dict[str, float] = defaultdict(float)

    def add(self, name: str, cpu_s: float, wall_s: float) -> None:
        self.cpu[name] += cpu_s
        self.wall[name] += wall_s

    def wrap(self, module: Any, name: str, label: str) -> Callable[[], None]:
        """Time every call of `module.name` under `label`; returns what undoes it."""
        original: Callable[..., Any] = getattr(module, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            c0, w0 = cpu(), time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(label, cpu() - c0, time.perf_counter() - w0)

        setattr(module, name, timed)
        return lambda: setattr(module, name, original)


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


MERGE_STEPS: Final = (
    (merge, "_retire"),
    (merge, "_index"),
    (merge, "_repeats"),
    (merge, "_stored"),
    (link_checks, "links"),
    (merge, "_insert"),
    (link_checks, "after"),
)


def breakdown_run(work: Workload, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="sg-bench-import-", dir=args.work) as temp:
        db = fresh_database(Path(temp), args.drop_triggers)
        timers = Timers()
        undo = [timers.wrap(module, name, f"merge: {name.strip('_')}") for module, name in MERGE_STEPS]
        try:
            done = import_in_phases(work.path, db, timers, args.pragma)
        finally:
            for restore in undo:
                restore()
    rows = []
    for name, c, w, rss, read, written in done.phases:
        rows.append((name, f"{c:.1f}", f"{w:.1f}", f"{rss:,.0f}", f"{read:,.0f}", f"{written:,.0f}"))
        parts = ["read, parse, validate"] if name == "read and stage" else []
        parts += [key for key in timers.cpu if key.startswith("merge: ")] if name == "merge" else []
        rows += [(f"· {part}", f"{timers.cpu[part]:.1f}", f"{timers.wall[part]:.1f}", "", "", "") for part in parts]
        if parts:
            rest_cpu = c - sum(timers.cpu[part] for part in parts)
            rest_wall = w - sum(timers.wall[part] for part in parts)
            rows.append(("· (the rest)", f"{rest_cpu:.1f}", f"{rest_wall:.1f}", "", "", ""))
    read = sum(phase[4] for phase in done.phases)
    written = sum(phase[5] for phase in done.phases)
    total = (
        "total",
        f"{done.cpu_s:.1f}",
        f"{done.wall_s:.1f}",
        f"{peak_rss_mib():,.0f}",
        f"{read:,.0f}",
        f"{written:,.0f}",
    )
    rows.append(total)
    print(f"{done.lines:,} lines ({done.new:,} new)\n")
    print(markdown_table(("part", "CPU s", "wall s", "peak RSS MiB", "read MiB", "written MiB"), rows))
    print(
        f"\n{work.objects / done.wall_s:,.0f} objects/s, {done.lines / done.wall_s:,.0f} lines/s wall, "
        f"{done.lines / done.cpu_s:,.0f} lines per CPU-second"
    )


@dataclass
class Phases:
    phases: list[tuple[str, float, float, float, float, float]]
    """(part, CPU s, wall s, peak RSS MiB after it, MiB read and written through system calls during it)."""
    cpu_s: float
    wall_s: float
    lines: int
    new: int


def import_in_phases(jsonl: Path, db: Path, timers: Timers, pragmas: Sequence[str] = ()) -> Phases:
    """importer.import_lines, step by step, each step timed; `pragmas` run after the importer's own."""
    conn = open_store(db, write=True)
    phases: list[tuple[str, float, float, float, float, float]] = []
    c_start, w_start = cpu(), time.perf_counter()

    def phase(name: str, run: Callable[[], Any]) -> Any:
        c0, w0, (r0, x0) = cpu(), time.perf_counter(), io_mib()
        result = run()
        r1, x1 = io_mib()
        phases.append((name, cpu() - c0, time.perf_counter() - w0, peak_rss_mib(), r1 - r0, x1 - x0))
        return result

    try:
        for pragma in (*importer.IMPORT_PRAGMAS, *pragmas):
            conn.execute(pragma)
        conn.execute("BEGIN IMMEDIATE")
        source = TimedSource(JsonlSource(jsonl), timers)
        counts = phase("read and stage", lambda: staging.stage(conn, source, Progress.silent(), sync=False))
        search_index.defer(conn)
        merged = phase("merge", lambda: merge.merge(conn, counts, Progress.silent(), None))
        search_index.register_functions(conn)
        with search_index.rebuild_settings(conn):
            phase("index: stage items (SQL)", lambda: _stage_items(conn))
            staged = phase("index: grams (Python)", lambda: search_index.add_grams(conn, Progress.silent()))
            body = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'search_apply_now'").fetchone()[0]
            statements = [s.strip() for s in re.split(r";\s*\n", body[body.index("BEGIN") + 5 : body.rindex("END")])]
            doubling = doubles(conn, "search_items", staged)
            with ExitStack() as bulk:  # as search_index.rebuild applies them
                dropping = built_after(conn, "search_items", staged)
                phase("index: drop plain indexes", lambda: bulk.enter_context(dropping))
                for statement in filter(None, statements):
                    words = " ".join(ln for ln in statement.splitlines() if not ln.strip().startswith("--")).split()
                    phase("index: apply: " + " ".join(words[:3]), lambda s=statement: conn.execute(s))  # type: ignore[misc]
                phase(
                    "index: FTS insert (texts folded in Python)", lambda: search_index.insert_fts(conn, bulk=doubling)
                )
                phase("index: trigrams (search_trigrams)", lambda: search_index.add_trigrams(conn))
                conn.execute(search_index.CLEAN)
                phase("index: create plain indexes", bulk.close)
            if doubling:
                phase("index: FTS merge into one b-tree", lambda: search_index.merge_fts(conn))
            conn.execute(search_index.SET_MODE, {"mode": "immediate"})
        phase("commit", lambda: conn.execute("COMMIT"))
        staging.drop_tables(conn)
    finally:
        conn.close()
    total_cpu, total_wall = cpu() - c_start, time.perf_counter() - w_start
    return Phases(phases, total_cpu, total_wall, sum(counts.values()), sum(merged.written.values()))


def _stage_items(conn: sqlite3.Connection) -> None:
    conn.execute(search_index.SET_MODE, {"mode": "flush"})
    conn.execute(search_index.FLUSH)


# --- the run ---------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", type=Path, nargs="*", metavar="FILE", help="interchange files (instead of --sizes)")
    parser.add_argument("--sizes", help="generated files of these many objects (default 100k,300k,1M)")
    parser.add_argument("--breakdown", action="store_true", help="run in this process and time each part")
    parser.add_argument("--drop-triggers", action="append", choices=sorted(TRIGGERS), default=[])
    parser.add_argument(
        "--pragma",
        action="append",
        default=[],
        metavar="SQL",
        help="with --breakdown: run this statement (e.g. 'PRAGMA threads = 1') after the importer's own pragmas",
    )
    parser.add_argument("--repeat", type=int, default=1, help="imports per file (median wall time; not --breakdown)")
    parser.add_argument("--work", type=Path, help="directory for the databases (default: a temporary one)")
    parser.add_argument(
        "--cache-dir", type=Path, default=default_cache_dir(), help="where the generated files are kept"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.files and args.sizes:
        parser.error("give FILE arguments or --sizes, not both")
    if args.pragma and not args.breakdown:
        parser.error("--pragma is for --breakdown (the plain run is the CLI as a user runs it)")
    if args.breakdown and args.repeat != 1:
        parser.error("--breakdown runs once per file (--repeat is for the plain run)")
    missing = [str(path) for path in args.files if not path.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    print(machine_header())
    if args.drop_triggers:
        print(f"without the triggers: {', '.join(args.drop_triggers)} (a measurement, not a way to import)")
    if args.pragma:
        print(f"with: {'; '.join(args.pragma)} (a measurement, not a way to import)")
    if args.files:
        files = [(path.name, path) for path in args.files]
    else:
        sizes = parse_sizes(args.sizes or "100k,300k,1M")
        files = [(size_label(objects), ensure_jsonl(args.cache_dir, objects)) for objects in sizes]
    rows = []
    for label, path in files:
        work = workload(label, path)
        name = "" if label == path.name else f" {path.name},"
        print(f"\n## {label}:{name} {work.objects:,} objects, {work.lines:,} lines, {work.mib:,.0f} MiB\n")
        before = machine_state()
        if args.breakdown:
            breakdown_run(work, args)
        else:
            rows.append(plain_run(work, args))
        print("\n".join(machine_report(before, machine_state())))
    if rows:
        print("\n" + markdown_table(PLAIN_HEADER, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
