"""`db import --from goodbuddy`: what the import works out from several rows at once (a source's newest saved
fragment, the result a relation is recorded with, which stories are written, where links point, the order of
the lines), read in streams with that knowledge kept in SQL rather than in memory."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from goodbuddy_fixture import (
    ATLAS,
    ATLAS_SCOPE,
    ENT_A,
    ENT_G,
    EV_B,
    EV_BEACON_DONE,
    EV_C,
    EV_G,
    EV_KICK,
    EV_UNDATED,
    EXPERIENCE,
    EXPERIENCE_MIXED,
    M_DEL,
    REL_BA,
    RES0,
    RES2,
    RES3,
    RES_B,
    S1,
    S6,
    S_G,
    STORY_BEACON,
    build_goodbuddy,
    write,
)

from server.store.errors import ImportRejected
from server.store.exporter import export_lines
from server.store.goodbuddy import GoodBuddySource, import_goodbuddy
from server.store.goodbuddy import story_mapping as why
from server.store.migrate import migrate, open_store
from server.store.sync import Retired

Lines = dict[str, list[dict[str, Any]]]


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return build_goodbuddy(tmp_path / "assistant.db")


def imported(app: Path, tmp_path: Path) -> tuple[Lines, dict[str, int]]:
    """The graph's lines by kind after importing `app`, and the import's notes as counts."""
    db = tmp_path / "graph.db"
    migrate(db)
    _, notes = import_goodbuddy(db, app)
    conn = open_store(db, write=False)
    try:
        lines: Lines = {}
        for raw in export_lines(conn):
            line = orjson.loads(raw)
            lines.setdefault(line.pop("kind"), []).append(line)
    finally:
        conn.close()
    return lines, {line.rpartition(": ")[0]: int(line.rpartition(": ")[2]) for line in notes}


def by_id(lines: Lines, kind: str) -> dict[str, dict[str, Any]]:
    return {line["id"]: line for line in lines.get(kind, [])}


def copy_fragment(app: Path, fragment_id: str, result_id: str, title: str, occurred: str) -> None:
    """Another saved fragment of the same live record as S6 (a message deleted since), in `result_id`."""
    write(
        app,
        "INSERT INTO supervision_sources (id, result_id, source_type, source_id, title, occurred_at, content,"
        " locator_json, availability, source_key, source_revision)"
        " SELECT ?, ?, source_type, source_id, ?, ?, content, locator_json, availability, source_key, source_revision"
        " FROM supervision_sources WHERE id = ?",
        fragment_id,
        result_id,
        title,
        occurred,
        S6,
    )


def test_a_source_is_described_by_its_newest_fragment_and_last_seen_at_the_latest_time_any_names(
    app: Path, tmp_path: Path
) -> None:
    # Fragments are read in id order: S6 (result 3), then one more of result 3 (a tie: the later read wins),
    # then one of result 0 (older: it does not win, though read last); the latest time is the tie's.
    copy_fragment(app, "5f000000-0000-4000-8000-000000000001", RES3, "Tie title", "2026-03-30T00:00:00.000Z")
    copy_fragment(app, "5f000000-0000-4000-8000-000000000002", RES0, "Old title", "2026-03-05T00:00:00.000Z")

    lines, _ = imported(app, tmp_path)

    source = by_id(lines, "source")[f"message:{M_DEL}"]
    assert (source["status"], source["title"], source["updated_at"]) == (
        "deleted",
        "Tie title",
        "2026-03-30T00:00:00.000Z",
    )


def test_a_relation_is_recorded_with_the_first_result_whose_snapshot_holds_it(app: Path, tmp_path: Path) -> None:
    # Result 3, recorded after result 2, lists the relation too.
    write(
        app,
        "UPDATE supervision_results SET graph_snapshot_json = json_insert(graph_snapshot_json, '$.relations[#]',"
        " json_object('id', ?)) WHERE id = ?",
        REL_BA,
        RES3,
    )

    lines, _ = imported(app, tmp_path)

    assert by_id(lines, "relation")[REL_BA]["result_id"] == RES2


def test_an_entity_a_snapshot_lists_twice_is_one_revision_as_first_listed(app: Path, tmp_path: Path) -> None:
    write(
        app,
        "UPDATE supervision_results SET graph_snapshot_json = json_insert(graph_snapshot_json, '$.entities[#]',"
        " json_object('id', ?, 'canonical_label', 'A later copy', 'description', 'd')) WHERE id = ?",
        ENT_A,
        RES2,
    )

    lines, _ = imported(app, tmp_path)

    saved = [x for x in lines["entity_revision"] if (x["entity_id"], x["result_id"]) == (ENT_A, RES2)]
    assert [x["canonical_label"] for x in saved] == ["Use SQLite"]


def test_a_feature_holding_only_its_threads_events_is_written_and_a_thread_needs_its_feature_in_its_scope(
    app: Path, tmp_path: Path
) -> None:
    feature, thread, stray = (f"57000000-0000-4000-8000-0000000000f{n}" for n in range(3))
    at = "2026-04-02T00:00:00.000Z"
    for story_id, parent, level in (
        (feature, None, "feature"),
        (thread, feature, "thread"),
        (stray, STORY_BEACON, "thread"),
    ):
        write(
            app,
            "INSERT INTO supervision_stories (id, project_id, parent_id, level, name, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, 'n', ?, ?)",
            story_id,
            ATLAS,
            parent,
            level,
            at,
            at,
        )
    for event_id, story_id, primary in (
        (EV_G, feature, 0),  # the feature's own event is the Global review's: not within Atlas
        (EV_KICK, thread, 1),  # its thread's event is Atlas's
        (EV_UNDATED, stray, 1),  # an Atlas thread under Beacon's feature
    ):
        write(app, "INSERT INTO supervision_event_stories VALUES (?, ?, ?, 0)", event_id, story_id, primary)

    lines, notes = imported(app, tmp_path)

    stored = by_id(lines, "story")
    assert (stored[feature]["scope"], stored[thread]["scope"]) == (ATLAS_SCOPE, ATLAS_SCOPE)
    assert {(x["story_id"], x["event_id"]) for x in lines["story_event"] if x["story_id"] in (feature, thread)} == {
        (thread, EV_KICK)
    }
    assert stray not in stored
    assert notes[why.THREAD_NO_FEATURE] == 1


def test_links_are_kept_in_their_scope_and_the_rest_counted_as_gone_or_elsewhere(app: Path, tmp_path: Path) -> None:
    gone = "e0000000-0000-4000-8000-0000000000ff"
    write(app, "INSERT INTO supervision_event_entities VALUES (?, ?, 'associated')", EV_B, gone)
    write(app, "INSERT INTO supervision_event_entities VALUES (?, ?, 'associated')", EV_B, ENT_G)  # Global's
    write(
        app, "UPDATE supervision_entities SET source_reference_ids_json = ? WHERE id = ?", f'["{S1}", "{S_G}"]', ENT_A
    )
    # Superseded by a review of another scope: the event stays in its own.
    write(app, "UPDATE supervision_events SET superseded_by = ? WHERE id = ?", RES_B, EV_BEACON_DONE)

    lines, notes = imported(app, tmp_path)

    assert by_id(lines, "entity")[ENT_A]["source_reference_ids"] == [S1]
    assert ENT_G not in by_id(lines, "event")[EV_B]["entity_ids"]
    assert notes["links to entities (from events) no longer in the app (not imported)"] == 1
    assert (
        notes[
            "links to entities (from events) in another review scope (not imported: an object lives in one scope here)"
        ]
        == 1
    )
    assert EV_BEACON_DONE in by_id(lines, "event")
    assert notes["events superseded by a review of another scope (kept in their own scope)"] == 1


def test_scopes_come_before_the_results_and_story_lines_after_them(app: Path) -> None:
    kinds = [line.kind for _, line in GoodBuddySource(app) if not isinstance(line, Retired)]

    reviews = kinds[: kinds.index("source_reference")]  # the lines of the scopes, results and story lines
    scopes, results, story_lines = (
        [index for index, kind in enumerate(reviews) if kind in wanted]
        for wanted in (("scope",), ("result", "summary"), ("story_line",))
    )
    assert max(scopes) < min(results) and max(results) < min(story_lines)
    assert kinds.index("result") < kinds.index("summary")  # each result's summary follows it


def test_every_experience_row_is_checked_before_any_experience_line_is_made(app: Path) -> None:
    # A damaged database: an experience's link with a role the app never writes, and a later experience's time.
    conn = sqlite3.connect(app, isolation_level=None)
    conn.execute("PRAGMA ignore_check_constraints = 1")
    conn.execute(
        "UPDATE supervision_experience_events SET role = 'bogus' WHERE experience_id = ? AND event_id = ?",
        (EXPERIENCE, EV_C),
    )
    conn.execute("UPDATE supervision_experiences SET created_at = 'yesterday' WHERE id = ?", (EXPERIENCE_MIXED,))
    conn.close()

    with pytest.raises(ImportRejected) as caught:
        list(GoodBuddySource(app))

    assert f"table supervision_experiences row id={EXPERIENCE_MIXED}, field 'created_at'" in str(caught.value)
