"""Stored rows read back as interchange lines: one object at a time (import) or a whole kind (export).

The importer compares an incoming line with `load_line(...)` of the same key, and the exporter
writes `iter_lines(...)`, so both agree on what a stored object's content is. Both read the columns
and fields that kinds.py declares for the kind (the same declaration the importer stages lines
with); only the child rows read back into list fields (evidence, facts, text chunks) are queried
here. A saved fragment's range and source length come back as both tools show them (SHOWN): a stored row
may hold a range that the text of its own version, stored by a later import, contradicts, and an import
refuses such a line, so an export writing it could not be imported again.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any, Final

from pydantic import ValidationError

from server.contracts.interchange import LINE, Line
from server.reader.saved_range import own_length_sql, saved_range, text_differs_sql
from server.store.errors import StoreError
from server.store.kind_model import Kind, Stored
from server.store.kinds import KINDS
from server.store.merge_join import RowsByKey

Key = tuple[str, ...]
Row = sqlite3.Row

# Child queries: `_ONE` by the parent's key (`:k0`, ...), `_ALL` in the parents' key order for export.
# Child rows start with the parent's key.
CHUNKS_ONE: Final = (
    "SELECT source_id, version, text FROM source_chunks WHERE source_id = :k0 AND version = :k1 ORDER BY start"
)
CHUNKS_ALL: Final = "SELECT source_id, version, text FROM source_chunks ORDER BY source_id, version, start"
EVENT_ENTITIES_ONE: Final = "SELECT event_id, entity_id FROM event_entities WHERE event_id = :k0 ORDER BY entity_id"
EVENT_ENTITIES_ALL: Final = "SELECT event_id, entity_id FROM event_entities ORDER BY event_id, entity_id"
SUMMARY_FACTS_ONE: Final = (
    "SELECT owner_id, object_type, object_id FROM fact_links"
    " WHERE owner_type = 'summary' AND owner_id = :k0 ORDER BY object_type, object_id"
)
SUMMARY_FACTS_ALL: Final = (
    "SELECT owner_id, object_type, object_id FROM fact_links"
    " WHERE owner_type = 'summary' ORDER BY owner_id, object_type, object_id"
)
LEAF_FACTS_ONE: Final = (
    "SELECT owner_id, object_type, object_id, description FROM fact_links"
    " WHERE owner_type = 'leaf' AND owner_id = :k0 ORDER BY object_type, object_id"
)
LEAF_FACTS_ALL: Final = (
    "SELECT owner_id, object_type, object_id, description FROM fact_links"
    " WHERE owner_type = 'leaf' ORDER BY owner_id, object_type, object_id"
)
# Evidence links of objects addressed by one id. The owner type is a fixed word from this module.
OBJECT_SOURCES_ONE: Final = (
    "SELECT object_id, source_reference_id FROM object_sources"
    " WHERE object_type = :object_type AND object_id = :k0 ORDER BY source_reference_id"
)
OBJECT_SOURCES_ALL: Final = (
    "SELECT object_id, source_reference_id FROM object_sources"
    " WHERE object_type = :object_type ORDER BY object_id, source_reference_id"
)
# Entity changes are addressed as '<entity_id>#<association_key>'; joining keeps export in their key order.
CHANGE_SOURCES_ONE: Final = (
    "SELECT :k0 AS entity_id, :k1 AS association_key, source_reference_id FROM object_sources"
    " WHERE object_type = 'entity_change' AND object_id = :k0 || '#' || :k1 ORDER BY source_reference_id"
)
CHANGE_SOURCES_ALL: Final = (
    "SELECT c.entity_id, c.association_key, s.source_reference_id FROM entity_changes AS c"
    " JOIN object_sources AS s"
    " ON s.object_type = 'entity_change' AND s.object_id = c.entity_id || '#' || c.association_key"
    " ORDER BY c.entity_id, c.association_key, s.source_reference_id"
)
# An entity revision's own evidence (null when none was stored: SHOWN below).
REVISION_SOURCES_ONE: Final = (
    "SELECT entity_id, result_id, source_reference_id FROM entity_revision_sources"
    " WHERE entity_id = :k0 AND result_id = :k1 ORDER BY source_reference_id"
)
REVISION_SOURCES_ALL: Final = (
    "SELECT entity_id, result_id, source_reference_id FROM entity_revision_sources"
    " ORDER BY entity_id, result_id, source_reference_id"
)


@dataclasses.dataclass(frozen=True)
class _Child:
    """Child rows read back into one field of their parent's line."""

    field: str
    one: str
    every: str
    load: Callable[[list[Row]], Any]
    params: dict[str, str] = dataclasses.field(default_factory=dict)


def _last(rows: list[Row]) -> list[Any]:
    return [row[-1] for row in rows]


def _text(rows: list[Row]) -> str:
    return "".join(chunk["text"] for chunk in rows)


def _fact_refs(rows: list[Row]) -> list[dict[str, Any]]:
    return [{"type": fact["object_type"], "id": fact["object_id"]} for fact in rows]


def _facts(rows: list[Row]) -> list[dict[str, Any]]:
    return [
        {"object_ref": {"type": fact["object_type"], "id": fact["object_id"]}, "description": fact["description"]}
        for fact in rows
    ]


def _evidence(object_type: str) -> _Child:
    return _Child("source_reference_ids", OBJECT_SOURCES_ONE, OBJECT_SOURCES_ALL, _last, {"object_type": object_type})


CHILDREN: Final[dict[str, tuple[_Child, ...]]] = {
    "source_version": (_Child("text", CHUNKS_ONE, CHUNKS_ALL, _text),),
    "entity": (_evidence("entity"),),
    "entity_revision": (_Child("source_reference_ids", REVISION_SOURCES_ONE, REVISION_SOURCES_ALL, _last),),
    "event": (_Child("entity_ids", EVENT_ENTITIES_ONE, EVENT_ENTITIES_ALL, _last), _evidence("event")),
    "entity_change": (_Child("source_reference_ids", CHANGE_SOURCES_ONE, CHANGE_SOURCES_ALL, _last),),
    "summary": (_Child("fact_refs", SUMMARY_FACTS_ONE, SUMMARY_FACTS_ALL, _fact_refs), _evidence("summary")),
    "relation": (_evidence("relation"),),
    "leaf": (_Child("facts", LEAF_FACTS_ONE, LEAF_FACTS_ALL, _facts),),
}
"""The fields of each kind read back from child rows: its lists, and a source version's text (a scope's
projects come back from its key)."""


def _shown_fragment(line: dict[str, Any], row: Row) -> None:
    """A source reference's range and source length as read_source and get_context show them (saved_range.py):
    unknown (null) where the stored text of its own version contradicts them, as an import would refuse them."""
    checked = saved_range(
        row["fragment"],
        row["fragment_start"],
        row["fragment_end"],
        row["source_length"],
        row["source_version"],
        row["own_length"],
        row["own_text_differs"],
    )
    line["fragment"] = {"text": row["fragment"], "start": checked.start, "end": checked.end}
    line["source_length"] = checked.length


def _revision_evidence(line: dict[str, Any], row: Row) -> None:
    """An entity revision without a stored evidence list has null, not `[]` (which is stored empty)."""
    if not row["sources_stored"]:
        line["source_reference_ids"] = None


SHOWN: Final[dict[str, tuple[tuple[str, ...], Callable[[dict[str, Any], Row], None]]]] = {
    "entity_revision": ((), _revision_evidence),
    "source_reference": (
        (
            f"{own_length_sql('source_references')} AS own_length",
            f"{text_differs_sql('source_references')} AS own_text_differs",
        ),
        _shown_fragment,
    ),
}
"""Kinds whose stored values are read back as the tools show them, or whose line a stored column changes: the
columns that also tell (read in the same statement) and how the line is then corrected."""


class _Reader:
    """How one kind is read: its queries, key width, child queries and row-to-line mapping, from its `Kind`."""

    def __init__(self, kind: Kind) -> None:
        extra, shown = SHOWN.get(kind.name, ((), None))
        self.shown: Callable[[dict[str, Any], Row], None] | None = shown
        select = f"SELECT {', '.join(kind.columns + extra)} FROM {kind.table}"
        self.one = select + " WHERE " + " AND ".join(f"{column} = :k{i}" for i, column in enumerate(kind.key))
        self.every = select + f" ORDER BY {', '.join(kind.key)}"
        self.width = len(kind.key)
        self.name = kind.name
        self.plain = tuple(field for field in kind.fields if isinstance(field, str))
        self.loaded = tuple(
            (field.field, field.load) for field in kind.fields if isinstance(field, Stored) and field.load is not None
        )
        self.children = CHILDREN.get(kind.name, ())

    def build(self, row: Row, children: list[list[Row]]) -> dict[str, Any]:
        line = {"kind": self.name, **{name: row[name] for name in self.plain}}
        line |= {name: load(row) for name, load in self.loaded}
        line |= {child.field: child.load(rows) for child, rows in zip(self.children, children, strict=True)}
        if self.shown is not None:
            self.shown(line, row)
        return line


READERS: Final[dict[str, _Reader]] = {name: _Reader(kind) for name, kind in KINDS.items()}


def _line(kind: str, row: Row, children: list[list[Row]]) -> Line:
    spec = READERS[kind]
    try:
        return LINE.validate_python(spec.build(row, children))
    except ValidationError as exc:
        key = "/".join(str(row[i]) for i in range(spec.width))
        raise StoreError(f"stored {kind} {key!r} is not a valid interchange line: {exc.errors()[0]['msg']}") from None


def load_line(conn: sqlite3.Connection, kind: str, key: Key) -> Line | None:
    """The stored object with this key as its interchange line, or None when there is none."""
    spec = READERS[kind]
    params = {f"k{i}": part for i, part in enumerate(key)}
    row = conn.execute(spec.one, params).fetchone()
    if row is None:
        return None
    children = [conn.execute(child.one, params | child.params).fetchall() for child in spec.children]
    return _line(kind, row, children)


def iter_lines(conn: sqlite3.Connection, kind: str) -> Iterator[Line]:
    """Every stored object of one kind in key order, children merged in without a query per object."""
    spec = READERS[kind]
    streams = [RowsByKey(conn.execute(child.every, child.params)) for child in spec.children]
    for row in conn.execute(spec.every):
        key = tuple(row[i] for i in range(spec.width))
        yield _line(kind, row, [stream.of(*key) for stream in streams])
