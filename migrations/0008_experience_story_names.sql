-- Schema version 8: an experience shows, for each event it lists, the event's primary story (its id and
-- name). That story may live in a narrower scope than the experience (an experience of two projects lists
-- an event whose primary story belongs to one of them), so renaming the story, or changing which story is
-- an event's primary one, changes what the experience's scope reads: bump that scope too, as migration
-- 0005 does for changes to the listed events themselves. Each lookup is by index (story_events' primary
-- key, story_events_one_primary, experience_events_by_event); no data changes.

CREATE TRIGGER stories_experience_revision_au AFTER UPDATE OF name ON stories
WHEN old.name IS NOT new.name AND EXISTS (
  SELECT 1 FROM story_events AS s JOIN experience_events AS x ON x.event_id = s.event_id
   WHERE s.story_id = new.id AND s.is_primary = 1) BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
   WHERE scope_key IN (SELECT x.scope_key FROM story_events AS s JOIN experience_events AS x ON x.event_id = s.event_id
                        WHERE s.story_id = new.id AND s.is_primary = 1)
     AND scope_key NOT IN (old.scope_key, new.scope_key);
END;

CREATE TRIGGER story_events_experience_revision_ai AFTER INSERT ON story_events
WHEN new.is_primary = 1 AND EXISTS (SELECT 1 FROM experience_events WHERE event_id = new.event_id) BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
   WHERE scope_key IN (SELECT scope_key FROM experience_events WHERE event_id = new.event_id)
     AND scope_key NOT IN (new.scope_key);
END;
CREATE TRIGGER story_events_experience_revision_ad AFTER DELETE ON story_events
WHEN old.is_primary = 1 AND EXISTS (SELECT 1 FROM experience_events WHERE event_id = old.event_id) BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
   WHERE scope_key IN (SELECT scope_key FROM experience_events WHERE event_id = old.event_id)
     AND scope_key NOT IN (old.scope_key);
END;
CREATE TRIGGER story_events_experience_revision_au AFTER UPDATE ON story_events
WHEN (old.is_primary = 1 OR new.is_primary = 1) AND EXISTS (
  SELECT 1 FROM experience_events WHERE event_id IN (old.event_id, new.event_id)) BEGIN
  UPDATE scopes SET data_revision = data_revision + 1
   WHERE scope_key IN (SELECT scope_key FROM experience_events WHERE event_id IN (old.event_id, new.event_id))
     AND scope_key NOT IN (old.scope_key, new.scope_key);
END;

PRAGMA user_version = 8;
