"""The streaming importer: forward links across a large file, all-or-nothing, dry runs, other sources."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from jsonl_graph import (
    ALPHA_KEY,
    BETA,
    T0,
    Line,
    by_id,
    chain_graph,
    content,
    dump,
    file_hash,
    revisions,
    small_graph,
    write_jsonl,
)

from server.contracts.interchange import LINE
from server.contracts.interchange import Line as LineModel
from server.store import merge, staging
from server.store.errors import ImportRejected, StoreError
from server.store.exporter import export_file
from server.store.importer import import_file, import_lines
from server.store.jsonl import JsonlSource
from server.store.migrate import migrate, open_store

EVENTS = 3_000


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches and insert chunks far smaller than the file, so their boundaries are crossed many times."""
    monkeypatch.setattr(staging, "BATCH_ROWS", 97)
    monkeypatch.setattr(staging, "BATCH_CHARACTERS", 20_000)
    monkeypatch.setattr(merge, "CHUNK_ROWS", 1_000)


def _fresh(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    migrate(path)
    return path


def _unchanged(db: Path) -> tuple[list[str], str, dict[str, int]]:
    return dump(db), file_hash(db), revisions(db)


@pytest.mark.usefixtures("small_chunks")
def test_every_link_may_point_forward_across_a_large_file(migrated_db: Path, tmp_path: Path) -> None:
    lines = chain_graph(EVENTS)
    report = import_file(migrated_db, write_jsonl(tmp_path / "backwards.jsonl", lines))
    in_order = _fresh(tmp_path, "in_order.db")
    import_file(in_order, write_jsonl(tmp_path / "forwards.jsonl", list(reversed(lines))))

    assert report.total == len(lines)
    assert report.written["relation"] == report.written["event"] == EVENTS
    assert content(migrated_db) == content(in_order)
    with sqlite3.connect(migrated_db) as conn:
        assert conn.execute("SELECT count(*) FROM event_entities").fetchone()[0] == EVENTS
        assert conn.execute("SELECT count(DISTINCT scope_key) FROM object_sources").fetchone()[0] == 1
        searchable = conn.execute("SELECT count(*) FROM search_items WHERE object_type = 'event'").fetchone()[0]
    assert searchable == EVENTS  # one search item per event


@pytest.mark.usefixtures("small_chunks")
def test_reimporting_a_large_file_writes_nothing(migrated_db: Path, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chain.jsonl", chain_graph(EVENTS))
    first = import_file(migrated_db, path)
    before = _unchanged(migrated_db)[::2]

    again = import_file(migrated_db, path)

    assert (again.total, again.unchanged) == (0, first.total)
    assert (dump(migrated_db), revisions(migrated_db)) == before


BETA_IDS = {"beta", "r-beta", "sl-beta", "ref-2", "ent-b"}
SPOILED_LAST_LINES: dict[str, tuple[Line | str, str, str]] = {
    "malformed JSON": ('{"kind": "event", "id": ', "", "malformed JSON"),
    "missing entity": (
        {"kind": "event", "id": "ev-x", "result_id": "r-alpha", "event_type": "change", "title": "x"}
        | {"recorded_at": T0, "entity_ids": ["ent-000001", "ent-nope"]},
        "entity_ids[1]",
        "no entity 'ent-nope' in the file or the database",
    ),
    "forward ref to nothing": (
        {"kind": "relation", "id": "rel-x", "result_id": "r-alpha", "relation_type": "related"}
        | {"from_ref": {"type": "event", "id": "ev-000001"}, "to_ref": {"type": "summary", "id": "sum-nope"}}
        | {"recorded_at": T0},
        "to_ref",
        "no summary 'sum-nope'",
    ),
}


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("case", list(SPOILED_LAST_LINES))
def test_a_bad_last_line_leaves_the_database_untouched(case: str, migrated_db: Path, tmp_path: Path) -> None:
    beta = [line for line in small_graph() if line.get("id") in BETA_IDS or line.get("scope") == BETA]
    import_file(migrated_db, write_jsonl(tmp_path / "beta.jsonl", beta))
    bad, field, problem = SPOILED_LAST_LINES[case]
    lines: list[Line | str] = [*chain_graph(EVENTS), bad]
    before = _unchanged(migrated_db)

    with pytest.raises(ImportRejected) as caught:
        import_file(migrated_db, write_jsonl(tmp_path / "bad.jsonl", lines))

    assert (caught.value.location, caught.value.field) == (f"line {len(lines)}", field)
    assert problem in caught.value.problem
    assert _unchanged(migrated_db) == before


def test_a_dry_run_checks_everything_and_writes_nothing(migrated_db: Path, tmp_path: Path) -> None:
    graph = small_graph()
    import_file(migrated_db, write_jsonl(tmp_path / "head.jsonl", graph[:8]))
    # The rest of the graph links to the results stored by the first import.
    rest = write_jsonl(tmp_path / "rest.jsonl", graph[8:])
    before = _unchanged(migrated_db)

    dry = import_file(migrated_db, rest, dry_run=True)

    assert _unchanged(migrated_db) == before
    assert dry.dry_run
    assert str(dry).startswith(f"dry run: would import {len(graph) - 8} lines (2 story_line, ")
    assert str(dry).endswith("0 unchanged; nothing was written")
    real = import_file(migrated_db, rest)
    assert (real.written, real.unchanged) == (dry.written, dry.unchanged)


def test_a_dry_run_refuses_what_the_import_would_refuse(migrated_db: Path, tmp_path: Path) -> None:
    import_file(migrated_db, write_jsonl(tmp_path / "g.jsonl", small_graph()))
    changed = {**by_id(small_graph(), "ev-1"), "title": "Something else"}
    before = _unchanged(migrated_db)

    with pytest.raises(ImportRejected, match="already defined by the database with different content"):
        import_file(migrated_db, write_jsonl(tmp_path / "changed.jsonl", [changed]), dry_run=True)
    assert _unchanged(migrated_db) == before


def test_a_repeated_line_is_unchanged_and_a_changed_repeat_names_the_first(migrated_db: Path, tmp_path: Path) -> None:
    graph = small_graph()
    event = by_id(graph, "ev-2")
    # The same summary again with its fact refs (a set) in another order: the same content.
    summary = by_id(graph, "sum-1")
    again = {**summary, "fact_refs": list(reversed(summary["fact_refs"]))}
    report = import_file(migrated_db, write_jsonl(tmp_path / "twice.jsonl", [*graph, event, again]))
    assert (report.total, report.unchanged) == (len(graph), 2)

    other = _fresh(tmp_path, "other.db")
    spoiled = [*graph, {**event, "title": "Open question, reworded"}]
    with pytest.raises(ImportRejected) as caught:
        import_file(other, write_jsonl(tmp_path / "spoiled.jsonl", spoiled))
    assert caught.value.location == f"line {len(spoiled)}"
    position = graph.index(event) + 1
    assert f"event 'ev-2' is already defined by line {position} with different content (differs in: title)" in str(
        caught.value
    )


def test_list_errors_name_the_position_in_the_file(migrated_db: Path, tmp_path: Path) -> None:
    event: Line = {"kind": "event", "id": "ev-9", "result_id": "r-alpha", "event_type": "change", "title": "t"}
    event |= {"recorded_at": T0, "entity_ids": ["zz-missing", "ent-a", "aa-missing"]}

    with pytest.raises(ImportRejected) as caught:
        import_file(migrated_db, write_jsonl(tmp_path / "g.jsonl", [*small_graph(), event]))

    assert caught.value.field == "entity_ids[0]"
    assert "no entity 'zz-missing'" in caught.value.problem


def test_json_stored_with_other_spacing_by_another_writer_is_the_same_content(
    migrated_db: Path, tmp_path: Path
) -> None:
    graph = small_graph()
    import_file(migrated_db, write_jsonl(tmp_path / "g.jsonl", graph))
    with sqlite3.connect(migrated_db) as conn:
        conn.execute(
            "UPDATE source_references SET locator_json = ? WHERE id = 'ref-1'",
            ('{ "order": 7, "message_id": "m-7", "conversation_id": "conv-1", "project_id": "alpha" }',),
        )
        conn.execute('UPDATE summaries SET open_items = \'[ "benchmark", "备份策略" ]\'')
    before = dump(migrated_db)

    report = import_file(migrated_db, write_jsonl(tmp_path / "again.jsonl", graph))

    assert (report.total, report.unchanged) == (0, len(graph))
    assert dump(migrated_db) == before


class _TableSource:
    """A source reading another store: locations name the table and row the line came from."""

    def __init__(self, rows: list[tuple[int, Line]]) -> None:
        self.rows = rows

    def __iter__(self) -> Iterator[tuple[str, LineModel]]:
        for row_id, line in self.rows:
            yield f"table supervision_events row id={row_id}", LINE.validate_python(line)

    def fraction_read(self) -> float | None:
        return None


def test_another_source_plugs_into_the_same_writer_and_names_its_rows(migrated_db: Path, tmp_path: Path) -> None:
    graph = small_graph()
    good = _TableSource(list(enumerate(graph, start=100)))
    conn = open_store(migrated_db, write=True)
    try:
        report = import_lines(conn, migrated_db, good)
        bad_event = {**by_id(graph, "ev-2"), "id": "ev-9", "story_line_id": "sl-beta"}
        with pytest.raises(ImportRejected) as caught:
            import_lines(conn, migrated_db, _TableSource([(7, bad_event)]))
    finally:
        conn.close()

    assert report.total == len(graph)
    assert caught.value.location == "table supervision_events row id=7"
    assert caught.value.field == "story_line_id"
    assert f"but this event belongs to scope {ALPHA_KEY}" in caught.value.problem


@pytest.mark.usefixtures("small_chunks")
def test_a_large_export_round_trips_to_the_same_bytes(migrated_db: Path, tmp_path: Path) -> None:
    import_file(migrated_db, write_jsonl(tmp_path / "chain.jsonl", chain_graph(EVENTS)))
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    export_file(migrated_db, first)
    copy = _fresh(tmp_path, "copy.db")
    import_file(copy, first)
    export_file(copy, second)

    assert first.read_bytes() == second.read_bytes()
    assert content(copy) == content(migrated_db)


def test_an_import_while_another_writer_holds_the_lock_fails_cleanly(migrated_db: Path, tmp_path: Path) -> None:
    graph = write_jsonl(tmp_path / "g.jsonl", small_graph())
    other = sqlite3.connect(migrated_db, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        conn = open_store(migrated_db, write=True)
        conn.execute("PRAGMA busy_timeout = 100")
        try:
            with pytest.raises(
                StoreError, match=r"nothing was written: .* is locked by another writer .* longer than 0.1 seconds"
            ):
                import_lines(conn, migrated_db, JsonlSource(graph))
        finally:
            conn.close()
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert import_file(migrated_db, graph).total == len(small_graph())
