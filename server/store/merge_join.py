"""Child rows handed out parent by parent to a reader that walks the parents in the same key order: a merge
join, so only one parent's rows are in memory at a time however many the query returns."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


class RowsByKey:
    """Rows ordered by a key in their first columns. `of(*key)` hands out that key's rows in query order and
    passes over the rows of keys the reader skipped. Python orders str by code point and SQLite's BINARY
    collation by UTF-8 bytes: the same order."""

    def __init__(self, rows: Iterable[Sequence[Any]]) -> None:
        self._rows = iter(rows)
        self._next = next(self._rows, None)

    def of(self, *key: Any) -> list[Any]:
        found: list[Any] = []
        width = len(key)
        while self._next is not None and (row_key := tuple(self._next[:width])) <= key:
            if row_key == key:
                found.append(self._next)
            self._next = next(self._rows, None)
        return found
