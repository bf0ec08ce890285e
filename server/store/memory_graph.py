"""`db import --from memory-jsonl memory.json --project P`: the reference memory server's graph as a source.

The memory MCP server (modelcontextprotocol/servers, src/memory) keeps its knowledge graph as JSON Lines:
`{"type": "entity", "name", "entityType", "observations": [...]}` and
`{"type": "relation", "from", "to", "relationType"}`; an entity's name is its identity and a relation's
identity is (from, to, relationType). The whole graph goes into one project:

* each entity becomes an entity (label = name, type = entityType, description = its observations, one
  per line) in the story line `memory:<P>` of the project's scope;
* each observation becomes its own source (`memory` type) with one version holding its text, and a
  saved fragment citing it, so every observation is individually citable with `read_source`;
* each relation becomes a relation between the two entities, its type passed through.

The format keeps no time at all: no event is created and no event time is set. The times the store
requires are the import's: `recorded_at` is when this graph first recorded an object (kept on later
imports) and an entity's `updated_at` when an import last saw its content change. Confirmation is
`unknown`. A malformed line is refused with its line number; re-importing the same file changes nothing, and its
report counts every line unchanged, the project's included.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson

from server.contracts.base import format_utc
from server.store.errors import ImportRejected, StoreError
from server.store.importer import ImportItem, ImportReport, import_source
from server.store.jsonl import JsonLinesFile, validate_line
from server.store.migrate import open_store
from server.store.notes import Notes
from server.store.progress import Progress
from server.store.sync import SyncPolicy

POLICY: Final = SyncPolicy(volatile=frozenset({"updated_at", "review_generated_at"}))
FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "entity": ("name", "entityType", "observations"),
    "relation": ("from", "to", "relationType"),
}
MAX_ID: Final = 256
ProjectRow = tuple[str, str]
"""A stored project's name and status."""


def stable_id(*parts: str) -> str:
    """`memory:<part>:<part>...`, or its sha256 when that would pass the 256-character id limit."""
    text = ":".join(("memory", *parts))
    return text if len(text) <= MAX_ID else f"memory:sha256:{hashlib.sha256(text.encode()).hexdigest()}"


def _digest(*parts: str) -> str:
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()[:32]


class MemoryGraphSource:
    """Reads one memory-server file as import items for project `project`, in two passes of the file:
    the first checks every line and collects the entity names (a relation may name a later entity),
    the second yields the lines. Memory holds the names only, whatever the file size."""

    policy: Final = POLICY

    def __init__(self, path: Path, project: str, *, db_path: Path, now: str | None = None) -> None:
        self.path = path
        self.project = project
        self.db_path = db_path
        """The graph imported into: its stored project is read when the lines are (see `head`)."""
        self.now = now or format_utc(datetime.now(UTC))
        self.notes = Notes()
        self.file = JsonLinesFile(path, mend_surrogates=True)
        self.empty = False
        """Set once the file was read and held no record (empty, or only blank lines)."""

    def __iter__(self) -> Iterator[ImportItem]:
        names: set[str] = set()
        first = 0
        for number, value in self.file:
            record = self.record(number, value)
            first = first or number
            if record["type"] == "entity":
                names.add(record["name"])
            extra = sorted(set(record) - {"type", *FIELDS[record["type"]]})
            if extra:
                self.notes.add(f"lines with fields the memory server does not define (ignored: {', '.join(extra)})")
        self.notes.add(
            "lines with a \\uD800-\\uDFFF escape missing the other half of its pair (read as U+FFFD)", self.file.mended
        )
        self.empty = first == 0
        yield from self.head(first or 1)
        for number, value in self.file:
            yield from self.lines(number, self.record(number, value), names)

    def fraction_read(self) -> float | None:
        """How far the second pass (the one that yields lines) has read the file."""
        return self.file.fraction_read()

    def record(self, number: int, value: object) -> dict[str, Any]:
        """One line checked against the memory server's own schema; anything else is refused by number."""
        if not isinstance(value, dict):
            raise ImportRejected(number, "", "each line must be one JSON object with a 'type'")
        kind = value.get("type")
        if kind is None and "kind" in value:
            problem = (
                "missing: this is an interchange line (it has a 'kind'): import the file without --from memory-jsonl"
            )
            raise ImportRejected(number, "type", problem)
        if kind not in FIELDS:
            problem = "missing" if kind is None else f"unknown type {kind!r}"
            raise ImportRejected(number, "type", f"{problem}; the types are: entity, relation")
        for name in FIELDS[kind]:
            if name not in value:
                raise ImportRejected(number, name, "required field is missing")
            wanted = list if name == "observations" else str
            if not isinstance(value[name], wanted):
                raise ImportRejected(number, name, f"expected {'a list of strings' if wanted is list else 'a string'}")
        if kind == "entity":
            if not value["name"]:
                raise ImportRejected(number, "name", "an entity needs a non-empty name")
            for index, observation in enumerate(value["observations"]):
                if not isinstance(observation, str):
                    raise ImportRejected(number, f"observations[{index}]", "expected a string")
        return value

    def head(self, first: int) -> Iterator[ImportItem]:
        """The project, its scope, and the result and story line every object belongs to. A stored project is
        used as it is: its line repeats the stored row, so a sync never renames it and the report counts it
        unchanged, like every other line of an identical re-import."""
        project, now = self.project, self.now
        scope = {"kind": "projects", "projectIds": [project]}
        home = stable_id(project)
        # Read now, while the import iterates its source: it holds the write lock (BEGIN IMMEDIATE) by then, so no
        # other writer can rename the project between this read and the line that repeats it.
        name, status = stored_project(self.db_path, project) or (project, "active")
        yield self.line(first, {"kind": "project", "id": project, "name": name, "status": status})
        yield self.line(first, {"kind": "scope", "scope": scope})
        result = {"kind": "result", "id": home, "scope": scope, "stage": "memory_import"}
        yield self.line(first, result | {"review_generated_at": now, "recorded_at": now})
        yield self.line(
            first, {"kind": "story_line", "id": home, "scope": scope, "topic": "Memory graph"} | {"recorded_at": now}
        )

    def lines(self, number: int, record: dict[str, Any], names: set[str]) -> Iterator[ImportItem]:
        """The lines of one record."""
        project, home = self.project, stable_id(self.project)
        if record["type"] == "entity":
            yield from self.entity(number, record, home)
            return
        for end in ("from", "to"):
            if record[end] not in names:
                raise ImportRejected(number, end, f"no entity named {record[end]!r} in the file")
        relation_id = stable_id(project, "relation", _digest(record["from"], record["relationType"], record["to"]))
        yield self.line(
            number,
            {
                "kind": "relation",
                "id": relation_id,
                "result_id": home,
                "from_ref": {"type": "entity", "id": stable_id(project, record["from"])},
                "to_ref": {"type": "entity", "id": stable_id(project, record["to"])},
                "relation_type": record["relationType"],
                "confirmation_state": "unknown",
                "recorded_at": self.now,
            },
        )

    def entity(self, number: int, record: dict[str, Any], home: str) -> Iterator[ImportItem]:
        project, now, name = self.project, self.now, record["name"]
        observations = list(dict.fromkeys(record["observations"]))
        self.notes.add(
            "repeated observations of an entity (imported once)", len(record["observations"]) - len(observations)
        )
        references = []
        for index, text in enumerate(observations):
            digest = _digest(name, text)
            source_id, reference_id = stable_id(project, "observation", digest), stable_id(project, "ref", digest)
            references.append(reference_id)
            where = f"line {number}, observations[{index}]"
            yield self.line(
                where,
                {
                    "kind": "source",
                    "id": source_id,
                    "source_type": "memory",
                    "project_id": project,
                    "title": name,
                    "current_version": digest,
                    "updated_at": now,
                },
            )
            yield self.line(
                where,
                {"kind": "source_version", "source_id": source_id, "version": digest, "text": text, "recorded_at": now},
            )
            yield self.line(
                where,
                {
                    "kind": "source_reference",
                    "id": reference_id,
                    "result_id": home,
                    "source_type": "memory",
                    "original_source_id": source_id,
                    "source_version": digest,
                    "locator": {"project_id": project, "external": {"entityName": name}},
                    "title": name,
                    "fragment": {"text": text, "start": 0, "end": len(text)},
                    "source_length": len(text),
                    "recorded_at": now,
                },
            )
        yield self.line(
            number,
            {
                "kind": "entity",
                "id": stable_id(project, name),
                "story_line_id": home,
                "entity_type": record["entityType"],
                "canonical_label": name,
                "description": "\n".join(observations),
                "confirmation_state": "unknown",
                "updated_at": now,
                "source_reference_ids": references,
            },
        )

    def line(self, where: int | str, value: dict[str, Any]) -> ImportItem:
        return (where, validate_line(where, value))


def stored_project(db_path: Path, project: str) -> ProjectRow | None:
    """The stored project's name and status, or None when the graph has no such project."""
    conn = open_store(db_path, write=False)
    try:
        row = conn.execute("SELECT name, status FROM projects WHERE id = ?", (project,)).fetchone()
    finally:
        conn.close()
    return None if row is None else (str(row[0]), str(row[1]))


def import_memory_graph(
    db_path: Path, path: Path, project: str, *, dry_run: bool = False, progress: Progress | None = None
) -> tuple[ImportReport, list[str]]:
    """Import (or re-import) a memory-server file into `project`, creating the project when it is new."""
    if ":" in project:
        # Ids are memory:<project>:<entity name>, and names may hold ':' themselves: a project id without one
        # keeps every id unambiguous (project 'a', entity 'b:c' against project 'a:b', entity 'c').
        raise StoreError(
            f"--project {project!r}: a project that holds a memory graph may not contain ':' (it separates the"
            " project from the entity name in the graph's ids); choose another project id"
        )
    source = MemoryGraphSource(path, project, db_path=db_path)
    report = import_source(db_path, source, policy=source.policy, dry_run=dry_run, progress=progress)
    notes = source.notes.lines()
    if source.empty:  # a wrong path or a failed copy, more likely than a memory server that remembers nothing
        notes.append(f"{path} holds no memory records (it is empty, or only blank lines): only the project was written")
    return report, notes
