"""An entity revision's own evidence (migrations/0014): stored, imported, exported, upgraded, and shown alike by
search and get_context, with `evidence_basis` saying whose evidence an item lists.

Before, a snapshot row had no evidence list of its own: search showed the demo's March snapshot of Decision A
resting on the May review's `ref-revision-1`, and get_context showed the same row with `[]`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from goodbuddy_fixture import ATLAS, ENT_A, RES0, RES1, RES2, S0, S1, build_goodbuddy
from jsonl_graph import ALPHA_KEY, T0, dump, small_graph, write_jsonl
from mcp import Client
from support import all_pages, client_for, demo_db, migrate_to, ok

from server.contracts.common import Grant
from server.store.errors import ImportRejected
from server.store.exporter import export_file
from server.store.goodbuddy import import_goodbuddy
from server.store.importer import import_file
from server.store.migrate import SCHEMA_VERSION, migrate

pytestmark = pytest.mark.anyio

SEARCH, CONTEXT = "story_graph_search", "story_graph_get_context"
MARCH, MAY = "res-atlas-2026-03", "res-atlas-2026-05"


def _rows(items: list[dict[str, Any]], object_id: str) -> dict[str | None, tuple[list[str], str]]:
    """An entity's items by result id: (source_reference_ids, evidence_basis)."""
    return {
        i["result_id"]: (i["source_reference_ids"], i["evidence_basis"])
        for i in items
        if i["object_ref"] == {"type": "entity", "id": object_id}
    }


async def _timeline(client: Client, entity_id: str) -> list[dict[str, Any]]:
    arguments = {"object_ref": {"type": "entity", "id": entity_id}, "mode": "timeline", "page_size": 20}
    return [item for page in await all_pages(client, CONTEXT, arguments) for item in page["items"]]


# --- the demo's two symptoms, and search and get_context agreeing -----------------------------------------


async def test_search_shows_the_march_snapshot_resting_on_march_evidence_only(tmp_path: Path) -> None:
    async with client_for(demo_db(tmp_path)) as client:
        found = await ok(client, SEARCH, {"query": "Redis session cache", "page_size": 20})

    rows = _rows(found["items"], "ent-decision-a")
    assert rows[MARCH] == (["ref-decision-a-msg", "ref-long-doc"], "row")  # not May's ref-revision-1
    assert rows[None] == (["ref-decision-a-msg", "ref-long-doc", "ref-revision-1"], "row")  # the current projection


async def test_get_context_shows_each_snapshot_with_its_own_evidence_not_an_empty_list(tmp_path: Path) -> None:
    async with client_for(demo_db(tmp_path)) as client:
        items = await _timeline(client, "ent-decision-a")

    rows = _rows(items, "ent-decision-a")
    assert rows[MARCH] == (["ref-decision-a-msg", "ref-long-doc"], "row")
    assert rows[MAY] == (["ref-revision-1"], "row")
    march = next(i for i in items if i["object_ref"]["id"] == "ent-decision-a" and i["result_id"] == MARCH)
    assert orjson.loads(march["content"])["source_reference_ids"] == ["ref-decision-a-msg", "ref-long-doc"]


async def test_a_snapshot_without_a_stored_list_shows_the_entitys_evidence_marked_in_both_tools(
    tmp_path: Path,
) -> None:
    """The edge-box constraint's May snapshot stored no list: both tools show the entity's current evidence, marked
    `object` (never `[]`, never unmarked); get_context's content keeps the stored null."""
    entity_id = "ent-edge-box-constraint"
    current = ["ref-changed-msg", "ref-revision-2"]
    async with client_for(demo_db(tmp_path)) as client:
        found = await all_pages(client, SEARCH, {"query": "Edge boxes cannot run Redis", "object_types": ["entity"]})
        items = await _timeline(client, entity_id)

    searched = _rows([i for page in found for i in page["items"]], entity_id)
    assert searched[MAY] == (current, "object")
    assert _rows(items, entity_id)[MAY] == (current, "object")
    snapshot = next(i for i in items if i["object_ref"]["id"] == entity_id and i["result_id"] == MAY)
    assert orjson.loads(snapshot["content"])["source_reference_ids"] is None


async def test_search_and_get_context_agree_on_every_snapshot_row_of_the_demo(tmp_path: Path) -> None:
    db = demo_db(tmp_path)
    with sqlite3.connect(db) as conn:
        revisions = conn.execute(
            "SELECT v.entity_id, v.result_id, n.canonical_label, v.scope_key FROM entity_revisions AS v"
            " JOIN entities AS n ON n.id = v.entity_id ORDER BY 1, 2"
        ).fetchall()
    assert len(revisions) == 14
    bases: set[str] = set()
    for entity_id, result_id, label, scope_key in revisions:
        project_ids = orjson.loads(scope_key.removeprefix("projects:")) if scope_key != "global" else []
        grant = Grant(default_project=project_ids[0] if project_ids else None)
        scope = {"kind": "projects", "projectIds": project_ids} if project_ids else {"kind": "global"}
        async with client_for(db, grant) as client:
            query = {"query": label, "object_types": ["entity"], "scope": scope}
            found = [i for page in await all_pages(client, SEARCH, query) for i in page["items"]]
            context = [
                i
                for page in await all_pages(
                    client, CONTEXT, {"object_ref": {"type": "entity", "id": entity_id}, "scope": scope}
                )
                for i in page["items"]
            ]
        searched, read = _rows(found, entity_id), _rows(context, entity_id)
        assert searched[result_id] == read[result_id], (entity_id, result_id)
        assert searched[None] == read[None], entity_id
        bases.add(read[result_id][1])
    assert bases == {"row", "object"}  # the demo shows both


async def test_a_leaf_description_standing_in_for_a_row_is_marked_as_showing_the_objects_evidence(
    tmp_path: Path,
) -> None:
    """A later review's leaf describes ev-1, which that review has no row of: search shows the leaf's row with
    ev-1's evidence, which the leaf never stored."""
    lines = small_graph()
    alpha = next(line for line in lines if line["kind"] == "result" and line["id"] == "r-alpha")
    later = {**alpha, "id": "r-alpha-2", "revision": "4"}
    leaf = {
        "kind": "leaf",
        "id": "leaf-2",
        "result_id": "r-alpha-2",
        "recorded_at": T0,
        "facts": [{"object_ref": {"type": "event", "id": "ev-1"}, "description": "a later review's wording"}],
    }
    lines.insert(lines.index(alpha) + 1, later)
    lines.append(leaf)
    db = tmp_path / "graph.db"
    migrate(db)
    import_file(db, write_jsonl(tmp_path / "graph.jsonl", lines))

    async with client_for(db, Grant(default_project="alpha")) as client:
        found = await ok(client, SEARCH, {"query": "later review's wording"})
        own = await ok(client, SEARCH, {"query": "Chose SQLite", "object_types": ["event"]})
        context = await ok(client, CONTEXT, {"object_ref": {"type": "event", "id": "ev-1"}})

    (item,) = [i for i in found["items"] if i["result_id"] == "r-alpha-2"]
    (event,) = [i for i in own["items"] if i["object_ref"]["id"] == "ev-1"]
    assert item["object_ref"] == {"type": "event", "id": "ev-1"}
    assert (item["source_reference_ids"], item["evidence_basis"]) == (event["source_reference_ids"], "object")
    assert event["evidence_basis"] == "row"
    # get_context shows the same leaf description as its own item, by the same rule.
    (described,) = [i for i in context["items"] if i["leaf_id"] == "leaf-2"]
    assert described["object_ref"] == {"type": "event", "id": "leaf:leaf-2:ev-1"}
    assert (described["source_reference_ids"], described["evidence_basis"]) == (item["source_reference_ids"], "object")


async def test_get_context_leaf_descriptions_show_the_objects_evidence_never_an_empty_list(tmp_path: Path) -> None:
    """A leaf stores no evidence of its own (the importer drops the app's): each of Decision A's three leaf
    descriptions shows A's current evidence marked `object`, as search would, not `[]` marked `row` ("none")."""
    async with client_for(demo_db(tmp_path)) as client:
        items = await _timeline(client, "ent-decision-a")
        current = await ok(client, SEARCH, {"query": "ent-decision-a", "object_types": ["entity"]})

    (projection,) = [i for i in current["items"] if i["object_ref"]["id"] == "ent-decision-a" and not i["result_id"]]
    leaves = {i["leaf_id"]: i for i in items if i["row_kind"] == "leaf"}
    assert sorted(leaves) == ["leaf-atlas-2026-03-a", "leaf-atlas-2026-03-b", "leaf-atlas-2026-05-a"]
    for leaf_id, item in leaves.items():
        assert item["object_ref"] == {"type": "entity", "id": f"leaf:{leaf_id}:ent-decision-a"}
        assert (item["source_reference_ids"], item["evidence_basis"]) == (projection["source_reference_ids"], "object")
        assert item["source_reference_count"] == len(projection["source_reference_ids"]) == 3
        assert "source_reference_ids" not in orjson.loads(item["content"])  # the leaf's stored content holds none


# --- interchange -----------------------------------------------------------------------------------------------


def by_id_revision(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The one entity revision of a graph."""
    return next(line for line in lines if line["kind"] == "entity_revision")


def _graph(**revision: Any) -> list[dict[str, Any]]:
    """The small graph, its one entity revision with these fields."""
    lines = small_graph()
    index = lines.index(by_id_revision(lines))
    lines[index] = {**lines[index], **revision}
    return lines


@pytest.mark.parametrize("evidence", [None, [], ["ref-1"]], ids=["not-stored", "stored-empty", "stored"])
def test_a_revisions_evidence_round_trips_and_reimports_unchanged(
    migrated_db: Path, tmp_path: Path, evidence: list[str] | None
) -> None:
    import_file(migrated_db, write_jsonl(tmp_path / "graph.jsonl", _graph(source_reference_ids=evidence)))
    exported = tmp_path / "export.jsonl"
    export_file(migrated_db, exported)

    lines = [orjson.loads(line) for line in exported.read_bytes().splitlines()]
    assert by_id_revision(lines)["source_reference_ids"] == evidence  # null stays null, [] stays []
    with sqlite3.connect(migrated_db) as conn:
        assert conn.execute("SELECT sources_stored FROM entity_revisions").fetchall() == [(int(evidence is not None),)]
    before = dump(migrated_db)
    report = import_file(migrated_db, exported)
    assert (report.total, report.unchanged) == (0, len(lines))
    assert dump(migrated_db) == before


def test_a_revision_without_the_field_is_stored_as_not_stored(migrated_db: Path, tmp_path: Path) -> None:
    lines = small_graph()
    assert "source_reference_ids" not in by_id_revision(lines)
    import_file(migrated_db, write_jsonl(tmp_path / "graph.jsonl", lines))
    export_file(migrated_db, tmp_path / "export.jsonl")
    exported = [orjson.loads(line) for line in (tmp_path / "export.jsonl").read_bytes().splitlines()]
    assert by_id_revision(exported)["source_reference_ids"] is None


@pytest.mark.parametrize(
    ("stored", "again"), [(None, []), ([], None), (["ref-1"], [])], ids=["null-to-empty", "empty-to-null", "shrunk"]
)
def test_unknown_and_empty_evidence_are_different_content(
    migrated_db: Path, tmp_path: Path, stored: list[str] | None, again: list[str] | None
) -> None:
    import_file(migrated_db, write_jsonl(tmp_path / "graph.jsonl", _graph(source_reference_ids=stored)))
    changed = {**by_id_revision(_graph()), "source_reference_ids": again}

    with pytest.raises(ImportRejected) as caught:
        import_file(migrated_db, write_jsonl(tmp_path / "changed.jsonl", [changed]))

    assert "(differs in: source_reference_ids)" in caught.value.problem


@pytest.mark.parametrize(
    ("evidence", "field", "problem"),
    [
        (["ref-1", "ref-missing"], "source_reference_ids[1]", "no source_reference 'ref-missing'"),
        (["ref-2"], "source_reference_ids[0]", 'belongs to scope projects:["beta"]'),
        (["ref-1", "ref-1"], "source_reference_ids[1]", "more than once"),
    ],
    ids=["missing", "other-scope", "repeated"],
)
def test_a_revisions_evidence_is_checked_like_an_entitys(
    migrated_db: Path, tmp_path: Path, evidence: list[str], field: str, problem: str
) -> None:
    lines = _graph(source_reference_ids=evidence)
    number = lines.index(by_id_revision(lines)) + 1
    with pytest.raises(ImportRejected) as caught:
        import_file(migrated_db, write_jsonl(tmp_path / "bad.jsonl", lines))

    assert (caught.value.location, caught.value.field) == (f"line {number}", field)
    assert problem in caught.value.problem


def test_writing_a_revisions_evidence_bumps_the_data_revision(migrated_db: Path, tmp_path: Path) -> None:
    """Raw SQL writers keep cursors honest too: the new table has the data-revision triggers object_sources has."""
    import_file(migrated_db, write_jsonl(tmp_path / "graph.jsonl", _graph(source_reference_ids=[])))
    with sqlite3.connect(migrated_db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        revision = "SELECT data_revision FROM scopes WHERE scope_key = 'projects:[\"alpha\"]'"
        steps = [conn.execute(revision).fetchone()[0]]
        for sql in (
            "INSERT INTO entity_revision_sources (entity_id, result_id, source_reference_id, scope_key)"
            " SELECT entity_id, result_id, 'ref-1', scope_key FROM entity_revisions",
            "UPDATE entity_revision_sources SET source_reference_id = 'ref-1'",
            "DELETE FROM entity_revision_sources",
        ):
            conn.execute(sql)
            steps.append(conn.execute(revision).fetchone()[0])
    assert steps == sorted(set(steps)) and len(steps) == 4


# --- upgrading a version-13 database ---------------------------------------------------------------------------


async def test_upgrading_a_version_13_database_keeps_its_revisions_as_not_stored(tmp_path: Path) -> None:
    """A revision written before version 14 has no list: unknown after the upgrade, shown as the entity's evidence
    marked `object`, and exported as null (not [])."""
    path = tmp_path / "v13.db"
    with sqlite3.connect(path) as conn:
        migrate_to(conn, 13)
        conn.executescript(
            f"""
            INSERT INTO projects (id, name) VALUES ('alpha', 'Alpha');
            INSERT INTO scopes (scope_key, kind) VALUES ('{ALPHA_KEY}', 'projects');
            INSERT INTO scope_projects (scope_key, project_id) VALUES ('{ALPHA_KEY}', 'alpha');
            INSERT INTO results (id, scope_key, review_generated_at, recorded_at)
              VALUES ('r-alpha', '{ALPHA_KEY}', '{T0}', '{T0}');
            INSERT INTO story_lines (id, scope_key, topic, recorded_at)
              VALUES ('sl-a', '{ALPHA_KEY}', 'Storage', '{T0}');
            INSERT INTO entities (id, story_line_id, scope_key, canonical_label, updated_at)
              VALUES ('ent-a', 'sl-a', '{ALPHA_KEY}', 'Use SQLite', '{T0}');
            INSERT INTO entity_revisions (entity_id, result_id, scope_key, canonical_label, recorded_at)
              VALUES ('ent-a', 'r-alpha', '{ALPHA_KEY}', 'Use SQLite', '{T0}');
            INSERT INTO source_references (id, result_id, scope_key, source_type, original_source_id, fragment,
                                           recorded_at)
              VALUES ('ref-1', 'r-alpha', '{ALPHA_KEY}', 'conversation', 'msg-1', 'Use SQLite', '{T0}');
            INSERT INTO object_sources (object_type, object_id, source_reference_id, scope_key)
              VALUES ('entity', 'ent-a', 'ref-1', '{ALPHA_KEY}');
            """
        )

    assert migrate(path) == (13, SCHEMA_VERSION)

    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT entity_id, result_id, sources_stored FROM entity_revisions").fetchall() == [
            ("ent-a", "r-alpha", 0)
        ]
        assert conn.execute("SELECT count(*) FROM entity_revision_sources").fetchone()[0] == 0
    async with client_for(path, Grant(default_project="alpha")) as client:
        page = await ok(client, CONTEXT, {"object_ref": {"type": "entity", "id": "ent-a"}})
        found = await ok(client, SEARCH, {"query": "Use SQLite", "object_types": ["entity"]})
    assert _rows(page["items"], "ent-a") == _rows(found["items"], "ent-a")
    assert _rows(page["items"], "ent-a")["r-alpha"] == (["ref-1"], "object")
    export_file(path, tmp_path / "export.jsonl")
    exported = [orjson.loads(line) for line in (tmp_path / "export.jsonl").read_bytes().splitlines()]
    assert by_id_revision(exported)["source_reference_ids"] is None


# --- GoodBuddy -------------------------------------------------------------------------------------------------


async def test_goodbuddy_snapshot_entities_keep_the_evidence_their_result_saved(tmp_path: Path) -> None:
    """Decision A's first result saved it on S0; the current row (and the later snapshots) cite S1."""
    app = build_goodbuddy(tmp_path / "assistant.db")
    db = tmp_path / "graph.db"
    migrate(db)
    import_goodbuddy(db, app)

    async with client_for(db, Grant(default_project=ATLAS)) as client:
        page = await ok(client, CONTEXT, {"object_ref": {"type": "entity", "id": ENT_A}, "page_size": 50})
        found = await all_pages(client, SEARCH, {"query": "Use SQLite", "object_types": ["entity"]})
    read = _rows(page["items"], ENT_A)
    searched = _rows([i for p in found for i in p["items"]], ENT_A)
    assert read[RES0] == searched[RES0] == ([S0], "row")
    assert read[RES1] == searched[RES1] == ([S1], "row")
    assert read[None] == ([S1], "row")


async def test_goodbuddy_snapshot_entities_without_a_readable_list_have_unknown_evidence(tmp_path: Path) -> None:
    app = build_goodbuddy(tmp_path / "assistant.db")
    with sqlite3.connect(app) as conn:  # RES0's snapshot loses the field, RES1's holds no JSON array
        for result_id, value in ((RES0, None), (RES1, '"not a list"')):
            path = "$.entities[0].source_reference_ids_json"
            sql = "json_remove(graph_snapshot_json, ?)" if value is None else "json_set(graph_snapshot_json, ?, ?)"
            params = (path,) if value is None else (path, value)
            conn.execute(
                f"UPDATE supervision_results SET graph_snapshot_json = {sql} WHERE id = ?", (*params, result_id)
            )
    db = tmp_path / "graph.db"
    migrate(db)
    _, notes = import_goodbuddy(db, app)

    with sqlite3.connect(db) as conn:
        stored = dict(
            conn.execute("SELECT result_id, sources_stored FROM entity_revisions WHERE entity_id = ?", (ENT_A,))
        )
    assert (stored[RES0], stored[RES1], stored[RES2]) == (0, 0, 1)
    assert any("source_reference_ids_json is not a JSON array of ids" in note for note in notes)


def test_resyncing_a_goodbuddy_graph_imported_before_version_14_fills_in_the_revisions_evidence(
    tmp_path: Path,
) -> None:
    app = build_goodbuddy(tmp_path / "assistant.db")
    db = tmp_path / "graph.db"
    migrate(db)
    import_goodbuddy(db, app)
    with sqlite3.connect(db) as conn:  # as an import before version 14 left it: no revision has a list
        conn.execute("DELETE FROM entity_revision_sources")
        conn.execute("UPDATE entity_revisions SET sources_stored = 0")

    report, _ = import_goodbuddy(db, app)

    assert report.updated == {"entity_revision": 6}
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT min(sources_stored) FROM entity_revisions").fetchone()[0] == 1
        first = "SELECT source_reference_id FROM entity_revision_sources WHERE entity_id = ? AND result_id = ?"
        assert conn.execute(first, (ENT_A, RES0)).fetchall() == [(S0,)]
    assert import_goodbuddy(db, app)[0].updated == {}
