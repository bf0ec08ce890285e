"""A GoodBuddy assistant database in a test's tmp dir, built from the app's schema-62 DDL facts.

The tables, columns, constraints, triggers and the `supervision_review_current` view follow what
mesalogo/goodbuddy `src/main/assistant/assistant-database.ts` (commit d80d42b, schema 62),
`supervision-review-store.ts`, `supervision-timeline.ts`, `supervision-stories.ts` and
`supervision-experiences.ts` create (restated here, not copied). Only the tables the importer reads
(and those the view reads) are built. Rows are written the way the app writes them: ISO times from
`toISOString`, locators with `source`/`revision`/`start`/`end`/`length`, revisions as the sha256 hex of
the view's `context`, and the message triggers that renew `review_revision` on every content edit.

`build_goodbuddy` holds the decision story: decision A (SQLite), revision evidence, decision B
(Postgres), option C (DuckDB) without replacement evidence, a late-recorded event, undated events,
a message deleted and a message edited after the review, a knowledge reference, a superseded
first extraction, a Global review of another project, a story with a thread, and an experience.

Stories and experiences also hold what GoodBuddy can say and this graph's scope rules cannot: a review
of Beacon alone, a Beacon feature whose concluding event came from the Global review, a feature all of
whose events are the Global review's, a cross story over Atlas, Beacon and the Global review, a story
the user removed, an experience applied in the other project, one formed in both projects, and one
formed from a Global and a Beacon event.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

SCHEMA_62 = 62

# Upstream ids are UUIDs (randomUUID); fixed ones keep the tests readable.
ATLAS = "a71a5000-0000-4000-8000-000000000001"
BEACON = "beac0000-0000-4000-8000-000000000002"
CONV = "c0000000-0000-4000-8000-0000000000c1"
CONV_BEACON = "c0000000-0000-4000-8000-0000000000c2"
M_A, M_A2, M_REV, M_C, M_DEL, M_EDIT, M_BEACON, M_BEACON_STORE = (
    f"d0000000-0000-4000-8000-00000000000{n}" for n in range(1, 9)
)
TASK = "70000000-0000-4000-8000-0000000000a1"
SL_ATLAS, SL_GLOBAL, SL_BEACON = (f"51000000-0000-4000-8000-00000000000{n}" for n in range(1, 4))
RUN0, RUN1, RUN2, RUN3, RUN_G, RUN_B = (f"40000000-0000-4000-8000-00000000000{n}" for n in range(6))
RES0, RES1, RES2, RES3, RES_G, RES_B = (f"e5000000-0000-4000-8000-00000000000{n}" for n in range(6))
S0, S1, S2, S3, S4, S5, S6, S7, S_G, S_B = (f"50000000-0000-4000-8000-00000000000{n}" for n in range(10))
ENT_A, ENT_B, ENT_C, ENT_G = (f"e0000000-0000-4000-8000-00000000000{n}" for n in range(1, 5))
CH_A = "c4000000-0000-4000-8000-000000000001"
REL_BA, REL_CB = "7e000000-0000-4000-8000-000000000001", "7e000000-0000-4000-8000-000000000002"
EV_OLD_A, EV_A, EV_REV, EV_B, EV_C, EV_KICK, EV_UNDATED, EV_ROLL, EV_G = (
    f"ee000000-0000-4000-8000-00000000000{n}" for n in range(9)
)
BATCH = "ba000000-0000-4000-8000-000000000001"
EV_BEACON_STORE, EV_BEACON_DONE = "ee000000-0000-4000-8000-000000000009", "ee000000-0000-4000-8000-000000000010"
STORY_F, STORY_T, STORY_BEACON, STORY_GLOBAL_ONLY, STORY_CROSS, STORY_REMOVED = (
    f"57000000-0000-4000-8000-00000000000{n}" for n in range(1, 7)
)
EXPERIENCE, EXPERIENCE_PAIR, EXPERIENCE_MIXED = (f"e7000000-0000-4000-8000-00000000000{n}" for n in range(1, 4))
MEMORY, MEMORY_PROPOSED = "3e000000-0000-4000-8000-000000000001", "3e000000-0000-4000-8000-000000000002"

ATLAS_SCOPE = {"kind": "projects", "projectIds": [ATLAS]}
BEACON_SCOPE = {"kind": "projects", "projectIds": [BEACON]}
PAIR_SCOPE = {"kind": "projects", "projectIds": sorted([ATLAS, BEACON])}
GLOBAL_SCOPE = {"kind": "global"}

TEXT = {
    M_A: "We go with SQLite for the sync store: one file, no server to run.",
    M_A2: "Agreed. SQLite it is; I will note the WAL setting.",
    M_REV: "Revision: the edge boxes keep their data on NFS, where SQLite WAL does not work. "
    "We replace SQLite with Postgres on the central host.",
    M_C: "Someone suggested DuckDB as option C. Just noting it, nothing decided.",
    M_DEL: "DuckDB would need a new backup story before anyone could pick it.",
    M_EDIT: "Postgres rollout starts Monday.",
    M_BEACON: "Beacon 2.0 ships in April.",
    M_BEACON_STORE: "Beacon keeps its sync store in Postgres too, like Atlas.",
}
EDITED_TEXT = "Postgres rollout starts Tuesday, after the backup check."
KNOWLEDGE = {
    "libraryId": "lib-ops",
    "documentId": "doc-edge",
    "chunkId": "chunk-7",
    "documentName": "Edge box runbook",
    "sourceName": "ops-wiki",
    "snippet": "Edge boxes mount their data volume over NFS; SQLite WAL mode is not supported there.",
}

# --- DDL (schema 62) ------------------------------------------------------------------------------

APP_TABLES = """
CREATE TABLE projects (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL DEFAULT '',
  root_path TEXT NOT NULL DEFAULT '', runtime_selection_json TEXT,
  built_in_default INTEGER NOT NULL DEFAULT 0 CHECK (built_in_default IN (0, 1)),
  status TEXT NOT NULL CHECK (status IN ('active', 'archived')),
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  kind TEXT NOT NULL DEFAULT 'user' CHECK (kind IN ('user', 'channel')),
  channel TEXT CHECK (channel IS NULL OR channel IN ('weixin', 'wecom', 'dingtalk', 'telegram'))
);
CREATE TABLE conversations (
  id TEXT PRIMARY KEY, project_id TEXT REFERENCES projects (id) ON DELETE SET NULL,
  runtime_selection_json TEXT, knowledge_retrieval_mode TEXT, context_state_json TEXT,
  title TEXT NOT NULL, branch_source_conversation_id TEXT, branch_source_title TEXT,
  status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  channel TEXT, external_account_id TEXT, external_conversation_id TEXT, conversation_type TEXT,
  account_display TEXT, pinned INTEGER NOT NULL DEFAULT 0, timing_incomplete INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE messages (
  id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
  request_id TEXT, role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
  content TEXT NOT NULL, state TEXT NOT NULL CHECK (state IN ('streaming', 'complete', 'error')),
  sequence INTEGER NOT NULL, metadata_json TEXT NOT NULL DEFAULT '{}', created_at TEXT NOT NULL,
  review_revision TEXT NOT NULL DEFAULT '',
  UNIQUE (conversation_id, sequence)
);
CREATE TABLE tasks (
  id TEXT PRIMARY KEY, project_id TEXT REFERENCES projects (id) ON DELETE SET NULL,
  conversation_id TEXT, schedule_id TEXT, title TEXT NOT NULL, instructions TEXT NOT NULL,
  origin TEXT NOT NULL, status TEXT NOT NULL, priority INTEGER NOT NULL DEFAULT 0, progress REAL,
  created_at TEXT NOT NULL, started_at TEXT, completed_at TEXT, error TEXT,
  remote_recoverable INTEGER NOT NULL DEFAULT 0, current_user_message_id TEXT,
  current_assistant_message_id TEXT, parent_task_id TEXT, expert_id TEXT, routing_mode TEXT,
  visible INTEGER NOT NULL DEFAULT 1 CHECK (visible IN (0, 1))
);
CREATE TABLE memory_items (
  id TEXT PRIMARY KEY, scope TEXT NOT NULL CHECK (scope IN ('global', 'project', 'conversation')),
  scope_id TEXT, type TEXT NOT NULL CHECK (type IN ('preference', 'fact', 'summary', 'procedure')),
  content TEXT NOT NULL, source_conversation_id TEXT, source_message_id TEXT,
  confidence REAL NOT NULL, salience REAL NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('proposed', 'confirmed', 'rejected')),
  expires_at TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL
);
CREATE TABLE review_checkpoints (
  stage TEXT NOT NULL, scope TEXT NOT NULL, source TEXT NOT NULL, revision TEXT NOT NULL,
  processed_offset INTEGER NOT NULL, source_length INTEGER NOT NULL, PRIMARY KEY (stage, scope, source)
);
-- Every content edit gives the message a new random review_revision (schema 46).
CREATE TRIGGER messages_review_insert AFTER INSERT ON messages BEGIN
  UPDATE messages SET review_revision = hex(randomblob(16)) WHERE id = NEW.id;
END;
CREATE TRIGGER messages_review_update AFTER UPDATE OF content ON messages WHEN OLD.content IS NOT NEW.content BEGIN
  UPDATE messages SET review_revision = hex(randomblob(16)) WHERE id = NEW.id;
END;
CREATE TRIGGER messages_review_delete AFTER DELETE ON messages BEGIN
  DELETE FROM review_checkpoints WHERE source = 'message:' || OLD.id;
  DELETE FROM review_checkpoints WHERE source LIKE 'knowledge:' || OLD.id || ':%';
END;
CREATE TRIGGER tasks_review_delete AFTER DELETE ON tasks BEGIN
  DELETE FROM review_checkpoints WHERE source = 'task:' || OLD.id;
END;
"""

SUPERVISION_TABLES = """
CREATE TABLE story_lines (
  id TEXT PRIMARY KEY, scope_json TEXT NOT NULL UNIQUE, title TEXT NOT NULL,
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL
);
CREATE TABLE supervision_runs (
  id TEXT PRIMARY KEY, trigger TEXT NOT NULL, scope_json TEXT NOT NULL, time_range_json TEXT NOT NULL,
  status TEXT NOT NULL, error TEXT, started_at TEXT, completed_at TEXT, created_at TEXT NOT NULL,
  heartbeat_run_id TEXT
);
CREATE TABLE supervision_results (
  id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES supervision_runs (id) ON DELETE CASCADE,
  summary TEXT NOT NULL, change_digest TEXT NOT NULL, open_items_json TEXT NOT NULL,
  coverage_json TEXT NOT NULL, created_at TEXT NOT NULL,
  graph_snapshot_json TEXT NOT NULL DEFAULT '{"entities":[],"relations":[]}'
);
CREATE TABLE supervision_sources (
  id TEXT PRIMARY KEY, result_id TEXT NOT NULL REFERENCES supervision_results (id) ON DELETE CASCADE,
  source_type TEXT NOT NULL, source_id TEXT NOT NULL, title TEXT NOT NULL, occurred_at TEXT NOT NULL,
  content TEXT NOT NULL, availability TEXT NOT NULL, locator_json TEXT, source_key TEXT, source_revision TEXT
);
CREATE TABLE supervision_entities (
  id TEXT PRIMARY KEY, story_line_id TEXT NOT NULL REFERENCES story_lines (id) ON DELETE CASCADE,
  canonical_label TEXT NOT NULL, description TEXT NOT NULL, confirmation_state TEXT NOT NULL,
  updated_at TEXT NOT NULL, source_reference_ids_json TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE supervision_entity_changes (
  id TEXT PRIMARY KEY, entity_id TEXT NOT NULL REFERENCES supervision_entities (id),
  result_id TEXT NOT NULL REFERENCES supervision_results (id) ON DELETE CASCADE,
  change_type TEXT NOT NULL, description TEXT NOT NULL, confirmation_state TEXT NOT NULL,
  source_reference_ids_json TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE supervision_events (
  id TEXT PRIMARY KEY, story_line_id TEXT NOT NULL REFERENCES story_lines (id) ON DELETE CASCADE,
  result_id TEXT NOT NULL REFERENCES supervision_results (id) ON DELETE CASCADE,
  occurred_at TEXT NOT NULL, title TEXT NOT NULL, description TEXT NOT NULL, event_type TEXT NOT NULL,
  started_at TEXT, ended_at TEXT, project_id TEXT, superseded_by TEXT
);
CREATE TABLE supervision_event_sources (
  event_id TEXT NOT NULL REFERENCES supervision_events (id) ON DELETE CASCADE,
  source_id TEXT NOT NULL REFERENCES supervision_sources (id), PRIMARY KEY (event_id, source_id)
);
CREATE TABLE supervision_event_entities (
  event_id TEXT NOT NULL REFERENCES supervision_events (id) ON DELETE CASCADE,
  entity_id TEXT NOT NULL REFERENCES supervision_entities (id), change_type TEXT NOT NULL,
  PRIMARY KEY (event_id, entity_id)
);
CREATE TABLE supervision_relations (
  id TEXT PRIMARY KEY, story_line_id TEXT NOT NULL REFERENCES story_lines (id) ON DELETE CASCADE,
  from_entity_id TEXT NOT NULL REFERENCES supervision_entities (id),
  to_entity_id TEXT NOT NULL REFERENCES supervision_entities (id), relation_type TEXT NOT NULL,
  reason TEXT NOT NULL, confirmation_state TEXT NOT NULL, source_reference_ids_json TEXT NOT NULL DEFAULT '[]',
  UNIQUE (story_line_id, from_entity_id, to_entity_id, relation_type)
);
CREATE INDEX supervision_events_time ON supervision_events (story_line_id, occurred_at);
CREATE UNIQUE INDEX supervision_runs_heartbeat ON supervision_runs (heartbeat_run_id);
CREATE INDEX supervision_runs_started ON supervision_runs (started_at DESC);
CREATE INDEX supervision_results_run ON supervision_results (run_id);
CREATE INDEX supervision_sources_key ON supervision_sources (source_key, source_revision);
CREATE INDEX supervision_events_timeline ON supervision_events (project_id, started_at) WHERE superseded_by IS NULL;

CREATE TABLE supervision_review_runs (
  run_id TEXT PRIMARY KEY REFERENCES supervision_runs (id) ON DELETE CASCADE, state_json TEXT NOT NULL
);
CREATE TABLE supervision_review_sources (
  run_id TEXT NOT NULL REFERENCES supervision_review_runs (run_id) ON DELETE CASCADE,
  source TEXT NOT NULL, revision TEXT NOT NULL, project_id TEXT NOT NULL, conversation_id TEXT NOT NULL,
  sequence INTEGER NOT NULL, length INTEGER NOT NULL, initial_offset INTEGER NOT NULL,
  processed_offset INTEGER NOT NULL, PRIMARY KEY (run_id, source)
);
CREATE TABLE supervision_review_batches (
  id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES supervision_review_runs (run_id) ON DELETE CASCADE,
  project_id TEXT NOT NULL, conversation_id TEXT NOT NULL, evidence_json TEXT NOT NULL,
  output_json TEXT NOT NULL, characters INTEGER NOT NULL
);
CREATE TABLE supervision_review_navigation (
  run_id TEXT NOT NULL REFERENCES supervision_review_runs (run_id) ON DELETE CASCADE,
  id TEXT NOT NULL, children_json TEXT NOT NULL, output_json TEXT NOT NULL, PRIMARY KEY (run_id, id)
);
-- The live records a source key names: active messages, visible tasks, knowledge references of messages.
CREATE VIEW supervision_review_current AS
  SELECT 'message:' || m.id AS source, m.id AS record_id, 0 AS reference_index, 'conversation' AS type,
    c.id AS owner, c.project_id AS project_id, c.id AS conversation_id, m.sequence AS sequence, c.title AS title,
    m.created_at AS occurred, m.created_at AS alternate_time, m.content AS body,
    json_array(m.review_revision, c.project_id, c.title, m.role, m.created_at) AS context,
    json_object('messageId', m.id, 'conversationId', c.id, 'projectId', c.project_id, 'role', m.role,
      'sequence', m.sequence) AS locator
  FROM messages m JOIN conversations c ON c.id = m.conversation_id JOIN projects p ON p.id = c.project_id
  WHERE c.status = 'active' AND p.status = 'active' AND m.role IN ('user', 'assistant')
  UNION ALL
  SELECT 'task:' || t.id, t.id, 0, 'task', t.id, COALESCE(t.project_id, ''), '', 0, t.title,
    t.created_at, COALESCE(t.completed_at, t.created_at),
    json_object('title', t.title, 'status', t.status, 'createdAt', t.created_at, 'completedAt', t.completed_at),
    json_array(t.project_id, t.title, t.status, t.created_at, t.completed_at), json_object('projectId', t.project_id)
  FROM tasks t LEFT JOIN projects p ON p.id = t.project_id
  WHERE t.visible = 1 AND (t.project_id IS NULL OR p.status = 'active')
  UNION ALL
  SELECT 'knowledge:' || m.id || ':' || ref.key, m.id, ref.key, 'knowledge',
    COALESCE(json_extract(ref.value, '$.chunkId'), json_extract(ref.value, '$.documentId'),
      json_extract(ref.value, '$.external.sourceUrl'), json_extract(ref.value, '$.libraryId')),
    c.project_id, c.id, m.sequence,
    COALESCE(json_extract(ref.value, '$.documentName'), json_extract(ref.value, '$.sourceName'), ''),
    m.created_at, m.created_at, COALESCE(json_extract(ref.value, '$.snippet'), ''),
    json_array(c.project_id, ref.value, m.created_at),
    json_patch(ref.value, json_object('messageId', m.id, 'conversationId', c.id, 'projectId', c.project_id,
      'referenceIndex', ref.key))
  FROM messages m JOIN conversations c ON c.id = m.conversation_id JOIN projects p ON p.id = c.project_id
    JOIN json_each(m.metadata_json, '$.sourceReferences') ref
  WHERE c.status = 'active' AND p.status = 'active' AND m.role IN ('user', 'assistant');

CREATE TABLE supervision_stories (
  id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT REFERENCES supervision_stories (id),
  level TEXT NOT NULL CHECK (level IN ('feature', 'thread', 'cross')), name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'concluded')), state_event_id TEXT,
  status TEXT NOT NULL DEFAULT 'current' CHECK (status IN ('current', 'merged', 'removed')), merged_into TEXT,
  user_edited INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, updated_at TEXT NOT NULL
);
CREATE TABLE supervision_event_stories (
  event_id TEXT NOT NULL REFERENCES supervision_events (id) ON DELETE CASCADE,
  story_id TEXT NOT NULL REFERENCES supervision_stories (id),
  is_primary INTEGER NOT NULL CHECK (is_primary IN (0, 1)), user_set INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (event_id, story_id)
);
CREATE UNIQUE INDEX supervision_event_primary ON supervision_event_stories (event_id) WHERE is_primary = 1;
CREATE TABLE supervision_story_assigned (
  event_id TEXT PRIMARY KEY REFERENCES supervision_events (id) ON DELETE CASCADE
);
CREATE TABLE supervision_experiences (
  id TEXT PRIMARY KEY, statement TEXT NOT NULL, conditions TEXT NOT NULL DEFAULT '',
  boundaries TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'current' CHECK (status IN ('current', 'merged', 'removed')), merged_into TEXT,
  user_edited INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, updated_at TEXT NOT NULL
);
CREATE TABLE supervision_experience_events (
  experience_id TEXT NOT NULL REFERENCES supervision_experiences (id),
  event_id TEXT NOT NULL REFERENCES supervision_events (id) ON DELETE CASCADE,
  role TEXT NOT NULL CHECK (role IN ('formed', 'applied')), note TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (experience_id, event_id, role)
);
"""
# What schema 62 added over 61: two indexes (the reader's per-result source scan and results by time).
SCHEMA_62_INDEXES = """
CREATE INDEX supervision_sources_result ON supervision_sources (result_id, occurred_at, source_type, id);
CREATE INDEX supervision_results_created ON supervision_results (created_at);
"""


def create_schema(path: Path, version: int = SCHEMA_62) -> sqlite3.Connection:
    """An empty assistant database at `version` (61 lacks the schema-62 indexes), in WAL mode like the app."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.executescript(APP_TABLES + SUPERVISION_TABLES + (SCHEMA_62_INDEXES if version >= SCHEMA_62 else ""))
    conn.execute(f"PRAGMA user_version = {int(version)}")
    return conn


# --- Writing rows the way the app does ------------------------------------------------------------


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


@dataclass
class App:
    """A connection to a fixture database with the app's writes as small helpers."""

    conn: sqlite3.Connection

    def project(self, project_id: str, name: str, at: str) -> None:
        self.conn.execute(
            "INSERT INTO projects (id, name, status, created_at, updated_at) VALUES (?, ?, 'active', ?, ?)",
            (project_id, name, at, at),
        )

    def conversation(self, conversation_id: str, project_id: str, title: str, at: str) -> None:
        self.conn.execute(
            "INSERT INTO conversations (id, project_id, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            (conversation_id, project_id, title, at, at),
        )

    def message(
        self, message_id: str, conversation_id: str, sequence: int, role: str, at: str, references: Any = None
    ) -> None:
        metadata = {"createdAt": 0} | ({"sourceReferences": references} if references else {})
        self.conn.execute(
            "INSERT INTO messages (id, conversation_id, role, content, state, sequence, metadata_json, created_at)"
            " VALUES (?, ?, ?, ?, 'complete', ?, ?, ?)",
            (message_id, conversation_id, role, TEXT[message_id], sequence, _json(metadata), at),
        )

    def current(self, source_key: str) -> sqlite3.Row:
        """The view row a source key names (record id, reference index, type), as the app looks it up."""
        kind, _, rest = source_key.partition(":")
        record, index = (rest.rsplit(":", 1)[0], int(rest.rsplit(":", 1)[1])) if kind == "knowledge" else (rest, 0)
        self.conn.row_factory = sqlite3.Row
        row: sqlite3.Row = self.conn.execute(
            "SELECT * FROM supervision_review_current WHERE record_id = ? AND reference_index = ? AND type = ?",
            (record, index, "conversation" if kind == "message" else kind),
        ).fetchone()
        self.conn.row_factory = None
        return row

    def evidence(self, source_key: str, start: int, end: int, occurred: str | None = None) -> dict[str, Any]:
        """One saved fragment as the review store builds it: content [start, end) and its locator."""
        row = self.current(source_key)
        body = str(row["body"])
        locator = orjson.loads(row["locator"]) | {
            "source": source_key,
            "revision": hashlib.sha256(str(row["context"]).encode()).hexdigest(),
            "start": start,
            "end": end,
            "length": len(body),
        }
        return {
            "id": f"{source_key}:{start}:{end}",
            "sourceType": row["type"],
            "sourceId": row["owner"],
            "title": row["title"],
            "content": body[start:end],
            "occurredAt": occurred or row["occurred"],
            "locator": locator,
        }

    def run(self, run_id: str, scope: dict[str, Any], time_from: str, time_to: str, at: str) -> None:
        self.conn.execute(
            "INSERT INTO supervision_runs (id, trigger, scope_json, time_range_json, status, started_at, completed_at,"
            " created_at) VALUES (?, 'manual', ?, ?, 'completed', ?, ?, ?)",
            (run_id, _json(scope), _json({"from": time_from, "to": time_to}), at, at, at),
        )

    def result(self, result_id: str, run_id: str, summary: str, at: str, coverage: Any, open_items: Any = ()) -> None:
        self.conn.execute(
            "INSERT INTO supervision_results (id, run_id, summary, change_digest, open_items_json, coverage_json,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (result_id, run_id, summary, f"digest of {summary}", _json(list(open_items)), _json(coverage), at),
        )

    def source(self, source_id: str, result_id: str, evidence: dict[str, Any]) -> None:
        locator = evidence["locator"]
        self.conn.execute(
            "INSERT INTO supervision_sources (id, result_id, source_type, source_id, title, occurred_at, content,"
            " locator_json, availability, source_key, source_revision)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'available', ?, ?)",
            (
                source_id,
                result_id,
                evidence["sourceType"],
                evidence["sourceId"],
                evidence["title"],
                evidence["occurredAt"],
                evidence["content"],
                _json(locator),
                locator["source"],
                locator["revision"],
            ),
        )

    def entity(
        self, entity_id: str, story_line: str, label: str, description: str, state: str, at: str, refs: list[str]
    ) -> None:
        self.conn.execute(
            "INSERT INTO supervision_entities (id, story_line_id, canonical_label, description, confirmation_state,"
            " updated_at, source_reference_ids_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (entity_id, story_line, label, description, state, at, _json(refs)),
        )

    def event(
        self,
        event_id: str,
        story_line: str,
        result_id: str,
        occurred: str,
        title: str,
        event_type: str,
        sources: list[str],
        entities: list[str],
        description: str = "",
    ) -> None:
        self.conn.execute(
            "INSERT INTO supervision_events (id, story_line_id, result_id, occurred_at, title, description, event_type)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (event_id, story_line, result_id, occurred, title, description, event_type),
        )
        for source_id in sources:
            self.conn.execute("INSERT INTO supervision_event_sources VALUES (?, ?)", (event_id, source_id))
        for entity_id in entities:
            self.conn.execute(
                "INSERT INTO supervision_event_entities VALUES (?, ?, 'associated')", (event_id, entity_id)
            )

    def relation(
        self, relation_id: str, story_line: str, ends: tuple[str, str], kind: str, reason: str, refs: list[str]
    ) -> None:
        self.conn.execute(
            "INSERT INTO supervision_relations (id, story_line_id, from_entity_id, to_entity_id, relation_type, reason,"
            " confirmation_state, source_reference_ids_json) VALUES (?, ?, ?, ?, ?, ?, 'automatic', ?)",
            (relation_id, story_line, ends[0], ends[1], kind, reason, _json(refs)),
        )

    def snapshot(self, result_id: str, entities: list[str], relations: list[str]) -> None:
        """The result's graph snapshot: the entity and relation rows as saved, with that result's references."""
        self.conn.row_factory = sqlite3.Row
        rows = {
            "entities": [
                dict(self.conn.execute("SELECT * FROM supervision_entities WHERE id = ?", (i,)).fetchone())
                for i in entities
            ],
            "relations": [
                dict(self.conn.execute("SELECT * FROM supervision_relations WHERE id = ?", (i,)).fetchone())
                for i in relations
            ],
        }
        self.conn.row_factory = None
        self.conn.execute(
            "UPDATE supervision_results SET graph_snapshot_json = ? WHERE id = ?", (_json(rows), result_id)
        )

    def place_timeline(self, result_id: str) -> None:
        """The schema-53 derivation: an event's span and project from its linked sources."""
        self.conn.execute(
            """
WITH linked AS (SELECT es.event_id, s.occurred_at, COALESCE(json_extract(s.locator_json, '$.projectId'), '') AS project
                  FROM supervision_event_sources es JOIN supervision_sources s ON s.id = es.source_id)
UPDATE supervision_events SET
  started_at = COALESCE((SELECT MIN(occurred_at) FROM linked WHERE event_id = supervision_events.id), occurred_at),
  ended_at = COALESCE((SELECT MAX(occurred_at) FROM linked WHERE event_id = supervision_events.id), occurred_at),
  project_id = (SELECT CASE WHEN COUNT(DISTINCT project) = 1 THEN MAX(project) END
                  FROM linked WHERE event_id = supervision_events.id)
WHERE result_id = ?""",
            (result_id,),
        )


def build_goodbuddy(path: Path, version: int = SCHEMA_62) -> Path:
    """The decision story in a fresh assistant database at `path` (left closed, WAL files checkpointed)."""
    conn = create_schema(path, version)
    app = App(conn)
    conn.execute("BEGIN")
    app.project(ATLAS, "Atlas sync service", "2026-02-01T08:00:00.000Z")
    app.project(BEACON, "Beacon", "2026-02-01T08:00:00.000Z")
    app.conversation(CONV, ATLAS, "Storage for the sync service", "2026-03-02T09:00:00.000Z")
    app.conversation(CONV_BEACON, BEACON, "Beacon release", "2026-03-19T10:00:00.000Z")
    app.message(M_A, CONV, 0, "user", "2026-03-02T09:00:00.000Z")
    app.message(M_A2, CONV, 1, "assistant", "2026-03-02T09:01:00.000Z", [KNOWLEDGE])
    app.message(M_REV, CONV, 2, "user", "2026-03-10T14:00:00.000Z")
    app.message(M_C, CONV, 3, "user", "2026-03-12T11:00:00.000Z")
    app.message(M_DEL, CONV, 4, "assistant", "2026-03-12T11:05:00.000Z")
    app.message(M_EDIT, CONV, 5, "user", "2026-03-13T08:00:00.000Z")
    app.message(M_BEACON, CONV_BEACON, 0, "user", "2026-03-19T10:00:00.000Z")
    app.message(M_BEACON_STORE, CONV_BEACON, 1, "user", "2026-03-21T09:00:00.000Z")
    conn.execute(
        "INSERT INTO tasks (id, project_id, title, instructions, origin, status, created_at, started_at)"
        " VALUES (?, ?, 'Move the sync store to Postgres', 'Plan and run the move', 'user', 'running', ?, ?)",
        (TASK, ATLAS, "2026-03-11T09:00:00.000Z", "2026-03-11T09:05:00.000Z"),
    )
    atlas, rest = ATLAS_SCOPE, GLOBAL_SCOPE
    conn.execute(
        "INSERT INTO story_lines VALUES (?, ?, '工作故事线', ?, ?)",
        (SL_ATLAS, _json(atlas), "2026-03-02T12:00:00.000Z", "2026-04-01T00:00:00.000Z"),
    )
    conn.execute(
        "INSERT INTO story_lines VALUES (?, ?, '工作故事线', ?, ?)",
        (SL_GLOBAL, _json(rest), "2026-03-20T00:00:00.000Z", "2026-03-20T00:00:00.000Z"),
    )
    conn.execute(
        "INSERT INTO story_lines VALUES (?, ?, '工作故事线', ?, ?)",
        (SL_BEACON, _json(BEACON_SCOPE), "2026-03-22T00:00:00.000Z", "2026-03-22T00:00:00.000Z"),
    )

    # Result 0: a first extraction of decision A, superseded by result 1 re-reading the same range.
    app.run(RUN0, atlas, "2026-03-01T00:00:00.000Z", "2026-03-02T12:00:00.000Z", "2026-03-02T12:00:00.000Z")
    app.result(RES0, RUN0, "SQLite picked.", "2026-03-02T12:00:00.000Z", {"evidence": 1})
    app.source(S0, RES0, app.evidence(f"message:{M_A}", 0, 36))
    app.entity(
        ENT_A,
        SL_ATLAS,
        "Use SQLite",
        "The sync store is one SQLite file.",
        "automatic",
        "2026-03-02T12:00:00.000Z",
        [S0],
    )
    app.event(EV_OLD_A, SL_ATLAS, RES0, "2026-03-02T09:00:00.000Z", "SQLite picked", "decision", [S0], [ENT_A])
    app.snapshot(RES0, [ENT_A], [])
    app.place_timeline(RES0)

    # Result 1: decision A with its evidence and a knowledge reference.
    app.run(RUN1, atlas, "2026-03-01T00:00:00.000Z", "2026-03-03T00:00:00.000Z", "2026-03-03T00:00:00.000Z")
    app.result(RES1, RUN1, "Storage settled on SQLite.", "2026-03-03T00:00:00.000Z", {"evidence": 2}, ["backup plan"])
    app.source(S1, RES1, app.evidence(f"message:{M_A}", 0, 36))
    app.source(S2, RES1, app.evidence(f"knowledge:{M_A2}:0", 0, len(KNOWLEDGE["snippet"])))
    conn.execute("UPDATE supervision_entities SET source_reference_ids_json = ? WHERE id = ?", (_json([S1]), ENT_A))
    app.event(
        EV_A,
        SL_ATLAS,
        RES1,
        "2026-03-02T09:00:00.000Z",
        "Chose SQLite for the sync store",
        "decision",
        [S1],
        [ENT_A],
        "One file, no server to run.",
    )
    app.snapshot(RES1, [ENT_A], [])
    app.place_timeline(RES1)
    conn.execute("UPDATE supervision_events SET superseded_by = ? WHERE id = ?", (RES1, EV_OLD_A))

    # Result 2: the revision and decision B, from a review run with a successful leaf and detailed progress.
    app.run(RUN2, atlas, "2026-03-03T00:00:00.000Z", "2026-03-11T00:00:00.000Z", "2026-03-11T00:00:00.000Z")
    app.result(RES2, RUN2, "Storage moved from SQLite to Postgres.", "2026-03-11T00:00:00.000Z", {"evidence": 2})
    revision_evidence = app.evidence(f"message:{M_REV}", 0, len(TEXT[M_REV]))
    task_evidence = app.evidence(f"task:{TASK}", 0, len(str(app.current(f"task:{TASK}")["body"])))
    app.source(S3, RES2, revision_evidence)
    app.source(S4, RES2, task_evidence)
    app.entity(
        ENT_B,
        SL_ATLAS,
        "Use Postgres on the central host",
        "The sync store moves to Postgres.",
        "confirmed",
        "2026-03-11T00:00:00.000Z",
        [S3],
    )
    conn.execute(
        "INSERT INTO supervision_entity_changes VALUES (?, ?, ?, 'revised', ?, 'automatic', ?)",
        (CH_A, ENT_A, RES2, "Replaced by Postgres: WAL does not work on NFS", _json([S3])),
    )
    app.event(
        EV_REV,
        SL_ATLAS,
        RES2,
        "2026-03-10T14:00:00.000Z",
        "Revised the storage decision",
        "change",
        [S3],
        [ENT_A, ENT_B],
    )
    app.event(
        EV_B,
        SL_ATLAS,
        RES2,
        "2026-03-10T14:00:00.000Z",
        "Chose Postgres on the central host",
        "decision",
        [S3, S4],
        [ENT_B],
    )
    app.relation(
        REL_BA, SL_ATLAS, (ENT_B, ENT_A), "contrasts", "Postgres replaces SQLite because WAL fails on NFS", [S3]
    )
    app.snapshot(RES2, [ENT_A, ENT_B], [REL_BA])
    app.place_timeline(RES2)
    conn.execute("INSERT INTO supervision_review_runs VALUES (?, ?)", (RUN2, _json({"config": {"version": 1}})))
    for key, evidence, sequence in ((f"message:{M_REV}", revision_evidence, 2), (f"task:{TASK}", task_evidence, 0)):
        length = evidence["locator"]["length"]
        conn.execute(
            "INSERT INTO supervision_review_sources VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)",
            (RUN2, key, evidence["locator"]["revision"], ATLAS, CONV if sequence else "", sequence, length, length),
        )
    leaf_output = {
        "summary": "The team replaced SQLite with Postgres.",
        "changeDigest": "SQLite -> Postgres",
        "openItems": ["migration window"],
        "events": [],
        "entities": [
            {
                "id": "e1",
                "persistedId": ENT_A,
                "label": "Use SQLite",
                "description": "Dropped: WAL fails on the edge boxes.",
                "sourceReferenceIds": [],
            },
            {
                "id": "e2",
                "label": "Use Postgres",
                "description": "Chosen for the central host.",
                "sourceReferenceIds": [],
            },
        ],
        "entityChanges": [],
        "relations": [],
    }
    conn.execute(
        "INSERT INTO supervision_review_batches VALUES (?, ?, ?, ?, ?, ?, ?)",
        (BATCH, RUN2, ATLAS, CONV, _json([revision_evidence]), _json(leaf_output), len(TEXT[M_REV])),
    )

    # Result 3, recorded weeks later: option C, a late-recorded kickoff, an undated event, a date-only event.
    app.run(RUN3, atlas, "2026-01-01T00:00:00.000Z", "2026-03-31T00:00:00.000Z", "2026-04-01T00:00:00.000Z")
    app.result(RES3, RUN3, "DuckDB came up; no change to the decision.", "2026-04-01T00:00:00.000Z", {"evidence": 3})
    app.source(S5, RES3, app.evidence(f"message:{M_C}", 0, len(TEXT[M_C])))
    app.source(S6, RES3, app.evidence(f"message:{M_DEL}", 0, len(TEXT[M_DEL])))
    app.source(S7, RES3, app.evidence(f"message:{M_EDIT}", 0, len(TEXT[M_EDIT])))
    app.entity(
        ENT_C,
        SL_ATLAS,
        "Consider DuckDB",
        "Raised as an option; nothing decided.",
        "automatic",
        "2026-04-01T00:00:00.000Z",
        [S5],
    )
    app.event(
        EV_C, SL_ATLAS, RES3, "2026-03-12T11:00:00.000Z", "DuckDB raised as option C", "discussion", [S5, S6], [ENT_C]
    )
    app.event(EV_KICK, SL_ATLAS, RES3, "2026-01-15T10:00:00.000Z", "Sync service kickoff", "milestone", [], [])
    app.event(EV_UNDATED, SL_ATLAS, RES3, "", "Backup plan still open", "discussion", [S6], [])
    app.event(EV_ROLL, SL_ATLAS, RES3, "2026-03-13", "Postgres rollout scheduled", "milestone", [S7], [ENT_B])
    app.relation(
        REL_CB, SL_ATLAS, (ENT_C, ENT_B), "related", "An alternative to the chosen store; no decision recorded", [S5]
    )
    app.snapshot(RES3, [ENT_C], [REL_CB])
    app.place_timeline(RES3)

    # A Global review of the other project.
    app.run(RUN_G, rest, "2026-03-01T00:00:00.000Z", "2026-03-20T00:00:00.000Z", "2026-03-20T00:00:00.000Z")
    app.result(RES_G, RUN_G, "Beacon plans a release.", "2026-03-20T00:00:00.000Z", {"evidence": 1})
    app.source(S_G, RES_G, app.evidence(f"message:{M_BEACON}", 0, len(TEXT[M_BEACON])))
    app.entity(ENT_G, SL_GLOBAL, "Beacon 2.0", "The April release.", "automatic", "2026-03-20T00:00:00.000Z", [S_G])
    app.event(EV_G, SL_GLOBAL, RES_G, "2026-03-19T10:00:00.000Z", "Beacon release planned", "milestone", [S_G], [ENT_G])
    app.event(
        EV_BEACON_DONE, SL_GLOBAL, RES_G, "2026-03-19T12:00:00.000Z", "Beacon store move done", "milestone", [], []
    )
    app.snapshot(RES_G, [ENT_G], [])
    app.place_timeline(RES_G)

    # A review of Beacon alone: Beacon follows Atlas to Postgres.
    app.run(RUN_B, BEACON_SCOPE, "2026-03-20T00:00:00.000Z", "2026-03-22T00:00:00.000Z", "2026-03-22T00:00:00.000Z")
    app.result(RES_B, RUN_B, "Beacon chose Postgres.", "2026-03-22T00:00:00.000Z", {"evidence": 1})
    app.source(S_B, RES_B, app.evidence(f"message:{M_BEACON_STORE}", 0, len(TEXT[M_BEACON_STORE])))
    app.event(
        EV_BEACON_STORE,
        SL_BEACON,
        RES_B,
        "2026-03-21T09:00:00.000Z",
        "Beacon keeps its sync store in Postgres",
        "decision",
        [S_B],
        [],
    )
    app.place_timeline(RES_B)

    # Stories and experiences (schema 54/55).
    conn.execute(
        "INSERT INTO supervision_stories (id, project_id, level, name, description, created_at, updated_at)"
        " VALUES (?, ?, 'feature', 'Sync store', 'Where the sync service keeps its data', ?, ?)",
        (STORY_F, ATLAS, "2026-03-03T00:00:00.000Z", "2026-04-01T00:00:00.000Z"),
    )
    conn.execute(
        "INSERT INTO supervision_stories (id, project_id, parent_id, level, name, user_edited, created_at, updated_at)"
        " VALUES (?, ?, ?, 'thread', 'Postgres migration', 1, ?, ?)",
        (STORY_T, ATLAS, STORY_F, "2026-03-11T00:00:00.000Z", "2026-04-01T00:00:00.000Z"),
    )
    for event_id, story_id, user_set in (
        (EV_A, STORY_F, 0),
        (EV_REV, STORY_F, 0),
        (EV_C, STORY_F, 0),
        (EV_B, STORY_T, 0),
        (EV_ROLL, STORY_T, 1),
    ):
        conn.execute("INSERT INTO supervision_event_stories VALUES (?, ?, 1, ?)", (event_id, story_id, user_set))
    conn.execute(
        "INSERT INTO supervision_experiences (id, statement, conditions, boundaries, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (
            EXPERIENCE,
            "Don't pick infrastructure the edge boxes cannot run",
            "When choosing storage for software that runs on the edge boxes",
            "Not about the central host",
            "2026-04-01T00:00:00.000Z",
            "2026-04-01T00:00:00.000Z",
        ),
    )
    stories(app)
    experiences(app)

    for memory_id, status, content in (
        (MEMORY, "confirmed", "Prefers answers that quote the source"),
        (MEMORY_PROPOSED, "proposed", "Maybe likes tables"),
    ):
        conn.execute(
            "INSERT INTO memory_items (id, scope, scope_id, type, content, confidence, salience, status, created_at,"
            " updated_at) VALUES (?, 'project', ?, 'preference', ?, 0.9, 0.5, ?, ?, ?)",
            (memory_id, ATLAS, content, status, "2026-02-10T08:00:00.000Z", "2026-02-10T08:00:00.000Z"),
        )

    # After the reviews: one message deleted, one edited (the trigger renews its review revision).
    conn.execute("DELETE FROM messages WHERE id = ?", (M_DEL,))
    conn.execute("UPDATE messages SET content = ? WHERE id = ?", (EDITED_TEXT, M_EDIT))
    conn.execute("COMMIT")
    conn.close()
    return path


def stories(app: App) -> None:
    """Beyond the Atlas feature and thread: Beacon's stories, a cross story and one the user removed."""
    at = "2026-03-22T00:00:00.000Z"
    for story_id, project, level, name, state, state_event, status in (
        (STORY_BEACON, BEACON, "feature", "Beacon sync store", "concluded", EV_BEACON_DONE, "current"),
        (STORY_GLOBAL_ONLY, BEACON, "feature", "Beacon releases", "active", None, "current"),
        (STORY_CROSS, None, "cross", "Sync store on Postgres", "active", None, "current"),
        (STORY_REMOVED, ATLAS, "feature", "Old storage notes", "active", None, "removed"),
    ):
        app.conn.execute(
            "INSERT INTO supervision_stories (id, project_id, level, name, state, state_event_id, status, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (story_id, project, level, name, state, state_event, status, at, at),
        )
    for event_id, story_id, primary in (
        (EV_BEACON_STORE, STORY_BEACON, 1),
        (EV_BEACON_DONE, STORY_BEACON, 1),  # from the Global review: not within Beacon's scope
        (EV_G, STORY_GLOBAL_ONLY, 1),  # the story's only event is the Global review's
        (EV_B, STORY_CROSS, 0),
        (EV_BEACON_STORE, STORY_CROSS, 0),
        (EV_G, STORY_CROSS, 0),  # Global: within no project set
    ):
        app.conn.execute("INSERT INTO supervision_event_stories VALUES (?, ?, ?, 0)", (event_id, story_id, primary))


def experiences(app: App) -> None:
    """The edge-box lesson (also applied in Beacon), one formed in both projects, one from Global and Beacon."""
    for experience_id, statement in (
        (EXPERIENCE_PAIR, "Keep one sync store engine across the services"),
        (EXPERIENCE_MIXED, "Plan releases around storage moves"),
    ):
        app.conn.execute(
            "INSERT INTO supervision_experiences (id, statement, created_at, updated_at) VALUES (?, ?, ?, ?)",
            (experience_id, statement, "2026-03-22T00:00:00.000Z", "2026-03-22T00:00:00.000Z"),
        )
    for experience_id, event_id, role, note in (
        (EXPERIENCE, EV_REV, "formed", ""),
        (EXPERIENCE, EV_C, "applied", "DuckDB checked against the edge boxes"),
        (EXPERIENCE, EV_BEACON_STORE, "applied", "Beacon checked its store against the lesson"),
        (EXPERIENCE_PAIR, EV_B, "formed", "Atlas moved to Postgres"),
        (EXPERIENCE_PAIR, EV_BEACON_STORE, "formed", "Beacon followed"),
        (EXPERIENCE_PAIR, EV_ROLL, "applied", "the rollout plan reused"),
        (EXPERIENCE_MIXED, EV_G, "formed", ""),
        (EXPERIENCE_MIXED, EV_BEACON_STORE, "formed", ""),
    ):
        app.conn.execute(
            "INSERT INTO supervision_experience_events VALUES (?, ?, ?, ?)", (experience_id, event_id, role, note)
        )


def write(path: Path, sql: str, *params: Any) -> None:
    """One write by 'the app' to a fixture database, in its own transaction."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(sql, params)
    finally:
        conn.close()
