-- Schema version 17: a leaf's description in the search index carries the event time of the object it describes.
--
-- A leaf stores no event time. Its description of an object is a field (`leaf:<leaf id>`) of the item (object type,
-- object id, the leaf's result); when that result holds a row of the object (an event's row in its own result), the
-- item's time came from that row, but when it holds none (a later review's leaf describing an event stored under an
-- earlier result) the item had no event time at all: a search with a time_range on event_time left it out and
-- counted it in unknown_time_excluded_count, and its event_interval was null, while get_context shows the same
-- leaf row at its event's time (server/reader/context_rows.py, leaf_facts). What a leaf describes happened when its
-- object did, so the leaf field now takes the event time of the object's own row in the leaf's scope, the row
-- get_context reads (server/reader/objects.py, OBJECT_ROWS): an event's time, an entity change's event's (as the
-- entity_change branch reads it), a summary's interval, a story's span, an experience's first formation. Every other
-- type has none (NULL, as before). Review and record times stay the leaf's own.
--
-- Where the leaf's result holds the object's row, nothing changes: an object of these types has one row (its id is
-- its key), so the leaf field's time is that very row's, and the item's span (min start, max end) stays the same.
--
-- Triggers: the time now read from another row, every write that changes it names the leaf items of the object
-- (those under a result other than the object's own row's, which the existing triggers already name): an event's
-- insert, delete or change of id, scope or time (its leaf items, its entity changes' and those of the experiences it
-- formed); an entity change's, summary's, story's, experience's insert, delete or change of what dates it; an
-- experience link's. Each looks the items up by index (fact_links_by_object, then the leaf's primary key): nothing
-- is read for an object no leaf describes, so a bulk load (deferred mode) costs a few index probes per row.
--
-- Upgrading re-indexes in place the leaf items of those types that have no event time yet (one with a time has it
-- from its own row, the same), and bumps the data revision of the scopes whose items got a time, and the graph's.

DROP VIEW search_item_rows;
DROP VIEW search_fields;

-- As in migration 0005, but for the leaf branch's event time.
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
-- A successful leaf's independent description of an object, under the leaf's result, at the event time of the
-- object's own row in the leaf's scope (the header says which; each LEFT JOIN is one primary-key or address lookup,
-- made only for its type).
SELECT d.seq, f.object_type, f.object_id, l.result_id, f.scope_key, 1, 'leaf:' || f.owner_id, 1, f.description,
       CASE f.object_type
         WHEN 'event' THEN e.event_time_start
         WHEN 'entity_change' THEN ce.event_time_start
         WHEN 'summary' THEN m.interval_from
         WHEN 'story' THEN s.started_at
         WHEN 'experience' THEN (SELECT min(fe.event_time_start) FROM experience_events AS fl
                                   JOIN events AS fe ON fe.id = fl.event_id
                                  WHERE fl.experience_id = x.id AND fl.role = 'formed')
       END,
       CASE f.object_type
         WHEN 'event' THEN e.event_time_end
         WHEN 'entity_change' THEN ce.event_time_end
         WHEN 'summary' THEN m.interval_to
         WHEN 'story' THEN s.ended_at
       END,
       l.recorded_at, 1
  FROM search_dirty AS d  -- CROSS JOIN: from each dirty item, never a scan of every leaf's facts
  CROSS JOIN fact_links AS f ON f.object_id = d.object_id AND f.object_type = d.object_type
  JOIN leaves AS l ON l.id = f.owner_id AND l.result_id = d.result_key
  LEFT JOIN events AS e ON f.object_type = 'event' AND e.id = f.object_id AND e.scope_key = f.scope_key
  -- `+`: as in the entity_change branches, so the address index is usable
  LEFT JOIN entity_changes AS c
    ON f.object_type = 'entity_change' AND c.entity_id || '#' || c.association_key = +f.object_id
   AND c.scope_key = f.scope_key
  LEFT JOIN events AS ce ON ce.id = c.event_id AND ce.scope_key = c.scope_key
  LEFT JOIN summaries AS m ON f.object_type = 'summary' AND m.id = f.object_id AND m.scope_key = f.scope_key
  LEFT JOIN stories AS s ON f.object_type = 'story' AND s.id = f.object_id AND s.scope_key = f.scope_key
  LEFT JOIN experiences AS x ON f.object_type = 'experience' AND x.id = f.object_id AND x.scope_key = f.scope_key
 WHERE f.owner_type = 'leaf'
UNION ALL
SELECT d.seq, 'story', s.id, '', s.scope_key, 0, 'name', 3, s.name, s.started_at, s.ended_at, s.recorded_at, 0
  FROM search_dirty AS d JOIN stories AS s ON s.id = d.object_id WHERE d.object_type = 'story' AND d.result_key = ''
UNION ALL
SELECT d.seq, 'story', s.id, '', s.scope_key, 0, 'description', 1, s.description, s.started_at, s.ended_at, s.recorded_at, 0
  FROM search_dirty AS d JOIN stories AS s ON s.id = d.object_id WHERE d.object_type = 'story' AND d.result_key = ''
UNION ALL
SELECT d.seq, 'experience', x.id, '', x.scope_key, 0, 'statement', 3, x.statement,
       (SELECT min(e.event_time_start) FROM experience_events AS l JOIN events AS e ON e.id = l.event_id
         WHERE l.experience_id = x.id AND l.role = 'formed'), NULL, x.recorded_at, 0
  FROM search_dirty AS d JOIN experiences AS x ON x.id = d.object_id
 WHERE d.object_type = 'experience' AND d.result_key = ''
   AND EXISTS (SELECT 1 FROM experience_events WHERE experience_id = x.id AND role = 'formed')
UNION ALL
SELECT d.seq, 'experience', x.id, '', x.scope_key, 0, 'conditions', 1, x.conditions,
       (SELECT min(e.event_time_start) FROM experience_events AS l JOIN events AS e ON e.id = l.event_id
         WHERE l.experience_id = x.id AND l.role = 'formed'), NULL, x.recorded_at, 0
  FROM search_dirty AS d JOIN experiences AS x ON x.id = d.object_id
 WHERE d.object_type = 'experience' AND d.result_key = ''
   AND EXISTS (SELECT 1 FROM experience_events WHERE experience_id = x.id AND role = 'formed')
UNION ALL
SELECT d.seq, 'experience', x.id, '', x.scope_key, 0, 'boundaries', 1, x.boundaries,
       (SELECT min(e.event_time_start) FROM experience_events AS l JOIN events AS e ON e.id = l.event_id
         WHERE l.experience_id = x.id AND l.role = 'formed'), NULL, x.recorded_at, 0
  FROM search_dirty AS d JOIN experiences AS x ON x.id = d.object_id
 WHERE d.object_type = 'experience' AND d.result_key = ''
   AND EXISTS (SELECT 1 FROM experience_events WHERE experience_id = x.id AND role = 'formed')
UNION ALL
-- The note of each formed/applied link, under the experience.
SELECT d.seq, 'experience', x.id, '', x.scope_key, 0, 'note:' || l.role || ':' || l.event_id, 1, l.note,
       (SELECT min(e.event_time_start) FROM experience_events AS l JOIN events AS e ON e.id = l.event_id
         WHERE l.experience_id = x.id AND l.role = 'formed'), NULL, x.recorded_at, 0
  FROM search_dirty AS d JOIN experiences AS x ON x.id = d.object_id
  JOIN experience_events AS l ON l.experience_id = x.id
 WHERE d.object_type = 'experience' AND d.result_key = ''
   AND EXISTS (SELECT 1 FROM experience_events WHERE experience_id = x.id AND role = 'formed');

-- As in migration 0005 (unchanged; recreated because it reads search_fields).
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

-- The search item of each leaf's description: (object type, object id, the leaf's result). Flattened into the
-- triggers below, a lookup by object is one fact_links_by_object probe and a leaf's primary key.
CREATE VIEW search_leaf_items (object_type, object_id, result_key) AS
SELECT f.object_type, f.object_id, l.result_id
  FROM fact_links AS f JOIN leaves AS l ON l.id = f.owner_id
 WHERE f.owner_type = 'leaf';

-- An event dates its leaf items, those of its entity changes and those of the experiences it formed. The items under
-- the result of the object's own row are left out: the existing triggers name them (events_search_*,
-- entity_changes_search_*). CROSS JOIN: from the event's changes and links, never a scan of every leaf's facts (the
-- planner otherwise read all of them for an experience).
CREATE TRIGGER events_leaf_search_ai AFTER INSERT ON events BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'event' AND object_id = new.id AND result_key <> new.result_id
  UNION
  SELECT i.object_type, i.object_id, i.result_key
    FROM entity_changes AS c
   CROSS JOIN search_leaf_items AS i
      ON i.object_type = 'entity_change' AND i.object_id = c.entity_id || '#' || c.association_key
     AND i.result_key <> c.result_id
   WHERE c.event_id = new.id
  UNION
  SELECT i.object_type, i.object_id, i.result_key
    FROM experience_events AS x
   CROSS JOIN search_leaf_items AS i ON i.object_type = 'experience' AND i.object_id = x.experience_id
   WHERE x.event_id = new.id AND x.role = 'formed';
END;
CREATE TRIGGER events_leaf_search_ad AFTER DELETE ON events BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'event' AND object_id = old.id AND result_key <> old.result_id
  UNION
  SELECT i.object_type, i.object_id, i.result_key
    FROM entity_changes AS c
   CROSS JOIN search_leaf_items AS i
      ON i.object_type = 'entity_change' AND i.object_id = c.entity_id || '#' || c.association_key
     AND i.result_key <> c.result_id
   WHERE c.event_id = old.id
  UNION
  SELECT i.object_type, i.object_id, i.result_key
    FROM experience_events AS x
   CROSS JOIN search_leaf_items AS i ON i.object_type = 'experience' AND i.object_id = x.experience_id
   WHERE x.event_id = old.id AND x.role = 'formed';
END;
-- Not OF result_id: a move between results changes which item holds the row, and events_search_au names both.
CREATE TRIGGER events_leaf_search_au AFTER UPDATE OF id, scope_key, event_time_start, event_time_end ON events BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'event' AND object_id IN (old.id, new.id)
     AND NOT (object_id = old.id AND result_key = old.result_id) AND NOT (object_id = new.id AND result_key = new.result_id)
  UNION
  SELECT i.object_type, i.object_id, i.result_key
    FROM entity_changes AS c
   CROSS JOIN search_leaf_items AS i
      ON i.object_type = 'entity_change' AND i.object_id = c.entity_id || '#' || c.association_key
     AND i.result_key <> c.result_id
   WHERE c.event_id IN (old.id, new.id)
  UNION
  SELECT i.object_type, i.object_id, i.result_key
    FROM experience_events AS x
   CROSS JOIN search_leaf_items AS i ON i.object_type = 'experience' AND i.object_id = x.experience_id
   WHERE x.event_id IN (old.id, new.id) AND x.role = 'formed';
END;

-- An entity change dates its leaf items with its event's time.
CREATE TRIGGER entity_changes_leaf_search_ai AFTER INSERT ON entity_changes BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'entity_change' AND object_id = new.entity_id || '#' || new.association_key
     AND result_key <> new.result_id;
END;
CREATE TRIGGER entity_changes_leaf_search_ad AFTER DELETE ON entity_changes BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'entity_change' AND object_id = old.entity_id || '#' || old.association_key
     AND result_key <> old.result_id;
END;
CREATE TRIGGER entity_changes_leaf_search_au AFTER UPDATE OF entity_id, association_key, scope_key, event_id
ON entity_changes BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'entity_change'
     AND object_id IN (old.entity_id || '#' || old.association_key, new.entity_id || '#' || new.association_key)
     AND NOT (object_id = old.entity_id || '#' || old.association_key AND result_key = old.result_id)
     AND NOT (object_id = new.entity_id || '#' || new.association_key AND result_key = new.result_id);
END;

-- A summary dates its leaf items with its interval.
CREATE TRIGGER summaries_leaf_search_ai AFTER INSERT ON summaries BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'summary' AND object_id = new.id AND result_key <> new.result_id;
END;
CREATE TRIGGER summaries_leaf_search_ad AFTER DELETE ON summaries BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'summary' AND object_id = old.id AND result_key <> old.result_id;
END;
CREATE TRIGGER summaries_leaf_search_au AFTER UPDATE OF id, scope_key, interval_from, interval_to ON summaries BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'summary' AND object_id IN (old.id, new.id)
     AND NOT (object_id = old.id AND result_key = old.result_id) AND NOT (object_id = new.id AND result_key = new.result_id);
END;

-- A story dates its leaf items with its span (a story belongs to no result: every leaf item is another row).
CREATE TRIGGER stories_leaf_search_ai AFTER INSERT ON stories BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items WHERE object_type = 'story' AND object_id = new.id;
END;
CREATE TRIGGER stories_leaf_search_ad AFTER DELETE ON stories BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items WHERE object_type = 'story' AND object_id = old.id;
END;
CREATE TRIGGER stories_leaf_search_au AFTER UPDATE OF id, scope_key, started_at, ended_at ON stories BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'story' AND object_id IN (old.id, new.id);
END;

-- An experience dates its leaf items with its first formation: the experience and its formed links.
CREATE TRIGGER experiences_leaf_search_ai AFTER INSERT ON experiences BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'experience' AND object_id = new.id;
END;
CREATE TRIGGER experiences_leaf_search_ad AFTER DELETE ON experiences BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'experience' AND object_id = old.id;
END;
CREATE TRIGGER experiences_leaf_search_au AFTER UPDATE OF id, scope_key ON experiences BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'experience' AND object_id IN (old.id, new.id);
END;
CREATE TRIGGER experience_events_leaf_search_ai AFTER INSERT ON experience_events WHEN new.role = 'formed' BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'experience' AND object_id = new.experience_id;
END;
CREATE TRIGGER experience_events_leaf_search_ad AFTER DELETE ON experience_events WHEN old.role = 'formed' BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'experience' AND object_id = old.experience_id;
END;
CREATE TRIGGER experience_events_leaf_search_au AFTER UPDATE OF experience_id, event_id, role ON experience_events
WHEN old.role = 'formed' OR new.role = 'formed' BEGIN
  INSERT INTO search_refresh
  SELECT object_type, object_id, result_key FROM search_leaf_items
   WHERE object_type = 'experience' AND object_id IN (old.experience_id, new.experience_id);
END;

-- Re-date the stored leaf items of those types that have no event time yet, in place (an item keeps its id: its
-- scope and own-row flag do not change), collected first and rebuilt in one pass.
CREATE TEMP TABLE search_leaf_undated AS
SELECT DISTINCT i.object_type, i.object_id, i.result_key, s.scope_key
  FROM search_leaf_items AS i
  JOIN search_items AS s ON s.object_type = i.object_type AND s.object_id = i.object_id AND s.result_key = i.result_key
 WHERE i.object_type IN ('event', 'entity_change', 'summary', 'story', 'experience') AND s.event_time_start IS NULL;
UPDATE search_state SET mode = 'deferred';
INSERT INTO search_refresh SELECT object_type, object_id, result_key FROM search_leaf_undated;
UPDATE search_state SET mode = 'immediate';
INSERT INTO search_refresh (object_type) VALUES (NULL);
-- A search or memo of a scope whose items got a time reads differently now.
UPDATE scopes SET data_revision = data_revision + 1
 WHERE scope_key IN (SELECT u.scope_key FROM search_leaf_undated AS u
                       JOIN search_items AS s
                         ON s.object_type = u.object_type AND s.object_id = u.object_id AND s.result_key = u.result_key
                      WHERE s.event_time_start IS NOT NULL);
UPDATE graph_state SET data_revision = data_revision + 1
 WHERE id = 1 AND EXISTS (SELECT 1 FROM search_leaf_undated AS u
                            JOIN search_items AS s
                              ON s.object_type = u.object_type AND s.object_id = u.object_id AND s.result_key = u.result_key
                           WHERE s.event_time_start IS NOT NULL);
DROP TABLE search_leaf_undated;

PRAGMA user_version = 17;
