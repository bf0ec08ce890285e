-- Schema version 7: a narrow index of the search items' times, for time-filtered searches.
--
-- A search with a time_range reads each candidate item's times on the chosen basis while it walks the text
-- index (docs/tools.md, "How search ranks"). Read from search_items itself, every candidate costs a lookup
-- in a wide row that also holds the item's texts; from this index, which holds only the item id and its
-- four times, the same walk reads far fewer pages (a one-month filter on a word in 700,000 items of a
-- 1,000,000-object graph: 72 -> 45 ms for the first page). The reader names it (INDEXED BY) where it
-- needs only the times. SQLite maintains it with the table: no trigger changes, no data changes.

CREATE INDEX search_items_times
    ON search_items (item_id, event_time_start, event_time_end, review_generated_at, recorded_at);

PRAGMA user_version = 7;
