"""Lookups by id and get_context's keyset sections stay on an index, whatever the scope holds (no ANALYZE
statistics are assumed)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from server.reader import context, context_rows_sql, context_stories, context_summary, scope, search_sql
from server.reader.context_arms import ARMS, Arm, BoundArm, Candidate, Mode, sort_key
from server.reader.fold import narrow
from server.reader.objects import ENTITY_EVIDENCE, LEAF_ROWS, OBJECT_ROWS, SOURCE_REFERENCE_IDS
from server.store import search_index

PARAMS = {"ids": '["x"]', "scope_key": "global", "object_type": "event"}
SELECTION = {
    "locate " + object_type: sql for object_type, sql in context.LOCATE.items()
} | {
    name: getattr(module, name)
    for module, names in (
        (context, ("LOCATE_LEAF_FACT", "EVENT_IDS_OF_ENTITIES", "ENTITY_IDS_OF_EVENTS", "SUMMARY_IDS_LISTING",
                   "OBJECTS_BACKED_BY")),
        # Every query of context_rows (its own module; the underscored names are fragments).
        (context_rows_sql, tuple(n for n in vars(context_rows_sql) if n.isupper() and not n.startswith("_"))),
        (context_stories, ("STORY_EVENTS", "STATE_EVENT", "STORIES_BY_ID", "THREAD_IDS", "RELATED_STORIES",
                           "EXPERIENCES_BY_ID", "EXPERIENCE_EVENTS")),
        (context_summary, ("SOURCE_STATES",)),
    )
    for name in names
}  # fmt: skip


@pytest.mark.parametrize(
    "sql",
    [*OBJECT_ROWS.values(), LEAF_ROWS, SOURCE_REFERENCE_IDS, ENTITY_EVIDENCE],
    ids=[*OBJECT_ROWS, "leaf", "evidence", "entity and revision evidence"],
)
def test_object_row_lookups_never_scan_a_graph_table(migrated_db: Path, sql: str) -> None:
    with sqlite3.connect(migrated_db) as conn:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, PARAMS)]
    scans = [step for step in plan if step.startswith("SCAN") and "json_each" not in step]
    assert scans == [], plan


@pytest.mark.parametrize("sql", SELECTION.values(), ids=list(SELECTION))
def test_get_context_selection_lookups_never_scan_a_graph_table(migrated_db: Path, sql: str) -> None:
    """The selection of a large neighbourhood is read by index lookups from the target outwards."""
    values = {"id": "x", "entity_id": "x", "key": "k", "leaf_id": "l", "object_id": "x", "source_reference_id": "r",
              "anywhere": 0, "projects": '["p"]', "with_global": 1}  # fmt: skip
    params = {name: (PARAMS | values)[name] for name in re.findall(r":(\w+)", sql)}
    with sqlite3.connect(migrated_db) as conn:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
    # json_each is the id list; `k` is STORY_EVENTS' own subquery of a story's links, already narrowed by index.
    scans = [step for step in plan if step.startswith("SCAN") and "json_each" not in step and step != "SCAN k"]
    assert scans == [], plan


@pytest.mark.parametrize("arm", ARMS, ids=[arm.name for arm in ARMS])
@pytest.mark.parametrize("mode", ["current", "timeline"])
def test_every_keyset_page_reads_its_section_in_index_order(migrated_db: Path, arm: Arm, mode: Mode) -> None:
    """A page of a section reads only the rows after its position: the order comes from an index, never from
    sorting the section (no temporary b-tree), on the first page (no position) as on any later one."""
    bound = BoundArm(arm, {"id": "x", "object_type": "entity", "scope_key": "global"})
    for time in (None, "2026-01-01T00:00:00.000Z"):
        position = sort_key(Candidate(arm.role, arm.kind, arm.object_type, "x", "r", time, "global"), mode)
        for after in (None, position):
            for sql, params in bound.queries(mode, after, 11):
                with sqlite3.connect(migrated_db) as conn:
                    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
                assert not [step for step in plan if "TEMP B-TREE" in step or step.startswith("SCAN")], (sql, plan)


@pytest.mark.parametrize("basis", sorted(search_sql.IN_RANGE))
def test_a_time_filtered_search_reads_item_times_from_their_narrow_index(migrated_db: Path, basis: str) -> None:
    """A time filter looks each candidate's times up in search_items_times, never in the wide item rows."""
    filters = search_sql.Filters(1, None, basis, ("2025-03-01T00:00:00.000Z", "2025-03-31T23:59:59.999Z"))
    bounds = {"expression": '"cache"', "low": 0, "high": 1, "limit": 11, "cap": 10_001}
    params = bounds | search_sql.filter_parameters(filters)
    with sqlite3.connect(migrated_db) as conn:
        for template in (search_sql.RANGE_PAGE, search_sql.CAPPED_COUNT):
            sql = search_sql.statement(template, filters, [])
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
            assert any("COVERING INDEX search_items_times" in step for step in plan), plan


def test_read_sources_lookup_of_an_id_that_is_not_a_reference_stays_on_indexes(migrated_db: Path) -> None:
    """source_not_found looks up the references carrying the id (a source, message, task or object id)."""
    from server.reader.source_rows import REFERENCES_CARRYING

    with sqlite3.connect(migrated_db) as conn:
        params = {"id": "x", "scope_key": "global", "limit": 10}
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + REFERENCES_CARRYING, params)]
    assert [step for step in plan if step.startswith("SCAN") and "SUBQUERY" not in step] == [], plan


def test_where_a_reference_id_or_a_near_id_is_stored_is_one_primary_key_lookup(migrated_db: Path) -> None:
    """source_not_found and scope_required look up the id sent and each of its near ids (trimmed, lower and upper
    case: server.reader.scope.near_ids) by the reference's primary key: no index folds case, so none is a scan."""
    from server.reader.source import REFERENCE_SCOPE

    with sqlite3.connect(migrated_db) as conn:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + REFERENCE_SCOPE, {"id": "REF-X"})]
    assert plan == ["SEARCH source_references USING INDEX sqlite_autoindex_source_references_1 (id=?)"], plan


def test_the_search_index_writes_read_the_dirty_items_never_the_whole_index(migrated_db: Path) -> None:
    """Every step of the apply trigger (any writer) and the bulk writer's own statements start from the items a write
    touched: a raw SQL write into a graph of a million objects must not read every search item (it did, through a
    plain JOIN the planner turned around: 0.1-0.4 s per write). Only items still without grams are scanned, on their
    partial index."""
    with sqlite3.connect(migrated_db) as conn:
        conn.create_function(search_index.FOLD_FUNCTION, 1, narrow)
        body = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'search_apply_now'").fetchone()[0]
        steps = [s for s in re.split(r";\s*\n", body[body.index("BEGIN") + 5 : body.rindex("END")]) if s.strip()]
        steps += [search_index.INSERT_FTS, search_index.SCRATCH_TEXTS]
        for sql in steps:
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
            scans = [s for s in plan if re.match(r"SCAN (i|search_items)\b", s) and "_without_grams" not in s]
            assert scans == [], (sql, plan)


def test_the_triggers_naming_leaf_items_look_them_up_by_index(migrated_db: Path) -> None:
    """A write that changes an object's time names the leaf items that take it (migrations/0017): from the row
    written, by index (fact_links_by_object, the event's changes and links), never a scan of every leaf's facts. They
    fire for every event an import writes; without CROSS JOIN the planner read all leaf facts for an experience."""
    with sqlite3.connect(migrated_db) as conn:
        bodies = conn.execute(
            "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' AND sql LIKE '%search_leaf_items%'"
        )
        triggers = dict(bodies.fetchall())
        assert len(triggers) == 18, sorted(triggers)
        for name, sql in triggers.items():
            body = sql[sql.index("search_refresh") + len("search_refresh") : sql.rindex("END")]
            select = re.sub(r"\b(new|old)\.(\w+)", r":\1_\2", body.strip().rstrip(";"))
            params = dict.fromkeys(re.findall(r":(\w+)", select), "x")
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + select, params)]
            assert [step for step in plan if step.startswith("SCAN")] == [], (name, plan)
            # Not its primary key on owner_type = 'leaf' alone: a SEARCH in name, it reads every leaf's facts.
            facts = [step for step in plan if step.startswith("SEARCH f ")]
            assert facts and all("fact_links_by_object (object_id=?" in step for step in facts), (name, plan)


def test_an_import_compares_only_the_stored_references_naming_a_version_it_writes(migrated_db: Path) -> None:
    """Step 5 of a merge (a reference stored before against a version this import writes) starts from the staged
    versions and reaches the references by index: never a scan of every stored reference."""
    from server.store.kinds import STORED_FRAGMENT, STORED_FRAGMENT_COUNTS
    from server.store.staging import create_tables

    with sqlite3.connect(migrated_db) as conn:
        create_tables(conn)
        conn.execute("CREATE INDEX temp.stage_source_reference_key ON stage_source_reference (id)")  # as merge.py does
        for sql in (STORED_FRAGMENT, STORED_FRAGMENT_COUNTS):
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, {"before": 0})]
            assert [step for step in plan if step.startswith("SCAN")] == ["SCAN v"], plan


def test_source_version_required_reads_one_sources_versions_by_its_primary_key(migrated_db: Path) -> None:
    """The refusal's newest versions are the source's own rows (a primary-key range), sorted: never a scan."""
    from server.reader.source_rows import NEWEST_VERSIONS

    with sqlite3.connect(migrated_db) as conn:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + NEWEST_VERSIONS, {"source_id": "s", "limit": 5})]
    assert [step for step in plan if step.startswith("SCAN")] == [], plan
    assert any(step.startswith("SEARCH source_versions USING PRIMARY KEY (source_id=?)") for step in plan), plan


def test_a_query_naming_a_result_reads_that_result_and_its_summaries_by_index(migrated_db: Path) -> None:
    """Asked on the first page of every one-word search (search's query_note): a primary-key lookup, never a scan."""
    with sqlite3.connect(migrated_db) as conn:
        plan = [
            row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + search_sql.RESULT_BY_ID, PARAMS | {"query": "r"})
        ]
    scans = [step for step in plan if step.startswith("SCAN") and not step.startswith("SCAN (subquery")]
    assert scans == [], plan  # the subquery is the three summary ids kept
    assert any(step.startswith("SEARCH summaries USING INDEX summaries_by_result") for step in plan), plan


def test_a_search_pages_evolution_refs_reach_every_object_by_index(migrated_db: Path) -> None:
    """One statement reads the evolution of a page's objects (changes, a story's or experience's listed events, a
    story line's events, relations): every table is reached by an index from the page's ids."""
    from server.reader.search_items import EVOLUTION_REFS

    params = {"objects": '[["story","x"]]', "scope_key": "global", "limit": 20}
    with sqlite3.connect(migrated_db) as conn:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + EVOLUTION_REFS, params)]
    # w and json_each are the page's ids; v (the evolution refs), refs and the window's subqueries hold only the page's
    # refs. An index on the scope alone reads every story (or event) of the scope.
    scans = [
        step for step in plan if step.startswith("SCAN") and not re.match(r"SCAN ((w|v|json_each|refs)\b|\(sub)", step)
    ]
    assert scans == [], plan
    assert [step for step in plan if step.endswith("(scope_key=?)")] == [], plan


SCOPE_READS = {
    name: getattr(scope, name)
    for name in (
        "SCOPE_STATE",
        "ACTIVE_PROJECTS",
        "GRANTED_PROJECT_PAGE",
        "GRANTED_PROJECT_COUNT",
        "ACTIVE_PROJECT_PAGE",
    )
}


@pytest.mark.parametrize("sql", SCOPE_READS.values(), ids=list(SCOPE_READS))
def test_a_scope_and_its_project_names_are_read_by_the_projects_primary_key(migrated_db: Path, sql: str) -> None:
    """What every call reads first (SCOPE_STATE), and the readable scopes an error or no_match_note lists, read the
    projects' names in the same statement that checks them: by primary key for a list of ids, and for a grant of
    every project by the key's order up to the listed few, never a sort of every project."""
    params = {"ids": '["x"]', "scope_key": "global", "limit": 21}
    with sqlite3.connect(migrated_db) as conn:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
    assert "name" in sql or sql == scope.GRANTED_PROJECT_COUNT
    reads = [step for step in plan if "projects" in step]
    assert reads, plan
    if sql == scope.ACTIVE_PROJECT_PAGE:
        assert reads == ["SCAN projects USING INDEX sqlite_autoindex_projects_1"], plan
    else:
        assert all(step.startswith("SEARCH projects USING INDEX") for step in reads), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan
