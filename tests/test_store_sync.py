"""The importer's sync mode (server/store/sync.py) on its own: updates in place, write-once record times,
refreshed search index and evidence links, retired events, and what stays an error."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from jsonl_graph import ALPHA, ALPHA_KEY, PAIR_KEY, Line, by_id, dump, revisions, small_graph, story_graph

from server.store.errors import ImportRejected
from server.store.importer import ImportItem, ImportReport, import_items, import_source
from server.store.jsonl import validate_line
from server.store.sync import Retired, SyncPolicy

SYNC = SyncPolicy()


def items(lines: list[Line]) -> list[ImportItem]:
    return [(f"row {index}", validate_line(f"row {index}", line)) for index, line in enumerate(lines, start=1)]


class ItemSource:
    """Items in hand as an import source (for the dry runs `import_items` does not offer)."""

    def __init__(self, items: list[ImportItem]) -> None:
        self.items = items

    def __iter__(self) -> Iterator[ImportItem]:
        return iter(self.items)

    def fraction_read(self) -> float | None:
        return None


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


# --- stories and experiences: mirrored objects whose links are part of them ---------------------------


def edited(
    lines: list[Line], drop: Callable[[Line], bool] = lambda line: False, replace: Mapping[str, Line] | None = None
) -> list[Line]:
    """`lines` without those `drop` matches, and those whose `key` is in `replace` replaced."""
    return [(replace or {}).get(key(line), line) for line in lines if not drop(line)]


def key(line: Line) -> str:
    if line["kind"] == "story_event":
        return f"{line['story_id']}:{line['event_id']}"
    if line["kind"] == "experience_event":
        return f"{line['experience_id']}:{line['event_id']}:{line['role']}"
    return str(line.get("id", ""))


def test_changed_story_and_experience_links_are_updated_in_place(migrated_db: Path) -> None:
    sync(migrated_db, story_graph())
    changes: dict[str, Line] = {
        "st-feature:ev-2": {
            "kind": "story_event",
            "story_id": "st-feature",
            "event_id": "ev-2",
            "primary": True,
            "user_set": True,
        },
        "ex-pair:ev-b1:applied": {
            "kind": "experience_event",
            "experience_id": "ex-pair",
            "event_id": "ev-b1",
            "role": "applied",
            "note": "Beta, a second time",
        },
    }
    lines = edited(story_graph(), replace=changes)

    report = sync(migrated_db, lines)

    assert (report.updated, report.total, report.retired) == ({"story_event": 1, "experience_event": 1}, 0, 0)
    assert rows(migrated_db, "SELECT user_set FROM story_events WHERE story_id = 'st-feature'") == [(1,)]
    assert rows(migrated_db, "SELECT note FROM experience_events WHERE event_id = 'ev-b1'") == [
        ("Beta, a second time",)
    ]


def test_a_link_a_story_or_experience_no_longer_lists_is_removed(migrated_db: Path) -> None:
    sync(migrated_db, story_graph())
    # ev-1 moves from the thread to the feature: its old primary link must go before the new one is written.
    moved = {"kind": "story_event", "story_id": "st-feature", "event_id": "ev-1", "primary": True, "user_set": True}
    lines = edited(
        [*story_graph(), moved],
        drop=lambda line: key(line) in ("st-thread:ev-1", "ex-pair:ev-b1:applied"),
    )

    report = sync(migrated_db, lines)
    again = sync(migrated_db, lines)

    assert (report.retired, report.written, again.retired, again.total) == (2, {"story_event": 1}, 0, 0)
    assert rows(migrated_db, "SELECT story_id FROM story_events WHERE event_id = 'ev-1' AND is_primary = 1") == [
        ("st-feature",)
    ]
    assert rows(migrated_db, "SELECT 1 FROM experience_events WHERE event_id = 'ev-b1'") == []


def test_links_of_a_story_the_sync_does_not_list_are_kept(migrated_db: Path) -> None:
    sync(migrated_db, story_graph())
    before = dump(migrated_db)

    report = sync(
        migrated_db, edited(story_graph(), drop=lambda line: "st-cross" in (line.get("id"), line.get("story_id")))
    )

    assert (report.retired, report.total, report.updated) == (0, 0, {})
    assert dump(migrated_db) == before


def test_a_cross_story_and_an_experience_moving_to_a_wider_scope_take_their_links_along(migrated_db: Path) -> None:
    # First the cross story spans Alpha only and the pair's experience was formed in Alpha only.
    narrow = edited(
        story_graph(),
        drop=lambda line: (
            key(line) in ("st-cross:ev-b1", "st-cross:ev-p1", "ex-pair:ev-p1:formed", "ex-pair:ev-b1:applied")
        ),
        replace={
            "st-cross": {**by_id(story_graph(), "st-cross"), "scope": ALPHA},
            "ex-pair": {**by_id(story_graph(), "ex-pair"), "scope": ALPHA},
        },
    )
    sync(migrated_db, narrow)

    report = sync(migrated_db, story_graph())

    assert report.updated == {"story": 1, "experience": 1}
    # The links already stored are written again in the new scope, beside the new ones.
    assert report.written == {"story_event": 3, "experience_event": 3}
    assert rows(migrated_db, "SELECT DISTINCT scope_key FROM story_events WHERE story_id = 'st-cross'") == [(PAIR_KEY,)]
    assert rows(migrated_db, "SELECT DISTINCT scope_key FROM experience_events WHERE experience_id = 'ex-pair'") == [
        (PAIR_KEY,)
    ]
    assert sync(migrated_db, story_graph()).updated == {}


def test_retired_stories_and_experiences_are_removed_with_their_links_and_search_rows(migrated_db: Path) -> None:
    sync(migrated_db, story_graph())
    gone = ("st-cross", "ex-pair")
    lines = edited(
        story_graph(), drop=lambda line: any(line.get(name) in gone for name in ("id", "story_id", "experience_id"))
    )
    retired: list[ImportItem] = [
        ("table s row id=st-cross", Retired("story", ("st-cross",), "removed")),
        ("table x row id=ex-pair", Retired("experience", ("ex-pair",), "merged")),
    ]

    report = sync(migrated_db, lines, retired)
    again = sync(migrated_db, lines, retired)

    assert (report.retired, again.retired) == (2, 0)
    assert rows(migrated_db, "SELECT count(*) FROM story_events WHERE story_id = 'st-cross'") == [(0,)]
    assert rows(migrated_db, "SELECT count(*) FROM experience_events WHERE experience_id = 'ex-pair'") == [(0,)]
    assert rows(migrated_db, "SELECT object_id FROM search_items WHERE object_id IN ('st-cross', 'ex-pair')") == []


def test_retiring_a_feature_whose_thread_stays_is_refused_by_the_dry_run_and_the_import_alike(
    migrated_db: Path,
) -> None:
    sync(migrated_db, story_graph())
    before = dump(migrated_db)
    lines = edited(story_graph(), drop=lambda line: "st-feature" in (line.get("id"), line.get("story_id")))
    retired: list[ImportItem] = [("table s row id=st-feature", Retired("story", ("st-feature",), "removed"))]
    problem = "story 'st-feature' is retired, but its thread 'st-thread' stays in the database without it"

    for dry_run in (True, False):
        with pytest.raises(ImportRejected, match=problem) as refused:
            import_source(migrated_db, ItemSource([*items(lines), *retired]), policy=SYNC, dry_run=dry_run)
        assert refused.value.location == "table s row id=st-feature"
    assert dump(migrated_db) == before


def test_only_events_stories_and_experiences_can_be_retired(migrated_db: Path) -> None:
    sync(migrated_db, small_graph())

    with pytest.raises(ImportRejected, match="a entity cannot be retired"):
        sync(migrated_db, small_graph(), [("row x", Retired("entity", ("ent-a",), "gone"))])


def test_an_events_primary_story_can_move_to_a_story_it_was_already_linked_to(migrated_db: Path) -> None:
    related: Line = {"kind": "story_event", "story_id": "st-feature", "event_id": "ev-1", "primary": False}
    sync(migrated_db, [*story_graph(), related])
    promoted: Line = {**related, "primary": True, "user_set": True}
    demoted: Line = {"kind": "story_event", "story_id": "st-thread", "event_id": "ev-1", "primary": False}
    # The promotion comes first: the link giving the primary flag up must still do so before it is taken.
    lines = [promoted, *edited(story_graph(), replace={"st-thread:ev-1": demoted})]

    report = sync(migrated_db, lines)
    again = sync(migrated_db, lines)

    assert (report.updated, report.total, report.retired) == ({"story_event": 2}, 0, 0)
    assert rows(migrated_db, "SELECT story_id, is_primary FROM story_events WHERE event_id = 'ev-1' ORDER BY 1") == [
        ("st-cross", 0),
        ("st-feature", 1),
        ("st-thread", 0),
    ]
    assert (again.updated, again.total) == ({}, 0)


def test_a_sync_still_refuses_a_second_primary_story(migrated_db: Path) -> None:
    sync(migrated_db, story_graph())
    before = dump(migrated_db)
    second: Line = {"kind": "story_event", "story_id": "st-feature", "event_id": "ev-1", "primary": True}

    with pytest.raises(ImportRejected, match="event 'ev-1' already has the primary story 'st-thread'"):
        sync(migrated_db, [*story_graph(), second])

    assert dump(migrated_db) == before


def test_an_event_moving_to_another_scope_leaves_no_stored_link_across_scopes(migrated_db: Path) -> None:
    sync(migrated_db, small_graph())
    moved = changed("ev-1", result_id="r-beta", story_line_id=None, entity_ids=[], source_reference_ids=[])

    with pytest.raises(ImportRejected, match=r"field 'result_id'.*a sync keeps an object's scope"):
        sync(migrated_db, moved)
    assert rows(migrated_db, "SELECT result_id FROM events WHERE id = 'ev-1'") == [("r-alpha",)]
    assert (
        rows(
            migrated_db,
            "SELECT c.entity_id FROM entity_changes AS c JOIN events AS e ON e.id = c.event_id"
            " WHERE e.scope_key <> c.scope_key",
        )
        == []
    )


def test_a_sync_never_leaves_an_experience_without_an_event_it_was_formed_from(migrated_db: Path) -> None:
    sync(migrated_db, story_graph())
    formed = ("experience_event", "ex-alpha", "formed")
    lines = edited(
        story_graph(), drop=lambda line: (line["kind"], line.get("experience_id"), line.get("role")) == formed
    )

    with pytest.raises(ImportRejected, match="has no event it was formed from"):
        sync(migrated_db, lines)
