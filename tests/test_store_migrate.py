from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from types import FrameType

import pytest
from support import client_for, error, migrate_to, ok

from server.cli import main
from server.contracts.common import Grant
from server.store import migrate as migrate_module
from server.store.errors import DatabaseUnusable
from server.store.importer import import_file
from server.store.migrate import SCHEMA_VERSION, migrate, migration_files, migrations_dir, open_store

SEARCHABLE_V1_ROWS = """
INSERT INTO projects (id, name) VALUES ('alpha', 'Alpha');
INSERT INTO scopes (scope_key, kind) VALUES ('projects:["alpha"]', 'projects');
INSERT INTO scope_projects (scope_key, project_id) VALUES ('projects:["alpha"]', 'alpha');
INSERT INTO results (id, scope_key, review_generated_at, recorded_at)
  VALUES ('r-1', 'projects:["alpha"]', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
INSERT INTO story_lines (id, scope_key, topic, recorded_at)
  VALUES ('sl-1', 'projects:["alpha"]', 'Backup strategy', '2026-01-01T00:00:00.000Z');
INSERT INTO events (id, result_id, scope_key, event_type, title, description, recorded_at)
  VALUES ('ev-1', 'r-1', 'projects:["alpha"]', 'decision', 'Nightly snapshots', '每晚备份', '2026-01-01T00:00:00.000Z');
"""


# Tables of a version-2 database whose rows an upgrade must keep as they are.
V2_TABLES = ("projects", "scope_projects", "results", "story_lines", "events")  # search_docs is replaced


def _version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def test_the_schema_version_is_the_highest_migration_file() -> None:
    files = migration_files()

    assert migrations_dir().is_dir()
    assert [number for number, _ in files] == list(range(1, SCHEMA_VERSION + 1))
    assert files[-1][1].name.startswith(f"{SCHEMA_VERSION:04d}_")


def test_migrating_a_new_file_creates_it_at_the_current_version_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "new.db"

    assert migrate(path) == (0, SCHEMA_VERSION)
    assert _version(path) == SCHEMA_VERSION
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_migrating_an_up_to_date_database_changes_nothing(migrated_db: Path) -> None:
    before = migrated_db.read_bytes()

    assert migrate(migrated_db) == (SCHEMA_VERSION, SCHEMA_VERSION)
    assert migrated_db.read_bytes() == before


def test_upgrading_a_version_1_database_keeps_its_data_and_backfills_the_search_index(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as conn:
        conn.executescript((migrations_dir() / "0001_story_graph.sql").read_text(encoding="utf-8"))
        conn.executescript(SEARCHABLE_V1_ROWS)
    assert _version(path) == 1

    assert migrate(path) == (1, SCHEMA_VERSION)

    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT title FROM events").fetchall() == [("Nightly snapshots",)]
        items = conn.execute(
            "SELECT object_type, object_id, hi_fields, lo_fields FROM search_items ORDER BY item_id"
        ).fetchall()
        hits = conn.execute("SELECT rowid FROM search_fts WHERE search_fts MATCH '\"每晚备\"'").fetchall()
        item = conn.execute("SELECT object_id FROM search_items WHERE item_id = ?", hits[0]).fetchone()
        grams = conn.execute("SELECT rowid FROM search_fts WHERE search_fts MATCH ?", ['"备\x02\x02"']).fetchall()
        conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")
    assert sorted(items) == [
        ("event", "ev-1", "title\x01\x01", "description\x01\x01event_type\x01\x01"),
        ("story_line", "sl-1", "topic\x01\x01", ""),
    ]
    assert item == ("ev-1",) and grams == hits


def test_upgrading_a_version_2_database_in_place_keeps_its_data_and_takes_stories(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    with sqlite3.connect(path) as conn:
        for name in ("0001_story_graph.sql", "0002_search_index_and_revisions.sql"):
            conn.executescript((migrations_dir() / name).read_text(encoding="utf-8"))
        conn.executescript(SEARCHABLE_V1_ROWS)
        before = {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall() for table in V2_TABLES}
    assert _version(path) == 2
    stories = tmp_path / "stories.jsonl"
    stories.write_text(
        '{"kind": "story", "id": "st-1", "level": "feature", "scope": {"kind": "projects", "projectIds": ["alpha"]},'
        ' "name": "Backups", "recorded_at": "2026-01-02T00:00:00Z"}\n'
        '{"kind": "story_event", "story_id": "st-1", "event_id": "ev-1", "primary": true}\n'
        '{"kind": "experience", "id": "ex-1", "scope": {"kind": "projects", "projectIds": ["alpha"]},'
        ' "statement": "Snapshot nightly", "recorded_at": "2026-01-02T00:00:00Z"}\n'
        '{"kind": "experience_event", "experience_id": "ex-1", "event_id": "ev-1", "role": "formed"}\n',
        encoding="utf-8",
    )

    assert migrate(path) == (2, SCHEMA_VERSION)
    report = import_file(path, stories)

    with sqlite3.connect(path) as conn:
        after = {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall() for table in V2_TABLES}
        links = conn.execute("SELECT story_id, event_id, scope_key, is_primary FROM story_events").fetchall()
        searchable = conn.execute("SELECT object_type, object_id FROM search_items ORDER BY item_id DESC").fetchall()
    assert after == before
    assert searchable[:2] == [("story", "st-1"), ("experience", "ex-1")]  # stories and experiences rank first
    assert report.written == {"story": 1, "story_event": 1, "experience": 1, "experience_event": 1}
    assert links == [("st-1", "ev-1", 'projects:["alpha"]', 1)]


def test_a_database_newer_than_this_build_is_refused_naming_both_versions(migrated_db: Path) -> None:
    with sqlite3.connect(migrated_db) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")

    with pytest.raises(DatabaseUnusable) as caught:
        migrate(migrated_db)
    message = str(caught.value)
    assert f"schema version {SCHEMA_VERSION + 1}" in message
    assert f"supports ({SCHEMA_VERSION})" in message
    with pytest.raises(DatabaseUnusable, match=f"schema version {SCHEMA_VERSION + 1}"):
        open_store(migrated_db, write=False)


def test_an_older_database_is_refused_for_import_with_the_command_that_fixes_it(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as conn:
        conn.executescript((migrations_dir() / "0001_story_graph.sql").read_text(encoding="utf-8"))
    graph = tmp_path / "empty.jsonl"
    graph.write_text("")

    with pytest.raises(DatabaseUnusable) as caught:
        import_file(path, graph)
    assert str(caught.value) == (
        f"{path} has schema version 1, older than the version {SCHEMA_VERSION} this build uses;"
        f" run `story-graph-mcp db migrate --db {path}`"
    )


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 20)

    with pytest.raises(DatabaseUnusable, match=r"notes.db is not a SQLite database \(file is not a database\)$"):
        migrate(path)
    with pytest.raises(DatabaseUnusable, match="is not a SQLite database"):
        open_store(path, write=True)
    assert path.read_text() == "these are my notes, not a database\n" * 20


def test_another_applications_database_is_not_migrated(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")

    with pytest.raises(DatabaseUnusable, match="holds tables but no schema version"):
        migrate(path)
    assert _version(path) == 0


def test_a_database_in_a_missing_folder_is_one_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "no" / "such"
    with pytest.raises(DatabaseUnusable, match=f"the directory {folder} does not exist; create it first"):
        migrate(folder / "folder.db")


@pytest.mark.anyio
async def test_upgrading_a_version_8_database_puts_its_times_in_the_index(tmp_path: Path) -> None:
    """Migration 0009 rebuilds the text index with the items' month tokens: after the upgrade a time-filtered
    search finds exactly the event of the month asked for, and a raw SQL write moves it to another month."""
    path = tmp_path / "v8.db"
    with sqlite3.connect(path) as conn:
        migrate_to(conn, 8)
        conn.executescript(SEARCHABLE_V1_ROWS)
        conn.execute("UPDATE events SET event_time_start = '2026-03-05T10:00:00.000Z', event_time_end = NULL")
    assert _version(path) == 8

    assert migrate(path) == (8, SCHEMA_VERSION)

    def month(start: str, end: str) -> dict[str, object]:
        return {
            "query": "snapshots",
            "scope": {"kind": "projects", "projectIds": ["alpha"]},
            "time_range": {"from": start, "to": end},
        }

    march, april = (
        month("2026-03-01T00:00:00Z", "2026-03-31T23:59:59Z"),
        month("2026-04-01T00:00:00Z", "2026-04-30T23:59:59Z"),
    )
    async with client_for(path) as client:
        assert [i["object_ref"]["id"] for i in (await ok(client, "story_graph_search", march))["items"]] == ["ev-1"]
        assert (await ok(client, "story_graph_search", april))["items"] == []
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET event_time_start = '2026-04-02T10:00:00.000Z' WHERE id = 'ev-1'")
        conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")
    async with client_for(path) as client:
        assert (await ok(client, "story_graph_search", march))["items"] == []
        assert [i["object_ref"]["id"] for i in (await ok(client, "story_graph_search", april))["items"]] == ["ev-1"]


@pytest.mark.anyio
async def test_upgrading_a_version_14_database_moves_memory_writes_to_their_own_revision(tmp_path: Path) -> None:
    """Migration 0015: on a database upgraded in place, a memory item written with raw SQL bumps the scopes' memory
    revisions and leaves their data revisions alone, so a search cursor reads on while a get_context `current`
    cursor (its background shows memory items) is refused as stale."""
    path = tmp_path / "v14.db"
    with sqlite3.connect(path) as conn:
        migrate_to(conn, 14)
        conn.executescript(SEARCHABLE_V1_ROWS)
        conn.executemany(
            "INSERT INTO events (id, result_id, scope_key, event_type, title, recorded_at)"
            " VALUES (?, 'r-1', 'projects:[\"alpha\"]', 'decision', ?, '2026-01-01T00:00:00.000Z')",
            [(f"ev-{n}", f"Weekly snapshots {n}") for n in range(2, 6)],
        )
        conn.execute(
            "INSERT INTO memory_items (id, project_id, body, updated_at)"
            " VALUES ('m-1', 'alpha', 'Prefers SQLite', '2026-01-01T00:00:00.000Z')"
        )
        data_before = conn.execute("SELECT scope_key, data_revision FROM scopes").fetchall()
    assert _version(path) == 14

    assert migrate(path) == (14, SCHEMA_VERSION)

    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT scope_key, data_revision FROM scopes").fetchall() == data_before
        assert conn.execute("SELECT memory_revision FROM scopes").fetchall() == [(0,)]
    search = {"query": "snapshots", "scope": {"kind": "projects", "projectIds": ["alpha"]}, "page_size": 1}
    context = {"object_ref": {"type": "event", "id": "ev-1"}, "scope": search["scope"], "page_size": 1}
    async with client_for(path) as client:
        first, opened = (
            await ok(client, "story_graph_search", search),
            await ok(client, "story_graph_get_context", context),
        )
        assert opened["page"]["next_cursor"] and opened["page"]["total_count"] == 2  # the event and m-1
        with sqlite3.connect(path) as conn:
            conn.execute(
                "INSERT INTO memory_items (id, body, updated_at) VALUES ('m-2', 'Global', '2026-01-02T00:00:00.000Z')"
            )
            conn.execute("UPDATE memory_items SET body = 'Prefers Postgres' WHERE id = 'm-1'")
        second = await ok(client, "story_graph_search", search | {"cursor": first["page"]["next_cursor"]})
        refused = await error(client, "story_graph_get_context", context | {"cursor": opened["page"]["next_cursor"]})
    assert second["data_revision"] == first["data_revision"] and second["items"]
    assert refused["error"] == "stale_cursor"
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT scope_key, data_revision FROM scopes").fetchall() == data_before
        # alpha's item only: a Global item counts in the Global memory revision (migrations/0016).
        assert conn.execute("SELECT memory_revision FROM scopes").fetchall() == [(1,)]
        assert conn.execute("SELECT memory_revision, global_memory_revision FROM graph_state").fetchall() == [(2, 1)]


@pytest.mark.anyio
async def test_upgrading_a_version_15_database_keeps_global_memory_writes_out_of_the_project_scopes(
    tmp_path: Path,
) -> None:
    """Migration 0016: on a database upgraded in place, the memory revisions written so far are kept, and a Global
    memory item written with raw SQL bumps the Global scope's and the graph's Global memory revision, never a
    project scope's: a get_context `current` cursor of a grant kept out of Global reads on after it, and is refused
    as stale after a write to its own project's item."""
    path = tmp_path / "v15.db"
    with sqlite3.connect(path) as conn:
        migrate_to(conn, 15)
        conn.executescript(SEARCHABLE_V1_ROWS)
        conn.execute("INSERT INTO scopes (scope_key, kind) VALUES ('global', 'global')")
        conn.execute(
            "INSERT INTO memory_items (id, project_id, body, updated_at)"
            " VALUES ('m-1', 'alpha', 'Prefers SQLite', '2026-01-01T00:00:00.000Z')"
        )
        conn.execute(
            "INSERT INTO memory_items (id, body, updated_at) VALUES ('m-2', 'Be brief', '2026-01-01T00:00:00.000Z')"
        )
        # Version 15 bumped every scope for a Global item.
        revisions_before = conn.execute("SELECT scope_key, data_revision, memory_revision FROM scopes").fetchall()
        assert {key: memory for key, _, memory in revisions_before} == {'projects:["alpha"]': 2, "global": 1}
    assert migrate(path) == (15, SCHEMA_VERSION)

    def stored() -> tuple[list[tuple[str, int, int]], tuple[int, int]]:
        with sqlite3.connect(path) as conn:
            scopes = conn.execute("SELECT scope_key, data_revision, memory_revision FROM scopes").fetchall()
            graph = conn.execute("SELECT memory_revision, global_memory_revision FROM graph_state").fetchone()
        return scopes, graph

    def write(sql: str) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(sql)

    assert stored() == (revisions_before, (2, 0))
    alpha = {"kind": "projects", "projectIds": ["alpha"]}
    context = {"object_ref": {"type": "event", "id": "ev-1"}, "scope": alpha, "page_size": 1}
    kept_out = Grant(default_project="alpha", projects=["alpha"], allow_global=False)
    async with client_for(path, kept_out) as client:
        first = await ok(client, "story_graph_get_context", context)
        write("UPDATE memory_items SET body = 'Be very brief' WHERE id = 'm-2'")
        second = await ok(client, "story_graph_get_context", context | {"cursor": first["page"]["next_cursor"]})
        write("UPDATE memory_items SET body = 'Prefers Postgres' WHERE id = 'm-1'")
        refused = await error(client, "story_graph_get_context", context | {"cursor": first["page"]["next_cursor"]})
    assert first["page"]["total_count"] == 2 and [m["memory_id"] for m in second["background"]] == ["m-1"]
    assert first["memory_revision"] == second["memory_revision"] == "2"
    assert refused["error"] == "stale_cursor"
    scopes, graph = stored()
    assert {key: memory for key, _, memory in scopes} == {'projects:["alpha"]': 3, "global": 2}
    assert graph == (4, 1)


def _version_in_header(path: Path) -> int:
    """`PRAGMA user_version` as the file holds it, read without a lock (a DELETE-mode database: commits go there)."""
    with path.open("rb") as file:
        file.seek(60)
        return int.from_bytes(file.read(4), "big")


def _with_ctrl_c_before(argv: list[str], number: int = 3) -> int:
    """`main(argv)`, with a Ctrl-C as it comes, a KeyboardInterrupt at a Python instruction: as migration `number`
    (0003) is to run."""

    def ctrl_c(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and frame.f_code is migrate_module._apply.__code__ and frame.f_locals["number"] == number:
            raise KeyboardInterrupt

    sys.settrace(ctrl_c)
    try:
        return main(argv)
    finally:
        sys.settrace(None)


def test_ctrl_c_during_a_migration_says_what_was_kept_and_that_migrate_continues(tmp_path: Path) -> None:
    """Ctrl-C printed only `interrupted`, and only once the running migration's whole script had run (Python
    handles a signal between its own instructions): 8 s here for 0003 on 30,000 events, then rolled back."""
    path = tmp_path / "v1.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executescript((migrations_dir() / "0001_story_graph.sql").read_text(encoding="utf-8"))
        conn.executescript(SEARCHABLE_V1_ROWS)
        conn.execute(
            "INSERT INTO events (id, result_id, scope_key, event_type, title, description, recorded_at)"
            " WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30000)"
            " SELECT 'ev-x' || i, 'r-1', 'projects:[\"alpha\"]', 'decision', 'Snapshot ' || i, '每晚备份 ' || i,"
            " '2026-01-01T00:00:00.000Z' FROM n"
        )
    command = [sys.executable, "-m", "server", "db", "migrate", "--db", str(path)]
    with subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as migrating:
        deadline = time.monotonic() + 60
        while _version_in_header(path) < 2 and migrating.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        migrating.send_signal(signal.SIGINT)  # 0002 committed: 0003, which rewrites the search index, is running
        sent = time.monotonic()
        out, err = migrating.communicate(timeout=60)
    waited = time.monotonic() - sent
    assert migrating.returncode == 130, err
    assert out == ""
    assert err == (
        f"story-graph-mcp: interrupted; {path} is at schema version 2: 0002_search_index_and_revisions.sql was"
        " applied and kept; 0003_search_items.sql, the one running, was not applied (each applies completely or not"
        f" at all); run `story-graph-mcp db migrate --db {path}` again to continue from there (to version"
        f" {SCHEMA_VERSION})\n"
    )
    assert waited < 3, waited  # stopped at once, not when 0003's script had run to its end
    assert _version(path) == 2

    assert migrate(path) == (2, SCHEMA_VERSION)
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (30_001,)


def test_a_new_database_whose_migration_was_interrupted_is_in_wal_mode_once_continued(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new database got WAL mode after its last migration: interrupted before that and continued (no longer
    new), it stayed in DELETE mode, where an import locks the server's reads out. The interrupt comes as Ctrl-C
    does, as a KeyboardInterrupt at a Python instruction: here, as 0003 is about to run."""
    path = tmp_path / "new.db"

    status = _with_ctrl_c_before(["db", "migrate", "--db", str(path)])
    said = capsys.readouterr().err

    assert main(["db", "migrate", "--db", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: schema version 2 -> {SCHEMA_VERSION}\n"
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert status == 130
    assert said.startswith(
        f"story-graph-mcp: interrupted; {path} is at schema version 2: 0001_story_graph.sql and"
        " 0002_search_index_and_revisions.sql were applied and kept; 0003_search_items.sql, the one running, was not"
    )


def test_ctrl_c_before_a_new_databases_first_migration_says_it_was_created_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file exists from then on (empty, in WAL mode): `nothing was changed` would not be true."""
    path = tmp_path / "new.db"
    assert _with_ctrl_c_before(["db", "migrate", "--db", str(path)], number=1) == 130
    assert capsys.readouterr().err == (
        f"story-graph-mcp: interrupted; {path} was created, with no schema yet (version 0); 0001_story_graph.sql,"
        " the one running, was not applied (each applies completely or not at all); run `story-graph-mcp db migrate"
        f" --db {path}` again to continue from there (to version {SCHEMA_VERSION})\n"
    )
    assert main(["db", "migrate", "--db", str(path)]) == 0
    assert _version(path) == SCHEMA_VERSION


def test_ctrl_c_while_the_demo_is_written_removes_it_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`demo` removes its half-built file: what `migrate` says on Ctrl-C (run it again to continue) is not true."""
    path = tmp_path / "demo.db"

    status = _with_ctrl_c_before(["demo", str(path)])
    assert (status, capsys.readouterr().err) == (
        130,
        f"story-graph-mcp: interrupted; {path} was not written (its half-built file was removed)\n",
    )
    assert list(tmp_path.iterdir()) == []


def test_a_demo_written_through_a_symlink_and_interrupted_removes_the_file_not_the_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`demo link.db`, link.db naming a file still to be written: Ctrl-C removed the link and left the half-built
    file it names, with its -wal and -shm files."""
    link, built = tmp_path / "link.db", tmp_path / "data" / "demo.db"
    built.parent.mkdir()
    link.symlink_to(built)

    assert _with_ctrl_c_before(["demo", str(link)]) == 130
    assert list(built.parent.iterdir()) == []
    assert link.is_symlink() and Path(os.readlink(link)) == built
    assert capsys.readouterr().err.endswith("was not written (its half-built file was removed)\n")


def test_a_migration_that_waits_too_long_for_the_write_lock_says_who_holds_it(tmp_path: Path) -> None:
    """It said only `database is locked`."""
    path = tmp_path / "v1.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executescript((migrations_dir() / "0001_story_graph.sql").read_text(encoding="utf-8"))
    writer = sqlite3.connect(path, isolation_level=None)  # an import, or the application that owns the data
    try:
        writer.execute("BEGIN IMMEDIATE")
        with pytest.raises(DatabaseUnusable) as refused:
            migrate(path)
    finally:
        writer.close()
    assert str(refused.value) == (
        f"migration 0002_search_index_and_revisions.sql failed on {path}, which was left at schema version 1: another"
        f" process (an import, or the application that writes it) held {path} locked for longer than 5 seconds; run"
        f" `story-graph-mcp db migrate --db {path}` again when it has finished"
    )
    assert _version(path) == 1


@pytest.mark.anyio
async def test_upgrading_a_version_16_database_dates_a_leaf_item_in_place(tmp_path: Path) -> None:
    """Migration 0017: a leaf under r-2 describing ev-1, stored under r-1 only, was an item of its own with no event
    time (a time_range around ev-1 left it out, counting it as unknown). Upgraded in place, the item keeps its id and
    takes ev-1's time, and the scope's data revision moves (a search reads differently)."""
    path = tmp_path / "v16.db"
    march = "2026-03-05T10:00:00.000Z"
    with sqlite3.connect(path) as conn:
        migrate_to(conn, 16)
        conn.executescript(SEARCHABLE_V1_ROWS)
        conn.executescript(f"""
        UPDATE events SET event_time_start = '{march}' WHERE id = 'ev-1';
        INSERT INTO results (id, scope_key, review_generated_at, recorded_at)
          VALUES ('r-2', 'projects:["alpha"]', '2026-04-01T00:00:00.000Z', '2026-04-01T00:00:00.000Z');
        INSERT INTO leaves (id, result_id, scope_key, recorded_at)
          VALUES ('leaf-2', 'r-2', 'projects:["alpha"]', '2026-04-01T00:00:00.000Z');
        INSERT INTO fact_links (owner_type, owner_id, object_type, object_id, scope_key, description)
          VALUES ('leaf', 'leaf-2', 'event', 'ev-1', 'projects:["alpha"]', 'zephyr snapshots');
        """)
        item = "SELECT item_id, event_time_start FROM search_items WHERE object_id = 'ev-1' AND result_key = 'r-2'"
        (item_id, undated), *_ = conn.execute(item).fetchall()
        (revision,) = conn.execute("SELECT data_revision FROM scopes").fetchone()
    assert undated is None

    assert migrate(path) == (16, SCHEMA_VERSION)

    with sqlite3.connect(path) as conn:
        assert conn.execute(item).fetchall() == [(item_id, march)]
        assert conn.execute("SELECT data_revision FROM scopes").fetchone()[0] > revision
        conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")
    args = {"query": "zephyr", "scope": {"kind": "projects", "projectIds": ["alpha"]}}
    in_march = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-31T23:59:59Z"}
    in_april = {"from": "2026-04-01T00:00:00Z", "to": "2026-04-30T23:59:59Z"}
    async with client_for(path) as client:
        found = await ok(client, "story_graph_search", args | {"time_range": in_march})
        elsewhere = await ok(client, "story_graph_search", args | {"time_range": in_april})
    shown = [(i["object_ref"]["id"], i["result_id"], i["event_time"]) for i in found["items"]]
    assert shown == [("ev-1", "r-2", march)]
    assert found["unknown_time_excluded_count"] == elsewhere["unknown_time_excluded_count"] == 0
    assert elsewhere["items"] == []


def test_a_database_written_before_migrations_0003_and_0005_changed_is_refused_unchanged(tmp_path: Path) -> None:
    """Builds of 2026-11-30 before commit 368aab8 applied an earlier 0003/0005, without the search index's apply
    trigger that 0009 replaces: upgrading such a version-5 database failed at 0009 and left it at version 8, too new
    for the build that wrote it (checked with that build's database). It is refused before anything is applied,
    naming the way out (export with the old build, import into a new database)."""
    path = tmp_path / "v5.db"
    with sqlite3.connect(path) as conn:
        migrate_to(conn, 5)
        conn.executescript(SEARCHABLE_V1_ROWS)
        conn.execute("DROP TRIGGER search_apply_now")  # as the earlier 0003 left it
    before = path.read_bytes()

    with pytest.raises(DatabaseUnusable) as caught:
        migrate(path)

    assert _version(path) == 5 and path.read_bytes() == before
    assert "before 2026-11-30" in str(caught.value)
    assert f"story-graph-mcp db export --db {path} graph.jsonl" in str(caught.value)
