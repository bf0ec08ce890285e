-- Schema version 3: the search index by item, built for bounded first pages at any size.
--
-- An *item* is one stored row of an object that search can return: (object_type, object_id,
-- result_key), result_key '' for a current projection or a story line. Each item is one FTS5
-- document with four columns: `hi` (its weight-3 fields: titles, labels, topics, summaries),
-- `lo` (its weight-1 fields), and `hi_grams`/`lo_grams` (the distinct one- and two-character CJK
-- strings of those fields, so one- and two-character Chinese, Japanese and Korean queries are
-- indexed phrases too). The item id is the FTS rowid and encodes the search order:
--
--   item_id = scope number << 43 | own-row flag << 42 | type code << 38 | sequence
--
-- so one scope is one rowid range; within it an object's own rows (its current projection, or its
-- row in its own result) have the flag set and come before its other rows (earlier result
-- snapshots, leaf descriptions under other results); then types in the order of their codes
-- (stories, experiences and entities first); then the most recently stored item has the highest
-- id. A search walks the index backwards from the top of a range and stops when its page is full.
--
-- Triggers keep the index exact whoever writes: every write to a searchable table names the items
-- it touches in `search_refresh`, whose trigger rebuilds exactly those items from `search_fields`,
-- the one definition of what is searchable. An importer may switch `search_state.mode` to
-- 'deferred' for a bulk load: items are then only collected, and rebuilt once at the end.

-- The search index of version 2 goes: its triggers, its per-field table and its FTS tables.
DROP TRIGGER search_docs_ai;
DROP TRIGGER search_docs_ad;
DROP TRIGGER search_docs_au;
DROP TRIGGER story_lines_search_ai;
DROP TRIGGER story_lines_search_ad;
DROP TRIGGER story_lines_search_au;
DROP TRIGGER events_search_ai;
DROP TRIGGER events_search_ad;
DROP TRIGGER events_search_au;
DROP TRIGGER entities_search_ai;
DROP TRIGGER entities_search_ad;
DROP TRIGGER entities_search_au;
DROP TRIGGER entity_revisions_search_ai;
DROP TRIGGER entity_revisions_search_ad;
DROP TRIGGER entity_revisions_search_au;
DROP TRIGGER entity_changes_search_ai;
DROP TRIGGER entity_changes_search_ad;
DROP TRIGGER entity_changes_search_au;
DROP TRIGGER relations_search_ai;
DROP TRIGGER relations_search_ad;
DROP TRIGGER relations_search_au;
DROP TRIGGER summaries_search_ai;
DROP TRIGGER summaries_search_ad;
DROP TRIGGER summaries_search_au;
DROP TRIGGER source_references_search_ai;
DROP TRIGGER source_references_search_ad;
DROP TRIGGER source_references_search_au;
DROP TRIGGER fact_links_search_ai;
DROP TRIGGER fact_links_search_ad;
DROP TRIGGER fact_links_search_au;
DROP TRIGGER results_search_times_au;
DROP TRIGGER events_search_times_au;
DROP TRIGGER events_search_times_ad;
DROP TRIGGER leaves_search_times_au;
DROP TABLE search_terms;
DROP TABLE search_fts;
-- search_docs stays until the backfill below has read the order items were stored in.

-- 'immediate': every write rebuilds its items at once. 'deferred': writes only collect their items
-- in search_dirty (a bulk import). 'flush': a rebuild only stages the collected items' rows; the
-- importer (server/store/search_index.py) computes their CJK grams, which is faster than SQL, and
-- then applies them (see search_apply below).
CREATE TABLE search_state (
  id   INTEGER PRIMARY KEY CHECK (id = 1),
  mode TEXT NOT NULL DEFAULT 'immediate' CHECK (mode IN ('immediate', 'deferred', 'flush'))
) STRICT;
INSERT INTO search_state (id, mode) VALUES (1, 'immediate');

CREATE TABLE search_types (
  object_type TEXT PRIMARY KEY,
  code        INTEGER NOT NULL UNIQUE CHECK (code BETWEEN 1 AND 15)
) STRICT;
-- Higher codes come first within a rank class (see docs/tools.md, "How search ranks").
INSERT INTO search_types (object_type, code) VALUES
  ('story', 9), ('experience', 8), ('entity', 7), ('event', 6), ('relation', 5), ('entity_change', 4),
  ('story_line', 3), ('summary', 2), ('source_reference', 1);

-- A number per scope (the top bits of its item ids) and the next item sequence in it.
CREATE TABLE search_scopes (
  scope_key TEXT PRIMARY KEY,
  num       INTEGER NOT NULL UNIQUE CHECK (num BETWEEN 1 AND 1048575),
  next_seq  INTEGER NOT NULL DEFAULT 1
) STRICT;
INSERT INTO search_scopes (scope_key, num) SELECT scope_key, row_number() OVER (ORDER BY rowid) FROM scopes;
CREATE TRIGGER scopes_search_ai AFTER INSERT ON scopes BEGIN
  INSERT INTO search_scopes (scope_key, num)
  VALUES (new.scope_key, coalesce((SELECT max(num) FROM search_scopes), 0) + 1);
END;
CREATE TRIGGER scopes_search_ad AFTER DELETE ON scopes BEGIN
  DELETE FROM search_scopes WHERE scope_key = old.scope_key;
END;

CREATE TABLE search_items (
  item_id             INTEGER PRIMARY KEY,
  object_type         TEXT NOT NULL,
  object_id           TEXT NOT NULL,
  result_key          TEXT NOT NULL,
  scope_key           TEXT NOT NULL,
  -- The item's times, for time filters: its event time span, its result's review time and its
  -- record time (a leaf description's when the item has no row of its own).
  event_time_start    TEXT,
  event_time_end      TEXT,
  review_generated_at TEXT,
  recorded_at         TEXT,
  -- Field texts, each followed by two U+0001, and the field names in the same order (same separator).
  hi                  TEXT NOT NULL,
  lo                  TEXT NOT NULL,
  hi_fields           TEXT NOT NULL,
  lo_fields           TEXT NOT NULL,
  -- Each distinct CJK character followed by two U+0002 and each distinct pair of adjacent CJK
  -- characters followed by one U+0002: as trigrams they are exact phrases. NULL only while a write is applied.
  hi_grams            TEXT,
  lo_grams            TEXT,
  UNIQUE (object_type, object_id, result_key)
) STRICT;
CREATE INDEX search_items_by_object_id ON search_items (object_id);
CREATE INDEX search_items_by_result ON search_items (result_key);
CREATE INDEX search_items_without_grams ON search_items (item_id) WHERE hi_grams IS NULL;

CREATE VIRTUAL TABLE search_fts USING fts5 (
  hi, lo, hi_grams, lo_grams, content = 'search_items', content_rowid = 'item_id', tokenize = 'trigram case_sensitive 0'
);
CREATE VIRTUAL TABLE search_terms USING fts5vocab (search_fts, 'row');  -- distinct trigrams, for other short needles

-- Identifiers a query may equal: an entity change's own id, and ids held in a reference's locator.
CREATE INDEX entity_changes_by_address ON entity_changes (entity_id || '#' || association_key);
CREATE INDEX source_references_by_message ON source_references (json_extract(locator_json, '$.message_id'));
CREATE INDEX source_references_by_task ON source_references (json_extract(locator_json, '$.task_id'));

-- The blocks whose characters get one- and two-character grams: kana, CJK ideographs (with
-- extension A, compatibility ideographs and the supplementary planes), Hangul syllables.
-- server/store/search_index.py computes the same grams in Python for bulk loads.
CREATE TABLE search_cjk (low INTEGER PRIMARY KEY, high INTEGER NOT NULL) STRICT;
INSERT INTO search_cjk (low, high) VALUES
  (12352, 12543), (13312, 19903), (19968, 40959), (44032, 55215), (63744, 64255), (131072, 201551);

-- Items waiting to be rebuilt, in the order they were first named, and the rebuilt rows on their
-- way into search_items.
CREATE TABLE search_dirty (
  seq         INTEGER PRIMARY KEY,
  object_type TEXT NOT NULL,
  object_id   TEXT NOT NULL,
  result_key  TEXT NOT NULL,
  UNIQUE (object_type, object_id, result_key)
) STRICT;
CREATE TABLE search_stage (
  seq                 INTEGER PRIMARY KEY,
  object_type         TEXT NOT NULL,
  object_id           TEXT NOT NULL,
  result_key          TEXT NOT NULL,
  scope_key           TEXT NOT NULL,
  prefix              INTEGER NOT NULL,   -- scope number << 1 | own-row flag
  code                INTEGER NOT NULL,
  event_time_start    TEXT,
  event_time_end      TEXT,
  review_generated_at TEXT,
  recorded_at         TEXT,
  hi                  TEXT NOT NULL,
  lo                  TEXT NOT NULL,
  hi_fields           TEXT NOT NULL,
  lo_fields           TEXT NOT NULL
) STRICT;
-- Grams of staged rows computed by a bulk writer (mode 'flush'); rows without them get SQL grams.
CREATE TABLE search_grams (
  seq      INTEGER PRIMARY KEY,   -- search_stage.seq
  hi_grams TEXT NOT NULL,
  lo_grams TEXT NOT NULL
) STRICT;

-- What is searchable: one row per non-empty field of each item named in search_dirty. This is
-- the one place that says which fields of which table are searched, with which weight; a later
-- object type adds its branch here. `seq` numbers the item in search_dirty; `other_row` is 1 for
-- rows that are not the object's own.
CREATE VIEW search_fields (seq, object_type, object_id, result_key, scope_key, other_row, field, weight, body,
                           event_time_start, event_time_end, recorded_at, is_leaf) AS
SELECT d.seq, 'story_line', s.id, '', s.scope_key, 0, 'topic', 3, s.topic, NULL, NULL, s.recorded_at, 0
  FROM search_dirty AS d JOIN story_lines AS s ON s.id = d.object_id
 WHERE d.object_type = 'story_line' AND d.result_key = ''
UNION ALL
SELECT d.seq, 'event', e.id, e.result_id, e.scope_key, 0, 'title', 3, e.title, e.event_time_start, e.event_time_end,
       e.recorded_at, 0
  FROM search_dirty AS d JOIN events AS e ON e.id = d.object_id AND e.result_id = d.result_key
 WHERE d.object_type = 'event'
UNION ALL
SELECT d.seq, 'event', e.id, e.result_id, e.scope_key, 0, 'description', 1, e.description, e.event_time_start,
       e.event_time_end, e.recorded_at, 0
  FROM search_dirty AS d JOIN events AS e ON e.id = d.object_id AND e.result_id = d.result_key
 WHERE d.object_type = 'event'
UNION ALL
SELECT d.seq, 'event', e.id, e.result_id, e.scope_key, 0, 'event_type', 1, e.event_type, e.event_time_start,
       e.event_time_end, e.recorded_at, 0
  FROM search_dirty AS d JOIN events AS e ON e.id = d.object_id AND e.result_id = d.result_key
 WHERE d.object_type = 'event'
UNION ALL
SELECT d.seq, 'entity', n.id, '', n.scope_key, 0, 'canonical_label', 3, n.canonical_label, NULL, NULL, n.updated_at, 0
  FROM search_dirty AS d JOIN entities AS n ON n.id = d.object_id WHERE d.object_type = 'entity' AND d.result_key = ''
UNION ALL
SELECT d.seq, 'entity', n.id, '', n.scope_key, 0, 'description', 1, n.description, NULL, NULL, n.updated_at, 0
  FROM search_dirty AS d JOIN entities AS n ON n.id = d.object_id WHERE d.object_type = 'entity' AND d.result_key = ''
UNION ALL
SELECT d.seq, 'entity', v.entity_id, v.result_id, v.scope_key, 1, 'canonical_label', 3, v.canonical_label, NULL, NULL,
       v.recorded_at, 0
  FROM search_dirty AS d JOIN entity_revisions AS v ON v.entity_id = d.object_id AND v.result_id = d.result_key
 WHERE d.object_type = 'entity'
UNION ALL
SELECT d.seq, 'entity', v.entity_id, v.result_id, v.scope_key, 1, 'description', 1, v.description, NULL, NULL,
       v.recorded_at, 0
  FROM search_dirty AS d JOIN entity_revisions AS v ON v.entity_id = d.object_id AND v.result_id = d.result_key
 WHERE d.object_type = 'entity'
UNION ALL
SELECT d.seq, 'entity_change', d.object_id, c.result_id, c.scope_key, 0, 'description', 1, c.description,
       e.event_time_start, e.event_time_end, c.recorded_at, 0
  FROM search_dirty AS d  -- `+`: compared without affinity, so the address index (entity_changes_by_address) is usable
  JOIN entity_changes AS c ON c.entity_id || '#' || c.association_key = +d.object_id
  LEFT JOIN events AS e ON e.id = c.event_id AND e.scope_key = c.scope_key
 WHERE d.object_type = 'entity_change' AND c.result_id = d.result_key
UNION ALL
SELECT d.seq, 'entity_change', d.object_id, c.result_id, c.scope_key, 0, 'change_type', 1, c.change_type,
       e.event_time_start, e.event_time_end, c.recorded_at, 0
  FROM search_dirty AS d  -- `+`: compared without affinity, so the address index (entity_changes_by_address) is usable
  JOIN entity_changes AS c ON c.entity_id || '#' || c.association_key = +d.object_id
  LEFT JOIN events AS e ON e.id = c.event_id AND e.scope_key = c.scope_key
 WHERE d.object_type = 'entity_change' AND c.result_id = d.result_key
UNION ALL
SELECT d.seq, 'relation', l.id, l.result_id, l.scope_key, 0, 'reason', 1, l.reason, NULL, NULL, l.recorded_at, 0
  FROM search_dirty AS d JOIN relations AS l ON l.id = d.object_id AND l.result_id = d.result_key
 WHERE d.object_type = 'relation'
UNION ALL
SELECT d.seq, 'relation', l.id, l.result_id, l.scope_key, 0, 'relation_type', 1, l.relation_type, NULL, NULL,
       l.recorded_at, 0
  FROM search_dirty AS d JOIN relations AS l ON l.id = d.object_id AND l.result_id = d.result_key
 WHERE d.object_type = 'relation'
UNION ALL
SELECT d.seq, 'summary', m.id, m.result_id, m.scope_key, 0, 'summary', 3, m.body, m.interval_from, m.interval_to,
       m.recorded_at, 0
  FROM search_dirty AS d JOIN summaries AS m ON m.id = d.object_id AND m.result_id = d.result_key
 WHERE d.object_type = 'summary'
UNION ALL
SELECT d.seq, 'summary', m.id, m.result_id, m.scope_key, 0, 'open_items', 1, m.open_items, m.interval_from, m.interval_to,
       m.recorded_at, 0
  FROM search_dirty AS d JOIN summaries AS m ON m.id = d.object_id AND m.result_id = d.result_key
 WHERE d.object_type = 'summary'
UNION ALL
SELECT d.seq, 'source_reference', x.id, x.result_id, x.scope_key, 0, 'title', 3, x.title, NULL, NULL, x.recorded_at, 0
  FROM search_dirty AS d JOIN source_references AS x ON x.id = d.object_id AND x.result_id = d.result_key
 WHERE d.object_type = 'source_reference'
UNION ALL
SELECT d.seq, 'source_reference', x.id, x.result_id, x.scope_key, 0, 'fragment', 1, x.fragment, NULL, NULL,
       x.recorded_at, 0
  FROM search_dirty AS d JOIN source_references AS x ON x.id = d.object_id AND x.result_id = d.result_key
 WHERE d.object_type = 'source_reference'
UNION ALL
-- A successful leaf's independent description of an object, under the leaf's result.
SELECT d.seq, f.object_type, f.object_id, l.result_id, f.scope_key, 1, 'leaf:' || f.owner_id, 1, f.description, NULL,
       NULL, l.recorded_at, 1
  FROM search_dirty AS d  -- CROSS JOIN: from each dirty item, never a scan of every leaf's facts
  CROSS JOIN fact_links AS f ON f.object_id = d.object_id AND f.object_type = d.object_type
  JOIN leaves AS l ON l.id = f.owner_id AND l.result_id = d.result_key
 WHERE f.owner_type = 'leaf';

-- Each dirty item that has searchable text, as it should be stored: fields in a fixed order, each
-- followed by two U+0001 (so a field boundary is never part of a match); U+0001 and U+0002 inside
-- stored text are dropped (they are the index's own markers, and no query can contain them).
CREATE VIEW search_item_rows (seq, object_type, object_id, result_key, scope_key, prefix, code,
                              event_time_start, event_time_end, review_generated_at, recorded_at,
                              hi, lo, hi_fields, lo_fields) AS
SELECT d.seq, d.object_type, d.object_id, d.result_key, a.scope_key, (n.num << 1) | (1 - a.other_row), t.code,
       a.event_time_start, a.event_time_end,
       (SELECT r.review_generated_at FROM results AS r WHERE r.id = d.result_key AND d.result_key <> ''),
       a.recorded_at, a.hi, a.lo, a.hi_fields, a.lo_fields
  -- Fields are sorted and grouped by the dirty item's number only, carrying no more than the
  -- aggregates need (the item's key is read back from search_dirty): the sort is a bulk rebuild's
  -- largest cost.
  FROM (SELECT seq, min(scope_key) AS scope_key, min(other_row) AS other_row,
               min(event_time_start) AS event_time_start,
               max(coalesce(event_time_end, event_time_start)) AS event_time_end,
               coalesce(max(CASE WHEN is_leaf = 0 THEN recorded_at END), max(recorded_at)) AS recorded_at,
               coalesce(group_concat(CASE WHEN weight = 3 THEN text END, ''), '') AS hi,
               coalesce(group_concat(CASE WHEN weight <> 3 THEN text END, ''), '') AS lo,
               coalesce(group_concat(CASE WHEN weight = 3 THEN field || char(1, 1) END, ''), '') AS hi_fields,
               coalesce(group_concat(CASE WHEN weight <> 3 THEN field || char(1, 1) END, ''), '') AS lo_fields
          FROM (SELECT seq, scope_key, other_row, field, weight, event_time_start, event_time_end, recorded_at,
                       is_leaf, replace(replace(body, char(1), ''), char(2), '') || char(1, 1) AS text
                  FROM search_fields WHERE body IS NOT NULL AND body <> ''
                 ORDER BY seq, weight DESC, field)
         GROUP BY seq) AS a
  JOIN search_dirty AS d ON d.seq = a.seq
  JOIN search_scopes AS n ON n.scope_key = a.scope_key
  JOIN search_types AS t ON t.object_type = d.object_type;

-- search_apply: a row here (INSERT) writes the staged rows of the dirty items into the index.
CREATE VIEW search_apply (x) AS SELECT NULL WHERE 0;
CREATE TRIGGER search_apply_now INSTEAD OF INSERT ON search_apply BEGIN
  -- Out of the FTS index go the old entries (an item without grams was never put in).
  INSERT INTO search_fts (search_fts, rowid, hi, lo, hi_grams, lo_grams)
  SELECT 'delete', i.item_id, i.hi, i.lo, i.hi_grams, i.lo_grams
    FROM search_dirty AS d  -- CROSS JOIN here and below: from the dirty items, never a scan of the index
    CROSS JOIN search_items AS i ON i.object_type = d.object_type AND i.object_id = d.object_id AND i.result_key = d.result_key
   WHERE i.hi_grams IS NOT NULL;
  -- An item with no text left goes; one whose scope or own-row flag changed moves to a new id.
  DELETE FROM search_items
   WHERE item_id IN (SELECT i.item_id FROM search_dirty AS d
                       CROSS JOIN search_items AS i
                         ON i.object_type = d.object_type AND i.object_id = d.object_id AND i.result_key = d.result_key
                       LEFT JOIN search_stage AS s ON s.seq = d.seq
                      WHERE s.seq IS NULL OR s.prefix <> i.item_id >> 42);
  UPDATE search_items
     SET scope_key = s.scope_key, event_time_start = s.event_time_start, event_time_end = s.event_time_end,
         review_generated_at = s.review_generated_at, recorded_at = s.recorded_at, hi = s.hi, lo = s.lo,
         hi_fields = s.hi_fields, lo_fields = s.lo_fields, hi_grams = g.hi_grams, lo_grams = g.lo_grams
    FROM search_stage AS s LEFT JOIN search_grams AS g ON g.seq = s.seq
   WHERE search_items.object_type = s.object_type AND search_items.object_id = s.object_id
     AND search_items.result_key = s.result_key;
  -- New items take the next sequences of their scope: the items of one rebuild in order of their
  -- record time (then in the order they were named), so a bulk load of history is newest-first.
  -- Only the keys are sorted; the rows are then read by their stage number.
  INSERT INTO search_items (item_id, object_type, object_id, result_key, scope_key, event_time_start, event_time_end,
                            review_generated_at, recorded_at, hi, lo, hi_fields, lo_fields, hi_grams, lo_grams)
  SELECT n.item_id, s.object_type, s.object_id, s.result_key, s.scope_key, s.event_time_start, s.event_time_end,
         s.review_generated_at, s.recorded_at, s.hi, s.lo, s.hi_fields, s.lo_fields, g.hi_grams, g.lo_grams
    FROM (SELECT s.seq, (s.prefix << 42) | (s.code << 38)
                   | (c.next_seq + row_number() OVER (PARTITION BY s.scope_key ORDER BY s.recorded_at, s.seq) - 1)
                   AS item_id
            FROM search_stage AS s JOIN search_scopes AS c ON c.scope_key = s.scope_key
           WHERE NOT EXISTS (SELECT 1 FROM search_items AS i
                              WHERE i.object_type = s.object_type AND i.object_id = s.object_id
                                AND i.result_key = s.result_key)) AS n
    JOIN search_stage AS s ON s.seq = n.seq
    LEFT JOIN search_grams AS g ON g.seq = s.seq;
  UPDATE search_scopes
     SET next_seq = m.top + 1
    FROM (SELECT s.scope_key, max(i.item_id & 274877906943) AS top
            FROM search_stage AS s
            JOIN search_items AS i
              ON i.object_type = s.object_type AND i.object_id = s.object_id AND i.result_key = s.result_key
           GROUP BY s.scope_key) AS m
   WHERE m.scope_key = search_scopes.scope_key AND search_scopes.next_seq <= m.top;
  -- Grams the writer did not give (every write but a flush) are computed here, one character at a time.
  UPDATE search_items
     SET hi_grams = (SELECT coalesce(group_concat(g, ''), '') FROM (SELECT DISTINCT g FROM (
           WITH RECURSIVE p (rest) AS (SELECT search_items.hi UNION ALL SELECT substr(rest, 2) FROM p WHERE rest <> '')
           SELECT substr(rest, 1, 1) || char(2, 2) AS g FROM p WHERE EXISTS (SELECT 1 FROM search_cjk WHERE unicode(rest) BETWEEN low AND high)
           UNION ALL
           SELECT substr(rest, 1, 2) || char(2) FROM p WHERE EXISTS (SELECT 1 FROM search_cjk WHERE unicode(rest) BETWEEN low AND high) AND EXISTS (SELECT 1 FROM search_cjk WHERE unicode(substr(rest, 2, 1)) BETWEEN low AND high))
           ORDER BY g)),
         lo_grams = (SELECT coalesce(group_concat(g, ''), '') FROM (SELECT DISTINCT g FROM (
           WITH RECURSIVE p (rest) AS (SELECT search_items.lo UNION ALL SELECT substr(rest, 2) FROM p WHERE rest <> '')
           SELECT substr(rest, 1, 1) || char(2, 2) AS g FROM p WHERE EXISTS (SELECT 1 FROM search_cjk WHERE unicode(rest) BETWEEN low AND high)
           UNION ALL
           SELECT substr(rest, 1, 2) || char(2) FROM p WHERE EXISTS (SELECT 1 FROM search_cjk WHERE unicode(rest) BETWEEN low AND high) AND EXISTS (SELECT 1 FROM search_cjk WHERE unicode(substr(rest, 2, 1)) BETWEEN low AND high))
           ORDER BY g))
   WHERE hi_grams IS NULL;
  -- Into the FTS index in rowid order: FTS5 keeps its pending entries in memory only while rowids grow.
  INSERT INTO search_fts (rowid, hi, lo, hi_grams, lo_grams)
  SELECT i.item_id, i.hi, i.lo, i.hi_grams, i.lo_grams
    FROM search_items AS i
   WHERE i.item_id IN (SELECT i.item_id FROM search_stage AS s
                         JOIN search_items AS i
                           ON i.object_type = s.object_type AND i.object_id = s.object_id AND i.result_key = s.result_key);
  DELETE FROM search_grams;
  DELETE FROM search_stage;
  DELETE FROM search_dirty;
END;

-- search_refresh: name an item here (INSERT) to have it rebuilt; a row of NULLs rebuilds every item
-- collected so far (a flush). Nothing is ever stored in the view itself.
CREATE VIEW search_refresh (object_type, object_id, result_key) AS SELECT NULL, NULL, NULL WHERE 0;

CREATE TRIGGER search_refresh_deferred INSTEAD OF INSERT ON search_refresh
WHEN (SELECT mode FROM search_state) = 'deferred' BEGIN
  INSERT OR IGNORE INTO search_dirty (object_type, object_id, result_key)
  SELECT new.object_type, new.object_id, new.result_key WHERE new.object_type IS NOT NULL;
END;
CREATE TRIGGER search_refresh_now INSTEAD OF INSERT ON search_refresh
WHEN (SELECT mode FROM search_state) <> 'deferred' BEGIN
  INSERT OR IGNORE INTO search_dirty (object_type, object_id, result_key)
  SELECT new.object_type, new.object_id, new.result_key WHERE new.object_type IS NOT NULL;
  INSERT INTO search_stage
  SELECT seq, object_type, object_id, result_key, scope_key, prefix, code, event_time_start, event_time_end,
         review_generated_at, recorded_at, hi, lo, hi_fields, lo_fields
    FROM search_item_rows;
  -- A flush stops here: the bulk writer adds grams to search_grams, then applies the staged rows.
  INSERT INTO search_apply SELECT NULL WHERE (SELECT mode FROM search_state) = 'immediate';
END;

-- Every write to a searchable table names the items it touches (old and new keys).
CREATE TRIGGER story_lines_search_ai AFTER INSERT ON story_lines BEGIN
  INSERT INTO search_refresh VALUES ('story_line', new.id, '');
END;
CREATE TRIGGER story_lines_search_ad AFTER DELETE ON story_lines BEGIN
  INSERT INTO search_refresh VALUES ('story_line', old.id, '');
END;
CREATE TRIGGER story_lines_search_au AFTER UPDATE ON story_lines BEGIN
  INSERT INTO search_refresh SELECT 'story_line', old.id, '' UNION SELECT 'story_line', new.id, '';
END;

CREATE TRIGGER events_search_ai AFTER INSERT ON events BEGIN
  INSERT INTO search_refresh VALUES ('event', new.id, new.result_id);
END;
CREATE TRIGGER events_search_ad AFTER DELETE ON events BEGIN
  INSERT INTO search_refresh
  SELECT 'event', old.id, old.result_id
  UNION SELECT 'entity_change', entity_id || '#' || association_key, result_id FROM entity_changes WHERE event_id = old.id;
END;
CREATE TRIGGER events_search_au AFTER UPDATE ON events BEGIN
  INSERT INTO search_refresh
  SELECT 'event', old.id, old.result_id
  UNION SELECT 'event', new.id, new.result_id
  UNION SELECT 'entity_change', entity_id || '#' || association_key, result_id FROM entity_changes
         WHERE event_id IN (old.id, new.id);
END;

CREATE TRIGGER entities_search_ai AFTER INSERT ON entities BEGIN
  INSERT INTO search_refresh VALUES ('entity', new.id, '');
END;
CREATE TRIGGER entities_search_ad AFTER DELETE ON entities BEGIN
  INSERT INTO search_refresh VALUES ('entity', old.id, '');
END;
CREATE TRIGGER entities_search_au AFTER UPDATE ON entities BEGIN
  INSERT INTO search_refresh SELECT 'entity', old.id, '' UNION SELECT 'entity', new.id, '';
END;

CREATE TRIGGER entity_revisions_search_ai AFTER INSERT ON entity_revisions BEGIN
  INSERT INTO search_refresh VALUES ('entity', new.entity_id, new.result_id);
END;
CREATE TRIGGER entity_revisions_search_ad AFTER DELETE ON entity_revisions BEGIN
  INSERT INTO search_refresh VALUES ('entity', old.entity_id, old.result_id);
END;
CREATE TRIGGER entity_revisions_search_au AFTER UPDATE ON entity_revisions BEGIN
  INSERT INTO search_refresh
  SELECT 'entity', old.entity_id, old.result_id UNION SELECT 'entity', new.entity_id, new.result_id;
END;

CREATE TRIGGER entity_changes_search_ai AFTER INSERT ON entity_changes BEGIN
  INSERT INTO search_refresh VALUES ('entity_change', new.entity_id || '#' || new.association_key, new.result_id);
END;
CREATE TRIGGER entity_changes_search_ad AFTER DELETE ON entity_changes BEGIN
  INSERT INTO search_refresh VALUES ('entity_change', old.entity_id || '#' || old.association_key, old.result_id);
END;
CREATE TRIGGER entity_changes_search_au AFTER UPDATE ON entity_changes BEGIN
  INSERT INTO search_refresh
  SELECT 'entity_change', old.entity_id || '#' || old.association_key, old.result_id
  UNION SELECT 'entity_change', new.entity_id || '#' || new.association_key, new.result_id;
END;

CREATE TRIGGER relations_search_ai AFTER INSERT ON relations BEGIN
  INSERT INTO search_refresh VALUES ('relation', new.id, new.result_id);
END;
CREATE TRIGGER relations_search_ad AFTER DELETE ON relations BEGIN
  INSERT INTO search_refresh VALUES ('relation', old.id, old.result_id);
END;
CREATE TRIGGER relations_search_au AFTER UPDATE ON relations BEGIN
  INSERT INTO search_refresh SELECT 'relation', old.id, old.result_id UNION SELECT 'relation', new.id, new.result_id;
END;

CREATE TRIGGER summaries_search_ai AFTER INSERT ON summaries BEGIN
  INSERT INTO search_refresh VALUES ('summary', new.id, new.result_id);
END;
CREATE TRIGGER summaries_search_ad AFTER DELETE ON summaries BEGIN
  INSERT INTO search_refresh VALUES ('summary', old.id, old.result_id);
END;
CREATE TRIGGER summaries_search_au AFTER UPDATE ON summaries BEGIN
  INSERT INTO search_refresh SELECT 'summary', old.id, old.result_id UNION SELECT 'summary', new.id, new.result_id;
END;

CREATE TRIGGER source_references_search_ai AFTER INSERT ON source_references BEGIN
  INSERT INTO search_refresh VALUES ('source_reference', new.id, new.result_id);
END;
CREATE TRIGGER source_references_search_ad AFTER DELETE ON source_references BEGIN
  INSERT INTO search_refresh VALUES ('source_reference', old.id, old.result_id);
END;
CREATE TRIGGER source_references_search_au AFTER UPDATE ON source_references BEGIN
  INSERT INTO search_refresh
  SELECT 'source_reference', old.id, old.result_id UNION SELECT 'source_reference', new.id, new.result_id;
END;

-- A leaf's descriptions live under the leaf's result: fact rows and the leaf itself both move them.
CREATE TRIGGER fact_links_search_ai AFTER INSERT ON fact_links WHEN new.owner_type = 'leaf' BEGIN
  INSERT INTO search_refresh SELECT new.object_type, new.object_id, result_id FROM leaves WHERE id = new.owner_id;
END;
CREATE TRIGGER fact_links_search_ad AFTER DELETE ON fact_links WHEN old.owner_type = 'leaf' BEGIN
  INSERT INTO search_refresh SELECT old.object_type, old.object_id, result_id FROM leaves WHERE id = old.owner_id;
END;
CREATE TRIGGER fact_links_search_au AFTER UPDATE ON fact_links BEGIN
  INSERT INTO search_refresh
  SELECT old.object_type, old.object_id, result_id FROM leaves WHERE id = old.owner_id AND old.owner_type = 'leaf'
  UNION SELECT new.object_type, new.object_id, result_id FROM leaves WHERE id = new.owner_id AND new.owner_type = 'leaf';
END;
CREATE TRIGGER leaves_search_ai AFTER INSERT ON leaves BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, new.result_id FROM fact_links WHERE owner_type = 'leaf' AND owner_id = new.id;
END;
CREATE TRIGGER leaves_search_ad AFTER DELETE ON leaves BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, old.result_id FROM fact_links WHERE owner_type = 'leaf' AND owner_id = old.id;
END;
CREATE TRIGGER leaves_search_au AFTER UPDATE ON leaves BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, old.result_id FROM fact_links WHERE owner_type = 'leaf' AND owner_id = old.id
  UNION SELECT object_type, object_id, new.result_id FROM fact_links WHERE owner_type = 'leaf' AND owner_id = new.id;
END;

-- An item carries its result's review time.
CREATE TRIGGER results_search_au AFTER UPDATE OF review_generated_at ON results BEGIN
  INSERT INTO search_refresh SELECT object_type, object_id, result_key FROM search_items WHERE result_key = new.id;
END;

-- Backfill a version-2 database: every item, in the order its fields were first stored there,
-- collected first and rebuilt in one pass.
UPDATE search_state SET mode = 'deferred';
INSERT INTO search_refresh
SELECT object_type, object_id, result_key FROM search_docs GROUP BY object_type, object_id, result_key ORDER BY min(doc_id);
UPDATE search_state SET mode = 'immediate';
INSERT INTO search_refresh (object_type) VALUES (NULL);
DROP TABLE search_docs;
UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;

PRAGMA user_version = 3;
