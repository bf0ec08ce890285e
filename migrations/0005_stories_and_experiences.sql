-- Schema version 5: stories (long-lived features, their threads, cross-project stories) and
-- experiences (lessons distilled from earlier work), with their links to events.
--
-- Scope (SPEC §4; docs/tools.md "Stories and experiences"):
-- * A feature or thread story belongs to its one project's scope; a cross-project story to the scope
--   of the project set it spans; an experience to the scope whose projects are exactly those of the
--   events that formed it (the importer checks that last rule; it spans several rows).
-- * A link between a story or experience and an event is part of the story or experience: it carries
--   that owner's scope (`scope_key`) and the event's own scope (`event_scope_key`). The event's scope
--   must lie within the owner's: the same scope, or a scope of some of its projects (never Global
--   inside a project set, never a project set inside one project). So whoever may read the owner may
--   read every event it lists, and a query of the event's own scope never sees a link to a story of a
--   wider scope. Triggers below refuse any other link, whoever writes.
-- * Stories and experiences are searchable (see the end of this file).

-- Composite foreign keys name an event together with its scope.
CREATE UNIQUE INDEX events_by_id_scope ON events (id, scope_key);

-- Is scope `inner` within scope `outer`? (One place for the rule; the triggers below use it.)
-- inner = outer, or both are project sets and every project of inner is one of outer's.
CREATE VIEW scope_within (inner_key, outer_key) AS
SELECT i.scope_key, o.scope_key FROM scopes AS i JOIN scopes AS o
 WHERE i.scope_key = o.scope_key
    OR (i.kind = 'projects' AND o.kind = 'projects'
        AND EXISTS (SELECT 1 FROM scope_projects WHERE scope_key = i.scope_key)
        AND NOT EXISTS (SELECT 1 FROM scope_projects AS ip WHERE ip.scope_key = i.scope_key
                          AND NOT EXISTS (SELECT 1 FROM scope_projects AS op
                                           WHERE op.scope_key = o.scope_key AND op.project_id = ip.project_id)));

CREATE TABLE stories (
  id                 TEXT PRIMARY KEY,
  scope_key          TEXT NOT NULL REFERENCES scopes (scope_key),
  level              TEXT NOT NULL CHECK (level IN ('feature', 'thread', 'cross')),
  parent_story_id    TEXT,        -- a thread's feature, in the same scope; NULL for features and cross stories
  name               TEXT NOT NULL,
  description        TEXT NOT NULL DEFAULT '',
  state              TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'concluded')),
  state_event_id     TEXT REFERENCES events (id) ON DELETE SET NULL,   -- the event that set the state; NULL: none recorded
  started_at         TEXT,        -- the story's span as recorded; NULL: unknown
  ended_at           TEXT,
  confirmation_state TEXT NOT NULL DEFAULT 'automatic' CHECK (confirmation_state IN ('automatic', 'user_edited')),
  recorded_at        TEXT NOT NULL,
  revision           TEXT,
  UNIQUE (id, scope_key),
  -- Deferred: a thread may be written before its feature within one transaction.
  FOREIGN KEY (parent_story_id, scope_key) REFERENCES stories (id, scope_key) DEFERRABLE INITIALLY DEFERRED,
  CHECK ((level = 'thread') = (parent_story_id IS NOT NULL)),
  -- Stories belong to projects: one project for a feature or thread, a project set for a cross story.
  CHECK (scope_key LIKE 'projects:%' AND (level = 'cross' OR json_array_length(substr(scope_key, 10)) = 1)),
  CHECK (ended_at IS NULL OR (started_at IS NOT NULL AND ended_at >= started_at))
) STRICT;
CREATE INDEX stories_by_scope ON stories (scope_key, id);
CREATE INDEX stories_by_parent ON stories (parent_story_id);
CREATE INDEX stories_by_state_event ON stories (state_event_id);

-- Which stories an event belongs to. `is_primary`: the one feature or thread the event belongs to (at
-- most one per event, never a cross story); otherwise a related story. `user_set`: a user placed it.
CREATE TABLE story_events (
  story_id        TEXT NOT NULL,
  event_id        TEXT NOT NULL,
  scope_key       TEXT NOT NULL,      -- the story's scope: the link is part of the story
  event_scope_key TEXT NOT NULL,      -- the event's own scope, within the story's
  is_primary      INTEGER NOT NULL DEFAULT 0 CHECK (is_primary IN (0, 1)),
  user_set        INTEGER NOT NULL DEFAULT 0 CHECK (user_set IN (0, 1)),
  PRIMARY KEY (story_id, event_id),
  FOREIGN KEY (story_id, scope_key) REFERENCES stories (id, scope_key) ON DELETE CASCADE,
  FOREIGN KEY (event_id, event_scope_key) REFERENCES events (id, scope_key) ON DELETE CASCADE,
  CHECK (is_primary = 0 OR event_scope_key = scope_key)
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX story_events_one_primary ON story_events (event_id) WHERE is_primary = 1;
CREATE INDEX story_events_by_event ON story_events (event_id, event_scope_key);

-- A lesson distilled from earlier work: advice, not a rule.
CREATE TABLE experiences (
  id                 TEXT PRIMARY KEY,
  scope_key          TEXT NOT NULL REFERENCES scopes (scope_key),
  statement          TEXT NOT NULL,
  conditions         TEXT NOT NULL DEFAULT '',
  boundaries         TEXT NOT NULL DEFAULT '',
  confirmation_state TEXT NOT NULL DEFAULT 'automatic' CHECK (confirmation_state IN ('automatic', 'user_edited')),
  recorded_at        TEXT NOT NULL,
  revision           TEXT,
  UNIQUE (id, scope_key)
) STRICT;
CREATE INDEX experiences_by_scope ON experiences (scope_key, id);

-- The events an experience was `formed` from and those where it was `applied`, each with a note.
-- One event may do both (two rows).
CREATE TABLE experience_events (
  experience_id   TEXT NOT NULL,
  event_id        TEXT NOT NULL,
  role            TEXT NOT NULL CHECK (role IN ('formed', 'applied')),
  scope_key       TEXT NOT NULL,      -- the experience's scope: the link is part of the experience
  event_scope_key TEXT NOT NULL,      -- the event's own scope, within the experience's
  note            TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (experience_id, event_id, role),
  FOREIGN KEY (experience_id, scope_key) REFERENCES experiences (id, scope_key) ON DELETE CASCADE,
  FOREIGN KEY (event_id, event_scope_key) REFERENCES events (id, scope_key) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;
CREATE INDEX experience_events_by_event ON experience_events (event_id, event_scope_key);

-- Rules that span rows, enforced for every writer.
CREATE TRIGGER stories_parent_bi BEFORE INSERT ON stories
WHEN new.parent_story_id IS NOT NULL
 AND EXISTS (SELECT 1 FROM stories WHERE id = new.parent_story_id AND level <> 'feature') BEGIN
  SELECT RAISE(ABORT, 'a thread''s parent_story_id must name a feature story');
END;
CREATE TRIGGER stories_parent_bu BEFORE UPDATE OF parent_story_id ON stories
WHEN new.parent_story_id IS NOT NULL
 AND EXISTS (SELECT 1 FROM stories WHERE id = new.parent_story_id AND level <> 'feature') BEGIN
  SELECT RAISE(ABORT, 'a thread''s parent_story_id must name a feature story');
END;
CREATE TRIGGER stories_children_bi BEFORE INSERT ON stories
WHEN new.level <> 'feature' AND EXISTS (SELECT 1 FROM stories WHERE parent_story_id = new.id) BEGIN
  SELECT RAISE(ABORT, 'only a feature story can have threads');
END;
CREATE TRIGGER stories_children_bu BEFORE UPDATE OF level ON stories
WHEN new.level <> 'feature' AND EXISTS (SELECT 1 FROM stories WHERE parent_story_id = new.id) BEGIN
  SELECT RAISE(ABORT, 'only a feature story can have threads');
END;
CREATE TRIGGER stories_state_event_bi BEFORE INSERT ON stories
WHEN new.state_event_id IS NOT NULL AND NOT EXISTS (
  SELECT 1 FROM events AS e JOIN scope_within AS w ON w.inner_key = e.scope_key
   WHERE e.id = new.state_event_id AND w.outer_key = new.scope_key) BEGIN
  SELECT RAISE(ABORT, 'stories.state_event_id must name an event whose scope lies within the story''s scope');
END;
CREATE TRIGGER stories_state_event_bu BEFORE UPDATE OF state_event_id, scope_key ON stories
WHEN new.state_event_id IS NOT NULL AND NOT EXISTS (
  SELECT 1 FROM events AS e JOIN scope_within AS w ON w.inner_key = e.scope_key
   WHERE e.id = new.state_event_id AND w.outer_key = new.scope_key) BEGIN
  SELECT RAISE(ABORT, 'stories.state_event_id must name an event whose scope lies within the story''s scope');
END;

CREATE TRIGGER story_events_scope_bi BEFORE INSERT ON story_events
WHEN NOT EXISTS (SELECT 1 FROM scope_within WHERE inner_key = new.event_scope_key AND outer_key = new.scope_key) BEGIN
  SELECT RAISE(ABORT, 'story_events: the event''s scope must lie within the story''s scope');
END;
CREATE TRIGGER story_events_scope_bu BEFORE UPDATE ON story_events
WHEN NOT EXISTS (SELECT 1 FROM scope_within WHERE inner_key = new.event_scope_key AND outer_key = new.scope_key) BEGIN
  SELECT RAISE(ABORT, 'story_events: the event''s scope must lie within the story''s scope');
END;
CREATE TRIGGER story_events_primary_bi BEFORE INSERT ON story_events
WHEN new.is_primary = 1 AND EXISTS (SELECT 1 FROM stories WHERE id = new.story_id AND level = 'cross') BEGIN
  SELECT RAISE(ABORT, 'story_events: a cross-project story is never an event''s primary story');
END;
CREATE TRIGGER story_events_primary_bu BEFORE UPDATE ON story_events
WHEN new.is_primary = 1 AND EXISTS (SELECT 1 FROM stories WHERE id = new.story_id AND level = 'cross') BEGIN
  SELECT RAISE(ABORT, 'story_events: a cross-project story is never an event''s primary story');
END;
CREATE TRIGGER story_events_cross_bu BEFORE UPDATE OF level ON stories
WHEN new.level = 'cross' AND EXISTS (SELECT 1 FROM story_events WHERE story_id = new.id AND is_primary = 1) BEGIN
  SELECT RAISE(ABORT, 'story_events: a cross-project story is never an event''s primary story');
END;

CREATE TRIGGER experience_events_scope_bi BEFORE INSERT ON experience_events
WHEN NOT EXISTS (SELECT 1 FROM scope_within WHERE inner_key = new.event_scope_key AND outer_key = new.scope_key) BEGIN
  SELECT RAISE(ABORT, 'experience_events: the event''s scope must lie within the experience''s scope');
END;
CREATE TRIGGER experience_events_scope_bu BEFORE UPDATE ON experience_events
WHEN NOT EXISTS (SELECT 1 FROM scope_within WHERE inner_key = new.event_scope_key AND outer_key = new.scope_key) BEGIN
  SELECT RAISE(ABORT, 'experience_events: the event''s scope must lie within the experience''s scope');
END;

-- Data revisions, as for every other table: a write bumps the scope(s) it touches and the graph.
CREATE TRIGGER stories_revision_ai AFTER INSERT ON stories BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER stories_revision_ad AFTER DELETE ON stories BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER stories_revision_au AFTER UPDATE ON stories BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER story_events_revision_ai AFTER INSERT ON story_events BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER story_events_revision_ad AFTER DELETE ON story_events BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER story_events_revision_au AFTER UPDATE ON story_events BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER experiences_revision_ai AFTER INSERT ON experiences BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER experiences_revision_ad AFTER DELETE ON experiences BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER experiences_revision_au AFTER UPDATE ON experiences BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER experience_events_revision_ai AFTER INSERT ON experience_events BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER experience_events_revision_ad AFTER DELETE ON experience_events BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER experience_events_revision_au AFTER UPDATE ON experience_events BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;

-- A story or experience shows the events it lists, which may live in a narrower scope (a cross
-- story's events live in their projects' scopes). A change to such an event, its entity links or its
-- evidence changes what the wider scope reads, so it bumps that scope too.
-- The scopes of the stories and experiences that list an event; each branch is an index lookup by
-- event id (story_events_by_event, experience_events_by_event, stories_by_state_event), so these
-- triggers stay cheap however many links there are, and do nothing for an event nothing lists.
CREATE VIEW event_owner_scopes (event_id, scope_key) AS
SELECT event_id, scope_key FROM story_events
UNION ALL SELECT event_id, scope_key FROM experience_events
UNION ALL SELECT state_event_id, scope_key FROM stories WHERE state_event_id IS NOT NULL;
CREATE TRIGGER events_owner_revision_au AFTER UPDATE ON events
WHEN EXISTS (SELECT 1 FROM event_owner_scopes WHERE event_id IN (old.id, new.id)) BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
   WHERE scope_key IN (SELECT scope_key FROM event_owner_scopes WHERE event_id IN (old.id, new.id))
     AND scope_key NOT IN (old.scope_key, new.scope_key);
END;
CREATE TRIGGER events_owner_revision_ad AFTER DELETE ON events
WHEN EXISTS (SELECT 1 FROM event_owner_scopes WHERE event_id IN (old.id)) BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
   WHERE scope_key IN (SELECT scope_key FROM event_owner_scopes WHERE event_id IN (old.id))
     AND scope_key NOT IN (old.scope_key);
END;
CREATE TRIGGER event_entities_owner_revision_ai AFTER INSERT ON event_entities
WHEN EXISTS (SELECT 1 FROM event_owner_scopes WHERE event_id IN (new.event_id)) BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
   WHERE scope_key IN (SELECT scope_key FROM event_owner_scopes WHERE event_id IN (new.event_id))
     AND scope_key NOT IN (new.scope_key);
END;
CREATE TRIGGER event_entities_owner_revision_ad AFTER DELETE ON event_entities
WHEN EXISTS (SELECT 1 FROM event_owner_scopes WHERE event_id IN (old.event_id)) BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
   WHERE scope_key IN (SELECT scope_key FROM event_owner_scopes WHERE event_id IN (old.event_id))
     AND scope_key NOT IN (old.scope_key);
END;
CREATE TRIGGER event_entities_owner_revision_au AFTER UPDATE ON event_entities
WHEN EXISTS (SELECT 1 FROM event_owner_scopes WHERE event_id IN (old.event_id, new.event_id)) BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
   WHERE scope_key IN (SELECT scope_key FROM event_owner_scopes WHERE event_id IN (old.event_id, new.event_id))
     AND scope_key NOT IN (old.scope_key, new.scope_key);
END;
CREATE TRIGGER object_sources_owner_revision_ai AFTER INSERT ON object_sources
WHEN new.object_type = 'event' AND EXISTS (SELECT 1 FROM event_owner_scopes WHERE event_id IN (new.object_id)) BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
   WHERE scope_key IN (SELECT scope_key FROM event_owner_scopes WHERE event_id IN (new.object_id))
     AND scope_key NOT IN (new.scope_key);
END;
CREATE TRIGGER object_sources_owner_revision_ad AFTER DELETE ON object_sources
WHEN old.object_type = 'event' AND EXISTS (SELECT 1 FROM event_owner_scopes WHERE event_id IN (old.object_id)) BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
   WHERE scope_key IN (SELECT scope_key FROM event_owner_scopes WHERE event_id IN (old.object_id))
     AND scope_key NOT IN (old.scope_key);
END;
CREATE TRIGGER object_sources_owner_revision_au AFTER UPDATE ON object_sources
WHEN (old.object_type = 'event' OR new.object_type = 'event') AND EXISTS (SELECT 1 FROM event_owner_scopes WHERE event_id IN (old.object_id, new.object_id)) BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
   WHERE scope_key IN (SELECT scope_key FROM event_owner_scopes WHERE event_id IN (old.object_id, new.object_id))
     AND scope_key NOT IN (old.scope_key, new.scope_key);
END;

-- Search: stories and experiences are items too (migrations/0003). Their fields join search_fields
-- (name and statement weigh 3; description, conditions, boundaries and link notes 1); a story's time is
-- its recorded span, an experience's its first formation (the earliest time of the events that formed
-- it). An experience with no forming event is not searchable. The two views are recreated with the
-- new branches; everything else of the index is unchanged.
DROP VIEW search_item_rows;
DROP VIEW search_fields;
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

CREATE TRIGGER stories_search_ai AFTER INSERT ON stories BEGIN
  INSERT INTO search_refresh VALUES ('story', new.id, '');
END;
CREATE TRIGGER stories_search_ad AFTER DELETE ON stories BEGIN
  INSERT INTO search_refresh VALUES ('story', old.id, '');
END;
CREATE TRIGGER stories_search_au AFTER UPDATE ON stories BEGIN
  INSERT INTO search_refresh SELECT 'story', old.id, '' UNION SELECT 'story', new.id, '';
END;
CREATE TRIGGER experiences_search_ai AFTER INSERT ON experiences BEGIN
  INSERT INTO search_refresh VALUES ('experience', new.id, '');
END;
CREATE TRIGGER experiences_search_ad AFTER DELETE ON experiences BEGIN
  INSERT INTO search_refresh VALUES ('experience', old.id, '');
END;
CREATE TRIGGER experiences_search_au AFTER UPDATE ON experiences BEGIN
  INSERT INTO search_refresh SELECT 'experience', old.id, '' UNION SELECT 'experience', new.id, '';
END;
CREATE TRIGGER experience_events_search_ai AFTER INSERT ON experience_events BEGIN
  INSERT INTO search_refresh VALUES ('experience', new.experience_id, '');
END;
CREATE TRIGGER experience_events_search_ad AFTER DELETE ON experience_events BEGIN
  INSERT INTO search_refresh VALUES ('experience', old.experience_id, '');
END;
CREATE TRIGGER experience_events_search_au AFTER UPDATE ON experience_events BEGIN
  INSERT INTO search_refresh
  SELECT 'experience', old.experience_id, '' UNION SELECT 'experience', new.experience_id, '';
END;
-- An experience carries the time of the events that formed it.
CREATE TRIGGER events_experience_search_au AFTER UPDATE OF event_time_start ON events BEGIN
  INSERT INTO search_refresh
  SELECT DISTINCT 'experience', experience_id, '' FROM experience_events
   WHERE event_id IN (old.id, new.id) AND role = 'formed';
END;

PRAGMA user_version = 5;
