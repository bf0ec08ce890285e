"""What one GoodBuddy import has read so far: the ids it found, the scope each lives in, and its notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from server.store.errors import Where
from server.store.importer import ImportItem
from server.store.jsonl import validate_line
from server.store.notes import Notes


@dataclass(frozen=True)
class Result:
    id: str
    scope_key: str
    created_at: str
    where: str


@dataclass(frozen=True)
class Leaf:
    """A successful leaf, written once the entities (its facts' targets) are known."""

    where: str
    id: str
    result_id: str
    summary: str | None
    facts: dict[str, str | None]
    """Stored entity id -> the leaf's own description of it."""


@dataclass
class Seen:
    """Shared by the readers of one snapshot. Objects keep the app's ids; each lives in the scope of its review."""

    now: str
    """The import's time: `recorded_at` of source versions (write-once, see server/store/sync.py)."""
    notes: Notes
    projects: set[str] = field(default_factory=set)
    scopes: set[str] = field(default_factory=set)
    """Scope keys declared by a `scope` line of this import."""
    story_line_scope: dict[str, str] = field(default_factory=dict)
    results: dict[str, Result] = field(default_factory=dict)
    """In creation order."""
    reference_scope: dict[str, str] = field(default_factory=dict)
    entity_scope: dict[str, str] = field(default_factory=dict)
    event_scope: dict[str, str] = field(default_factory=dict)
    """Events this import writes -> the scope of their review."""
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)
    leaves_read: list[Leaf] = field(default_factory=list)

    def line(self, where: Where, value: dict[str, Any]) -> ImportItem:
        return (where, validate_line(where, value))

    def same_scope(self, ids: list[str], scope: str, known: dict[str, str], what: str) -> list[str]:
        """The linked ids that live in `scope`; the others are counted, not linked across scopes."""
        kept = [item for item in ids if known.get(item) == scope]
        gone = [item for item in ids if item not in known]
        self.notes.add(f"links to {what} no longer in the app (not imported)", len(gone))
        self.notes.add(
            f"links to {what} in another review scope (not imported: an object lives in one scope here)",
            len(ids) - len(kept) - len(gone),
        )
        return kept


SNAPSHOT_ENTITY_FIELDS: Final = ("id", "canonical_label", "description", "confirmation_state")


def slim_snapshot(snapshot: object) -> dict[str, Any]:
    """The part of a result's graph snapshot the import reads (facts.py): its entities' id, label, description
    and confirmation state, and its relations' ids. Every result's snapshot is kept until its lines are made,
    so only this much of each stays in memory. List positions are kept: lines are located by them."""
    if not isinstance(snapshot, dict):
        return {}
    entities, relations = snapshot.get("entities"), snapshot.get("relations")
    return {
        "entities": [
            {key: entity[key] for key in SNAPSHOT_ENTITY_FIELDS if key in entity} if isinstance(entity, dict) else None
            for entity in entities
        ]
        if isinstance(entities, list)
        else None,
        "relations": [{"id": relation.get("id")} if isinstance(relation, dict) else None for relation in relations]
        if isinstance(relations, list)
        else None,
    }
