"""Time `python -m server db import` on generated JSON Lines files: wall time, objects/s, CPU and peak RSS.

    python benchmarks/bench_import.py --sizes 100k,300k,1M
    python benchmarks/bench_import.py --sizes 2000 --cache-dir /tmp/sg-cache          # a quick check

For each size it takes the interchange file from the cache directory (written once by make_jsonl.py), creates a
fresh database in a temporary directory with `python -m server db migrate` (not timed), then runs
`python -m server db import --db DB FILE` as a child process and waits for it with wait4(), which reports that
child's own CPU time and peak RSS. The importer's stdout (its report) is shown; its stderr (progress lines, if
any) is kept apart and only its last line is shown. Each import runs --repeat times on a fresh database; the
median wall time is reported with the largest peak RSS.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_common import (
    BENCH_DIR,
    PYTHON,
    REPO,
    default_cache_dir,
    machine_header,
    machine_report,
    machine_state,
    markdown_table,
    parse_sizes,
    run_cli,
    server_env,
    size_label,
)
from make_jsonl import JSONL_VERSION, SEARCHABLE
from make_large_graph import DEFAULT_SEED


@dataclass
class Imported:
    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    db_mib: float
    report: str
    progress: str


def ensure_jsonl(cache_dir: Path, objects: int) -> Path:
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"import-{objects}-seed{DEFAULT_SEED}-v{JSONL_VERSION}.jsonl"
    if not path.exists():
        partial = path.with_name(path.name + ".writing")
        print(f"writing {path} ...", file=sys.stderr, flush=True)
        command = [PYTHON, str(BENCH_DIR / "make_jsonl.py"), str(partial), "--objects", str(objects)]
        subprocess.run(command, cwd=REPO, env=server_env(), check=True)
        os.replace(partial, path)
    return path


def count_objects(path: Path) -> tuple[int, int]:
    """(lines, searchable objects) of an interchange file, by a cheap scan of each line's kind."""
    lines = objects = 0
    kinds = {f'"kind":"{kind}"'.encode() for kind in SEARCHABLE}
    with path.open("rb") as data:
        for line in data:
            lines += 1
            objects += any(kind in line[:40] for kind in kinds)
    return lines, objects


def import_once(path: Path) -> Imported:
    with tempfile.TemporaryDirectory(prefix="sg-bench-import-") as temp:
        db = Path(temp) / "import.db"
        run_cli(["db", "migrate", "--db", str(db)])
        out, err = Path(temp) / "stdout", Path(temp) / "stderr"
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100k,300k,1M", help="objects per file, e.g. 100k,300k,1M")
    parser.add_argument("--repeat", type=int, default=1, help="imports per size (median wall time)")
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir(), help="where generated files are kept")
    args = parser.parse_args(argv)
    print(machine_header())
    rows = []
    for objects in parse_sizes(args.sizes):
        path = ensure_jsonl(args.cache_dir, objects)
        lines, searchable = count_objects(path)
        size_mib = path.stat().st_size / 2**20
        before = machine_state()
        runs = []
        for n in range(args.repeat):
            print(f"importing {path.name} ({n + 1}/{args.repeat}) ...", file=sys.stderr, flush=True)
            runs.append(import_once(path))
        wall = statistics.median(r.wall_s for r in runs)
        print(f"\n## {size_label(objects)} objects: {path.name}, {lines:,} lines, {size_mib:,.0f} MiB")
        print(f"importer said: {runs[-1].report}")
        if runs[-1].progress:
            print(f"its last stderr line: {runs[-1].progress}")
        print("\n".join(machine_report(before, machine_state())))
        rows.append(
            (
                size_label(objects),
                f"{searchable:,}",
                f"{lines:,}",
                f"{size_mib:,.0f}",
                f"{wall:,.1f}",
                f"{searchable / wall:,.0f}",
                f"{lines / wall:,.0f}",
                f"{statistics.median(r.cpu_s for r in runs):,.1f}",
                f"{max(r.peak_rss_mib for r in runs):,.0f}",
                f"{runs[-1].db_mib:,.0f}",
            )
        )
    header = (
        "size",
        "objects",
        "lines",
        "file MiB",
        "wall s",
        "objects/s",
        "lines/s",
        "CPU s",
        "peak RSS MiB",
        "db MiB",
    )
    print("\n" + markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
