"""Time `db import --from goodbuddy` on a large synthetic GoodBuddy assistant database: the first import,
a re-import with nothing changed (what a timer runs every few minutes), and a re-import after 1 % of the
entities were confirmed and 1 % of the messages edited.

    python benchmarks/bench_import_goodbuddy.py                           # 2,000 results, about 88,000 lines
    python benchmarks/bench_import_goodbuddy.py --results 500             # a quick run
    python benchmarks/bench_import_goodbuddy.py --results 500,2000,8000   # does memory grow with the app's size?

The app database is built with the schema-62 DDL facts of tests/goodbuddy_fixture.py, rows written in
bulk the way the app shapes them (one conversation per result, ten messages, a saved fragment per
message, five events, three entities and one relation per result). Each import runs the command line
(`python -m server db import --from goodbuddy --quiet`) in a child process, so its peak RSS is its own.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from bench_common import PYTHON, machine_header, machine_report, machine_state, server_env  # noqa: E402
from goodbuddy_fixture import create_schema  # noqa: E402

from server.store.migrate import migrate  # noqa: E402

PROJECT = "a71a5000-0000-4000-8000-000000000001"


def uid(kind: int, n: int) -> str:
    return f"{kind:08x}-0000-4000-8000-{n:012x}"


def build(path: Path, results: int) -> None:
    conn = create_schema(path)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    at = "2026-03-01T00:00:00.000Z"
    scope = orjson.dumps({"kind": "projects", "projectIds": [PROJECT]}).decode()
    conn.execute(
        "INSERT INTO projects (id, name, status, created_at, updated_at) VALUES (?, 'Big', 'active', ?, ?)",
        (PROJECT, at, at),
    )
    conn.execute("INSERT INTO story_lines VALUES ('sl', ?, 'story', ?, ?)", (scope, at, at))
    messages: list[tuple[object, ...]] = []
    sources: list[tuple[object, ...]] = []
    events: list[tuple[object, ...]] = []
    entities: list[tuple[object, ...]] = []
    links: list[tuple[str, str, str]] = []
    relations: list[tuple[object, ...]] = []

    def flush() -> None:
        """Write the rows gathered so far: the benchmark's own peak RSS stays small (see timed())."""
        conn.executemany(
            "INSERT INTO messages (id, conversation_id, role, content, state, sequence,"
            " created_at) VALUES (?, ?, ?, ?, 'complete', ?, ?)",
            messages,
        )
        conn.executemany(
            "INSERT INTO supervision_sources (id, result_id, source_type, source_id, title,"
            " occurred_at, content, locator_json, availability, source_key, source_revision) VALUES"
            " (?, ?, ?, ?, ?, ?, ?, ?, 'available', ?, ?)",
            sources,
        )
        conn.executemany("INSERT INTO supervision_entities VALUES (?, 'sl', ?, ?, 'automatic', ?, '[]')", entities)
        conn.executemany(
            "INSERT INTO supervision_relations VALUES (?, 'sl', ?, ?, 'supports', 'because', 'automatic', '[]')",
            relations,
        )
        conn.executemany(
            "INSERT INTO supervision_events (id, story_line_id, result_id, occurred_at, title,"
            " description, event_type) VALUES (?, 'sl', ?, ?, ?, '', ?)",
            events,
        )
        conn.executemany("INSERT INTO supervision_event_sources VALUES (?, ?)", [(e, s) for e, s, _ in links])
        conn.executemany(
            "INSERT INTO supervision_event_entities VALUES (?, ?, 'associated')", [(e, n) for e, _, n in links]
        )
        for rows in (messages, sources, events, entities, links, relations):
            rows.clear()

    for r in range(results):
        if r and r % 500 == 0:
            flush()
        conversation, run, result = uid(1, r), uid(2, r), uid(3, r)
        when = f"2026-03-{1 + r % 28:02d}T{r % 24:02d}:00:00.000Z"
        conn.execute(
            "INSERT INTO conversations (id, project_id, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            (conversation, PROJECT, f"chat {r}", when, when),
        )
        conn.execute(
            "INSERT INTO supervision_runs (id, trigger, scope_json, time_range_json, status,"
            " created_at) VALUES (?, 'heartbeat', ?, '{}', 'completed', ?)",
            (run, scope, when),
        )
        entity_rows = [(uid(6, r * 3 + k), f"entity {r}-{k}") for k in range(3)]
        snapshot = {
            "entities": [
                {"id": e, "canonical_label": label, "description": "d", "confirmation_state": "automatic"}
                for e, label in entity_rows
            ],
            "relations": [{"id": uid(7, r)}],
        }
        conn.execute(
            "INSERT INTO supervision_results VALUES (?, ?, ?, '', '[]', '{\"evidence\":10}', ?, ?)",
            (result, run, f"summary {r}", when, orjson.dumps(snapshot).decode()),
        )
        for m in range(10):
            message, source = uid(4, r * 10 + m), uid(5, r * 10 + m)
            text = f"message {r}-{m}: we discussed cache settings and the 方案 for release {r}"
            messages.append((message, conversation, "user", text, m, when))
            locator = {
                "messageId": message,
                "conversationId": conversation,
                "projectId": PROJECT,
                "role": "user",
                "sequence": m,
                "source": f"message:{message}",
                "revision": "x",
                "start": 0,
                "end": len(text),
                "length": len(text),
            }
            sources.append(
                (
                    source,
                    result,
                    "conversation",
                    conversation,
                    f"chat {r}",
                    when,
                    text,
                    orjson.dumps(locator).decode(),
                    f"message:{message}",
                    "x",
                )
            )
        for e, label in entity_rows:
            entities.append((e, label, "described", when))
        for k in range(5):
            event = uid(8, r * 5 + k)
            events.append((event, result, when, f"event {r}-{k} about cache", "decision"))
            links.append((event, uid(5, r * 10 + k), entity_rows[k % 3][0]))
        relations.append((uid(7, r), entity_rows[0][0], entity_rows[1][0]))
    flush()
    conn.execute("COMMIT")
    conn.close()


def timed(label: str, db: Path, app: Path) -> None:
    """One import by the command line in a child process: its wall time, CPU time, peak RSS and report.

    Linux counts into a child's peak RSS the peak of the process it was started from (subprocess starts it
    with vfork, and exec keeps the old memory's high-water mark), so this process keeps its own peak small:
    `build` writes the app database in chunks, and `run_size` prints this process's peak, a floor under
    every figure."""
    command = [PYTHON, "-m", "server", "db", "import", "--db", str(db), "--from", "goodbuddy", "--quiet", str(app)]
    out, err = db.with_name("stdout"), db.with_name("stderr")
    with out.open("wb") as stdout, err.open("wb") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=REPO, env=server_env(), stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(process.pid, 0)  # the child's own resource use, peak RSS included
        wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"import failed: {err.read_text(errors='replace')[-1000:]}")
    report = out.read_text(errors="replace").splitlines()[0]
    cpu, peak = usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
    print(f"{label:<34} {wall:7.2f} s wall {cpu:7.2f} s CPU  peak RSS {peak:6.0f} MiB  | {report}")


def results_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",")]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--results",
        type=results_list,
        default=[2000],
        help="review results in the app database; a comma-separated list runs each size in turn (default 2,000)",
    )
    return parser


def run_size(results: int) -> None:
    with tempfile.TemporaryDirectory(prefix="sg-bench-goodbuddy-") as folder:
        app, db = Path(folder) / "assistant.db", Path(folder) / "graph.db"
        start = time.perf_counter()
        build(app, results)
        with app.open("rb") as stream:
            digest = hashlib.file_digest(stream, "sha256").hexdigest()[:12]
        print(
            f"built the app database ({results} results) in {time.perf_counter() - start:.1f} s; "
            f"{app.stat().st_size / 2**20:.0f} MiB, sha256 {digest}"
        )
        floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"(this benchmark's own peak RSS, a floor under the imports' figures: {floor:.0f} MiB)")
        migrate(db)
        timed("first import", db, app)
        timed("re-import, nothing changed", db, app)
        conn = sqlite3.connect(app, isolation_level=None)
        conn.execute("UPDATE supervision_entities SET confirmation_state = 'confirmed' WHERE rowid % 100 = 0")
        conn.execute("UPDATE messages SET content = content || ' (edited)' WHERE rowid % 100 = 0")
        conn.close()
        timed("re-import, 1 % changed", db, app)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    print(machine_header())
    before = machine_state()
    for results in args.results:
        run_size(results)
    print("\n".join(machine_report(before, machine_state())))


if __name__ == "__main__":
    main()
