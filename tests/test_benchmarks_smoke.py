"""The benchmark scripts run end to end at a tiny size: they build, serve, call and print what they promise.

Nothing here is timed: speed is what the scripts print, never an assertion (docs/performance.md). What is
asserted is what a reader of their output relies on: every case answered, zero HTTP errors, every object the
relevance set names exists, a generated graph is the same for the same seed, and every benchmark command the docs
quote names a script that exists and options it accepts.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
OBJECTS = "2000"
SOURCE = "20000"
SCRIPTS = sorted(path.name for path in BENCH.glob("*.py") if 'if __name__ == "__main__"' in path.read_text())
"""Every runnable script (the others are modules the scripts import)."""

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


def test_benchmarks_started_together_build_a_cached_graph_once(tmp_path: Path) -> None:
    """Two runs sharing a cache (two checkouts benchmarking at once) built into the same temporary file together;
    the second now waits for the first and uses its graph."""
    build = (
        "import sys; from pathlib import Path; import bench_common; "
        f"print(bench_common.ensure_graph(Path(sys.argv[1]), {OBJECTS}, source_code_points={SOURCE}))"
    )
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", build, str(tmp_path)], cwd=BENCH, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert len({out.strip() for out, _ in outputs}) == 1
    assert sum(err.count(b"(cached for later runs)") for _, err in outputs) == 1
    assert [path.name for path in tmp_path.glob("*.building*")] == []


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-cache")


def graph_options(cache: Path) -> list[str]:
    return ["--source-code-points", SOURCE, "--cache-dir", str(cache)]


def test_bench_tools_times_every_case_beside_the_floor(cache: Path) -> None:
    out = run("bench_tools.py", "--sizes", OBJECTS, "--runs", "2", "--per-query", *graph_options(cache))
    assert "start-up to the first tools/list" in out
    assert "FAILED" not in out
    mixed = table_rows(out, "mixed workload: the searches above but sentences, paragraphs, common words")
    assert len(mixed) == 1 and mixed[0][-1] == "—", mixed  # no failed case, no error
    for title in (
        "zero hits",
        "questions typed as sentences",
        "pasted paragraphs (500–3,900 characters)",
        "five to eight common words",
        "get_context: big story line, last page",
        "read_source: big source, last page",
    ):
        assert table_rows(out, title), title
    assert "load average before" in out


def test_relevance_scores_every_query_of_the_set(cache: Path) -> None:
    out = run("relevance.py", "--objects", OBJECTS, *graph_options(cache))
    assert "recall@10 overall (mean of" in out
    assert "must-pass queries" in out
    # The set holds queries of every term-count band, five to eight terms too (scored apart: the at-least-half rule
    # is one index expression up to eight terms, checked against the text beyond).
    assert re.search(r"by the query's distinct terms: 1-4 terms [\d.]+ over \d+ queries; 5-8 terms", out), out
    assert "9 and more terms" in out
    for query_id in ("demo-story-en", "demo-story-zh", "demo-story-tech", "gen-queue-topic"):
        assert table_rows(out, query_id), query_id
    # A question typed as a sentence finds nothing and is scored on the call its no_match_note offers.
    [sentence] = table_rows(out, "demo-sentence-zh-why")
    assert "of the no_match_note's next query `会话缓存方案 修改`" in sentence[-1], sentence


def http_rows(out: str) -> list[list[str]]:
    rows = table_rows(out, "ours") + table_rows(out, "floor")
    for row in rows:
        assert float(row[3].replace(",", "")) > 0, row  # calls/s
        assert row[6] == "0", row  # errors
        assert row[7] != "—", row  # server CPU per call, from /proc
    return rows


def test_bench_http_serves_ours_and_the_floor_with_serve_workers(cache: Path) -> None:
    common = ["--sizes", OBJECTS, "--seconds", "1", "--warmup", "0.5", *graph_options(cache)]
    out = run("bench_http.py", *common, "--workers", "1,2", "--clients", "1,4")
    assert "launcher: story-graph-mcp serve" in out and "protocol modern" in out
    assert len(http_rows(out)) == 8, out  # 2 servers × 2 worker counts × 2 client counts
    assert re.search(r"query 'xylophone': \d+ returned of \d+", out), out
    assert "load average before" in out


def test_bench_http_under_uvicorn_workers_repeats_and_writes_json(cache: Path, tmp_path: Path) -> None:
    dump = tmp_path / "http.json"
    common = ["--sizes", OBJECTS, "--seconds", "1", "--warmup", "0", *graph_options(cache)]
    args = ["--launcher", "uvicorn", "--protocol", "legacy", "--workers", "2", "--clients", "2", "--repeat", "2"]
    out = run("bench_http.py", *common, *args, "--queries", "xylophone,Kafka", "--json", str(dump))
    assert "launcher: uvicorn --factory" in out and "protocol legacy" in out
    assert "medians of 2 repeats" in out
    assert len(http_rows(out)) == 6, out  # 2 servers, each twice and once as the median
    assert dump.read_bytes().count(b'"server":"floor"') == 3


def test_bench_import_times_the_cli_on_a_generated_file(cache: Path) -> None:
    out = run("bench_import.py", "--sizes", OBJECTS, "--cache-dir", str(cache), "--repeat", "2")
    assert "importer said: imported" in out
    (row,) = table_rows(out, "2k")
    assert int(row[1].replace(",", "")) >= 2000, row  # objects
    assert "load average before" in out


def test_bench_import_breakdown_names_every_part(tmp_path: Path) -> None:
    graph = tmp_path / "graph.jsonl"
    run("make_jsonl.py", str(graph), "--objects", OBJECTS)
    pragma = "PRAGMA threads = 1"
    out = run(
        "bench_import.py",
        str(graph),
        "--breakdown",
        "--drop-triggers",
        "revision",
        "--pragma",
        pragma,
        "--work",
        str(tmp_path),
    )
    assert "without the triggers: revision" in out
    assert f"with: {pragma}" in out
    assert "| read MiB | written MiB |" in out
    parts = ("read and stage", "· read, parse, validate", "merge", "· merge: insert", "index: grams (Python)", "commit")
    for part in (*parts, "index: stage items (SQL)", "index: apply: INSERT INTO search_fts", "total"):
        assert table_rows(out, part), part
    assert "lines per CPU-second" in out
    assert sorted(path.name for path in tmp_path.iterdir()) == ["graph.jsonl"]  # its database is gone


def test_bench_search_times_client_and_reader_and_breaks_a_call_down(cache: Path) -> None:
    cases = ["--cases", "rare,zh2_p20,small_scope", "--runs", "2"]
    out = run("bench_search.py", "--objects", OBJECTS, *graph_options(cache), *cases)
    assert len(table_rows(out, "rare")) == 4, out  # client and reader, as they come and in the table
    assert "error" not in out and "timeout" not in out, out
    out = run("bench_search.py", "--objects", OBJECTS, *graph_options(cache), "--cases", "rare", "--breakdown")
    assert "reader.search total" in out and "items: object_rows" in out, out


def test_bench_context_times_first_and_last_pages(cache: Path) -> None:
    out = run("bench_context.py", "--objects", OBJECTS, *graph_options(cache), "--runs", "1", "--page-size", "50")
    rows = [line for line in out.splitlines() if " | first " in line or " | last " in line]
    assert len(rows) == 16, out  # 4 objects × 2 modes × first and last page
    assert all(int(row.split()[-1].replace(",", "")) > 0 for row in rows), out  # SQLite VM steps were counted


def test_bench_read_source_reads_the_last_page(tmp_path: Path) -> None:
    out = run("bench_read_source.py", "--code-points", SOURCE, "--runs", "2")
    assert re.search(r"big source, page 5 \(last\) .* \[16,000, 20,000\)", out), out
    steps = re.findall(r"SQLite VM steps +([\d,]+) +thread hops +(\d+)", out)
    # No hop: the snapshot begins inline when its read lock is free, and a page's statements are short.
    assert len(steps) == 3 and all(int(s.replace(",", "")) > 0 and int(h) == 0 for s, h in steps), out


def test_bench_live_memory_prints_the_server_memory_after_every_import_round(cache: Path) -> None:
    transports = ["--transports", "stdio,http,inproc", "--trace", "1"]
    out = run("bench_live_memory.py", "--objects", OBJECTS, *graph_options(cache), "--rounds", "2", *transports)
    assert [len(table_rows(out, str(n))) for n in (1, 2)] == [3, 3], out  # each round, over each transport
    inproc = table_rows(out, "2")[-1]
    assert int(inproc[6]) > 0 and int(inproc[7]) >= 1, out  # memo values, and the revisions they belong to
    assert "tracemalloc, round 1 -> 2" in out, out


def test_bench_import_goodbuddy_imports_then_reimports() -> None:
    out = run("bench_import_goodbuddy.py", "--results", "20")
    assert "first import" in out and "re-import, nothing changed" in out and "(nothing new)" in out
    assert "re-import, 1 % changed" in out


def test_bench_startup_starts_ours_the_floor_and_another_checkout(cache: Path) -> None:
    out = run("bench_startup.py", "--sizes", OBJECTS, "--rounds", "2", "--compare", str(REPO), *graph_options(cache))
    for server in ("ours", "floor", str(REPO)):
        (row,) = table_rows(out, server)
        assert float(row[1]) > 0 and float(row[4]) > 0, row
    assert "load average before" in out


def test_bench_loop_lag_probes_a_loaded_session_and_cancels(cache: Path) -> None:
    args = ["--seconds", "1", "--cancels", "2", "--cancel-after", "0.1"]
    out = run("bench_loop_lag.py", "--objects", OBJECTS, *graph_options(cache), *args)
    for probe in ("tools/list, 2 heavy searches in flight", "`tools/list` right after a cancel (0.1 s in)"):
        (row,) = table_rows(out, probe)
        assert int(row[1]) > 0 and row[2] != "—", row
    assert "load average before" in out


def test_bench_tail_splits_the_calls_into_cpu_waiting_and_collections(cache: Path) -> None:
    out = run("bench_tail.py", "--objects", OBJECTS, *graph_options(cache), "--rounds", "2", "--queries", "Kafka,麒麟")
    assert "4 calls of ours" in out
    for part in ("server CPU", "server waiting", "client CPU", "client waiting", "server GC", "client GC"):
        (row,) = table_rows(out, part)
        assert all(cell != "—" for cell in row[1:]), row
    assert "load average before" in out


def test_bench_first_calls_times_each_query_first_and_repeated_both_ways(cache: Path) -> None:
    for switch in ([], ["--one-connection"]):
        out = run("bench_first_calls.py", "--objects", OBJECTS, *graph_options(cache), "--repeats", "1", *switch)
        assert ("on the call's connection only" in out) == bool(switch), out
        assert table_rows(out, "`budget import batch sync client audit timeout review`"), out
        assert re.search(r"first calls: sum [\d,]+ ms, median [\d.,]+ ms", out), out
        assert "load average before" in out


def test_every_script_is_run_here() -> None:
    ran = set(re.findall(r'run\(\s*"(\w+\.py)"', Path(__file__).read_text()))
    # floor_server.py is run by bench_tools.py (stdio) and bench_http.py (HTTP, under both launchers) above.
    assert set(SCRIPTS) - ran == {"floor_server.py"}


def quoted_commands() -> list[tuple[str, str, list[str]]]:
    """(where, script, arguments) of every `python benchmarks/<script>.py ...` in the docs and the scripts."""
    texts = [
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        BENCH / "README.md",
        *sorted(BENCH.glob("*.py")),
    ]
    found = []
    for path in texts:
        text = path.read_text(encoding="utf-8").replace("\\\n", " ")
        for match in re.finditer(r"python (?:benchmarks/)?(\w+\.py)((?: [^#\n`]*)?)", text):
            script, rest = match.group(1), match.group(2)
            found.append((f"{path.relative_to(REPO)}: {match.group(0).strip()}", script, shlex.split(rest)))
    return found


@pytest.mark.parametrize(
    ("where", "script", "args"), [pytest.param(*command, id=command[0]) for command in quoted_commands()]
)
def test_the_benchmark_commands_the_docs_quote_are_accepted(where: str, script: str, args: list[str]) -> None:
    assert script in SCRIPTS, f"{where}: no script benchmarks/{script}"
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    module = importlib.import_module(script.removesuffix(".py"))
    try:
        module.build_parser().parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"{where}: {script} does not accept {args} (exit {exc.code})")
