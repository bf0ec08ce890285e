"""The second half of an import: staged lines checked and written kind by kind with set-based SQL.

Kinds go in KIND_ORDER, so the links a kind checks point at rows already in the real tables,
whether this import wrote them or they were stored before. In sync mode (server/store/sync.py) the
objects the source retired go first, and so do the stored event links of each story and experience
the source lists but that it no longer lists for them. Then, for each kind:

1. a line repeating an earlier line's key is skipped if its content is the same, refused if not;
2. a line whose key is already stored is skipped if its content is the same, refused if not (in
   sync mode, server/store/sync.py, it replaces the stored object instead);
3. every link of the remaining lines must name a stored object in the row's scope (or, for a
   story's or experience's events, within it), and the kind's own rules must hold (link_checks.py);
4. the remaining lines are inserted (or, in sync mode, update the stored object), with their child
   rows, in source order and in chunks.

Steps 1-3 refuse the first offending line of the kind in source order. Once every kind is written, a reference
stored by an earlier import must agree with the text of the version it names when this import stores that version
(step 5; a sync that repairs keeps and counts it). Object refs, a source's
current version and an experience's formed events may point at any later kind: they are checked once
every kind is written. Content is compared in SQL; a pair SQL finds different is compared again in
Python from the interchange lines (another writer may have stored the same JSON with other spacing)
before the line is refused, and that comparison names the fields that differ.

A staged row's `skip` says what happens to it: 0 new (inserted), 1 unchanged (skipped), 2 changed
(sync mode: replaces the stored object).
"""

from __future__ import annotations

import sqlite3
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Final

import orjson

from server.store import bulk_indexes, link_checks, sync
from server.store.errors import ImportRejected, StoreError
from server.store.kind_model import TARGETS, Invalid, Kind, Staged, differing_fields
from server.store.kinds import (
    KINDS,
    STORED_FRAGMENT,
    STORED_FRAGMENT_COUNTS,
    STORED_FRAGMENT_NOTES,
    stored_fragment_problem,
)
from server.store.kinds_stories import ORPHANED_THREAD, orphaned_thread
from server.store.lines import load_line
from server.store.link_checks import TO_WRITE, Found, scope_of
from server.store.progress import Progress
from server.store.staging import RETIRED
from server.store.sync import Retired, SyncPolicy

CHUNK_ROWS: Final = 20_000
"""Lines inserted per statement, so progress moves during a large kind."""

# The field that names a line's key, for "already defined with different content" errors.
KEY_FIELD: Final[dict[str, str]] = {
    "scope": "scope",
    "source_version": "version",
    "entity_revision": "result_id",
    "entity_change": "association_key",
    "story_event": "event_id",
    "experience_event": "event_id",
}
MOVABLE: Final = frozenset({"story", "story_event", "experience", "experience_event"})
"""Kinds a sync may move to another scope."""
NEW, SAME, CHANGED = 0, 1, 2
"""Values of a staged row's `skip`."""


@dataclass
class Merged:
    """What a merge wrote: new lines per kind, lines already stored unchanged, and (sync mode) updates."""

    written: dict[str, int] = field(default_factory=dict)
    unchanged: int = 0
    updated: dict[str, int] = field(default_factory=dict)
    retired: int = 0
    repaired: dict[str, int] = field(default_factory=dict)
    """Sync mode with `SyncPolicy.repair`: lines kept with what broke a rule made unknown, per `Check.note`."""


def merge(conn: sqlite3.Connection, counts: dict[str, int], progress: Progress, policy: SyncPolicy | None) -> Merged:
    """Check and write every staged line (after removing what a sync source retired)."""
    merged = Merged()
    (references_before,) = conn.execute("SELECT coalesce(max(rowid), 0) FROM source_references").fetchone()
    if policy is not None:
        merged.retired = _retire(conn) + _drop_owned_links(conn)
    progress.phase("writing", "lines", sum(counts.values()))
    done = 0
    for kind in KINDS.values():
        if counts[kind.name]:
            _index(conn, kind)
            if policy is not None and policy.repair:
                _repair(conn, kind, merged.repaired)
            _raise_first(
                _repeats(conn, kind)
                + _stored(conn, kind, policy)
                + _moved(conn, kind, policy)
                + link_checks.links(conn, kind)
            )
            new, changed = _insert(conn, kind, progress, done, replacing=policy is not None)
            merged.written[kind.name], merged.updated[kind.name] = new, changed
            merged.unchanged += counts[kind.name] - new - changed
            done += counts[kind.name]
    if counts["source_version"]:
        _raise_first(_stored_fragments(conn, policy, merged.repaired, references_before))
    for kind in KINDS.values():
        # In a sync an unchanged line may have lost links (_drop_owned_links): its kind's checks run too.
        if merged.written.get(kind.name) or merged.updated.get(kind.name) or (policy is not None and counts[kind.name]):
            _raise_first(link_checks.after(conn, kind))
    if policy is not None:
        _orphaned_threads(conn)
    progress.finish()
    merged.written = {name: count for name, count in merged.written.items() if count}
    merged.updated = {name: count for name, count in merged.updated.items() if count}
    return merged


def _repair(conn: sqlite3.Connection, kind: Kind, repaired: dict[str, int]) -> None:
    """Make what breaks a repairable rule of the kind unknown in its staged lines, before they are compared with
    what is stored (a sync then finds a row it repaired before unchanged), and count them per note."""
    for check in kind.checks:
        if check.repair:
            count = conn.execute(check.repair).rowcount
            if count > 0:
                repaired[check.note] = repaired.get(check.note, 0) + count


def _stored_fragments(
    conn: sqlite3.Connection, policy: SyncPolicy | None, repaired: dict[str, int], before: int
) -> list[Found]:
    """Step 5: a reference stored before this import (rowid up to `before`), naming a version this import wrote, must
    agree with its text (kinds.STORED_FRAGMENT). Refused at the version's line; a sync that repairs keeps it as it is,
    counted per rule (the tools already read its contradicted part as unknown)."""
    params = {"before": before}
    if policy is not None and policy.repair:
        counts = conn.execute(STORED_FRAGMENT_COUNTS, params).fetchone()
        for (_, note), count in zip(STORED_FRAGMENT_NOTES, counts, strict=True):
            if count > 0:
                repaired[note] = repaired.get(note, 0) + count
        return []
    row = conn.execute(STORED_FRAGMENT, params).fetchone()
    if row is None:
        return []
    return [Found(row[0], 0, ImportRejected(row[1], "text", stored_fragment_problem(row, sync=policy is not None)))]


def _retire(conn: sqlite3.Connection) -> int:
    """Sync mode: remove the stored objects the source retired; return how many were stored."""
    retired, after = 0, 0
    page = f"SELECT seq, location, kind, key, reason FROM {RETIRED} WHERE seq > ? ORDER BY seq LIMIT 1000"
    while rows := conn.execute(page, (after,)).fetchall():
        for _, location, kind, key, reason in rows:
            retired += sync.retire(conn, location, Retired(kind, tuple(orjson.loads(key)), reason))
        after = rows[-1][0]
    return retired


def _drop_owned_links(conn: sqlite3.Connection) -> int:
    """Sync mode: remove the stored links (sync.OWNED_LINKS) of each staged story and experience that its
    lines no longer list, and return how many; then those of one whose scope changed, which its lines
    write again in the new scope. Runs before anything is written, so a link that moved (an event's
    primary story) never meets its old place."""
    dropped = 0
    for name in sync.OWNED_LINKS:
        kind = KINDS[name]
        assert kind.owner is not None, "an owned link names its owner"
        column, owner, target = kind.owner.column, KINDS[kind.owner.target], TARGETS[kind.owner.target]
        key = ", ".join(kind.key)
        listed = f"{column} IN (SELECT {target.key} FROM {owner.stage})"
        unlisted = f"({key}) NOT IN (SELECT {key} FROM {kind.stage})"
        dropped += conn.execute(f"DELETE FROM {kind.table} WHERE {listed} AND {unlisted}").rowcount
        moved = (
            f"SELECT s.{target.key} FROM {owner.stage} AS s JOIN {target.table} AS d ON d.{target.key} = s.{target.key}"
            " WHERE d.scope_key IS NOT s.scope_key"
        )
        conn.execute(f"DELETE FROM {kind.table} WHERE {column} IN ({moved})")
    return dropped


def _orphaned_threads(conn: sqlite3.Connection) -> None:
    """Sync mode: no stored thread may lose its feature to a retirement or a change of scope."""
    row = conn.execute(ORPHANED_THREAD).fetchone()
    if row is not None:
        raise ImportRejected(row[0], "", orphaned_thread(row))


def _raise_first(found: list[Found]) -> None:
    if found:
        raise min(found).error


def _index(conn: sqlite3.Connection, kind: Kind) -> None:
    """Index the staged rows of a kind by key (and by what its rules look rows up by)."""
    conn.execute(f"CREATE INDEX temp.{kind.stage}_key ON {kind.stage} ({', '.join(kind.key)})")
    for column in kind.lookups:
        conn.execute(f"CREATE INDEX temp.{kind.stage}_{column} ON {kind.stage} ({column})")


def _repeats(conn: sqlite3.Connection, kind: Kind) -> list[Found]:
    """Step 1: lines repeating the key of an earlier line (compared in full, also in sync mode)."""
    stage = kind.stage
    earlier = f"{_key_match(kind, 'f', 's')} AND f.seq < s.seq"
    conn.execute(
        f"UPDATE {stage} AS s SET skip = {SAME} WHERE EXISTS"
        f" (SELECT 1 FROM {stage} AS f WHERE {earlier} AND {_same(kind, 's', 'f', stored=False)})"
    )
    first = f"(SELECT f.seq FROM {stage} AS f WHERE {earlier} ORDER BY f.seq LIMIT 1)"
    candidates = (
        f"SELECT s.seq, s.location, {first} AS first FROM {stage} AS s"
        f" WHERE s.skip = {NEW} AND s.seq > ? AND first IS NOT NULL ORDER BY s.seq LIMIT 1"
    )
    after = 0
    while row := conn.execute(candidates, (after,)).fetchone():
        seq, location, first_seq = row
        values = _staged(conn, kind, seq)
        fields = differing_fields(kind, values, _staged(conn, kind, first_seq))
        if fields:
            (where,) = conn.execute(f"SELECT location FROM {stage} WHERE seq = ?", (first_seq,)).fetchone()
            return [Found(seq, 0, _differs(kind, location, values, where, fields))]
        conn.execute(f"UPDATE {stage} SET skip = {SAME} WHERE seq = ?", (seq,))
        after = seq
    return []


def _stored(conn: sqlite3.Connection, kind: Kind, policy: SyncPolicy | None) -> list[Found]:
    """Step 2: lines whose key is already in the database: unchanged, refused, or (sync mode) changed."""
    stage, table = kind.stage, kind.table
    ignored = policy.ignored if policy is not None else frozenset()
    match = _key_match(kind, "r", "s")
    conn.execute(
        f"UPDATE {stage} AS s SET skip = {SAME} WHERE s.skip = {NEW} AND EXISTS"
        f" (SELECT 1 FROM {table} AS r WHERE {match} AND {_same(kind, 's', 'r', stored=True, ignored=ignored)})"
    )
    candidates = (
        f"SELECT s.seq, s.location FROM {stage} AS s WHERE s.skip = {NEW} AND s.seq > ?"
        f" AND EXISTS (SELECT 1 FROM {table} AS r WHERE {match}) ORDER BY s.seq LIMIT 1"
    )
    after = 0
    while row := conn.execute(candidates, (after,)).fetchone():
        seq, location = row
        values = _staged(conn, kind, seq)
        stored = load_line(conn, kind.name, _key(kind, values))
        try:
            fields = differing_fields(kind, values, kind.row(stored))
        except Invalid as bad:  # stored by another writer in a form import would refuse
            fields = [bad.field]
        fields = [name for name in fields if name not in ignored]
        if fields and (policy is None or kind.name not in sync.REPLACEABLE):
            return [Found(seq, 1, _differs(kind, location, values, "the database", fields))]
        conn.execute(f"UPDATE {stage} SET skip = ? WHERE seq = ?", (CHANGED if fields else SAME, seq))
        after = seq
    return []


def _moved(conn: sqlite3.Connection, kind: Kind, policy: SyncPolicy | None) -> list[Found]:
    """Sync mode: a changed object keeps its scope, unless it is a story or an experience (whose links
    `_drop_owned_links` rewrites in the new scope). Stored objects may link to any other one (a relation to an
    entity, an entity change to an event), and moving it would leave those links across scopes."""
    if policy is None or not kind.scoped or kind.name in MOVABLE:
        return []
    join, scope = scope_of(kind)
    row = conn.execute(
        f"SELECT s.seq, s.location, r.scope_key, {scope} FROM {kind.stage} AS s{join}"
        f" JOIN {kind.table} AS r ON {_key_match(kind, 'r', 's')}"
        f" WHERE s.skip = {CHANGED} AND r.scope_key IS NOT {scope} ORDER BY s.seq LIMIT 1"
    ).fetchone()
    if row is None:
        return []
    seq, location, stored, moved = row
    name = kind.owner.column if kind.owner is not None else "scope"
    message = (
        f"this {kind.name} is stored in scope {stored} and this line moves it to scope {moved}; a sync keeps an"
        f" object's scope (stored links to it would cross scopes): import into a new graph to change it"
    )
    return [Found(seq, 1, ImportRejected(location, name, message))]


def _insert(conn: sqlite3.Connection, kind: Kind, progress: Progress, done: int, *, replacing: bool) -> tuple[int, int]:
    """Step 4: write the lines still to write, chunk by chunk; return how many were new and how many changed.

    A changed line (sync mode) loses its stored child rows, its main row updates the stored one (links
    to it stay valid), and its child rows are written like a new line's. The kind's `release` runs
    first, so that no changed row takes what another one gives up.
    """
    stage = kind.stage
    counts = dict(conn.execute(f"SELECT skip, count(*) FROM {stage} GROUP BY skip").fetchall())
    new, changed = counts.get(NEW, 0), counts.get(CHANGED, 0)
    staged = sum(counts.values())
    join, scope = scope_of(kind)
    chunk = "s.seq > :after AND s.seq <= :upto"
    columns = kind.columns + (("scope_key",) if kind.owner is not None else ()) + tuple(c for c, _ in kind.derived)
    values = [f"s.{column}" for column in kind.columns] + ([scope] if kind.owner is not None else [])
    values += [sql for _, sql in kind.derived]
    named = ", ".join(f"{value} AS {column}" for value, column in zip(values, columns, strict=True))

    def rows(skip: int) -> str:
        return f"SELECT {named} FROM {stage} AS s{join} WHERE s.skip = {skip} AND {chunk}"

    statements = []
    if replacing and changed:
        for release in kind.release:
            conn.execute(release)
        statements += [child.delete(stage, f"s.skip = {CHANGED} AND {chunk}") for child in kind.children]
        statements.append(sync.update(kind.table, kind.key, columns, rows(CHANGED)))
    statements.append(f"INSERT INTO {kind.table} ({', '.join(columns)}) {rows(NEW)}")
    for child in kind.children:
        each = f"FROM {stage} AS s{join} JOIN json_each(s.{child.column}) AS j"
        statements.append(f"{child.insert(scope)} {each} WHERE {TO_WRITE} AND {chunk}")
    next_upto = f"SELECT seq FROM {stage} WHERE skip <> {SAME} AND seq > ? ORDER BY seq LIMIT 1 OFFSET {CHUNK_ROWS - 1}"
    after, written = 0, 0
    progress.update(done + staged - new - changed)
    with ExitStack() as bulk:
        for table, adding in _rows_to_write(conn, kind, new + changed).items():
            bulk.enter_context(bulk_indexes.built_after(conn, table, adding))
        while written < new + changed:
            row = conn.execute(next_upto, (after,)).fetchone()
            upto = row[0] if row is not None else 2**62
            try:
                for sql in statements:
                    conn.execute(sql, {"after": after, "upto": upto})
            except sqlite3.IntegrityError as exc:  # the checks above should leave nothing for the schema to refuse
                raise StoreError(
                    f"import aborted, nothing was written: the database refused a {kind.name} line: {exc}"
                ) from None
            written = min(written + CHUNK_ROWS, new + changed)
            after = upto
            progress.update(done + staged - new - changed + written)
    return int(new), int(changed)


def _rows_to_write(conn: sqlite3.Connection, kind: Kind, lines: int) -> dict[str, int]:
    """How many rows step 4 writes to each table: one per line to its kind's table, one per list item to a
    child table."""
    rows = {kind.table: lines}
    for child in kind.children:
        (items,) = conn.execute(
            f"SELECT coalesce(sum(json_array_length(s.{child.column})), 0) FROM {kind.stage} AS s WHERE {TO_WRITE}"
        ).fetchone()
        rows[child.table] = rows.get(child.table, 0) + int(items)
    return rows


def _key_match(kind: Kind, a: str, b: str) -> str:
    return " AND ".join(f"{a}.{column} = {b}.{column}" for column in kind.key)


def _same(kind: Kind, a: str, b: str, *, stored: bool, ignored: frozenset[str] = frozenset()) -> str:
    """SQL: staged row `a` has the content of `b`, a staged row or (when `stored`) a stored row.

    Columns of the `ignored` interchange fields are not compared (sync mode).
    """
    parts = [f"{a}.{column} IS {b}.{column}" for column in kind.columns if kind.field_of(column) not in ignored]
    for child in kind.children:
        mine, theirs = child.staged(a), child.stored(b) if stored else child.staged(b)
        parts.append(f"NOT EXISTS ({mine} EXCEPT {theirs}) AND NOT EXISTS ({theirs} EXCEPT {mine})")
    return " AND ".join(parts)


def _staged(conn: sqlite3.Connection, kind: Kind, seq: int) -> Staged:
    row = conn.execute(f"SELECT {', '.join(kind.staged_columns)} FROM {kind.stage} WHERE seq = ?", (seq,)).fetchone()
    return tuple(row)


def _key(kind: Kind, values: Staged) -> tuple[str, ...]:
    return tuple(str(values[kind.staged_columns.index(column)]) for column in kind.key)


def _differs(kind: Kind, location: str, values: Staged, where: str, fields: list[str]) -> ImportRejected:
    fix = (
        "this import does not change it: give the new content its own id, or import into a new database"
        if where == "the database"
        else f"keep one of the two{' lines' if where.startswith('line ') else ''}"
    )
    return ImportRejected(
        location,
        KEY_FIELD.get(kind.name, "id"),
        f"{kind.name} {'/'.join(_key(kind, values))!r} is already defined by {where} with different content"
        f" (differs in: {', '.join(fields)}); {fix}",
    )
