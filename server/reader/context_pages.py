"""get_context pages: each object of a page as one compact JSON text, cut into fragments.

The stream order is context_arms' sort key. Pages are keyset positions: (sort key, code-point offset);
a page is given the objects from its position on, as many as it can hold (context_summary.read_stream).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from server.contracts.common import LimitReason
from server.contracts.errors import invalid_cursor
from server.reader.context_arms import SortKey
from server.reader.context_rows import Memory, Unit


@dataclass(frozen=True)
class Piece:
    """One object of the page stream: its sort key and its whole content JSON text."""

    key: SortKey
    text: str
    unit: Unit | Memory


@dataclass(frozen=True)
class Fragment:
    piece: Piece
    start: int
    end: int

    @property
    def text(self) -> str:
        return self.piece.text[self.start : self.end]


@dataclass(frozen=True)
class Window:
    fragments: list[Fragment]
    next_position: tuple[SortKey, int] | None
    limit_reason: LimitReason | None


def compact(data: dict[str, Any]) -> str:
    """The stored data as compact JSON text, non-ASCII kept (what the fragments are cut from)."""
    return orjson.dumps(data).decode()


def parse_position(position: dict[str, Any] | None) -> tuple[SortKey, int] | None:
    """The (sort key, code-point offset) a cursor resumes at."""
    if position is None:
        return None
    try:
        section, time, kind, object_type, object_id, result_key = position["at"]
        offset = position["offset"]
        key: SortKey = (int(section), str(time), int(kind), str(object_type), str(object_id), str(result_key))
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(offset)
    except (KeyError, TypeError, ValueError):
        raise invalid_cursor("the cursor position is malformed.") from None
    return key, offset


def position_payload(position: tuple[SortKey, int]) -> dict[str, Any]:
    return {"at": list(position[0]), "offset": position[1]}


def paginate(
    stream: list[Piece],
    position: tuple[SortKey, int] | None,
    *,
    following: SortKey | None,
    page_size: int,
    content_page_size: int,
    fits: Callable[[Fragment, bool], bool],
) -> Window:
    """Up to page_size fragments from the position on (`stream` holds the objects from the position on, at most
    page_size: each gives a page one fragment at most; `following` is the sort key of the object after them, when
    one follows). A page ends after a fragment that does not finish its object (the
    next page continues inside it), or before a fragment that would not fit the byte budget: `fits(fragment,
    force)` is asked for every fragment, and takes it when it fits or when forced. A page's first fragment that
    does not fit is halved until it does (a page beside a large header at content_page_size 8,000 was
    response_too_large at any page_size); a single code point is forced in."""
    index, offset = 0, 0
    if position is not None:
        keys = [p.key for p in stream]
        index = bisect.bisect_left(keys, position[0])
        if index >= len(stream) or stream[index].key != position[0] or position[1] >= len(stream[index].text):
            # Same scope revision and request, so the object must be there: this cursor was not issued for it.
            raise invalid_cursor("the cursor position does not name an object of this query.")
        offset = position[1]
    fragments: list[Fragment] = []
    while index < len(stream):
        piece = stream[index]
        if len(fragments) == page_size:
            return Window(fragments, (piece.key, offset), "page_size")
        fragment = Fragment(piece, offset, min(offset + content_page_size, len(piece.text)))
        cut = False
        while not fits(fragment, False):
            if fragments:
                return Window(fragments, (piece.key, offset), "response_budget")
            if fragment.end - offset == 1:
                fits(fragment, True)
                break
            fragment, cut = Fragment(piece, offset, offset + (fragment.end - offset) // 2), True
        fragments.append(fragment)
        if fragment.end < len(piece.text):
            return Window(fragments, (piece.key, fragment.end), "response_budget" if cut else "content_page_size")
        index, offset = index + 1, 0
    if following is not None:  # every object of the stream gave its last fragment: the page is full
        return Window(fragments, (following, 0), "page_size")
    return Window(fragments, None, None)
