from __future__ import annotations

import gzip
import sqlite3
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from jsonl_graph import (
    ALPHA_KEY,
    LONG_TEXT,
    T0,
    T1,
    Line,
    by_id,
    content,
    dump,
    file_hash,
    nested_json,
    revisions,
    small_graph,
    stats_table,
    write_jsonl,
)

from server.contracts.interchange import KIND_ORDER
from server.store.demo import demo_path, write_demo
from server.store.errors import DatabaseUnusable, ImportRejected, StoreError
from server.store.exporter import export_file
from server.store.importer import CHUNK_CODE_POINTS, import_file
from server.store.jsonl import JsonLinesFile
from server.store.migrate import migrate
from server.store.stats import stats_text


def _imported(db: Path, tmp_path: Path, lines: list[Line]) -> Path:
    import_file(db, write_jsonl(tmp_path / "graph.jsonl", lines))
    return db


def _fresh(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    migrate(path)
    return path


def test_export_then_import_into_a_fresh_database_exports_the_same_bytes(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, small_graph())
    first = tmp_path / "a.jsonl"
    export_file(migrated_db, first)
    other = _fresh(tmp_path, "b.db")
    import_file(other, first)
    second = tmp_path / "b.jsonl"
    export_file(other, second)

    assert first.read_bytes() == second.read_bytes()
    assert content(migrated_db) == content(other)


def test_lines_may_come_in_any_order_in_the_file(migrated_db: Path, tmp_path: Path) -> None:
    in_order = _fresh(tmp_path, "ordered.db")
    _imported(in_order, tmp_path, small_graph())
    import_file(migrated_db, write_jsonl(tmp_path / "reversed.jsonl", list(reversed(small_graph()))))

    assert content(migrated_db) == content(in_order)


def test_importing_the_same_file_twice_changes_nothing(migrated_db: Path, tmp_path: Path) -> None:
    graph = write_jsonl(tmp_path / "graph.jsonl", small_graph())
    first = import_file(migrated_db, graph)
    before, revisions_before = dump(migrated_db), revisions(migrated_db)

    again = import_file(migrated_db, graph)

    assert (first.total, first.unchanged) == (len(small_graph()), 0)
    assert (again.total, again.unchanged) == (0, len(small_graph()))
    assert dump(migrated_db) == before
    assert revisions(migrated_db) == revisions_before


def test_importing_an_export_into_its_own_database_changes_nothing(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, small_graph())
    exported = tmp_path / "export.jsonl"
    export_file(migrated_db, exported)
    before = dump(migrated_db)

    report = import_file(migrated_db, exported)

    assert report.total == 0
    assert dump(migrated_db) == before


def test_the_import_report_counts_new_lines_per_kind(migrated_db: Path, tmp_path: Path) -> None:
    report = import_file(migrated_db, write_jsonl(tmp_path / "g.jsonl", small_graph()))

    assert report.written["event"] == 2
    assert report.written["source_version"] == 2
    assert str(report).startswith(f"imported {len(small_graph())} lines (2 project, 3 scope, 3 result")
    assert str(report).endswith(f"into {migrated_db}; 0 unchanged")


def test_source_text_is_stored_in_chunks_of_4096_code_points(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, small_graph())
    with sqlite3.connect(migrated_db) as conn:
        length = conn.execute("SELECT length FROM source_versions WHERE version = 'v2'").fetchone()[0]
        chunks = conn.execute("SELECT start, text FROM source_chunks WHERE version = 'v2' ORDER BY start").fetchall()

    assert length == len(LONG_TEXT) == 5000
    assert [start for start, _ in chunks] == [0, CHUNK_CODE_POINTS]
    assert [len(text) for _, text in chunks] == [4096, 904]
    assert "".join(text for _, text in chunks) == LONG_TEXT


def test_rows_carry_the_scope_of_their_result_or_story_line(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, small_graph())
    with sqlite3.connect(migrated_db) as conn:
        scopes = conn.execute(
            "SELECT DISTINCT scope_key FROM (SELECT scope_key FROM events"
            " UNION ALL SELECT scope_key FROM event_entities UNION ALL SELECT scope_key FROM object_sources"
            " UNION ALL SELECT scope_key FROM fact_links"
            " UNION ALL SELECT scope_key FROM entity_changes)"
        ).fetchall()
        entity_scope = conn.execute("SELECT scope_key FROM entities WHERE id = 'ent-b'").fetchone()[0]
        change_evidence = conn.execute(
            "SELECT object_id FROM object_sources WHERE object_type = 'entity_change'"
        ).fetchall()

    assert scopes == [(ALPHA_KEY,)]
    assert entity_scope == 'projects:["beta"]'
    assert change_evidence == [("ent-a#decided",)]


def test_locators_and_coverage_are_stored_as_compact_json(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, small_graph())
    with sqlite3.connect(migrated_db) as conn:
        locators = dict(conn.execute("SELECT id, locator_json FROM source_references").fetchall())
        coverage = dict(conn.execute("SELECT id, coverage_json FROM results").fetchall())
        open_items = conn.execute("SELECT open_items FROM summaries").fetchone()[0]

    assert locators == {
        "ref-1": '{"project_id":"alpha","conversation_id":"conv-1","message_id":"m-7","order":7}',
        "ref-2": None,
    }
    assert coverage["r-global"] is None
    assert orjson.loads(coverage["r-beta"]) == {"kind": "legacy_count", "count": 4}
    assert orjson.loads(open_items) == ["benchmark", "备份策略"]


def test_a_project_set_scope_is_stored_under_its_sorted_key(migrated_db: Path, tmp_path: Path) -> None:
    pair = {"kind": "projects", "projectIds": ["beta", "alpha"]}
    lines = [
        *small_graph(),
        {"kind": "scope", "scope": pair},
        {"kind": "result", "id": "r-pair", "scope": pair, "review_generated_at": T0, "recorded_at": T0},
    ]
    _imported(migrated_db, tmp_path, lines)
    before = dump(migrated_db)
    # The same set in another order is the same scope, so nothing differs.
    import_file(
        migrated_db,
        write_jsonl(tmp_path / "again.jsonl", [{**lines[-1], "scope": {**pair, "projectIds": ["alpha", "beta"]}}]),
    )

    with sqlite3.connect(migrated_db) as conn:
        members = conn.execute('SELECT project_id FROM scope_projects WHERE scope_key = \'projects:["alpha","beta"]\'')
        assert [row[0] for row in members] == ["alpha", "beta"]
    assert dump(migrated_db) == before


def _replace(index: int, line: Line) -> Callable[[list[Line | str]], list[Line | str]]:
    def change(lines: list[Line | str]) -> list[Line | str]:
        return [*lines[:index], line, *lines[index + 1 :]]

    return change


def _append(*extra: Line | str) -> Callable[[list[Line | str]], list[Line | str]]:
    return lambda lines: [*lines, *extra]


def _event(**changes: object) -> Line:
    base: Line = {"kind": "event", "id": "ev-9", "result_id": "r-alpha", "event_type": "change", "title": "New"}
    return {**base, "recorded_at": T0, **changes}


GRAPH = small_graph()
N = len(GRAPH)
# (how to spoil the file, line number, field, words the problem must contain)
BAD_IMPORTS = {
    "malformed JSON": (_append('{"kind": "project", "id": '), N + 2, "", "malformed JSON"),
    "unknown kind": (_append({"kind": "storyline", "id": "s-1"}), N + 2, "kind", "unknown kind 'storyline'"),
    "missing field": (_append({"kind": "project", "id": "gamma"}), N + 2, "name", "required field is missing"),
    "time without offset": (
        _append(_event(event_time={"start": "2026-03-01T10:00:00"})),
        N + 2,
        "event_time.start",
        "has no UTC offset",
    ),
    "unknown field": (_append(_event(colour="red")), N + 2, "colour", "unknown field"),
    "reference to a missing object": (
        _append(_event(entity_ids=["ent-a", "ent-missing"])),
        N + 2,
        "entity_ids[1]",
        "no entity 'ent-missing'",
    ),
    "forward reference to a missing object": (
        _append({**by_id(GRAPH, "rel-1"), "id": "rel-9", "to_ref": {"type": "summary", "id": "sum-9"}}),
        N + 2,
        "to_ref",
        "no summary 'sum-9'",
    ),
    "link across scopes": (
        _append(_event(entity_ids=["ent-b"])),
        N + 2,
        "entity_ids[0]",
        "links across scopes are not allowed",
    ),
    "evidence from another scope": (
        _append(_event(source_reference_ids=["ref-2"])),
        N + 2,
        "source_reference_ids[0]",
        'belongs to scope projects:["beta"]',
    ),
    "undeclared scope": (
        _append(
            {
                "kind": "story_line",
                "id": "sl-x",
                "scope": {"kind": "projects", "projectIds": ["beta", "alpha"]},
                "topic": "t",
                "recorded_at": T0,
            }
        ),
        N + 2,
        "scope",
        'scope projects:["alpha","beta"] is not declared',
    ),
    "id reused with different content in the file": (
        _append({"kind": "project", "id": "beta", "name": "Another beta"}),
        N + 2,
        "id",
        "already defined by line 2 with different content (differs in: name); keep one of the two lines",
    ),
    "source version missing": (
        _replace(10, {**GRAPH[10], "current_version": "v9"}),
        11,
        "current_version",
        "no version 'v9'",
    ),
    "duplicate in a list": (_append(_event(entity_ids=["ent-a", "ent-a"])), N + 2, "entity_ids[1]", "more than once"),
    "integer beyond 64 bits": (
        _append({**by_id(GRAPH, "ref-1"), "id": "ref-9", "fragment": {"text": "first text", "start": 6, "end": 2**63}}),
        N + 2,
        "fragment.end",
        "less than or equal to 9223372036854775807",
    ),
    "a line of the memory server's graph": (
        _append({"type": "entity", "name": "John", "entityType": "person", "observations": []}),
        N + 2,
        "kind",
        "a line of the memory server's graph: import it with --from memory-jsonl --project P",
    ),
    "a key twice in one object": (
        _append('{"kind": "project", "id": "gamma", "name": "Gamma", "id": "delta"}'),
        N + 2,
        "id",
        "the key 'id' appears twice in one JSON object",
    ),
    "a key twice in a nested object, spaced and escaped": (
        _append(
            '{"kind" : "memory_item", "id": "m-9", "body": "a \\u0022quoted\\"", "updated_at": "2026-03-01T10:00:00Z",'
            ' "memory_type": {"x": 1, "x": 2}}'
        ),
        N + 2,
        "x",
        "the key 'x' appears twice in one JSON object",
    ),
    "an id holding U+0000": (
        _append(_event(id="ev\u00009")),
        N + 2,
        "id",
        "U+0000",
    ),
    "a link to an id holding U+0000": (
        _append(_event(entity_ids=["ent-a\u0000b"])),
        N + 2,
        "entity_ids[0]",
        "U+0000",
    ),
    "a fact ref to an id holding U+0000": (
        _append({**by_id(GRAPH, "sum-1"), "id": "sum-9", "fact_refs": [{"type": "event", "id": "ev-1\u0000x"}]}),
        N + 2,
        "fact_refs[0].id",
        "U+0000",
    ),
    "a scope of a project id holding U+0000": (
        _append({"kind": "scope", "scope": {"kind": "projects", "projectIds": ["alpha\u0000x"]}}),
        N + 2,
        "scope.projectIds[0]",
        "U+0000",
    ),
    "a processed range without its end": (
        _append(
            {**by_id(GRAPH, "r-beta"), "id": "r-9", "coverage": {"kind": "detailed", "processed_range": {"from": T0}}}
        ),
        N + 2,
        "coverage.processed_range",
        "needs both 'from' and 'to'",
    ),
    "a summary interval that ends before it starts": (
        _append({**by_id(GRAPH, "sum-1"), "id": "sum-9", "interval": {"from": T1, "to": T0}}),
        N + 2,
        "interval",
        "'to' is before 'from'",
    ),
    "source text holding U+0000": (
        _append(
            {"kind": "source_version", "source_id": "src-1", "version": "v9", "text": "a\u0000b", "recorded_at": T0}
        ),
        N + 2,
        "text",
        "U+0000",
    ),
    "a leaf's description holding U+0000": (
        _append(
            {
                **by_id(GRAPH, "leaf-1"),
                "id": "leaf-9",
                "facts": [{"object_ref": {"type": "event", "id": "ev-1"}, "description": "cut\u0000here"}],
            }
        ),
        N + 2,
        "facts[0].description",
        "U+0000",
    ),
    "a number written as text": (
        _append({**by_id(GRAPH, "ref-1"), "id": "ref-9", "fragment": {"text": "first text", "start": "6", "end": 16}}),
        N + 2,
        "fragment.start",
        "Input should be a valid integer",
    ),
    "true or false for a number": (
        _append({**by_id(GRAPH, "ref-1"), "id": "ref-9", "fragment": {"text": "first text", "start": False}}),
        N + 2,
        "fragment.start",
        "Input should be a valid integer",
    ),
    "text for true or false": (
        _append({"kind": "story_event", "story_id": "st-9", "event_id": "ev-1", "primary": "false"}),
        N + 2,
        "primary",
        "Input should be a valid boolean",
    ),
    "external locator nested too deep": (
        _append(
            orjson.dumps({**by_id(GRAPH, "ref-1"), "id": "ref-9", "locator": {"external": "@deep"}})
            .decode()
            .replace('"@deep"', nested_json(300))
        ),
        N + 2,
        "locator.external",
        "nested more than 100 levels deep",
    ),
}


@pytest.mark.parametrize("case", list(BAD_IMPORTS), ids=list(BAD_IMPORTS))
def test_a_bad_line_aborts_the_import_naming_line_and_field_and_writes_nothing(
    case: str, migrated_db: Path, tmp_path: Path
) -> None:
    spoil, line_number, field, problem = BAD_IMPORTS[case]
    _imported(migrated_db, tmp_path, [GRAPH[0]])
    # A new, valid line before the bad one must not be written either.
    lines = spoil([*GRAPH[:N], {"kind": "project", "id": "gamma", "name": "Gamma"}])
    bad_file = write_jsonl(tmp_path / "bad.jsonl", lines)
    before, hash_before = dump(migrated_db), file_hash(migrated_db)

    with pytest.raises(ImportRejected) as caught:
        import_file(migrated_db, bad_file)

    assert (caught.value.location, caught.value.field) == (f"line {line_number}", field)
    assert problem in caught.value.problem
    assert str(caught.value).startswith(f"import aborted, nothing was written: line {line_number}")
    assert dump(migrated_db) == before
    assert file_hash(migrated_db) == hash_before


def test_an_id_stored_with_different_content_is_refused(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, small_graph())
    changed = {**by_id(GRAPH, "ev-1"), "title": "Chose Postgres after all"}
    before = dump(migrated_db)

    with pytest.raises(ImportRejected) as caught:
        import_file(migrated_db, write_jsonl(tmp_path / "changed.jsonl", [changed]))

    assert (caught.value.location, caught.value.field) == ("line 1", "id")
    assert caught.value.problem == (
        "event 'ev-1' is already defined by the database with different content (differs in: title); this import"
        " does not change it: give the new content its own id, or import into a new database"
    )
    assert dump(migrated_db) == before


def test_importing_into_a_missing_database_asks_to_migrate_first(tmp_path: Path) -> None:
    graph = write_jsonl(tmp_path / "g.jsonl", small_graph())

    with pytest.raises(DatabaseUnusable, match="does not exist; create it with `story-graph-mcp db migrate --db "):
        import_file(tmp_path / "missing.db", graph)
    assert not (tmp_path / "missing.db").exists()


def test_importing_a_missing_file_is_one_clear_error(migrated_db: Path, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"cannot read .*nope\.jsonl"):
        import_file(migrated_db, tmp_path / "nope.jsonl")


def test_an_export_that_fails_midway_leaves_no_partial_file_and_the_old_file_as_it_was(
    migrated_db: Path, tmp_path: Path
) -> None:
    _imported(migrated_db, tmp_path, small_graph())
    with sqlite3.connect(migrated_db) as conn:  # another writer stored a line the interchange refuses
        conn.execute("UPDATE memory_items SET updated_at = 'yesterday' WHERE id = 'mem-2'")
    out = tmp_path / "backup.jsonl"
    out.write_bytes(b"the previous backup\n")

    with pytest.raises(StoreError, match="stored memory_item 'mem-2' is not a valid interchange line"):
        export_file(migrated_db, out)
    assert out.read_bytes() == b"the previous backup\n"
    assert not (tmp_path / "backup.jsonl.partial").exists()


def test_blank_lines_are_skipped_but_counted(migrated_db: Path, tmp_path: Path) -> None:
    path = tmp_path / "blank.jsonl"
    path.write_bytes(b'{"kind": "project", "id": "a", "name": "A"}\n\n   \n{"kind": "project", "id": "b"}\n')

    with pytest.raises(ImportRejected) as caught:
        import_file(migrated_db, path)

    assert (caught.value.location, caught.value.field) == ("line 4", "name")


def _database_bytes(path: Path) -> bytes:
    migrate(path)
    return path.read_bytes()


PROJECT_LINE = '{"kind": "project", "id": "a", "name": "Café 咖啡"}\n'
# A file that is not UTF-8 JSON Lines text: (its bytes, given a folder; the error must say what it is and what to do)
NOT_JSONL_TEXT: dict[str, tuple[Callable[[Path], bytes], str, str]] = {
    "gzip-compressed": (lambda _: gzip.compress(PROJECT_LINE.encode()), "gzip-compressed", "gunzip"),
    "a SQLite database": (
        lambda folder: migrate(folder / "x.db") and (folder / "x.db").read_bytes(),
        "SQLite",
        "--from",
    ),
    "UTF-16": (lambda _: PROJECT_LINE.encode("utf-16"), "UTF-16", "iconv -f UTF-16 -t UTF-8"),
    # Without a byte-order mark (iconv -t UTF-16LE, some Windows tools): was "malformed JSON at column 2".
    "UTF-16LE without a BOM": (lambda _: PROJECT_LINE.encode("utf-16-le"), "UTF-16", "iconv -f UTF-16LE -t UTF-8"),
    "UTF-16BE without a BOM": (lambda _: PROJECT_LINE.encode("utf-16-be"), "UTF-16", "iconv -f UTF-16BE -t UTF-8"),
    "Windows-1252": (
        lambda _: PROJECT_LINE.replace(" 咖啡", "").encode("cp1252"),
        "not UTF-8",
        "iconv -f WINDOWS-1252",
    ),
    "GBK": (lambda _: PROJECT_LINE.encode("gbk"), "not UTF-8", "-f GBK"),
    "a JSON array of objects": (
        lambda _: b"[" + PROJECT_LINE.strip().encode() + b", " + PROJECT_LINE.strip().encode() + b"]\n",
        "a JSON array",
        "jq -c '.[]'",
    ),
    "lines ended by CR alone": (
        lambda _: PROJECT_LINE.replace("\n", "\r").encode() * 2,
        "ends lines with CR alone",
        "tr '\\r' '\\n'",
    ),
    "two objects on one line": (
        lambda _: PROJECT_LINE.strip().encode() * 2 + b"\n",
        "more than one JSON value on this line",
        "one object per line",
    ),
    "a lone surrogate escape": (lambda _: PROJECT_LINE.replace("咖啡", "\\ud83d").encode(), "surrogate", "\\ufffd"),
}


@pytest.mark.parametrize("case", list(NOT_JSONL_TEXT), ids=list(NOT_JSONL_TEXT))
def test_a_file_that_is_not_utf8_json_lines_is_refused_saying_what_it_is_and_what_to_do(
    case: str, migrated_db: Path, tmp_path: Path
) -> None:
    make, what, fix = NOT_JSONL_TEXT[case]
    path = tmp_path / "graph.jsonl"
    path.write_bytes(make(tmp_path))

    with pytest.raises(ImportRejected) as caught:
        import_file(migrated_db, path)

    assert caught.value.location == "line 1"
    assert what in caught.value.problem
    assert fix in caught.value.problem


def test_a_line_longer_than_the_limit_is_refused_before_it_is_held_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "one-line.json"
    path.write_bytes(b'{"kind": "project", "id": "a", "name": "A"}\n[' + b'{"kind": "project"}, ' * 100 + b"{}]")
    lines = JsonLinesFile(path, max_line=1000)

    with pytest.raises(ImportRejected) as caught:
        list(lines)

    assert caught.value.location == "line 2"
    assert caught.value.problem.startswith("longer than 1,000 bytes, the most a line may hold")
    assert lines.fraction_read() == (44 + 1001) / path.stat().st_size  # read no further than the limit


def test_the_demo_is_written_to_a_new_file_only(tmp_path: Path) -> None:
    existing = tmp_path / "taken.db"
    existing.write_bytes(b"")

    with pytest.raises(StoreError, match="already exists"):
        write_demo(existing)


@pytest.mark.skipif(not demo_path().is_file(), reason="the demo graph has not been written yet")
def test_the_demo_graph_imports_and_exports_stably(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    write_demo(db)
    first, second = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    export_file(db, first)
    again = _fresh(tmp_path, "again.db")
    import_file(again, first)
    export_file(again, second)

    assert first.read_bytes() == second.read_bytes()
    assert import_file(db, first).total == 0


def test_the_documented_example_lines_import_and_cover_every_kind(migrated_db: Path, tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "interchange.md").read_text(encoding="utf-8")
    example = doc.split("## One line of each kind", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "example.jsonl"
    path.write_text(example, encoding="utf-8")

    report = import_file(migrated_db, path)

    assert list(report.written) == list(KIND_ORDER)
    assert set(report.written.values()) == {1}


def test_stats_count_objects_per_scope_and_report_revisions(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, small_graph())

    text = stats_text(migrated_db)

    header, rows = stats_table(text)
    assert header == ["global", ALPHA_KEY, 'projects:["beta"]', "total"]
    assert rows["events"] == ["0", "2", "0", "2"]
    assert rows["entities"] == ["0", "1", "1", "2"]
    assert rows["memory items"] == ["1", "1", "0", "2"]
    stored = revisions(migrated_db)
    assert rows["data revision"] == [str(stored[key]) for key in ("global", ALPHA_KEY, 'projects:["beta"]')]
    # The two memory items (a Global one and alpha's) count in the memory revisions only (migrations/0015), each in
    # its own scope's, the Global one also in the graph's Global memory revision (migrations/0016).
    assert rows["memory revision"] == ["1", "1", "0"]
    assert f"graph data revision: {stored['graph']}, memory revision: 2, Global memory revision: 1\n" in text
    assert stored["memory:graph"] == 2 and stored["global memory:graph"] == 1
    assert "overall: projects 2, scopes 3, sources 1, source versions 2, memory items 2" in text
