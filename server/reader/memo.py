"""A small, bounded in-process memory for values that change only with the data they were computed from.

Keys include the data revision they depend on, so an entry is never stale: a changed revision is a
different key, and old keys simply age out. Nothing is written anywhere.

The bound is a total weight: most values weigh 1; a large value (a get_context selection of a big
neighbourhood) says how much it weighs, so a few large values cannot crowd out memory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Final, TypeVar

T = TypeVar("T")
DEFAULT_ENTRIES: Final = 1024


class Memo:
    def __init__(self, entries: int = DEFAULT_ENTRIES) -> None:
        self._capacity = entries
        self._values: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The remembered value, or None."""
        with self._lock:
            found = self._values.get(key)
            if found is None:
                return None
            self._values.move_to_end(key)
            return found[0]

    def put(self, key: Hashable, value: T, weight: int = 1) -> T:
        """Remember `value`; the oldest values go once the total weight exceeds the capacity. A value heavier
        than the whole capacity is returned but not kept."""
        with self._lock:
            old = self._values.pop(key, None)
            if old is not None:
                self._weight -= old[1]
            if weight > self._capacity:
                return value
            self._values[key] = (value, weight)
            self._weight += weight
            while self._weight > self._capacity:
                _, (_, dropped) = self._values.popitem(last=False)
                self._weight -= dropped
        return value
