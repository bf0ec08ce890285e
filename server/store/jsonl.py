"""The JSON Lines source of an import: each line parsed and validated as it is read.

Errors name the line number, the field path (as in `event_time.start` or `entity_ids[2]`) and the
problem; nothing here touches a database. The file is read one line at a time, so memory does
not grow with its size.
"""

from __future__ import annotations

import contextlib
import json  # noqa: TID251 - orjson has no object_pairs_hook (a key twice in one object) and refuses lone surrogates
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final, NoReturn

import orjson
from pydantic import ValidationError

from server.contracts.interchange import KIND_ORDER, LINE, Line
from server.store.errors import ImportRejected, StoreError, Where

# Inner discriminator tags pydantic puts into an error location; they are not field names.
UNION_TAGS: Final[dict[str, frozenset[str]]] = {
    "scope": frozenset({"global", "projects"}),
    "coverage": frozenset({"detailed", "legacy_count"}),
}
BOM: Final = b"\xef\xbb\xbf"
MAX_LINE_BYTES: Final = 256 * 1024 * 1024
"""The longest line read: a text at its 20,000,000-character limit fits even written as \\u escapes (240 MB)."""
# What a file given by mistake starts with, and what to do with it: named when its first line is not JSON.
_UTF16: Final = "UTF-16 text: convert it to UTF-8 first (iconv -f UTF-16 -t UTF-8 FILE > FILE.utf8)"
NOT_TEXT: Final = (
    (
        b"SQLite format 3\x00",
        "a SQLite database, not JSON Lines: a GoodBuddy app database is imported with --from goodbuddy",
    ),
    (b"\x1f\x8b", "gzip-compressed: decompress it first (gunzip -k FILE)"),
    (b"\xfd7zXZ\x00", "xz-compressed: decompress it first (unxz -k FILE)"),
    (b"BZh", "bzip2-compressed: decompress it first (bunzip2 -k FILE)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed: decompress it first (unzstd FILE)"),
    (b"PK\x03\x04", "a zip archive: extract the JSON Lines file from it first (unzip FILE)"),
    (b"\xff\xfe", _UTF16),
    (b"\xfe\xff", _UTF16),
)
UTF16_WITHOUT_BOM: Final = (
    "the file is probably UTF-16 text without a byte-order mark: convert it to UTF-8 first"
    " (iconv -f {encoding} -t UTF-8 FILE > FILE.utf8)"
)
TO_UTF8: Final = (
    "the file must be UTF-8: convert it from the encoding it was saved in, e.g. iconv -f WINDOWS-1252 -t UTF-8"
    " FILE > FILE.utf8 (or -f GBK for Chinese text)"
)
ARRAY: Final = (
    "a JSON array, not one object: JSON Lines has one object per line (a JSON document holding a list of them can"
    " be turned into it with jq -c '.[]' FILE > FILE.jsonl)"
)
CR_ONLY: Final = (
    "the file ends lines with CR alone (old Mac style): convert them, e.g. tr '\\r' '\\n' < FILE > FILE.jsonl"
)
INTERRUPTED_EXPORT: Final = "story-graph-mcp: export interrupted; this output is incomplete"
"""The line an interrupted `db export` ends a stream with (standard output, a pipe): output cut between two lines
looks like a whole export, and an import of it would load a part of the graph without a word. Not JSON, so an
import of it fails, and says why."""
TWO_VALUES: Final = "more than one JSON value on this line: JSON Lines has one object per line"
LONE_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]", re.ASCII)
"""A \\uD800-\\uDFFF escape (half of a pair, or a lone one): only such lines need the slow reader."""
SURROGATE: Final = re.compile("[\ud800-\udfff]")
LONE_SURROGATE: Final = (
    "a \\uD800-\\uDFFF escape without the other half of its surrogate pair (text cut inside an emoji?) names no"
    " character: replace it, e.g. with \\ufffd"
)


class JsonLinesFile:
    """A JSON Lines file read one line at a time: `(N, value)` for every non-blank line N, a bad one refused."""

    def __init__(self, path: Path, max_line: int = MAX_LINE_BYTES, *, mend_surrogates: bool = False) -> None:
        self.path = path
        self.max_line = max_line
        self.mend_surrogates = mend_surrogates
        """Read a lone surrogate escape as U+FFFD instead of refusing its line (a file another program wrote)."""
        self.mended = 0
        """Lines read so far with a lone surrogate escape replaced (when `mend_surrogates`)."""
        self._size = 0
        self._read = 0

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        try:
            stream: BinaryIO = self.path.open("rb")
            self._size, self._read = self.path.stat().st_size, 0
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        with stream:
            # At most max_line bytes (and its newline) are read for a line, so a file without newlines (one JSON
            # document) is refused without being held in memory whole.
            for number, raw in enumerate(iter(lambda: stream.readline(self.max_line + 1), b""), start=1):
                self._read += len(raw)
                if len(raw) > self.max_line and not raw.endswith(b"\n"):
                    raise ImportRejected(
                        number,
                        "",
                        f"longer than {self.max_line:,} bytes, the most a line may hold: JSON Lines has one object per"
                        " line (is the file one JSON document? jq -c '.[]' FILE > FILE.jsonl turns a list into lines)",
                    )
                if number == 1:
                    raw = raw.removeprefix(BOM)
                if not raw.strip():
                    continue
                if self.mend_surrogates and LONE_SURROGATE_ESCAPE.search(raw):
                    value, mended = parse_mending_surrogates(number, raw)
                    self.mended += mended
                    yield number, value
                else:
                    yield number, parse_json_line(number, raw)

    def fraction_read(self) -> float | None:
        """How much of the file has been read (by bytes)."""
        return self._read / self._size if self._size else None


class JsonlSource:
    """The interchange file as an import source: `(N, line)` for every non-blank line N."""

    def __init__(self, path: Path) -> None:
        self.file = JsonLinesFile(path)

    def __iter__(self) -> Iterator[tuple[Where, Line]]:
        for number, value in self.file:
            if isinstance(value, list):
                raise ImportRejected(number, "", ARRAY)
            if not isinstance(value, dict):
                raise ImportRejected(number, "", "each line must be one JSON object with a 'kind'")
            yield number, validate_line(number, value)

    def fraction_read(self) -> float | None:
        return self.file.fraction_read()


def parse_json_line(number: int, raw: bytes) -> Any:
    """One line of a JSON Lines file as a JSON value; a bad line is refused with its number and what to do."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        _refuse(number, raw, exc)
    try:
        written = orjson.dumps(value)
    except TypeError:  # nested deeper than orjson writes (254 levels): the count below then differs
        written = b""
    if raw.count(b'"') != written.count(b'"') or b"\\u0022" in raw:
        _refuse_repeated_keys(number, raw)
    return value


def parse_mending_surrogates(number: int, raw: bytes) -> tuple[Any, bool]:
    """A line that may hold a lone surrogate escape (JavaScript's JSON.stringify writes one for a string cut inside
    a surrogate pair, e.g. half an emoji): read with each lone surrogate as U+FFFD. Returns the value and whether
    anything was replaced. A line without one is read as `parse_json_line` reads it."""
    try:
        return parse_json_line(number, raw), False
    except ImportRejected as refused:
        if "surrogate" not in refused.problem:
            raise
    # Python's reader takes lone surrogates (orjson refuses them); pairs it joins into their character.
    value = json.loads(raw, object_pairs_hook=lambda pairs: _no_repeats(number, pairs))
    return _without_surrogates(value), True


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_surrogates(key): _without_surrogates(item) for key, item in value.items()}
    return value


def _refuse_repeated_keys(number: int, raw: bytes) -> None:
    """Refuse a line with a key twice in one object: orjson keeps the last value silently, so the line would say
    two things and be read as one of them.

    Python's reader, which shows the pairs, is slow, so only lines that may hold a repeated key get here. A `"`
    byte of a line is a string's delimiter or an escaped `\\"` in it, and orjson writes every `"` of a text as
    `\\"`: unless the line writes one as `\\u0022`, the line written back from what was read has as many `"` as
    the line itself exactly when no key (with its value) was dropped. That test adds about 2% to an import.
    """
    # A line deeper or with longer numbers than Python's reader takes is refused by validation anyway.
    with contextlib.suppress(RecursionError, ValueError):
        json.loads(raw, object_pairs_hook=lambda pairs: _no_repeats(number, pairs))


def _no_repeats(number: int, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) < len(pairs):
        key = next(key for index, (key, _) in enumerate(pairs) if any(key == other for other, _ in pairs[:index]))
        raise ImportRejected(
            number, key, f"the key {key!r} appears twice in one JSON object; write it once, with the value meant"
        )
    return found


def _refuse(number: int, raw: bytes, exc: orjson.JSONDecodeError) -> NoReturn:
    """Why a line is not JSON, and what to do about it."""
    if number == 1:
        for magic, what in NOT_TEXT:
            if raw.startswith(magic):
                raise ImportRejected(number, "", f"the file is {what}") from None
    nuls = raw.count(b"\x00")
    if nuls * 3 >= len(raw):  # UTF-16 text holds a NUL byte beside every ASCII character (JSON text holds none)
        encoding = "UTF-16BE" if raw.startswith(b"\x00") else "UTF-16LE"
        raise ImportRejected(number, "", f"holds NUL bytes: {UTF16_WITHOUT_BOM.format(encoding=encoding)}") from None
    if nuls:
        at = raw.index(b"\x00") + 1
        raise ImportRejected(number, "", f"a NUL byte at byte {at} of the line: JSON text never holds one") from None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        raise ImportRejected(number, "", f"not UTF-8 text (byte {bad.start + 1} of the line); {TO_UTF8}") from None
    if raw.rstrip(b"\r\n") == INTERRUPTED_EXPORT.encode():
        raise ImportRejected(
            number,
            "",
            "the export that wrote this file was interrupted, so it holds only part of a graph: export again",
        ) from None
    problem = f"malformed JSON at column {exc.colno}: {exc.msg}"
    if "surrogate" in exc.msg:
        problem += f"; {LONE_SURROGATE}"
    elif exc.msg == "unexpected content after document":
        cr_only = b"\r" in raw.rstrip(b"\r\n")  # a CR inside the line ends a line only on old Macs
        problem += "; " + (CR_ONLY if cr_only else TWO_VALUES)
    raise ImportRejected(number, "", problem) from None


def validate_line(where: Where, value: dict[str, Any]) -> Line:
    """An interchange line from its JSON object, validated; errors name `where`.

    Every source builds its lines through here, whatever it reads: a JSONL file or a foreign database.
    """
    kind = value.get("kind")
    if kind is None and value.get("type") in ("entity", "relation"):
        raise ImportRejected(
            where,
            "kind",
            "missing: this is a line of the memory server's graph: import it with --from memory-jsonl --project P",
        )
    if kind not in KIND_ORDER:
        problem = "missing" if kind is None else f"unknown kind {kind!r}"
        raise ImportRejected(where, "kind", f"{problem}; the kinds are: {', '.join(KIND_ORDER)}")
    try:
        return LINE.validate_python(value)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        first = errors[0]
        problem = _problem(first["type"], first["msg"], str(kind))
        if len(errors) > 1:
            problem += f" (and {len(errors) - 1} more problem(s) on this line)"
        raise ImportRejected(where, _field_path(first["loc"], str(kind)), problem) from None


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
