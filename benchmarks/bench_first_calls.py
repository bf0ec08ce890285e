"""What an agent's new questions cost: each query's first call, then its repeats, in one running server.

    python benchmarks/bench_first_calls.py --objects 1000000
    python benchmarks/bench_first_calls.py --objects 1000000 --one-connection   # term lists on the call's connection
    python benchmarks/bench_first_calls.py --objects 2000 --cache-dir /tmp/sg-cache   # a quick check

The other benchmarks time a query after an untimed warm-up call of it, but an agent mostly asks new questions, and a
query's first call pays what the server then remembers for the scope's data revision (its terms' counts, its
whole-query matches, for five to eight words their term sets, a time range's sets). Here one server (in this
process, behind an in-memory MCP client, as bench_search.py's client mode) answers, in order, the queries of two
words or more of relevance_set.json, bench_tools.py's sentences and common words, and those common words with a
month's time range (a query's terms may have been read for an earlier one, as in a session), each first once, then
--repeats times. Before them one call of a word no item holds pays the process's own first costs.
`--one-connection` reads a query's term lists and time sets on its call's connection only (the server reads them
on a second, free one too: server/reader/search_sets.py).

Printed: per query the first call and the median of its repeats (ms, as the client sees them), the sum and median
of the first calls, and what else the machine was doing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import anyio
import orjson
from bench_common import (
    BENCH_DIR,
    SEARCH,
    add_graph_options,
    call_structured,
    ensure_graph,
    in_process_client,
    machine_header,
    machine_report,
    machine_state,
    markdown_table,
)
from tool_cases import COMMON_TERMS, MONTH, SENTENCES

WARM_UP: Final = "zyzzogeton"


def queries() -> list[dict[str, Any]]:
    """The relevance set's queries of two words or more (no filters), the sentences and common words, then the common
    words again with a month's time range."""
    found = orjson.loads((BENCH_DIR / "relevance_set.json").read_bytes())["queries"]
    texts = [q["arguments"]["query"] for q in found if set(q["arguments"]) == {"query"}]
    texts += [*SENTENCES, *COMMON_TERMS]
    plain = [{"query": text} for text in dict.fromkeys(texts) if len(text.split()) >= 2]
    return plain + [{"query": text, "time_range": MONTH} for text in COMMON_TERMS]


def label(arguments: dict[str, Any]) -> str:
    return f"`{arguments['query'][:60]}`" + (" + March 2025" if "time_range" in arguments else "")


async def measure(db: Path, requests: list[dict[str, Any]], repeats: int) -> list[tuple[str, float, float]]:
    rows: list[tuple[str, float, float]] = []
    async with in_process_client(db) as client:
        await call_structured(client, SEARCH, {"query": WARM_UP})
        for arguments in requests:
            times: list[float] = []
            for _ in range(1 + repeats):
                started = time.perf_counter()
                await call_structured(client, SEARCH, arguments)
                times.append((time.perf_counter() - started) * 1000)
            rows.append((label(arguments), times[0], statistics.median(times[1:]) if repeats else float("nan")))
    return rows


def one_connection() -> None:
    """Make Database.spare offer no connection: every term list is read on its call's own connection."""
    from server.reader.db import Database

    @asynccontextmanager
    async def no_spare(self: Database) -> AsyncIterator[None]:
        yield None

    Database.spare = no_spare  # type: ignore[method-assign]  # a benchmark's switch, never the server's


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=1_000_000, help="size of the generated graph")
    add_graph_options(parser)
    parser.add_argument("--repeats", type=int, default=3, help="calls of each query after its first")
    parser.add_argument(
        "--one-connection", action="store_true", help="read term lists and time sets on the call's connection only"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.one_connection:
        one_connection()
    print(machine_header())
    db = ensure_graph(args.cache_dir, args.objects, source_code_points=args.source_code_points)
    requests = queries()
    way = "on the call's connection only" if args.one_connection else "on a second connection too"
    print(f"db {db} ({db.stat().st_size / 2**20:,.0f} MiB); {len(requests)} queries, term lists read {way}\n")
    before = machine_state()
    rows = anyio.run(measure, db, requests, args.repeats)
    cells = [(text, f"{first:,.1f}", f"{repeat:,.1f}") for text, first, repeat in rows]
    print(markdown_table(("query", "first call ms", "repeats: median ms"), cells))
    firsts = [first for _, first, _ in rows]
    median = statistics.median(firsts)
    print(f"\nfirst calls: sum {sum(firsts):,.0f} ms, median {median:,.1f} ms, max {max(firsts):,.0f} ms")
    print("\n".join(machine_report(before, machine_state())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
