-- Schema version 4: every stored source version carries the revision of its own text.
--
-- read_source pages a version's text by code points and binds its cursor to the source's state. A writer
-- that rewrites a stored version's chunks in place (an edit, a redaction, a delete-and-reinsert of the
-- version) used to leave that state unchanged, so later pages could mix the old and the new text. Now any
-- change to a version's chunks gives the version a new text_revision, taken from a counter that only grows
-- (so a version deleted and re-created under the same name never gets an old value back), and the cursor
-- is bound to it: the next page is stale_cursor instead of a mix.

ALTER TABLE graph_state ADD COLUMN source_text_revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE source_versions ADD COLUMN text_revision INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER source_chunks_text_revision_ins AFTER INSERT ON source_chunks BEGIN
  UPDATE graph_state SET source_text_revision = source_text_revision + 1 WHERE id = 1;
  UPDATE source_versions SET text_revision = (SELECT source_text_revision FROM graph_state WHERE id = 1)
  WHERE source_id = new.source_id AND version = new.version;
END;
CREATE TRIGGER source_chunks_text_revision_del AFTER DELETE ON source_chunks BEGIN
  UPDATE graph_state SET source_text_revision = source_text_revision + 1 WHERE id = 1;
  UPDATE source_versions SET text_revision = (SELECT source_text_revision FROM graph_state WHERE id = 1)
  WHERE source_id = old.source_id AND version = old.version;
END;
CREATE TRIGGER source_chunks_text_revision_upd AFTER UPDATE ON source_chunks BEGIN
  UPDATE graph_state SET source_text_revision = source_text_revision + 1 WHERE id = 1;
  UPDATE source_versions SET text_revision = (SELECT source_text_revision FROM graph_state WHERE id = 1)
  WHERE (source_id = old.source_id AND version = old.version) OR (source_id = new.source_id AND version = new.version);
END;

-- Existing versions keep 0 until their text changes; the counter's first value is 1, so no change is missed.

PRAGMA user_version = 4;
