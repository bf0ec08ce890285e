"""Reading an interchange file: every line parsed, validated and put in its stored form.

Errors name the line number, the field path (as in `event_time.start` or `entity_ids[2]`) and the
problem; nothing here touches a database.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic import ValidationError

from server.contracts.base import normalise_scope
from server.contracts.interchange import (
    KIND_ORDER,
    LINE,
    EntityChangeLine,
    EntityLine,
    EventLine,
    ExperienceLine,
    LeafLine,
    Line,
    RelationLine,
    ResultLine,
    ScopeLine,
    StoryLine,
    StoryLineLine,
    SummaryLine,
)
from server.store.errors import ImportRejected, StoreError, Where

# Inner discriminator tags pydantic puts into an error location; they are not field names.
UNION_TAGS: Final[dict[str, frozenset[str]]] = {
    "scope": frozenset({"global", "projects"}),
    "coverage": frozenset({"detailed", "legacy_count"}),
}


def read_lines(path: Path) -> list[tuple[int, Line]]:
    """Parse and validate every non-blank line; raise ImportRejected at the first bad one."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    parsed: list[tuple[int, Line]] = []
    for number, raw in enumerate(data.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        if raw.strip():
            value = parse_json_line(number, raw)
            if not isinstance(value, dict):
                raise ImportRejected(number, "", "each line must be one JSON object with a 'kind'")
            parsed.append((number, validate_line(number, value)))
    return parsed


def parse_json_line(number: int, raw: bytes) -> Any:
    """One line of a JSON Lines file as a JSON value; a bad line is refused with its number."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise ImportRejected(number, "", f"not UTF-8 text (byte {bad.start + 1} of the line)") from None
        raise ImportRejected(number, "", f"malformed JSON at column {exc.colno}: {exc.msg}") from None


def validate_line(where: Where, value: dict[str, Any]) -> Line:
    """An interchange line from its JSON object, validated and in its stored form; errors name `where`.

    Every importer builds its lines through here, whatever it reads: a JSONL file or a foreign database.
    """
    return _normalise(where, _validate(where, value))


def _validate(where: Where, value: dict[str, Any]) -> Line:
    kind = value.get("kind")
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


def _unique(number: Where, name: str, values: list[Any]) -> None:
    seen: set[Any] = set()
    for index, value in enumerate(values):
        if value in seen:
            raise ImportRejected(number, f"{name}[{index}]", f"{value!r} is listed more than once")
        seen.add(value)


def _normalise(number: Where, line: Line) -> Line:
    """The stored form of a line: lists that are sets in the schema sorted, scopes in canonical order."""
    match line:
        case ScopeLine() | ResultLine() | StoryLineLine() | StoryLine() | ExperienceLine():
            return line.model_copy(update={"scope": normalise_scope(line.scope)})
        case EventLine():
            _unique(number, "entity_ids", line.entity_ids)
            _unique(number, "source_reference_ids", line.source_reference_ids)
            return line.model_copy(
                update={
                    "entity_ids": sorted(line.entity_ids),
                    "source_reference_ids": sorted(line.source_reference_ids),
                }
            )
        case EntityLine() | EntityChangeLine() | RelationLine():
            _unique(number, "source_reference_ids", line.source_reference_ids)
            return line.model_copy(update={"source_reference_ids": sorted(line.source_reference_ids)})
        case SummaryLine():
            _unique(number, "fact_refs", [(ref.type, ref.id) for ref in line.fact_refs])
            _unique(number, "source_reference_ids", line.source_reference_ids)
            return line.model_copy(
                update={
                    "interval": line.interval or None,
                    "fact_refs": sorted(line.fact_refs, key=lambda ref: (ref.type, ref.id)),
                    "source_reference_ids": sorted(line.source_reference_ids),
                }
            )
        case LeafLine():
            _unique(number, "facts", [(fact.object_ref.type, fact.object_ref.id) for fact in line.facts])
            facts = sorted(line.facts, key=lambda fact: (fact.object_ref.type, fact.object_ref.id))
            return line.model_copy(update={"facts": facts})
        case _:
            return line
