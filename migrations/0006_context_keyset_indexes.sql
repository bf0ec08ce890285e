-- Schema version 6: indexes that let story_graph_get_context read a page of a large neighbourhood
-- in section order, so a page costs what the page holds (docs/performance.md, "get_context").
--
-- Each index gives one section its order directly, so a keyset query reads only the rows of the page:
-- * a story line's entities by id, and its events by event time then id (undated ones, NULL, by id);
-- * the relations leaving or reaching one object, by relation id. These replace the version-1 indexes
--   on (from_id, from_type) and (to_id, to_type), of which they are extensions: every lookup that used
--   those uses these.
-- No data changes; an existing database is upgraded in place.

CREATE INDEX entities_by_story_line ON entities (story_line_id, id);
CREATE INDEX events_by_story_line_time ON events (story_line_id, event_time_start, id);

CREATE INDEX relations_by_from_ordered ON relations (from_id, from_type, id);
CREATE INDEX relations_by_to_ordered ON relations (to_id, to_type, id);
DROP INDEX relations_by_from;
DROP INDEX relations_by_to;

PRAGMA user_version = 6;
