"""Does a long-running server's memory level off while its graph is re-imported under it?

Starts our server on a copy of a generated graph (never the original), then runs rounds: one `db import` by the
command line in a child process (a new result and event in project `big`, so every round is a new data revision of
that scope and of the graph), then the same calls through a real MCP client (first pages of every search class,
get_context and read_source of bench_tools, a search that pages on with cursors, and a search for the word only the
new event holds, which must find it). After each round it prints the server's resident set size.

    python benchmarks/bench_live_memory.py --objects 10k --rounds 100                 # stdio and HTTP
    python benchmarks/bench_live_memory.py --base /tmp/g100k.db --rounds 50 --transports stdio
    python benchmarks/bench_live_memory.py --objects 10k --rounds 30 --transports inproc --trace 10

`inproc` serves in this process (the tests' server object behind an in-memory MCP session), so its figure includes
the client; with `--trace N` it also diffs tracemalloc snapshots taken after round N and after the last round and
prints the allocation sites that grew most (what the Python heap still holds, not what the allocator keeps).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import linecache
import logging
import os
import shutil
import sqlite3
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from bench_common import (
    BIG_PROJECT,
    CURSOR_SECRET,
    SEARCH,
    add_graph_options,
    call_structured,
    ensure_graph,
    machine_header,
    machine_report,
    machine_state,
    ours_stdio_args,
    parse_sizes,
    rss_kib,
    run_cli,
    stdio_client_for,
)
from http_servers import Setup, start_server, wait_ready
from tool_cases import all_cases

if TYPE_CHECKING:
    from mcp import Client

    from server.app import StoryGraphServer

BIG: Final = {"kind": "projects", "projectIds": ["big"]}
PAGED_QUERY: Final = "cache"
PAGES: Final = 3
TRANSPORTS: Final = ("stdio", "http", "inproc")


def round_lines(number: int) -> list[dict[str, Any]]:
    """What round `number` imports: a result and an event holding a word no other object holds."""
    at = f"2026-06-01T{number // 3600 % 24:02d}:{number // 60 % 60:02d}:{number % 60:02d}Z"
    return [
        {
            "kind": "result",
            "id": f"live-result-{number}",
            "scope": BIG,
            "review_generated_at": at,
            "recorded_at": at,
            "coverage": {"kind": "legacy_count", "count": number},
        },
        {
            "kind": "event",
            "id": f"live-event-{number}",
            "result_id": f"live-result-{number}",
            "event_type": "decision",
            "title": f"Kafka cache rollout, live round {unique_word(number)}",
            "event_time": {"start": at, "precision": "second", "basis": "message_time"},
            "recorded_at": at,
        },
    ]


def unique_word(number: int) -> str:
    return f"quokka{number:05d}"


def import_round(db: Path, folder: Path, number: int) -> float:
    """One `db import` in a child process; its wall seconds."""
    import orjson

    path = folder / f"round-{number}.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in round_lines(number)))
    started = time.perf_counter()
    run_cli(["db", "import", "--db", str(db), "--quiet", str(path)])
    path.unlink()
    return time.perf_counter() - started


def revision(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT data_revision FROM graph_state WHERE id = 1").fetchone()[0])
    finally:
        conn.close()


async def calls(client: Client, number: int) -> int:
    """Every first-page case of bench_tools, a search paged on by cursors, and the new event's word; the calls made."""
    made = 0
    for case in all_cases():
        if case.position == "first":
            await call_structured(client, case.tool, case.arguments)
            made += 1
    arguments: dict[str, Any] = {"query": PAGED_QUERY, "page_size": 10}
    for _ in range(PAGES):
        page = await call_structured(client, SEARCH, arguments)
        made += 1
        if not page["page"]["next_cursor"]:
            break
        arguments = {"query": PAGED_QUERY, "page_size": 10, "cursor": page["page"]["next_cursor"]}
    if number > 0:
        found = await call_structured(client, SEARCH, {"query": unique_word(number)})
        made += 1
        ids = [hit["object_ref"]["id"] for hit in found["items"]]
        if ids != [f"live-event-{number}"]:
            raise RuntimeError(f"round {number}: searching {unique_word(number)!r} found {ids}, not its event")
    return made


@asynccontextmanager
async def http_client_for(db: Path, folder: Path) -> AsyncIterator[tuple[Client, int | None]]:
    """`serve --transport http` on a free loopback port, one token granted project `big`; stopped after."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from server.policy import hash_token

    token = "sgm_bench-live-memory-token-000000"
    policy = folder / "policy.toml"
    policy.write_text(
        f'version = 1\n[clients.bench]\ntoken_sha256 = ["{hash_token(token)}"]\n'
        'projects = ["big", "small"]\ndefault_project = "big"\n'
    )
    secret = folder / "cursor-secret"
    secret.write_text("bench-live-memory-cursor-secret-0123456789")
    setup = Setup(db, policy, secret, token, launcher="serve", uvicorn_args=(), log_dir=folder)
    server = start_server("ours", 1, setup)
    try:
        await wait_ready(server, 1, setup.launcher)
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            Client(streamable_http_client(f"http://127.0.0.1:{server.port}/mcp", http_client=http)) as client,
        ):
            yield client, server.process.pid
    finally:
        server.stop()


@asynccontextmanager
async def client_for(
    transport: str, db: Path, folder: Path
) -> AsyncIterator[tuple[Client, int | None, StoryGraphServer | None]]:
    """A client of the server, the server's pid, and the server object when it runs in this process."""
    if transport == "stdio":
        with (folder / "stdio-server.log").open("w") as errlog:
            async with stdio_client_for(ours_stdio_args(db), errlog) as (client, pid):
                yield client, pid, None
    elif transport == "http":
        async with http_client_for(db, folder) as (client, pid):
            yield client, pid, None
    else:
        from mcp import Client

        from server.app import StaticAccess, build_server
        from server.contracts.common import Grant
        from server.reader.cursor import CursorCodec

        grant = StaticAccess(Grant(default_project=BIG_PROJECT))
        server = build_server(db, grant, CursorCodec(CURSOR_SECRET.encode()))  # as bench_common.in_process_client
        async with Client(server) as client:
            yield client, os.getpid(), server


def sqlite_heap_bytes() -> int:
    """What SQLite has allocated in this process now (sqlite3_memory_used of the library Python's sqlite3 uses):
    page caches, prepared statements, FTS5 and sorter buffers of every connection."""
    import _sqlite3

    used = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    used.restype = ctypes.c_int64
    return int(used())


def where(traceback: tracemalloc.Traceback) -> str:
    """The innermost frames outside site-packages that allocated (innermost first), with the first one's line."""
    frames = [frame for frame in reversed(traceback) if "site-packages" not in frame.filename][:4]
    if not frames:
        return str(traceback)
    places = " <- ".join(f"{Path(frame.filename).name}:{frame.lineno}" for frame in frames)
    return f"{places} ({linecache.getline(frames[0].filename, frames[0].lineno).strip()})"


def mib(kib: int) -> str:
    return f"{kib / 1024:,.1f}"


async def run_transport(transport: str, base: Path, args: argparse.Namespace, say: Callable[[str], None]) -> None:
    with tempfile.TemporaryDirectory(prefix="sg-live-memory-") as tmp:
        folder = Path(tmp)
        db = folder / "graph.db"
        shutil.copyfile(base, db)
        run_cli(["db", "migrate", "--db", str(db)])
        say(f"\n## {transport}: {args.rounds} import rounds on a copy of {base} ({db.stat().st_size / 2**20:,.0f} MiB)")
        async with client_for(transport, db, folder) as (client, pid, server):
            if pid is None:
                raise RuntimeError("could not find the server's process")
            made = await calls(client, 0)  # warm: what any served process holds before the first import
            start = rss_kib(pid)
            say(f"calls per round: {made + 1}; server RSS after the warm-up round: {mib(start)} MiB")
            inside = "" if server is None else " memo values | memo revisions | SQLite heap MiB |"
            say(f"| round | graph revision | import s | calls s | RSS MiB | since warm-up MiB |{inside}")
            say("|---|---|---|---|---|---|" + "---|" * inside.count("|"))
            traced: tracemalloc.Snapshot | None = None
            if args.trace and transport == "inproc":
                tracemalloc.start(25)
            for number in range(1, args.rounds + 1):
                imported = import_round(db, folder, number)
                started = time.perf_counter()
                await calls(client, number)
                took = time.perf_counter() - started
                gc.collect()
                now = rss_kib(pid)
                if number in args.show or number == args.rounds or number % args.every == 0:
                    row = f"| {number} | {revision(db)} | {imported:.2f} | {took:.2f} | {mib(now)} | "
                    row += f"{(now - start) / 1024:+,.1f} |"
                    if server is not None:
                        memo = server.memo
                        row += f" {len(memo)} | {len(memo.revisions())} | {sqlite_heap_bytes() / 2**20:,.1f} |"
                    say(row)
                if args.trace and transport == "inproc" and number == args.trace:
                    traced = tracemalloc.take_snapshot()
            if traced is not None:
                diff = tracemalloc.take_snapshot().compare_to(traced, "traceback")
                grown = sum(stat.size_diff for stat in diff)
                say(f"\ntracemalloc, round {args.trace} -> {args.rounds}: Python heap {grown / 1024:+,.0f} KiB")
                for stat in diff[:12]:
                    say(f"  {stat.size_diff / 1024:+,.1f} KiB ({stat.count_diff:+} blocks): {where(stat.traceback)}")
                tracemalloc.stop()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="a graph to copy (never modified); default: the cached generated one")
    parser.add_argument(
        "--objects",
        type=lambda text: parse_sizes(text)[0],
        default=10_000,
        help="size of the cached graph (default 10k)",
    )
    add_graph_options(parser)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--every", type=int, default=10, help="print every Nth round (and rounds 1-5, and the last)")
    parser.add_argument("--transports", default="stdio,http", help=f"comma-separated: {', '.join(TRANSPORTS)}")
    parser.add_argument("--trace", type=int, default=0, help="inproc: tracemalloc diff, round N to the last")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.show = set(range(1, 6))
    transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    if unknown := set(transports) - set(TRANSPORTS):
        raise SystemExit(f"unknown transport(s): {', '.join(sorted(unknown))}")

    for noisy in ("httpx", "httpx2"):  # one INFO line per request otherwise, once the server has set up logging
        logging.getLogger(noisy).setLevel(logging.WARNING)

    def say(line: str) -> None:
        print(line, flush=True)

    base = args.base or ensure_graph(args.cache_dir, args.objects, source_code_points=args.source_code_points)
    say(machine_header())
    for transport in transports:
        before = machine_state()
        asyncio.run(run_transport(transport, base, args, say))
        for line in machine_report(before, machine_state()):
            say(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
