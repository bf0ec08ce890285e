"""`db import`: load interchange lines into an existing database in one transaction.

Every line is parsed and validated before the database is touched; then the lines are written
in `KIND_ORDER` inside a single transaction, so any bad line leaves the database exactly as it
was. A line whose key is already stored with the same content is skipped (no write, so no
revision is bumped); with different content it is an error, except in sync mode (server/store/sync.py),
where a mirror of another store brings the stored object up to date.

Lines come from a file (`import_file`) or from any other source as (where, line) pairs
(`import_items`): `where` is a line number or a place such as `table supervision_events row id=e-1`,
and every error names it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from server.contracts.base import GlobalScope, ObjectRef, ProjectsScope
from server.contracts.base import scope_key as key_of_scope
from server.contracts.interchange import (
    KIND_ORDER,
    EntityChangeLine,
    EntityLine,
    EntityRevisionLine,
    EventLine,
    ExperienceEventLine,
    ExperienceLine,
    LeafLine,
    Line,
    MemoryItemLine,
    ProjectLine,
    RelationLine,
    ResultLine,
    ScopeLine,
    SourceLine,
    SourceReferenceLine,
    SourceVersionLine,
    StoryEventLine,
    StoryLine,
    StoryLineLine,
    SummaryLine,
)
from server.store import sync
from server.store.errors import ImportRejected, StoreError, Where
from server.store.import_stories import StoryKinds
from server.store.jsonl import read_lines
from server.store.lines import Key, line_key, load_line
from server.store.migrate import open_store
from server.store.search_index import deferred_index
from server.store.sync import Retired, SyncPolicy

CHUNK_CODE_POINTS: Final = 4096
"""Source text is stored in chunks of this many code points (see source_chunks in migrations/)."""

INSERT_PROJECT: Final = "INSERT INTO projects (id, name, status) VALUES (:id, :name, :status)"
INSERT_SCOPE: Final = "INSERT INTO scopes (scope_key, kind) VALUES (:scope_key, :kind)"
INSERT_SCOPE_PROJECT: Final = "INSERT INTO scope_projects (scope_key, project_id) VALUES (:scope_key, :project_id)"
INSERT_RESULT: Final = (
    "INSERT INTO results (id, scope_key, stage, status, review_generated_at, recorded_at, revision, coverage_json)"
    " VALUES (:id, :scope_key, :stage, :status, :review_generated_at, :recorded_at, :revision, :coverage_json)"
)
INSERT_STORY_LINE: Final = (
    "INSERT INTO story_lines (id, scope_key, topic, recorded_at, revision)"
    " VALUES (:id, :scope_key, :topic, :recorded_at, :revision)"
)
INSERT_SOURCE: Final = (
    "INSERT INTO sources (id, source_type, project_id, conversation_id, title, status, current_version, updated_at)"
    " VALUES (:id, :source_type, :project_id, :conversation_id, :title, :status, :current_version, :updated_at)"
)
INSERT_SOURCE_VERSION: Final = (
    "INSERT INTO source_versions (source_id, version, length, recorded_at)"
    " VALUES (:source_id, :version, :length, :recorded_at)"
)
INSERT_SOURCE_CHUNK: Final = (
    "INSERT INTO source_chunks (source_id, version, start, text) VALUES (:source_id, :version, :start, :text)"
)
INSERT_SOURCE_REFERENCE: Final = (
    "INSERT INTO source_references (id, result_id, scope_key, source_type, original_source_id, source_version,"
    " locator_json, title, fragment, fragment_start, fragment_end, source_length, availability, source_record_time,"
    " recorded_at) VALUES (:id, :result_id, :scope_key, :source_type, :original_source_id, :source_version,"
    " :locator_json, :title, :fragment, :fragment_start, :fragment_end, :source_length, :availability,"
    " :source_record_time, :recorded_at)"
)
INSERT_ENTITY: Final = (
    "INSERT INTO entities (id, story_line_id, scope_key, entity_type, canonical_label, description,"
    " confirmation_state, decision_status, work_status, updated_at, revision) VALUES (:id, :story_line_id,"
    " :scope_key, :entity_type, :canonical_label, :description, :confirmation_state, :decision_status,"
    " :work_status, :updated_at, :revision)"
)
INSERT_ENTITY_REVISION: Final = (
    "INSERT INTO entity_revisions (entity_id, result_id, scope_key, revision, canonical_label, description,"
    " confirmation_state, recorded_at) VALUES (:entity_id, :result_id, :scope_key, :revision, :canonical_label,"
    " :description, :confirmation_state, :recorded_at)"
)
INSERT_EVENT: Final = (
    "INSERT INTO events (id, result_id, scope_key, story_line_id, event_type, title, description, event_time_start,"
    " event_time_end, event_time_precision, event_time_basis, recorded_at, confirmation_state, revision)"
    " VALUES (:id, :result_id, :scope_key, :story_line_id, :event_type, :title, :description, :event_time_start,"
    " :event_time_end, :event_time_precision, :event_time_basis, :recorded_at, :confirmation_state, :revision)"
)
INSERT_EVENT_ENTITY: Final = (
    "INSERT INTO event_entities (event_id, entity_id, scope_key) VALUES (:event_id, :entity_id, :scope_key)"
)
INSERT_ENTITY_CHANGE: Final = (
    "INSERT INTO entity_changes (entity_id, association_key, result_id, scope_key, event_id, change_type,"
    " description, entity_revision, applicable_from, applicable_to, confirmation_state, recorded_at)"
    " VALUES (:entity_id, :association_key, :result_id, :scope_key, :event_id, :change_type, :description,"
    " :entity_revision, :applicable_from, :applicable_to, :confirmation_state, :recorded_at)"
)
INSERT_RELATION: Final = (
    "INSERT INTO relations (id, result_id, scope_key, from_type, from_id, to_type, to_id, relation_type, reason,"
    " confirmation_state, recorded_at, revision) VALUES (:id, :result_id, :scope_key, :from_type, :from_id,"
    " :to_type, :to_id, :relation_type, :reason, :confirmation_state, :recorded_at, :revision)"
)
INSERT_SUMMARY: Final = (
    "INSERT INTO summaries (id, result_id, scope_key, interval_from, interval_to, body, open_items, recorded_at,"
    " revision) VALUES (:id, :result_id, :scope_key, :interval_from, :interval_to, :body, :open_items,"
    " :recorded_at, :revision)"
)
INSERT_LEAF: Final = (
    "INSERT INTO leaves (id, result_id, scope_key, summary, recorded_at)"
    " VALUES (:id, :result_id, :scope_key, :summary, :recorded_at)"
)
INSERT_FACT_LINK: Final = (
    "INSERT INTO fact_links (owner_type, owner_id, object_type, object_id, scope_key, description)"
    " VALUES (:owner_type, :owner_id, :object_type, :object_id, :scope_key, :description)"
)
INSERT_OBJECT_SOURCE: Final = (
    "INSERT INTO object_sources (object_type, object_id, source_reference_id, scope_key)"
    " VALUES (:object_type, :object_id, :source_reference_id, :scope_key)"
)
INSERT_MEMORY_ITEM: Final = (
    "INSERT INTO memory_items (id, project_id, memory_type, body, confirmation_state, updated_at)"
    " VALUES (:id, :project_id, :memory_type, :body, :confirmation_state, :updated_at)"
)

SCOPE_EXISTS: Final = "SELECT 1 FROM scopes WHERE scope_key = :id"
PROJECT_EXISTS: Final = "SELECT 1 FROM projects WHERE id = :id"
SOURCE_EXISTS: Final = "SELECT 1 FROM sources WHERE id = :id"
SOURCE_VERSION_EXISTS: Final = "SELECT 1 FROM source_versions WHERE source_id = :id AND version = :version"
# The scope an object belongs to, by the type name used in object refs.
SCOPE_OF: Final[dict[str, str]] = {
    "result": "SELECT scope_key FROM results WHERE id = :id",
    "story_line": "SELECT scope_key FROM story_lines WHERE id = :id",
    "event": "SELECT scope_key FROM events WHERE id = :id",
    "entity": "SELECT scope_key FROM entities WHERE id = :id",
    "entity_change": "SELECT scope_key FROM entity_changes WHERE entity_id = :id AND association_key = :key",
    "relation": "SELECT scope_key FROM relations WHERE id = :id",
    "summary": "SELECT scope_key FROM summaries WHERE id = :id",
    "source_reference": "SELECT scope_key FROM source_references WHERE id = :id",
    "story": "SELECT scope_key FROM stories WHERE id = :id",
    "experience": "SELECT scope_key FROM experiences WHERE id = :id",
}
# Relations, summaries and leaves cannot name these yet: the reader does not follow such links (issue 12).
NOT_LINKABLE_YET: Final = ("story", "experience")

# The field that names a line's key, for "already used with different content" errors.
KEY_FIELD: Final[dict[str, str]] = {
    "scope": "scope",
    "source_version": "version",
    "entity_revision": "result_id",
    "entity_change": "association_key",
    "story_event": "event_id",
    "experience_event": "event_id",
}


ImportItem = tuple[Where, Line | Retired]
"""What a source yields: a line, or (sync mode) an object it knows is retired, with where it came from."""


@dataclass(frozen=True)
class ImportReport:
    """What an import wrote: new lines per kind, lines already stored unchanged, and (sync mode) updates."""

    database: Path
    written: dict[str, int] = field(default_factory=dict)
    unchanged: int = 0
    updated: dict[str, int] = field(default_factory=dict)
    retired: int = 0

    @property
    def total(self) -> int:
        return sum(self.written.values())

    def __str__(self) -> str:
        per_kind = ", ".join(f"{count} {kind}" for kind, count in self.written.items() if count) or "nothing new"
        text = f"imported {self.total} lines ({per_kind}) into {self.database}; {self.unchanged} unchanged"
        if self.updated:
            text += f"; {sum(self.updated.values())} updated ({', '.join(f'{n} {k}' for k, n in self.updated.items())})"
        if self.retired:
            text += f"; {self.retired} retired"
        return text


def import_file(db_path: Path, jsonl_path: Path) -> ImportReport:
    """Validate every line of `jsonl_path`, then write the new ones to `db_path` in one transaction."""
    conn = open_store(db_path, write=True)
    try:
        lines = read_lines(jsonl_path)
        return _Import(conn, db_path).run(lines)
    finally:
        conn.close()


def import_items(db_path: Path, items: Iterable[ImportItem], policy: SyncPolicy | None = None) -> ImportReport:
    """Write validated lines from any source in one transaction; `policy` turns on sync mode."""
    conn = open_store(db_path, write=True)
    try:
        return _Import(conn, db_path, policy).run(list(items))
    finally:
        conn.close()


class _Import(StoryKinds):
    """One import run: writes in KIND_ORDER, checks links as it goes, and checks forward links at the end."""

    def __init__(self, conn: sqlite3.Connection, database: Path, policy: SyncPolicy | None = None) -> None:
        self.conn = conn
        self.database = database
        self.policy = policy
        self.origin: dict[tuple[str, Key], Where] = {}
        self.deferred: list[Callable[[], object]] = []
        self.written = dict.fromkeys(KIND_ORDER, 0)
        self.updated = dict.fromkeys(KIND_ORDER, 0)
        self.unchanged = 0
        self.retired = 0
        self.replacing = False

    def run(self, items: Sequence[ImportItem]) -> ImportReport:
        lines = [(where, line) for where, line in items if not isinstance(line, Retired)]
        ordered = sorted(lines, key=lambda item: KIND_ORDER.index(item[1].kind))  # stable: file order within a kind
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            with deferred_index(self.conn):
                if self.policy is not None:
                    for where, item in items:
                        if isinstance(item, Retired):
                            self.retired += sync.retire(self.conn, where, item)
                    self.retired += sync.drop_unlisted_links(self.conn, (line for _, line in lines))
                for number, line in ordered:
                    self._line(number, line)
                # Links that may point forward (to a later kind or a later line of the same kind).
                for check in self.deferred:
                    check()
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"import aborted, nothing was written: {self.database}: {exc}") from None
        finally:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        return ImportReport(
            self.database,
            {kind: n for kind, n in self.written.items() if n},
            self.unchanged,
            {kind: n for kind, n in self.updated.items() if n},
            self.retired,
        )

    def _line(self, number: Where, line: Line) -> None:
        key = line_key(line)
        stored = load_line(self.conn, line.kind, key)
        if stored is not None:
            if self.policy is not None and (line.kind, key) not in self.origin:
                if not self.policy.same(stored, line):
                    if line.kind not in sync.REPLACEABLE:
                        self._differs(number, line, stored, key)
                    self._replace(number, self.policy.carry_over(stored, line), key)
                    return
            elif stored != line:
                self._differs(number, line, stored, key)
            self.unchanged += 1
            return
        try:
            self._write(number, line)
        except sqlite3.IntegrityError as exc:
            raise ImportRejected(number, "", f"the database refused the {line.kind}: {exc}") from None
        self.origin[(line.kind, key)] = number
        self.written[line.kind] += 1

    def _replace(self, number: Where, line: Line, key: Key) -> None:
        """Sync mode: the stored object changed upstream; rewrite it in place (see server/store/sync.py)."""
        sync.drop_own_links(self.conn, line.kind, key)
        self.replacing = True
        try:
            self._write(number, line)
        except sqlite3.IntegrityError as exc:
            raise ImportRejected(number, "", f"the database refused the update of the {line.kind}: {exc}") from None
        finally:
            self.replacing = False
        self.origin[(line.kind, key)] = number
        self.updated[line.kind] += 1

    def _differs(self, number: Where, line: Line, stored: Line, key: Key) -> None:
        old, new = stored.model_dump(), line.model_dump()
        fields = ", ".join(name for name in new if old.get(name) != new[name])
        first = self.origin.get((line.kind, key))
        where = "the database" if first is None else f"line {first}" if isinstance(first, int) else first
        raise ImportRejected(
            number,
            KEY_FIELD.get(line.kind, "id"),
            f"{line.kind} {'/'.join(key)!r} is already defined by {where} with different content"
            f" (differs in: {fields})",
        )

    def _write(self, number: Where, line: Line) -> None:
        match line:
            case ProjectLine():
                self._exec(INSERT_PROJECT, line.model_dump())
            case ScopeLine():
                self._scope(number, line.scope)
            case ResultLine():
                scope = self._declared_scope(number, line.scope)
                coverage = None if line.coverage is None else orjson.dumps(line.coverage.model_dump(mode="json"))
                self._exec(INSERT_RESULT, line.model_dump() | {"scope_key": scope, "coverage_json": _text(coverage)})
            case StoryLineLine():
                scope = self._declared_scope(number, line.scope)
                self._exec(INSERT_STORY_LINE, line.model_dump() | {"scope_key": scope})
            case SourceLine():
                self._source(number, line)
            case SourceVersionLine():
                self._source_version(number, line)
            case SourceReferenceLine():
                scope = self._scope_of(number, "result_id", "result", line.result_id)
                locator = None if line.locator is None else orjson.dumps(line.locator.model_dump(exclude_none=True))
                fragment = {"fragment": line.fragment.text, "fragment_start": line.fragment.start}
                fragment["fragment_end"] = line.fragment.end
                row = line.model_dump() | fragment | {"scope_key": scope, "locator_json": _text(locator)}
                self._exec(INSERT_SOURCE_REFERENCE, row)
            case EntityLine():
                scope = self._scope_of(number, "story_line_id", "story_line", line.story_line_id)
                self._exec(INSERT_ENTITY, line.model_dump() | {"scope_key": scope})
                self._evidence(number, "entity", line.id, line.source_reference_ids, scope)
            case EntityRevisionLine():
                scope = self._scope_of(number, "entity_id", "entity", line.entity_id)
                self._scope_of(number, "result_id", "result", line.result_id, scope, "entity")
                self._exec(INSERT_ENTITY_REVISION, line.model_dump() | {"scope_key": scope})
            case EventLine():
                self._event(number, line)
            case EntityChangeLine():
                self._entity_change(number, line)
            case RelationLine():
                scope = self._scope_of(number, "result_id", "result", line.result_id)
                ends = {"from_type": line.from_ref.type, "from_id": line.from_ref.id}
                ends |= {"to_type": line.to_ref.type, "to_id": line.to_ref.id}
                self._exec(INSERT_RELATION, line.model_dump() | ends | {"scope_key": scope})
                self._evidence(number, "relation", line.id, line.source_reference_ids, scope)
                self._later_ref(number, "from_ref", line.from_ref, scope)
                self._later_ref(number, "to_ref", line.to_ref, scope)
            case SummaryLine():
                self._summary(number, line)
            case LeafLine():
                scope = self._scope_of(number, "result_id", "result", line.result_id)
                self._exec(INSERT_LEAF, line.model_dump() | {"scope_key": scope})
                for index, fact in enumerate(line.facts):
                    link = {"owner_type": "leaf", "owner_id": line.id, "description": fact.description}
                    self._exec(INSERT_FACT_LINK, link | _ref_row(fact.object_ref) | {"scope_key": scope})
                    self._later_ref(number, f"facts[{index}].object_ref", fact.object_ref, scope)
            case StoryLine():
                self._story(number, line)
            case StoryEventLine():
                self._story_event(number, line)
            case ExperienceLine():
                self._experience(number, line)
            case ExperienceEventLine():
                self._experience_event(number, line)
            case MemoryItemLine():
                if line.project_id is not None:
                    self._require(number, "project_id", PROJECT_EXISTS, {"id": line.project_id}, "project")
                self._exec(INSERT_MEMORY_ITEM, line.model_dump())

    def _scope(self, number: Where, scope: GlobalScope | ProjectsScope) -> None:
        key = key_of_scope(scope)
        projects = scope.projectIds if isinstance(scope, ProjectsScope) else []
        for index, project in enumerate(projects):
            self._require(number, f"scope.projectIds[{index}]", PROJECT_EXISTS, {"id": project}, "project")
        self._exec(INSERT_SCOPE, {"scope_key": key, "kind": scope.kind})
        for project in projects:
            self._exec(INSERT_SCOPE_PROJECT, {"scope_key": key, "project_id": project})

    def _source(self, number: Where, line: SourceLine) -> None:
        if line.project_id is not None:
            self._require(number, "project_id", PROJECT_EXISTS, {"id": line.project_id}, "project")
        self._exec(INSERT_SOURCE, line.model_dump())
        version = line.current_version
        if version is not None:

            def check() -> None:
                if self.conn.execute(SOURCE_VERSION_EXISTS, {"id": line.id, "version": version}).fetchone() is None:
                    raise ImportRejected(
                        number,
                        "current_version",
                        f"source {line.id!r} has no version {version!r}: add a source_version line for it",
                    )

            self.deferred.append(check)

    def _source_version(self, number: Where, line: SourceVersionLine) -> None:
        self._require(number, "source_id", SOURCE_EXISTS, {"id": line.source_id}, "source")
        self._exec(INSERT_SOURCE_VERSION, line.model_dump() | {"length": len(line.text)})
        text = line.text
        for start in range(0, len(text), CHUNK_CODE_POINTS):
            chunk = {"source_id": line.source_id, "version": line.version, "start": start}
            self._exec(INSERT_SOURCE_CHUNK, chunk | {"text": text[start : start + CHUNK_CODE_POINTS]})

    def _event(self, number: Where, line: EventLine) -> None:
        scope = self._scope_of(number, "result_id", "result", line.result_id)
        if line.story_line_id is not None:
            self._scope_of(number, "story_line_id", "story_line", line.story_line_id, scope, "event")
        time = line.event_time
        columns = dict.fromkeys(("event_time_start", "event_time_end", "event_time_precision", "event_time_basis"))
        if time is not None:
            columns |= {
                "event_time_start": time.start,
                "event_time_end": time.end,
                "event_time_precision": time.precision,
                "event_time_basis": time.basis,
            }
        self._exec(INSERT_EVENT, line.model_dump() | columns | {"scope_key": scope})
        for index, entity in enumerate(line.entity_ids):
            self._scope_of(number, f"entity_ids[{index}]", "entity", entity, scope, "event")
            self._exec(INSERT_EVENT_ENTITY, {"event_id": line.id, "entity_id": entity, "scope_key": scope})
        self._evidence(number, "event", line.id, line.source_reference_ids, scope)

    def _entity_change(self, number: Where, line: EntityChangeLine) -> None:
        scope = self._scope_of(number, "entity_id", "entity", line.entity_id)
        self._scope_of(number, "result_id", "result", line.result_id, scope, "entity_change")
        if line.event_id is not None:
            self._scope_of(number, "event_id", "event", line.event_id, scope, "entity_change")
        self._exec(INSERT_ENTITY_CHANGE, line.model_dump() | {"scope_key": scope})
        address = f"{line.entity_id}#{line.association_key}"
        self._evidence(number, "entity_change", address, line.source_reference_ids, scope)

    def _summary(self, number: Where, line: SummaryLine) -> None:
        scope = self._scope_of(number, "result_id", "result", line.result_id)
        interval = line.interval or {}
        columns = {
            "interval_from": interval.get("from"),
            "interval_to": interval.get("to"),
            "open_items": orjson.dumps(line.open_items).decode(),
        }
        self._exec(INSERT_SUMMARY, line.model_dump() | columns | {"scope_key": scope})
        for index, ref in enumerate(line.fact_refs):
            link = {"owner_type": "summary", "owner_id": line.id, "description": None}
            self._exec(INSERT_FACT_LINK, link | _ref_row(ref) | {"scope_key": scope})
            self._later_ref(number, f"fact_refs[{index}]", ref, scope)
        self._evidence(number, "summary", line.id, line.source_reference_ids, scope)

    def _evidence(self, number: Where, object_type: str, object_id: str, ids: list[str], scope: str) -> None:
        for index, reference in enumerate(ids):
            self._scope_of(number, f"source_reference_ids[{index}]", "source_reference", reference, scope, object_type)
            row = {"object_type": object_type, "object_id": object_id, "source_reference_id": reference}
            self._exec(INSERT_OBJECT_SOURCE, row | {"scope_key": scope})

    def _later_ref(self, number: Where, name: str, ref: ObjectRef, scope: str) -> None:
        """An object ref may name a line not written yet: check it once every line is in."""
        if ref.type in NOT_LINKABLE_YET:
            raise ImportRejected(
                number, f"{name}.type", f"relations, summaries and leaves cannot link to a {ref.type} yet"
            )
        self.deferred.append(lambda: self._scope_of(number, name, ref.type, ref.id, scope, "line"))

    def _declared_scope(self, number: Where, scope: GlobalScope | ProjectsScope) -> str:
        key = key_of_scope(scope)
        if self.conn.execute(SCOPE_EXISTS, {"id": key}).fetchone() is None:
            raise ImportRejected(number, "scope", f"scope {key} is not declared: add a scope line for it")
        return key

    def _scope_of(
        self, number: Where, name: str, object_type: str, object_id: str, expected: str | None = None, owner: str = ""
    ) -> str:
        """The scope of a linked object; the link is refused if it is missing or lives in another scope."""
        params = {"id": object_id}
        if object_type == "entity_change":
            entity, _, association = object_id.rpartition("#")
            params = {"id": entity, "key": association}
        row = self.conn.execute(SCOPE_OF[object_type], params).fetchone()
        if row is None:
            raise ImportRejected(number, name, f"no {object_type} {object_id!r} in the file or the database")
        scope = str(row[0])
        if expected is not None and scope != expected:
            raise ImportRejected(
                number,
                name,
                f"{object_type} {object_id!r} belongs to scope {scope}, but this {owner} belongs to scope {expected};"
                " links across scopes are not allowed",
            )
        return scope

    def _require(self, number: Where, name: str, sql: str, params: dict[str, str], what: str) -> None:
        if self.conn.execute(sql, params).fetchone() is None:
            raise ImportRejected(number, name, f"no {what} {params['id']!r} in the file or the database")

    def _exec(self, sql: str, params: dict[str, Any]) -> None:
        self.conn.execute(sync.upsert(sql) if self.replacing else sql, params)


def _ref_row(ref: ObjectRef) -> dict[str, str]:
    return {"object_type": ref.type, "object_id": ref.id}


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()
