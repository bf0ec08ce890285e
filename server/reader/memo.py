"""A small, bounded in-process memory for values that change only with the data they were computed from.

Every value belongs to a lineage (a scope, by its key; a scope with the memory items a caller is shown, with_memory;
or GRAPH, the whole graph) at one revision, and the memo holds one revision per lineage: storing a value at another
revision drops every value of the lineage's previous one. A value is therefore never stale (a read at another
revision misses), and a server whose graph is re-imported while it serves holds only what its current revisions
need, not a memo full of revisions no call will read again (docs/performance.md, "A long-running server's memory").

The bound is a total weight: a value weighs 1, and one unit more per WEIGHT_UNIT things it lists (a get_context
selection of a big neighbourhood, a search's whole-query match list, a short needle's trigrams: `weight_of`), so
a few large values cannot crowd out memory, nor many of them grow it past the bound; a value held as bytes (search's
term bit sets) weighs what as many bytes of listed things would (`weight_of_bytes`). Once it is
exceeded, the least recently used values go. Nothing is written anywhere.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

T = TypeVar("T")
DEFAULT_ENTRIES: Final = 1024
WEIGHT_UNIT: Final = 256
"""A value weighs one unit more per this many things it lists (docs/performance.md)."""
GRAPH: Final = ("graph",)
"""The lineage of values computed from the whole graph (their revision is graph_state's data revision). A tuple,
so that it never equals a scope key (a string)."""


def with_memory(scope_key: str, with_global: bool) -> tuple[str, str, bool]:
    """The lineage of a scope's values that include the memory items a caller is shown (get_context's selection),
    at the scope's data revision and that caller's memory revision (ResolvedScope.memory_revision) together. Not the
    scope's own lineage: that one holds one revision at a time, so values at the data revision alone (coverage,
    search) and these would keep dropping each other. One per `with_global` (whether the caller's grant reads Global,
    and so sees the Global items) for the same reason: the two kinds of caller read the memory revision in two
    forms, and a Global memory write must not drop what a caller kept out of Global remembers."""
    return ("memory", scope_key, with_global)


BYTES_PER_THING: Final = 100
"""What one listed thing takes in memory, about (a tuple of an int and a flag in a list): the weight of a value held as
bytes, such as a bit set (weight_of_bytes)."""


def weight_of(listed: int) -> int:
    """The weight of a value that lists `listed` things (objects, matches, terms)."""
    return 1 + listed // WEIGHT_UNIT


def weight_of_bytes(size: int) -> int:
    """The weight of a value of `size` bytes (bit sets: server/reader/search_sets.py)."""
    return weight_of(size // BYTES_PER_THING)


class Memo:
    def __init__(self, entries: int = DEFAULT_ENTRIES) -> None:
        self._capacity = entries
        self._values: OrderedDict[tuple[Hashable, Hashable], tuple[Any, int]] = OrderedDict()
        """(lineage, key) -> (value, weight), least recently used first."""
        self._revisions: dict[Hashable, str] = {}
        """The revision each lineage's values were computed at (a lineage with no value left is not listed)."""
        self._keys: dict[Hashable, set[Hashable]] = {}
        """The keys each lineage holds, to drop them all when its revision changes."""
        self._weight = 0
        self._lock = threading.Lock()

    def at(self, lineage: Hashable, revision: str) -> MemoAt:
        """This memo at one revision of one lineage: what a call that read that revision gets and puts."""
        return MemoAt(self, lineage, revision)

    def get(self, lineage: Hashable, revision: str, key: Hashable) -> Any:
        """The value remembered for `key` at this revision of the lineage, or None."""
        with self._lock:
            if self._revisions.get(lineage) != revision:
                return None
            found = self._values.get((lineage, key))
            if found is None:
                return None
            self._values.move_to_end((lineage, key))
            return found[0]

    def put(self, lineage: Hashable, revision: str, key: Hashable, value: T, weight: int = 1) -> T:
        """Remember `value` for `key` at this revision of the lineage, dropping the lineage's values of any other
        revision (the revision stored last is the one kept: a call still reading an older snapshot costs the
        newer values a recomputation, never a wrong answer). The least recently used values go once the total
        weight exceeds the capacity; a value heavier than the whole capacity is returned but not kept."""
        with self._lock:
            if self._revisions.get(lineage, revision) != revision:
                for old_key in list(self._keys[lineage]):
                    self._forget(lineage, old_key)
            self._forget(lineage, key)
            if weight > self._capacity:
                return value
            self._revisions[lineage] = revision
            self._keys.setdefault(lineage, set()).add(key)
            self._values[(lineage, key)] = (value, weight)
            self._weight += weight
            while self._weight > self._capacity:
                old_lineage, old_key = next(iter(self._values))
                self._forget(old_lineage, old_key)
        return value

    def _forget(self, lineage: Hashable, key: Hashable) -> None:
        old = self._values.pop((lineage, key), None)
        if old is None:
            return
        self._weight -= old[1]
        keys = self._keys[lineage]
        keys.discard(key)
        if not keys:  # lineages come and go with the scopes callers read: none is kept without a value
            del self._keys[lineage]
            del self._revisions[lineage]

    def revisions(self) -> dict[Hashable, str]:
        """The revision held per lineage (what a long-running server keeps; for tests and benchmarks)."""
        with self._lock:
            return dict(self._revisions)

    def weight(self) -> int:
        """The total weight held (for tests and benchmarks)."""
        with self._lock:
            return self._weight

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)


@dataclass(frozen=True)
class MemoAt:
    """The memo as one call sees it: the values of one lineage at the revision the call read."""

    memo: Memo
    lineage: Hashable
    revision: str

    def get(self, key: Hashable) -> Any:
        return self.memo.get(self.lineage, self.revision, key)

    def put(self, key: Hashable, value: T, weight: int = 1) -> T:
        return self.memo.put(self.lineage, self.revision, key, value, weight)
