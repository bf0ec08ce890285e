"""Bulk maintenance of the search index (migrations/0003): collect during a load, rebuild once at the end.

Outside a bulk load the schema's triggers rebuild every touched item at once, computing the CJK grams
in SQL. After `defer(conn)`, writes only collect the items they touch; `rebuild(conn)` then has the
triggers rebuild them all in one pass, and this module computes their grams in Python (an order of
magnitude faster than SQL, which has to step through the text one character at a time) and puts
them into the FTS index. The grams are the same either way (tests/test_search_rank.py checks it).
"""

from __future__ import annotations

import re
import sqlite3
from typing import Final

from server.store.progress import Progress

# The blocks of the search_cjk table: kana, CJK ideographs (extension A, the unified block,
# compatibility ideographs, the supplementary planes), Hangul syllables.
CJK_RUN: Final = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f]+")
UNIGRAM_PAD: Final = "\x02\x02"
BIGRAM_PAD: Final = "\x02"
BATCH: Final = 5_000

SET_MODE: Final = "UPDATE search_state SET mode = :mode"
FLUSH: Final = "INSERT INTO search_refresh (object_type) VALUES (NULL)"
WITHOUT_GRAMS: Final = """
SELECT item_id, hi, lo FROM search_items WHERE hi_grams IS NULL AND item_id > :after ORDER BY item_id LIMIT :limit
"""
COUNT_WITHOUT_GRAMS: Final = "SELECT count(*) FROM search_items WHERE hi_grams IS NULL"
SET_GRAMS: Final = "UPDATE search_items SET hi_grams = ?, lo_grams = ? WHERE item_id = ?"
INDEX_ITEM: Final = "INSERT INTO search_fts (rowid, hi, lo, hi_grams, lo_grams) VALUES (?, ?, ?, ?, ?)"


def grams(text: str) -> str:
    """Every distinct CJK character followed by two U+0002 and every distinct pair of adjacent CJK
    characters followed by one, in code-point order: as FTS5 trigrams each is an exact phrase."""
    found: set[str] = set()
    for run in CJK_RUN.findall(text):
        found.update(ch + UNIGRAM_PAD for ch in run)
        found.update(run[i : i + 2] + BIGRAM_PAD for i in range(len(run) - 1))
    return "".join(sorted(found))


def defer(conn: sqlite3.Connection) -> None:
    """From now on writes only collect the items they touch (until `rebuild`)."""
    conn.execute(SET_MODE, {"mode": "deferred"})


def rebuild(conn: sqlite3.Connection, progress: Progress | None = None) -> None:
    """Rebuild every collected item (best inside one transaction), then rebuild items at once again."""
    progress = progress or Progress.silent()
    progress.phase("indexing", "items")
    conn.execute(SET_MODE, {"mode": "flush"})
    conn.execute(FLUSH)
    progress.expect(conn.execute(COUNT_WITHOUT_GRAMS).fetchone()[0])
    after = done = 0
    while rows := conn.execute(WITHOUT_GRAMS, {"after": after, "limit": BATCH}).fetchall():
        computed = [(item_id, hi, lo, grams(hi), grams(lo)) for item_id, hi, lo in rows]
        conn.executemany(SET_GRAMS, [(hi_g, lo_g, item_id) for item_id, _, _, hi_g, lo_g in computed])
        conn.executemany(INDEX_ITEM, computed)
        after = rows[-1][0]
        done += len(rows)
        progress.update(done)
    conn.execute(SET_MODE, {"mode": "immediate"})
    progress.finish()
