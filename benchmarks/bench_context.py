"""Benchmark story_graph_get_context: a page of a huge neighbourhood costs what a page of a small one does.

    python benchmarks/make_large_graph.py /tmp/sg-1m.db --objects 1000000     # once, about 5 minutes
    python benchmarks/bench_context.py --base /tmp/sg-1m.db --work /tmp/ctx-1m.db
    python benchmarks/bench_context.py                   # the cached 100,000-object graph (built once)

The base graph (--base, from make_large_graph.py, or the generated graph of --objects objects from the cache:
bench_common.ensure_graph) is copied, never modified; the copy is upgraded to the current
schema (`migrate`, in place) and gets planted objects in the project `big` (seeded, so every run plants
the same rows):

* `bench-hub`: an entity with 1,000 relations to entities and events of its scope (each with a saved
  source reference as evidence), 40 entity changes and 60 linked events;
* `bench-sl`: a story line with 10,000 members, 2,000 entities and 8,000 events (12 % of them undated),
  each event with evidence and an entity, 1,000 relations and 1,000 changes among them;
* `bench-story`: a feature story listing 10,000 events (the story line's 8,000 and 2,000 others);
* `bench-small`: an entity with 8 relations, for contrast.

For each object and mode it walks every page once to find the cursor of the last page, then times, in
`--runs` rounds where the cases take turns, the first page and the last page at `--page-size`:
`server` is the server's whole handling of one call (`StoryGraphServer.call_tool`: arguments, scope,
the remembered selection, keyset reads, content, the response and its JSON text), with its process CPU
time; `mcp` is the same call through an in-process MCP client (the SDK round trip, and the client's own
validation of the result against the tool's output schema, which a remote client pays in its own
process). It also reports the SQLite virtual-machine steps of one page (independent of machine load)
and the cold cost: the first page when the selection is not remembered yet (once per scope revision).

Writes only the copy (`--work`, default: a temporary directory it removes) and a graph it builds in the cache.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Final

import anyio
import orjson
from bench_common import (
    add_graph_options,
    ensure_graph,
    machine_header,
    machine_report,
    machine_state,
    p95,
    vm_step_counter,
)

ROOT: Final = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mcp import Client  # noqa: E402
from mcp.types import CallToolResult  # noqa: E402

from server.app import StaticAccess, build_server  # noqa: E402
from server.contracts.common import Grant  # noqa: E402
from server.contracts.context import ContextArgs  # noqa: E402
from server.reader.cursor import CursorCodec  # noqa: E402
from server.reader.db import Database  # noqa: E402
from server.reader.fold import Folder  # noqa: E402
from server.reader.memo import Memo  # noqa: E402
from server.store.migrate import migrate  # noqa: E402
from server.store.search_index import deferred_index  # noqa: E402
from server.tools import context as tool  # noqa: E402
from server.tools.base import Call  # noqa: E402

BIG: Final = 'projects:["big"]'
GRANT: Final = Grant(default_project="big")
SECRET: Final = b"bench-context-secret-0123456789"
RESULT: Final = "bench-res"
T0: Final = 1_735_689_600  # 2025-01-01T00:00:00Z
SEED: Final = 20261130
CONTEXT: Final = "story_graph_get_context"
Row = tuple[Any, ...]


def iso(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(seconds))


# --- Planting -------------------------------------------------------------------------------------------------


def plant(path: Path) -> None:
    """Add the benchmark's objects to the `big` scope of a make_large_graph database (one transaction)."""
    rng = random.Random(SEED)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        if conn.execute("SELECT 1 FROM entities WHERE id = 'bench-hub'").fetchone():
            print("already planted")
            return
        big_entities = [r[0] for r in conn.execute("SELECT id FROM entities WHERE scope_key = ? LIMIT 5000", (BIG,))]
        big_events = [r[0] for r in conn.execute("SELECT id FROM events WHERE scope_key = ? LIMIT 5000", (BIG,))]
        references = [
            r[0] for r in conn.execute("SELECT id FROM source_references WHERE scope_key = ? LIMIT 5000", (BIG,))
        ]
        story_line = conn.execute("SELECT id FROM story_lines WHERE scope_key = ? ORDER BY id", (BIG,)).fetchone()[0]
        conn.execute("BEGIN")
        with deferred_index(conn):
            conn.execute(
                "INSERT INTO results (id, scope_key, review_generated_at, recorded_at) VALUES (?, ?, ?, ?)",
                (RESULT, BIG, iso(T0 + 400 * 86_400), iso(T0 + 400 * 86_400 + 60)),
            )
            _hub(conn, rng, story_line, big_entities, big_events, references)
            _story_line(conn, rng, references)
            _story(conn, big_events)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _entity(conn: sqlite3.Connection, entity_id: str, story_line: str, label: str) -> None:
    conn.execute(
        "INSERT INTO entities (id, story_line_id, scope_key, canonical_label, description, updated_at, revision)"
        " VALUES (?, ?, ?, ?, ?, ?, '1')",
        (entity_id, story_line, BIG, label, f"{label}: planted for the context benchmark", iso(T0)),
    )


def _relations(conn: sqlite3.Connection, rows: Iterator[Row]) -> None:
    conn.executemany(
        "INSERT INTO relations (id, result_id, scope_key, from_type, from_id, to_type, to_id, relation_type, reason,"
        " recorded_at, revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '1')",
        rows,
    )


def _evidence(conn: sqlite3.Connection, rows: Iterator[Row]) -> None:
    conn.executemany(
        "INSERT OR IGNORE INTO object_sources (object_type, object_id, source_reference_id, scope_key)"
        " VALUES (?, ?, ?, ?)",
        rows,
    )


def _hub(
    conn: sqlite3.Connection,
    rng: random.Random,
    story_line: str,
    entities: list[str],
    events: list[str],
    references: list[str],
) -> None:
    _entity(conn, "bench-hub", story_line, "Bench hub: the session cache decision")
    _entity(conn, "bench-small", story_line, "Bench small: an ordinary decision")
    types = ("supports", "depends-on", "contrasts", "related", "revised")

    def relations(owner: str, count: int) -> Iterator[Row]:
        for i in range(count):
            # Modulo: a small graph (the smoke test's) has fewer than 1,000 of each; the neighbourhood stays 1,000.
            other_type, other = ("entity", entities[i % len(entities)]) if i % 3 else ("event", events[i % len(events)])
            ends = ("entity", owner, other_type, other) if i % 2 else (other_type, other, "entity", owner)
            yield (f"{owner}-rel-{i:04d}", RESULT, BIG, *ends, types[i % 5], f"planted relation {i}", iso(T0))

    _relations(conn, relations("bench-hub", 1000))
    _relations(conn, relations("bench-small", 8))
    _evidence(conn, (("relation", f"bench-hub-rel-{i:04d}", rng.choice(references), BIG) for i in range(1000)))
    conn.executemany(
        "INSERT INTO entity_changes (entity_id, association_key, result_id, scope_key, event_id, change_type,"
        " description, recorded_at) VALUES ('bench-hub', ?, ?, ?, ?, 'revised', ?, ?)",
        [(f"c{i}", RESULT, BIG, events[(1000 + i) % len(events)], f"planted change {i}", iso(T0)) for i in range(40)],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO event_entities (event_id, entity_id, scope_key) VALUES (?, 'bench-hub', ?)",
        [(events[(2000 + i) % len(events)], BIG) for i in range(60)],
    )


def _story_line(conn: sqlite3.Connection, rng: random.Random, references: list[str]) -> None:
    conn.execute(
        "INSERT INTO story_lines (id, scope_key, topic, recorded_at) VALUES ('bench-sl', ?, ?, ?)",
        (BIG, "Bench story line: ten thousand members", iso(T0)),
    )
    for i in range(2000):
        _entity(conn, f"bench-sl-ent-{i:04d}", "bench-sl", f"Bench member {i}")
    rows = []
    for i in range(8000):
        start = None if i % 8 == 7 else iso(T0 + rng.randrange(365 * 86_400))
        rows.append((f"bench-sl-ev-{i:05d}", RESULT, BIG, "bench-sl", "change", f"Bench event {i}", start, iso(T0)))
    conn.executemany(
        "INSERT INTO events (id, result_id, scope_key, story_line_id, event_type, title, event_time_start,"
        " recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    _evidence(conn, (("event", f"bench-sl-ev-{i:05d}", rng.choice(references), BIG) for i in range(8000)))
    conn.executemany(
        "INSERT INTO event_entities (event_id, entity_id, scope_key) VALUES (?, ?, ?)",
        [(f"bench-sl-ev-{i:05d}", f"bench-sl-ent-{i % 2000:04d}", BIG) for i in range(8000)],
    )
    _relations(
        conn,
        (
            (f"bench-sl-rel-{i:04d}", RESULT, BIG, "entity", f"bench-sl-ent-{i:04d}", "entity",
             f"bench-sl-ent-{(i * 7 + 1) % 2000:04d}", "related", f"member relation {i}", iso(T0))
            for i in range(1000)
        ),
    )  # fmt: skip
    conn.executemany(
        "INSERT INTO entity_changes (entity_id, association_key, result_id, scope_key, event_id, change_type,"
        " description, recorded_at) VALUES (?, 'c0', ?, ?, ?, 'added', 'planted', ?)",
        [(f"bench-sl-ent-{i:04d}", RESULT, BIG, f"bench-sl-ev-{i:05d}", iso(T0)) for i in range(1000)],
    )


def _story(conn: sqlite3.Connection, events: list[str]) -> None:
    conn.execute(
        "INSERT INTO stories (id, scope_key, level, name, started_at, recorded_at)"
        " VALUES ('bench-story', ?, 'feature', 'Bench story: ten thousand events', ?, ?)",
        (BIG, iso(T0), iso(T0)),
    )
    linked = [f"bench-sl-ev-{i:05d}" for i in range(8000)] + events[3000:5000]
    conn.executemany(
        "INSERT INTO story_events (story_id, event_id, scope_key, event_scope_key, is_primary)"
        " VALUES ('bench-story', ?, ?, ?, 1)",
        [(event_id, BIG, BIG) for event_id in linked],
    )


# --- Measuring -----------------------------------------------------------------------------------------------

TARGETS: Final = {
    "entity, 8 relations": {"type": "entity", "id": "bench-small"},
    "entity, 1,000 relations": {"type": "entity", "id": "bench-hub"},
    "story line, 10,000 members": {"type": "story_line", "id": "bench-sl"},
    "story, 10,000 events": {"type": "story", "id": "bench-story"},
}


async def measure(path: Path, runs: int, page_size: int) -> None:
    db = await Database.open(path)
    try:  # closed on any way out: its connection threads would keep the process alive
        await _measure(db, path, runs, page_size)
    finally:
        await db.close()


async def _measure(db: Database, path: Path, runs: int, page_size: int) -> None:
    codec = CursorCodec(SECRET)
    memo = Memo()

    async def page(arguments: dict[str, Any], fresh: bool = False) -> dict[str, Any]:
        call = Call(db, GRANT, codec, Folder(), Memo() if fresh else memo, "2026-11-30T00:00:00.000Z")
        response = await tool.run(call, ContextArgs.model_validate(arguments))
        payload: dict[str, Any] = orjson.loads(orjson.dumps(response.model_dump(mode="json", by_alias=True)))
        return payload

    async def last_cursor(arguments: dict[str, Any]) -> tuple[str | None, int, int]:
        """The cursor of the last page (None: there is one page), the objects and the pages walked."""
        following, walked = None, 0
        while True:
            current = await page(arguments | ({"cursor": following} if following else {}))
            walked += 1
            if current["page"]["next_cursor"] is None:
                return following, current["page"]["total_count"], walked
            following = current["page"]["next_cursor"]

    cases: list[tuple[str, dict[str, Any]]] = []
    print(f"{'object':28} {'mode':9} {'objects':>8} {'pages walked':>13} {'walk s':>7} {'cold first ms':>14}")
    for label, ref in TARGETS.items():
        for mode in ("current", "timeline"):
            arguments = {"object_ref": ref, "mode": mode, "page_size": page_size}
            started = time.perf_counter()
            cold = time.perf_counter()
            await page(arguments, fresh=True)
            cold_ms = (time.perf_counter() - cold) * 1000
            cursor, total, walked = await last_cursor(arguments)
            print(f"{label:28} {mode:9} {total:8,} {walked:13,} {time.perf_counter() - started:7.1f} {cold_ms:14.1f}")
            cases.append((f"{label} | {mode} | first", arguments))
            cases.append((f"{label} | {mode} | last", arguments | ({"cursor": cursor} if cursor else {})))

    server = build_server(path, StaticAccess(GRANT), codec)
    timings: dict[str, dict[str, list[float]]] = {name: {"server": [], "cpu": [], "mcp": []} for name, _ in cases}
    async with Client(server) as client:  # also runs the server's lifespan (its database pool)
        for _, arguments in cases:  # warm: the server remembers each selection once per scope revision
            await client.call_tool(CONTEXT, arguments)
        for _ in range(runs):
            for name, arguments in cases:
                started, cpu = time.perf_counter(), time.process_time()
                direct = await server.call_tool(CONTEXT, arguments)
                timings[name]["server"].append((time.perf_counter() - started) * 1000)
                timings[name]["cpu"].append((time.process_time() - cpu) * 1000)
                started = time.perf_counter()
                result = await client.call_tool(CONTEXT, arguments)
                timings[name]["mcp"].append((time.perf_counter() - started) * 1000)
                assert isinstance(direct, CallToolResult) and not direct.is_error and not result.is_error, direct

    steps = await vm_steps(path, codec, [arguments for _, arguments in cases])
    print(f"\n{runs} timed runs per case, page_size {page_size}; milliseconds")
    print(f"{'case':52} {'server p50':>10} {'p95':>6} {'CPU p50':>8} {'mcp p50':>8} {'p95':>6} {'VM steps':>9}")
    for (name, _), count in zip(cases, steps, strict=True):
        t, c, m = timings[name]["server"], timings[name]["cpu"], timings[name]["mcp"]
        print(
            f"{name:52} {statistics.median(t):10.1f} {p95(t):6.1f} {statistics.median(c):8.1f}"
            f" {statistics.median(m):8.1f} {p95(m):6.1f} {count:9,}"
        )


async def vm_steps(path: Path, codec: CursorCodec, cases: list[dict[str, Any]]) -> list[int]:
    """SQLite virtual-machine steps of one warm page per case."""
    memo = Memo()
    found = []
    async with vm_step_counter(path) as steps:
        for arguments in cases:
            call = Call(steps.db, GRANT, codec, Folder(), memo, "2026-11-30T00:00:00.000Z")
            await tool.run(call, ContextArgs.model_validate(arguments))  # warm: the selection is remembered
            steps.count = 0
            await tool.run(call, ContextArgs.model_validate(arguments))
            found.append(steps.count)
    return found


def copy(base: Path, work: Path) -> None:
    for suffix in ("", "-wal"):
        if Path(f"{base}{suffix}").exists():
            shutil.copyfile(f"{base}{suffix}", f"{work}{suffix}")


def timed(label: str, action: Callable[[], object]) -> None:
    started = time.perf_counter()
    action()
    print(f"{label}: {time.perf_counter() - started:.1f} s")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="a make_large_graph.py database to copy (never modified)")
    parser.add_argument("--objects", type=int, default=100_000, help="size of the cached graph without --base")
    add_graph_options(parser)
    parser.add_argument("--work", type=Path, help="where the planted copy goes (kept; reused when it exists)")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--page-size", type=int, default=10)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    print(machine_header())
    temporary = Path(tempfile.mkdtemp(prefix="bench-context-"))
    try:
        work = args.work or temporary / "graph.db"
        if not work.exists():
            base = args.base or ensure_graph(args.cache_dir, args.objects, source_code_points=args.source_code_points)
            timed(f"copy {base}", lambda: copy(base, work))
            timed("migrate to the current schema", lambda: migrate(work))
            timed("plant the benchmark objects", lambda: plant(work))
        else:
            timed("migrate to the current schema", lambda: migrate(work))
            plant(work)
        runner: Callable[[], Awaitable[None]] = lambda: measure(work, args.runs, args.page_size)  # noqa: E731
        before = machine_state()
        anyio.run(runner)
        print("\n".join(machine_report(before, machine_state())))
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
