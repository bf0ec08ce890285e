"""How a kind of line is stored, as data: the one description that import, export and compare share.

A kind lists its line's fields in the order of their columns: a field named alone is stored as it
is in the column of that name; a `Stored` field says which columns hold it, how a line's value
becomes them and how a stored row gives it back. A line is staged as one row of `temp.stage_<kind>`:
those columns (same names, stored form) followed by JSON lists of what goes to child tables
(`entity_ids`, evidence, facts, text chunks). Each kind also says its key, the links to check and
how its child rows are written. kinds.py and kinds_stories.py hold one `Kind` per line kind;
staging.py stages lines with it, merge.py turns it into SQL, and lines.py reads stored rows back
as lines with it (for export and for the importer's comparison).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter
from typing import Any, Final

import orjson

from server.contracts.base import ObjectRef, scope_from_key, scope_key

Staged = tuple[object, ...]
Row = sqlite3.Row

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
    repair: str = ""
    """An UPDATE of the staged rows that makes what breaks the rule unknown (NULL), for a sync source that keeps
    another program's rows rather than refusing them (`SyncPolicy.repair`); empty: the rule is never repaired."""
    note: str = ""
    """What a repair did, counted in the import's notes."""


@dataclass(frozen=True)
class Children:
    """A JSON list column written to a child table: one child row per list item.

    The child rows of an object are those whose `owner` columns equal `owner_values` of its row `{a}`;
    `items` are the columns that come from one list item `j`, as `item_values`. With `scoped`, each child
    row also carries the object's scope in `scope_key`. The list is staged from the line's `field`
    (default: the column's name) by `stage`; lines.py reads the child rows back into that field.
    """

    column: str
    table: str
    owner: tuple[str, ...]
    owner_values: str
    items: tuple[str, ...]
    item_values: str
    stage: Callable[[Any], str]
    """The field's value -> the staged JSON list. Raises Invalid."""
    field: str = ""
    scoped: bool = True
    ordered: bool = False
    """The list's order is part of its content (text chunks): compared in order, not as a set."""

    @property
    def from_field(self) -> str:
        return self.field or self.column

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
class Stored:
    """A field not stored as it is in one column of its own name: the `columns` that hold it, how a line's
    value becomes their values (`stage`; raises Invalid) and how a stored row gives the value back (`load`;
    None when child rows give it back, see lines.py)."""

    field: str
    columns: tuple[str, ...]
    stage: Callable[[Any], Staged]
    load: Callable[[Row], Any] | None


SCOPE: Final = Stored(
    "scope", ("scope_key",), lambda scope: (scope_key(scope),), lambda row: scope_from_key(row["scope_key"])
)
"""A line's own scope, stored as its canonical key."""


@dataclass(frozen=True)
class Kind:
    name: str
    table: str
    key: tuple[str, ...]
    fields: tuple[str | Stored, ...]
    """The line's fields in the order of their columns, the key's first (`scope_key` only where the line
    itself carries a scope); child lists are in `children`."""
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

    def __post_init__(self) -> None:
        assert self.columns[: len(self.key)] == self.key, f"{self.name}: the key's columns come first"

    @cached_property
    def columns(self) -> tuple[str, ...]:
        """Real-table columns staged as they are stored."""
        return tuple(column for field in self.fields for column in _columns(field))

    @cached_property
    def staged_columns(self) -> tuple[str, ...]:
        return self.columns + tuple(child.column for child in self.children)

    @cached_property
    def _parts(self) -> tuple[Callable[[Any], Staged], ...]:
        """Line -> staged values, part by part: each run of plain fields read at once, then each stored field
        and each child list."""
        parts: list[Callable[[Any], Staged]] = []
        run: list[str] = []
        for field in self.fields:
            if isinstance(field, str):
                run.append(field)
                continue
            if run:
                parts.append(_read(*run))
                run = []
            parts.append(_staged(field.field, field.stage))
        if run:
            parts.append(_read(*run))
        parts += [_listed(child.from_field, child.stage) for child in self.children]
        return tuple(parts)

    def row(self, line: Any) -> Staged:
        """Line -> staged values: `columns`, then each child list as JSON. Raises Invalid."""
        values: Staged = ()
        for part in self._parts:
            values += part(line)
        return values

    @cached_property
    def _field_of_column(self) -> dict[str, str]:
        stored = {column: field.field for field in self.fields if isinstance(field, Stored) for column in field.columns}
        return stored | {child.column: child.from_field for child in self.children}

    def field_of(self, column: str) -> str:
        """The interchange field a staged column comes from."""
        return self._field_of_column.get(column, column)

    @property
    def stage(self) -> str:
        return f"stage_{self.name}"

    @property
    def scoped(self) -> bool:
        return self.owner is not None or "scope_key" in self.columns

    @property
    def owner_noun(self) -> str:
        return self.noun or self.name


def _columns(field: str | Stored) -> tuple[str, ...]:
    return (field,) if isinstance(field, str) else field.columns


def _read(*names: str) -> Callable[[Any], Staged]:
    """The values of these fields of a line, as a tuple."""
    if len(names) == 1:
        return lambda line: (getattr(line, names[0]),)
    return attrgetter(*names)


def _staged(name: str, stage: Callable[[Any], Staged]) -> Callable[[Any], Staged]:
    return lambda line: stage(getattr(line, name))


def _listed(name: str, stage: Callable[[Any], str]) -> Callable[[Any], Staged]:
    return lambda line: (stage(getattr(line, name)),)


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


def differing_fields(kind: Kind, first: Staged, second: Staged) -> list[str]:
    """The interchange fields in which two staged rows of one kind differ (lists compared as sets)."""
    as_sets = {child.column for child in kind.children if not child.ordered}
    fields: list[str] = []
    for column, a, b in zip(kind.staged_columns, first, second, strict=True):
        if column in as_sets:
            same = sorted(map(_hashable, orjson.loads(str(a)))) == sorted(map(_hashable, orjson.loads(str(b))))
        else:
            same = a == b
        field = kind.field_of(column)
        if not same and field not in fields:
            fields.append(field)
    return fields


def _hashable(item: Any) -> Any:
    return tuple(item) if isinstance(item, list) else item
