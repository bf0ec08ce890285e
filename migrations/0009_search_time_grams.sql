-- Schema version 9: the month of each search item's times in the text index, for time-filtered searches.
--
-- A search with a time range used to walk every match of its words in rank order and look up each one's times
-- (migration 0007): a one-month filter on a common word cost as much as the newer matches it had to skip, and an
-- exact total read every match (at 1,000,000 objects: 50-100 ms warm, 0.3 s cold). Now each item's FTS document
-- has a fifth column, `time_grams`, holding one token per month its times fall in, and a search ANDs the months
-- of its range into the text expression: the index itself skips everything outside them, and the exact time
-- test (unchanged) only trims the first and last month.
--
-- A token is U+0003, one character standing for (basis, month), U+0003: as a trigram it is an exact phrase of
-- its own, and no query text can match it (queries never hold U+0003). The character is U+F0000 + basis * 4096
-- + month, in Supplementary Private Use Area-A, where basis is 0 event time, 1 review time, 2 record time and
-- month counts from 1970-01 (0) to 2269-12 (3599). Per basis:
--   event time      every month from the start's to the end's; an interval of more than 24 months gets the
--                   basis's LONG token (month 4095) instead;
--   review, record  the month of the instant;
--   any basis       a time outside 1970-2269, or one not written 'YYYY-MM-...' with a month 01-12 (a raw SQL
--                   writer's), gets the basis's OUTSIDE token (month 4094). No token: the time is unknown.
-- A search of a range of at most 120 months asks for those months plus LONG and OUTSIDE
-- (server/reader/search_query.py), so no item the exact test keeps is ever left out: for times of the
-- 'YYYY-MM-' form, string order (what the exact test compares) and month order agree. Wider ranges skip the
-- tokens: an OR of that many months costs more than it saves.
--
-- The tokens are computed, not stored: the FTS table's external content becomes the view search_index_rows,
-- search_items plus the tokens of its four times. The FTS index is rebuilt (about 5 s per 100,000 objects).

DROP TABLE search_terms;
DROP TABLE search_fts;
DROP TRIGGER search_apply_now;

-- The months after an interval's first one that can get a token of their own (an interval spans at most 24).
CREATE TABLE search_month_steps (k INTEGER PRIMARY KEY) STRICT;
INSERT INTO search_month_steps (k) VALUES
  (0), (1), (2), (3), (4), (5), (6), (7), (8), (9), (10), (11),
  (12), (13), (14), (15), (16), (17), (18), (19), (20), (21), (22), (23);

-- The tokens are written out per basis (no shared subquery): this runs once per item an import writes.
CREATE VIEW search_index_rows (item_id, hi, lo, hi_grams, lo_grams, time_grams) AS
SELECT i.item_id, i.hi, i.lo, i.hi_grams, i.lo_grams,
       CASE WHEN i.event_time_start IS NULL OR i.event_time_end IS NULL THEN ''
            WHEN NOT (i.event_time_start GLOB '[0-9][0-9][0-9][0-9]-[01][0-9]-*' AND substr(i.event_time_start, 6, 2) BETWEEN '01' AND '12'
                      AND i.event_time_end GLOB '[0-9][0-9][0-9][0-9]-[01][0-9]-*' AND substr(i.event_time_end, 6, 2) BETWEEN '01' AND '12') THEN char(3, 987134, 3)
            -- Most items: an instant, or an interval within one month.
            WHEN substr(i.event_time_start, 1, 7) = substr(i.event_time_end, 1, 7) THEN
              CASE WHEN (CAST(substr(i.event_time_start, 1, 4) AS INTEGER) - 1970) * 12 + CAST(substr(i.event_time_start, 6, 2) AS INTEGER) - 1 BETWEEN 0 AND 3599
                     THEN char(3, 983040 + (CAST(substr(i.event_time_start, 1, 4) AS INTEGER) - 1970) * 12 + CAST(substr(i.event_time_start, 6, 2) AS INTEGER) - 1, 3)
                   ELSE char(3, 987134, 3)
              END
            ELSE (SELECT CASE WHEN high - low >= 24 THEN char(3, 987135, 3)
                              WHEN low < 0 OR high > 3599 THEN char(3, 987134, 3)
                              ELSE (SELECT group_concat(char(3, 983040 + low + k, 3), '')
                                      FROM search_month_steps WHERE k <= high - low)
                         END
                    FROM (SELECT min(a, b) AS low, max(a, b) AS high
                            FROM (SELECT (CAST(substr(i.event_time_start, 1, 4) AS INTEGER) - 1970) * 12 + CAST(substr(i.event_time_start, 6, 2) AS INTEGER) - 1 AS a,
                                         (CAST(substr(i.event_time_end, 1, 4) AS INTEGER) - 1970) * 12 + CAST(substr(i.event_time_end, 6, 2) AS INTEGER) - 1 AS b)))
       END
       || CASE WHEN i.review_generated_at IS NULL THEN ''
              WHEN i.review_generated_at GLOB '[0-9][0-9][0-9][0-9]-[01][0-9]-*' AND substr(i.review_generated_at, 6, 2) BETWEEN '01' AND '12'
                   AND (CAST(substr(i.review_generated_at, 1, 4) AS INTEGER) - 1970) * 12 + CAST(substr(i.review_generated_at, 6, 2) AS INTEGER) - 1 BETWEEN 0 AND 3599
                THEN char(3, 987136 + (CAST(substr(i.review_generated_at, 1, 4) AS INTEGER) - 1970) * 12 + CAST(substr(i.review_generated_at, 6, 2) AS INTEGER) - 1, 3)
              ELSE char(3, 991230, 3)
         END
       || CASE WHEN i.recorded_at IS NULL THEN ''
              WHEN i.recorded_at GLOB '[0-9][0-9][0-9][0-9]-[01][0-9]-*' AND substr(i.recorded_at, 6, 2) BETWEEN '01' AND '12'
                   AND (CAST(substr(i.recorded_at, 1, 4) AS INTEGER) - 1970) * 12 + CAST(substr(i.recorded_at, 6, 2) AS INTEGER) - 1 BETWEEN 0 AND 3599
                THEN char(3, 991232 + (CAST(substr(i.recorded_at, 1, 4) AS INTEGER) - 1970) * 12 + CAST(substr(i.recorded_at, 6, 2) AS INTEGER) - 1, 3)
              ELSE char(3, 995326, 3)
         END
  FROM search_items AS i;

CREATE VIRTUAL TABLE search_fts USING fts5 (
  hi, lo, hi_grams, lo_grams, time_grams,
  content = 'search_index_rows', content_rowid = 'item_id', tokenize = 'trigram case_sensitive 0'
);
CREATE VIRTUAL TABLE search_terms USING fts5vocab (search_fts, 'row');  -- distinct trigrams, for other short needles

-- As in migration 0003, except that the FTS entries are read from search_index_rows (with their month tokens).
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
  -- Only the keys are sorted; the rows are then read by their stage number.
  INSERT INTO search_items (item_id, object_type, object_id, result_key, scope_key, event_time_start, event_time_end,
                            review_generated_at, recorded_at, hi, lo, hi_fields, lo_fields, hi_grams, lo_grams)
  SELECT n.item_id, s.object_type, s.object_id, s.result_key, s.scope_key, s.event_time_start, s.event_time_end,
         s.review_generated_at, s.recorded_at, s.hi, s.lo, s.hi_fields, s.lo_fields, g.hi_grams, g.lo_grams
    FROM (SELECT s.seq, (s.prefix << 42) | (s.code << 38)
                   | (c.next_seq + row_number() OVER (PARTITION BY s.scope_key ORDER BY s.recorded_at, s.seq) - 1)
                   AS item_id
            FROM search_stage AS s JOIN search_scopes AS c ON c.scope_key = s.scope_key
           WHERE NOT EXISTS (SELECT 1 FROM search_items AS i
                              WHERE i.object_type = s.object_type AND i.object_id = s.object_id
                                AND i.result_key = s.result_key)) AS n
    JOIN search_stage AS s ON s.seq = n.seq
    LEFT JOIN search_grams AS g ON g.seq = s.seq;
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
  -- Into the FTS index in rowid order: FTS5 keeps its pending entries in memory only while rowids grow.
  INSERT INTO search_fts (rowid, hi, lo, hi_grams, lo_grams, time_grams)
  SELECT v.item_id, v.hi, v.lo, v.hi_grams, v.lo_grams, v.time_grams
    FROM search_index_rows AS v
   WHERE v.item_id IN (SELECT i.item_id FROM search_stage AS s
                         JOIN search_items AS i
                           ON i.object_type = s.object_type AND i.object_id = s.object_id AND i.result_key = s.result_key);
  DELETE FROM search_grams;
  DELETE FROM search_stage;
  DELETE FROM search_dirty;
END;

INSERT INTO search_fts (search_fts) VALUES ('rebuild');

PRAGMA user_version = 9;
