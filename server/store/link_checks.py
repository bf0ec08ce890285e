"""Step 3 of a merge (merge.py), and the checks that wait until every kind is written.

Every link of the staged lines still to write must name a stored object in the row's scope (or, for a
story's or experience's events, within it), and the kind's own rules must hold. Object refs, a source's
current version and an experience's formed events may point at any later kind: `after` checks them once
every kind is written. Each check finds the first offending line of its kind in source order, as a
`Found`; merge.py refuses the first of them all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from server.store.errors import ImportRejected
from server.store.kind_model import TARGETS, Kind, Link, RefLink

# Tables of the object types an object ref can name (an entity change is addressed `<entity>#<key>`).
REF_TABLES: Final[dict[str, str]] = {
    "story_line": "story_lines",
    "event": "events",
    "entity": "entities",
    "relation": "relations",
    "summary": "summaries",
    "source_reference": "source_references",
}
TO_WRITE: Final = "s.skip <> 1"
"""SQL: the staged row `s` is still to write (new, or changed in sync mode)."""


@dataclass(frozen=True, order=True)
class Found:
    """One refused line; the first by (source order, check order) is reported."""

    seq: int
    order: int
    error: ImportRejected = field(compare=False)


def links(conn: sqlite3.Connection, kind: Kind) -> list[Found]:
    """Step 3: every link of the lines still to write names a stored object of the row's scope, and the
    kind's own rules hold.

    One scan finds the first line with any bad link; only that line is then asked link by link
    what is wrong with it.
    """
    found: list[Found] = []
    for order, check in enumerate(kind.checks, start=3 + len(kind.links)):
        row = conn.execute(check.sql).fetchone()
        if row is not None:
            found.append(Found(row[0], order, ImportRejected(row[1], check.field, check.problem(row))))
    seq = _first_bad_link(conn, kind)
    if seq is None:
        return found
    if kind.owner is not None:
        target = TARGETS[kind.owner.target]
        column = kind.owner.column
        row = conn.execute(
            f"SELECT s.seq, s.location, s.{column} FROM {kind.stage} AS s"
            f" LEFT JOIN {target.table} AS x ON x.{target.key} = s.{column}"
            f" WHERE s.seq = ? AND x.{target.key} IS NULL",
            (seq,),
        ).fetchone()
        if row is not None:
            found.append(Found(row[0], 2, _missing(row[1], kind.owner.name, kind.owner.target, row[2])))
    join, scope = scope_of(kind)
    for order, link in enumerate(kind.links, start=3):
        target = TARGETS[link.target]
        if link.many:
            value, index, each = "j.value", "j.key", f" JOIN json_each(s.{link.column}) AS j"
        else:
            value, index, each = f"s.{link.column}", "NULL", ""
        other_scope = target.scoped and kind.scoped
        wrong = f"NOT {_within('x.scope_key', scope)}" if link.within else f"x.scope_key IS NOT {scope}"
        row = conn.execute(
            f"SELECT s.seq, s.location, {value}, {index}, x.{target.key} IS NOT NULL,"
            f" {'x.scope_key' if other_scope else 'NULL'}, {scope}"
            f" FROM {kind.stage} AS s{join}{each} LEFT JOIN {target.table} AS x ON x.{target.key} = {value}"
            f" WHERE s.seq = ? AND {value} IS NOT NULL AND (x.{target.key} IS NULL"
            f"{f' OR {wrong}' if other_scope else ''})"
            f"{' ORDER BY j.key' if link.many else ''} LIMIT 1",
            (seq,),
        ).fetchone()
        if row is not None:
            found.append(Found(row[0], order, _bad_link(kind, link, row)))
    return found


def _within(inner: str, outer: str) -> str:
    """SQL: scope `inner` lies within scope `outer` (the rule of the `scope_within` view, migrations/0005)."""
    return f"EXISTS (SELECT 1 FROM scope_within AS w WHERE w.inner_key = {inner} AND w.outer_key = {outer})"


def _first_bad_link(conn: sqlite3.Connection, kind: Kind) -> int | None:
    """The source position of the first line still to write with a missing or out-of-scope link."""
    bad: list[str] = []
    join, scope = "", scope_of(kind)[1]
    if kind.owner is not None:
        target = TARGETS[kind.owner.target]
        join = f" LEFT JOIN {target.table} AS o ON o.{target.key} = s.{kind.owner.column}"
        bad.append(f"o.{target.key} IS NULL")
    for link in kind.links:
        target = TARGETS[link.target]
        value = "j.value" if link.many else f"s.{link.column}"
        in_scope = ""
        if target.scoped and kind.scoped:
            in_scope = f" AND {_within('x.scope_key', scope)}" if link.within else f" AND x.scope_key IS {scope}"
        missing = f"NOT EXISTS (SELECT 1 FROM {target.table} AS x WHERE x.{target.key} = {value}{in_scope})"
        if link.many:
            bad.append(f"EXISTS (SELECT 1 FROM json_each(s.{link.column}) AS j WHERE {missing})")
        else:
            bad.append(f"({value} IS NOT NULL AND {missing})")
    if not bad:
        return None
    row = conn.execute(
        f"SELECT s.seq FROM {kind.stage} AS s{join} WHERE {TO_WRITE} AND ({' OR '.join(bad)}) ORDER BY s.seq LIMIT 1"
    ).fetchone()
    return None if row is None else int(row[0])


def after(conn: sqlite3.Connection, kind: Kind) -> list[Found]:
    """Checks of links that may point forward: run once every kind is written."""
    found: list[Found] = []
    for order, check in enumerate(kind.after):
        row = conn.execute(check.sql).fetchone()
        if row is not None:
            found.append(Found(row[0], order, ImportRejected(row[1], check.field, check.problem(row))))
    join, scope = scope_of(kind)
    for order, ref in enumerate(kind.refs, start=len(kind.after)):
        each, index = (f" JOIN json_each(s.{ref.field}) AS j", "j.key") if ref.many else ("", "NULL")
        stored_scope = _ref_scope(ref.type_sql, ref.id_sql)
        row = conn.execute(
            f"SELECT s.seq, s.location, {ref.type_sql}, {ref.id_sql}, {index}, {stored_scope}, {scope}"
            f" FROM {kind.stage} AS s{join}{each} WHERE {TO_WRITE} AND ({stored_scope}) IS NOT {scope}"
            f" ORDER BY s.seq{', j.key' if ref.many else ''} LIMIT 1"
        ).fetchone()
        if row is not None:
            found.append(Found(row[0], order, _bad_ref(kind, ref, row)))
    return found


def scope_of(kind: Kind) -> tuple[str, str]:
    """The join that finds a staged row's scope, and the SQL expression of that scope."""
    if kind.owner is not None:
        target = TARGETS[kind.owner.target]
        return f" JOIN {target.table} AS o ON o.{target.key} = s.{kind.owner.column}", "o.scope_key"
    if "scope_key" in kind.columns:
        return "", "s.scope_key"
    return "", "NULL"


def _ref_scope(type_sql: str, id_sql: str) -> str:
    """SQL: the scope of the stored object a ref names, NULL when there is none."""
    head = f"rtrim({id_sql}, replace({id_sql}, '#', ''))"  # up to and including the last '#'
    cases = " ".join(
        f"WHEN '{name}' THEN (SELECT scope_key FROM {table} WHERE id = {id_sql})" for name, table in REF_TABLES.items()
    )
    entity, association = f"substr({head}, 1, length({head}) - 1)", f"substr({id_sql}, length({head}) + 1)"
    change = (
        "WHEN 'entity_change' THEN (SELECT scope_key FROM entity_changes"
        f" WHERE entity_id = {entity} AND association_key = {association})"
    )
    return f"CASE {type_sql} {cases} {change} END"


def _missing(location: str, name: str, target: str, value: object) -> ImportRejected:
    if target == "scope":
        return ImportRejected(location, name, f"scope {value} is not declared: add a scope line for it")
    return ImportRejected(location, name, f"no {target} {value!r} in the file or the database")


def _bad_link(kind: Kind, link: Link, row: Sequence[Any]) -> ImportRejected:
    _, location, value, index, exists, other, scope = row
    name = link.name if index is None else f"{link.name}[{index}]"
    if not exists:
        return _missing(location, name, link.target, value)
    if link.within:
        return ImportRejected(
            location,
            name,
            f"{link.target} {value!r} belongs to scope {other}, which is not within this {kind.owner_noun}'s scope"
            f" {scope}; links across scopes are not allowed",
        )
    return _across(location, name, kind, link.target, value, other, scope)


def _bad_ref(kind: Kind, ref: RefLink, row: Sequence[Any]) -> ImportRejected:
    _, location, ref_type, ref_id, index, other, scope = row
    name = ref.field if index is None else f"{ref.field}[{index}]{ref.suffix}"
    if other is None:
        return _missing(location, name, ref_type, ref_id)
    return _across(location, name, kind, ref_type, ref_id, other, scope)


def _across(location: str, name: str, kind: Kind, target: str, value: object, other: str, scope: str) -> ImportRejected:
    return ImportRejected(
        location,
        name,
        f"{target} {value!r} belongs to scope {other}, but this {kind.owner_noun} belongs to scope {scope};"
        " links across scopes are not allowed",
    )
