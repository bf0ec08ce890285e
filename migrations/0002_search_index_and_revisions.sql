-- Schema version 2: the substring search index and the data-revision triggers.
-- Both are maintained by triggers, so they stay right whoever writes the database.

-- Substring search index. One row per searchable field of a stored object; `body` is the
-- field text followed by two U+0001 characters, so that every occurrence of a one- or
-- two-character query is the prefix of an indexed trigram (SQLite's trigram tokenizer
-- itself matches nothing shorter than three characters).
CREATE TABLE search_docs (
  doc_id      INTEGER PRIMARY KEY,
  object_type TEXT NOT NULL,
  object_id   TEXT NOT NULL,
  result_key  TEXT NOT NULL,      -- the result id, or '' for rows that have no result
  scope_key   TEXT NOT NULL,
  field       TEXT NOT NULL,
  weight      INTEGER NOT NULL,
  body        TEXT NOT NULL,
  -- The object's times, copied so that time filters run inside the index query. Leaf rows carry
  -- their leaf's recorded_at and no event time; triggers below keep the copies current.
  event_time_start    TEXT,
  event_time_end      TEXT,
  review_generated_at TEXT,
  recorded_at         TEXT,
  UNIQUE (object_type, object_id, result_key, field)
) STRICT;
CREATE INDEX search_docs_by_result ON search_docs (result_key);

CREATE VIRTUAL TABLE search_fts USING fts5 (
  body, content = 'search_docs', content_rowid = 'doc_id', tokenize = 'trigram case_sensitive 0'
);
CREATE VIRTUAL TABLE search_terms USING fts5vocab (search_fts, 'row');  -- distinct trigrams, for 1–2 character needles

CREATE TRIGGER search_docs_ai AFTER INSERT ON search_docs BEGIN
  INSERT INTO search_fts (rowid, body) VALUES (new.doc_id, new.body);
END;
CREATE TRIGGER search_docs_ad AFTER DELETE ON search_docs BEGIN
  INSERT INTO search_fts (search_fts, rowid, body) VALUES ('delete', old.doc_id, old.body);
END;
CREATE TRIGGER search_docs_au AFTER UPDATE OF body ON search_docs BEGIN
  INSERT INTO search_fts (search_fts, rowid, body) VALUES ('delete', old.doc_id, old.body);
  INSERT INTO search_fts (rowid, body) VALUES (new.doc_id, new.body);
END;

-- Search rows of each searchable table: inserted, replaced and deleted with their object.
CREATE TRIGGER story_lines_search_ai AFTER INSERT ON story_lines BEGIN
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'story_line', new.id, '', new.scope_key, 'topic', 3, new.topic || char(1, 1), NULL, NULL, NULL, new.recorded_at
  WHERE new.topic IS NOT NULL AND new.topic <> '';
END;
CREATE TRIGGER story_lines_search_ad AFTER DELETE ON story_lines BEGIN
  DELETE FROM search_docs WHERE object_type = 'story_line' AND object_id = old.id AND result_key = '' AND field IN ('topic');
END;
CREATE TRIGGER story_lines_search_au AFTER UPDATE ON story_lines BEGIN
  DELETE FROM search_docs WHERE object_type = 'story_line' AND object_id = old.id AND result_key = '' AND field IN ('topic');
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'story_line', new.id, '', new.scope_key, 'topic', 3, new.topic || char(1, 1), NULL, NULL, NULL, new.recorded_at
  WHERE new.topic IS NOT NULL AND new.topic <> '';
END;

CREATE TRIGGER events_search_ai AFTER INSERT ON events BEGIN
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'event', new.id, new.result_id, new.scope_key, 'title', 3, new.title || char(1, 1), new.event_time_start, new.event_time_end, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.title IS NOT NULL AND new.title <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'event', new.id, new.result_id, new.scope_key, 'description', 1, new.description || char(1, 1), new.event_time_start, new.event_time_end, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.description IS NOT NULL AND new.description <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'event', new.id, new.result_id, new.scope_key, 'event_type', 1, new.event_type || char(1, 1), new.event_time_start, new.event_time_end, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.event_type IS NOT NULL AND new.event_type <> '';
END;
CREATE TRIGGER events_search_ad AFTER DELETE ON events BEGIN
  DELETE FROM search_docs WHERE object_type = 'event' AND object_id = old.id AND result_key = old.result_id AND field IN ('title', 'description', 'event_type');
END;
CREATE TRIGGER events_search_au AFTER UPDATE ON events BEGIN
  DELETE FROM search_docs WHERE object_type = 'event' AND object_id = old.id AND result_key = old.result_id AND field IN ('title', 'description', 'event_type');
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'event', new.id, new.result_id, new.scope_key, 'title', 3, new.title || char(1, 1), new.event_time_start, new.event_time_end, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.title IS NOT NULL AND new.title <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'event', new.id, new.result_id, new.scope_key, 'description', 1, new.description || char(1, 1), new.event_time_start, new.event_time_end, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.description IS NOT NULL AND new.description <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'event', new.id, new.result_id, new.scope_key, 'event_type', 1, new.event_type || char(1, 1), new.event_time_start, new.event_time_end, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.event_type IS NOT NULL AND new.event_type <> '';
END;

CREATE TRIGGER entities_search_ai AFTER INSERT ON entities BEGIN
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'entity', new.id, '', new.scope_key, 'canonical_label', 3, new.canonical_label || char(1, 1), NULL, NULL, NULL, new.updated_at
  WHERE new.canonical_label IS NOT NULL AND new.canonical_label <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'entity', new.id, '', new.scope_key, 'description', 1, new.description || char(1, 1), NULL, NULL, NULL, new.updated_at
  WHERE new.description IS NOT NULL AND new.description <> '';
END;
CREATE TRIGGER entities_search_ad AFTER DELETE ON entities BEGIN
  DELETE FROM search_docs WHERE object_type = 'entity' AND object_id = old.id AND result_key = '' AND field IN ('canonical_label', 'description');
END;
CREATE TRIGGER entities_search_au AFTER UPDATE ON entities BEGIN
  DELETE FROM search_docs WHERE object_type = 'entity' AND object_id = old.id AND result_key = '' AND field IN ('canonical_label', 'description');
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'entity', new.id, '', new.scope_key, 'canonical_label', 3, new.canonical_label || char(1, 1), NULL, NULL, NULL, new.updated_at
  WHERE new.canonical_label IS NOT NULL AND new.canonical_label <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'entity', new.id, '', new.scope_key, 'description', 1, new.description || char(1, 1), NULL, NULL, NULL, new.updated_at
  WHERE new.description IS NOT NULL AND new.description <> '';
END;

CREATE TRIGGER entity_revisions_search_ai AFTER INSERT ON entity_revisions BEGIN
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'entity', new.entity_id, new.result_id, new.scope_key, 'canonical_label', 3, new.canonical_label || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.canonical_label IS NOT NULL AND new.canonical_label <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'entity', new.entity_id, new.result_id, new.scope_key, 'description', 1, new.description || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.description IS NOT NULL AND new.description <> '';
END;
CREATE TRIGGER entity_revisions_search_ad AFTER DELETE ON entity_revisions BEGIN
  DELETE FROM search_docs WHERE object_type = 'entity' AND object_id = old.entity_id AND result_key = old.result_id AND field IN ('canonical_label', 'description');
END;
CREATE TRIGGER entity_revisions_search_au AFTER UPDATE ON entity_revisions BEGIN
  DELETE FROM search_docs WHERE object_type = 'entity' AND object_id = old.entity_id AND result_key = old.result_id AND field IN ('canonical_label', 'description');
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'entity', new.entity_id, new.result_id, new.scope_key, 'canonical_label', 3, new.canonical_label || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.canonical_label IS NOT NULL AND new.canonical_label <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'entity', new.entity_id, new.result_id, new.scope_key, 'description', 1, new.description || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.description IS NOT NULL AND new.description <> '';
END;

CREATE TRIGGER entity_changes_search_ai AFTER INSERT ON entity_changes BEGIN
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'entity_change', new.entity_id || '#' || new.association_key, new.result_id, new.scope_key, 'description', 1, new.description || char(1, 1), (SELECT event_time_start FROM events WHERE id = new.event_id), (SELECT event_time_end FROM events WHERE id = new.event_id), (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.description IS NOT NULL AND new.description <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'entity_change', new.entity_id || '#' || new.association_key, new.result_id, new.scope_key, 'change_type', 1, new.change_type || char(1, 1), (SELECT event_time_start FROM events WHERE id = new.event_id), (SELECT event_time_end FROM events WHERE id = new.event_id), (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.change_type IS NOT NULL AND new.change_type <> '';
END;
CREATE TRIGGER entity_changes_search_ad AFTER DELETE ON entity_changes BEGIN
  DELETE FROM search_docs WHERE object_type = 'entity_change' AND object_id = old.entity_id || '#' || old.association_key AND result_key = old.result_id AND field IN ('description', 'change_type');
END;
CREATE TRIGGER entity_changes_search_au AFTER UPDATE ON entity_changes BEGIN
  DELETE FROM search_docs WHERE object_type = 'entity_change' AND object_id = old.entity_id || '#' || old.association_key AND result_key = old.result_id AND field IN ('description', 'change_type');
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'entity_change', new.entity_id || '#' || new.association_key, new.result_id, new.scope_key, 'description', 1, new.description || char(1, 1), (SELECT event_time_start FROM events WHERE id = new.event_id), (SELECT event_time_end FROM events WHERE id = new.event_id), (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.description IS NOT NULL AND new.description <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'entity_change', new.entity_id || '#' || new.association_key, new.result_id, new.scope_key, 'change_type', 1, new.change_type || char(1, 1), (SELECT event_time_start FROM events WHERE id = new.event_id), (SELECT event_time_end FROM events WHERE id = new.event_id), (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.change_type IS NOT NULL AND new.change_type <> '';
END;

CREATE TRIGGER relations_search_ai AFTER INSERT ON relations BEGIN
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'relation', new.id, new.result_id, new.scope_key, 'reason', 1, new.reason || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.reason IS NOT NULL AND new.reason <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'relation', new.id, new.result_id, new.scope_key, 'relation_type', 1, new.relation_type || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.relation_type IS NOT NULL AND new.relation_type <> '';
END;
CREATE TRIGGER relations_search_ad AFTER DELETE ON relations BEGIN
  DELETE FROM search_docs WHERE object_type = 'relation' AND object_id = old.id AND result_key = old.result_id AND field IN ('reason', 'relation_type');
END;
CREATE TRIGGER relations_search_au AFTER UPDATE ON relations BEGIN
  DELETE FROM search_docs WHERE object_type = 'relation' AND object_id = old.id AND result_key = old.result_id AND field IN ('reason', 'relation_type');
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'relation', new.id, new.result_id, new.scope_key, 'reason', 1, new.reason || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.reason IS NOT NULL AND new.reason <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'relation', new.id, new.result_id, new.scope_key, 'relation_type', 1, new.relation_type || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.relation_type IS NOT NULL AND new.relation_type <> '';
END;

CREATE TRIGGER summaries_search_ai AFTER INSERT ON summaries BEGIN
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'summary', new.id, new.result_id, new.scope_key, 'summary', 3, new.body || char(1, 1), new.interval_from, new.interval_to, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.body IS NOT NULL AND new.body <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'summary', new.id, new.result_id, new.scope_key, 'open_items', 1, new.open_items || char(1, 1), new.interval_from, new.interval_to, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.open_items IS NOT NULL AND new.open_items <> '';
END;
CREATE TRIGGER summaries_search_ad AFTER DELETE ON summaries BEGIN
  DELETE FROM search_docs WHERE object_type = 'summary' AND object_id = old.id AND result_key = old.result_id AND field IN ('summary', 'open_items');
END;
CREATE TRIGGER summaries_search_au AFTER UPDATE ON summaries BEGIN
  DELETE FROM search_docs WHERE object_type = 'summary' AND object_id = old.id AND result_key = old.result_id AND field IN ('summary', 'open_items');
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'summary', new.id, new.result_id, new.scope_key, 'summary', 3, new.body || char(1, 1), new.interval_from, new.interval_to, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.body IS NOT NULL AND new.body <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'summary', new.id, new.result_id, new.scope_key, 'open_items', 1, new.open_items || char(1, 1), new.interval_from, new.interval_to, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.open_items IS NOT NULL AND new.open_items <> '';
END;

CREATE TRIGGER source_references_search_ai AFTER INSERT ON source_references BEGIN
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'source_reference', new.id, new.result_id, new.scope_key, 'title', 3, new.title || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.title IS NOT NULL AND new.title <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'source_reference', new.id, new.result_id, new.scope_key, 'fragment', 1, new.fragment || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.fragment IS NOT NULL AND new.fragment <> '';
END;
CREATE TRIGGER source_references_search_ad AFTER DELETE ON source_references BEGIN
  DELETE FROM search_docs WHERE object_type = 'source_reference' AND object_id = old.id AND result_key = old.result_id AND field IN ('title', 'fragment');
END;
CREATE TRIGGER source_references_search_au AFTER UPDATE ON source_references BEGIN
  DELETE FROM search_docs WHERE object_type = 'source_reference' AND object_id = old.id AND result_key = old.result_id AND field IN ('title', 'fragment');
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'source_reference', new.id, new.result_id, new.scope_key, 'title', 3, new.title || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.title IS NOT NULL AND new.title <> '';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT 'source_reference', new.id, new.result_id, new.scope_key, 'fragment', 1, new.fragment || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = new.result_id), new.recorded_at
  WHERE new.fragment IS NOT NULL AND new.fragment <> '';
END;

CREATE TRIGGER fact_links_search_ai AFTER INSERT ON fact_links BEGIN
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT new.object_type, new.object_id, l.result_id, new.scope_key, 'leaf:' || new.owner_id, 1, new.description || char(1, 1),
         NULL, NULL, (SELECT review_generated_at FROM results WHERE id = l.result_id), l.recorded_at
  FROM leaves AS l WHERE l.id = new.owner_id AND new.owner_type = 'leaf' AND new.description IS NOT NULL AND new.description <> '';
END;
CREATE TRIGGER fact_links_search_ad AFTER DELETE ON fact_links BEGIN
  DELETE FROM search_docs WHERE object_type = old.object_type AND object_id = old.object_id
    AND field = 'leaf:' || old.owner_id AND old.owner_type = 'leaf';
END;
CREATE TRIGGER fact_links_search_au AFTER UPDATE ON fact_links BEGIN
  DELETE FROM search_docs WHERE object_type = old.object_type AND object_id = old.object_id
    AND field = 'leaf:' || old.owner_id AND old.owner_type = 'leaf';
  INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
  SELECT new.object_type, new.object_id, l.result_id, new.scope_key, 'leaf:' || new.owner_id, 1, new.description || char(1, 1),
         NULL, NULL, (SELECT review_generated_at FROM results WHERE id = l.result_id), l.recorded_at
  FROM leaves AS l WHERE l.id = new.owner_id AND new.owner_type = 'leaf' AND new.description IS NOT NULL AND new.description <> '';
END;

-- Times copied from other rows: a result's review time, an event's time on its entity changes,
-- a leaf's result and record time on its fact rows.
CREATE TRIGGER results_search_times_au AFTER UPDATE OF review_generated_at ON results BEGIN
  UPDATE search_docs SET review_generated_at = new.review_generated_at WHERE result_key = new.id;
END;
CREATE TRIGGER events_search_times_au AFTER UPDATE OF event_time_start, event_time_end ON events BEGIN
  UPDATE search_docs SET event_time_start = new.event_time_start, event_time_end = new.event_time_end
  WHERE object_type = 'entity_change'
    AND object_id IN (SELECT entity_id || '#' || association_key FROM entity_changes WHERE event_id = new.id);
END;
CREATE TRIGGER events_search_times_ad AFTER DELETE ON events BEGIN
  UPDATE search_docs SET event_time_start = NULL, event_time_end = NULL
  WHERE object_type = 'entity_change'
    AND object_id IN (SELECT entity_id || '#' || association_key FROM entity_changes WHERE event_id = old.id);
END;
CREATE TRIGGER leaves_search_times_au AFTER UPDATE OF result_id, recorded_at ON leaves BEGIN
  UPDATE search_docs
     SET result_key = new.result_id, recorded_at = new.recorded_at,
         review_generated_at = (SELECT review_generated_at FROM results WHERE id = new.result_id)
   WHERE field = 'leaf:' || new.id;
END;

-- Data revisions: every write bumps the revision of the scope(s) it touches and of the graph.
CREATE TRIGGER results_revision_ai AFTER INSERT ON results BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER results_revision_ad AFTER DELETE ON results BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER results_revision_au AFTER UPDATE ON results BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER leaves_revision_ai AFTER INSERT ON leaves BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER leaves_revision_ad AFTER DELETE ON leaves BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER leaves_revision_au AFTER UPDATE ON leaves BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER story_lines_revision_ai AFTER INSERT ON story_lines BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER story_lines_revision_ad AFTER DELETE ON story_lines BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER story_lines_revision_au AFTER UPDATE ON story_lines BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER events_revision_ai AFTER INSERT ON events BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER events_revision_ad AFTER DELETE ON events BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER events_revision_au AFTER UPDATE ON events BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER event_entities_revision_ai AFTER INSERT ON event_entities BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER event_entities_revision_ad AFTER DELETE ON event_entities BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER event_entities_revision_au AFTER UPDATE ON event_entities BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER entities_revision_ai AFTER INSERT ON entities BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER entities_revision_ad AFTER DELETE ON entities BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER entities_revision_au AFTER UPDATE ON entities BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER entity_revisions_revision_ai AFTER INSERT ON entity_revisions BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER entity_revisions_revision_ad AFTER DELETE ON entity_revisions BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER entity_revisions_revision_au AFTER UPDATE ON entity_revisions BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER entity_changes_revision_ai AFTER INSERT ON entity_changes BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER entity_changes_revision_ad AFTER DELETE ON entity_changes BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER entity_changes_revision_au AFTER UPDATE ON entity_changes BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER relations_revision_ai AFTER INSERT ON relations BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER relations_revision_ad AFTER DELETE ON relations BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER relations_revision_au AFTER UPDATE ON relations BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER summaries_revision_ai AFTER INSERT ON summaries BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER summaries_revision_ad AFTER DELETE ON summaries BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER summaries_revision_au AFTER UPDATE ON summaries BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER fact_links_revision_ai AFTER INSERT ON fact_links BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER fact_links_revision_ad AFTER DELETE ON fact_links BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER fact_links_revision_au AFTER UPDATE ON fact_links BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER source_references_revision_ai AFTER INSERT ON source_references BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER source_references_revision_ad AFTER DELETE ON source_references BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER source_references_revision_au AFTER UPDATE ON source_references BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER object_sources_revision_ai AFTER INSERT ON object_sources BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER object_sources_revision_ad AFTER DELETE ON object_sources BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER object_sources_revision_au AFTER UPDATE ON object_sources BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;

-- Project status and scope membership change what a scope may read.
CREATE TRIGGER scope_projects_revision_ins AFTER INSERT ON scope_projects BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER scope_projects_revision_del AFTER DELETE ON scope_projects BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER projects_revision_au AFTER UPDATE ON projects BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
  WHERE scope_key IN (SELECT scope_key FROM scope_projects WHERE project_id = old.id);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER projects_revision_ad AFTER DELETE ON projects BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
  WHERE scope_key IN (SELECT scope_key FROM scope_projects WHERE project_id = old.id);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER projects_revision_ai AFTER INSERT ON projects BEGIN
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;

-- A Global memory item is background for every scope; a project's for every scope holding it.
CREATE TRIGGER memory_items_revision_ai AFTER INSERT ON memory_items BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
  WHERE new.project_id IS NULL OR scope_key IN (SELECT scope_key FROM scope_projects WHERE project_id = new.project_id);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER memory_items_revision_ad AFTER DELETE ON memory_items BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
  WHERE old.project_id IS NULL OR scope_key IN (SELECT scope_key FROM scope_projects WHERE project_id = old.project_id);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER memory_items_revision_au AFTER UPDATE ON memory_items BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
  WHERE old.project_id IS NULL OR scope_key IN (SELECT scope_key FROM scope_projects WHERE project_id = old.project_id);
  UPDATE scopes SET data_revision = data_revision + 1
  WHERE new.project_id IS NULL OR scope_key IN (SELECT scope_key FROM scope_projects WHERE project_id = new.project_id);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;

-- Sources are not scoped by a result: read_source binds its cursors to the source's own state.
CREATE TRIGGER sources_revision_ins AFTER INSERT ON sources BEGIN
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER sources_revision_del AFTER DELETE ON sources BEGIN
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER sources_revision_upd AFTER UPDATE ON sources BEGIN
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER source_versions_revision_ins AFTER INSERT ON source_versions BEGIN
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER source_versions_revision_del AFTER DELETE ON source_versions BEGIN
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER source_versions_revision_upd AFTER UPDATE ON source_versions BEGIN
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER source_chunks_revision_ins AFTER INSERT ON source_chunks BEGIN
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER source_chunks_revision_del AFTER DELETE ON source_chunks BEGIN
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER source_chunks_revision_upd AFTER UPDATE ON source_chunks BEGIN
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;

-- Backfill the index for databases upgraded from version 1.
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'story_line', story_lines.id, '', scope_key, 'topic', 3, topic || char(1, 1), NULL, NULL, NULL, story_lines.recorded_at
FROM story_lines WHERE topic IS NOT NULL AND topic <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'event', events.id, events.result_id, scope_key, 'title', 3, title || char(1, 1), events.event_time_start, events.event_time_end, (SELECT review_generated_at FROM results WHERE id = events.result_id), events.recorded_at
FROM events WHERE title IS NOT NULL AND title <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'event', events.id, events.result_id, scope_key, 'description', 1, description || char(1, 1), events.event_time_start, events.event_time_end, (SELECT review_generated_at FROM results WHERE id = events.result_id), events.recorded_at
FROM events WHERE description IS NOT NULL AND description <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'event', events.id, events.result_id, scope_key, 'event_type', 1, event_type || char(1, 1), events.event_time_start, events.event_time_end, (SELECT review_generated_at FROM results WHERE id = events.result_id), events.recorded_at
FROM events WHERE event_type IS NOT NULL AND event_type <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'entity', entities.id, '', scope_key, 'canonical_label', 3, canonical_label || char(1, 1), NULL, NULL, NULL, entities.updated_at
FROM entities WHERE canonical_label IS NOT NULL AND canonical_label <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'entity', entities.id, '', scope_key, 'description', 1, description || char(1, 1), NULL, NULL, NULL, entities.updated_at
FROM entities WHERE description IS NOT NULL AND description <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'entity', entity_revisions.entity_id, entity_revisions.result_id, scope_key, 'canonical_label', 3, canonical_label || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = entity_revisions.result_id), entity_revisions.recorded_at
FROM entity_revisions WHERE canonical_label IS NOT NULL AND canonical_label <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'entity', entity_revisions.entity_id, entity_revisions.result_id, scope_key, 'description', 1, description || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = entity_revisions.result_id), entity_revisions.recorded_at
FROM entity_revisions WHERE description IS NOT NULL AND description <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'entity_change', entity_changes.entity_id || '#' || entity_changes.association_key, entity_changes.result_id, scope_key, 'description', 1, description || char(1, 1), (SELECT event_time_start FROM events WHERE id = entity_changes.event_id), (SELECT event_time_end FROM events WHERE id = entity_changes.event_id), (SELECT review_generated_at FROM results WHERE id = entity_changes.result_id), entity_changes.recorded_at
FROM entity_changes WHERE description IS NOT NULL AND description <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'entity_change', entity_changes.entity_id || '#' || entity_changes.association_key, entity_changes.result_id, scope_key, 'change_type', 1, change_type || char(1, 1), (SELECT event_time_start FROM events WHERE id = entity_changes.event_id), (SELECT event_time_end FROM events WHERE id = entity_changes.event_id), (SELECT review_generated_at FROM results WHERE id = entity_changes.result_id), entity_changes.recorded_at
FROM entity_changes WHERE change_type IS NOT NULL AND change_type <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'relation', relations.id, relations.result_id, scope_key, 'reason', 1, reason || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = relations.result_id), relations.recorded_at
FROM relations WHERE reason IS NOT NULL AND reason <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'relation', relations.id, relations.result_id, scope_key, 'relation_type', 1, relation_type || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = relations.result_id), relations.recorded_at
FROM relations WHERE relation_type IS NOT NULL AND relation_type <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'summary', summaries.id, summaries.result_id, scope_key, 'summary', 3, body || char(1, 1), summaries.interval_from, summaries.interval_to, (SELECT review_generated_at FROM results WHERE id = summaries.result_id), summaries.recorded_at
FROM summaries WHERE body IS NOT NULL AND body <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'summary', summaries.id, summaries.result_id, scope_key, 'open_items', 1, open_items || char(1, 1), summaries.interval_from, summaries.interval_to, (SELECT review_generated_at FROM results WHERE id = summaries.result_id), summaries.recorded_at
FROM summaries WHERE open_items IS NOT NULL AND open_items <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'source_reference', source_references.id, source_references.result_id, scope_key, 'title', 3, title || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = source_references.result_id), source_references.recorded_at
FROM source_references WHERE title IS NOT NULL AND title <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT 'source_reference', source_references.id, source_references.result_id, scope_key, 'fragment', 1, fragment || char(1, 1), NULL, NULL, (SELECT review_generated_at FROM results WHERE id = source_references.result_id), source_references.recorded_at
FROM source_references WHERE fragment IS NOT NULL AND fragment <> '';
INSERT INTO search_docs (object_type, object_id, result_key, scope_key, field, weight, body, event_time_start, event_time_end, review_generated_at, recorded_at)
SELECT f.object_type, f.object_id, l.result_id, f.scope_key, 'leaf:' || f.owner_id, 1, f.description || char(1, 1),
       NULL, NULL, (SELECT review_generated_at FROM results WHERE id = l.result_id), l.recorded_at
FROM fact_links AS f JOIN leaves AS l ON l.id = f.owner_id
WHERE f.owner_type = 'leaf' AND f.description IS NOT NULL AND f.description <> '';
UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;

PRAGMA user_version = 2;
