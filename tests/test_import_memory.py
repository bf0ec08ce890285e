"""`db import --from memory-jsonl`: the reference memory server's JSON Lines graph into one project, read back through
a real MCP client; malformed lines refused with their line number; re-import idempotent."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonl_graph import dump, file_hash, revisions, write_jsonl
from support import client_for, ok

from server.contracts.common import Grant
from server.store.errors import ImportRejected, StoreError
from server.store.importer import import_file
from server.store.memory_graph import import_memory_graph, stable_id

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parent.parent
PROJECT = "home-lab"
# The memory server's own file format (src/memory/index.ts saveGraph): entities first, then relations.
GRAPH: list[dict[str, Any]] = [
    {
        "type": "entity",
        "name": "John_Smith",
        "entityType": "person",
        "observations": ["Speaks fluent Spanish", "Prefers Postgres over MySQL for side projects"],
    },
    {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": ["总部在旧金山"]},
    {"type": "entity", "name": "NAS", "entityType": "device", "observations": []},
    {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
    {"type": "relation", "from": "John_Smith", "to": "NAS", "relationType": "maintains"},
]


def write_graph(path: Path, records: Sequence[dict[str, Any] | str]) -> Path:
    text = "\n".join(item if isinstance(item, str) else orjson.dumps(item).decode() for item in records)
    path.write_text(text + "\n", encoding="utf-8")
    return path


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    return write_graph(tmp_path / "memory.jsonl", list(GRAPH))


def client(db: Path) -> Any:
    return client_for(db, Grant(default_project=PROJECT))


async def test_entities_observations_and_relations_import_and_search(migrated_db: Path, memory: Path) -> None:
    report, _ = import_memory_graph(migrated_db, memory, PROJECT)

    assert report.written["entity"] == 3 and report.written["relation"] == 2
    assert report.written["source_reference"] == 3  # one per observation
    john = stable_id(PROJECT, "John_Smith")
    async with client(migrated_db) as session:
        found = await ok(session, "story_graph_search", {"query": "Postgres side projects"})
        by_type = {item["object_ref"]["type"]: item for item in found["items"]}
        entity = await ok(session, "story_graph_get_context", {"object_ref": {"type": "entity", "id": john}})
        cited = await ok(
            session, "story_graph_read_source", {"source_reference_id": by_type["source_reference"]["object_ref"]["id"]}
        )
        chinese = await ok(session, "story_graph_search", {"query": "旧金山"})

    assert by_type["entity"]["object_ref"]["id"] == john
    assert cited["content"] == "Prefers Postgres over MySQL for side projects"
    assert cited["source_location"]["project_id"] == PROJECT
    assert {item["object_ref"]["id"] for item in chinese["items"]} >= {stable_id(PROJECT, "Anthropic")}
    [current] = [item for item in entity["items"] if item["object_ref"]["id"] == john and item["result_id"] is None]
    data = orjson.loads(current["content"])
    assert (data["entity_type"], data["canonical_label"]) == ("person", "John_Smith")
    assert len(current["source_reference_ids"]) == 2  # each observation is its own citation
    # The format keeps no times: no event time anywhere, and nothing claims to be an event.
    assert all(item["event_time"] is None for item in entity["items"])
    assert current["confirmation_state"] == "unknown"


async def test_relations_keep_their_types_between_the_two_entities(migrated_db: Path, memory: Path) -> None:
    import_memory_graph(migrated_db, memory, PROJECT)
    john = stable_id(PROJECT, "John_Smith")

    async with client(migrated_db) as session:
        page = await ok(session, "story_graph_get_context", {"object_ref": {"type": "entity", "id": john}})

    relations = [orjson.loads(item["content"]) for item in page["items"] if item["object_ref"]["type"] == "relation"]
    assert {(r["relation_type"], r["to_ref"]["id"]) for r in relations} == {
        ("works_at", stable_id(PROJECT, "Anthropic")),
        ("maintains", stable_id(PROJECT, "NAS")),
    }


def test_reimporting_the_same_file_changes_nothing_and_reports_every_line_unchanged(
    migrated_db: Path, memory: Path
) -> None:
    first = _cli(migrated_db, memory)
    before, revisions_before = dump(migrated_db), revisions(migrated_db)

    dry = _cli(migrated_db, memory, "--dry-run")
    again = _cli(migrated_db, memory)

    assert first.returncode == dry.returncode == again.returncode == 0, first.stderr + dry.stderr + again.stderr
    per_kind = "1 project, 1 scope, 1 result, 1 story_line, 3 source, 3 source_version, 3 source_reference, 3 entity"
    assert first.stdout == f"imported 18 lines ({per_kind}, 2 relation) into {migrated_db}; 0 unchanged\n"
    # The project is one of those lines: it exists now and is used as it is, so it is unchanged like the rest.
    assert again.stdout == f"imported 0 lines (nothing new) into {migrated_db}; 18 unchanged\n"
    assert (
        dry.stdout
        == f"dry run: would import 0 lines (nothing new) into {migrated_db}; 18 unchanged; nothing was written\n"
    )
    assert dump(migrated_db) == before
    assert revisions(migrated_db) == revisions_before


def test_a_changed_file_updates_the_entity_and_adds_the_new_observation(migrated_db: Path, tmp_path: Path) -> None:
    import_memory_graph(migrated_db, write_graph(tmp_path / "v1.jsonl", list(GRAPH)), PROJECT)
    changed = [dict(GRAPH[0], observations=["Speaks fluent Spanish", "Moved to Lisbon"]), *GRAPH[1:]]

    report, _ = import_memory_graph(migrated_db, write_graph(tmp_path / "v2.jsonl", changed), PROJECT)

    assert report.updated == {"entity": 1}
    assert report.written == {"source": 1, "source_version": 1, "source_reference": 1}


def test_an_existing_project_is_used_as_it_is_and_another_project_gets_its_own_copy(
    migrated_db: Path, memory: Path, tmp_path: Path
) -> None:
    import_file(
        migrated_db,
        write_jsonl(
            tmp_path / "project.jsonl", [{"kind": "project", "id": PROJECT, "name": "Home lab", "status": "archived"}]
        ),
    )

    first, _ = import_memory_graph(migrated_db, memory, PROJECT)
    again, _ = import_memory_graph(migrated_db, memory, PROJECT)
    second, _ = import_memory_graph(migrated_db, memory, "office")

    # The stored project is used as it is (name and status kept) and counted unchanged, on every import.
    assert ("project" not in first.written, first.unchanged, first.updated) == (True, 1, {})
    assert (again.total, again.updated, again.unchanged) == (0, {}, first.total + 1)
    assert rows_of(migrated_db, "SELECT id, name, status FROM projects ORDER BY id") == [
        (PROJECT, "Home lab", "archived"),
        ("office", "office", "active"),
    ]
    assert second.written["entity"] == 3  # the same names, under the other project's ids


def rows_of(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


BAD_LINES = {
    "malformed JSON": ('{"type": "entity", "name": ', 2, "", "malformed JSON"),
    "not an object": ("[1, 2]", 2, "", "each line must be one JSON object"),
    "unknown type": ('{"type": "observation", "name": "x"}', 2, "type", "unknown type 'observation'"),
    "missing field": ('{"type": "entity", "name": "x", "observations": []}', 2, "entityType", "required field"),
    "mistyped field": (
        '{"type": "entity", "name": "x", "entityType": "t", "observations": "one"}',
        2,
        "observations",
        "a list",
    ),
    "an interchange line": (
        '{"kind": "project", "id": "atlas", "name": "Atlas"}',
        2,
        "type",
        "an interchange line (it has a 'kind'): import the file without --from memory-jsonl",
    ),
    "relation to a missing entity": (
        '{"type": "relation", "from": "John_Smith", "to": "Mars", "relationType": "visits"}',
        2,
        "to",
        "no entity named 'Mars'",
    ),
}


@pytest.mark.parametrize("case", list(BAD_LINES), ids=list(BAD_LINES))
def test_a_malformed_line_is_refused_with_its_number_and_nothing_is_written(
    case: str, migrated_db: Path, tmp_path: Path
) -> None:
    line, number, field, problem = BAD_LINES[case]
    path = write_graph(tmp_path / "bad.jsonl", [GRAPH[0], line])
    before = dump(migrated_db)

    with pytest.raises(ImportRejected) as caught:
        import_memory_graph(migrated_db, path, PROJECT)

    assert (caught.value.line_number, caught.value.field) == (number, field)
    assert problem in caught.value.problem
    assert dump(migrated_db) == before


async def test_half_an_emoji_written_by_the_memory_server_is_read_as_a_replacement_character(
    migrated_db: Path, tmp_path: Path
) -> None:
    """JavaScript's JSON.stringify writes a string cut inside a surrogate pair (half an emoji) as a lone \\ud83d escape,
    which names no character: the memory server's own file must still import, with U+FFFD in its place, noted. A
    whole pair stays its character; an interchange file keeps refusing the lone escape."""
    observations = '["backup done \\ud83d", "ok \\ud83d\\ude00"]'  # a lone half, then a whole pair
    cut = f'{{"type": "entity", "name": "NAS", "entityType": "device", "observations": {observations}}}'
    path = write_graph(tmp_path / "memory.jsonl", [GRAPH[0], GRAPH[1], cut, *GRAPH[3:]])

    report, notes = import_memory_graph(migrated_db, path, PROJECT)

    assert report.written["entity"] == 3
    assert "lines with a \\uD800-\\uDFFF escape missing the other half of its pair (read as U+FFFD): 1" in notes
    async with client(migrated_db) as session:
        page = await ok(session, "story_graph_search", {"query": "backup done"})
        nas = await ok(session, "story_graph_get_context", {"object_ref": page["items"][0]["object_ref"]})
    held = orjson.dumps(nas).decode()
    assert "backup done \ufffd" in held and "ok \U0001f600" in held
    with pytest.raises(ImportRejected, match="surrogate"):
        import_file(migrated_db, write_jsonl(tmp_path / "interchange.jsonl", [cut.replace('"type"', '"kind"')]))


def test_a_repeated_entity_name_is_refused_naming_both_lines(migrated_db: Path, tmp_path: Path) -> None:
    path = write_graph(tmp_path / "twice.jsonl", [GRAPH[0], GRAPH[1], dict(GRAPH[0], entityType="robot")])

    with pytest.raises(ImportRejected, match=r"line 3.*already defined by line 1 with different content"):
        import_memory_graph(migrated_db, path, PROJECT)


def test_the_cli_needs_a_project_and_prints_the_report(migrated_db: Path, memory: Path) -> None:
    def cli(*extra: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "server", "db", "import", "--db", str(migrated_db), *extra, str(memory)]
        return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)

    missing = cli("--from", "memory-jsonl")
    done = cli("--from", "memory-jsonl", "--project", PROJECT)

    assert missing.returncode == 2 and "--from memory-jsonl needs --project P" in missing.stderr
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("imported ") and "3 entity" in done.stdout


def test_a_missing_file_is_one_clear_error(migrated_db: Path, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"cannot read .*nope\.jsonl"):
        import_memory_graph(migrated_db, tmp_path / "nope.jsonl", PROJECT)


def _cli(db: Path, memory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "server", "db", "import", "--db", str(db), "--from", "memory-jsonl"]
    command += ["--project", PROJECT, *extra, str(memory)]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


def test_a_dry_run_writes_nothing_and_the_import_shows_progress(migrated_db: Path, memory: Path) -> None:
    before = dump(migrated_db), file_hash(migrated_db)

    dry = _cli(migrated_db, memory, "--dry-run")
    untouched = dump(migrated_db), file_hash(migrated_db)
    done = _cli(migrated_db, memory, "--progress-every", "0")

    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("dry run: would import ") and "nothing was written" in dry.stdout
    assert untouched == before
    assert done.returncode == 0, done.stderr
    phases = [line.split(":")[1].strip() for line in done.stderr.splitlines() if line.endswith(" s elapsed")]
    assert {"reading", "writing", "indexing"} <= set(phases) <= {"reading", "writing", "indexing", "writing the index"}


def test_entities_of_two_projects_never_share_an_id(migrated_db: Path, tmp_path: Path) -> None:
    entity = {"type": "entity", "entityType": "note"}
    first = write_graph(tmp_path / "a.jsonl", [entity | {"name": "b:c", "observations": ["project a only"]}])
    second = write_graph(tmp_path / "ab.jsonl", [entity | {"name": "c", "observations": ["project a:b only"]}])

    import_memory_graph(migrated_db, first, "a")
    # Ids are memory:<project>:<name>: a project holding ':' could share an id with another project's entity.
    with pytest.raises(StoreError, match=r"--project 'a:b'.* may not contain ':'"):
        import_memory_graph(migrated_db, second, "a:b")

    with sqlite3.connect(migrated_db) as conn:
        stored = conn.execute("SELECT scope_key, id, description FROM entities ORDER BY scope_key").fetchall()
    assert stored == [('projects:["a"]', "memory:a:b:c", "project a only")]


def test_an_empty_memory_file_is_imported_with_a_note_saying_it_held_nothing(migrated_db: Path, tmp_path: Path) -> None:
    # The project is still written (a memory server that remembers nothing is valid), but a wrong path or a failed
    # copy reads the same: the operator is told.
    empty = tmp_path / "memory.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    done = _cli(migrated_db, empty)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"note: {empty} holds no memory records (it is empty, or only blank lines): only the project was written"
    )
