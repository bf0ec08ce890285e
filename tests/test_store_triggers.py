"""Another application writes with raw SQL: the triggers keep the search index and revisions right."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ALPHA = 'projects:["alpha"]'
BETA = 'projects:["beta"]'
T = "2026-05-01T08:00:00.000Z"

BASE_ROWS = f"""
INSERT INTO projects (id, name) VALUES ('alpha', 'Alpha'), ('beta', 'Beta');
INSERT INTO scopes (scope_key, kind) VALUES ('{ALPHA}', 'projects'), ('{BETA}', 'projects'), ('global', 'global');
INSERT INTO scope_projects (scope_key, project_id) VALUES ('{ALPHA}', 'alpha'), ('{BETA}', 'beta');
INSERT INTO results (id, scope_key, review_generated_at, recorded_at) VALUES ('r-a', '{ALPHA}', '{T}', '{T}');
INSERT INTO results (id, scope_key, review_generated_at, recorded_at) VALUES ('r-b', '{BETA}', '{T}', '{T}');
INSERT INTO story_lines (id, scope_key, topic, recorded_at) VALUES ('sl-a', '{ALPHA}', 'Storage', '{T}');
INSERT INTO entities (id, story_line_id, scope_key, canonical_label, updated_at)
  VALUES ('en-base', 'sl-a', '{ALPHA}', 'Base entity', '{T}');
INSERT INTO events (id, result_id, scope_key, event_type, title, recorded_at)
  VALUES ('ev-base', 'r-a', '{ALPHA}', 'change', 'Base event', '{T}');
INSERT INTO leaves (id, result_id, scope_key, recorded_at) VALUES ('leaf-a', 'r-a', '{ALPHA}', '{T}');
"""


@dataclass(frozen=True)
class Write:
    """One table's raw insert, update and delete of a searchable field, and the search row it must yield."""

    table: str
    insert: str
    update: str
    delete: str
    doc: tuple[str, str, str, str]  # object_type, object_id, result_key, field
    old: str
    new: str


WRITES = [
    Write(
        "events",
        "INSERT INTO events (id, result_id, scope_key, event_type, title, recorded_at)"
        f" VALUES ('ev-x', 'r-a', '{ALPHA}', 'decision', 'Migrate to Postgres', '{T}')",
        "UPDATE events SET title = 'Stay on SQLite' WHERE id = 'ev-x'",
        "DELETE FROM events WHERE id = 'ev-x'",
        ("event", "ev-x", "r-a", "title"),
        "Migrate to Postgres",
        "Stay on SQLite",
    ),
    Write(
        "entities",
        "INSERT INTO entities (id, story_line_id, scope_key, canonical_label, updated_at)"
        f" VALUES ('en-x', 'sl-a', '{ALPHA}', 'Connection pool', '{T}')",
        "UPDATE entities SET canonical_label = '工作线程' WHERE id = 'en-x'",
        "DELETE FROM entities WHERE id = 'en-x'",
        ("entity", "en-x", "", "canonical_label"),
        "Connection pool",
        "工作线程",
    ),
    Write(
        "entity_revisions",
        "INSERT INTO entity_revisions (entity_id, result_id, scope_key, canonical_label, recorded_at)"
        f" VALUES ('en-base', 'r-a', '{ALPHA}', 'Quarterly review', '{T}')",
        "UPDATE entity_revisions SET canonical_label = 'Monthly review' WHERE entity_id = 'en-base'",
        "DELETE FROM entity_revisions WHERE entity_id = 'en-base'",
        ("entity", "en-base", "r-a", "canonical_label"),
        "Quarterly review",
        "Monthly review",
    ),
    Write(
        "relations",
        "INSERT INTO relations (id, result_id, scope_key, from_type, from_id, to_type, to_id, relation_type, reason,"
        f" recorded_at) VALUES ('rel-x', 'r-a', '{ALPHA}', 'event', 'ev-base', 'entity', 'en-base', 'contrasts',"
        f" 'contrasts with plan A', '{T}')",
        "UPDATE relations SET reason = 'replaces plan A' WHERE id = 'rel-x'",
        "DELETE FROM relations WHERE id = 'rel-x'",
        ("relation", "rel-x", "r-a", "reason"),
        "contrasts with plan A",
        "replaces plan A",
    ),
    Write(
        "summaries",
        "INSERT INTO summaries (id, result_id, scope_key, body, recorded_at)"
        f" VALUES ('sum-x', 'r-a', '{ALPHA}', 'Backups settled', '{T}')",
        "UPDATE summaries SET body = 'Backups reopened' WHERE id = 'sum-x'",
        "DELETE FROM summaries WHERE id = 'sum-x'",
        ("summary", "sum-x", "r-a", "summary"),
        "Backups settled",
        "Backups reopened",
    ),
    Write(
        "source_references",
        "INSERT INTO source_references (id, result_id, scope_key, source_type, original_source_id, fragment,"
        f" recorded_at) VALUES ('ref-x', 'r-a', '{ALPHA}', 'conversation', 'msg-1', '原始消息片段', '{T}')",
        "UPDATE source_references SET fragment = '更新后的片段' WHERE id = 'ref-x'",
        "DELETE FROM source_references WHERE id = 'ref-x'",
        ("source_reference", "ref-x", "r-a", "fragment"),
        "原始消息片段",
        "更新后的片段",
    ),
    Write(
        "fact_links",
        "INSERT INTO fact_links (owner_type, owner_id, object_type, object_id, scope_key, description)"
        f" VALUES ('leaf', 'leaf-a', 'event', 'ev-base', '{ALPHA}', 'leaf says snapshots')",
        "UPDATE fact_links SET description = 'leaf says replicas' WHERE owner_id = 'leaf-a'",
        "DELETE FROM fact_links WHERE owner_id = 'leaf-a'",
        ("event", "ev-base", "r-a", "leaf:leaf-a"),
        "leaf says snapshots",
        "leaf says replicas",
    ),
]


@pytest.fixture
def writer(migrated_db: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(migrated_db, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.executescript(BASE_ROWS)
    yield conn
    conn.close()


def _fields(conn: sqlite3.Connection, item_id: int) -> dict[str, str]:
    """An indexed item's fields by name, as stored (each text followed by two U+0001)."""
    row = conn.execute("SELECT hi, lo, hi_fields, lo_fields FROM search_items WHERE item_id = ?", [item_id]).fetchone()
    fields: dict[str, str] = {}
    for texts, names in ((row[0], row[2]), (row[1], row[3])):
        for name, text in zip(names.split("\x01\x01")[:-1], texts.split("\x01\x01")[:-1], strict=True):
            fields[name] = text + "\x01\x01"
    return fields


def _bodies(conn: sqlite3.Connection, doc: tuple[str, str, str, str]) -> list[str]:
    rows = conn.execute(
        "SELECT item_id FROM search_items WHERE object_type = ? AND object_id = ? AND result_key = ?", doc[:3]
    ).fetchall()
    return [body for (item_id,) in rows for name, body in _fields(conn, item_id).items() if name == doc[3]]


def _hits(conn: sqlite3.Connection, phrase: str) -> list[tuple[str, str]]:
    """The (object id, field) pairs whose text holds `phrase`, found through the FTS index."""
    rows = conn.execute(
        "SELECT i.item_id, i.object_id FROM search_fts JOIN search_items AS i ON i.item_id = search_fts.rowid"
        " WHERE search_fts MATCH ? ORDER BY i.item_id",
        ['"' + phrase.replace('"', '""') + '"'],
    )
    return [
        (object_id, name)
        for item_id, object_id in rows.fetchall()
        for name, body in _fields(conn, item_id).items()
        if phrase.casefold() in body.casefold()
    ]


def _revisions(conn: sqlite3.Connection) -> tuple[int, int, int, int]:
    graph = conn.execute("SELECT data_revision FROM graph_state").fetchone()[0]
    scopes = dict(conn.execute("SELECT scope_key, data_revision FROM scopes").fetchall())
    return graph, scopes[ALPHA], scopes[BETA], scopes["global"]


def _assert_index_consistent(conn: sqlite3.Connection) -> None:
    # FTS5 checks that its index matches the external content table exactly.
    conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")


@pytest.mark.parametrize("write", WRITES, ids=[write.table for write in WRITES])
def test_raw_insert_update_and_delete_keep_search_index_and_only_their_scope_revision_current(
    writer: sqlite3.Connection, write: Write
) -> None:
    field = write.doc[3]
    graph, alpha, beta, global_ = _revisions(writer)

    writer.execute(write.insert)
    assert _bodies(writer, write.doc) == [write.old + "\x01\x01"]
    assert _hits(writer, write.old) == [(write.doc[1], field)]
    after_insert = _revisions(writer)
    assert after_insert[0] > graph and after_insert[1] > alpha
    assert after_insert[2:] == (beta, global_)

    writer.execute(write.update)
    assert _bodies(writer, write.doc) == [write.new + "\x01\x01"]
    assert _hits(writer, write.old) == []
    assert _hits(writer, write.new) == [(write.doc[1], field)]
    after_update = _revisions(writer)
    assert after_update[0] > after_insert[0] and after_update[1] > after_insert[1]
    assert after_update[2:] == (beta, global_)

    writer.execute(write.delete)
    assert _bodies(writer, write.doc) == []
    assert _hits(writer, write.new) == []
    after_delete = _revisions(writer)
    assert after_delete[0] > after_update[0] and after_delete[1] > after_update[1]
    assert after_delete[2:] == (beta, global_)
    _assert_index_consistent(writer)


def _memory_revisions(conn: sqlite3.Connection) -> tuple[int, int, int, int, int]:
    graph, graph_global = conn.execute("SELECT memory_revision, global_memory_revision FROM graph_state").fetchone()
    scopes = dict(conn.execute("SELECT scope_key, memory_revision FROM scopes").fetchall())
    return graph, graph_global, scopes[ALPHA], scopes[BETA], scopes["global"]


def test_a_memory_item_bumps_the_scopes_it_is_stored_in_and_a_global_one_the_global_memory_revision(
    writer: sqlite3.Connection,
) -> None:
    """In the memory revisions only (migrations/0015): search and read_source, bound to the data revisions, never
    read memory items. A Global item bumps the Global scope's and the graph's Global memory revision, never a project
    scope's (migrations/0016): a client kept out of Global must not see its writes in its cursors."""
    data = _revisions(writer)
    graph, graph_global, alpha, beta, global_ = _memory_revisions(writer)

    writer.execute(f"INSERT INTO memory_items (id, project_id, body, updated_at) VALUES ('m-a', 'alpha', 'x', '{T}')")
    assert _memory_revisions(writer) == (graph + 1, graph_global, alpha + 1, beta, global_)

    writer.execute(f"INSERT INTO memory_items (id, body, updated_at) VALUES ('m-g', 'y', '{T}')")
    assert _memory_revisions(writer) == (graph + 2, graph_global + 1, alpha + 1, beta, global_ + 1)

    writer.execute("UPDATE memory_items SET project_id = 'beta' WHERE id = 'm-a'")  # both projects' scopes, once
    assert _memory_revisions(writer) == (graph + 3, graph_global + 1, alpha + 2, beta + 1, global_ + 1)

    writer.execute("UPDATE memory_items SET body = 'z' WHERE id = 'm-g'")
    writer.execute("DELETE FROM memory_items WHERE id = 'm-a'")
    assert _memory_revisions(writer) == (graph + 5, graph_global + 2, alpha + 2, beta + 2, global_ + 2)

    writer.execute("UPDATE memory_items SET project_id = 'alpha' WHERE id = 'm-g'")  # out of Global: both sides
    assert _memory_revisions(writer) == (graph + 6, graph_global + 3, alpha + 3, beta + 2, global_ + 3)
    writer.execute("UPDATE memory_items SET project_id = NULL WHERE id = 'm-g'")  # and back
    assert _memory_revisions(writer) == (graph + 7, graph_global + 4, alpha + 4, beta + 2, global_ + 4)
    writer.execute("DELETE FROM memory_items WHERE id = 'm-g'")
    assert _memory_revisions(writer) == (graph + 8, graph_global + 5, alpha + 4, beta + 2, global_ + 5)
    assert _revisions(writer) == data


def test_deleting_an_event_removes_all_its_search_rows_and_entity_links(writer: sqlite3.Connection) -> None:
    writer.execute(
        "INSERT INTO events (id, result_id, scope_key, event_type, title, description, recorded_at)"
        f" VALUES ('ev-y', 'r-a', '{ALPHA}', 'milestone', 'Launch day', 'went live', '{T}')"
    )
    writer.execute(f"INSERT INTO event_entities (event_id, entity_id, scope_key) VALUES ('ev-y', 'en-base', '{ALPHA}')")
    assert {row[1] for row in _hits(writer, "Launch")} == {"title"}

    writer.execute("DELETE FROM events WHERE id = 'ev-y'")

    assert writer.execute("SELECT count(*) FROM search_items WHERE object_id = 'ev-y'").fetchone()[0] == 0
    assert writer.execute("SELECT count(*) FROM event_entities WHERE event_id = 'ev-y'").fetchone()[0] == 0
    _assert_index_consistent(writer)


def test_a_leaf_item_without_its_objects_row_follows_the_time_of_the_object_it_describes(
    writer: sqlite3.Connection,
) -> None:
    """A leaf under r-a2 describes objects stored under r-a only (or not yet at all): each description is an item of
    its own under r-a2, dated by the object's own row (migrations/0017). Raw SQL writes to those rows, written
    before or after the descriptions, re-date the items: an event's time, an entity change's event, a summary's
    interval, a story's span, the events that formed an experience."""
    jan, feb, feb_7, mar, mar_9 = (f"2026-{day}T00:00:00.000Z" for day in ("01-01", "02-01", "02-07", "03-01", "03-09"))
    writer.executescript(f"""
    INSERT INTO results (id, scope_key, review_generated_at, recorded_at) VALUES ('r-a2', '{ALPHA}', '{T}', '{T}');
    INSERT INTO leaves (id, result_id, scope_key, recorded_at) VALUES ('leaf-a2', 'r-a2', '{ALPHA}', '{T}');
    INSERT INTO fact_links (owner_type, owner_id, object_type, object_id, scope_key, description)
    VALUES ('leaf', 'leaf-a2', 'event', 'ev-base', '{ALPHA}', 'later wording'),
           ('leaf', 'leaf-a2', 'entity_change', 'en-base#k', '{ALPHA}', 'later wording'),
           ('leaf', 'leaf-a2', 'summary', 'sum-y', '{ALPHA}', 'later wording'),
           ('leaf', 'leaf-a2', 'story', 'st-y', '{ALPHA}', 'later wording'),
           ('leaf', 'leaf-a2', 'experience', 'xp-y', '{ALPHA}', 'later wording');
    """)

    def times() -> dict[str, tuple[str | None, str | None]]:
        rows = writer.execute(
            "SELECT object_type, event_time_start, event_time_end FROM search_items WHERE result_key = 'r-a2'"
        )
        return {object_type: (start, end) for object_type, start, end in rows}

    undated = (None, None)
    assert times() == dict.fromkeys(("event", "entity_change", "summary", "story", "experience"), undated)
    # The rows appear after the descriptions (ev-base is stored already, undated).
    writer.executescript(f"""
    INSERT INTO entity_changes (entity_id, association_key, result_id, scope_key, event_id, change_type, recorded_at)
    VALUES ('en-base', 'k', 'r-a', '{ALPHA}', 'ev-base', 'added', '{T}');
    INSERT INTO summaries (id, result_id, scope_key, interval_from, interval_to, body, recorded_at)
    VALUES ('sum-y', 'r-a', '{ALPHA}', '{feb}', '{feb_7}', 'Week one', '{T}');
    INSERT INTO stories (id, scope_key, level, name, started_at, recorded_at)
    VALUES ('st-y', '{ALPHA}', 'feature', 'Storage', '{jan}', '{T}');
    INSERT INTO experiences (id, scope_key, statement, recorded_at) VALUES ('xp-y', '{ALPHA}', 'Test backups', '{T}');
    INSERT INTO experience_events (experience_id, event_id, role, scope_key, event_scope_key)
    VALUES ('xp-y', 'ev-base', 'formed', '{ALPHA}', '{ALPHA}');
    """)
    assert times() == {
        "event": undated, "entity_change": undated, "summary": (feb, feb_7), "story": (jan, jan), "experience": undated
    }  # fmt: skip

    writer.execute(f"UPDATE events SET event_time_start = '{mar}' WHERE id = 'ev-base'")
    assert times() == {
        "event": (mar, mar), "entity_change": (mar, mar), "summary": (feb, feb_7), "story": (jan, jan),
        "experience": (mar, mar),
    }  # fmt: skip
    writer.execute(f"UPDATE events SET event_time_end = '{mar_9}' WHERE id = 'ev-base'")
    writer.execute(f"UPDATE summaries SET interval_to = '{mar}' WHERE id = 'sum-y'")
    writer.execute(f"UPDATE stories SET ended_at = '{feb}' WHERE id = 'st-y'")
    assert times() == {
        "event": (mar, mar_9), "entity_change": (mar, mar_9), "summary": (feb, mar), "story": (jan, feb),
        "experience": (mar, mar),
    }  # fmt: skip

    # The rows go, or stop dating the objects.
    writer.execute("UPDATE entity_changes SET event_id = NULL WHERE entity_id = 'en-base'")
    writer.execute("DELETE FROM experience_events WHERE experience_id = 'xp-y'")
    writer.execute("DELETE FROM summaries WHERE id = 'sum-y'")
    writer.execute("DELETE FROM stories WHERE id = 'st-y'")
    assert times() == {
        "event": (mar, mar_9), "entity_change": undated, "summary": undated, "story": undated, "experience": undated
    }  # fmt: skip
    # The event's row moves into the leaf's result: the item holds it now, at the same time.
    writer.execute("UPDATE events SET result_id = 'r-a2' WHERE id = 'ev-base'")
    assert times()["event"] == (mar, mar_9)
    assert _bodies(writer, ("event", "ev-base", "r-a2", "title")) == ["Base event\x01\x01"]
    _assert_index_consistent(writer)
