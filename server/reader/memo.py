"""A small, bounded in-process memory for values that change only with the data they were computed from.

Keys include the data revision they depend on, so an entry is never stale: a changed revision is a
different key, and old keys simply age out. Nothing is written anywhere.
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
        self._entries = entries
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The remembered value, or None."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: Hashable, value: T) -> T:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self._entries:
                self._values.popitem(last=False)
        return value
