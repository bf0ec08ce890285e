"""The importer's sync mode (server/store/sync.py) on its own: updates in place, write-once record times,
refreshed search index and evidence links, retired events, and what stays an error."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from jsonl_graph import ALPHA_KEY, Line, by_id, dump, revisions, small_graph, story_graph

from server.store.errors import ImportRejected
from server.store.importer import ImportItem, ImportReport, import_items
from server.store.jsonl import validate_line
from server.store.sync import Retired, SyncPolicy

SYNC = SyncPolicy()


def items(lines: list[Line]) -> list[ImportItem]:
    return [(f"row {index}", validate_line(f"row {index}", line)) for index, line in enumerate(lines, start=1)]


def sync(db: Path, lines: list[Line], extra: list[ImportItem] | None = None) -> ImportReport:
    return import_items(db, [*items(lines), *(extra or [])], SYNC)


def rows(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def changed(line_id: str, **changes: Any) -> list[Line]:
    return [({**line, **changes} if line.get("id") == line_id else line) for line in small_graph()]


def test_a_changed_event_is_updated_in_place_with_its_links_and_search_rows(migrated_db: Path) -> None:
    sync(migrated_db, small_graph())
    alpha_before = revisions(migrated_db)[ALPHA_KEY]

    report = sync(
        migrated_db,
        changed("ev-1", title="Chose Postgres after all", source_reference_ids=[], recorded_at="2027-01-01T00:00:00Z"),
    )

    assert report.updated == {"event": 1} and report.total == 0
    # recorded_at is write-once: the first import's value (T1 in UTC) stays.
    assert rows(migrated_db, "SELECT title, recorded_at FROM events WHERE id = 'ev-1'") == [
        ("Chose Postgres after all", "2026-03-02T10:30:00.000Z")
    ]
    assert rows(migrated_db, "SELECT 1 FROM object_sources WHERE object_type = 'event' AND object_id = 'ev-1'") == []
    titles = rows(migrated_db, "SELECT hi, hi_fields FROM search_items WHERE object_id = 'ev-1'")
    assert titles == [("Chose Postgres after all\x01\x01", "title\x01\x01")]
    assert revisions(migrated_db)[ALPHA_KEY] > alpha_before
    # Entity links survive: the event row was updated, not deleted and re-inserted.
    assert rows(migrated_db, "SELECT entity_id FROM event_entities WHERE event_id = 'ev-1'") == [("ent-a",)]
    assert rows(migrated_db, "SELECT count(*) FROM relations WHERE from_id = 'ev-1'") == [(1,)]


def test_record_time_alone_never_counts_as_a_change(migrated_db: Path) -> None:
    sync(migrated_db, small_graph())
    before = dump(migrated_db)

    report = sync(migrated_db, changed("ev-2", recorded_at="2027-01-01T00:00:00Z"))

    assert (report.total, report.updated) == (0, {})
    assert dump(migrated_db) == before


def test_volatile_fields_are_ignored_until_something_else_changes(migrated_db: Path) -> None:
    policy = SyncPolicy(volatile=frozenset({"updated_at"}))
    import_items(migrated_db, items(small_graph()), policy)

    stamped = import_items(migrated_db, items(changed("ent-b", updated_at="2027-01-01T00:00:00Z")), policy)
    relabelled = import_items(
        migrated_db, items(changed("ent-b", canonical_label="新窗口", updated_at="2027-01-01T00:00:00Z")), policy
    )

    assert stamped.updated == {}
    assert relabelled.updated == {"entity": 1}
    assert rows(migrated_db, "SELECT canonical_label, updated_at FROM entities WHERE id = 'ent-b'") == [
        ("新窗口", "2027-01-01T00:00:00.000Z")
    ]


def test_a_source_version_never_changes_and_neither_does_a_scope(migrated_db: Path) -> None:
    sync(migrated_db, small_graph())
    versions = [
        {**line, "text": "rewritten"} if line["kind"] == "source_version" and line["version"] == "v1" else line
        for line in small_graph()
    ]

    with pytest.raises(ImportRejected, match="already defined by the database with different content"):
        sync(migrated_db, versions)


def test_one_object_twice_in_one_sync_with_other_content_is_refused(migrated_db: Path) -> None:
    twice = [*small_graph(), {**by_id(small_graph(), "ev-2"), "title": "Another title"}]

    with pytest.raises(ImportRejected) as caught:
        sync(migrated_db, twice)

    assert caught.value.location == f"row {len(twice)}"
    assert "already defined by row" in caught.value.problem


def test_a_retired_event_is_removed_with_its_links(migrated_db: Path) -> None:
    sync(migrated_db, small_graph())
    lines = [line for line in small_graph() if line.get("id") != "ev-2"]

    report = sync(migrated_db, lines, [("table x row id=ev-2", Retired("event", ("ev-2",), "superseded"))])
    again = sync(migrated_db, lines, [("table x row id=ev-2", Retired("event", ("ev-2",), "superseded"))])

    assert (report.retired, again.retired) == (1, 0)
    assert rows(migrated_db, "SELECT 1 FROM events WHERE id = 'ev-2'") == []
    assert rows(migrated_db, "SELECT 1 FROM search_items WHERE object_id = 'ev-2'") == []


def test_an_event_something_still_links_to_is_not_retired(migrated_db: Path) -> None:
    sync(migrated_db, small_graph())
    before = dump(migrated_db)

    with pytest.raises(ImportRejected, match="relation 'rel-1' still links to it"):
        sync(migrated_db, small_graph(), [("table x row id=ev-1", Retired("event", ("ev-1",), "superseded"))])

    assert dump(migrated_db) == before


def test_an_append_import_still_refuses_changed_content(migrated_db: Path) -> None:
    import_items(migrated_db, items(small_graph()))

    with pytest.raises(ImportRejected, match="event 'ev-1' is already defined by the database"):
        import_items(migrated_db, items(changed("ev-1", title="Other")))


def test_only_a_sync_can_retire(migrated_db: Path) -> None:
    import_items(migrated_db, items(small_graph()))
    before = dump(migrated_db)

    with pytest.raises(ImportRejected, match="'ev-2' is retired, but only a sync import can retire") as caught:
        import_items(migrated_db, [("table x row id=ev-2", Retired("event", ("ev-2",), "superseded"))])

    assert caught.value.location == "table x row id=ev-2"
    assert dump(migrated_db) == before


def test_a_changed_story_is_updated_in_place_and_keeps_its_links(migrated_db: Path) -> None:
    graph = story_graph()
    sync(migrated_db, graph)
    renamed = [{**line, "name": "Session cache, phase 2"} if line.get("id") == "st-feature" else line for line in graph]

    report = sync(migrated_db, renamed)

    assert report.updated == {"story": 1} and report.total == 0
    assert rows(migrated_db, "SELECT name FROM stories WHERE id = 'st-feature'") == [("Session cache, phase 2",)]
    assert rows(migrated_db, "SELECT count(*) FROM story_events WHERE story_id = 'st-feature'") == [(1,)]
    assert rows(migrated_db, "SELECT hi FROM search_items WHERE object_id = 'st-feature'") == [
        ("Session cache, phase 2\x01\x01",)
    ]
