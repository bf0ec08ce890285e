"""`db import --from goodbuddy APP.db`: the GoodBuddy desktop app's assistant database as an import source.

The app database is opened read-only through a `mode=ro` URI (never `immutable`: the app may be
running and writing through its WAL) and read in one read transaction, so one import sees one
consistent snapshot while the app keeps working. Only schema version 62 is read; any other version
is refused with one line. Every row becomes interchange lines (docs/interchange.md has the mapping
and every upstream field left out, and why), each tagged with the table and row it came from.

Re-import is a sync (server/store/sync.py): ids are the app's ids, an object whose content changed
upstream (a confirmed entity, an edited message) is updated in place, and an event the app marks
superseded by a later review of the same scope is retired.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError

from server.contracts.base import Scope, format_utc
from server.store.errors import DatabaseUnusable, ImportRejected, Where
from server.store.goodbuddy_rows import (
    Notes,
    at,
    coverage,
    event_time,
    id_list,
    instant,
    json_column,
    live_record,
    locator,
    maybe_instant,
    offset,
    revision_of,
    scope_key_of,
    source_key,
)
from server.store.goodbuddy_stories import count_stories_and_experiences
from server.store.importer import ImportItem, ImportReport, import_items
from server.store.jsonl import validate_line
from server.store.paths import sqlite_uri
from server.store.sync import Retired, SyncPolicy

SUPPORTED_SCHEMA: Final = 62
POLICY: Final = SyncPolicy()
TABLES_READ: Final = (
    "projects",
    "messages",
    "tasks",
    "memory_items",
    "story_lines",
    "supervision_runs",
    "supervision_results",
    "supervision_sources",
    "supervision_entities",
    "supervision_entity_changes",
    "supervision_events",
    "supervision_event_sources",
    "supervision_event_entities",
    "supervision_relations",
    "supervision_review_runs",
    "supervision_review_sources",
    "supervision_review_batches",
    "supervision_review_current",
    "supervision_stories",
    "supervision_event_stories",
    "supervision_experiences",
    "supervision_experience_events",
)
SCOPE: Final[TypeAdapter[Scope]] = TypeAdapter(Scope)

PROJECTS: Final = "SELECT id, name, status FROM projects ORDER BY id"
STORY_LINES: Final = "SELECT id, scope_json, title, created_at FROM story_lines ORDER BY id"
RESULTS: Final = """
SELECT r.id, r.run_id, r.summary, r.open_items_json, r.coverage_json, r.created_at, r.graph_snapshot_json,
       run.scope_json, run.time_range_json, rr.state_json
  FROM supervision_results AS r JOIN supervision_runs AS run ON run.id = r.run_id
  LEFT JOIN supervision_review_runs AS rr ON rr.run_id = r.run_id
 ORDER BY r.created_at, r.rowid"""
REVIEW_SOURCES: Final = """
SELECT source, revision, length, initial_offset, processed_offset FROM supervision_review_sources
 WHERE run_id = ? ORDER BY source"""
BATCHES: Final = "SELECT id, output_json FROM supervision_review_batches WHERE run_id = ? ORDER BY rowid"
SOURCES: Final = """
SELECT id, result_id, source_type, source_id, title, occurred_at, content, availability, locator_json
  FROM supervision_sources ORDER BY id"""
CURRENT_RECORD: Final = """
SELECT type, project_id, conversation_id, title, occurred, alternate_time, body, context
  FROM supervision_review_current WHERE record_id = ? AND reference_index = ? AND type = ?"""
RECORD_EXISTS: Final[dict[str, str]] = {
    "conversation": "SELECT 1 FROM messages WHERE id = ?",
    "task": "SELECT 1 FROM tasks WHERE id = ?",
    "knowledge": "SELECT 1 FROM messages WHERE id = ?"
    " AND json_extract(metadata_json, '$.sourceReferences[' || ? || ']') IS NOT NULL",
}
MEMORY: Final = "SELECT id, scope, scope_id, type, content, status, updated_at FROM memory_items ORDER BY id"
ENTITIES: Final = """
SELECT id, story_line_id, canonical_label, description, confirmation_state, updated_at, source_reference_ids_json
  FROM supervision_entities ORDER BY id"""
CHANGES: Final = """
SELECT id, entity_id, result_id, change_type, description, confirmation_state, source_reference_ids_json
  FROM supervision_entity_changes ORDER BY id"""
EVENTS: Final = """
SELECT id, story_line_id, result_id, occurred_at, title, description, event_type, superseded_by
  FROM supervision_events ORDER BY id"""
EVENT_SOURCES: Final = "SELECT event_id, source_id FROM supervision_event_sources ORDER BY event_id, source_id"
EVENT_ENTITIES: Final = "SELECT event_id, entity_id FROM supervision_event_entities ORDER BY event_id, entity_id"
RELATIONS: Final = """
SELECT id, story_line_id, from_entity_id, to_entity_id, relation_type, reason, confirmation_state,
       source_reference_ids_json
  FROM supervision_relations ORDER BY id"""


def open_app_database(path: Path) -> sqlite3.Connection:
    """The app database, read-only, checked to be a GoodBuddy assistant database at schema 62."""
    if not path.exists():
        raise DatabaseUnusable(f"{path} does not exist")
    if path.is_dir():
        raise DatabaseUnusable(f"{path} is a directory, not a database file")
    try:
        conn = sqlite3.connect(sqlite_uri(path, "ro"), uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise DatabaseUnusable(f"cannot open {path} read-only: {exc}") from None
    try:
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            present = {row[0] for row in conn.execute("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view')")}
        except sqlite3.DatabaseError as exc:
            raise DatabaseUnusable(f"{path} is not a SQLite database ({exc})") from None
        if not {"projects", "supervision_results"} <= present:
            raise DatabaseUnusable(f"{path} is not a GoodBuddy assistant database (it has no supervision tables)")
        if version != SUPPORTED_SCHEMA:
            hint = (
                "open it once with a GoodBuddy release that uses schema 62, which upgrades it"
                if version < SUPPORTED_SCHEMA
                else "this story-graph-mcp does not know that schema yet; upgrade story-graph-mcp"
            )
            raise DatabaseUnusable(
                f"{path} is a GoodBuddy assistant database at schema version {version}; only version"
                f" {SUPPORTED_SCHEMA} can be imported: {hint}"
            )
        missing = [table for table in TABLES_READ if table not in present]
        if missing:
            raise DatabaseUnusable(f"{path} claims GoodBuddy schema {SUPPORTED_SCHEMA} but has no {missing[0]}")
    except BaseException:
        conn.close()
        raise
    conn.row_factory = sqlite3.Row
    return conn


@dataclass(frozen=True)
class Result:
    id: str
    run_id: str
    scope_key: str
    created_at: str
    where: str


class GoodBuddySource:
    """Reads one app database into import items; `notes` then says what was left out and why."""

    policy: Final = POLICY

    def __init__(self, path: Path, now: str | None = None) -> None:
        self.path = path
        self.now = now or format_utc(datetime.now(UTC))
        self.notes = Notes()

    def items(self) -> list[ImportItem]:
        conn = open_app_database(self.path)
        try:
            conn.execute("BEGIN")  # one snapshot of the app's data, however it writes meanwhile
            try:
                return list(_Reader(conn, self.now, self.notes).items())
            finally:
                conn.execute("ROLLBACK")
        except sqlite3.DatabaseError as exc:
            raise DatabaseUnusable(f"cannot read {self.path}: {exc}") from None
        finally:
            conn.close()


class _Reader:
    """One pass over one snapshot. Objects keep the app's ids; each lives in the scope of its review."""

    def __init__(self, conn: sqlite3.Connection, now: str, notes: Notes) -> None:
        self.conn = conn
        self.now = now
        self.notes = notes
        self.projects: set[str] = set()
        self.story_line_scope: dict[str, str] = {}
        self.results: dict[str, Result] = {}
        self.reference_scope: dict[str, str] = {}
        self.entity_scope: dict[str, str] = {}
        self.snapshots: dict[str, dict[str, Any]] = {}
        self.deferred_leaves: list[tuple[str, str, str, str | None, str, dict[str, str | None]]] = []

    def line(self, where: Where, value: dict[str, Any]) -> ImportItem:
        return (where, validate_line(where, value))

    def items(self) -> Iterator[ImportItem]:
        yield from self.read_projects()
        yield from self.read_scopes_results_and_story_lines()
        yield from self.read_sources()
        yield from self.read_entities()
        yield from self.read_events()
        yield from self.read_changes()
        yield from self.read_relations()
        yield from self.read_memory()
        stories, experiences = count_stories_and_experiences(self.conn)
        self.notes.add("stories (read, not imported: this build stores no story objects yet)", stories)
        self.notes.add(
            "experiences (read, not imported: this build stores no experience objects yet)",
            experiences,
        )

    # --- projects, scopes, results, story lines, summaries, leaves ---------------------------------

    def read_projects(self) -> Iterator[ImportItem]:
        for row in self.conn.execute(PROJECTS):
            self.projects.add(row["id"])
            yield self.line(at("projects", id=row["id"]), {"kind": "project", **dict(row)})

    def scope(self, where: Where, column: str, text: object) -> dict[str, Any]:
        value = json_column(where, column, text)
        try:
            scope = SCOPE.validate_python(value)
        except ValidationError as exc:
            raise ImportRejected(where, column, f"not a review scope: {exc.errors()[0]['msg']}") from None
        return scope.model_dump()

    def read_scopes_results_and_story_lines(self) -> Iterator[ImportItem]:
        scopes: dict[str, tuple[str, dict[str, Any]]] = {}
        story_lines: list[ImportItem] = []
        for row in self.conn.execute(STORY_LINES).fetchall():
            where = at("story_lines", id=row["id"])
            scope = self.scope(where, "scope_json", row["scope_json"])
            self.story_line_scope[row["id"]] = scope_key_of(scope)
            scopes.setdefault(scope_key_of(scope), (where, scope))
            value = {"kind": "story_line", "id": row["id"], "scope": scope, "topic": row["title"]}
            story_lines.append(
                self.line(where, value | {"recorded_at": instant(where, "created_at", row["created_at"])})
            )
        results: list[ImportItem] = []
        for row in self.conn.execute(RESULTS).fetchall():
            where = at("supervision_results", id=row["id"])
            scope = self.scope(at("supervision_runs", id=row["run_id"]), "scope_json", row["scope_json"])
            key = scope_key_of(scope)
            scopes.setdefault(key, (where, scope))
            created = instant(where, "created_at", row["created_at"])
            self.results[row["id"]] = Result(row["id"], row["run_id"], key, created, where)
            snapshot = json_column(where, "graph_snapshot_json", row["graph_snapshot_json"])
            self.snapshots[row["id"]] = snapshot if isinstance(snapshot, dict) else {}
            results.extend(self.result_lines(row, where, scope, created))
        for _key, (where, scope) in sorted(scopes.items()):
            for project in scope.get("projectIds", []):
                if project not in self.projects:
                    # A review of a project deleted since: keep its history, unreadable like any inactive project.
                    self.projects.add(project)
                    self.notes.add(
                        "projects named by a review scope but deleted in the app (stored with status 'deleted')"
                    )
                    yield self.line(where, {"kind": "project", "id": project, "name": project, "status": "deleted"})
            yield self.line(where, {"kind": "scope", "scope": scope})
        yield from results
        yield from story_lines

    def result_lines(self, row: sqlite3.Row, where: str, scope: dict[str, Any], created: str) -> Iterator[ImportItem]:
        run_where = at("supervision_runs", id=row["run_id"])
        span = json_column(run_where, "time_range_json", row["time_range_json"])
        start, end = (maybe_instant(span.get(name)) if isinstance(span, dict) else None for name in ("from", "to"))
        interval = {"from": start, "to": end} if start is not None and end is not None else None
        review_sources = [dict(r) for r in self.conn.execute(REVIEW_SOURCES, (row["run_id"],))]
        state = json_column(at("supervision_review_runs", run_id=row["run_id"]), "state_json", row["state_json"])
        omitted = state.get("omittedSources", 0) if isinstance(state, dict) else 0
        stored = json_column(where, "coverage_json", row["coverage_json"])
        record = coverage(where, stored, review_sources, int(omitted) if isinstance(omitted, int) else 0, interval)
        yield self.line(
            where,
            {
                "kind": "result",
                "id": row["id"],
                "scope": scope,
                "stage": "supervision",
                "review_generated_at": created,
                "recorded_at": created,
                "coverage": record,
            },
        )
        open_items = json_column(where, "open_items_json", row["open_items_json"]) or []
        yield self.line(
            where,
            {
                "kind": "summary",
                "id": row["id"],
                "result_id": row["id"],
                "interval": interval,
                "body": row["summary"],
                "open_items": [item if isinstance(item, str) else str(item) for item in open_items],
                "recorded_at": created,
            },
        )
        for batch in self.conn.execute(BATCHES, (row["run_id"],)).fetchall():
            yield from self.leaf_lines(batch, row["id"], created)

    def leaf_lines(self, batch: sqlite3.Row, result_id: str, created: str) -> Iterator[ImportItem]:
        """A successful leaf: its own summary (id `leaf:<batch>`, as the app's reader shows it) and its
        independent descriptions of the entities it re-identified (`persistedId`)."""
        where = at("supervision_review_batches", id=batch["id"])
        output = json_column(where, "output_json", batch["output_json"])
        if not isinstance(output, dict):
            raise ImportRejected(where, "output_json", "expected a JSON object")
        summary = output.get("summary") if isinstance(output.get("summary"), str) else None
        listed = output.get("openItems")
        open_items: list[Any] = listed if isinstance(listed, list) else []
        yield self.line(
            where,
            {
                "kind": "summary",
                "id": f"leaf:{batch['id']}",
                "result_id": result_id,
                "body": summary or "",
                "open_items": [item if isinstance(item, str) else str(item) for item in open_items],
                "recorded_at": created,
            },
        )
        facts: dict[str, str | None] = {}
        entities = output.get("entities")
        for entity in entities if isinstance(entities, list) else []:
            persisted = entity.get("persistedId") if isinstance(entity, dict) else None
            if isinstance(persisted, str):
                description = entity.get("description")
                facts.setdefault(persisted, description if isinstance(description, str) else None)
            else:
                self.notes.add("leaf entities without a stored identity (not imported; the leaf's summary is)")
        self.deferred_leaves.append((where, batch["id"], result_id, summary, created, facts))
        self.notes.add(
            "leaf relations and events (not imported: they name model-local ids)",
            sum(len(output[name]) for name in ("relations", "events") if isinstance(output.get(name), list)),
        )

    # --- source references and the live records behind them ---------------------------------------

    def read_sources(self) -> Iterator[ImportItem]:
        latest: dict[str, tuple[Result, sqlite3.Row, dict[str, Any] | None]] = {}
        gone_times: dict[str, list[str]] = {}
        for row in self.conn.execute(SOURCES).fetchall():
            where = at("supervision_sources", id=row["id"])
            result = self.results.get(row["result_id"])
            if result is None:
                continue
            upstream = json_column(where, "locator_json", row["locator_json"])
            upstream = upstream if isinstance(upstream, dict) else None
            key = source_key(row["source_type"], row["source_id"], upstream)
            self.reference_scope[row["id"]] = result.scope_key
            if key not in latest or latest[key][0].created_at <= result.created_at:
                latest[key] = (result, row, upstream)
            if (time := maybe_instant(row["occurred_at"])) is not None:
                gone_times.setdefault(key, []).append(time)
            start, end = offset(upstream, "start"), offset(upstream, "end")
            revision = (upstream or {}).get("revision")
            yield self.line(
                where,
                {
                    "kind": "source_reference",
                    "id": row["id"],
                    "result_id": row["result_id"],
                    "source_type": row["source_type"],
                    "original_source_id": key,
                    "source_version": revision if isinstance(revision, str) else None,
                    "locator": locator(upstream),
                    "title": row["title"],
                    "fragment": {"text": row["content"], "start": start, "end": end if start is not None else None},
                    "source_length": offset(upstream, "length"),
                    "availability": row["availability"],
                    "source_record_time": row["occurred_at"],
                    "recorded_at": result.created_at,
                },
            )
        for key, (result, row, upstream) in sorted(latest.items()):
            yield from self.source_record(key, result, row, upstream, max(gone_times.get(key, [result.created_at])))

    def source_record(
        self, key: str, result: Result, row: sqlite3.Row, upstream: dict[str, Any] | None, last_seen: str
    ) -> Iterator[ImportItem]:
        """The live record behind a source key, its current text stored as the current version."""
        where = f"source {key} (view supervision_review_current)"
        live = live_record(key)
        current: Mapping[str, Any] | None = None
        if live is not None:
            current = self.conn.execute(CURRENT_RECORD, live).fetchone()
        elif key.startswith("memory:"):
            current = self.memory_record(key.removeprefix("memory:"))
        if current is not None:
            version = revision_of(current["context"])
            project = current["project_id"] if current["project_id"] in self.projects else None
            updated = maybe_instant(current["alternate_time"]) or maybe_instant(current["occurred"]) or last_seen
            yield self.line(
                where,
                {
                    "kind": "source",
                    "id": key,
                    "source_type": current["type"],
                    "project_id": project,
                    "conversation_id": current["conversation_id"] or None,
                    "title": current["title"],
                    "current_version": version,
                    "updated_at": updated,
                },
            )
            text = {"kind": "source_version", "source_id": key, "version": version, "text": current["body"]}
            yield self.line(where, text | {"recorded_at": self.now})
            return
        exists = RECORD_EXISTS.get(live[2]) if live is not None else None
        params = (live[0], live[1]) if live is not None and live[2] == "knowledge" else (live[0],) if live else ()
        status = "inaccessible" if exists and self.conn.execute(exists, params).fetchone() else "deleted"
        self.notes.add(f"sources {status} in the app (their saved fragments stay readable as snapshots)")
        project = (upstream or {}).get("projectId")
        conversation = (upstream or {}).get("conversationId")
        yield self.line(
            where,
            {
                "kind": "source",
                "id": key,
                "source_type": row["source_type"],
                "project_id": project if project in self.projects else None,
                "conversation_id": conversation if isinstance(conversation, str) and conversation else None,
                "title": row["title"],
                "status": status,
                "updated_at": last_seen,
            },
        )

    def memory_record(self, memory_id: str) -> dict[str, Any] | None:
        row = self.conn.execute(
            "SELECT scope, scope_id, content, updated_at FROM memory_items WHERE id = ? AND status = 'confirmed'",
            (memory_id,),
        ).fetchone()
        if row is None:
            return None
        project = row["scope_id"] if row["scope"] == "project" else None
        return {
            "type": "memory",
            "project_id": project,
            "conversation_id": None,
            "title": "Confirmed background",
            "occurred": row["updated_at"],
            "alternate_time": row["updated_at"],
            "body": row["content"],
            "context": row["content"],
        }

    # --- entities, events, changes, relations, leaves -----------------------------------------------

    def same_scope(self, ids: list[str], scope: str, known: dict[str, str], what: str) -> list[str]:
        """The linked ids that live in `scope`; the others are counted, not linked across scopes."""
        kept = [item for item in ids if known.get(item) == scope]
        gone = [item for item in ids if item not in known]
        self.notes.add(f"links to {what} no longer in the app (not imported)", len(gone))
        self.notes.add(
            f"links to {what} in another review scope (not imported: an object lives in one scope here)",
            len(ids) - len(kept) - len(gone),
        )
        return kept

    def read_entities(self) -> Iterator[ImportItem]:
        for row in self.conn.execute(ENTITIES).fetchall():
            where = at("supervision_entities", id=row["id"])
            scope = self.story_line_scope.get(row["story_line_id"])
            if scope is None:
                continue
            self.entity_scope[row["id"]] = scope
            refs = id_list(where, "source_reference_ids_json", row["source_reference_ids_json"])
            yield self.line(
                where,
                {
                    "kind": "entity",
                    "id": row["id"],
                    "story_line_id": row["story_line_id"],
                    "canonical_label": row["canonical_label"],
                    "description": row["description"],
                    "confirmation_state": row["confirmation_state"],
                    "updated_at": instant(where, "updated_at", row["updated_at"]),
                    "source_reference_ids": self.same_scope(refs, scope, self.reference_scope, "saved fragments"),
                },
            )
        yield from self.snapshot_revisions()
        yield from self.leaves()

    def snapshot_revisions(self) -> Iterator[ImportItem]:
        """Each result's graph snapshot: the entity as that result saved it (an entity revision)."""
        for result in self.results.values():
            entities = self.snapshots[result.id].get("entities")
            seen: set[str] = set()
            for index, entity in enumerate(entities if isinstance(entities, list) else []):
                entity_id = entity.get("id") if isinstance(entity, dict) else None
                if not isinstance(entity_id, str) or entity_id in seen:
                    continue
                seen.add(entity_id)
                if self.same_scope([entity_id], result.scope_key, self.entity_scope, "entities (result snapshots)"):
                    state = entity.get("confirmation_state")
                    yield self.line(
                        f"{result.where}, graph_snapshot_json.entities[{index}]",
                        {
                            "kind": "entity_revision",
                            "entity_id": entity_id,
                            "result_id": result.id,
                            "canonical_label": str(entity.get("canonical_label") or ""),
                            "description": str(entity.get("description") or ""),
                            "confirmation_state": state if isinstance(state, str) else "automatic",
                            "recorded_at": result.created_at,
                        },
                    )

    def leaves(self) -> Iterator[ImportItem]:
        for where, batch_id, result_id, summary, created, facts in self.deferred_leaves:
            scope = self.results[result_id].scope_key
            kept = self.same_scope(list(facts), scope, self.entity_scope, "entities (leaf descriptions)")
            yield self.line(
                where,
                {
                    "kind": "leaf",
                    "id": batch_id,
                    "result_id": result_id,
                    "summary": summary,
                    "recorded_at": created,
                    "facts": [{"object_ref": {"type": "entity", "id": i}, "description": facts[i]} for i in kept],
                },
            )

    def read_events(self) -> Iterator[ImportItem]:
        sources = self.links(EVENT_SOURCES)
        entities = self.links(EVENT_ENTITIES)
        for row in self.conn.execute(EVENTS).fetchall():
            where = at("supervision_events", id=row["id"])
            result = self.results.get(row["result_id"])
            if result is None:
                continue
            superseding = self.results.get(row["superseded_by"] or "")
            if superseding is not None and superseding.scope_key == result.scope_key:
                reason = f"superseded by result {superseding.id} of the same scope"
                yield (where, Retired("event", (row["id"],), reason))
                self.notes.add(
                    "events the app marks superseded by a later review of the same scope (retired, not imported)"
                )
                continue
            if row["superseded_by"]:
                self.notes.add("events superseded by a review of another scope (kept in their own scope)")
            time = event_time(row["occurred_at"])
            if time is None:
                self.notes.add("events whose time names no instant (stored undated)")
            story_line = row["story_line_id"]
            if self.story_line_scope.get(story_line) != result.scope_key:
                story_line = None
            yield self.line(
                where,
                {
                    "kind": "event",
                    "id": row["id"],
                    "result_id": row["result_id"],
                    "story_line_id": story_line,
                    "event_type": row["event_type"],
                    "title": row["title"],
                    "description": row["description"],
                    "event_time": time,
                    "recorded_at": result.created_at,
                    "entity_ids": self.same_scope(
                        entities.get(row["id"], []), result.scope_key, self.entity_scope, "entities (from events)"
                    ),
                    "source_reference_ids": self.same_scope(
                        sources.get(row["id"], []), result.scope_key, self.reference_scope, "saved fragments"
                    ),
                },
            )

    def links(self, sql: str) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for owner, target in self.conn.execute(sql):
            found.setdefault(owner, []).append(target)
        return found

    def read_changes(self) -> Iterator[ImportItem]:
        for row in self.conn.execute(CHANGES).fetchall():
            where = at("supervision_entity_changes", id=row["id"])
            result = self.results.get(row["result_id"])
            if result is None or not self.same_scope(
                [row["entity_id"]], result.scope_key, self.entity_scope, "entities (from entity changes)"
            ):
                continue
            refs = id_list(where, "source_reference_ids_json", row["source_reference_ids_json"])
            yield self.line(
                where,
                {
                    "kind": "entity_change",
                    "entity_id": row["entity_id"],
                    "association_key": row["id"],
                    "result_id": row["result_id"],
                    "change_type": row["change_type"],
                    "description": row["description"],
                    "confirmation_state": row["confirmation_state"],
                    "recorded_at": result.created_at,
                    "source_reference_ids": self.same_scope(
                        refs, result.scope_key, self.reference_scope, "saved fragments"
                    ),
                },
            )

    def read_relations(self) -> Iterator[ImportItem]:
        """A relation row has no result: it is recorded with the first result whose snapshot holds it."""
        first: dict[str, Result] = {}
        earliest: dict[str, Result] = {}
        for result in self.results.values():  # in creation order
            earliest.setdefault(result.scope_key, result)
            relations = self.snapshots[result.id].get("relations")
            for relation in relations if isinstance(relations, list) else []:
                if isinstance(relation, dict) and isinstance(relation.get("id"), str):
                    first.setdefault(f"{relation['id']}@{result.scope_key}", result)
        for row in self.conn.execute(RELATIONS).fetchall():
            where = at("supervision_relations", id=row["id"])
            scope = self.story_line_scope.get(row["story_line_id"])
            owner = first.get(f"{row['id']}@{scope}") or earliest.get(scope or "")
            if scope is None or owner is None:
                self.notes.add("relations of a scope without any result (not imported)")
                continue
            ends = [row["from_entity_id"], row["to_entity_id"]]
            if len(self.same_scope(ends, scope, self.entity_scope, "entities (relation ends)")) < 2:
                self.notes.add("relations with an end in another scope (not imported)")
                continue
            refs = id_list(where, "source_reference_ids_json", row["source_reference_ids_json"])
            yield self.line(
                where,
                {
                    "kind": "relation",
                    "id": row["id"],
                    "result_id": owner.id,
                    "from_ref": {"type": "entity", "id": row["from_entity_id"]},
                    "to_ref": {"type": "entity", "id": row["to_entity_id"]},
                    "relation_type": row["relation_type"],
                    "reason": row["reason"],
                    "confirmation_state": row["confirmation_state"],
                    "recorded_at": owner.created_at,
                    "source_reference_ids": self.same_scope(refs, scope, self.reference_scope, "saved fragments"),
                },
            )

    def read_memory(self) -> Iterator[ImportItem]:
        for row in self.conn.execute(MEMORY).fetchall():
            where = at("memory_items", id=row["id"])
            if row["status"] != "confirmed":
                self.notes.add("memory items the user has not confirmed (not imported)")
                continue
            if row["scope"] == "conversation" or (row["scope"] == "project" and row["scope_id"] not in self.projects):
                self.notes.add("confirmed memory items of a conversation or a deleted project (not imported)")
                continue
            yield self.line(
                where,
                {
                    "kind": "memory_item",
                    "id": row["id"],
                    "project_id": row["scope_id"] if row["scope"] == "project" else None,
                    "memory_type": row["type"],
                    "body": row["content"],
                    "confirmation_state": row["status"],
                    "updated_at": instant(where, "updated_at", row["updated_at"]),
                },
            )


def import_goodbuddy(db_path: Path, app_path: Path) -> tuple[ImportReport, list[str]]:
    """Import (or re-import, as a sync) a GoodBuddy assistant database; returns the report and the notes."""
    source = GoodBuddySource(app_path)
    return import_items(db_path, source.items(), source.policy), source.notes.lines()
