"""The benchmark scripts run end to end at a tiny size: they build, serve, call and print what they promise.

Nothing here is timed: speed is what the scripts print, never an assertion (docs/performance.md). What is
asserted is what a reader of their output relies on: every case answered, zero HTTP errors, every object the
relevance set names exists, and a generated graph is the same for the same seed.
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
OBJECTS = "2000"
SOURCE = "20000"

pytestmark = pytest.mark.slow


def run(script: str, *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{script} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def table_rows(output: str, first_cell: str) -> list[list[str]]:
    rows = [line.strip("|").split("|") for line in output.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row] for row in rows if row[0].strip() == first_cell]


def dump_digest(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()


def test_the_generated_graph_is_the_same_for_the_same_seed(tmp_path: Path) -> None:
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    for path in (first, second):
        run("make_large_graph.py", str(path), "--objects", OBJECTS, "--source-code-points", SOURCE)
    assert dump_digest(first) == dump_digest(second)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-cache")


def test_bench_tools_times_every_case_beside_the_floor(cache: Path) -> None:
    out = run(
        "bench_tools.py",
        "--sizes",
        OBJECTS,
        "--runs",
        "2",
        "--source-code-points",
        SOURCE,
        "--cache-dir",
        str(cache),
        "--per-query",
    )
    assert "start-up to the first tools/list" in out
    assert "FAILED" not in out
    mixed = table_rows(out, "all searches above (mixed workload)")
    assert len(mixed) == 1 and mixed[0][-1] == "—", mixed  # no failed case, no error
    for title in ("zero hits", "get_context: big story line, last page", "read_source: big source, last page"):
        assert table_rows(out, title), title
    assert "load average before" in out


def test_relevance_scores_every_query_of_the_set(cache: Path) -> None:
    out = run("relevance.py", "--objects", OBJECTS, "--source-code-points", SOURCE, "--cache-dir", str(cache))
    assert "recall@10 overall (mean of" in out
    assert "must-pass queries" in out
    for query_id in ("demo-story-en", "demo-story-zh", "demo-story-tech", "gen-queue-topic"):
        assert table_rows(out, query_id), query_id


def test_bench_http_runs_both_servers_without_errors(cache: Path) -> None:
    out = run(
        "bench_http.py",
        "--sizes",
        OBJECTS,
        "--seconds",
        "2",
        "--workers",
        "1",
        "--clients",
        "1,4",
        "--source-code-points",
        SOURCE,
        "--cache-dir",
        str(cache),
    )
    rows = table_rows(out, "ours") + table_rows(out, "floor")
    assert len(rows) == 4, out
    for row in rows:
        assert int(row[3].replace(",", "")) > 0, row  # calls/s
        assert row[6] == "0", row  # errors


def test_bench_import_imports_a_generated_file(cache: Path) -> None:
    out = run("bench_import.py", "--sizes", OBJECTS, "--cache-dir", str(cache))
    assert "importer said: imported" in out
    assert table_rows(out, "2k"), out


def test_bench_import_breakdown_names_every_part(tmp_path: Path) -> None:
    graph = tmp_path / "graph.jsonl"
    run("make_jsonl.py", str(graph), "--objects", OBJECTS)
    plain = run("bench_import_breakdown.py", str(graph))
    out = run("bench_import_breakdown.py", str(graph), "--breakdown", "--drop-triggers", "revision")
    assert "lines per CPU-second" in plain and "peak RSS" in plain
    for part in ("read and stage", "merge: insert", "index: stage items (SQL)", "index: grams (Python)", "commit"):
        assert part in out, part
    assert "index: apply: INSERT INTO search_fts" in out and "total" in out
