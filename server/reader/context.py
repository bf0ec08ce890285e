"""What get_context reads for one object in one exact scope: where the target is, and its neighbourhood.

Selection (every query is bound to the resolved scope's key, so nothing of another scope is read):
- target rows: the current projection, each result's entity revision, and each successful leaf's
  independent description (its own item, id 'leaf:<leaf_id>:<object_id>', at the object's event time);
  none hides another;
- its direct neighbourhood: relations touching it (and, for a relation, its ends), the objects at
  their other ends when those are stored in the scope, entity changes and events (through
  event_entities and the changes' events), summaries that list it, and the saved source references
  behind all of these;
- a story line takes its entities and events as the neighbourhood, with their changes and relations;
- a story its events (a feature or thread its own and its threads' primary events, a cross story every
  linked event) and its threads or feature; an experience the events that formed it and where it was
  applied. Those events live in their own scopes, within the owner's (context_stories).

An object belongs to the first role that selects it, in the order of `select`. The selection is computed
whole once per scope revision (context_summary); pages read the large direct sections through keyset
arms (context_arms) and everything else from the remembered selection.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

import aiosqlite

from server.contracts.base import scope_from_key
from server.contracts.common import Grant
from server.contracts.errors import StoryGraphError, object_not_found, stored_in_another_scope
from server.reader.context_arms import (
    RELATIONS_FROM,
    RELATIONS_TO,
    ROW_KIND_ORDER,
    STORY_LINE_ENTITIES,
    STORY_LINE_EVENTS,
    BoundArm,
    Candidate,
)
from server.reader.context_rows import Memory, Ref, RowLoader, Unit, memories
from server.reader.context_stories import experience_event_rows, related_story_ids, state_event, story_event_scopes
from server.reader.db import IDS
from server.reader.objects import Key, in_time_range, leaf_splits, split_change_id
from server.reader.scope import Readable, is_readable, near_ids, readable_holding, readable_names
from server.reader.source_rows import references_carrying

# --- Where an object is stored (any scope): for object_not_found vs scope_mismatch. -------------------------
LOCATE: Final[dict[str, str]] = {
    "story_line": "SELECT scope_key FROM story_lines WHERE id = :id",
    "event": "SELECT scope_key FROM events WHERE id = :id",
    "entity": "SELECT scope_key FROM entities WHERE id = :id",
    "relation": "SELECT scope_key FROM relations WHERE id = :id",
    "summary": "SELECT scope_key FROM summaries WHERE id = :id",
    "source_reference": "SELECT scope_key FROM source_references WHERE id = :id",
    "entity_change": "SELECT scope_key FROM entity_changes WHERE entity_id = :entity_id AND association_key = :key",
    "story": "SELECT scope_key FROM stories WHERE id = :id",
    "experience": "SELECT scope_key FROM experiences WHERE id = :id",
}
LOCATE_LEAF_FACT: Final = """
SELECT scope_key FROM fact_links
 WHERE owner_type = 'leaf' AND owner_id = :leaf_id AND object_type = :object_type AND object_id = :object_id
"""

# --- Links that make the neighbourhood (ids only; the rows are read by context_rows). ------------------------
EVENT_IDS_OF_ENTITIES: Final = f"""
SELECT DISTINCT event_id FROM event_entities WHERE entity_id IN {IDS} AND scope_key = :scope_key
"""
ENTITY_IDS_OF_EVENTS: Final = f"""
SELECT DISTINCT entity_id FROM event_entities WHERE event_id IN {IDS} AND scope_key = :scope_key
"""
# The unary + keeps SQLite on fact_links_by_object: the primary key's owner_type prefix would scan every link.
SUMMARY_IDS_LISTING: Final = f"""
SELECT DISTINCT owner_id FROM fact_links
 WHERE +owner_type = 'summary' AND object_type = :object_type AND object_id IN {IDS} AND scope_key = :scope_key
"""
OBJECTS_BACKED_BY: Final = """
SELECT object_type, object_id FROM object_sources
 WHERE source_reference_id = :source_reference_id AND scope_key = :scope_key ORDER BY object_type, object_id
"""
# Targets whose earlier roles may hold relations: their relations are read with the rest of the selection.
RELATIONS_IN_EARLIER_ROLES: Final = frozenset({"relation", "summary", "source_reference"})
OWNERS: Final = frozenset({"story", "experience"})


@dataclass
class Selection:
    target: Ref
    target_units: list[Unit]
    """Every row of the target before any time filter (for the header)."""
    units: list[Unit]
    """Every selected row after the time filter."""
    memories: list[Memory]
    unknown_time_excluded: int
    unknown_time_excluded_types: dict[str, int] = field(default_factory=dict)
    """Those rows by object type (the header's time_note names them: its lists and counts leave them out)."""
    undated_excluded: list[Unit] = field(default_factory=list)
    """The events and entity changes among them whose event time is unknown (own rows, not leaves): they may lie
    within the time range, so known_gaps names them (context_header.known_gaps, unknown_event_time)."""
    arms: list[BoundArm] = field(default_factory=list)
    """Keyset arms that serve their sections page by page (none with a time filter)."""
    gathered: list[Candidate] = field(default_factory=list)
    """Every selected object no arm serves, memory items included."""
    missing_evidence: list[str] = field(default_factory=list)
    """Source reference ids named by selected objects but not stored in this scope."""
    present: dict[Ref, Unit | None] = field(default_factory=dict)
    """Primary rows looked up by ref (None: not stored in this scope)."""


# --- Finding the target -------------------------------------------------------------------------------------------


async def _stored_scopes(conn: aiosqlite.Connection, object_type: str, object_id: str) -> list[str]:
    sql = LOCATE[object_type]
    if object_type == "entity_change":
        parts = split_change_id(object_id)
        if parts is None:
            return []
        params: dict[str, str] = {"entity_id": parts[0], "key": parts[1]}
    else:
        params = {"id": object_id}
    return [row[0] for row in await conn.execute_fetchall(sql, params)]


async def _target_scopes(conn: aiosqlite.Connection, object_type: str, object_id: str) -> tuple[list[str], Ref]:
    """The scope keys the object is stored in, and the object itself (a leaf id resolves to the one it describes)."""
    scopes = await _stored_scopes(conn, object_type, object_id)
    if not scopes:
        for leaf_id, described in leaf_splits(object_id):
            params = {"leaf_id": leaf_id, "object_type": object_type, "object_id": described}
            found = [row[0] for row in await conn.execute_fetchall(LOCATE_LEAF_FACT, params)]
            if found:
                return found, (object_type, described)
    return scopes, (object_type, object_id)


async def readable_scopes_holding(
    conn: aiosqlite.Connection, grant: Grant, object_type: str, object_id: str
) -> tuple[str, Readable]:
    """The id as stored (the one sent, else a near id, as object_not_found names it) and the scopes this caller may
    read that store the object, in scope-key order (scope_required's next step names them); a scope outside the
    grant, or with an inactive project, is never among them. A leaf id counts where its leaf describes the object."""

    async def scopes_of(some_id: str) -> list[str]:
        return (await _target_scopes(conn, object_type, some_id))[0]

    return await readable_holding(conn, grant, object_id, scopes_of)


async def locate_target(
    conn: aiosqlite.Connection, grant: Grant, scope_key: str, object_type: str, object_id: str
) -> Ref:
    """The object to read in this scope, or object_not_found / scope_mismatch.

    An object stored only in scopes this caller may not read gets exactly the answer of a missing one.
    A leaf id resolves to the object the leaf describes.
    """
    scopes, target = await _target_scopes(conn, object_type, object_id)
    if scope_key in scopes:
        return target
    for other in scopes:
        names = await readable_names(conn, grant, scope_from_key(other))
        if names is None:
            continue
        raise stored_in_another_scope(f"{object_type} {object_id!r}", scope_from_key(other).model_dump(), names)
    raise await _not_found(conn, grant, scope_key, object_type, object_id)


async def _not_found(
    conn: aiosqlite.Connection, grant: Grant, scope_key: str, object_type: str, object_id: str
) -> StoryGraphError:
    """object_not_found; when the id is stored as another type (agents guess the type of an id such as an
    entity change's event_id), its next step names that type, and the scope when it is not the requested one.
    Only scopes the caller may read are named, so an id outside the grant gets the plain answer."""
    # An id copied with a space or newline around it, or retyped in another letter case: the stored id (a near id)
    # is named, never read in its place (ids are exact).
    candidates = [(object_id, t) for t in LOCATE if t != object_type]
    for near in near_ids(object_id):
        candidates += [(near, object_type)] + [(near, t) for t in LOCATE if t != object_type]
    elsewhere: tuple[str, str, str] | None = None
    for some_id, other_type in candidates:
        stored_id = some_id if some_id != object_id else None
        if other_type == object_type:  # a near id of the requested type: a leaf id sent in another case finds it
            keys, _ = await _target_scopes(conn, other_type, some_id)
        else:
            keys = await _stored_scopes(conn, other_type, some_id)
        for key in keys:
            if key == scope_key:
                return object_not_found(object_type, object_id, other_type, stored_id=stored_id)
            if elsewhere is None and await is_readable(conn, grant, scope_from_key(key)):
                elsewhere = (some_id, other_type, key)
    if elsewhere is not None:
        some_id, other_type, key = elsewhere
        stored_id = some_id if some_id != object_id else None
        return object_not_found(
            object_type, object_id, other_type, scope_from_key(key).model_dump(), stored_id=stored_id
        )
    # A source's id (or a message's) sent as a source reference's: the references saved from it, as read_source names.
    carrying = await references_carrying(conn, scope_key, object_id) if object_type == "source_reference" else None
    return object_not_found(object_type, object_id, carrying=carrying)


# --- Selecting the neighbourhood ----------------------------------------------------------------------------------


class _Selected:
    """Selected rows by (type, id, result key); the first role a row is added with is kept.

    Rows added through a keyset arm are served by that arm page by page. An arm whose rows an earlier role
    already holds is not used (its rows are then served from the remembered selection like the others); two
    arms of one role may share rows (a relation from an object to itself), which a page reads once."""

    def __init__(self) -> None:
        self.units: dict[Key, Unit] = {}
        self.arms: list[BoundArm] = []
        self.unusable: set[int] = set()
        self.served: dict[Key, set[int]] = {}

    def add(self, units: Iterable[Unit | None], role: str, arm: BoundArm | None = None) -> list[Unit]:
        number = len(self.arms)
        if arm is not None:
            self.arms.append(arm)
        added = []
        for unit in units:
            if unit is None:
                continue
            key = unit.key
            held = self.units.get(key)
            if held is not None:
                if arm is not None and (held.role != role or not self.served.get(key)):
                    self.unusable.add(number)
                elif arm is not None:
                    self.served[key].add(number)
                continue
            unit.role = role
            self.units[key] = unit
            added.append(unit)
            if arm is not None:
                self.served.setdefault(key, set()).add(number)
        return added

    def usable_arms(self) -> list[int]:
        return [n for n in range(len(self.arms)) if n not in self.unusable]


async def _events_in_their_scopes(conn: aiosqlite.Connection, events: Iterable[tuple[str, str]]) -> list[Unit]:
    """Events a story or experience lists, each read in its own scope as its row alone (pages read its content
    and evidence by key)."""
    by_scope: dict[str, set[str]] = {}
    for event_id, event_scope in events:
        by_scope.setdefault(event_scope, set()).add(event_id)
    units: list[Unit] = []
    for event_scope, ids in sorted(by_scope.items()):
        units.extend(await RowLoader(conn, event_scope).listed_events(sorted(ids)))
    return units


async def select(
    conn: aiosqlite.Connection,
    scope_key: str,
    project_ids: list[str],
    target: Ref,
    *,
    time_range: tuple[str, str] | None,
    time_basis: str,
    global_memory: bool,
) -> Selection:
    # The neighbourhood is read without its content (context_rows: rows, evidence ids and the few fields the header,
    # the gaps and the selection itself read): the selection reads its target's (for the header and its items);
    # pages read their own objects' by key.
    load = RowLoader(conn, scope_key, content=False)
    chosen = _Selected()
    object_type, object_id = target
    params = {"id": object_id, "object_type": object_type, "scope_key": scope_key}

    # The target: every row of it, none hiding another.
    primary = load.primary_cache[target] = (await RowLoader(conn, scope_key).primary([target]))[target]
    target_units = [primary] if primary is not None else []
    if object_type == "entity":
        target_units.extend(await load.entity_revisions(object_id))
    target_units.extend(await load.leaf_facts(object_type, object_id, primary.row if primary else None))
    target_units = list(chosen.add(target_units, "target"))

    # Whose relations, changes, events and summaries count as the neighbourhood.
    anchors: list[Ref] = [target]
    entity_ids: list[str] = [object_id] if object_type == "entity" else []
    event_ids: list[str] = [object_id] if object_type == "event" else []
    members: list[str] = []
    if object_type == "story_line":
        arm = BoundArm(STORY_LINE_ENTITIES, params)
        members = await arm.all_ids(conn)
        chosen.add((await load.primary([("entity", i) for i in members])).values(), "related", arm)
        entity_ids.extend(members)
        anchors.extend(("entity", i) for i in members)
        arm = BoundArm(STORY_LINE_EVENTS, params)
        story_events_ids = await arm.all_ids(conn)
        chosen.add((await load.primary([("event", i) for i in story_events_ids])).values(), "evolution", arm)
    elif object_type == "event":
        linked = await load.column(ENTITY_IDS_OF_EVENTS, ids=[object_id])
        chosen.add((await load.primary([("entity", i) for i in linked])).values(), "related")
    elif object_type == "entity_change" and primary is not None:
        owner = primary.content["entity_id"]
        chosen.add((await load.primary([("entity", owner)])).values(), "related")
        if primary.content["event_id"] is not None:
            event_ids.append(primary.content["event_id"])
    elif object_type == "summary" and primary is not None:
        refs = [(f["type"], f["id"]) for f in primary.content["fact_refs"]]
        chosen.add((await load.primary(refs)).values(), "related")
    elif object_type == "source_reference":
        backed = await load.rows(OBJECTS_BACKED_BY, source_reference_id=object_id, scope_key=scope_key)
        chosen.add((await load.primary([(t, i) for t, i in backed])).values(), "related")
    elif object_type == "story":
        stories = await related_story_ids(conn, scope_key, object_id)
        chosen.add((await load.primary([("story", i) for i in stories])).values(), "related")
        listed = await story_event_scopes(conn, scope_key, object_id)
        state = await state_event(conn, scope_key, object_id)
        if state is not None:
            listed.append((state[0], state[3]))
        chosen.add(await _events_in_their_scopes(conn, listed), "evolution")
    elif object_type == "experience":
        links = await experience_event_rows(conn, scope_key, object_id)
        chosen.add(await _events_in_their_scopes(conn, [(row[0], row[3]) for row in links]), "evolution")

    # Relations touching the anchors (and a target relation's own ends). Those of the target itself come through
    # keyset arms, unless an earlier role may hold relations.
    if object_type in RELATIONS_IN_EARLIER_ROLES:
        chosen.add(await load.relations_touching(object_type, [object_id]), "relation")
    else:
        for definition in (RELATIONS_FROM, RELATIONS_TO):
            arm = BoundArm(definition, params)
            ids = await arm.all_ids(conn)
            chosen.add((await load.primary([("relation", i) for i in ids])).values(), "relation", arm)
    if members:
        chosen.add(await load.relations_touching("entity", members), "relation")
    relation_units = [u for u in chosen.units.values() if u.ends is not None]
    end_refs = sorted({end for u in relation_units if u.ends is not None for end in u.ends})
    present = await load.primary(end_refs)
    for unit in relation_units:
        assert unit.ends is not None
        unit.ends_in_scope = (present[unit.ends[0]] is not None, present[unit.ends[1]] is not None)
    chosen.add((present[end] for end in end_refs), "related")

    # Evolution: entity changes and events.
    if entity_ids:
        changes = await load.changes_of_entities(entity_ids)
        chosen.add(changes, "evolution")
        event_ids.extend(await load.column(EVENT_IDS_OF_ENTITIES, ids=entity_ids))
        # The events that carried these entities' own changes (a change that is also a relation's other end is a
        # related object, its event still theirs). Not those of a change of another entity at a relation's other end:
        # that change is a related object and its event one more hop away, as search counts it (search_items).
        event_ids.extend(u.value("event_id") for u in changes if u.value("event_id"))
    if object_type == "event":
        chosen.add(await load.changes_of_events([object_id]), "evolution")
    chosen.add((await load.primary([("event", i) for i in sorted(set(event_ids))])).values(), "evolution")

    # Summaries that list the target (or, for a story line, any of its entities).
    by_type: dict[str, list[str]] = {}
    for anchor_type, anchor_id in anchors:
        by_type.setdefault(anchor_type, []).append(anchor_id)
    listing: list[str] = []
    for anchor_type, ids in sorted(by_type.items()):
        listing.extend(await load.column(SUMMARY_IDS_LISTING, object_type=anchor_type, ids=ids))
    chosen.add((await load.primary([("summary", i) for i in sorted(set(listing))])).values(), "summary")

    # Evidence: the saved source references behind the target, its relations and its evolution. A related
    # object's or a summary's own evidence is one more hop away (its ids are on its item; read it by its ref),
    # except for a story line, whose members are its neighbourhood. The events a story or experience lists
    # carry their evidence on their items, in their own scopes (read_source there).
    evidence_roles = {"target", "relation"} if object_type in OWNERS else {"target", "relation", "evolution"}
    if object_type == "story_line":
        evidence_roles.add("related")
    wanted = sorted({s for u in chosen.units.values() if u.role in evidence_roles for s in u.source_ids})
    evidence = await load.primary([("source_reference", i) for i in wanted])
    chosen.add(evidence.values(), "evidence")
    missing = [i for i in wanted if evidence[("source_reference", i)] is None]

    units, excluded = in_time_range(chosen.units.values(), lambda u: u.row, time_range, time_basis)
    excluded_types: dict[str, int] = {}
    undated_excluded: list[Unit] = []
    if excluded:
        for u in chosen.units.values():
            if u.row.time_on(time_basis) is None:
                excluded_types[u.row.object_type] = excluded_types.get(u.row.object_type, 0) + 1
                if undated_event(u):
                    undated_excluded.append(u)
    background = await memories(conn, project_ids, with_global=global_memory)
    usable = [] if time_range is not None else chosen.usable_arms()
    usable_set = set(usable)
    served = {key for key, numbers in chosen.served.items() if not numbers.isdisjoint(usable_set)}
    gathered = [_candidate(u) for u in units if u.key not in served]
    gathered += [Candidate("background", 0, "memory_item", m.memory_id, "", None, scope_key) for m in background]
    return Selection(
        target=target,
        target_units=target_units,
        units=units,
        memories=background,
        unknown_time_excluded=excluded,
        unknown_time_excluded_types=dict(sorted(excluded_types.items())),
        undated_excluded=undated_excluded,
        arms=[chosen.arms[n] for n in usable],
        gathered=gathered,
        missing_evidence=missing,
        present=dict(load.primary_cache),
    )


def undated_event(unit: Unit) -> bool:
    """An event or entity change whose event time is unknown, by its own row. A leaf's description is no event of its
    own: it carries its object's time (context_rows.leaf_facts), and the object's own rows, always selected with it,
    say whether that time is known; counting it listed one undated event twice (under its leaf's id too)."""
    return (
        unit.row.object_type in ("event", "entity_change")
        and unit.row.event_time_start is None
        and unit.row.row_kind != "leaf"
    )


def _candidate(unit: Unit) -> Candidate:
    row = unit.row
    return Candidate(
        unit.role,
        ROW_KIND_ORDER[row.row_kind],
        row.object_type,
        row.object_id,
        row.result_key,
        row.event_time_start,
        row.scope_key,
    )
