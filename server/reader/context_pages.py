"""get_context pages: every selected object as one compact JSON text, in a stable order, cut into fragments.

`current` orders by role (target, relation, related, evolution, summary, evidence) then type, stable
id and result id; `timeline` by event time, then type, stable id and result id, with every object of
unknown event time after the dated ones. Pages are keyset positions: (sort key, code-point offset).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from server.contracts.errors import invalid_cursor
from server.reader.context_rows import Memory, Unit

ROLE_ORDER: Final[dict[str, int]] = {
    "target": 0,
    "relation": 1,
    "related": 2,
    "evolution": 3,
    "summary": 4,
    "evidence": 5,
}
BACKGROUND_SECTION: Final = 6
ROW_KIND_ORDER: Final[dict[str, int]] = {"current": 0, "result": 1, "leaf": 2}

SortKey = tuple[int, str, int, str, str, str]


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
    limit_reason: str | None


def pieces(units: list[Unit], memories: list[Memory], mode: str) -> list[Piece]:
    """The page stream of a selection, in sort-key order; background memory items come last."""
    return sorted(
        [Piece(_sort_key(u, mode), _compact(u.data), u) for u in units]
        + [Piece((BACKGROUND_SECTION, "", 0, "memory_item", m.memory_id, ""), _compact(m.data), m) for m in memories],
        key=lambda p: p.key,
    )


def _compact(data: dict[str, Any]) -> str:
    """The stored data as compact JSON text, non-ASCII kept (what the fragments are cut from)."""
    return orjson.dumps(data).decode()


def _sort_key(unit: Unit, mode: str) -> SortKey:
    row = unit.row
    if mode == "timeline":
        if row.event_time_start is not None:
            return (0, row.event_time_start, 0, row.object_type, row.object_id, row.result_key)
        return (1, "", 0, row.object_type, row.object_id, row.result_key)
    time = ""
    if unit.role == "evolution":  # changes and events read best in event-time order; unknown last
        time = row.event_time_start or "~"
    return (ROLE_ORDER[unit.role], time, ROW_KIND_ORDER[row.row_kind], row.object_type, row.object_id, row.result_key)


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
    page_size: int,
    content_page_size: int,
    fits: Callable[[Fragment, bool], bool],
) -> Window:
    """Up to page_size fragments from the position on. A page ends after a fragment that does not finish its
    object (the next page continues inside it), or before a fragment that would not fit the byte budget:
    `fits(fragment, first)` is asked for every fragment and must accept the first of a page."""
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
        if not fits(fragment, not fragments) and fragments:
            return Window(fragments, (piece.key, offset), "response_budget")
        fragments.append(fragment)
        if fragment.end < len(piece.text):
            return Window(fragments, (piece.key, fragment.end), "content_page_size")
        index, offset = index + 1, 0
    return Window(fragments, None, None)
