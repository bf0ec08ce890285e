-- Schema version 14: an entity revision's own evidence, and whether it has one stored at all.
--
-- Evidence links are stored per object (object_sources), so an entity revision (one result's snapshot of an
-- entity) had no evidence list of its own: search showed a snapshot with the entity's current evidence (which may
-- be a later review's), get_context with none. A revision now stores its own list in entity_revision_sources, and
-- `sources_stored` says whether a list was stored: 0 (every revision written before this version, or written
-- without a list) means its evidence is unknown, which the tools never show as an empty list; 1 with no rows means
-- stored empty. Keyed and linked as object_sources (a source reference's deletion removes its links); a revision's
-- deletion removes its list.

ALTER TABLE entity_revisions ADD COLUMN sources_stored INTEGER NOT NULL DEFAULT 0 CHECK (sources_stored IN (0, 1));

CREATE TABLE entity_revision_sources (
  entity_id           TEXT NOT NULL,
  result_id           TEXT NOT NULL,
  source_reference_id TEXT NOT NULL REFERENCES source_references (id) ON DELETE CASCADE,
  scope_key           TEXT NOT NULL,
  PRIMARY KEY (entity_id, result_id, source_reference_id),
  FOREIGN KEY (entity_id, result_id) REFERENCES entity_revisions (entity_id, result_id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;
CREATE INDEX entity_revision_sources_by_reference ON entity_revision_sources (source_reference_id);

-- Data revisions, as for object_sources (migrations/0002): a cursor or memo read before a change is stale after it.
CREATE TRIGGER entity_revision_sources_revision_ai AFTER INSERT ON entity_revision_sources BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER entity_revision_sources_revision_ad AFTER DELETE ON entity_revision_sources BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;
CREATE TRIGGER entity_revision_sources_revision_au AFTER UPDATE ON entity_revision_sources BEGIN
  UPDATE scopes SET data_revision = data_revision + 1 WHERE scope_key IN (old.scope_key, new.scope_key);
  UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1;
END;

PRAGMA user_version = 14;
