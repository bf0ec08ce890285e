"""Shared building blocks of every contract: the base model, times, scopes and object refs."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Final, Literal

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from server.contracts.field_docs import describe_fields

OBJECT_TYPES: tuple[str, ...] = (
    "story_line",
    "story",
    "experience",
    "event",
    "entity",
    "entity_change",
    "relation",
    "summary",
    "source_reference",
)
ObjectType = Literal[
    "story_line", "story", "experience", "event", "entity", "entity_change", "relation", "summary", "source_reference"
]
STORED_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
"""The one stored text form of a time (see `format_utc`)."""


def no_nul(value: str) -> str:
    """Refuse U+0000: an import writes ids, links and child texts through SQLite's JSON functions (3.40), which end
    a text at it, so it could not be stored whole."""
    if "\x00" in value:
        raise ValueError(
            "holds the character U+0000 (NUL), which SQLite's JSON functions read as the end of a text, so it cannot"
            " be stored whole; remove it"
        )
    return value


Id = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(no_nul)]
"""An object's or project's id, or a link to one. Without U+0000: an import checks and writes links through SQLite's
JSON functions, which end a text at it (`a\\u0000b` would be linked as `a`), and no stored id holds one."""


class Contract(BaseModel):
    """Closed, frozen, self-describing: unknown keys are refused, field docstrings become schema descriptions
    (`describe_fields`, when a schema is generated: a model that sets its own `json_schema_extra` calls it too)."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=describe_fields)


def format_utc(moment: datetime) -> str:
    """The one text form of a time in this project: UTC, milliseconds, `Z` (text order is time order)."""
    utc = moment.astimezone(UTC)
    # %Y is not zero-padded below year 1000 on every platform; the text must sort as the time does.
    return f"{utc.year:04d}-" + utc.strftime("%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_instant(value: str) -> str:
    """Parse ISO 8601 with a `Z` or `±HH:MM` offset and return it normalised to UTC text.

    A time without an offset is refused: it names no instant. A time already in the stored form (as
    export writes it) is only checked, not re-formatted: import spends a good part of its time on times.
    """
    if STORED_TIME.fullmatch(value):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            pass  # not a real date: the full parse below names the problem
        else:
            return value
    text = value.strip()
    # RFC 3339 lets the `T` and `Z` be lower case (and a space stand for the `T`): the same instant.
    if len(text) < 16 or text[10] not in "Tt ":
        raise ValueError(f"{value!r} is not an ISO 8601 date-time such as 2026-09-28T10:00:00Z")
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an ISO 8601 date-time such as 2026-09-28T10:00:00Z") from exc
    if moment.tzinfo is None:
        raise ValueError(f"{value!r} has no UTC offset; add 'Z' or '+HH:MM', e.g. 2026-09-28T10:00:00+08:00")
    if not (text.endswith(("Z", "z")) or (text[-6] in "+-" and text[-3] == ":")):
        raise ValueError(
            f"{value!r}: write the UTC offset as 'Z' or '+HH:MM' with a colon, e.g. 2026-09-28T10:00:00+08:00"
        )
    try:
        return format_utc(moment)
    except OverflowError:
        raise ValueError(f"{value!r} is outside the years 1-9999 once converted to UTC") from None


Instant = Annotated[str, AfterValidator(parse_instant), Field(description="ISO 8601 date-time with Z or ±HH:MM")]

FRACTION: Final = re.compile(r"T[^.,]*[.,](\d+)")


def finer_than_a_millisecond(value: str) -> bool:
    """Whether a time as written holds a non-zero part below the millisecond (`.0001`), which `parse_instant` drops:
    Python parses at most microseconds, and the stored form keeps milliseconds."""
    fraction = FRACTION.search(value)
    return fraction is not None and fraction.group(1)[3:].strip("0") != ""


def next_millisecond(stored: str) -> str:
    """The stored-form time one millisecond after `stored` (itself in the stored form)."""
    return format_utc(datetime.fromisoformat(stored) + timedelta(milliseconds=1))


class GlobalScope(Contract):
    """Everything stored for the Global scope (never the union of projects)."""

    kind: Literal["global"]


def _unique_ids(ids: list[str]) -> list[str]:
    if len(set(ids)) != len(ids):
        # Upstream's words, then which ids repeat and the fix: the bare rule left an agent to find the repeat.
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(
            f"Project IDs must be unique: {', '.join(repr(i) for i in repeated[:10])} listed more than once; list "
            "each project once"
        )
    return ids


class ProjectsScope(Contract):
    """Exactly one project, or one exact set of projects (order does not matter)."""

    kind: Literal["projects"]
    projectIds: Annotated[
        list[Id],
        Field(min_length=1, max_length=100),
        AfterValidator(_unique_ids),
    ]
    """1–100 unique project ids."""


Scope = Annotated[GlobalScope | ProjectsScope, Field(discriminator="kind")]


def scope_key(scope: GlobalScope | ProjectsScope) -> str:
    """The canonical key of a scope: 'global', or 'projects:' + the sorted ids as compact JSON."""
    if isinstance(scope, GlobalScope):
        return "global"
    return "projects:" + orjson.dumps(sorted(scope.projectIds)).decode()


def normalise_scope(scope: GlobalScope | ProjectsScope) -> GlobalScope | ProjectsScope:
    """Project ids sorted in code-point order; the form echoed as `resolved_scope` and bound into cursors."""
    if isinstance(scope, GlobalScope):
        return scope
    return ProjectsScope(kind="projects", projectIds=sorted(scope.projectIds))


def scope_from_key(key: str) -> GlobalScope | ProjectsScope:
    if key == "global":
        return GlobalScope(kind="global")
    ids = orjson.loads(key.removeprefix("projects:"))
    return ProjectsScope(kind="projects", projectIds=ids)


class ObjectRef(Contract):
    """A stable reference to one stored object."""

    type: ObjectType
    id: Id
