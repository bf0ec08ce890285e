"""GoodBuddy projects, review scopes, results with their summaries, coverage and successful leaves, story
lines, and the saved fragments with the live records behind them."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError

from server.contracts.base import Scope
from server.contracts.fragment_range import consistent_range
from server.contracts.interchange import Line
from server.store.errors import ImportRejected, Where
from server.store.goodbuddy.rows import (
    at,
    coverage,
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
from server.store.goodbuddy.state import Seen
from server.store.importer import ImportItem

SCOPE: Final[TypeAdapter[Scope]] = TypeAdapter(Scope)
CONTRADICTED: Final = {
    "span": "saved fragments whose [start, end) does not span their text (position stored as unknown)",
    "length": "saved fragments reaching past their source's recorded length (position and length stored as unknown)",
}
RESULTS_FIRST, AFTER_RESULTS = 0, 1
"""Parts of the lines that wait for the scope lines (`Seen.wait`): the results', then the story lines'."""

PROJECTS: Final = "SELECT id, name, status FROM projects ORDER BY id"
STORY_LINES: Final = "SELECT id, scope_json, title, created_at FROM story_lines ORDER BY id"
ADD_STORY_LINE: Final = "INSERT OR REPLACE INTO temp.gb_story_line VALUES (?, ?)"
RESULTS: Final = """
SELECT r.id, r.run_id, r.summary, r.open_items_json, r.coverage_json, r.created_at, r.graph_snapshot_json,
       run.scope_json, run.time_range_json, rr.state_json
  FROM supervision_results AS r JOIN supervision_runs AS run ON run.id = r.run_id
  LEFT JOIN supervision_review_runs AS rr ON rr.run_id = r.run_id
 ORDER BY r.created_at, r.rowid"""
REVIEW_SOURCES: Final = """
SELECT run_id, source, revision, length, initial_offset, processed_offset FROM supervision_review_sources
 WHERE run_id = ? ORDER BY source"""
BATCHES: Final = "SELECT id, output_json FROM supervision_review_batches WHERE run_id = ? ORDER BY rowid"
# Saved fragments of the results read: each lives in its result's scope.
ADD_REFERENCES: Final = """
INSERT OR REPLACE INTO temp.gb_reference
SELECT s.id, r.scope_key FROM supervision_sources AS s JOIN temp.gb_result AS r ON r.id = s.result_id"""
SOURCES: Final = """
SELECT s.id, s.result_id, s.source_type, s.source_id, s.title, s.occurred_at, s.content, s.availability,
       s.locator_json, r.created_at AS result_created_at
  FROM supervision_sources AS s JOIN temp.gb_result AS r ON r.id = s.result_id ORDER BY s.id"""
# A source key's newest fragment so far (a later one read on a tie wins) and the latest time any names.
NEWER_SOURCE: Final = """
INSERT INTO temp.gb_source (key, source_id, created_at, last_time) VALUES (?, ?, ?, ?)
    ON CONFLICT (key) DO UPDATE SET
       source_id = CASE WHEN excluded.created_at >= created_at THEN excluded.source_id ELSE source_id END,
       created_at = max(created_at, excluded.created_at),
       last_time = max(coalesce(last_time, excluded.last_time), coalesce(excluded.last_time, last_time))"""
# Each source key's newest fragment, and when the key was last seen: the latest time its fragments name, else the
# newest fragment's result time.
NEWEST_SOURCES: Final = """
SELECT n.key, coalesce(n.last_time, n.created_at) AS last_seen, s.id, s.source_type, s.title, s.locator_json
  FROM temp.gb_source AS n JOIN supervision_sources AS s ON s.id = n.source_id ORDER BY n.key"""
CURRENT_RECORD: Final = """
SELECT type, project_id, conversation_id, title, occurred, alternate_time, body, context
  FROM supervision_review_current WHERE record_id = ? AND reference_index = ? AND type = ?"""
RECORD_EXISTS: Final[dict[str, str]] = {
    "conversation": "SELECT 1 FROM messages WHERE id = ?",
    "task": "SELECT 1 FROM tasks WHERE id = ?",
    "knowledge": "SELECT 1 FROM messages WHERE id = ?"
    " AND json_extract(metadata_json, '$.sourceReferences[' || ? || ']') IS NOT NULL",
}


def read_projects(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    for row in conn.execute(PROJECTS):
        seen.projects.add(row["id"])
        yield seen.line(at("projects", id=row["id"]), {"kind": "project", **dict(row)})


def review_scope(where: Where, column: str, text: object) -> dict[str, Any]:
    value = json_column(where, column, text)
    try:
        scope = SCOPE.validate_python(value)
    except ValidationError as exc:
        raise ImportRejected(where, column, f"not a review scope: {exc.errors()[0]['msg']}") from None
    return scope.model_dump()


def read_scopes_results_and_story_lines(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    """The scope lines (and projects deleted since) first, then each result's lines, then the story lines'.

    Any result may name a scope no earlier row did, so the results' and story lines' lines wait in the
    scratch tables (`Seen.wait`) until every scope is known: each row is still read and checked in turn."""
    scopes: dict[str, tuple[str, dict[str, Any]]] = {}
    for row in conn.execute(STORY_LINES):
        where = at("story_lines", id=row["id"])
        scope = review_scope(where, "scope_json", row["scope_json"])
        conn.execute(ADD_STORY_LINE, (row["id"], scope_key_of(scope)))
        scopes.setdefault(scope_key_of(scope), (where, scope))
        value = {"kind": "story_line", "id": row["id"], "scope": scope, "topic": row["title"]}
        line = seen.line(where, value | {"recorded_at": instant(where, "created_at", row["created_at"])})
        seen.wait(line, AFTER_RESULTS)
    for row in conn.execute(RESULTS):
        where = at("supervision_results", id=row["id"])
        scope = review_scope(at("supervision_runs", id=row["run_id"]), "scope_json", row["scope_json"])
        key = scope_key_of(scope)
        scopes.setdefault(key, (where, scope))
        created = instant(where, "created_at", row["created_at"])
        snapshot = json_column(where, "graph_snapshot_json", row["graph_snapshot_json"])
        seen.add_result(row["id"], key, created, snapshot)
        for line in result_lines(conn, seen, row, where, scope, created):
            seen.wait(line, RESULTS_FIRST)
    for key, (where, scope) in sorted(scopes.items()):
        seen.scopes.add(key)
        for project in scope.get("projectIds", []):
            if project not in seen.projects:
                # A review of a project deleted since: keep its history, unreadable like any inactive project.
                seen.projects.add(project)
                seen.notes.add("projects named by a review scope but deleted in the app (stored with status 'deleted')")
                yield seen.line(where, {"kind": "project", "id": project, "name": project, "status": "deleted"})
        yield seen.line(where, {"kind": "scope", "scope": scope})
    yield from seen.waiting()


def result_lines(
    conn: sqlite3.Connection, seen: Seen, row: sqlite3.Row, where: str, scope: dict[str, Any], created: str
) -> Iterator[tuple[Where, Line]]:
    run_where = at("supervision_runs", id=row["run_id"])
    span = json_column(run_where, "time_range_json", row["time_range_json"])
    start, end = (maybe_instant(span.get(name)) if isinstance(span, dict) else None for name in ("from", "to"))
    interval = {"from": start, "to": end} if start is not None and end is not None else None
    if interval is not None and interval["to"] < interval["from"]:  # UTC text: text order is time order
        seen.notes.add("review time ranges that end before they start (stored as unknown)")
        interval = None
    review_sources = [dict(r) for r in conn.execute(REVIEW_SOURCES, (row["run_id"],))]
    state = json_column(at("supervision_review_runs", run_id=row["run_id"]), "state_json", row["state_json"])
    omitted = state.get("omittedSources", 0) if isinstance(state, dict) else 0
    stored = json_column(where, "coverage_json", row["coverage_json"])
    record = coverage(where, stored, review_sources, int(omitted) if isinstance(omitted, int) else 0, interval)
    yield seen.line(
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
    open_items = json_column(where, "open_items_json", row["open_items_json"])
    if not isinstance(open_items, list | None):
        raise ImportRejected(where, "open_items_json", "expected a JSON array of open items")
    # Held until the facts it lists (what this result recorded) are written: `Seen.summaries`.
    seen.hold_summary(
        seen.line(
            where,
            {
                "kind": "summary",
                "id": row["id"],
                "result_id": row["id"],
                "interval": interval,
                "body": row["summary"],
                "open_items": [item if isinstance(item, str) else str(item) for item in open_items or []],
                "recorded_at": created,
            },
        )
    )
    for batch in conn.execute(BATCHES, (row["run_id"],)):
        hold_leaf(seen, batch, row["id"], created)


def hold_leaf(seen: Seen, batch: sqlite3.Row, result_id: str, created: str) -> None:
    """A successful leaf: its own summary (id `leaf:<batch>`, as the app's reader shows it) and its
    independent descriptions of the entities it re-identified (`persistedId`), both held until the entities are
    known."""
    where = at("supervision_review_batches", id=batch["id"])
    output = json_column(where, "output_json", batch["output_json"])
    if not isinstance(output, dict):
        raise ImportRejected(where, "output_json", "expected a JSON object")
    summary = output.get("summary") if isinstance(output.get("summary"), str) else None
    listed = output.get("openItems")
    open_items: list[Any] = listed if isinstance(listed, list) else []
    seen.hold_summary(
        seen.line(
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
    )
    facts: dict[str, str | None] = {}
    entities = output.get("entities")
    for entity in entities if isinstance(entities, list) else []:
        persisted = entity.get("persistedId") if isinstance(entity, dict) else None
        if isinstance(persisted, str):
            description = entity.get("description")
            facts.setdefault(persisted, description if isinstance(description, str) else None)
        else:
            seen.notes.add("leaf entities without a stored identity (not imported; the leaf's summary is)")
    seen.add_leaf(where, batch["id"], result_id, summary, facts)
    seen.notes.add(
        "leaf relations and events (not imported: they name model-local ids)",
        sum(len(output[name]) for name in ("relations", "events") if isinstance(output.get(name), list)),
    )


# --- source references and the live records behind them ---------------------------------------


def read_sources(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    """Each saved fragment of a result read, then the live record behind each source key, in key order: its
    newest fragment (by its result's time; the last one read on a tie) says what the app last knew of it."""
    conn.execute(ADD_REFERENCES)
    for row in conn.execute(SOURCES):
        where = at("supervision_sources", id=row["id"])
        upstream = json_column(where, "locator_json", row["locator_json"])
        upstream = upstream if isinstance(upstream, dict) else None
        key = source_key(row["source_type"], row["source_id"], upstream)
        conn.execute(NEWER_SOURCE, (key, row["id"], row["result_created_at"], maybe_instant(row["occurred_at"])))
        # As the message text is stored (U+FFFD for U+0000), so the fragment is still that text at its range.
        content = seen.child_text(row["content"], "saved fragment texts")
        start, end, length = saved_range(seen, str(content), upstream)
        revision = (upstream or {}).get("revision")
        yield seen.line(
            where,
            {
                "kind": "source_reference",
                "id": row["id"],
                "result_id": row["result_id"],
                "source_type": row["source_type"],
                "original_source_id": key,
                "source_version": revision if isinstance(revision, str) else None,
                "locator": locator(upstream, key),
                "title": row["title"],
                "fragment": {"text": content, "start": start, "end": end},
                "source_length": length,
                "availability": row["availability"],
                "source_record_time": row["occurred_at"],
                "recorded_at": row["result_created_at"],
            },
        )
    for row in conn.execute(NEWEST_SOURCES):
        yield from source_record(conn, seen, row)


def saved_range(seen: Seen, text: str, upstream: dict[str, Any] | None) -> tuple[int | None, int | None, int | None]:
    """A fragment's `[start, end)` and its source's length, each None where unknown or where they contradict each
    other (the interchange refuses such a line; one damaged row of the app's must not stop the sync)."""
    start, end = offset(upstream, "start"), offset(upstream, "end")
    start, end, length, failed = consistent_range(
        text, start, end if start is not None else None, offset(upstream, "length")
    )
    if failed is not None:
        seen.notes.add(CONTRADICTED[failed])
    return start, end, length


def source_record(conn: sqlite3.Connection, seen: Seen, row: sqlite3.Row) -> Iterator[ImportItem]:
    """The live record behind a source key (a row of NEWEST_SOURCES), its current text stored as the current
    version; a record the app no longer holds is described by the key's newest saved fragment."""
    key, last_seen = row["key"], row["last_seen"]
    where = f"source {key} (view supervision_review_current)"
    live = live_record(key)
    current: Mapping[str, Any] | None = None
    if live is not None:
        current = conn.execute(CURRENT_RECORD, live).fetchone()
    elif key.startswith("memory:"):
        current = memory_record(conn, key.removeprefix("memory:"))
    if current is not None:
        version = revision_of(current["context"])
        project = current["project_id"] if current["project_id"] in seen.projects else None
        updated = maybe_instant(current["alternate_time"]) or maybe_instant(current["occurred"]) or last_seen
        yield seen.line(
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
        text = {
            "kind": "source_version",
            "source_id": key,
            "version": version,
            "text": seen.child_text(current["body"], "source texts"),
        }
        yield seen.line(where, text | {"recorded_at": seen.now})
        return
    exists = RECORD_EXISTS.get(live[2]) if live is not None else None
    params = (live[0], live[1]) if live is not None and live[2] == "knowledge" else (live[0],) if live else ()
    status = "inaccessible" if exists and conn.execute(exists, params).fetchone() else "deleted"
    seen.notes.add(f"sources {status} in the app (their saved fragments stay readable as snapshots)")
    upstream = json_column(at("supervision_sources", id=row["id"]), "locator_json", row["locator_json"])
    upstream = upstream if isinstance(upstream, dict) else None
    project = (upstream or {}).get("projectId")
    conversation = (upstream or {}).get("conversationId")
    yield seen.line(
        where,
        {
            "kind": "source",
            "id": key,
            "source_type": row["source_type"],
            "project_id": project if project in seen.projects else None,
            "conversation_id": conversation if isinstance(conversation, str) and conversation else None,
            "title": row["title"],
            "status": status,
            "updated_at": last_seen,
        },
    )


def memory_record(conn: sqlite3.Connection, memory_id: str) -> dict[str, Any] | None:
    row = conn.execute(
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
