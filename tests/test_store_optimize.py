"""`db optimize` (server/store/optimize.py): a search index in several b-trees, as earlier versions left one, is
merged into one; the graph, its revisions and every answer stay as they were, a server reading meanwhile goes on
(its cursors too), and a refused merge changes nothing."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonl_graph import chain_graph, content, dump, write_jsonl
from support import all_pages, client_for, ok

from server.store import search_index
from server.store.importer import import_file
from server.store.migrate import migrate
from server.store.optimize import optimize

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parent.parent
SEARCH = "story_graph_search"
ALPHA = {"kind": "projects", "projectIds": ["alpha"]}
QUERIES = ["Event", "方案", "Entity 12", "event 方案 entity"]
AUTOMERGE = "INSERT INTO search_fts (search_fts, rank) VALUES ('automerge', ?)"


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server", *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def several_b_trees(tmp_path: Path) -> Path:
    """A graph whose index is in several b-trees, as versions before 2026-12-02 left a bulk import (a 1M import:
    13): here a large import and six small ones, each written as a b-tree of its own while FTS5's merging is off."""
    db = tmp_path / "graph.db"
    migrate(db)
    lines = chain_graph(600)
    import_file(db, write_jsonl(tmp_path / "chain.jsonl", lines))
    events = [line for line in lines if line["kind"] == "event"]
    with sqlite3.connect(db) as conn:
        conn.execute(AUTOMERGE, (0,))
    for batch in range(6):
        more = [{**line, "id": f"{line['id']}-more{batch}"} for line in events[batch * 10 : batch * 10 + 10]]
        import_file(db, write_jsonl(tmp_path / f"more{batch}.jsonl", more))
    with sqlite3.connect(db) as conn:
        conn.execute(AUTOMERGE, (search_index.FTS_AUTOMERGE,))
        assert search_index.b_trees(conn) == 7
    return db


def _answers(pages: list[list[dict[str, Any]]]) -> list[list[Any]]:
    return [[(p["items"], p["page"]) for p in query_pages] for query_pages in pages]


async def test_optimize_merges_the_index_and_every_answer_stays_as_it_was(several_b_trees: Path) -> None:
    db = several_b_trees
    rows = content(db)
    async with client_for(db) as client:
        before = [await all_pages(client, SEARCH, {"query": q, "scope": ALPHA, "page_size": 25}) for q in QUERIES]
        first = await ok(client, SEARCH, {"query": "Event", "scope": ALPHA})

        # Merged while the server reads: nothing it remembers goes stale, and a cursor it gave still pages on.
        report = await anyio.to_thread.run_sync(optimize, db)
        assert (report.before, report.after) == (7, 1)
        after = [await all_pages(client, SEARCH, {"query": q, "scope": ALPHA, "page_size": 25}) for q in QUERIES]
        following = await ok(client, SEARCH, {"query": "Event", "scope": ALPHA, "cursor": first["page"]["next_cursor"]})
    assert _answers(after) == _answers(before)
    assert following["items"] == before[0][0]["items"][10:20]

    assert content(db) == rows  # the graph and its revisions
    with sqlite3.connect(db) as conn:
        assert search_index.b_trees(conn) == 1
        conn.execute("INSERT INTO search_fts (search_fts) VALUES ('integrity-check')")  # raises if the index is wrong
        assert conn.execute("SELECT v FROM search_fts_config WHERE k = 'automerge'").fetchone() == (4,)
        assert [row[0] for row in conn.execute("PRAGMA integrity_check")] == ["ok"]


def test_the_command_says_what_it_did_and_stats_says_when_it_helps(several_b_trees: Path) -> None:
    db = several_b_trees
    trees = search_index.b_trees(sqlite3.connect(db))
    stats = _cli("db", "stats", "--db", db)
    assert (
        f"\nsearch index: {trees} b-trees (searches read each; `story-graph-mcp db optimize --db {db}` merges them"
        " into one)\n" in stats.stdout
    )

    run = _cli("db", "optimize", "--db", db, "--quiet")
    assert run.returncode == 0 and run.stderr == ""
    assert run.stdout.startswith(f"{db}: the search index went from {trees} b-trees to 1 in ")
    assert "\nsearch index: one b-tree\n" in _cli("db", "stats", "--db", db).stdout

    again = _cli("db", "optimize", "--db", db)
    assert (again.returncode, again.stdout) == (0, f"{db}: the search index is in one b-tree already; nothing to do\n")


def test_an_optimize_while_another_writer_holds_the_database_says_so_and_changes_nothing(several_b_trees: Path) -> None:
    db = several_b_trees
    before = dump(db)
    writer = sqlite3.connect(db, isolation_level=None)  # an import, or the application that owns the data
    try:
        writer.execute("BEGIN IMMEDIATE")
        run = _cli("db", "optimize", "--db", db)
    finally:
        writer.close()
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert run.stderr.startswith("story-graph-mcp: optimize stopped, the index is as it was: ")
    assert "is locked by another writer" in run.stderr
    assert dump(db) == before
