"""Bulk maintenance of the search index (migrations/0003): collect during a load, rebuild once at the end.

Outside a bulk load the schema's triggers rebuild every touched item at once, computing the CJK grams
in SQL. After `defer(conn)`, writes only collect the items they touch; `rebuild(conn)` then has the
triggers stage them all in one pass, computes their grams in Python (an order of magnitude faster than
SQL, which has to step through the text one character at a time), has the triggers apply them to
`search_items`, and writes their FTS entries with texts width-folded in Python (migrations/0012: faster
than the view's replace() chains) and their trigrams into `search_trigrams` (migrations/0013). The grams, the
entries and the trigrams are the same either way (tests/test_search_rank.py, tests/test_search_width.py,
tests/test_search_short.py). A rebuild that at least doubles the index leaves it merged into one b-tree (`merge_fts`).
"""

from __future__ import annotations

import operator
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from server.reader.fold import narrow
from server.store.bulk_indexes import built_after, doubles
from server.store.progress import Progress

# The blocks of the search_cjk table: kana, CJK ideographs (extension A, the unified block,
# compatibility ideographs, the supplementary planes), Hangul syllables.
CJK_RUN: Final = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f]+")
UNIGRAM_PAD: Final = "\x02\x02"
BIGRAM_PAD: Final = "\x02"
TICK_INSTRUCTIONS: Final = 1_000_000
"""SQLite steps between progress ticks during the rebuild's long statements (a few ms each)."""
BATCH: Final = 50_000
"""Stage numbers whose grams are computed per statement (progress moves between statements)."""

SET_MODE: Final = "UPDATE search_state SET mode = :mode"
ANY_DIRTY: Final = "SELECT 1 FROM search_dirty LIMIT 1"
FLUSH: Final = "INSERT INTO search_refresh (object_type) VALUES (NULL)"
STAGED_RANGE: Final = "SELECT min(seq), max(seq), count(*) FROM search_stage"
GRAMS_FUNCTION: Final = "bulk_grams"
ADD_GRAMS: Final = f"""
INSERT INTO search_grams (seq, hi_grams, lo_grams)
SELECT seq, {GRAMS_FUNCTION}(hi), {GRAMS_FUNCTION}(lo) FROM search_stage WHERE seq >= :low AND seq < :high"""
FOLD_FUNCTION: Final = "bulk_fold"
WIDE_BYTES: Final = (
    "instr(CAST({0} AS BLOB), x'EFBC') OR instr(CAST({0} AS BLOB), x'EFBD') OR instr(CAST({0} AS BLOB), x'E38080')"
)
"""Whether a text may hold a wide character: the byte search of the view search_index_rows (migrations/0011)."""
# The apply trigger's last step (migrations/0012), with the texts folded in Python where they may hold a wide
# character (where they cannot, the view's fold leaves them as they are).
INSERT_FTS: Final = f"""
INSERT INTO search_fts (rowid, hi, lo, hi_grams, lo_grams, time_grams)
SELECT v.item_id,
       CASE WHEN {WIDE_BYTES.format("i.hi")} THEN {FOLD_FUNCTION}(i.hi) ELSE i.hi END,
       CASE WHEN {WIDE_BYTES.format("i.lo")} THEN {FOLD_FUNCTION}(i.lo) ELSE i.lo END,
       v.hi_grams, v.lo_grams, v.time_grams
  FROM search_index_rows AS v
 CROSS JOIN search_items AS i ON i.item_id = v.item_id
 WHERE v.item_id IN (SELECT i.item_id FROM search_dirty AS d CROSS JOIN search_items AS i
                         ON i.object_type = d.object_type AND i.object_id = d.object_id
                        AND i.result_key = d.result_key)"""
# The trigrams of the applied items' texts (migrations/0013), 1,024 items to a scratch document, read unfolded: FTS5
# folds case as it tokenizes, and the width fold maps one character to one (and commutes with FTS5's case folding),
# so it is applied to the few distinct trigrams instead of every text.
SCRATCH_TEXTS: Final = """
INSERT INTO search_trigram_scratch (rowid, hi, lo)
SELECT i.item_id >> 10, group_concat(i.hi, ''), group_concat(i.lo, '')
  FROM search_items AS i
 WHERE i.item_id IN (SELECT i.item_id FROM search_dirty AS d CROSS JOIN search_items AS i
                         ON i.object_type = d.object_type AND i.object_id = d.object_id
                        AND i.result_key = d.result_key)
 GROUP BY i.item_id >> 10"""
# As the apply trigger adds them (migrations/0013); two trigrams may fold to one.
ADD_TRIGRAMS: Final = f"""
INSERT INTO search_trigrams (term)
SELECT DISTINCT {FOLD_FUNCTION}(s.term) FROM search_trigram_scratch_terms AS s
 WHERE unicode(s.term) <> 1
   AND NOT EXISTS (SELECT 1 FROM search_trigrams AS t WHERE t.term = {FOLD_FUNCTION}(s.term))"""
CLEAR_SCRATCH: Final = "INSERT INTO search_trigram_scratch (search_trigram_scratch) VALUES ('delete-all')"
CLEAN: Final = "DELETE FROM search_dirty"
APPLY: Final = "INSERT INTO search_apply VALUES (NULL)"
FTS_CONFIG: Final = "INSERT INTO search_fts (search_fts, rank) VALUES (?, ?)"
FTS_HASH_BYTES: Final = 1_048_576
"""FTS5's default: pending index entries kept in memory before they are written as a segment."""
REBUILD_FTS_HASH_BYTES: Final = 64 * 1_048_576
"""During a rebuild: fewer, larger segments, so less merging (it halves the FTS insert time)."""
FTS_AUTOMERGE: Final = 4
"""FTS5's default: a level's b-trees are merged into one once it holds this many."""
FTS_MERGE: Final = "INSERT INTO search_fts (search_fts, rank) VALUES ('merge', ?)"
# FTS5 lists every b-tree (segment) of an index in its %_idx table, by segment id.
FTS_B_TREES: Final = "SELECT count(DISTINCT segid) FROM search_fts_idx"
MERGE_PAGES: Final = 2_000
"""FTS5 pages (4,050 bytes) one step of the final merge writes (a negative 'merge' merges b-trees of every level, as
'optimize' does, a bounded amount at a time): 0.1-0.4 s per step at 1M objects, so the progress line moves."""
# Month tokens of an item's times (migrations/0009): U+0003, the character for (basis, month), U+0003.
TIME_GRAM_BASE: Final = 0xF0000
TIME_BASES: Final = ("event_time", "review_generated_at", "recorded_at")
"""The bases in the order of their blocks of 4,096 characters."""
MONTHS: Final = 3600
"""Months with a token of their own: 1970-01 (0) to 2269-12 (3599)."""
OUTSIDE_MONTH: Final = 4094
"""The token of a time outside those months, or not written 'YYYY-MM-...' (a raw SQL writer's)."""
LONG_MONTH: Final = 4095
"""The token of an event interval of more than 24 months."""
REBUILD_CACHE_SIZE: Final = -32_768
"""During a rebuild: a 32 MiB page cache (negative: KiB), which also bounds each sort's memory (SQLite
sizes its sorters by the cache): the rebuild's big sorts spill to temporary files instead of growing RSS."""


def grams(text: str) -> str:
    """Every distinct CJK character followed by two U+0002 and every distinct pair of adjacent CJK
    characters followed by one, in code-point order: as FTS5 trigrams each is an exact phrase.

    (A character sorts before the pairs it starts, padded or not, so the unpadded strings are sorted.)
    """
    runs = CJK_RUN.findall(text)
    if not runs:
        return ""
    found: set[str] = set()
    for run in runs:
        found.update(run)
        found.update(map(operator.add, run, run[1:]))
    return "".join([gram + (BIGRAM_PAD if len(gram) == 2 else UNIGRAM_PAD) for gram in sorted(found)])


def month_number(time: str) -> int:
    """Months since 1970-01 of a 'YYYY-MM-...' time (may be outside 0..MONTHS-1)."""
    return (int(time[:4]) - 1970) * 12 + int(time[5:7]) - 1


def time_gram(basis: str, month: int) -> str:
    """The token of `month` (or OUTSIDE_MONTH, LONG_MONTH) on `basis`, as migrations/0009 writes it."""
    return "\x03" + chr(TIME_GRAM_BASE + TIME_BASES.index(basis) * 4096 + month) + "\x03"


@contextmanager
def deferred_index(conn: sqlite3.Connection) -> Iterator[None]:
    """For a bulk writer inside an open write transaction: collect touched items, rebuild them once on a
    normal exit. On an exception nothing is rebuilt; the caller's rollback also restores the mode."""
    defer(conn)
    yield
    rebuild(conn)


def defer(conn: sqlite3.Connection) -> None:
    """From now on writes only collect the items they touch (until `rebuild`)."""
    conn.execute(SET_MODE, {"mode": "deferred"})


def rebuild(conn: sqlite3.Connection, progress: Progress | None = None) -> None:
    """Rebuild every collected item (best inside one transaction), then rebuild items at once again.

    The schema stages the items' rows (mode 'flush'), this computes their grams, the schema then applies
    the rows with those grams to `search_items` (`search_apply`), and this writes their FTS entries and
    trigrams. Progress:
    the items as their grams are computed ("indexing"), then the time the index writes take.
    """
    progress = progress or Progress.silent()
    progress.phase("indexing", "items")
    if conn.execute(ANY_DIRTY).fetchone() is None:  # nothing was written: leave the index untouched
        conn.execute(SET_MODE, {"mode": "immediate"})
        progress.finish()
        return

    def tick() -> int:
        progress.tick()
        return 0  # go on

    conn.set_progress_handler(tick, TICK_INSTRUCTIONS)
    try:
        register_functions(conn)
        with rebuild_settings(conn):
            conn.execute(SET_MODE, {"mode": "flush"})
            conn.execute(FLUSH)
            staged = add_grams(conn, progress)
            progress.phase("writing the index", "")
            bulk = doubles(conn, "search_items", staged)
            with built_after(conn, "search_items", staged):
                conn.execute(APPLY)
                insert_fts(conn, bulk=bulk)
                add_trigrams(conn)
                conn.execute(CLEAN)
            if bulk:
                merge_fts(conn, progress)
            conn.execute(SET_MODE, {"mode": "immediate"})
    finally:
        conn.set_progress_handler(None, 0)
    progress.finish()


@contextmanager
def rebuild_settings(conn: sqlite3.Connection) -> Iterator[None]:
    """A smaller page cache and a larger FTS hash while a rebuild runs; the usual ones after it."""
    (cache_size,) = conn.execute("PRAGMA main.cache_size").fetchone()
    conn.execute(f"PRAGMA main.cache_size = {REBUILD_CACHE_SIZE}")
    conn.execute(FTS_CONFIG, ("hashsize", REBUILD_FTS_HASH_BYTES))
    yield
    conn.execute(FTS_CONFIG, ("hashsize", FTS_HASH_BYTES))
    conn.execute(f"PRAGMA main.cache_size = {int(cache_size)}")


def register_functions(conn: sqlite3.Connection) -> None:
    """The Python functions the rebuild's statements call. Registered once, before the index is written: SQLite
    refuses to redefine a function while a statement is active, and FTS5 may keep one of its own active after a
    change to its configuration (the automerge of `insert_fts`)."""
    conn.create_function(GRAMS_FUNCTION, 1, grams, deterministic=True)
    conn.create_function(FOLD_FUNCTION, 1, narrow, deterministic=True)


def add_grams(conn: sqlite3.Connection, progress: Progress) -> int:
    """The grams of every staged row, into `search_grams`, a range of stage numbers at a time; returns how many
    rows are staged (after `register_functions`)."""
    low, high, count = conn.execute(STAGED_RANGE).fetchone()
    progress.expect(count)
    done = 0
    for start in range(low, high + 1, BATCH) if count else ():
        done += conn.execute(ADD_GRAMS, {"low": start, "high": start + BATCH}).rowcount
        progress.update(done)
    return int(count)


def insert_fts(conn: sqlite3.Connection, *, bulk: bool = False) -> None:
    """The FTS entries of the applied items, their texts width-folded in Python (migrations/0012). `bulk`: a write
    that at least doubles the index; its entries are written without merging b-trees as they go (automerge 0), for
    `merge_fts` to merge the whole index once at the end (after `register_functions`)."""
    if bulk:
        conn.execute(FTS_CONFIG, ("automerge", 0))
    conn.execute(INSERT_FTS)
    if bulk:
        conn.execute(FTS_CONFIG, ("automerge", FTS_AUTOMERGE))


def merge_fts(conn: sqlite3.Connection, progress: Progress | None = None) -> None:
    """Merge the FTS index's b-trees into one. FTS5 writes an index as several b-trees (segments) and merges them
    only a level at a time, so a bulk load leaves 5-13 of them, and every phrase a search reads is read from each:
    the short reads of a page cost 2-8 times what they cost from one b-tree (docs/performance.md, "The search
    index in one b-tree"). One step at a time, until a step finds nothing left to merge."""
    progress = progress or Progress.silent()
    while True:
        before = conn.total_changes
        conn.execute(FTS_MERGE, (-MERGE_PAGES,))
        progress.tick()
        if conn.total_changes - before < 2:  # FTS5's sign that the step merged nothing
            return


def b_trees(conn: sqlite3.Connection) -> int:
    """How many b-trees the FTS index is in (every phrase a search reads is read from each)."""
    return int(conn.execute(FTS_B_TREES).fetchone()[0])


def add_trigrams(conn: sqlite3.Connection) -> None:
    """The distinct trigrams of the applied items' texts into `search_trigrams` (migrations/0013), after
    `register_functions`."""
    conn.execute(SCRATCH_TEXTS)
    conn.execute(ADD_TRIGRAMS)
    conn.execute(CLEAR_SCRATCH)
