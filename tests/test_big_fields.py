"""No single stored value makes a response unreadable: every free-text field `db import` accepts whole, at 120,000
characters, leaves every tool answering at page_size 1 within the 100,000-byte response limit. (A version name, a
reference's or a coverage record's `source_version`, is an identifier: an import refuses one over 256 characters.)

One database holds a copy of `story_graph()` per field, each in projects of its own (ids suffixed), with that one
field huge: the tools read exactly one scope, so each copy's answers see only its own huge value. One import for all
of them keeps the test to seconds.
"""

from __future__ import annotations

import copy
import re
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonl_graph import imported_graph, story_graph, write_jsonl
from mcp import Client
from support import all_pages, client_for

from server.contracts.common import Grant
from server.store.errors import ImportRejected
from server.store.importer import import_file
from server.store.migrate import migrate

pytestmark = pytest.mark.anyio

HUGE = "word " * 24_000
"""120,000 code points (over the 100,000-byte limit by itself), searchable as `word`."""
EXTERNAL_BLOB = {"system": "tracker", "blob": HUGE}
EXTERNAL_WIDE = {f"key-{i:05}": i for i in range(20_000)}
"""An external locator too large by its many small entries (about 300 KB), not by one text."""

Ref = tuple[str, str]
# (kind, the line's key, the field's dotted path, the object whose get_context shows the field, others that show it)
FIELDS: list[tuple[str, str, str, Ref, list[Ref]]] = [
    ("project", "alpha", "name", ("story", "st-thread"), [("story", "st-feature")]),
    ("result", "r-alpha", "stage", ("event", "ev-1"), []),
    ("result", "r-alpha", "status", ("event", "ev-1"), []),
    ("result", "r-alpha", "revision", ("event", "ev-1"), []),
    ("result", "r-alpha", "coverage.missing.0.reason", ("event", "ev-1"), []),
    ("result", "r-alpha", "coverage.source_types_not_included.0", ("event", "ev-1"), []),
    ("story_line", "sl-alpha", "topic", ("story_line", "sl-alpha"), [("entity", "ent-a")]),
    ("story_line", "sl-alpha", "revision", ("story_line", "sl-alpha"), []),
    *(
        (
            "event",
            "ev-1",
            field,
            ("event", "ev-1"),
            [("story", "st-thread"), ("entity", "ent-a"), ("relation", "rel-1")],
        )
        for field in (
            "event_type",
            "title",
            "description",
            "confirmation_state",
            "revision",
            "event_time.precision",
            "event_time.basis",
        )
    ),
    *(
        ("entity", "ent-a", field, ("entity", "ent-a"), [("event", "ev-1"), ("entity_change", "ent-a#decided")])
        for field in (
            "entity_type",
            "canonical_label",
            "description",
            "confirmation_state",
            "decision_status",
            "work_status",
            "revision",
        )
    ),
    *(
        ("entity_revision", "ent-a@r-alpha", field, ("entity", "ent-a"), [])
        for field in ("revision", "canonical_label", "description", "confirmation_state")
    ),
    *(
        ("entity_change", "ent-a#decided", field, ("entity_change", "ent-a#decided"), [("entity", "ent-a")])
        for field in ("change_type", "description", "entity_revision", "confirmation_state")
    ),
    *(
        ("relation", "rel-1", field, ("relation", "rel-1"), [("event", "ev-1"), ("entity_change", "ent-a#decided")])
        for field in ("relation_type", "reason", "confirmation_state", "revision")
    ),
    *(
        ("summary", "sum-1", field, ("summary", "sum-1"), [("event", "ev-1"), ("relation", "rel-1")])
        for field in ("body", "open_items.0", "revision")
    ),
    ("leaf", "leaf-1", "summary", ("event", "ev-1"), []),
    ("leaf", "leaf-1", "facts.0.description", ("event", "ev-1"), []),
    *(
        ("story", "st-thread", field, ("story", "st-thread"), [("story", "st-feature"), ("event", "ev-1")])
        for field in ("name", "description", "revision")
    ),
    *(
        ("experience", "ex-pair", field, ("experience", "ex-pair"), [])
        for field in ("statement", "conditions", "boundaries", "revision")
    ),
    ("experience_event", "ex-pair:ev-b1", "note", ("experience", "ex-pair"), []),
    *(
        ("source", "src-1", field, ("source_reference", "ref-1"), [("event", "ev-1")])
        for field in ("source_type", "conversation_id", "title", "status")
    ),
    *(
        ("source_reference", "ref-1", field, ("source_reference", "ref-1"), [("event", "ev-1"), ("entity", "ent-a")])
        for field in (
            "source_type",
            "title",
            "availability",
            "source_record_time",
            *(
                f"locator.{name}"
                for name in (
                    "project_id",
                    "conversation_id",
                    "message_id",
                    "role",
                    "document_id",
                    "chunk_id",
                    "task_id",
                )
            ),
            "locator.external",
            "locator.external.wide",
        )
    ),
    *(
        ("memory_item", "mem-1", field, ("event", "ev-2"), [])
        for field in ("memory_type", "body", "confirmation_state")
    ),
]


def _key(line: dict[str, Any]) -> str | None:
    kind = line["kind"]
    if kind == "entity_revision":
        return f"{line['entity_id']}@{line['result_id']}"
    if kind == "entity_change":
        return f"{line['entity_id']}#{line['association_key']}"
    if kind == "experience_event":
        return f"{line['experience_id']}:{line['event_id']}"
    return line.get("id")


def _put(line: dict[str, Any], path: str) -> None:
    """Set the field at `path` to a huge value (the `external` locator to a huge object)."""
    if path.startswith("locator.external"):
        line["locator"]["external"] = EXTERNAL_WIDE if path.endswith(".wide") else EXTERNAL_BLOB
        return
    if path == "coverage.missing.0.reason":
        line["coverage"]["missing"] = [{"source_id": "src-1", "ranges": [[0, 5]], "reason": HUGE}]
        return
    if path == "coverage.source_types_not_included.0":
        line["coverage"]["source_types_not_included"] = [HUGE]
        return
    *parents, last = path.split(".")
    target: Any = line
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[int(last) if last.isdigit() else last] = HUGE


def _renamed(value: Any, ids: set[str], suffix: str) -> Any:
    """`value` with every id of the graph (a project's, an object's, an entity change's `<entity>#<key>`) suffixed."""
    if isinstance(value, dict):
        return {key: _renamed(item, ids, suffix) for key, item in value.items()}
    if isinstance(value, list):
        return [_renamed(item, ids, suffix) for item in value]
    if isinstance(value, str):
        head, hash_, tail = value.partition("#")
        if head in ids:
            return f"{head}{suffix}{hash_}{tail}"
    return value


def _copy(index: int, kind: str, key: str, path: str) -> list[dict[str, Any]]:
    """story_graph() without its Global lines (one scope for every copy), the field huge, every id suffixed."""
    lines = [
        line
        for line in copy.deepcopy(story_graph())
        if line.get("scope") != {"kind": "global"} and not (line["kind"] == "memory_item" and "project_id" not in line)
    ]
    [holder] = [line for line in lines if line["kind"] == kind and _key(line) == key]
    _put(holder, path)
    ids = {line["id"] for line in lines if "id" in line} | {"note-9"}
    return [_renamed(line, ids, f"-{index}") for line in lines]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-wide, so one client session serves every field: a session checks each tool's output schema once,
    which costs about as much as all the calls of a field."""
    return "asyncio"


@pytest.fixture(scope="module")
async def huge_client(huge_db: Path) -> AsyncGenerator[Client, None]:
    projects = [f"{name}-{index}" for index in range(len(FIELDS)) for name in ("alpha", "beta")]
    async with client_for(huge_db, Grant(projects=projects, allow_global=False)) as client:
        yield client


@pytest.fixture(scope="module")
def huge_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("huge")
    lines = [line for index, (kind, key, path, _, _) in enumerate(FIELDS) for line in _copy(index, kind, key, path)]
    db = folder / "huge.db"
    migrate(db)
    import_file(db, write_jsonl(folder / "huge.jsonl", lines))
    return db


def _scope(*projects: str) -> dict[str, Any]:
    return {"kind": "projects", "projectIds": list(projects)}


@pytest.mark.parametrize(
    ("index", "kind", "key", "path", "holder", "viewers"),
    [(index, *field) for index, field in enumerate(FIELDS)],
    ids=[f"{kind}.{path}" for kind, _, path, _, _ in FIELDS],
)
async def test_one_huge_stored_value_leaves_every_tool_readable_at_page_size_1(
    huge_client: Client, index: int, kind: str, key: str, path: str, holder: Ref, viewers: list[Ref]
) -> None:
    """Before: a read_source of a reference whose title, version, locator field or record time was huge answered
    response_too_large at every page size, so that source could never be read."""
    alpha, beta = f"alpha-{index}", f"beta-{index}"
    scopes = [_scope(alpha), _scope(beta), _scope(alpha, beta)]

    def ref(obj: Ref) -> dict[str, str]:
        head, hash_, tail = obj[1].partition("#")
        return {"type": obj[0], "id": f"{head}-{index}{hash_}{tail}"}

    def scope_of(obj: Ref) -> dict[str, Any]:
        return scopes[2] if obj[1] in ("ex-pair", "st-cross", "ev-p1") else scopes[0]

    # Each tool reads one scope: the holder's answers, and those of the objects whose header shows the field. Sources
    # are read where a field can reach them (the scope's coverage, the reference and its source, a project's name).
    reads = [
        ("story_graph_read_source", {"source_reference_id": f"ref-1-{index}", "scope": scopes[0]} | kind_args)
        for kind_args in (
            {"content_kind": "snapshot"},
            {"content_kind": "current"},
            {"content_kind": "version", "source_version": "v2"},
        )
    ]
    reads.append(("story_graph_read_source", {"source_reference_id": f"ref-2-{index}", "scope": scopes[1]}))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("story_graph_search", {"query": "word", "scope": scope_of(holder)}),
        ("story_graph_search", {"query": ref(holder)["id"], "scope": scope_of(holder)}),
        ("story_graph_get_context", {"object_ref": ref(holder), "scope": scope_of(holder), "mode": "timeline"}),
        *(("story_graph_get_context", {"object_ref": ref(obj), "scope": scope_of(obj)}) for obj in [holder, *viewers]),
        *(reads if kind in ("project", "result", "source", "source_reference") else []),
    ]
    refused = []
    for tool, arguments in calls:
        result = await huge_client.call_tool(tool, arguments | {"page_size": 1})
        if result.is_error:
            refused.append((tool, arguments, result.content[0].text.split(":")[0]))  # type: ignore[union-attr]
    if kind == "memory_item":  # background comes after every item: walk to it
        arguments = {"object_ref": ref(holder), "scope": scopes[0], "page_size": 1}
        await all_pages(huge_client, "story_graph_get_context", arguments)
    assert refused == []


WORST_ID = "src-worst"
WORST_TEXT = "\x01" * 300
"""Free text whose every code point costs the most JSON: a control character is written as \\u0001, 6 bytes."""
WORST_VERSION = "\x01" * 256
"""The longest version name an import takes (it names a version: an id), in the costliest JSON."""
EXTREME = [-(2**63), 2**63 - 1]
"""The widest range a record may hold: 44 bytes of JSON with its comma."""


def _worst_reference_graph() -> list[dict[str, Any]]:
    """One reference whose every shown text is over the cap in its costliest characters, with a legal coverage record
    at the old caps' worst: 60 processed entries and 60 missing parts of its source, 60 ranges each."""
    scope = _scope("alpha")
    ranges = [EXTREME] * 60
    record = {
        "kind": "detailed",
        "unprocessed_sources": 1,
        "sources": [{"source_id": WORST_ID, "source_version": WORST_VERSION, "fragments": ranges, "status": "partial"}]
        * 60,
        "missing": [{"source_id": WORST_ID, "ranges": ranges, "reason": WORST_TEXT}] * 60,
    }
    locator = dict.fromkeys(("project_id", "conversation_id", "message_id", "role", "document_id"), WORST_TEXT)
    return [
        {"kind": "project", "id": "alpha", "name": "Alpha"},
        {"kind": "scope", "scope": scope},
        {"kind": "result", "id": "r-1", "scope": scope, "review_generated_at": T, "recorded_at": T, "coverage": record},
        {
            "kind": "source",
            "id": WORST_ID,
            "source_type": "note",
            "project_id": "alpha",
            "current_version": "v1",
            "updated_at": T,
        },
        {"kind": "source_version", "source_id": WORST_ID, "version": "v1", "text": "🚀" * 9_000, "recorded_at": T},
        {
            "kind": "source_reference",
            "id": "ref-worst",
            "result_id": "r-1",
            "source_type": WORST_TEXT,
            "original_source_id": WORST_ID,
            "source_version": WORST_VERSION,
            "locator": locator | {"chunk_id": WORST_TEXT, "task_id": WORST_TEXT, "external": EXTERNAL_WIDE},
            "title": WORST_TEXT,
            "fragment": {"text": "🚀" * 9_000},
            "availability": WORST_TEXT,
            "source_record_time": WORST_TEXT,
            "recorded_at": T,
        },
    ]


T = "2026-05-01T08:00:00Z"


async def test_a_reference_at_the_worst_a_legal_record_allows_still_reads_at_page_size_1(tmp_path: Path) -> None:
    """The answer's size by construction: every text beside the content is capped (flagged), the external locator
    is bounded, and source_coverage lists the first entries that fit in 8,000 bytes per list, with their counts.
    Before, 50 entries of 50 ranges (110 KB per list) made the read response_too_large at any page_size. Measured
    here: about 85 KB at page_size 1, 43 KB of it the scope's coverage block (every tool's frame); the content page
    is what a smaller page_size shrinks."""
    db = imported_graph(tmp_path, _worst_reference_graph())
    async with client_for(db, Grant(default_project="alpha")) as client:
        reads = {}
        for kind in ("snapshot", "current"):
            arguments = {"source_reference_id": "ref-worst", "content_kind": kind, "page_size": 1}
            result = await client.call_tool("story_graph_read_source", arguments)
            text = result.content[0].text  # type: ignore[union-attr]
            assert not result.is_error, text
            assert len(text.encode()) < 90_000
            reads[kind] = orjson.loads(text)
    read = reads["snapshot"]
    cut = WORST_TEXT[:256]
    for name in ("title", "source_type", "availability", "source_record_time"):
        assert (read[name], read[f"{name}_is_excerpt"]) == (cut, True), name
    for name in ("source_version", "reference_version"):  # whole: no longer than an import takes
        assert (read[name], f"{name}_is_excerpt" in read) == (WORST_VERSION, False), name
    location = read["source_location"]
    for name in ("project_id", "conversation_id", "message_id", "role", "document_id", "chunk_id", "task_id"):
        assert (location[name], location[f"{name}_is_excerpt"]) == (cut, True), name
    assert location["external_is_excerpt"] is True
    assert list(location["external"].items()) == list(EXTERNAL_WIDE.items())[: len(location["external"])]
    assert 0 < len(orjson.dumps(location["external"])) <= 4_000
    coverage = read["source_coverage"]
    assert (coverage["processed_count"], coverage["missing_count"]) == (60, 60)
    for listed in (coverage["processed"], coverage["missing"]):
        assert 0 < len(listed) < 60 and len(orjson.dumps(listed)) <= 8_000
    assert [(e["source_version"], e["fragments"], e["fragment_count"]) for e in coverage["processed"]] == [
        (WORST_VERSION, [EXTREME] * 50, 60)
    ] * len(coverage["processed"])
    assert [(e["reason"], e["reason_is_excerpt"], e["ranges"]) for e in coverage["missing"]] == [
        (cut, True, [EXTREME] * 50)
    ] * len(coverage["missing"])
    assert f"(the fragment is from {WORST_VERSION!r})" in read["content_note"]
    assert reads["current"]["source_version"] == "v1" and "source_version_is_excerpt" not in reads["current"]


@pytest.mark.parametrize("where", ["reference", "coverage"])
def test_an_import_refuses_a_version_name_over_256_characters_on_its_line(tmp_path: Path, where: str) -> None:
    """A version names a `source_version` line, whose `version` is an id (at most 256): a 200,000-character one was
    stored whole, and every answer showing it could only show an excerpt."""
    lines = story_graph()
    [line] = [line for line in lines if line.get("id") == ("ref-1" if where == "reference" else "r-alpha")]
    if where == "reference":
        line["source_version"] = "v" * 257
    else:
        line["coverage"]["sources"][0]["source_version"] = "v" * 257
    field = "source_version" if where == "reference" else "coverage.sources[0].source_version"
    number = lines.index(line) + 1
    db = tmp_path / "graph.db"
    migrate(db)
    with pytest.raises(
        ImportRejected, match=rf"line {number}, field '{re.escape(field)}': String should have at most 256"
    ):
        import_file(db, write_jsonl(tmp_path / "graph.jsonl", lines))
