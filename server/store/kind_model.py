"""How the importer describes a kind of line, as data: merge.py turns it into SQL.

A line is staged as one row of `temp.stage_<kind>`: the columns of its real table (same names,
stored form) followed by JSON lists of what goes to child tables (`entity_ids`, evidence, facts,
text chunks). Each kind says its key, the links to check and how its child rows are written;
kinds.py and kinds_stories.py hold one `Kind` per line kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from server.contracts.base import ObjectRef

Staged = tuple[object, ...]

# Relations, summaries and leaves cannot name these yet: the reader does not follow such links.
NOT_LINKABLE_YET: Final = ("story", "experience")


class Invalid(Exception):
    """A line the contracts accept but the store cannot: a repeated id in a list, a link to an unlinkable type."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


@dataclass(frozen=True)
class Target:
    """A kind of object a link can name: its table, key column, and whether it belongs to a scope."""

    table: str
    key: str
    scoped: bool


TARGETS: Final[dict[str, Target]] = {
    "project": Target("projects", "id", scoped=False),
    "scope": Target("scopes", "scope_key", scoped=False),
    "result": Target("results", "id", scoped=True),
    "story_line": Target("story_lines", "id", scoped=True),
    "source": Target("sources", "id", scoped=False),
    "entity": Target("entities", "id", scoped=True),
    "event": Target("events", "id", scoped=True),
    "source_reference": Target("source_references", "id", scoped=True),
    "story": Target("stories", "id", scoped=True),
    "experience": Target("experiences", "id", scoped=True),
}


@dataclass(frozen=True)
class Link:
    """A staged column naming other stored objects: they must exist, and be in the row's scope when both have one."""

    column: str
    target: str
    field: str = ""
    """The field path in errors (default: the column)."""
    many: bool = False
    """The column is a JSON list of ids; errors name `field[i]`."""
    within: bool = False
    """The target's scope must lie *within* the row's (the same scope or a scope of some of its projects,
    the `scope_within` view of migrations/0005) rather than be the same."""

    @property
    def name(self) -> str:
        return self.field or self.column


@dataclass(frozen=True)
class RefLink:
    """Object refs (type + id), checked once every line is written: they may name any later line.

    `type_sql`/`id_sql` read the ref from the staged row `s` or, for a list, from its item `j`.
    """

    field: str
    type_sql: str
    id_sql: str
    many: bool = False
    suffix: str = ""
    """Appended to `field[i]` in errors, e.g. `.object_ref`."""


@dataclass(frozen=True)
class Check:
    """A rule of one kind beyond its links. `sql` returns `seq, location, *args` of the first offending
    line still to write (staged rows with `skip <> 1`), or nothing."""

    sql: str
    field: str
    problem: Callable[[Sequence[Any]], str]


@dataclass(frozen=True)
class Children:
    """A JSON list column written to a child table: one child row per list item.

    The child rows of an object are those whose `owner` columns equal `owner_values` of its row `{a}`;
    `items` are the columns that come from one list item `j`, as `item_values`. With `scoped`, each child
    row also carries the object's scope in `scope_key`.
    """

    column: str
    table: str
    owner: tuple[str, ...]
    owner_values: str
    items: tuple[str, ...]
    item_values: str
    scoped: bool = True

    def insert(self, scope: str) -> str:
        """INSERT ... SELECT of the children of staged rows `s` joined with their items `j`."""
        columns = (*self.owner, *self.items, *(("scope_key",) if self.scoped else ()))
        values = f"{self.owner_values.format(a='s')}, {self.item_values}" + (f", {scope}" if self.scoped else "")
        return f"INSERT INTO {self.table} ({', '.join(columns)}) SELECT {values}"

    def staged(self, row: str) -> str:
        """SELECT of the items of staged row `row`."""
        return f"SELECT {self.item_values} FROM json_each({row}.{self.column}) AS j"

    def stored(self, row: str) -> str:
        """SELECT of the stored children of the stored object `row`, comparable with `staged`."""
        owner = f"({', '.join(self.owner)}) = ({self.owner_values.format(a=row)})"
        return f"SELECT {', '.join(self.items)} FROM {self.table} WHERE {owner}"

    def delete(self, stage: str, chosen: str) -> str:
        """DELETE of the stored children of the objects of the staged rows `s` that `chosen` selects."""
        owners = f"SELECT {self.owner_values.format(a='s')} FROM {stage} AS s WHERE {chosen}"
        return f"DELETE FROM {self.table} WHERE ({', '.join(self.owner)}) IN ({owners})"


@dataclass(frozen=True)
class Kind:
    name: str
    table: str
    key: tuple[str, ...]
    columns: tuple[str, ...]
    """Real-table columns staged as they are stored (`scope_key` only where the line itself carries it)."""
    row: Callable[[Any], Staged]
    """Line -> staged values: `columns`, then each child list as JSON. Raises Invalid."""
    owner: Link | None = None
    """The link whose target's scope is the row's scope; None when the row carries or has no scope."""
    links: tuple[Link, ...] = ()
    children: tuple[Children, ...] = ()
    derived: tuple[tuple[str, str], ...] = ()
    """Stored columns computed when the row is written: (column, SQL over the staged row `s`)."""
    checks: tuple[Check, ...] = ()
    """Rules checked with the links, before the kind is written."""
    refs: tuple[RefLink, ...] = ()
    after: tuple[Check, ...] = ()
    """Rules checked once every kind is written."""
    lookups: tuple[str, ...] = ()
    """Staged columns that `checks` look rows up by (indexed while the kind is merged)."""
    release: tuple[str, ...] = ()
    """Sync mode: statements run before the changed rows are written, freeing what a changed row gives up
    (an event's primary story) so that another changed or new row can take it."""
    noun: str = ""
    """What errors call the row's owner ("this story's scope"); default: the kind's name."""

    @property
    def stage(self) -> str:
        return f"stage_{self.name}"

    @property
    def staged_columns(self) -> tuple[str, ...]:
        return self.columns + tuple(child.column for child in self.children)

    @property
    def scoped(self) -> bool:
        return self.owner is not None or "scope_key" in self.columns

    @property
    def owner_noun(self) -> str:
        return self.noun or self.name


def as_json(value: object) -> str:
    return orjson.dumps(value).decode()


def ids(field: str, values: list[str]) -> str:
    """A list of ids as JSON, in file order (so errors can name `field[i]`); a repeated id is refused."""
    if len(set(values)) != len(values):
        seen: set[str] = set()
        for index, value in enumerate(values):
            if value in seen:
                raise Invalid(f"{field}[{index}]", f"{value!r} is listed more than once")
            seen.add(value)
    return as_json(values)


def _unlinkable(field: str, ref: ObjectRef) -> Invalid:
    return Invalid(f"{field}.type", f"relations, summaries and leaves cannot link to a {ref.type} yet")


def refs(field: str, values: Sequence[ObjectRef], suffix: str = "") -> list[list[str]]:
    """Object refs as `[type, id]` pairs; a repeated ref or one to an unlinkable type is refused."""
    seen: set[tuple[str, str]] = set()
    pairs: list[list[str]] = []
    for index, ref in enumerate(values):
        if ref.type in NOT_LINKABLE_YET:
            raise _unlinkable(f"{field}[{index}]{suffix}", ref)
        if (ref.type, ref.id) in seen:
            raise Invalid(f"{field}[{index}]", f"{ref.model_dump()!r} is listed more than once")
        seen.add((ref.type, ref.id))
        pairs.append([ref.type, ref.id])
    return pairs


def end(field: str, ref: ObjectRef) -> tuple[str, str]:
    """One end of a relation as (type, id)."""
    if ref.type in NOT_LINKABLE_YET:
        raise _unlinkable(field, ref)
    return ref.type, ref.id


# JSON columns compared by content, not by text, when a line meets a stored object.
JSON_LISTS: Final = frozenset({"source_reference_ids", "entity_ids", "fact_refs", "facts", "project_ids"})
# Staged column -> the interchange field it comes from, where the names differ.
FIELD_OF_COLUMN: Final[dict[str, str]] = {
    "scope_key": "scope",
    "kind": "scope",
    "project_ids": "scope",
    "coverage_json": "coverage",
    "locator_json": "locator",
    "fragment": "fragment",
    "fragment_start": "fragment",
    "fragment_end": "fragment",
    "event_time_start": "event_time",
    "event_time_end": "event_time",
    "event_time_precision": "event_time",
    "event_time_basis": "event_time",
    "from_type": "from_ref",
    "from_id": "from_ref",
    "to_type": "to_ref",
    "to_id": "to_ref",
    "interval_from": "interval",
    "interval_to": "interval",
    "length": "text",
    "chunks": "text",
    "is_primary": "primary",
}


def field_of(column: str) -> str:
    return FIELD_OF_COLUMN.get(column, column)


def differing_fields(kind: Kind, first: Staged, second: Staged) -> list[str]:
    """The interchange fields in which two staged rows of one kind differ (lists compared as sets)."""
    fields: list[str] = []
    for column, a, b in zip(kind.staged_columns, first, second, strict=True):
        if column in JSON_LISTS:
            same = sorted(map(_hashable, orjson.loads(str(a)))) == sorted(map(_hashable, orjson.loads(str(b))))
        else:
            same = a == b
        field = field_of(column)
        if not same and field not in fields:
            fields.append(field)
    return fields


def _hashable(item: Any) -> Any:
    return tuple(item) if isinstance(item, list) else item
