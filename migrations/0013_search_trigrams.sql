-- Schema version 13: the distinct trigrams of the search texts, for one- and two-character needles.
--
-- A one- or two-character needle that is not all CJK (`AI`, `Go`, `C`, `x8`) is matched through the trigrams of the
-- index that it begins (server/reader/search_query.py). The reader used to list them from the FTS5 vocabulary
-- (search_terms, fts5vocab 'row'), which reads the whole doclist of every term it returns: at 1,000,000 objects
-- 0.2-0.8 s for one character, on the first such search of each data revision. Now every trigram the texts `hi` and
-- `lo` put into the index is also in search_trigrams, a plain B-tree read in microseconds, and the reader keeps
-- those of the prefix that the index still holds (one FTS5 probe per trigram: entries are never removed here, so
-- deletes and updates cost nothing; docs/performance.md).
--
-- Only `hi` and `lo`: a trigram of the grams columns begins with a CJK character or U+0002 and its second character
-- is CJK or U+0002, so no needle matched through this list (not all CJK, no U+0001-U+0003) begins one; the month
-- tokens' trigrams all hold U+0003, which the reader leaves out as before.
--
-- The trigrams are FTS5's own: the texts go through a scratch FTS5 table with the same tokenizer (so the same case
-- folding), whose vocabulary is then copied into search_trigrams, and which is emptied at once ('delete-all'). It is
-- contentless and without positions (it keeps its document sizes: without them a dump cannot read the table). A
-- bulk load writes each 1,024 items' texts as one scratch document, so the scratch vocabulary is short (one document
-- per item cost 0.8 against 0.5 s per 100k; one rowid for all, 5-8 s: FTS5 writes a segment whenever a rowid does
-- not grow). Where two texts meet inside a document the trigrams begin with
-- U+0001 (every text ends with two); no needle holds U+0001, so trigrams beginning with it are never kept.
-- The apply trigger does this for every writer (the sqlite3 shell included), an item per document; a bulk load
-- (search mode 'flush') does it itself with the items it applied, as it writes their FTS entries
-- (server/store/search_index.py).

CREATE TABLE search_trigrams (term TEXT PRIMARY KEY) STRICT, WITHOUT ROWID;
CREATE VIRTUAL TABLE search_trigram_scratch USING fts5 (
  hi, lo, content = '', tokenize = 'trigram case_sensitive 0', detail = none
);
CREATE VIRTUAL TABLE search_trigram_scratch_terms USING fts5vocab (search_trigram_scratch, 'row');

-- The trigrams of the texts indexed now (the view's texts: width-folded, as the index holds them).
INSERT INTO search_trigram_scratch (rowid, hi, lo)
SELECT item_id >> 10, group_concat(hi, ''), group_concat(lo, '') FROM search_index_rows GROUP BY item_id >> 10;
INSERT INTO search_trigrams (term) SELECT term FROM search_trigram_scratch_terms WHERE unicode(term) <> 1;
INSERT INTO search_trigram_scratch (search_trigram_scratch) VALUES ('delete-all');

DROP TRIGGER search_apply_now;

-- As in migration 0012, plus the trigrams of the texts it indexes; and its FTS insert reads the dirty items first
-- (CROSS JOIN, as the other steps do): with a plain JOIN the planner scanned the whole unique index of search_items
-- for every write, 0.1-0.4 s per raw SQL write at 1,000,000 objects.
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
                         CROSS JOIN search_items AS i
                           ON i.object_type = d.object_type AND i.object_id = d.object_id AND i.result_key = d.result_key
                        WHERE (SELECT mode FROM search_state) <> 'flush');
  -- The distinct trigrams of those texts, into search_trigrams (the bulk writer does the same for its items).
  INSERT INTO search_trigram_scratch (rowid, hi, lo)
  SELECT v.item_id, v.hi, v.lo
    FROM search_index_rows AS v
   WHERE v.item_id IN (SELECT i.item_id FROM search_dirty AS d
                         CROSS JOIN search_items AS i
                           ON i.object_type = d.object_type AND i.object_id = d.object_id AND i.result_key = d.result_key
                        WHERE (SELECT mode FROM search_state) <> 'flush');
  -- Not INSERT OR IGNORE: an outer statement's conflict clause overrides it (a foreign key's ON DELETE SET NULL
  -- does), and the trigram already stored would fail the write.
  INSERT INTO search_trigrams (term)
  SELECT s.term FROM search_trigram_scratch_terms AS s
   WHERE unicode(s.term) <> 1 AND NOT EXISTS (SELECT 1 FROM search_trigrams AS t WHERE t.term = s.term);
  INSERT INTO search_trigram_scratch (search_trigram_scratch) VALUES ('delete-all');
  DELETE FROM search_dirty WHERE (SELECT mode FROM search_state) <> 'flush';
END;

PRAGMA user_version = 13;
