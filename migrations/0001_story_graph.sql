-- Story graph store, schema version 1.
--
-- Every graph row carries the canonical key of the one scope it belongs to (`scope_key`), so a
-- read filters by exact scope with an index and a trigger can bump that scope's data revision
-- without a join. Times are UTC text 'YYYY-MM-DDTHH:MM:SS.sssZ' (checked below), so text order
-- is time order. NULL means unknown; nothing here stores "0" for unknown.
--
-- Writers other than our importer are welcome: the triggers at the end keep the substring
-- search index and the per-scope data revisions current after any INSERT, UPDATE or DELETE.
-- Writers should run with PRAGMA foreign_keys = ON so scope consistency is enforced.

CREATE TABLE graph_state (
  id            INTEGER PRIMARY KEY CHECK (id = 1),
  data_revision INTEGER NOT NULL DEFAULT 0   -- bumped by every write to graph data
) STRICT;
INSERT INTO graph_state (id, data_revision) VALUES (1, 0);

CREATE TABLE projects (
  id     TEXT PRIMARY KEY,
  name   TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'active'       -- open set; only 'active' projects are readable
) STRICT;

-- Canonical scope keys: 'global', or 'projects:' followed by the compact JSON array of the
-- project ids sorted in code-point order (one project is a one-element set).
CREATE TABLE scopes (
  scope_key     TEXT PRIMARY KEY,
  kind          TEXT NOT NULL CHECK (kind IN ('global', 'projects')),
  data_revision INTEGER NOT NULL DEFAULT 0,   -- bumped by every write to data of this scope
  CHECK ((kind = 'global') = (scope_key = 'global'))
) STRICT;

CREATE TABLE scope_projects (
  scope_key  TEXT NOT NULL REFERENCES scopes (scope_key) ON DELETE CASCADE,
  project_id TEXT NOT NULL REFERENCES projects (id),
  PRIMARY KEY (scope_key, project_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX scope_projects_by_project ON scope_projects (project_id);

-- One review run's published output for one exact scope.
CREATE TABLE results (
  id                  TEXT PRIMARY KEY,
  scope_key           TEXT NOT NULL REFERENCES scopes (scope_key),
  stage               TEXT NOT NULL DEFAULT 'review',      -- open set: review, report, supervision, ...
  status              TEXT NOT NULL DEFAULT 'published',   -- 'completed'/'published' means the review was published, never that work was done
  review_generated_at TEXT NOT NULL,
  recorded_at         TEXT NOT NULL,
  revision            TEXT,                                -- NULL: no reliable revision
  coverage_json       TEXT,                                -- NULL: no coverage record (reported as unknown)
  UNIQUE (id, scope_key)
) STRICT;
CREATE INDEX results_by_scope ON results (scope_key, id);

-- A successful leaf: one batch of a review run that produced facts.
CREATE TABLE leaves (
  id          TEXT PRIMARY KEY,
  result_id   TEXT NOT NULL,
  scope_key   TEXT NOT NULL,
  summary     TEXT,
  recorded_at TEXT NOT NULL,
  FOREIGN KEY (result_id, scope_key) REFERENCES results (id, scope_key)
) STRICT;
CREATE INDEX leaves_by_result ON leaves (result_id);

CREATE TABLE story_lines (
  id          TEXT PRIMARY KEY,
  scope_key   TEXT NOT NULL REFERENCES scopes (scope_key),
  topic       TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  revision    TEXT,
  UNIQUE (id, scope_key)
) STRICT;
CREATE INDEX story_lines_by_scope ON story_lines (scope_key, id);

CREATE TABLE events (
  id                   TEXT PRIMARY KEY,
  result_id            TEXT NOT NULL,
  scope_key            TEXT NOT NULL,
  story_line_id        TEXT,
  event_type           TEXT NOT NULL,     -- open set: decision, change, discussion, milestone, ...
  title                TEXT NOT NULL,
  description          TEXT NOT NULL DEFAULT '',
  event_time_start     TEXT,              -- NULL: event time unknown
  event_time_end       TEXT,              -- NULL with a start: an instant
  event_time_precision TEXT,              -- open set: instant, minute, day, month, year, ...
  event_time_basis     TEXT,              -- what dates the event, e.g. 'stated_in_source', 'message_time'
  recorded_at          TEXT NOT NULL,
  confirmation_state   TEXT NOT NULL DEFAULT 'automatic',
  revision             TEXT,
  FOREIGN KEY (result_id, scope_key) REFERENCES results (id, scope_key),
  FOREIGN KEY (story_line_id, scope_key) REFERENCES story_lines (id, scope_key),
  CHECK (event_time_end IS NULL OR (event_time_start IS NOT NULL AND event_time_end >= event_time_start))
) STRICT;
CREATE INDEX events_by_scope_time ON events (scope_key, event_time_start, id);
CREATE INDEX events_by_result ON events (result_id);

CREATE TABLE event_entities (
  event_id  TEXT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
  entity_id TEXT NOT NULL,
  scope_key TEXT NOT NULL,
  role      TEXT NOT NULL DEFAULT 'associated',
  PRIMARY KEY (event_id, entity_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX event_entities_by_entity ON event_entities (entity_id);

-- The current projection of an entity; its content revisions per result live apart.
CREATE TABLE entities (
  id                 TEXT PRIMARY KEY,
  story_line_id      TEXT NOT NULL,
  scope_key          TEXT NOT NULL,
  entity_type        TEXT NOT NULL DEFAULT 'concept',  -- open set: decision, option, preference, issue, task, ...
  canonical_label    TEXT NOT NULL,
  description        TEXT NOT NULL DEFAULT '',
  confirmation_state TEXT NOT NULL DEFAULT 'automatic',
  decision_status    TEXT,      -- stored decision state (e.g. proposed, decided); NULL: unknown
  work_status        TEXT,      -- stored work state (e.g. completed); only from a task record or execution evidence
  updated_at         TEXT NOT NULL,
  revision           TEXT,
  FOREIGN KEY (story_line_id, scope_key) REFERENCES story_lines (id, scope_key)
) STRICT;
CREATE INDEX entities_by_scope ON entities (scope_key, id);

CREATE TABLE entity_revisions (
  entity_id          TEXT NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
  result_id          TEXT NOT NULL,
  scope_key          TEXT NOT NULL,
  revision           TEXT,
  canonical_label    TEXT NOT NULL,
  description        TEXT NOT NULL DEFAULT '',
  confirmation_state TEXT NOT NULL DEFAULT 'automatic',
  recorded_at        TEXT NOT NULL,
  PRIMARY KEY (entity_id, result_id),
  FOREIGN KEY (result_id, scope_key) REFERENCES results (id, scope_key)
) STRICT, WITHOUT ROWID;
CREATE INDEX entity_revisions_by_result ON entity_revisions (result_id);

-- An entity change has no key of its own: it is addressed by its owner entity plus a stable
-- association key chosen by the writer.
CREATE TABLE entity_changes (
  entity_id          TEXT NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
  association_key    TEXT NOT NULL CHECK (instr(association_key, '#') = 0),
  result_id          TEXT NOT NULL,
  scope_key          TEXT NOT NULL,
  event_id           TEXT REFERENCES events (id),
  change_type        TEXT NOT NULL,      -- open set: proposed, added, verified, revised, ...
  description        TEXT NOT NULL DEFAULT '',   -- the basis of the change
  entity_revision    TEXT,               -- the entity content revision the change points at
  applicable_from    TEXT,
  applicable_to      TEXT,
  confirmation_state TEXT NOT NULL DEFAULT 'automatic',
  recorded_at        TEXT NOT NULL,
  PRIMARY KEY (entity_id, association_key),
  FOREIGN KEY (result_id, scope_key) REFERENCES results (id, scope_key)
) STRICT, WITHOUT ROWID;
CREATE INDEX entity_changes_by_result ON entity_changes (result_id);
CREATE INDEX entity_changes_by_event ON entity_changes (event_id);

CREATE TABLE relations (
  id                 TEXT PRIMARY KEY,
  result_id          TEXT NOT NULL,
  scope_key          TEXT NOT NULL,
  from_type          TEXT NOT NULL,
  from_id            TEXT NOT NULL,
  to_type            TEXT NOT NULL,
  to_id              TEXT NOT NULL,
  relation_type      TEXT NOT NULL,      -- open set: supports, depends-on, contrasts, related, revised, replaces, contradicts, ...
  reason             TEXT NOT NULL DEFAULT '',
  confirmation_state TEXT NOT NULL DEFAULT 'automatic',
  recorded_at        TEXT NOT NULL,
  revision           TEXT,
  FOREIGN KEY (result_id, scope_key) REFERENCES results (id, scope_key)
) STRICT;
CREATE INDEX relations_by_from ON relations (from_id, from_type);
CREATE INDEX relations_by_to ON relations (to_id, to_type);
CREATE INDEX relations_by_result ON relations (result_id);

CREATE TABLE summaries (
  id            TEXT PRIMARY KEY,
  result_id     TEXT NOT NULL,
  scope_key     TEXT NOT NULL,
  interval_from TEXT,
  interval_to   TEXT,
  body          TEXT NOT NULL,
  open_items    TEXT NOT NULL DEFAULT '[]',   -- JSON array of strings, as stored by the review
  recorded_at   TEXT NOT NULL,
  revision      TEXT,
  FOREIGN KEY (result_id, scope_key) REFERENCES results (id, scope_key)
) STRICT;
CREATE INDEX summaries_by_result ON summaries (result_id);

-- Links from a summary or a successful leaf to the facts it covers. For leaf facts the
-- description is the leaf's own, independent description of that object.
CREATE TABLE fact_links (
  owner_type  TEXT NOT NULL CHECK (owner_type IN ('summary', 'leaf')),
  owner_id    TEXT NOT NULL,
  object_type TEXT NOT NULL,
  object_id   TEXT NOT NULL,
  scope_key   TEXT NOT NULL,
  description TEXT,
  PRIMARY KEY (owner_type, owner_id, object_type, object_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX fact_links_by_object ON fact_links (object_id, object_type);

-- Original sources (messages, task-status texts, saved knowledge fragments) and their text.
-- A source is not scoped by a result: it lives where its locator says (project_id).
CREATE TABLE sources (
  id              TEXT PRIMARY KEY,
  source_type     TEXT NOT NULL,            -- open set: conversation, task, note, memory, knowledge
  project_id      TEXT REFERENCES projects (id),
  conversation_id TEXT,
  title           TEXT,
  status          TEXT NOT NULL DEFAULT 'available',   -- available, deleted, inaccessible
  current_version TEXT,                     -- NULL: no readable current text
  updated_at      TEXT NOT NULL
) STRICT;

CREATE TABLE source_versions (
  source_id   TEXT NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
  version     TEXT NOT NULL,
  length      INTEGER NOT NULL CHECK (length >= 0),   -- code points
  recorded_at TEXT NOT NULL,
  PRIMARY KEY (source_id, version)
) STRICT, WITHOUT ROWID;

-- Source text in chunks of at most 4096 code points, so a page is read without loading the
-- whole text: chunk k covers code points [start, start + length(text)).
CREATE TABLE source_chunks (
  source_id TEXT NOT NULL,
  version   TEXT NOT NULL,
  start     INTEGER NOT NULL CHECK (start >= 0),
  text      TEXT NOT NULL,
  PRIMARY KEY (source_id, version, start),
  FOREIGN KEY (source_id, version) REFERENCES source_versions (source_id, version) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

CREATE TABLE source_references (
  id                 TEXT PRIMARY KEY,
  result_id          TEXT NOT NULL,
  scope_key          TEXT NOT NULL,
  source_type        TEXT NOT NULL,
  original_source_id TEXT NOT NULL,      -- not a foreign key: the original may be gone
  source_version     TEXT,               -- the version the fragment was saved from; NULL: unknown
  locator_json       TEXT,               -- NULL: an old reference without a locator
  title              TEXT,
  fragment           TEXT NOT NULL,      -- the saved fragment
  fragment_start     INTEGER,            -- [start, end) code points in the source; NULL: unknown
  fragment_end       INTEGER,
  source_length      INTEGER,            -- code points of the whole source when saved; NULL: unknown
  availability       TEXT NOT NULL DEFAULT 'available',
  source_record_time TEXT,               -- the source record's own time, as stored
  recorded_at        TEXT NOT NULL,
  FOREIGN KEY (result_id, scope_key) REFERENCES results (id, scope_key),
  CHECK (fragment_end IS NULL OR fragment_start IS NULL OR fragment_end >= fragment_start)
) STRICT;
CREATE INDEX source_references_by_result ON source_references (result_id);
CREATE INDEX source_references_by_source ON source_references (original_source_id);

-- Evidence: which source references back which object.
CREATE TABLE object_sources (
  object_type         TEXT NOT NULL,
  object_id           TEXT NOT NULL,
  source_reference_id TEXT NOT NULL REFERENCES source_references (id) ON DELETE CASCADE,
  scope_key           TEXT NOT NULL,
  PRIMARY KEY (object_type, object_id, source_reference_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX object_sources_by_reference ON object_sources (source_reference_id);

-- Confirmed long-term preferences. project_id NULL: a Global preference.
CREATE TABLE memory_items (
  id                 TEXT PRIMARY KEY,
  project_id         TEXT REFERENCES projects (id),
  memory_type        TEXT NOT NULL DEFAULT 'preference',
  body               TEXT NOT NULL,
  confirmation_state TEXT NOT NULL DEFAULT 'confirmed',
  updated_at         TEXT NOT NULL
) STRICT;
CREATE INDEX memory_items_by_project ON memory_items (project_id);

PRAGMA user_version = 1;
