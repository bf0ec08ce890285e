"""What an import source left out or read differently, to print after the import's report."""

from __future__ import annotations

from collections import Counter


class Notes:
    """What a source left out or read differently, counted per reason and printed after the report.

    Nothing is dropped silently: each reason names the objects and what happened to them.
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, reason: str, count: int = 1) -> None:
        if count:
            self.counts[reason] += count

    def lines(self) -> list[str]:
        return [f"{reason}: {count}" for reason, count in sorted(self.counts.items())]
