"""The JSON Lines source of an import: each line parsed and validated as it is read.

Errors name the line number, the field path (as in `event_time.start` or `entity_ids[2]`) and the
problem; nothing here touches a database. The file is read one line at a time, so memory does
not grow with its size.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, Final

import orjson
from pydantic import ValidationError

from server.contracts.interchange import KIND_ORDER, LINE, Line
from server.store.errors import ImportRejected, StoreError

# Inner discriminator tags pydantic puts into an error location; they are not field names.
UNION_TAGS: Final[dict[str, frozenset[str]]] = {
    "scope": frozenset({"global", "projects"}),
    "coverage": frozenset({"detailed", "legacy_count"}),
}
BOM: Final = b"\xef\xbb\xbf"


class JsonlSource:
    """Yields `("line N", line)` for every non-blank line of a file; raises ImportRejected at the first bad one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._size = 0
        self._read = 0

    def __iter__(self) -> Iterator[tuple[str, Line]]:
        try:
            stream: BinaryIO = self.path.open("rb")
            self._size, self._read = self.path.stat().st_size, 0
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        with stream:
            for number, raw in enumerate(stream, start=1):
                self._read += len(raw)
                if number == 1:
                    raw = raw.removeprefix(BOM)
                if raw.strip():
                    yield f"line {number}", _validate(number, raw)

    def fraction_read(self) -> float | None:
        """How much of the file has been read (by bytes)."""
        return self._read / self._size if self._size else None


def _validate(number: int, raw: bytes) -> Line:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise ImportRejected(f"line {number}", "", f"not UTF-8 text (byte {bad.start + 1} of the line)") from None
        raise ImportRejected(f"line {number}", "", f"malformed JSON at column {exc.colno}: {exc.msg}") from None
    if not isinstance(value, dict):
        raise ImportRejected(f"line {number}", "", "each line must be one JSON object with a 'kind'")
    kind = value.get("kind")
    if kind not in KIND_ORDER:
        problem = "missing" if kind is None else f"unknown kind {kind!r}"
        raise ImportRejected(f"line {number}", "kind", f"{problem}; the kinds are: {', '.join(KIND_ORDER)}")
    try:
        return LINE.validate_python(value)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        first = errors[0]
        problem = _problem(first["type"], first["msg"], str(kind))
        if len(errors) > 1:
            problem += f" (and {len(errors) - 1} more problem(s) on this line)"
        raise ImportRejected(f"line {number}", _field_path(first["loc"], str(kind)), problem) from None


def _problem(error_type: str, message: str, kind: str) -> str:
    if error_type == "missing":
        return "required field is missing"
    if error_type == "extra_forbidden":
        return f"unknown field: a {kind} line has no such field"
    return message.removeprefix("Value error, ")


def _field_path(loc: Iterable[int | str], kind: str) -> str:
    """pydantic's error location as a field path such as `event_time.start` or `entity_ids[2]`."""
    parts = list(loc)
    if parts and parts[0] == kind:
        parts = parts[1:]  # the line's own discriminator
    text = ""
    previous: int | str = ""
    for part in parts:
        if isinstance(part, str) and part in UNION_TAGS.get(str(previous), ()):
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
        previous = part
    return text
