from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support import client_for, error, ok

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
        for number, file in migration_files():
            if number <= 8:
                conn.executescript(file.read_text(encoding="utf-8"))
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
        for number, file in migration_files():
            if number <= 14:
                conn.executescript(file.read_text(encoding="utf-8"))
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
        assert conn.execute("SELECT memory_revision FROM scopes").fetchall() == [(2,)]
        assert conn.execute("SELECT memory_revision FROM graph_state").fetchall() == [(2,)]
