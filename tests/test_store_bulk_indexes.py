"""An import that at least doubles a table builds that table's plain indexes once at the end (bulk_indexes.py):
the database must end with the same indexes holding the same entries, and a refused import must leave them
as they were. One that at least doubles the search index leaves it merged into one b-tree (search_index.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from jsonl_graph import chain_graph, content, file_hash, write_jsonl

from server.store import search_index
from server.store.errors import ImportRejected
from server.store.importer import import_file
from server.store.migrate import migrate

EVENTS = 600
INDEXES = "SELECT name, tbl_name, sql FROM sqlite_schema WHERE type = 'index' ORDER BY name"
STATISTICS = "SELECT tbl, idx, stat FROM sqlite_stat1 ORDER BY tbl, idx"
# FTS5 lists every b-tree (segment) of an index in its %_idx table, by segment id.
FTS_B_TREES = "SELECT count(DISTINCT segid) FROM search_fts_idx"


def _indexes(db: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(INDEXES).fetchall()


def _integrity(db: Path) -> str:
    """SQLite's own check that every index holds exactly the entries of its table."""
    with sqlite3.connect(db) as conn:
        return "; ".join(row[0] for row in conn.execute("PRAGMA integrity_check"))


def test_a_large_import_ends_with_the_indexes_it_found_holding_every_row(migrated_db: Path, tmp_path: Path) -> None:
    before = _indexes(migrated_db)

    import_file(migrated_db, write_jsonl(tmp_path / "chain.jsonl", chain_graph(EVENTS)))

    assert _indexes(migrated_db) == before
    assert _integrity(migrated_db) == "ok"
    with sqlite3.connect(migrated_db) as conn:  # the indexes are there to be used, e.g. an event's relations
        plan = conn.execute("EXPLAIN QUERY PLAN SELECT id FROM events WHERE result_id = 'r-alpha'").fetchall()
    assert "events_by_result" in str(plan)


def test_a_small_import_into_a_large_graph_gives_the_same_rows_as_one_large_import(tmp_path: Path) -> None:
    lines = chain_graph(EVENTS)
    # Fewer rows than each table holds: added row by row to the indexes, not with indexes built anew.
    more = [{**line, "id": f"{line['id']}-more"} for line in lines if line["kind"] == "event"][:50]
    in_two = tmp_path / "two.db"
    migrate(in_two)
    import_file(in_two, write_jsonl(tmp_path / "large.jsonl", lines))
    import_file(in_two, write_jsonl(tmp_path / "small.jsonl", more))
    in_one = tmp_path / "one.db"
    migrate(in_one)
    import_file(in_one, write_jsonl(tmp_path / "all.jsonl", lines + more))

    assert content(in_two) == content(in_one)
    assert _integrity(in_two) == _integrity(in_one) == "ok"


def test_a_refused_import_leaves_every_index_as_it_was(migrated_db: Path, tmp_path: Path) -> None:
    lines = chain_graph(EVENTS)
    # A relation (written after the events and entities) naming no stored object: refused once the large
    # kinds are written with their indexes dropped.
    relation = next(line for line in lines if line["kind"] == "relation")
    lines.append({**relation, "id": "rel-bad", "to_ref": {"type": "entity", "id": "ent-none"}})
    before, indexes = file_hash(migrated_db), _indexes(migrated_db)

    with pytest.raises(ImportRejected, match="ent-none"):
        import_file(migrated_db, write_jsonl(tmp_path / "bad.jsonl", lines))

    assert file_hash(migrated_db) == before
    assert _indexes(migrated_db) == indexes


def test_a_database_with_statistics_keeps_them(migrated_db: Path, tmp_path: Path) -> None:
    with sqlite3.connect(migrated_db) as conn:
        conn.execute("ANALYZE")  # statistics of empty tables: one row per table, none per index yet
        conn.execute("INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('events', 'events_by_result', '1000 10')")
    with sqlite3.connect(migrated_db) as conn:
        statistics = conn.execute(STATISTICS).fetchall()

    import_file(migrated_db, write_jsonl(tmp_path / "chain.jsonl", chain_graph(EVENTS)))

    with sqlite3.connect(migrated_db) as conn:
        assert conn.execute(STATISTICS).fetchall() == statistics
    assert _integrity(migrated_db) == "ok"


def _fts_b_trees(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(FTS_B_TREES).fetchone()[0])


def test_a_large_import_leaves_the_search_index_in_one_b_tree(
    migrated_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every phrase a search reads is read from each b-tree of the index: a 1M import left 5-13 of them. A small
    FTS5 hash makes this import write many, as a large one does."""
    monkeypatch.setattr(search_index, "REBUILD_FTS_HASH_BYTES", 16_384)
    lines = chain_graph(EVENTS)
    import_file(migrated_db, write_jsonl(tmp_path / "chain.jsonl", lines))

    assert _fts_b_trees(migrated_db) == 1
    assert _integrity(migrated_db) == "ok"
    with sqlite3.connect(migrated_db) as conn:
        conn.execute("INSERT INTO search_fts (search_fts) VALUES ('integrity-check')")  # raises if the index is wrong
        # FTS5's own merging is on again for later writes (its setting is stored in the database).
        assert conn.execute("SELECT v FROM search_fts_config WHERE k = 'automerge'").fetchone() == (4,)

    # A small import does not merge the whole index again: its entries are a b-tree of their own.
    more = [{**line, "id": f"{line['id']}-more"} for line in lines if line["kind"] == "event"][:20]
    import_file(migrated_db, write_jsonl(tmp_path / "small.jsonl", more))
    assert _fts_b_trees(migrated_db) == 2
