-- Schema version 12: a bulk writer writes the text index's new entries itself, with texts it width-folded.
--
-- The view search_index_rows (migration 0011) folds full-width ASCII and U+3000 with chains of replace(), about
-- 25 microseconds per item whose texts hold such a character: on a corpus where most texts do (Chinese text with
-- ，and ：) that was 30 % more import CPU. A bulk load (search mode 'flush') already computes the CJK grams of the
-- staged rows in Python (server/store/search_index.py); now the apply step leaves the new FTS entries to it too,
-- and it folds those texts in Python (one str.replace per distinct wide character), the same fold. The view stays
-- the index's content, so an integrity check, a 'delete' and every other writer (the sqlite3 shell included) go
-- through its SQL fold, and the index holds the same entries either way. Nothing is rebuilt.

DROP TRIGGER search_apply_now;

-- As in migration 0010, but in mode 'flush' the last two steps are the bulk writer's.
CREATE TRIGGER search_apply_now INSTEAD OF INSERT ON search_apply BEGIN
  -- Out of the FTS index go the old entries (an item without grams was never put in).
  INSERT INTO search_fts (search_fts, rowid, hi, lo, hi_grams, lo_grams, time_grams)
  SELECT 'delete', v.item_id, v.hi, v.lo, v.hi_grams, v.lo_grams, v.time_grams
    FROM search_dirty AS d  -- CROSS JOIN here and below: from the dirty items, never a scan of the index
    CROSS JOIN search_items AS i ON i.object_type = d.object_type AND i.object_id = d.object_id AND i.result_key = d.result_key
    CROSS JOIN search_index_rows AS v ON v.item_id = i.item_id
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
  -- The staged rows are sorted whole: reading them back by stage number after sorting only their keys
  -- reads a large stage at random (at 1,000,000 objects it cost 3 s more).
  INSERT INTO search_items (item_id, object_type, object_id, result_key, scope_key, event_time_start, event_time_end,
                            review_generated_at, recorded_at, hi, lo, hi_fields, lo_fields, hi_grams, lo_grams)
  SELECT (s.prefix << 42) | (s.code << 38)
           | (c.next_seq + row_number() OVER (PARTITION BY s.scope_key ORDER BY s.recorded_at, s.seq) - 1),
         s.object_type, s.object_id, s.result_key, s.scope_key, s.event_time_start, s.event_time_end,
         s.review_generated_at, s.recorded_at, s.hi, s.lo, s.hi_fields, s.lo_fields, g.hi_grams, g.lo_grams
    FROM search_stage AS s
    JOIN search_scopes AS c ON c.scope_key = s.scope_key
    LEFT JOIN search_grams AS g ON g.seq = s.seq
   WHERE NOT EXISTS (SELECT 1 FROM search_items AS i
                      WHERE i.object_type = s.object_type AND i.object_id = s.object_id AND i.result_key = s.result_key);
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
  -- The staged rows are written; their pages go back to the free list now, so that the FTS index written
  -- next reuses them instead of growing the file (a bulk load's staged rows are a fifth of the database).
  DELETE FROM search_grams;
  DELETE FROM search_stage;
  -- Into the FTS index in rowid order: FTS5 keeps its pending entries in memory only while rowids grow.
  -- The dirty items still in search_items are the staged ones (an item without a staged row was deleted).
  -- A bulk writer (mode 'flush') writes these entries itself, with texts it width-folded faster than the
  -- view's replace() chains do (server/store/search_index.py), then empties search_dirty.
  INSERT INTO search_fts (rowid, hi, lo, hi_grams, lo_grams, time_grams)
  SELECT v.item_id, v.hi, v.lo, v.hi_grams, v.lo_grams, v.time_grams
    FROM search_index_rows AS v
   WHERE v.item_id IN (SELECT i.item_id FROM search_dirty AS d
                         JOIN search_items AS i
                           ON i.object_type = d.object_type AND i.object_id = d.object_id AND i.result_key = d.result_key
                        WHERE (SELECT mode FROM search_state) <> 'flush');
  DELETE FROM search_dirty WHERE (SELECT mode FROM search_state) <> 'flush';
END;

PRAGMA user_version = 12;
