"""`db import --from goodbuddy`: the app's stories and experiences in the store, under this graph's scope rules.

Checked on the store itself (export lines, rows, `db stats`) and on the import's notes; reading stories
through the tools is tested with the reader.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from goodbuddy_fixture import (
    ATLAS,
    ATLAS_SCOPE,
    BEACON_SCOPE,
    EV_A,
    EV_B,
    EV_BEACON_STORE,
    EV_C,
    EV_G,
    EV_KICK,
    EV_REV,
    EV_ROLL,
    EV_UNDATED,
    EXPERIENCE,
    EXPERIENCE_PAIR,
    PAIR_SCOPE,
    SL_ATLAS,
    STORY_BEACON,
    STORY_CROSS,
    STORY_F,
    STORY_REMOVED,
    STORY_T,
    build_goodbuddy,
    write,
)
from jsonl_graph import dump, revisions

from server.contracts.base import ProjectsScope, scope_key
from server.store.exporter import export_file
from server.store.goodbuddy import import_goodbuddy
from server.store.goodbuddy import story_mapping as why
from server.store.migrate import migrate
from server.store.stats import stats_text

ATLAS_KEY, BEACON_KEY, PAIR_KEY = (
    scope_key(ProjectsScope(kind="projects", projectIds=scope["projectIds"]))
    for scope in (ATLAS_SCOPE, BEACON_SCOPE, PAIR_SCOPE)
)
Lines = dict[str, list[dict[str, Any]]]


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return build_goodbuddy(tmp_path / "assistant.db")


@pytest.fixture
def imported(tmp_path: Path, app: Path) -> tuple[Path, list[str]]:
    db = tmp_path / "graph.db"
    migrate(db)
    _, notes = import_goodbuddy(db, app)
    return db, notes


def exported(db: Path, tmp_path: Path) -> Lines:
    """The export's lines, by kind."""
    out = tmp_path / "export.jsonl"
    export_file(db, out)
    lines: Lines = {}
    for raw in out.read_bytes().splitlines():
        line = orjson.loads(raw)
        lines.setdefault(line.pop("kind"), []).append(line)
    return lines


def by_id(lines: Lines, kind: str) -> dict[str, dict[str, Any]]:
    return {line["id"]: line for line in lines.get(kind, [])}


def links(lines: Lines) -> set[tuple[str, str, bool, bool]]:
    return {(x["story_id"], x["event_id"], x["primary"], x["user_set"]) for x in lines.get("story_event", [])}


def uses(lines: Lines) -> set[tuple[str, str, str, str]]:
    return {(x["experience_id"], x["event_id"], x["role"], x["note"]) for x in lines.get("experience_event", [])}


def rows(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def test_stories_are_stored_with_the_apps_ids_levels_states_spans_and_project_scopes(
    imported: tuple[Path, list[str]], tmp_path: Path
) -> None:
    stories = by_id(exported(imported[0], tmp_path), "story")

    assert set(stories) == {STORY_F, STORY_T, STORY_BEACON, STORY_CROSS}
    feature, thread, beacon = stories[STORY_F], stories[STORY_T], stories[STORY_BEACON]
    assert (feature["level"], feature["scope"], feature["parent_story_id"]) == ("feature", ATLAS_SCOPE, None)
    assert (feature["name"], feature["description"]) == ("Sync store", "Where the sync service keeps its data")
    assert (feature["confirmation_state"], feature["recorded_at"]) == ("automatic", "2026-03-03T00:00:00.000Z")
    # The app's span: its primary events' earliest start and latest end (the fragments' times).
    assert (feature["started_at"], feature["ended_at"]) == ("2026-03-02T09:00:00.000Z", "2026-03-12T11:05:00.000Z")
    assert (thread["level"], thread["scope"], thread["parent_story_id"]) == ("thread", ATLAS_SCOPE, STORY_F)
    assert thread["confirmation_state"] == "user_edited"
    assert (thread["started_at"], thread["ended_at"]) == ("2026-03-10T14:00:00.000Z", "2026-03-13T08:00:00.000Z")
    # Concluded by an event of the Global review: the state stays, its event is not named across scopes.
    assert (beacon["scope"], beacon["state"], beacon["state_event_id"]) == (BEACON_SCOPE, "concluded", None)
    assert (beacon["started_at"], beacon["ended_at"]) == ("2026-03-21T09:00:00.000Z", "2026-03-21T09:00:00.000Z")


def test_story_links_keep_primary_and_user_set_and_only_events_within_the_story(
    imported: tuple[Path, list[str]], tmp_path: Path
) -> None:
    lines = exported(imported[0], tmp_path)

    assert links(lines) == {
        (STORY_F, EV_A, True, False),
        (STORY_F, EV_REV, True, False),
        (STORY_F, EV_C, True, False),
        (STORY_T, EV_B, True, False),
        (STORY_T, EV_ROLL, True, True),
        (STORY_BEACON, EV_BEACON_STORE, True, False),
        (STORY_CROSS, EV_B, False, False),
        (STORY_CROSS, EV_BEACON_STORE, False, False),
    }


def test_a_cross_story_belongs_to_the_project_pair_it_spans_which_the_import_declares(
    imported: tuple[Path, list[str]], tmp_path: Path
) -> None:
    db = imported[0]
    lines = exported(db, tmp_path)

    cross = by_id(lines, "story")[STORY_CROSS]
    assert (cross["level"], cross["scope"], cross["parent_story_id"]) == ("cross", PAIR_SCOPE, None)
    assert (cross["started_at"], cross["ended_at"]) == ("2026-03-10T14:00:00.000Z", "2026-03-21T09:00:00.000Z")
    # No review covers the pair: the import declares its scope for the story.
    assert {"scope": PAIR_SCOPE} in lines["scope"]
    assert rows(db, "SELECT 1 FROM results WHERE scope_key = ?", PAIR_KEY) == []
    # Each link lives in the pair's scope beside its event's own scope (Atlas, Beacon); the Global one is gone.
    assert sorted(
        rows(db, "SELECT event_id, scope_key, event_scope_key FROM story_events WHERE story_id = ?", STORY_CROSS)
    ) == [
        (EV_B, PAIR_KEY, ATLAS_KEY),
        (EV_BEACON_STORE, PAIR_KEY, BEACON_KEY),
    ]


def test_experiences_belong_to_the_scope_of_the_events_that_formed_them(
    imported: tuple[Path, list[str]], tmp_path: Path
) -> None:
    lines = exported(imported[0], tmp_path)
    experiences = by_id(lines, "experience")

    assert set(experiences) == {EXPERIENCE, EXPERIENCE_PAIR}
    lesson, pair = experiences[EXPERIENCE], experiences[EXPERIENCE_PAIR]
    assert (lesson["scope"], lesson["statement"], lesson["confirmation_state"]) == (
        ATLAS_SCOPE,
        "Don't pick infrastructure the edge boxes cannot run",
        "automatic",
    )
    assert (lesson["conditions"], lesson["boundaries"]) == (
        "When choosing storage for software that runs on the edge boxes",
        "Not about the central host",
    )
    assert pair["scope"] == PAIR_SCOPE
    # The application in Beacon lies outside the Atlas lesson's scope: not linked.
    assert uses(lines) == {
        (EXPERIENCE, EV_REV, "formed", ""),
        (EXPERIENCE, EV_C, "applied", "DuckDB checked against the edge boxes"),
        (EXPERIENCE_PAIR, EV_B, "formed", "Atlas moved to Postgres"),
        (EXPERIENCE_PAIR, EV_BEACON_STORE, "formed", "Beacon followed"),
        (EXPERIENCE_PAIR, EV_ROLL, "applied", "the rollout plan reused"),
    }


def test_what_the_scope_rules_cannot_hold_is_counted_in_the_notes(imported: tuple[Path, list[str]]) -> None:
    counts = {line.rpartition(": ")[0]: int(line.rpartition(": ")[2]) for line in imported[1]}

    assert {
        reason: counts.get(reason, 0)
        for reason in (
            why.STORIES_HIDDEN,  # the removed story
            why.STORY_NOTHING_IN_SCOPE,  # the Beacon feature whose one event is the Global review's
            why.STORY_LINK_OUTSIDE,  # the Beacon feature's and the cross story's Global events
            why.STATE_EVENT_OUTSIDE,  # the Beacon feature concluded by a Global event
            why.SPAN_DIFFERS,  # the Beacon feature's span without that Global event
            why.EXPERIENCE_MIXED,  # formed from a Global and a Beacon event
            why.EXPERIENCE_LINK_OUTSIDE,  # the Atlas lesson applied in Beacon
            why.CROSS_NO_SPAN,
            why.STORY_LINK_MISSING,
            why.EXPERIENCE_LINK_MISSING,
        )
    } == {
        why.STORIES_HIDDEN: 1,
        why.STORY_NOTHING_IN_SCOPE: 1,
        why.STORY_LINK_OUTSIDE: 2,
        why.STATE_EVENT_OUTSIDE: 1,
        why.SPAN_DIFFERS: 1,
        why.EXPERIENCE_MIXED: 1,
        why.EXPERIENCE_LINK_OUTSIDE: 1,
        why.CROSS_NO_SPAN: 0,
        why.STORY_LINK_MISSING: 0,
        why.EXPERIENCE_LINK_MISSING: 0,
    }


def test_rarer_cases_are_counted_too(app: Path, tmp_path: Path) -> None:
    orphan, kickoff, lone_cross, undated_cross, stray_thread, elsewhere, lesson = (
        f"99000000-0000-4000-8000-00000000000{n}" for n in range(7)
    )
    at = "2026-04-02T00:00:00.000Z"
    # An event whose result is gone (written the way a database without foreign keys would keep it).
    write(
        app,
        "INSERT INTO supervision_events (id, story_line_id, result_id, occurred_at, title, description, event_type)"
        " VALUES (?, ?, 'no-such-result', '2026-03-05T00:00:00.000Z', 'Orphan', '', 'decision')",
        orphan,
        SL_ATLAS,
    )
    # The kickoff's time names no instant; a feature holds only it.
    write(app, "UPDATE supervision_events SET occurred_at = 'early January', started_at = NULL WHERE id = ?", EV_KICK)
    stories = (
        (kickoff, ATLAS, None, "feature"),
        (lone_cross, None, None, "cross"),
        (undated_cross, None, None, "cross"),
        (stray_thread, ATLAS, STORY_REMOVED, "thread"),
        (elsewhere, "a-project-the-app-deleted", None, "feature"),
    )
    for story_id, project, parent, level in stories:
        write(
            app,
            "INSERT INTO supervision_stories (id, project_id, parent_id, level, name, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, 'n', ?, ?)",
            story_id,
            project,
            parent,
            level,
            at,
            at,
        )
    for event_id, story_id, primary in (
        (EV_KICK, kickoff, 1),
        (EV_G, lone_cross, 0),  # its one event is Global: no project set to belong to
        (EV_UNDATED, undated_cross, 1),  # primary in a cross story: only a damaged database has this
        (orphan, STORY_F, 0),
    ):
        write(app, "INSERT INTO supervision_event_stories VALUES (?, ?, ?, 0)", event_id, story_id, primary)
    write(
        app,
        "INSERT INTO supervision_experiences (id, statement, created_at, updated_at) VALUES (?, 'o', ?, ?)",
        lesson,
        at,
        at,
    )
    write(app, "INSERT INTO supervision_experience_events VALUES (?, ?, 'formed', '')", lesson, orphan)
    db = tmp_path / "graph.db"
    migrate(db)

    _, notes = import_goodbuddy(db, app)

    counts = {line.rpartition(": ")[0]: int(line.rpartition(": ")[2]) for line in notes}
    assert {
        reason: counts.get(reason, 0)
        for reason in (
            why.CROSS_NO_SPAN,
            why.CROSS_PRIMARY,
            why.THREAD_NO_FEATURE,
            why.STORY_NO_PROJECT,
            why.SPAN_UNKNOWN,
            why.STORY_LINK_MISSING,
            why.EXPERIENCE_NO_FORMED,
        )
    } == {
        why.CROSS_NO_SPAN: 1,
        why.CROSS_PRIMARY: 1,
        why.THREAD_NO_FEATURE: 1,
        why.STORY_NO_PROJECT: 1,
        why.SPAN_UNKNOWN: 1,
        why.STORY_LINK_MISSING: 1,
        why.EXPERIENCE_NO_FORMED: 1,
    }
    lines = exported(db, tmp_path)
    stored = by_id(lines, "story")
    assert {lone_cross, stray_thread, elsewhere} & set(stored) == set()
    assert lesson not in by_id(lines, "experience")
    assert (stored[kickoff]["started_at"], stored[kickoff]["ended_at"]) == (None, None)
    # A cross story spanning one project's events belongs to that project; its link is a related one.
    assert stored[undated_cross]["scope"] == ATLAS_SCOPE
    assert (undated_cross, EV_UNDATED, False, False) in links(lines)


def stats_table(db: Path) -> dict[str, dict[str, int]]:
    """`db stats`'s per-scope table: row heading -> scope key -> count."""
    lines = stats_text(db).splitlines()
    header = next(index for index, line in enumerate(lines) if line.startswith(" ") and "total" in line)
    scopes = lines[header].split()[:-1]
    table: dict[str, dict[str, int]] = {}
    for line in lines[header + 3 :]:  # after the data and memory revision rows
        cells = line.split()
        heading, counts = " ".join(cells[: -len(scopes) - 1]), cells[-len(scopes) - 1 : -1]
        table[heading] = dict(zip(scopes, map(int, counts), strict=True))
    return table


def test_db_stats_counts_stories_and_experiences_in_their_own_scopes(imported: tuple[Path, list[str]]) -> None:
    table = stats_table(imported[0])
    beacon = BEACON_KEY

    assert table["stories"] == {"global": 0, PAIR_KEY: 1, ATLAS_KEY: 2, beacon: 1}
    assert table["story links"] == {"global": 0, PAIR_KEY: 2, ATLAS_KEY: 5, beacon: 1}
    assert table["experiences"] == {"global": 0, PAIR_KEY: 1, ATLAS_KEY: 1, beacon: 0}
    assert table["experience links"] == {"global": 0, PAIR_KEY: 3, ATLAS_KEY: 2, beacon: 0}


def test_a_sync_picks_up_a_concluded_story_and_a_new_application(
    app: Path, imported: tuple[Path, list[str]], tmp_path: Path
) -> None:
    db = imported[0]
    atlas_before = revisions(db)[ATLAS_KEY]
    write(
        app,
        "UPDATE supervision_stories SET state = 'concluded', state_event_id = ?, updated_at = ? WHERE id = ?",
        EV_ROLL,
        "2026-04-02T00:00:00.000Z",
        STORY_T,
    )
    write(
        app,
        "INSERT INTO supervision_experience_events VALUES (?, ?, 'applied', 'Postgres checked against the edge boxes')",
        EXPERIENCE,
        EV_B,
    )

    report, _ = import_goodbuddy(db, app)
    settled = dump(db)
    again, _ = import_goodbuddy(db, app)

    assert (report.updated, report.written, report.retired) == ({"story": 1}, {"experience_event": 1}, 0)
    lines = exported(db, tmp_path)
    thread = by_id(lines, "story")[STORY_T]
    assert (thread["state"], thread["state_event_id"]) == ("concluded", EV_ROLL)
    assert thread["recorded_at"] == "2026-03-11T00:00:00.000Z"  # when the app first recorded it, kept
    assert (EXPERIENCE, EV_B, "applied", "Postgres checked against the edge boxes") in uses(lines)
    assert revisions(db)[ATLAS_KEY] > atlas_before
    assert (again.total, again.updated, again.retired) == (0, {}, 0)
    assert dump(db) == settled


def test_a_sync_follows_a_rename_and_an_event_the_user_moved_to_another_story(
    app: Path, imported: tuple[Path, list[str]], tmp_path: Path
) -> None:
    db = imported[0]
    # As the app's story store does it: a rename marks the story user-edited; a move drops the event's
    # primary link and links it, set by the user, to the story it was moved to.
    write(app, "UPDATE supervision_stories SET name = 'Sync store (Postgres)', user_edited = 1 WHERE id = ?", STORY_F)
    write(app, "DELETE FROM supervision_event_stories WHERE event_id = ? AND is_primary = 1", EV_C)
    write(app, "INSERT INTO supervision_event_stories VALUES (?, ?, 1, 1)", EV_C, STORY_T)

    report, _ = import_goodbuddy(db, app)
    settled = dump(db)
    again, _ = import_goodbuddy(db, app)

    # The old link goes (retired) before the new primary link is written, so the two never meet.
    assert (report.updated, report.written, report.retired) == ({"story": 1}, {"story_event": 1}, 1)
    lines = exported(db, tmp_path)
    feature = by_id(lines, "story")[STORY_F]
    assert (feature["name"], feature["confirmation_state"]) == ("Sync store (Postgres)", "user_edited")
    assert (feature["started_at"], feature["ended_at"]) == ("2026-03-02T09:00:00.000Z", "2026-03-10T14:00:00.000Z")
    assert {link for link in links(lines) if EV_C in link} == {(STORY_T, EV_C, True, True)}
    assert (again.total, again.updated, again.retired) == (0, {}, 0)
    assert dump(db) == settled


def test_a_sync_retires_a_thread_the_user_removed_and_links_its_events_to_the_feature(
    app: Path, imported: tuple[Path, list[str]], tmp_path: Path
) -> None:
    db = imported[0]
    # Removing a thread moves its events to its feature, set by the user, and marks the thread removed.
    write(
        app,
        "UPDATE OR IGNORE supervision_event_stories SET story_id = ?, user_set = 1 WHERE story_id = ?",
        STORY_F,
        STORY_T,
    )
    write(app, "UPDATE supervision_stories SET status = 'removed' WHERE id = ?", STORY_T)

    report, _ = import_goodbuddy(db, app)
    settled = dump(db)
    again, _ = import_goodbuddy(db, app)

    assert (report.updated, report.written, report.retired) == ({"story": 1}, {"story_event": 2}, 1)
    lines = exported(db, tmp_path)
    assert STORY_T not in by_id(lines, "story")
    assert by_id(lines, "story")[STORY_F]["ended_at"] == "2026-03-13T08:00:00.000Z"
    assert {link for link in links(lines) if link[0] in (STORY_F, STORY_T)} == {
        (STORY_F, EV_A, True, False),
        (STORY_F, EV_REV, True, False),
        (STORY_F, EV_C, True, False),
        (STORY_F, EV_B, True, True),
        (STORY_F, EV_ROLL, True, True),
    }
    assert rows(db, "SELECT 1 FROM search_items WHERE object_type = 'story' AND object_id = ?", STORY_T) == []
    assert (again.total, again.updated, again.retired) == (0, {}, 0)
    assert dump(db) == settled


def test_a_story_bound_the_app_dated_by_day_keeps_its_precision(app: Path, tmp_path: Path) -> None:
    """The app dates an event by a bare day; the Beacon story's span is that event's. Its bounds were stored as the
    day's midnight alone, so the story read as starting and ending at 00:00; each now keeps precision `day`."""
    day_only = "UPDATE supervision_events SET occurred_at = '2026-03-21', started_at = NULL, ended_at = NULL"
    write(app, day_only + " WHERE id = ?", EV_BEACON_STORE)
    db = tmp_path / "graph.db"
    migrate(db)
    import_goodbuddy(db, app)
    stories = by_id(exported(db, tmp_path), "story")
    beacon, feature = stories[STORY_BEACON], stories[STORY_F]
    assert (beacon["started_at"], beacon["started_at_precision"]) == ("2026-03-21T00:00:00.000Z", "day")
    assert (beacon["ended_at"], beacon["ended_at_precision"]) == ("2026-03-21T00:00:00.000Z", "day")
    # Bounds that are instants keep no precision of their own.
    assert (feature["started_at_precision"], feature["ended_at_precision"]) == (None, None)
