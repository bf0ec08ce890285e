"""Score the first page of story_graph_search against what an agent needs: recall@10 over relevance_set.json.

    python benchmarks/relevance.py                        # demo graph + the generated 10k graph
    python benchmarks/relevance.py --objects 100000 --verbose
    python benchmarks/relevance.py --graphs demo

Each query of the set lists the things an agent needs on page 1 (default page_size 10); a need is met when any of
its object refs is on the page. recall@10 of a query = needs met / needs; the overall figure is the mean over the
queries. Queries marked `must_pass` (the demo's decision story) are reported on their own line, and the mean is also
given by the query's distinct terms (1-4, 5-8, 9 and more: the `query_terms` of its first call).

The graphs: `demo` is written by `python -m server demo`, `generated` is the cached graph of bench_tools.py
(make_large_graph.py with the stories of graph_plants.py). Each is served by `python -m server serve --db DB
--project P` as a stdio child process and queried through the MCP Python client. Before scoring, every object ref
of the set is checked to exist in its scope (get_context), so a typo in the ground truth is an error, not a miss.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import orjson
from bench_common import (
    BENCH_DIR,
    CONTEXT,
    SEARCH,
    add_graph_options,
    call_structured,
    ensure_demo,
    ensure_graph,
    markdown_table,
    ours_stdio_args,
    stdio_client_for,
)
from mcp import Client

SET_FILE: Final = BENCH_DIR / "relevance_set.json"
OBJECT_TYPES: Final = frozenset(
    {"story_line", "event", "entity", "entity_change", "relation", "summary", "source_reference"}
)


@dataclass(frozen=True)
class Query:
    id: str
    graph: str
    arguments: dict[str, Any]
    need: dict[str, list[str]]
    must_pass: bool
    note: str
    follow_note: bool
    """A question typed as a sentence: when page 1 is empty, the agent makes the call its no_match_note offers ("As
    a next query, {...}"), and that call's page 1 is scored."""


@dataclass
class Scored:
    query: Query
    page: list[str] = field(default_factory=list)
    """Page 1 as 'type:id' (result rows of one object collapse to one ref), in order."""
    met: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    error: str | None = None
    followed: dict[str, Any] | None = None
    """The arguments of the call the no_match_note offered, when it was made."""
    terms: int | None = None
    """How many distinct terms the query as typed has (`query_terms` of its first call)."""

    @property
    def recall(self) -> float:
        return len(self.met) / len(self.query.need) if self.error is None else 0.0


def load_set(path: Path) -> tuple[dict[str, dict[str, Any]], list[Query]]:
    data = orjson.loads(path.read_bytes())
    graphs: dict[str, dict[str, Any]] = data["graphs"]
    queries = []
    seen: set[str] = set()
    for raw in data["queries"]:
        query = Query(
            raw["id"],
            raw["graph"],
            raw["arguments"],
            raw["need"],
            bool(raw.get("must_pass")),
            raw.get("note", ""),
            bool(raw.get("follow_note")),
        )
        problems = [f"duplicate id {query.id}"] if query.id in seen else []
        seen.add(query.id)
        if query.graph not in graphs:
            problems.append(f"unknown graph {query.graph!r}")
        if not query.need:
            problems.append("no needs")
        for refs in query.need.values():
            problems += [f"bad ref {ref!r}" for ref in refs if ref.partition(":")[0] not in OBJECT_TYPES]
        if problems:
            raise SystemExit(f"{path}: query {query.id}: " + "; ".join(problems))
        queries.append(query)
    return graphs, queries


def _ref(item: dict[str, Any]) -> str:
    return f"{item['object_ref']['type']}:{item['object_ref']['id']}"


async def check_refs(client: Client, queries: list[Query]) -> list[str]:
    """Refs of the set that the graph does not hold in the query's scope."""
    missing = []
    checked: set[tuple[str, str]] = set()
    for query in queries:
        scope = orjson.dumps(query.arguments.get("scope")).decode()
        for ref in (r for refs in query.need.values() for r in refs):
            if (ref, scope) in checked:
                continue
            checked.add((ref, scope))
            object_type, _, object_id = ref.partition(":")
            arguments: dict[str, Any] = {"object_ref": {"type": object_type, "id": object_id}, "page_size": 1}
            if "scope" in query.arguments:
                arguments["scope"] = query.arguments["scope"]
            result = await client.call_tool(CONTEXT, arguments)
            if result.is_error:
                missing.append(f"{query.id}: {ref}")
    return missing


async def score_graph(db: Path, project: str, queries: list[Query], log: Path) -> tuple[list[Scored], list[str]]:
    async with AsyncExitStack() as stack:
        errlog = stack.enter_context(log.open("a", encoding="utf-8"))
        client, _ = await stack.enter_async_context(stdio_client_for(ours_stdio_args(db, project), errlog))
        missing = await check_refs(client, queries)
        scored = []
        for query in queries:
            result = Scored(query)
            try:
                content = await call_structured(client, SEARCH, query.arguments)
                result.terms = len(content["query_terms"])
                offered = next_query(content) if query.follow_note and not content["items"] else None
                if offered is not None:
                    result.followed = offered
                    content = await call_structured(client, SEARCH, offered)
            except RuntimeError as exc:
                result.error = str(exc)[:200]
                result.missed = list(query.need)
            else:
                result.page = list(dict.fromkeys(_ref(item) for item in content["items"]))
                on_page = set(result.page)
                for name, refs in query.need.items():
                    (result.met if on_page.intersection(refs) else result.missed).append(name)
            scored.append(result)
    return scored, missing


NEXT_QUERY: Final = "As a next query, "


def next_query(content: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments of the call an empty page's no_match_note offers (`As a next query, {...} matches N items.`)."""
    note = content.get("no_match_note") or ""
    start = note.find(NEXT_QUERY)
    if start < 0:
        return None
    call = note[start + len(NEXT_QUERY) :]
    return dict(orjson.loads(call[: call.index("} matches ") + 1]))


def report(scored: list[Scored], verbose: bool) -> list[str]:
    rows = []
    for s in scored:
        if s.error is not None:
            status = "ERROR: " + s.error
        elif s.missed:
            status = "missing: " + ", ".join(s.missed)
        else:
            status = "ok"
        if s.followed is not None:
            status += f" (page 1 of the no_match_note's next query `{s.followed['query']}`)"
        rows.append((s.query.id, f"`{s.query.arguments['query']}`", f"{s.recall:.2f}", status))
    lines = [markdown_table(("query id", "query", "recall@10", "page 1"), rows)]
    overall = sum(s.recall for s in scored) / len(scored)
    full = sum(1 for s in scored if s.recall == 1.0)
    lines.append(
        f"\nrecall@10 overall (mean of {len(scored)} queries): {overall:.3f}; {full} queries with every need met"
    )
    for graph in sorted({s.query.graph for s in scored}):
        part = [s for s in scored if s.query.graph == graph]
        lines.append(f"  {graph}: {sum(s.recall for s in part) / len(part):.3f} over {len(part)} queries")
    lines.append("  by the query's distinct terms: " + "; ".join(term_bands(scored)))
    must = [s for s in scored if s.query.must_pass]
    if must:
        failing = [s.query.id for s in must if s.recall < 1.0]
        verdict = "all met" if not failing else "NOT met by " + ", ".join(failing)
        lines.append(f"must-pass queries (the demo's decision story: A, the revision evidence and B): {verdict}")
    if verbose:
        lines += [
            f"\n{s.query.id} `{s.query.arguments['query']}` page 1: " + ", ".join(s.page or ["(empty)"])
            for s in scored
            if s.missed
        ]
    return lines


TERM_BANDS: Final = (("1-4", 1, 4), ("5-8", 5, 8), ("9 and more", 9, None))
"""Up to 8 distinct terms the at-least-half rule is one index expression, and term matches rank in tiers by how
many of them an item holds (docs/tools.md); more are checked against the candidates' text."""


def term_bands(scored: list[Scored]) -> list[str]:
    """recall@10 of the queries of each term-count band (an errored call, whose terms are unknown, in none)."""
    bands = []
    for name, low, high in TERM_BANDS:
        part = [s for s in scored if s.terms is not None and low <= s.terms and (high is None or s.terms <= high)]
        if part:
            bands.append(f"{name} terms {sum(s.recall for s in part) / len(part):.3f} over {len(part)} queries")
    return bands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", type=Path, default=SET_FILE, help="the relevance set (JSON)")
    parser.add_argument("--graphs", default="demo,generated", help="which graphs of the set to score")
    parser.add_argument("--objects", type=int, default=10_000, help="size of the generated graph")
    add_graph_options(parser)
    parser.add_argument("--verbose", action="store_true", help="print page 1 of every query that misses a need")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    graphs, queries = load_set(args.set)
    wanted = args.graphs.split(",")
    scored: list[Scored] = []
    missing: list[str] = []
    log = args.cache_dir / "relevance-servers.log"
    for graph in wanted:
        if graph not in graphs:
            parser.error(f"no graph {graph!r} in {args.set}")
        part = [q for q in queries if q.graph == graph]
        if graph == "demo":
            db = ensure_demo(args.cache_dir)
        else:
            db = ensure_graph(args.cache_dir, args.objects, source_code_points=args.source_code_points)
        print(f"{graph}: {db.name}, {len(part)} queries, project {graphs[graph]['project']}", file=sys.stderr)
        found, absent = anyio.run(score_graph, db, graphs[graph]["project"], part, log)
        scored += found
        missing += absent
    if not scored:
        parser.error("no queries selected")
    print("\n".join(report(scored, args.verbose)))
    if missing:
        print("\nthe set names objects the graph does not hold in the query's scope (fix the set):")
        print("\n".join(f"  {m}" for m in missing))
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
