"""`db import --from goodbuddy`: a schema-62 GoodBuddy assistant database, imported and read back through a real
MCP client with the app's own ids, times, states, relation types and saved fragments."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from goodbuddy_fixture import (
    ATLAS,
    ATLAS_SCOPE,
    BATCH,
    BEACON,
    CH_A,
    EDITED_TEXT,
    ENT_A,
    ENT_B,
    ENT_C,
    EV_A,
    EV_B,
    EV_G,
    EV_KICK,
    EV_OLD_A,
    EV_REV,
    EV_ROLL,
    EV_UNDATED,
    EXPERIENCE_PAIR,
    KNOWLEDGE,
    M_A,
    M_EDIT,
    MEMORY,
    MEMORY_PROPOSED,
    PAIR_SCOPE,
    REL_BA,
    REL_CB,
    RES0,
    RES1,
    RES2,
    RES3,
    RUN1,
    RUN2,
    S1,
    S2,
    S3,
    S4,
    S6,
    S7,
    STORY_F,
    TASK,
    TEXT,
    build_goodbuddy,
    write,
)
from jsonl_graph import dump, file_hash, nested_json, revisions
from mcp import Client
from support import client_for, error, ok

from server.contracts.common import Grant
from server.store.errors import DatabaseUnusable, ImportRejected
from server.store.goodbuddy import GoodBuddySource, import_goodbuddy, open_app_database
from server.store.migrate import migrate
from server.store.stats import stats_text
from server.store.sync import Retired

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parent.parent
SEARCH, CONTEXT, READ = "story_graph_search", "story_graph_get_context", "story_graph_read_source"
GLOBAL = {"kind": "global"}


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return build_goodbuddy(tmp_path / "assistant.db")


@pytest.fixture
def graph(tmp_path: Path, app: Path) -> Path:
    db = tmp_path / "graph.db"
    migrate(db)
    import_goodbuddy(db, app)
    return db


def client(db: Path) -> Any:
    return client_for(db, Grant(default_project=ATLAS))


async def context(client: Client, object_type: str, object_id: str, **extra: Any) -> dict[str, Any]:
    return await ok(client, CONTEXT, {"object_ref": {"type": object_type, "id": object_id}, **extra})


def target(page: dict[str, Any], object_type: str, object_id: str, result_id: str | None) -> dict[str, Any]:
    """The item of one object row on a get_context page, with its content parsed."""
    for item in page["items"]:
        if item["object_ref"] == {"type": object_type, "id": object_id} and item["result_id"] == result_id:
            assert item["position"]["end"] == item["position"]["length"], "short content is one fragment"
            found: dict[str, Any] = item | {"data": orjson.loads(item["content"])}
            return found
    raise AssertionError(f"no {object_type} {object_id} / {result_id} on the page")


async def test_search_finds_decision_a_the_revision_and_decision_b_under_the_apps_ids(graph: Path) -> None:
    async with client(graph) as session:
        page = await ok(session, SEARCH, {"query": "SQLite Postgres storage decision"})

    found = {(item["object_ref"]["type"], item["object_ref"]["id"]) for item in page["items"]}
    assert {("event", EV_A), ("event", EV_REV), ("event", EV_B)} <= found
    assert page["resolved_scope"] == ATLAS_SCOPE
    assert ("event", EV_OLD_A) not in found  # superseded by a later review of the same scope


async def test_events_keep_their_times_results_and_evidence(graph: Path) -> None:
    async with client(graph) as session:
        b = target(await context(session, "event", EV_B), "event", EV_B, RES2)
        kickoff = target(await context(session, "event", EV_KICK), "event", EV_KICK, RES3)
        undated = target(await context(session, "event", EV_UNDATED), "event", EV_UNDATED, RES3)
        rollout = target(await context(session, "event", EV_ROLL), "event", EV_ROLL, RES3)

    assert b["event_time"] == "2026-03-10T14:00:00.000Z"
    assert b["review_generated_at"] == b["recorded_at"] == "2026-03-11T00:00:00.000Z"
    assert b["source_reference_ids"] == sorted([S3, S4])
    assert (b["confirmation_state"], b["validity"]) == ("automatic", "unknown")
    assert (b["data"]["title"], b["data"]["event_type"]) == ("Chose Postgres on the central host", "decision")
    # A late-recorded old event stays old: its event time is not its record time.
    assert (kickoff["event_time"], kickoff["recorded_at"]) == ("2026-01-15T10:00:00.000Z", "2026-04-01T00:00:00.000Z")
    assert undated["event_time"] is None
    assert rollout["event_time"] == "2026-03-13T00:00:00.000Z"


async def test_an_event_dated_by_day_is_found_by_a_time_range_within_that_day(graph: Path) -> None:
    """The app dated the rollout '2026-03-13' (a day, not an instant): an afternoon of that day finds it, as does
    the day itself; the next day does not. Before, it was the instant 00:00Z and only a range holding midnight found
    it."""
    afternoon = {"from": "2026-03-13T13:00:00Z", "to": "2026-03-13T17:00:00Z"}
    next_day = {"from": "2026-03-14T00:00:00Z", "to": "2026-03-14T23:59:59Z"}
    async with client(graph) as session:
        rollout = target(await context(session, "event", EV_ROLL), "event", EV_ROLL, RES3)
        found = await ok(session, SEARCH, {"query": "rollout", "time_range": afternoon, "object_types": ["event"]})
        later = await ok(session, SEARCH, {"query": "rollout", "time_range": next_day, "object_types": ["event"]})

    assert rollout["event_interval"] == {
        "start": "2026-03-13T00:00:00.000Z",
        "end": "2026-03-13T23:59:59.999Z",
        "precision": "day",
        "basis": "review_extracted",
    }
    assert [i["object_ref"]["id"] for i in found["items"]] == [EV_ROLL]
    assert EV_ROLL not in [i["object_ref"]["id"] for i in later["items"]]


async def test_an_experience_lists_a_day_dated_event_with_its_end_and_precision_beside_at(graph: Path) -> None:
    """The lesson of Atlas and Beacon was applied in the rollout the app dated '2026-03-13'. Its link's `at` (upstream's
    key: the start of the event time) reads as that day's midnight; before, nothing beside it said the event is a whole
    day, while the event's own item says precision `day`. Now `atEnd` and `atPrecision` say so, and an event stated
    as an instant has neither."""
    async with client(graph) as session:
        page = await context(session, "experience", EXPERIENCE_PAIR, scope=PAIR_SCOPE)
        rollout = target(await context(session, "event", EV_ROLL), "event", EV_ROLL, RES3)

    lesson = target(page, "experience", EXPERIENCE_PAIR, None)
    links = {link["id"]: link for link in lesson["data"]["events"]}
    applied = links[EV_ROLL]
    assert (applied["role"], applied["at"]) == ("applied", "2026-03-13T00:00:00.000Z")
    assert (applied["atEnd"], applied["atPrecision"]) == ("2026-03-13T23:59:59.999Z", "day")
    assert (applied["at"], applied["atEnd"], applied["atPrecision"]) == tuple(
        rollout["event_interval"][key] for key in ("start", "end", "precision")
    )
    formed = links[EV_B]
    assert (formed["at"], formed["atEnd"], formed["atPrecision"]) == ("2026-03-10T14:00:00.000Z", None, None)


async def test_a_confirmed_preference_past_its_expires_at_stays_background_as_in_the_app(
    tmp_path: Path, app: Path
) -> None:
    """The app never sets `memory_items.expires_at` and none of its reads looks at it (docs/interchange.md, "App fields
    not imported"): a confirmed preference whose column names a past time is still background there, so it is here.
    A proposed one is not."""
    write(app, "UPDATE memory_items SET expires_at = ? WHERE id = ?", "2026-02-11T00:00:00.000Z", MEMORY)
    db = tmp_path / "expired.db"
    migrate(db)
    import_goodbuddy(db, app)
    async with client(db) as session:
        page = await context(session, "event", EV_B)

    assert [m["memory_id"] for m in page["background"]] == [MEMORY]
    preference = page["background"][0]
    assert (preference["label"], preference["updated_at"]) == ("background_preference", "2026-02-10T08:00:00.000Z")
    assert MEMORY_PROPOSED not in orjson.dumps(page).decode()


async def test_entities_relations_and_changes_keep_states_raw_types_and_reasons(graph: Path) -> None:
    async with client(graph) as session:
        b = await context(session, "entity", ENT_B)
        contrast = target(await context(session, "relation", REL_BA), "relation", REL_BA, RES2)
        option_c = target(await context(session, "relation", REL_CB), "relation", REL_CB, RES3)
        change = target(
            await context(session, "entity_change", f"{ENT_A}#{CH_A}"), "entity_change", f"{ENT_A}#{CH_A}", RES2
        )
        missing = await error(session, CONTEXT, {"object_ref": {"type": "event", "id": EV_OLD_A}})

    current = target(b, "entity", ENT_B, None)
    assert (current["confirmation_state"], current["data"]["canonical_label"]) == (
        "confirmed",
        "Use Postgres on the central host",
    )
    assert target(b, "entity", ENT_B, RES2)["data"]["description"] == "The sync store moves to Postgres."
    # B and A are in contrast, with the raw reason; nothing turns it into 'replaces'. C is only related to B.
    assert contrast["data"]["relation_type"] == "contrasts"
    assert contrast["data"]["reason"] == "Postgres replaces SQLite because WAL fails on NFS"
    assert contrast["validity"] == "unknown"
    assert (option_c["data"]["relation_type"], option_c["data"]["from_ref"]["id"]) == ("related", ENT_C)
    assert (change["data"]["change_type"], change["source_reference_ids"]) == ("revised", [S3])
    assert missing["error"] == "object_not_found"


async def test_summaries_and_the_successful_leaf_are_read_under_the_apps_ids(graph: Path) -> None:
    async with client(graph) as session:
        summary = target(await context(session, "summary", RES1), "summary", RES1, RES1)
        leaf = target(await context(session, "summary", f"leaf:{BATCH}"), "summary", f"leaf:{BATCH}", RES2)
        a = await context(session, "entity", ENT_A)

    assert (summary["data"]["body"], summary["data"]["open_items"]) == ("Storage settled on SQLite.", ["backup plan"])
    assert leaf["data"]["body"] == "The team replaced SQLite with Postgres."
    leaf_rows = [item for item in a["items"] if item["object_ref"]["id"].startswith("leaf:")]
    assert leaf_rows and "Dropped: WAL fails on the edge boxes." in leaf_rows[0]["content"]


async def test_the_part_of_a_source_a_review_run_did_not_reach_is_named_missing(tmp_path: Path, app: Path) -> None:
    """The review run stopped 50 code points into the task's 120 (`processed_offset` 50 of `length` 120): its coverage
    said the task was `partial` with `[0, 50)` processed, but named nothing missing, so read_source's
    `source_coverage.missing` was empty for the very fragment [0, 120) that cites the unread part. The run's record
    says exactly which part it did not reach: `[50, 120)` of that version."""
    write(app, "UPDATE supervision_review_sources SET processed_offset = 50 WHERE source = ?", f"task:{TASK}")
    db = tmp_path / "partial.db"
    migrate(db)
    import_goodbuddy(db, app)
    async with client(db) as session:
        task = await ok(session, READ, {"source_reference_id": S4})
        message = await ok(session, READ, {"source_reference_id": S3})

    coverage = task["source_coverage"]
    assert [(p["status"], p["fragments"]) for p in coverage["processed"]] == [("partial", [[0, 50]])]
    assert [(m["source_id"], m["ranges"]) for m in coverage["missing"]] == [(f"task:{TASK}", [[50, 120]])]
    assert coverage["missing_count"] == 1
    assert message["source_coverage"]["missing"] == []  # the message was read to its end
    assert task["coverage"]["status"] == "partial"


def test_db_stats_names_the_apps_projects_beside_their_ids(graph: Path) -> None:
    """The app's project ids are UUIDs: `db stats` listed `a71a5000-… (active), beac0000-… (active)`, and a user
    choosing `serve --project` (or a policy's grants) could not tell which one is the Atlas sync service."""
    text = stats_text(graph)

    assert f'projects: {ATLAS} "Atlas sync service" (active), {BEACON} "Beacon" (active)\n' in text


async def test_a_summary_leads_to_the_facts_its_review_recorded_and_its_open_items_reach_them(graph: Path) -> None:
    """An agent that finds a review's summary ('Storage moved from SQLite to Postgres.') reads on to what that review
    recorded: its events, entity changes, the entities its snapshot saved and the relations recorded with it (as the
    app's reader brings in the whole result); a leaf's summary to the entities it described. And the open items of
    those summaries ('backup plan', 'migration window') reach the header of the objects they list. Before, every
    imported summary had no fact refs: get_context on it returned the summary alone, and no header had open items."""
    async with client(graph) as session:
        result = await context(session, "summary", RES2, page_size=50)
        leaf = await context(session, "summary", f"leaf:{BATCH}", page_size=50)
        first = await context(session, "summary", RES0, page_size=50)
        a = await context(session, "entity", ENT_A, page_size=50)

    def refs(page: dict[str, Any]) -> set[tuple[str, str]]:
        return {(i["object_ref"]["type"], i["object_ref"]["id"]) for i in page["items"]}

    summary = target(result, "summary", RES2, RES2)["data"]
    assert summary["fact_refs"] == sorted(
        [
            {"type": "entity", "id": ENT_A},
            {"type": "entity", "id": ENT_B},
            {"type": "entity_change", "id": f"{ENT_A}#{CH_A}"},
            {"type": "event", "id": EV_B},
            {"type": "event", "id": EV_REV},
            {"type": "relation", "id": REL_BA},
        ],
        key=lambda ref: (ref["type"], ref["id"]),
    )
    assert {("event", EV_REV), ("event", EV_B), ("entity_change", f"{ENT_A}#{CH_A}"), ("relation", REL_BA)} <= refs(
        result
    )
    assert target(leaf, "summary", f"leaf:{BATCH}", RES2)["data"]["fact_refs"] == [{"type": "entity", "id": ENT_A}]
    # The first extraction's event was superseded (not imported): its summary lists only what is stored.
    assert target(first, "summary", RES0, RES0)["data"]["fact_refs"] == [{"type": "entity", "id": ENT_A}]
    assert ("event", EV_OLD_A) not in refs(first)
    assert [item["text"] for item in a["header"]["open_items"]] == ["backup plan", "migration window"]


async def test_each_review_scope_reads_only_its_own_results(graph: Path) -> None:
    async with client(graph) as session:
        atlas = await ok(session, SEARCH, {"query": "Beacon release"})
        everything = await ok(session, SEARCH, {"query": "Beacon release", "scope": GLOBAL})

    assert all(item["object_ref"]["id"] != EV_G for item in atlas["items"])
    assert ("event", EV_G) in {(i["object_ref"]["type"], i["object_ref"]["id"]) for i in everything["items"]}


async def test_read_source_returns_the_saved_fragments_and_positions_the_app_stored(graph: Path) -> None:
    async with client(graph) as session:
        a = await ok(session, READ, {"source_reference_id": S1})
        knowledge = await ok(session, READ, {"source_reference_id": S2, "content_kind": "current"})

    assert a["content"] == TEXT[M_A][:36] == "We go with SQLite for the sync store"
    assert (a["saved_fragment"], a["position"]["source_start"], a["position"]["source_end"]) == (
        {"start": 0, "end": 36, "length": 36},
        0,
        36,
    )
    assert a["source_location"]["message_id"] and a["source_location"]["role"] == "user"
    assert a["original_source_length"] == 65
    assert knowledge["content"] == KNOWLEDGE["snippet"]
    assert knowledge["differs_from_reference"] is False
    assert knowledge["source_location"]["document_id"] == "doc-edge"


async def test_edited_and_deleted_messages_are_told_apart_from_their_saved_fragments(graph: Path) -> None:
    async with client(graph) as session:
        edited = await ok(session, READ, {"source_reference_id": S7, "content_kind": "current"})
        edited_snapshot = await ok(session, READ, {"source_reference_id": S7})
        deleted = await ok(session, READ, {"source_reference_id": S6, "content_kind": "current"})
        deleted_snapshot = await ok(session, READ, {"source_reference_id": S6})

    assert (edited["content"], edited["differs_from_reference"]) == (EDITED_TEXT, True)
    assert edited_snapshot["content"] == TEXT[M_EDIT]
    assert deleted["error"] == "current_source_unavailable"
    assert deleted["original_source_availability"] == "deleted"
    assert deleted_snapshot["content"].startswith("DuckDB would need")


def test_reimport_changes_nothing(tmp_path: Path, app: Path, graph: Path) -> None:
    before, revisions_before = dump(graph), revisions(graph)

    report, _ = import_goodbuddy(graph, app)

    assert (report.total, report.updated, report.retired) == (0, {}, 0)
    assert dump(graph) == before
    assert revisions(graph) == revisions_before


async def test_upstream_changes_are_picked_up_and_stale_cursors_say_so(app: Path, graph: Path) -> None:
    async with client(graph) as session:
        first = await ok(session, SEARCH, {"query": "DuckDB", "page_size": 1})
        assert first["page"]["next_cursor"]
        # The user revokes option C, edits a message again, and a new review supersedes decision A's extraction.
        write(app, "UPDATE supervision_entities SET confirmation_state = 'revoked' WHERE id = ?", ENT_C)
        write(app, "UPDATE messages SET content = 'Postgres rollout moved to May.' WHERE id = ?", M_EDIT)
        write(app, "UPDATE supervision_events SET superseded_by = ? WHERE id = ?", RES3, EV_A)

        report, _ = import_goodbuddy(graph, app)

        # The feature story's span starts later without decision A's extraction.
        assert report.updated == {"source": 1, "entity": 1, "story": 1}
        assert (report.written, report.retired) == ({"source_version": 1}, 1)
        later = await error(
            session, SEARCH, {"query": "DuckDB", "page_size": 1, "cursor": first["page"]["next_cursor"]}
        )
        c = target(await context(session, "entity", ENT_C), "entity", ENT_C, None)
        current = await ok(session, READ, {"source_reference_id": S7, "content_kind": "current"})
        gone = await error(session, CONTEXT, {"object_ref": {"type": "event", "id": EV_A}})

    assert later["error"] == "stale_cursor"
    assert c["confirmation_state"] == "revoked"
    assert current["content"] == "Postgres rollout moved to May."
    assert current["available_version_count"] == 2  # the earlier current text stays readable as a version
    assert gone["error"] == "object_not_found"


def test_the_app_database_is_never_written_and_is_read_while_the_app_writes(tmp_path: Path, app: Path) -> None:
    wal = app.with_name(app.name + "-wal")
    running = sqlite3.connect(app, isolation_level=None)  # the app, its last write committed to the WAL only
    try:
        running.execute("UPDATE projects SET name = 'Atlas (renamed)' WHERE id = ?", (ATLAS,))
        before = (file_hash(app), file_hash(wal))
        report, _ = import_goodbuddy(migrated(tmp_path / "live.db"), app)
        after = (file_hash(app), file_hash(wal))
    finally:
        running.close()
    with sqlite3.connect(tmp_path / "live.db") as conn:
        name = conn.execute("SELECT name FROM projects WHERE id = ?", (ATLAS,)).fetchone()[0]

    assert report.total > 0 and name == "Atlas (renamed)"
    assert after == before
    # With the app closed (no WAL file at all) the file is read, and still not written: a WAL reader only
    # creates the empty -wal and the -shm index SQLite needs, as the app itself does when it opens.
    closed = file_hash(app)
    import_goodbuddy(migrated(tmp_path / "closed.db"), app)
    assert file_hash(app) == closed
    assert not wal.exists() or wal.stat().st_size == 0


def migrated(path: Path) -> Path:
    migrate(path)
    return path


@pytest.mark.parametrize("version", [61, 99])
def test_other_schema_versions_are_refused_with_one_line(tmp_path: Path, version: int) -> None:
    old = build_goodbuddy(tmp_path / f"v{version}.db", version=version)
    db = tmp_path / "graph.db"
    migrate(db)
    before = dump(db)

    run = subprocess.run(
        [sys.executable, "-m", "server", "db", "import", "--from", "goodbuddy", "--db", str(db), str(old)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert f"is a GoodBuddy assistant database at schema version {version}; only version 62 can be imported" in (
        run.stderr
    )
    assert dump(db) == before


def test_files_that_are_not_assistant_databases_are_refused(tmp_path: Path) -> None:
    junk, empty = tmp_path / "junk.db", tmp_path / "empty.db"
    junk.write_bytes(b"\x00not sqlite" * 100)
    sqlite3.connect(empty).close()

    with pytest.raises(DatabaseUnusable, match="is not a SQLite database"):
        open_app_database(junk)
    for other in (empty, migrated(tmp_path / "graph.db")):  # a story graph database is not an app database
        with pytest.raises(DatabaseUnusable, match=r"is not a GoodBuddy assistant database \(it has no supervision"):
            open_app_database(other)
    with pytest.raises(DatabaseUnusable, match="does not exist"):
        open_app_database(tmp_path / "missing.db")


def test_an_app_database_locked_by_the_app_is_named_as_locked(tmp_path: Path, app: Path) -> None:
    # The app holding an exclusive lock on a rollback-journal database: this read waits, then says why it failed
    # (it said "is not a SQLite database", sending the operator after the file).
    locked = tmp_path / "locked.db"
    shutil.copyfile(app, locked)
    with sqlite3.connect(locked, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    holder = sqlite3.connect(locked, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(DatabaseUnusable, match="is locked by another process") as refused:
            open_app_database(locked)
    finally:
        holder.close()
    assert "not a SQLite database" not in str(refused.value)


def test_a_schema_62_database_missing_a_column_is_refused_saying_so(tmp_path: Path, app: Path, graph: Path) -> None:
    write(app, "ALTER TABLE supervision_results DROP COLUMN graph_snapshot_json")
    before = dump(graph)

    with pytest.raises(DatabaseUnusable) as caught:
        import_goodbuddy(graph, app)

    assert str(caught.value) == (
        f"{app} claims GoodBuddy schema 62 but its tables differ from that schema (no such column:"
        " r.graph_snapshot_json); it may come from a development build of the app: only databases written by a"
        " GoodBuddy release that uses schema 62 can be imported"
    )
    assert dump(graph) == before


def test_a_bad_row_aborts_the_import_naming_table_and_row(tmp_path: Path, app: Path, graph: Path) -> None:
    write(
        app,
        "UPDATE supervision_runs SET scope_json = 'not json'"
        " WHERE id IN (SELECT run_id FROM supervision_results WHERE id = ?)",
        RES2,
    )
    write(app, "UPDATE supervision_entities SET confirmation_state = 'confirmed' WHERE id = ?", ENT_A)
    before = dump(graph)

    with pytest.raises(ImportRejected) as caught:
        import_goodbuddy(graph, app)

    assert str(caught.value).startswith("import aborted, nothing was written: table supervision_runs row id=")
    assert "field 'scope_json': not valid JSON" in str(caught.value)
    assert dump(graph) == before


@pytest.mark.parametrize(
    ("sql", "stored", "note"),
    [
        (
            # 36 code points like the app's [0, 36), but not the message's text there
            ("UPDATE supervision_sources SET content = ? WHERE id = ?", ("We go with DuckDB for the sync store", S1)),
            ("We go with DuckDB for the sync store", None, None, len(TEXT[M_A])),
            "saved fragments whose [start, end) does not hold their text in the stored version they name (position"
            " stored as unknown): 1",
        ),
        (
            (
                "UPDATE supervision_sources SET locator_json = json_set(locator_json, '$.length', 50) WHERE id = ?",
                (S1,),
            ),
            (TEXT[M_A][:36], 0, 36, None),
            "saved fragments whose source length is not the stored length of their version (stored as unknown): 1",
        ),
    ],
)
async def test_a_saved_fragment_its_stored_message_contradicts_is_kept_with_that_unknown(
    tmp_path: Path, app: Path, sql: tuple[str, tuple[Any, ...]], stored: tuple[Any, ...], note: str
) -> None:
    """The app's row says its text is at [0, 36) of the message (and the message's length), but the message text
    stored for that revision says otherwise: kept with the contradicted part unknown and counted, never exact; a
    second sync finds it unchanged."""
    write(app, sql[0], *sql[1])
    db = tmp_path / "fresh.db"
    migrate(db)

    _, notes = import_goodbuddy(db, app)
    again, notes_again = import_goodbuddy(db, app)

    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT fragment, fragment_start, fragment_end, source_length FROM source_references WHERE id = ?", (S1,)
        ).fetchone()
    assert row == stored
    assert note in notes and note in notes_again
    assert again.updated == {} and again.total == 0
    async with client(db) as session:
        snapshot = await ok(session, READ, {"source_reference_id": S1})
    assert snapshot["content"] == stored[0]
    shown = [value if value is not None else "unknown" for value in stored[1:]]
    assert [
        snapshot["saved_fragment"]["start"],
        snapshot["saved_fragment"]["end"],
        snapshot["reviewed_source_length"],
    ] == (shown)


async def test_a_message_revision_stored_after_a_fragment_it_contradicts_keeps_it_and_counts_it(
    tmp_path: Path, app: Path
) -> None:
    """The app saved S1 as [0, 36) of a revision of M_A that a first sync does not see (the message is at another
    one); later the message is at that revision, with other text there, and S1 is gone from the app. The second sync
    stores that revision: S1 stays as stored (the tools read its range unknown) and the sync counts it. It was not
    counted: the sync said nothing of it."""
    with sqlite3.connect(app) as conn:
        (context,) = conn.execute(
            "SELECT json_array('later', c.project_id, c.title, m.role, m.created_at) FROM messages AS m"
            " JOIN conversations AS c ON c.id = m.conversation_id WHERE m.id = ?",
            (M_A,),
        ).fetchone()
    later = hashlib.sha256(context.encode()).hexdigest()
    write(
        app,
        "UPDATE supervision_sources SET locator_json = json_set(locator_json, '$.revision', ?), source_revision = ?"
        " WHERE id = ?",
        later,
        later,
        S1,
    )
    db = tmp_path / "fresh.db"
    migrate(db)
    import_goodbuddy(db, app)
    write(app, "UPDATE messages SET content = ? WHERE id = ?", TEXT[M_A].replace("SQLite", "DuckDB"), M_A)
    write(app, "UPDATE messages SET review_revision = 'later' WHERE id = ?", M_A)
    write(app, "DELETE FROM supervision_sources WHERE id = ?", S1)

    report, notes = import_goodbuddy(db, app)

    assert report.written.get("source_version") == 1
    assert (
        "saved fragments stored before whose [start, end) does not hold their text in the version this import stored"
        " (kept; read as unknown): 1"
    ) in notes
    with sqlite3.connect(db) as conn:
        stored = conn.execute(
            "SELECT source_version, fragment_start, fragment_end FROM source_references WHERE id = ?", (S1,)
        ).fetchone()
    assert stored == (later, 0, 36)
    async with client(db) as session:
        snapshot = await ok(session, READ, {"source_reference_id": S1})
    assert (snapshot["saved_fragment"]["start"], snapshot["saved_fragment"]["end"]) == ("unknown", "unknown")


async def test_a_fragment_of_a_message_holding_nul_keeps_its_range(tmp_path: Path, app: Path) -> None:
    """The app saved [0, 36) of a message holding U+0000, as the message still reads: the message text is stored with
    U+FFFD in its place, and so is the fragment's, so the stored text still holds the fragment at its range."""
    text = TEXT[M_A][:10] + "\x00" + TEXT[M_A][11:]
    write(app, "UPDATE messages SET content = ? WHERE id = ?", text, M_A)
    with sqlite3.connect(app) as conn:
        (context,) = conn.execute(
            "SELECT context FROM supervision_review_current WHERE record_id = ? AND type = 'conversation'", (M_A,)
        ).fetchone()
    revision = hashlib.sha256(str(context).encode()).hexdigest()  # the app's revision of the edited message
    write(
        app,
        "UPDATE supervision_sources SET content = ?, locator_json = json_set(locator_json, '$.revision', ?)"
        " WHERE id = ?",
        text[:36],
        revision,
        S1,
    )
    db = tmp_path / "fresh.db"
    migrate(db)

    _, notes = import_goodbuddy(db, app)

    async with client(db) as session:
        snapshot = await ok(session, READ, {"source_reference_id": S1})
    assert snapshot["content"] == text[:10] + "\ufffd" + text[11:36]
    assert snapshot["saved_fragment"] == {"start": 0, "end": 36, "length": 36}
    assert "saved fragment texts holding U+0000 (stored with U+FFFD in its place; positions unchanged): 1" in notes


def _locator(app: Path, source_id: str, **changes: Any) -> str:
    """The saved fragment's locator JSON with `changes` made to it (a damaged or hand-edited app database)."""
    conn = sqlite3.connect(app)
    try:
        (text,) = conn.execute("SELECT locator_json FROM supervision_sources WHERE id = ?", (source_id,)).fetchone()
    finally:
        conn.close()
    return orjson.dumps(orjson.loads(text) | changes).decode()


# A damaged row: (the app's write (SQL, parameters) given the database; the row the error names; its field; the problem)
DAMAGED_ROWS: dict[str, tuple[Any, str, str, str]] = {
    "a fragment length beyond 64 bits": (
        lambda app: (
            "UPDATE supervision_sources SET locator_json = ? WHERE id = ?",
            (_locator(app, S1, length=2**64 - 1), S1),
        ),
        f"table supervision_sources row id={S1}",
        "source_length",
        "less than or equal to 9223372036854775807",
    ),
    "a locator nested too deep": (
        lambda app: (
            "UPDATE supervision_sources SET locator_json = ? WHERE id = ?",
            (_locator(app, S1, deep="@deep").replace('"@deep"', nested_json(300)), S1),
        ),
        f"table supervision_sources row id={S1}",
        "locator.external",
        "nested more than 100 levels deep",
    ),
    "open items that are not a list": (
        lambda app: ("UPDATE supervision_results SET open_items_json = '5' WHERE id = ?", (RES1,)),
        f"table supervision_results row id={RES1}",
        "open_items_json",
        "expected a JSON array",
    ),
    "a processed offset that is not a whole number": (
        lambda app: (
            "UPDATE supervision_review_sources SET processed_offset = 'all' WHERE source = ?",
            (f"task:{TASK}",),
        ),
        f"table supervision_review_sources row run_id={RUN2}, source=task:{TASK}",
        "processed_offset",
        "expected a whole number",
    ),
}


@pytest.mark.parametrize("case", list(DAMAGED_ROWS), ids=list(DAMAGED_ROWS))
def test_a_damaged_row_aborts_the_import_with_one_error_naming_it(case: str, app: Path, graph: Path) -> None:
    change, location, field, problem = DAMAGED_ROWS[case]
    sql, params = change(app)
    write(app, sql, *params)
    before = dump(graph)

    with pytest.raises(ImportRejected) as caught:
        import_goodbuddy(graph, app)

    assert (caught.value.location, caught.value.field) == (location, field)
    assert problem in caught.value.problem
    assert dump(graph) == before


def test_a_review_time_range_that_ends_before_it_starts_is_imported_as_unknown(tmp_path: Path, app: Path) -> None:
    reversed_range = '{"from": "2026-03-03T00:00:00.000Z", "to": "2026-03-01T00:00:00.000Z"}'
    write(app, "UPDATE supervision_runs SET time_range_json = ? WHERE id = ?", reversed_range, RUN1)
    db = tmp_path / "fresh.db"
    migrate(db)

    _, notes = import_goodbuddy(db, app)

    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT interval_from, interval_to FROM summaries WHERE id = ?", (RES1,)).fetchall() == [
            (None, None)
        ]
    assert "review time ranges that end before they start (stored as unknown): 1" in notes


async def test_a_message_holding_nul_is_imported_with_a_replacement_character_in_its_place(
    tmp_path: Path, app: Path
) -> None:
    """Our store cannot keep U+0000 in a source text (the interchange refuses it): one such chat message must not stop
    the whole sync. It is stored with U+FFFD in its place, so every position stays, and the notes say so."""
    text = TEXT[M_A][:10] + "\x00" + TEXT[M_A][11:]
    write(app, "UPDATE messages SET content = ? WHERE id = ?", text, M_A)
    db = tmp_path / "fresh.db"
    migrate(db)

    _, notes = import_goodbuddy(db, app)
    import_goodbuddy(db, app)  # a re-import (sync) finds it unchanged: one version per source still

    async with client(db) as session:
        current = await ok(session, READ, {"source_reference_id": S1, "content_kind": "current", "page_size": 65})
    assert current["content"].startswith(TEXT[M_A][:10] + "\ufffd" + TEXT[M_A][11:20])
    assert current["original_source_length"] == len(text)
    assert "source texts holding U+0000 (stored with U+FFFD in its place; positions unchanged): 1" in notes
    with sqlite3.connect(db) as conn:
        assert (
            conn.execute("SELECT count(*) FROM source_versions WHERE source_id LIKE 'message:%'").fetchone()[0]
            == (
                conn.execute(
                    "SELECT count(DISTINCT source_id) FROM source_versions WHERE source_id LIKE 'message:%'"
                ).fetchone()[0]
            )
        )


def test_a_source_key_whose_index_is_not_ascii_digits_names_no_live_record(tmp_path: Path, app: Path) -> None:
    key = f"knowledge:{M_A}:²"  # str.isdigit() holds for '²', int() refuses it
    write(app, "UPDATE supervision_sources SET locator_json = ? WHERE id = ?", _locator(app, S1, source=key), S1)
    db = tmp_path / "fresh.db"
    migrate(db)

    import_goodbuddy(db, app)

    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM sources WHERE id = ?", (key,)).fetchall() == [("deleted",)]


def test_the_cli_prints_the_report_and_what_was_left_out(tmp_path: Path, app: Path) -> None:
    db = tmp_path / "graph.db"
    migrate(db)

    run = subprocess.run(
        [sys.executable, "-m", "server", "db", "import", "--db", str(db), "--from", "goodbuddy", str(app)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("imported ") and lines[0].endswith("; 0 unchanged")
    assert "note: stories the app no longer shows (merged or removed by the user; not imported): 1" in lines
    assert "note: sources deleted in the app (their saved fragments stay readable as snapshots): 1" in lines


def test_items_name_the_table_and_row_they_came_from(app: Path) -> None:
    places = {
        (line.kind, getattr(line, "id", None)): where
        for where, line in GoodBuddySource(app)
        if not isinstance(line, Retired)
    }

    assert places[("event", EV_B)] == f"table supervision_events row id={EV_B}"
    assert places[("source_reference", S1)] == f"table supervision_sources row id={S1}"
    assert str(places[("entity_revision", None)]).startswith("table supervision_results row id=")
    assert places[("story", STORY_F)] == f"table supervision_stories row id={STORY_F}"


def test_a_dry_run_sync_says_what_would_change_and_writes_nothing(app: Path, graph: Path) -> None:
    write(app, "UPDATE supervision_entities SET confirmation_state = 'revoked' WHERE id = ?", ENT_C)
    write(app, "UPDATE supervision_events SET superseded_by = ? WHERE id = ?", RES3, EV_A)
    before, hash_before = dump(graph), file_hash(graph)

    dry, _ = import_goodbuddy(graph, app, dry_run=True)

    # The feature story's span would start later without decision A.
    assert (dry.updated, dry.retired, dry.dry_run) == ({"entity": 1, "story": 1}, 1, True)
    assert str(dry).endswith("; 2 would be updated (1 entity, 1 story); 1 would be retired; nothing was written")
    assert (dump(graph), file_hash(graph)) == (before, hash_before)


def test_the_cli_shows_the_same_progress_as_a_jsonl_import(tmp_path: Path, app: Path) -> None:
    db = tmp_path / "graph.db"
    migrate(db)

    command = [sys.executable, "-m", "server", "db", "import", "--db", str(db), "--from", "goodbuddy", str(app)]
    run = subprocess.run(
        [*command, "--progress-every", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert run.returncode == 0, run.stderr
    phases = [line.split(":")[1].strip() for line in run.stderr.splitlines() if line.endswith(" s elapsed")]
    assert {"reading", "writing", "indexing"} <= set(phases) <= {"reading", "writing", "indexing", "writing the index"}
    assert run.stderr.splitlines()[-1].startswith(("import: indexing: ", "import: writing the index: done, "))


@pytest.mark.parametrize(
    ("changes", "stored", "note"),
    [
        (
            {"end": 30},  # the saved text is 36 code points long
            (None, None, len(TEXT[M_A])),
            "saved fragments whose [start, end) does not span their text (position stored as unknown): 1",
        ),
        (
            {"start": 20, "end": 10},  # ends before it starts: this used to stop the whole sync
            (None, None, len(TEXT[M_A])),
            "saved fragments whose [start, end) does not span their text (position stored as unknown): 1",
        ),
        (
            {"length": 20},  # shorter than the fragment's end, 36
            (None, None, None),
            "saved fragments reaching past their source's recorded length (position and length stored as unknown): 1",
        ),
    ],
)
async def test_a_saved_fragment_contradicting_its_own_offsets_is_kept_with_them_unknown(
    tmp_path: Path, app: Path, changes: dict[str, Any], stored: tuple[Any, ...], note: str
) -> None:
    """One damaged locator must not stop the whole sync, nor be shown as an exact range: its text is kept, the
    offsets it contradicts are stored unknown, and the notes count it."""
    write(app, "UPDATE supervision_sources SET locator_json = ? WHERE id = ?", _locator(app, S1, **changes), S1)
    db = tmp_path / "fresh.db"
    migrate(db)

    _, notes = import_goodbuddy(db, app)

    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT fragment, fragment_start, fragment_end, source_length FROM source_references WHERE id = ?", (S1,)
        ).fetchone()
    assert row == (TEXT[M_A][:36], *stored)
    assert note in notes
    async with client(db) as session:
        snapshot = await ok(session, READ, {"source_reference_id": S1})
        current = await ok(session, READ, {"source_reference_id": S1, "content_kind": "current"})
    assert snapshot["content"] == TEXT[M_A][:36]
    assert snapshot["saved_fragment"] == {"start": "unknown", "end": "unknown", "length": 36}
    assert snapshot["position"]["source_start"] == snapshot["position"]["source_end"] == "unknown"
    assert current["fragment_matches_current"] == "unknown"


async def test_a_task_fragment_is_found_and_read_by_the_apps_task_id(graph: Path) -> None:
    # The app's task locator names its task only in the source key (`task:<id>`); the id an agent sees in the
    # app is the bare one.
    async with client(graph) as session:
        found = await ok(session, SEARCH, {"query": TASK})
        read = await ok(session, READ, {"source_reference_id": S4})
        refused = await error(session, READ, {"source_reference_id": TASK})

    assert (found["items"][0]["object_ref"], found["items"][0]["match_kind"]) == (
        {"type": "source_reference", "id": S4},
        "identifier",
    )
    assert read["source_location"]["task_id"] == TASK
    assert read["source_location"]["message_id"] == "missing"
    assert S4 in refused["next_step"]
