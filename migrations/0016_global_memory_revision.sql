-- Schema version 16: Global memory items count in a revision of their own, `graph_state.global_memory_revision`,
-- not in every scope's `memory_revision`.
--
-- Until now (migration 0015) a write to a Global memory item bumped the memory revision of every scope, and
-- get_context's `current` cursors are bound to it: a client whose grant does not read Global (HTTP clients by
-- default) never sees Global memory items, yet its `current` cursors turned `stale_cursor` whenever the user wrote
-- a Global note, so it learnt that and when Global memory changed (a side channel) and had to start over for nothing.
--
-- Now a scope's `memory_revision` counts the writes to the memory items stored in it: a project scope's, those of
-- its projects (a project's item bumps every scope holding that project), the Global scope's, the Global ones.
-- `graph_state.global_memory_revision` counts the writes to Global items (the `global` row of `scopes` need not
-- exist), and `graph_state.memory_revision` still counts them all. get_context binds a `current` cursor, and
-- remembers its selection, at the scope's memory revision, followed by the Global one only for a grant that reads
-- Global (server/reader/scope.py): so a Global write stales only the pages of clients that were shown Global items.
--
-- Upgrading keeps every stored revision: a scope's memory revision only ever grows, from the value it has, so
-- a `current` cursor of a grant that does not read Global, issued before, still reads on while nothing it shows has
-- changed; one of a grant that reads Global now carries a Global part too and is refused as stale, never trusted.
-- The new counter starts at 0. All in triggers, so any writer (the sqlite3 shell included) keeps them right.

ALTER TABLE graph_state ADD COLUMN global_memory_revision INTEGER NOT NULL DEFAULT 0;  -- bumped by every write to a Global memory item

DROP TRIGGER memory_items_revision_ai;
DROP TRIGGER memory_items_revision_ad;
DROP TRIGGER memory_items_revision_au;

-- A Global item (project_id NULL) is stored in the Global scope; a project's in every scope holding that project.
CREATE TRIGGER memory_items_revision_ai AFTER INSERT ON memory_items BEGIN
  UPDATE scopes SET memory_revision = memory_revision + 1
  WHERE scope_key IN (SELECT 'global' WHERE new.project_id IS NULL
                      UNION ALL SELECT scope_key FROM scope_projects WHERE project_id = new.project_id);
  UPDATE graph_state SET memory_revision = memory_revision + 1,
                         global_memory_revision = global_memory_revision + (new.project_id IS NULL)
  WHERE id = 1;
END;
CREATE TRIGGER memory_items_revision_ad AFTER DELETE ON memory_items BEGIN
  UPDATE scopes SET memory_revision = memory_revision + 1
  WHERE scope_key IN (SELECT 'global' WHERE old.project_id IS NULL
                      UNION ALL SELECT scope_key FROM scope_projects WHERE project_id = old.project_id);
  UPDATE graph_state SET memory_revision = memory_revision + 1,
                         global_memory_revision = global_memory_revision + (old.project_id IS NULL)
  WHERE id = 1;
END;
-- Each side's scopes, once each, even when the item stays where it is (or moves between two projects a scope both
-- holds); an item moved between Global and a project bumps both sides.
CREATE TRIGGER memory_items_revision_au AFTER UPDATE ON memory_items BEGIN
  UPDATE scopes SET memory_revision = memory_revision + 1
  WHERE scope_key IN (SELECT 'global' WHERE old.project_id IS NULL OR new.project_id IS NULL
                      UNION ALL SELECT scope_key FROM scope_projects WHERE project_id IN (old.project_id, new.project_id));
  UPDATE graph_state SET memory_revision = memory_revision + 1,
                         global_memory_revision = global_memory_revision + (old.project_id IS NULL OR new.project_id IS NULL)
  WHERE id = 1;
END;

PRAGMA user_version = 16;
