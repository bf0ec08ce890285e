"""Whether a saved fragment's `[start, end)` and its source's length can be right: plain checks shared by the
importers (contracts/interchange.py, the GoodBuddy importer) and the readers (reader/saved_range.py).

Kept apart from the interchange models so that serving does not build them: importing those pydantic models
cost about a tenth of a second of every server's start-up.
"""

from __future__ import annotations

from typing import Literal


def span_problem(text: str, start: int | None, end: int | None) -> str | None:
    """Why `[start, end)` cannot be where `text` was saved from, or None. Python's len counts code points, the
    positions' unit; a null bound is unknown and contradicts nothing."""
    if start is None or end is None:
        return None
    if end < start:
        return "fragment.end is before fragment.start"
    if end - start != len(text):
        return (
            f"end - start is {end - start} but fragment.text is {len(text)} code points long; [start, end) must"
            f" span exactly the text: set end to {start + len(text)}, or null if unknown"
        )
    return None


def length_problem(text: str, start: int | None, end: int | None, source_length: int | None) -> str | None:
    """Why a source of `source_length` code points cannot hold the fragment `text` at `[start, end)`, or None."""
    if source_length is None:
        return None
    fix = "the fragment must lie within the source; give the source's whole length in code points, or null if unknown"
    bound, name = (end, "end") if end is not None else (start, "start")
    if bound is not None and bound > source_length:
        return f"source_length {source_length} is shorter than fragment.{name} {bound}: {fix}"
    if len(text) > source_length:
        return f"source_length {source_length} is shorter than fragment.text ({len(text)} code points): {fix}"
    return None


def consistent_range(
    text: str, start: int | None, end: int | None, length: int | None
) -> tuple[int | None, int | None, int | None, Literal["span", "length"] | None]:
    """A fragment's `[start, end)` and its source's length with whatever contradicts the rest made unknown (None),
    and which check failed: `span` (the range does not span the text: the range is unknown), `length` (the fragment
    reaches past the length: which of them is wrong cannot be told, so the range and the length are unknown)."""
    if span_problem(text, start, end) is not None:
        return None, None, length, "span"
    if length_problem(text, start, end, length) is not None:
        return None, None, None, "length"
    return start, end, length, None
