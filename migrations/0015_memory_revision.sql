-- Schema version 15: memory items count in a revision of their own, `memory_revision`, not in `data_revision`.
--
-- Until now every write to a memory item bumped `scopes.data_revision` of every scope that shows it (a Global
-- item: every scope) and `graph_state.data_revision`. Search and read_source never read memory items, yet their
-- cursors were bound to the data revision, so a live writer of memory notes (the upstream app) made every paging
-- agent start over with `stale_cursor`, and every remembered search value be recomputed. Only get_context's
-- `current` mode shows memory items (as background), and it now binds its cursors and its remembered selection to
-- both revisions (server/reader/context_summary.py), so it still refuses a page after a memory write.
--
-- So `data_revision` keeps its meaning for the graph data (results, objects, evidence, sources, projects and scope
-- membership: a project hidden or a scope's membership changed still bumps it), and `memory_revision` counts the
-- writes to memory items each scope shows: a Global item bumps every scope's, a project's item the scopes holding
-- that project, and `graph_state.memory_revision` counts them all. All in triggers, so any writer (the sqlite3
-- shell included) keeps both right. Existing rows start at 0 and keep their data revisions: the upgrade changes
-- no data, so a search or timeline cursor issued before it reads on, while a get_context `current` or read_source
-- cursor of the old form does not match the new one and is refused as stale, never trusted.
--
-- read_source cursors no longer use the scope's data revision at all: they bind the state of the reference and
-- source a page reads (server/reader/source_fields.py), which needs no schema change.

ALTER TABLE scopes ADD COLUMN memory_revision INTEGER NOT NULL DEFAULT 0;       -- bumped by every write to a memory item the scope shows
ALTER TABLE graph_state ADD COLUMN memory_revision INTEGER NOT NULL DEFAULT 0;  -- bumped by every write to a memory item

DROP TRIGGER memory_items_revision_ai;
DROP TRIGGER memory_items_revision_ad;
DROP TRIGGER memory_items_revision_au;

-- A Global memory item is background for every scope; a project's for every scope holding it.
CREATE TRIGGER memory_items_revision_ai AFTER INSERT ON memory_items BEGIN
  UPDATE scopes SET memory_revision = memory_revision + 1
  WHERE new.project_id IS NULL OR scope_key IN (SELECT scope_key FROM scope_projects WHERE project_id = new.project_id);
  UPDATE graph_state SET memory_revision = memory_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER memory_items_revision_ad AFTER DELETE ON memory_items BEGIN
  UPDATE scopes SET memory_revision = memory_revision + 1
  WHERE old.project_id IS NULL OR scope_key IN (SELECT scope_key FROM scope_projects WHERE project_id = old.project_id);
  UPDATE graph_state SET memory_revision = memory_revision + 1 WHERE id = 1;
END;
-- One bump per scope even when the item stays in it (or moves between two projects a scope both holds).
CREATE TRIGGER memory_items_revision_au AFTER UPDATE ON memory_items BEGIN
  UPDATE scopes SET memory_revision = memory_revision + 1
  WHERE old.project_id IS NULL OR new.project_id IS NULL
     OR scope_key IN (SELECT scope_key FROM scope_projects WHERE project_id IN (old.project_id, new.project_id));
  UPDATE graph_state SET memory_revision = memory_revision + 1 WHERE id = 1;
END;

PRAGMA user_version = 15;
