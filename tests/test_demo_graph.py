"""The shipped demo graph is exactly what its generator writes, and docs/demo.md counts what it holds."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from demo.make_demo import encoded
from jsonl_graph import stats_table
from support import client_for, demo_db, ok

from server.store.demo import demo_path, write_demo
from server.store.stats import stats_text

DEMO_DOC = Path(__file__).resolve().parent.parent / "docs" / "demo.md"


def test_the_shipped_demo_graph_is_what_the_generator_writes() -> None:
    assert demo_path().read_bytes() == encoded(), "run `python tests/demo/make_demo.py` and commit its output"


def _stats_counts(text: str) -> dict[tuple[str, str], str]:
    """`db stats` per-scope counts as {(row heading, scope key): count}, without the revision rows."""
    header, rows = stats_table(text)
    counts: dict[tuple[str, str], str] = {}
    for heading, cells in rows.items():
        if heading not in ("data revision", "memory revision"):
            counts.update({(heading, scope): cell for scope, cell in zip(header, cells, strict=True)})
    return counts


def _doc_counts(text: str) -> dict[tuple[str, str], str]:
    """The table between the demo-counts markers, keyed like `_stats_counts`."""
    table = text.split("<!-- demo-counts -->\n", 1)[1].split("<!-- /demo-counts -->", 1)[0]
    rows = [[cell.strip().strip("`") for cell in line.strip().strip("|").split("|")] for line in table.splitlines()]
    header = ["global" if name == "global" else name if name == "total" else f"projects:{name}" for name in rows[0][1:]]
    return {(row[0], scope): cell for row in rows[2:] for scope, cell in zip(header, row[1:], strict=True)}


def test_the_counts_in_docs_demo_md_are_what_db_stats_prints(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    write_demo(db)
    stats = stats_text(db)

    assert _doc_counts(DEMO_DOC.read_text(encoding="utf-8")) == _stats_counts(stats)
    assert "overall: projects 3, scopes 5, sources 21, source versions 21, memory items 3" in stats


def test_the_demo_keeps_its_stories_and_experience_in_their_scopes(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    write_demo(db)
    with sqlite3.connect(db) as conn:
        stories = dict(conn.execute("SELECT id, scope_key FROM stories").fetchall())
        experience = conn.execute("SELECT id, scope_key FROM experiences").fetchall()
        uses = conn.execute(
            "SELECT event_id, role, event_scope_key FROM experience_events ORDER BY role, event_id"
        ).fetchall()
        atlas_links = conn.execute(
            "SELECT DISTINCT story_id FROM story_events WHERE scope_key = 'projects:[\"atlas\"]' ORDER BY 1"
        ).fetchall()
        primaries = conn.execute("SELECT event_id FROM story_events WHERE is_primary = 1 ORDER BY 1").fetchall()

    pair, atlas, beacon = 'projects:["atlas","beacon"]', 'projects:["atlas"]', 'projects:["beacon"]'
    assert stories == {
        "story-atlas-session-cache": atlas,
        "story-atlas-redis-plan": atlas,
        "story-atlas-sqlite-wal": atlas,
        "story-pair-edge-stack": pair,
    }
    assert experience == [("exp-edge-box-infra", pair)]
    assert uses == [
        ("evt-beacon-push-relay", "applied", beacon),
        ("evt-decision-b", "applied", atlas),
        ("evt-pair-edge-box-rule", "formed", pair),
        ("evt-revision-a-to-b", "formed", atlas),
    ]
    # Rows read for Atlas hold only Atlas's own stories: the cross story's links live in the pair's scope.
    assert [row[0] for row in atlas_links] == [
        "story-atlas-redis-plan",
        "story-atlas-session-cache",
        "story-atlas-sqlite-wal",
    ]
    assert len(primaries) == len(set(primaries)) == 8


@pytest.mark.anyio
async def test_a_day_precision_window_covers_its_last_day_whole(tmp_path: Path) -> None:
    """The load test ran April 1–14 (precision day), but its interval ended at 2026-04-14T00:00: a search for the
    afternoon of April 14 did not find it. A day-precision end is that day's last millisecond, as imports store it."""
    afternoon = {"from": "2026-04-14T08:00:00Z", "to": "2026-04-14T20:00:00Z"}
    async with client_for(demo_db(tmp_path)) as client:
        found = await ok(
            client, "story_graph_search", {"query": "load test", "object_types": ["event"], "time_range": afternoon}
        )
    assert [i["object_ref"]["id"] for i in found["items"]] == ["evt-load-test-window"]
    assert found["items"][0]["event_interval"] == {
        "start": "2026-04-01T00:00:00.000Z",
        "end": "2026-04-14T23:59:59.999Z",
        "precision": "day",
        "basis": "stated_in_source",
    }


@pytest.mark.anyio
async def test_a_day_precision_instant_is_matched_as_its_instant(tmp_path: Path) -> None:
    """docs/tools.md: an instant is not widened to a day by its precision (which day depends on a time zone the stored
    time no longer holds). The kickoff, written 2026-02-01T10:00:00+08:00 with precision day, is 02:00Z."""
    query = {"query": "kickoff", "object_types": ["event"]}
    at = {"from": "2026-02-01T02:00:00Z", "to": "2026-02-01T02:00:00Z"}
    later_that_day = {"from": "2026-02-01T02:00:00.001Z", "to": "2026-02-01T23:59:59.999Z"}
    async with client_for(demo_db(tmp_path)) as client:
        found = await ok(client, "story_graph_search", query | {"time_range": at})
        missed = await ok(client, "story_graph_search", query | {"time_range": later_that_day})
    assert [i["object_ref"]["id"] for i in found["items"]] == ["evt-late-recorded-kickoff"]
    assert found["items"][0]["event_interval"]["precision"] == "day"
    assert "evt-late-recorded-kickoff" not in [i["object_ref"]["id"] for i in missed["items"]]
    assert missed["unknown_time_excluded_count"] == found["unknown_time_excluded_count"]
