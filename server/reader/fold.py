"""Folding exactly as the search index folds: width, then case.

Width: full-width ASCII (U+FF01–U+FF5E) becomes ASCII (U+0021–U+007E) and the ideographic space U+3000 a
space, as the index's view does in SQL (migrations/0011). Case: as SQLite FTS5's trigram tokenizer
(case-insensitive) folds. Folding maps one code point to one code point, so positions in folded text are
positions in the original. Each character is asked of SQLite once, width-folded (through a private in-memory
FTS5 table; the graph file is never touched), and remembered; after that a fold is one `str.translate`.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from typing import Final

PAD: Final = "\x01\x01"
WIDE: Final[dict[int, int]] = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
"""Full-width ASCII and the ideographic space to their ASCII forms (the same list as migrations/0011)."""


WIDE_CHARACTER: Final = re.compile("[\uff01-\uff5e\u3000]")
NARROW: Final[dict[str, str]] = {chr(wide): chr(half) for wide, half in WIDE.items()}


def narrow(text: str) -> str:
    """The width fold alone (no case fold): Ｒｅｄｉｓ → Redis, ＩＮＣ－４８２１ → INC-4821. `text` itself when it
    holds no wide character."""
    # One str.replace per distinct wide character: a third faster than str.translate (a dict lookup per
    # character) on the search index's texts, which a bulk import folds (server/store/search_index.py).
    for wide in set(WIDE_CHARACTER.findall(text)):
        text = text.replace(wide, NARROW[wide])
    return text


class Folder:
    def __init__(self) -> None:
        self._table: dict[int, str] = {}
        self._known: set[str] = set()
        """The characters in `_table`, as a set of str: a fold checks its text against it in one set operation."""
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.executescript(
            "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram case_sensitive 0');"
            "CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');"
        )

    def fold(self, text: str) -> str:
        if text.isascii():
            # FTS5 folds ASCII as str.lower() does (A-Z to a-z, nothing else): a tenth of the translation's cost.
            return text.lower()
        missing = set(text) - self._known
        if missing:
            self._learn({ord(ch) for ch in missing})
        return text.translate(self._table)

    def _learn(self, code_points: set[int]) -> None:
        # Surrogates and NUL cannot be stored as SQLite text; they fold to themselves.
        asked = sorted(c for c in code_points if c and not 0xD800 <= c <= 0xDFFF)
        learned = {c: chr(c) for c in code_points}
        if asked:
            text = "".join(map(chr, asked)).translate(WIDE)
            with self._lock, self._conn:
                self._conn.execute("DELETE FROM t")
                self._conn.execute("INSERT INTO t (rowid, x) VALUES (1, ?)", (text + PAD,))
                terms = [row[0] for row in self._conn.execute("SELECT term FROM v ORDER BY offset")]
            if len(terms) != len(text):  # never seen; folding would then not be one-to-one
                raise RuntimeError("the FTS5 trigram tokenizer did not fold one code point to one code point")
            learned.update(zip(asked, (term[0] for term in terms), strict=True))
        self._table.update(learned)
        self._known.update(map(chr, learned))
