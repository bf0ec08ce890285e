-- Schema version 11: search is width-insensitive. The search index folds full-width ASCII (U+FF01-U+FF5E, as
-- Chinese and Japanese input methods type letters, digits and punctuation: Ｒｅｄｉｓ, ２０２６, ＩＮＣ－４８２１) to
-- U+0021-U+007E and the ideographic space U+3000 to U+0020, before its trigram tokenizer folds case; the server
-- folds queries and the texts it checks the same way (server/reader/fold.py). One code point becomes one code
-- point, so match positions in the stored text are unchanged.
--
-- The fold is in the view the FTS index reads its content from (migration 0009), in plain SQL, so that any
-- writer (the sqlite3 shell included) keeps the index right without our functions. SQLite has no translate():
-- each character is one replace(). A chain of 95 nested calls is deeper than SQLite's parser accepts, so the
-- chains are split into layers (CTEs, which SQLite flattens into one expression per column). A layer runs only
-- when the text holds a character of its block, found by a byte search for its UTF-8 lead bytes (U+FF00-U+FF3F
-- are EF BC xx, U+FF40-U+FF7F EF BD xx, U+3000 E3 80 80): a text without wide characters costs three byte
-- searches (docs/performance.md, "Width folding"). Each layer's result is NULL when it did not run, and the
-- text before it is taken instead: every chain runs at most once.
--
-- The stored texts (search_items.hi, lo) are unchanged: excerpts are cut from them. Upgrading re-indexes only
-- the items whose texts hold such a character, or rebuilds the index when they are most of it.

DROP VIEW search_index_rows;

-- As in migration 0009 (the same time tokens), but hi and lo width-folded.
CREATE VIEW search_index_rows (item_id, hi, lo, hi_grams, lo_grams, time_grams) AS
WITH
  -- The texts, and which blocks of wide characters they hold (by their UTF-8 lead bytes, a fast byte search).
  w0 AS (SELECT item_id, hi_grams, lo_grams, event_time_start, event_time_end, review_generated_at, recorded_at,
                hi AS hi0, instr(CAST(hi AS BLOB), x'EFBC') > 0 AS hi_bc, instr(CAST(hi AS BLOB), x'EFBD') > 0 AS hi_bd,
                instr(CAST(hi AS BLOB), x'E38080') > 0 AS hi_sp,
                lo AS lo0, instr(CAST(lo AS BLOB), x'EFBC') > 0 AS lo_bc, instr(CAST(lo AS BLOB), x'EFBD') > 0 AS lo_bd,
                instr(CAST(lo AS BLOB), x'E38080') > 0 AS lo_sp
           FROM search_items),
  -- U+FF01-U+FF3F (NULL when the text holds none of them, then the text as it was).
  w1 AS (SELECT *, CASE WHEN hi_bc THEN replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(hi0, '！', '!'), '＂', '"'), '＃', '#'), '＄', '$'), '％', '%'), '＆', '&'), '＇', ''''), '（', '('), '）', ')'), '＊', '*'), '＋', '+'), '，', ','), '－', '-'), '．', '.'), '／', '/'), '０', '0'), '１', '1'), '２', '2'), '３', '3'), '４', '4'), '５', '5') END AS hi1,
                   CASE WHEN lo_bc THEN replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(lo0, '！', '!'), '＂', '"'), '＃', '#'), '＄', '$'), '％', '%'), '＆', '&'), '＇', ''''), '（', '('), '）', ')'), '＊', '*'), '＋', '+'), '，', ','), '－', '-'), '．', '.'), '／', '/'), '０', '0'), '１', '1'), '２', '2'), '３', '3'), '４', '4'), '５', '5') END AS lo1 FROM w0),
  w2 AS (SELECT *, replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(hi1, '６', '6'), '７', '7'), '８', '8'), '９', '9'), '：', ':'), '；', ';'), '＜', '<'), '＝', '='), '＞', '>'), '？', '?'), '＠', '@'), 'Ａ', 'A'), 'Ｂ', 'B'), 'Ｃ', 'C'), 'Ｄ', 'D'), 'Ｅ', 'E'), 'Ｆ', 'F'), 'Ｇ', 'G'), 'Ｈ', 'H'), 'Ｉ', 'I'), 'Ｊ', 'J') AS hi2,
                   replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(lo1, '６', '6'), '７', '7'), '８', '8'), '９', '9'), '：', ':'), '；', ';'), '＜', '<'), '＝', '='), '＞', '>'), '？', '?'), '＠', '@'), 'Ａ', 'A'), 'Ｂ', 'B'), 'Ｃ', 'C'), 'Ｄ', 'D'), 'Ｅ', 'E'), 'Ｆ', 'F'), 'Ｇ', 'G'), 'Ｈ', 'H'), 'Ｉ', 'I'), 'Ｊ', 'J') AS lo2 FROM w1),
  w3 AS (SELECT *, coalesce(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(hi2, 'Ｋ', 'K'), 'Ｌ', 'L'), 'Ｍ', 'M'), 'Ｎ', 'N'), 'Ｏ', 'O'), 'Ｐ', 'P'), 'Ｑ', 'Q'), 'Ｒ', 'R'), 'Ｓ', 'S'), 'Ｔ', 'T'), 'Ｕ', 'U'), 'Ｖ', 'V'), 'Ｗ', 'W'), 'Ｘ', 'X'), 'Ｙ', 'Y'), 'Ｚ', 'Z'), '［', '['), '＼', '\'), '］', ']'), '＾', '^'), '＿', '_'), hi0) AS hi3,
                   coalesce(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(lo2, 'Ｋ', 'K'), 'Ｌ', 'L'), 'Ｍ', 'M'), 'Ｎ', 'N'), 'Ｏ', 'O'), 'Ｐ', 'P'), 'Ｑ', 'Q'), 'Ｒ', 'R'), 'Ｓ', 'S'), 'Ｔ', 'T'), 'Ｕ', 'U'), 'Ｖ', 'V'), 'Ｗ', 'W'), 'Ｘ', 'X'), 'Ｙ', 'Y'), 'Ｚ', 'Z'), '［', '['), '＼', '\'), '］', ']'), '＾', '^'), '＿', '_'), lo0) AS lo3 FROM w2),
  -- U+FF40-U+FF5E.
  w4 AS (SELECT *, CASE WHEN hi_bd THEN replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(hi3, '｀', '`'), 'ａ', 'a'), 'ｂ', 'b'), 'ｃ', 'c'), 'ｄ', 'd'), 'ｅ', 'e'), 'ｆ', 'f'), 'ｇ', 'g'), 'ｈ', 'h'), 'ｉ', 'i'), 'ｊ', 'j'), 'ｋ', 'k'), 'ｌ', 'l'), 'ｍ', 'm'), 'ｎ', 'n'), 'ｏ', 'o') END AS hi4,
                   CASE WHEN lo_bd THEN replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(lo3, '｀', '`'), 'ａ', 'a'), 'ｂ', 'b'), 'ｃ', 'c'), 'ｄ', 'd'), 'ｅ', 'e'), 'ｆ', 'f'), 'ｇ', 'g'), 'ｈ', 'h'), 'ｉ', 'i'), 'ｊ', 'j'), 'ｋ', 'k'), 'ｌ', 'l'), 'ｍ', 'm'), 'ｎ', 'n'), 'ｏ', 'o') END AS lo4 FROM w3),
  w5 AS (SELECT *, coalesce(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(hi4, 'ｐ', 'p'), 'ｑ', 'q'), 'ｒ', 'r'), 'ｓ', 's'), 'ｔ', 't'), 'ｕ', 'u'), 'ｖ', 'v'), 'ｗ', 'w'), 'ｘ', 'x'), 'ｙ', 'y'), 'ｚ', 'z'), '｛', '{'), '｜', '|'), '｝', '}'), '～', '~'), hi3) AS hi5,
                   coalesce(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(lo4, 'ｐ', 'p'), 'ｑ', 'q'), 'ｒ', 'r'), 'ｓ', 's'), 'ｔ', 't'), 'ｕ', 'u'), 'ｖ', 'v'), 'ｗ', 'w'), 'ｘ', 'x'), 'ｙ', 'y'), 'ｚ', 'z'), '｛', '{'), '｜', '|'), '｝', '}'), '～', '~'), lo3) AS lo5 FROM w4),
  -- U+3000.
  i AS (SELECT item_id, hi_grams, lo_grams, event_time_start, event_time_end, review_generated_at, recorded_at,
               CASE WHEN hi_sp THEN replace(hi5, '　', ' ') ELSE hi5 END AS hi,
               CASE WHEN lo_sp THEN replace(lo5, '　', ' ') ELSE lo5 END AS lo
          FROM w5)
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
  FROM i;

-- The items indexed unfolded (a text with a wide character; an item without grams was never put in).
CREATE TEMP TABLE search_width_items (item_id INTEGER PRIMARY KEY);
INSERT INTO search_width_items (item_id)
SELECT item_id FROM search_items
 WHERE hi_grams IS NOT NULL AND (instr(CAST(hi AS BLOB), x'EFBC') OR instr(CAST(hi AS BLOB), x'EFBD') OR instr(CAST(hi AS BLOB), x'E38080')
                                 OR instr(CAST(lo AS BLOB), x'EFBC') OR instr(CAST(lo AS BLOB), x'EFBD') OR instr(CAST(lo AS BLOB), x'E38080'));

-- When they are most of the index, it is rebuilt: deleting an entry costs about what inserting it does, so beyond
-- half the items a rebuild is cheaper (measured at 100,000 objects, docs/performance.md).
INSERT INTO search_fts (search_fts)
SELECT 'rebuild' WHERE (SELECT count(*) FROM search_width_items) * 2 > (SELECT count(*) FROM search_items);

-- Otherwise only theirs are replaced: out with the entries as they were indexed (the stored texts; the time
-- tokens are computed as before), in with the folded ones, in rowid order.
INSERT INTO search_fts (search_fts, rowid, hi, lo, hi_grams, lo_grams, time_grams)
SELECT 'delete', i.item_id, i.hi, i.lo, i.hi_grams, i.lo_grams, v.time_grams
  FROM search_width_items AS w
 CROSS JOIN search_items AS i ON i.item_id = w.item_id
 CROSS JOIN search_index_rows AS v ON v.item_id = w.item_id
 WHERE (SELECT count(*) FROM search_width_items) * 2 <= (SELECT count(*) FROM search_items);
INSERT INTO search_fts (rowid, hi, lo, hi_grams, lo_grams, time_grams)
SELECT v.item_id, v.hi, v.lo, v.hi_grams, v.lo_grams, v.time_grams
  FROM search_width_items AS w
 CROSS JOIN search_index_rows AS v ON v.item_id = w.item_id
 WHERE (SELECT count(*) FROM search_width_items) * 2 <= (SELECT count(*) FROM search_items)
 ORDER BY w.item_id;

DROP TABLE search_width_items;

PRAGMA user_version = 11;
