"""The rows get_context reads: each object's stored content beside its uniform row, all in one scope.

A unit pairs the content (what the fragments are cut from) with the object's uniform row from
objects.object_rows, the same row every tool reports; content without a uniform row is not read. A
successful leaf's independent description is its own unit, id 'leaf:<leaf_id>:<object_id>'.

A selection reads the objects around its target without their content (RowLoader(content=False)): there may
be thousands, it needs only their rows, evidence ids and the few stored fields its header and gaps read
(Unit.value): an entity's type and work status (ENTITY_FIELDS), a source reference's type and availability
(SOURCE_REFERENCE_FIELDS), a summary's open items (SUMMARY_FIELDS), an entity change's event (CHANGE_FIELDS_OF_*:
its events are selected too), a relation's ends, type and reason (RELATION_FIELDS_*: the header quotes the
reasons of the relations and conflicts it lists). A page reads the content of its own objects by key. The events
a story or experience lists are read as rows alone (RowLoader.listed_events).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aiosqlite
import orjson

from server.contracts.base import scope_from_key
from server.reader.context_rows_sql import (
    CHANGE_FIELDS_OF_ENTITIES,
    CHANGE_FIELDS_OF_EVENTS,
    CHANGES_OF_ENTITIES,
    CHANGES_OF_EVENTS,
    ENTITIES_BY_ID,
    ENTITY_FIELDS,
    ENTITY_REVISIONS_OF,
    EVENT_ENTITY_IDS,
    EVENTS_BY_ID,
    LEAF_FACTS_OF,
    MEMORY_ITEMS_FOR,
    RELATION_FIELDS_BY_ID,
    RELATION_FIELDS_TOUCHING,
    RELATIONS_BY_ID,
    RELATIONS_TOUCHING,
    SOURCE_REFERENCE_FIELDS,
    SOURCE_REFERENCES_BY_ID,
    STORY_LINES_BY_ID,
    SUMMARIES_BY_ID,
    SUMMARY_FACT_REFS,
    SUMMARY_FIELDS,
)
from server.reader.context_stories import experience_data, story_data
from server.reader.db import json_ids
from server.reader.objects import (
    Key,
    ObjectRow,
    evidence,
    object_rows,
    rows_by_id,
    source_reference_ids,
    split_change_id,
)
from server.reader.saved_range import saved_range

Ref = tuple[str, str]


@dataclass
class Unit:
    """One stored graph object row: its uniform row, content data and how it relates to the target."""

    row: ObjectRow
    data: dict[str, Any] | None
    """Its stored content; None when it was read without (an object around a selection's target)."""
    sources: list[str] | None
    """Its evidence ids; None when not read (an event a story or experience lists: read on its own item)."""
    role: str = "target"
    basis: str = "row"
    """Whose evidence `sources` is: 'row' (its own) or 'object' (objects.Evidence.of: an entity revision that
    stored none, and a leaf's description, show the object's current evidence, marked so)."""
    describes: Ref | None = None
    leaf_id: str | None = None
    ends: tuple[Ref, Ref] | None = None
    """For a relation: (from, to)."""
    relation_type: str | None = None
    ends_in_scope: tuple[bool, bool] = (True, True)
    fields: dict[str, Any] | None = None
    """Read without its content: the few stored fields a selection reads instead (module docstring)."""

    @property
    def ref(self) -> Ref:
        return (self.row.object_type, self.row.object_id)

    @property
    def key(self) -> Key:
        return self.row.key

    @property
    def label(self) -> str | None:
        return self.row.title

    @property
    def content(self) -> dict[str, Any]:
        if self.data is None:
            raise RuntimeError(f"get_context: the content of {self.key} was not read")
        return self.data

    @property
    def source_ids(self) -> list[str]:
        if self.sources is None:
            raise RuntimeError(f"get_context: the evidence of {self.key} was not read")
        return self.sources

    def value(self, name: str) -> Any:
        """One stored field: from the content, or from the fields read instead of it."""
        found = self.data if self.data is not None else self.fields
        if found is None or name not in found:
            raise RuntimeError(f"get_context: {name} of {self.key} was not read")
        return found[name]


@dataclass(frozen=True)
class Memory:
    memory_id: str
    project_id: str | None
    memory_type: str
    confirmation_state: str
    updated_at: str
    data: dict[str, Any]


class RowLoader:
    """Unit loaders bound to one connection and one scope; primary rows are cached by ref. With content False,
    entities, events, relations, summaries, source references and entity changes are read without their content
    (module docstring); a target's own rows (entity_revisions, leaf_facts) always with it."""

    def __init__(self, conn: aiosqlite.Connection, scope_key: str, *, content: bool = True) -> None:
        self.conn = conn
        self.scope_key = scope_key
        self.content = content
        self.primary_cache: dict[Ref, Unit | None] = {}

    async def rows(self, sql: str, **params: Any) -> list[aiosqlite.Row]:
        values = {k: (json_ids(v) if isinstance(v, list | set) else v) for k, v in params.items()}
        return list(await self.conn.execute_fetchall(sql, values))

    async def column(self, sql: str, **params: Any) -> list[str]:
        return [row[0] for row in await self.rows(sql, scope_key=self.scope_key, **params)]

    async def primary(self, refs: Iterable[Ref]) -> dict[Ref, Unit | None]:
        """The primary row of each ref in this scope (an entity's current projection), or None."""
        refs = list(refs)
        wanted: dict[str, set[str]] = {}
        for ref in refs:
            if ref not in self.primary_cache:
                wanted.setdefault(ref[0], set()).add(ref[1])
        for object_type, ids in wanted.items():
            loaded = await self._primary_of_type(object_type, sorted(ids))
            for object_id in ids:
                self.primary_cache[(object_type, object_id)] = loaded.get(object_id)
        return {ref: self.primary_cache[ref] for ref in refs}

    async def _primary_of_type(self, object_type: str, ids: list[str]) -> dict[str, Unit]:
        if object_type == "entity":
            units = await self.entities(ids)
        elif object_type == "event":
            units = await self.events(ids)
        elif object_type == "relation":
            units = await self._relations((RELATIONS_BY_ID, RELATION_FIELDS_BY_ID), ids=ids)
        elif object_type == "summary":
            units = await self.summaries(ids)
        elif object_type == "source_reference":
            units = await self.source_references(ids)
        elif object_type == "story_line":
            units = await self.story_lines(ids)
        elif object_type == "entity_change":
            owners = {p[0] for i in ids if (p := split_change_id(i))}
            units = [u for u in await self.changes_of_entities(sorted(owners)) if u.row.object_id in ids]
        elif object_type == "story":
            units = await self._owned(object_type, ids, await story_data(self.conn, self.scope_key, ids))
        elif object_type == "experience":
            units = await self._owned(object_type, ids, await experience_data(self.conn, self.scope_key, ids))
        else:
            units = []
        return {u.row.object_id: u for u in units}

    async def _owned(self, object_type: str, ids: list[str], data: dict[str, dict[str, Any]]) -> list[Unit]:
        """Stories and experiences: their content is built by context_stories; they hold no evidence of their own
        (each listed event carries its own, in its own scope)."""
        uniform = await object_rows(self.conn, self.scope_key, [(object_type, i, "") for i in ids])
        return [Unit(uniform[(object_type, i, "")], data[i], []) for i in ids if (object_type, i, "") in uniform]

    async def _paired(self, found: list[aiosqlite.Row], keys: list[Key]) -> list[tuple[aiosqlite.Row, ObjectRow]]:
        """Each content row (keyed by `keys`, in order) with its uniform row; one without it is not read."""
        uniform = await object_rows(self.conn, self.scope_key, keys)
        return [(r, uniform[key]) for r, key in zip(found, keys, strict=True) if key in uniform]

    async def _sources(self, object_type: str, ids: list[str]) -> dict[str, list[str]]:
        if not ids:
            return {}
        return await source_reference_ids(self.conn, self.scope_key, object_type, ids)

    async def story_lines(self, ids: list[str]) -> list[Unit]:
        found = await self.rows(STORY_LINES_BY_ID, ids=ids, scope_key=self.scope_key)
        units = []
        for r, row in await self._paired(found, [("story_line", r["id"], "") for r in found]):
            data = {
                "id": r["id"],
                "scope": scope_from_key(r["scope_key"]).model_dump(),
                "topic": r["topic"],
                "recorded_at": r["recorded_at"],
                "revision": r["revision"],
            }
            units.append(Unit(row, data, []))
        return units

    async def _fields(self, sql: str, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The fields read instead of the content (ENTITY_FIELDS, ...), by id: the first column."""
        found = await self.rows(sql, ids=ids, scope_key=self.scope_key)
        return {r[0]: dict(zip(r.keys()[1:], tuple(r)[1:], strict=True)) for r in found}

    async def entities(self, ids: list[str]) -> list[Unit]:
        if not self.content:
            instead = await self._fields(ENTITY_FIELDS, ids)
            sources = await self._sources("entity", list(instead))
            uniform = await object_rows(self.conn, self.scope_key, [("entity", i, "") for i in instead])
            return [
                Unit(uniform[key], None, sources.get(i, []), fields=found)
                for i, found in instead.items()
                if (key := ("entity", i, "")) in uniform
            ]
        found = await self.rows(ENTITIES_BY_ID, ids=ids, scope_key=self.scope_key)
        sources = await self._sources("entity", [r["id"] for r in found])
        units = []
        for r, row in await self._paired(found, [("entity", r["id"], "") for r in found]):
            fields = ("id", "story_line_id", "entity_type", "canonical_label", "description", "confirmation_state")
            data = {name: r[name] for name in (*fields, "decision_status", "work_status", "updated_at", "revision")}
            data["source_reference_ids"] = sources.get(r["id"], [])
            units.append(Unit(row, data, data["source_reference_ids"]))
        return units

    async def entity_revisions(self, entity_id: str) -> list[Unit]:
        found = await self.rows(ENTITY_REVISIONS_OF, entity_id=entity_id, scope_key=self.scope_key)
        if not found:
            return []
        stored = await evidence(self.conn, self.scope_key, "entity", [entity_id])
        units = []
        for r, row in await self._paired(found, [("entity", entity_id, r["result_id"]) for r in found]):
            fields = ("entity_id", "result_id", "revision", "canonical_label", "description", "confirmation_state")
            data = {name: r[name] for name in (*fields, "recorded_at")}
            # The content is the stored row: null when it has no list of its own (unknown, not empty).
            data["source_reference_ids"] = stored.revisions.get((entity_id, r["result_id"]))
            sources, basis = stored.of(row)
            units.append(Unit(row, data, sources, basis=basis))
        return units

    async def leaf_facts(self, object_type: str, object_id: str, described: ObjectRow | None) -> list[Unit]:
        """Each successful leaf's own description of the object. A leaf stores no evidence of its own (the GoodBuddy
        importer drops the app's, docs/interchange.md), so what it rested on is unknown: each shows the object's
        current evidence marked 'object' (objects.Evidence.of), as search shows a leaf's row, never `[]` as if it
        had none. One evidence query for all of them.

        Nor does a leaf store an event time: what it describes happened when the object did, so its row takes the
        event time of `described`, the object's own row (None: no row of it in this scope, so unknown), as an entity
        change's row takes its event's. Its review and record times stay its own. Without this, a dated event's
        leaf description sat among the undated items of the timeline and a time_range on event_time left it out
        (counted as having no time) while keeping its event."""
        params = {"object_type": object_type, "object_id": object_id, "scope_key": self.scope_key}
        found = await self.rows(LEAF_FACTS_OF, **params)
        if not found:
            return []
        stored = await evidence(self.conn, self.scope_key, object_type, [object_id])
        units = []
        for r in found:
            data = {
                "leaf_id": r["owner_id"],
                "result_id": r["result_id"],
                "object_ref": {"type": object_type, "id": object_id},
                "description": r["description"],
            }
            row = ObjectRow(
                object_type,
                f"leaf:{r['owner_id']}:{object_id}",
                r["result_id"],
                self.scope_key,
                "leaf",
                event_time_start=described.event_time_start if described else None,
                event_time_end=described.event_time_end if described else None,
                event_time_precision=described.event_time_precision if described else None,
                event_time_basis=described.event_time_basis if described else None,
                review_generated_at=r["review_generated_at"],
                recorded_at=r["recorded_at"],
            )
            # The rule search applies to the leaf's row, which carries the described object's id.
            sources, basis = stored.of(ObjectRow(object_type, object_id, r["result_id"], self.scope_key, "leaf"))
            units.append(
                Unit(row, data, sources, basis=basis, describes=(object_type, object_id), leaf_id=r["owner_id"])
            )
        return units

    async def events(self, ids: list[str]) -> list[Unit]:
        if not self.content:
            # The units below without their content: an event has one only with its uniform row, which this reads.
            rows = await rows_by_id(self.conn, self.scope_key, "event", ids)
            sources = await self._sources("event", list(rows))
            return [Unit(row, None, sources.get(event_id, [])) for event_id, row in rows.items()]
        found = await self.rows(EVENTS_BY_ID, ids=ids, scope_key=self.scope_key)
        event_ids = [r["id"] for r in found]
        entity_ids: dict[str, list[str]] = {}
        if event_ids:
            for event_id, entity_id in await self.rows(EVENT_ENTITY_IDS, ids=event_ids):
                entity_ids.setdefault(event_id, []).append(entity_id)
        sources = await self._sources("event", event_ids)
        units = []
        for r, row in await self._paired(found, [("event", r["id"], r["result_id"]) for r in found]):
            data = {
                name: r[name] for name in ("id", "result_id", "story_line_id", "event_type", "title", "description")
            }
            data["event_time"] = row.event_interval
            data |= {name: r[name] for name in ("recorded_at", "confirmation_state", "revision")}
            data["entity_ids"] = entity_ids.get(r["id"], [])
            data["source_reference_ids"] = sources.get(r["id"], [])
            units.append(Unit(row, data, data["source_reference_ids"]))
        return units

    async def listed_events(self, ids: list[str]) -> list[Unit]:
        """Events a story or experience lists, as rows alone: each carries its evidence on its own item."""
        rows = await rows_by_id(self.conn, self.scope_key, "event", ids)
        return [Unit(row, None, None) for row in rows.values()]

    async def changes_of_entities(self, entity_ids: list[str]) -> list[Unit]:
        return await self._changes((CHANGES_OF_ENTITIES, CHANGE_FIELDS_OF_ENTITIES), entity_ids)

    async def changes_of_events(self, event_ids: list[str]) -> list[Unit]:
        return await self._changes((CHANGES_OF_EVENTS, CHANGE_FIELDS_OF_EVENTS), event_ids)

    async def _changes(self, sql: tuple[str, str], ids: list[str]) -> list[Unit]:
        """`sql`: the query of the content and the one of the fields read instead of it (event_id)."""
        found = await self.rows(sql[0] if self.content else sql[1], ids=ids, scope_key=self.scope_key)
        change_ids = [f"{r['entity_id']}#{r['association_key']}" for r in found]
        sources = await self._sources("entity_change", change_ids)
        keys = [("entity_change", i, r["result_id"]) for i, r in zip(change_ids, found, strict=True)]
        units = []
        for r, row in await self._paired(found, keys):
            evidence = sources.get(row.object_id, [])
            if not self.content:
                units.append(Unit(row, None, evidence, fields={"event_id": r["event_id"]}))
                continue
            fields = ("entity_id", "association_key", "result_id", "event_id", "change_type", "description")
            data = {name: r[name] for name in fields}
            for name in ("entity_revision", "applicable_from", "applicable_to", "confirmation_state", "recorded_at"):
                data[name] = r[name]
            data["source_reference_ids"] = evidence
            units.append(Unit(row, data, evidence))
        return units

    async def relations_touching(self, object_type: str, ids: list[str]) -> list[Unit]:
        sql = (RELATIONS_TOUCHING, RELATION_FIELDS_TOUCHING)
        return await self._relations(sql, object_type=object_type, ids=ids)

    async def _relations(self, sql: tuple[str, str], **params: Any) -> list[Unit]:
        """`sql`: the query of the content and the one of the fields read instead of it (the ends, the type and
        the reason)."""
        found = await self.rows(sql[0] if self.content else sql[1], scope_key=self.scope_key, **params)
        sources = await self._sources("relation", [r["id"] for r in found])
        units = []
        for r, row in await self._paired(found, [("relation", r["id"], r["result_id"]) for r in found]):
            from_ref, to_ref = (r["from_type"], r["from_id"]), (r["to_type"], r["to_id"])
            ends, relation_type, evidence = (from_ref, to_ref), r["relation_type"], sources.get(r["id"], [])
            if not self.content:
                fields = {"reason": r["reason"]}
                units.append(Unit(row, None, evidence, ends=ends, relation_type=relation_type, fields=fields))
                continue
            data = {
                "id": r["id"],
                "result_id": r["result_id"],
                "from_ref": {"type": from_ref[0], "id": from_ref[1]},
                "to_ref": {"type": to_ref[0], "id": to_ref[1]},
            }
            data |= {name: r[name] for name in ("relation_type", "reason", "confirmation_state", "recorded_at")}
            data["revision"] = r["revision"]
            data["source_reference_ids"] = evidence
            units.append(Unit(row, data, evidence, ends=ends, relation_type=relation_type))
        return units

    async def summaries(self, ids: list[str]) -> list[Unit]:
        if not self.content:
            rows = await rows_by_id(self.conn, self.scope_key, "summary", ids)
            found = await self.rows(SUMMARY_FIELDS, ids=list(rows), scope_key=self.scope_key)
            open_items = {r["id"]: _json_or_text(r["open_items"]) for r in found}
            sources = await self._sources("summary", list(rows))
            return [
                Unit(row, None, sources.get(i, []), fields={"open_items": open_items[i]}) for i, row in rows.items()
            ]
        found = await self.rows(SUMMARIES_BY_ID, ids=ids, scope_key=self.scope_key)
        summary_ids = [r["id"] for r in found]
        facts: dict[str, list[dict[str, str]]] = {}
        if summary_ids:
            for owner_id, object_type, object_id in await self.rows(SUMMARY_FACT_REFS, ids=summary_ids):
                facts.setdefault(owner_id, []).append({"type": object_type, "id": object_id})
        sources = await self._sources("summary", summary_ids)
        units = []
        for r, row in await self._paired(found, [("summary", r["id"], r["result_id"]) for r in found]):
            bounds = {"from": r["interval_from"], "to": r["interval_to"]}
            data = {
                "id": r["id"],
                "result_id": r["result_id"],
                "interval": {name: value for name, value in bounds.items() if value is not None} or None,
                "body": r["body"],
                "open_items": _json_or_text(r["open_items"]),
                "recorded_at": r["recorded_at"],
                "revision": r["revision"],
                "fact_refs": facts.get(r["id"], []),
                "source_reference_ids": sources.get(r["id"], []),
            }
            units.append(Unit(row, data, data["source_reference_ids"]))
        return units

    async def source_references(self, ids: list[str]) -> list[Unit]:
        if not self.content:
            rows = await rows_by_id(self.conn, self.scope_key, "source_reference", ids)
            instead = await self._fields(SOURCE_REFERENCE_FIELDS, list(rows))
            return [Unit(row, None, [i], fields=instead[i]) for i, row in rows.items()]
        found = await self.rows(SOURCE_REFERENCES_BY_ID, ids=ids, scope_key=self.scope_key)
        units = []
        for r, row in await self._paired(found, [("source_reference", r["id"], r["result_id"]) for r in found]):
            fields = ("id", "result_id", "source_type", "original_source_id", "source_version", "title")
            data = {name: r[name] for name in fields}
            data["locator"] = None if r["locator_json"] is None else _json_or_text(r["locator_json"])
            # The range read_source shows: unknown, with why, when anything stored contradicts it.
            checked = saved_range(
                r["fragment"],
                r["fragment_start"],
                r["fragment_end"],
                r["source_length"],
                r["source_version"],
                r["own_length"],
                r["own_text_differs"],
            )
            data["fragment"] = {"text": r["fragment"], "start": checked.start, "end": checked.end}
            if checked.contradiction is not None:
                data["fragment"]["position_note"] = f"{checked.contradiction}, so its position is unknown"
            data["source_length"] = checked.length
            for name in ("availability", "source_record_time", "recorded_at"):
                data[name] = r[name]
            units.append(Unit(row, data, [r["id"]]))
        return units


async def memories(conn: aiosqlite.Connection, project_ids: list[str], *, with_global: bool) -> list[Memory]:
    """The memory items a scope of `project_ids` shows: its projects' and, `with_global`, the Global ones."""
    rows = await conn.execute_fetchall(MEMORY_ITEMS_FOR, {"ids": json_ids(project_ids), "with_global": with_global})
    found = []
    for r in rows:
        data = {name: r[name] for name in ("id", "project_id", "memory_type", "body", "confirmation_state")}
        data["updated_at"] = r["updated_at"]
        found.append(Memory(r["id"], r["project_id"], r["memory_type"], r["confirmation_state"], r["updated_at"], data))
    return found


def _json_or_text(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
