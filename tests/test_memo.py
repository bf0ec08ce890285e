"""The in-process Memo: bounded by total weight, oldest out first; a value heavier than all of it is not kept."""

from __future__ import annotations

from server.reader.memo import Memo


def test_the_memo_keeps_at_most_its_capacity_in_weight_dropping_the_least_recently_used() -> None:
    memo = Memo(entries=10)
    memo.put("a", "A", weight=4)
    memo.put("b", "B", weight=4)
    assert memo.get("a") == "A"  # now the most recently used
    memo.put("c", "C", weight=4)  # 12 > 10: the least recently used ("b") goes
    assert (memo.get("a"), memo.get("b"), memo.get("c")) == ("A", None, "C")
    assert memo.put("huge", "H", weight=11) == "H"  # returned to the caller, never kept
    assert memo.get("huge") is None and memo.get("a") == "A"
    memo.put("a", "A2", weight=1)  # replacing a key replaces its weight
    for n in range(5):
        memo.put(n, n)
    assert memo.get("a") == "A2" and memo.get("c") == "C" and memo.get(4) == 4
