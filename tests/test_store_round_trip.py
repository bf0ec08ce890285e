"""Every field of every kind survives import -> export unchanged: a graph that sets every optional field to a
value other than its default comes back line for line, so a column missing from staging (never stored) or from
the export (never read back) shows as the field's default in the export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from jsonl_graph import LONG_TEXT, Line, write_jsonl
from pydantic import BaseModel

from server.contracts.interchange import KIND_ORDER, LINE
from server.store.exporter import export_file
from server.store.importer import import_file
from server.store.migrate import migrate

ALPHA = {"kind": "projects", "projectIds": ["alpha"]}
PAIR = {"kind": "projects", "projectIds": ["alpha", "beta"]}
T0 = "2026-03-01T10:00:00.000Z"
T1 = "2026-03-02T10:30:00.000Z"
T2 = "2026-03-03T11:45:00.000Z"
EVIDENCE = ["ref-1", "ref-2"]  # lists come back in key order: given in it here


def every_field_graph() -> list[Line]:
    """One or more lines of every kind, every optional field set, in the form an export writes."""
    detailed = {
        "kind": "detailed",
        "processed_range": {"from": T0, "to": T1},
        "sources": [{"source_id": "src-1", "source_version": "v2", "fragments": [[0, 120]], "status": "partial"}],
        "missing": [{"source_id": "src-1", "ranges": [[120, 5000]], "reason": "over budget"}],
        "unprocessed_sources": 2,
        "source_types_included": ["conversation"],
        "source_types_not_included": ["document"],
    }
    locator = {
        "project_id": "alpha",
        "conversation_id": "conv-1",
        "message_id": "m-7",
        "order": 7,
        "role": "user",
        "document_id": "doc-1",
        "chunk_id": "chunk-3",
        "task_id": "T-9",
        "external": {"url": "https://example.invalid/a", "page": 2},
    }
    return [
        {"kind": "project", "id": "alpha", "name": "Alpha", "status": "paused"},
        {"kind": "project", "id": "beta", "name": "Beta", "status": "paused"},
        {"kind": "scope", "scope": ALPHA},
        {"kind": "scope", "scope": PAIR},
        {
            "kind": "result",
            "id": "r-alpha",
            "scope": ALPHA,
            "stage": "rereview",
            "status": "draft",
            "review_generated_at": T0,
            "recorded_at": T1,
            "revision": "3",
            "coverage": detailed,
        },
        {
            "kind": "result",
            "id": "r-legacy",
            "scope": ALPHA,
            "stage": "rereview",
            "status": "draft",
            "review_generated_at": T0,
            "recorded_at": T0,
            "revision": "1",
            "coverage": {"kind": "legacy_count", "count": 4},
        },
        {"kind": "story_line", "id": "sl-1", "scope": ALPHA, "topic": "存储", "recorded_at": T0, "revision": "2"},
        {
            "kind": "source",
            "id": "src-1",
            "source_type": "conversation",
            "project_id": "alpha",
            "conversation_id": "conv-1",
            "title": "Design chat",
            "status": "inaccessible",
            "current_version": "v2",
            "updated_at": T1,
        },
        {"kind": "source_version", "source_id": "src-1", "version": "v2", "text": LONG_TEXT, "recorded_at": T1},
        *(
            {
                "kind": "source_reference",
                "id": ref,
                "result_id": "r-alpha",
                "source_type": "conversation",
                "original_source_id": "src-1",
                "source_version": "v2",
                "locator": locator,
                "title": "Decision message",
                "fragment": {"text": "选方案 B", "start": 3, "end": 8},
                "source_length": 5000,
                "availability": "deleted",
                "source_record_time": "2026-02-28 09:00",
                "recorded_at": T1,
            }
            for ref in EVIDENCE
        ),
        {
            "kind": "entity",
            "id": "ent-a",
            "story_line_id": "sl-1",
            "entity_type": "decision",
            "canonical_label": "Use SQLite",
            "description": "One file",
            "confirmation_state": "confirmed",
            "decision_status": "decided",
            "work_status": "done",
            "updated_at": T1,
            "revision": "4",
            "source_reference_ids": EVIDENCE,
        },
        {
            "kind": "entity_revision",
            "entity_id": "ent-a",
            "result_id": "r-alpha",
            "revision": "4",
            "canonical_label": "Use SQLite",
            "description": "One file",
            "confirmation_state": "confirmed",
            "recorded_at": T1,
            "source_reference_ids": EVIDENCE[:1],
        },
        # Not stored (unknown) is a value of its own: it must come back null, never as [] (stored empty).
        {
            "kind": "entity_revision",
            "entity_id": "ent-a",
            "result_id": "r-legacy",
            "revision": "3",
            "canonical_label": "Use SQLite",
            "description": "One file",
            "confirmation_state": "automatic",
            "recorded_at": T0,
            "source_reference_ids": None,
        },
        *(
            {
                "kind": "event",
                "id": event,
                "result_id": "r-alpha",
                "story_line_id": "sl-1",
                "event_type": "decision",
                "title": f"Chose SQLite ({event})",
                "description": "Agreed in the design chat",
                "event_time": {"start": T0, "end": T1, "precision": "day", "basis": "stated_in_source"},
                "recorded_at": T1,
                "confirmation_state": "confirmed",
                "revision": "5",
                "entity_ids": ["ent-a"],
                "source_reference_ids": EVIDENCE,
            }
            for event in ("ev-1", "ev-2")
        ),
        {
            "kind": "entity_change",
            "entity_id": "ent-a",
            "association_key": "decided",
            "result_id": "r-alpha",
            "event_id": "ev-1",
            "change_type": "added",
            "description": "Decision recorded",
            "entity_revision": "4",
            "applicable_from": T0,
            "applicable_to": T2,
            "confirmation_state": "confirmed",
            "recorded_at": T1,
            "source_reference_ids": EVIDENCE,
        },
        {
            "kind": "relation",
            "id": "rel-1",
            "result_id": "r-alpha",
            "from_ref": {"type": "event", "id": "ev-1"},
            "to_ref": {"type": "entity_change", "id": "ent-a#decided"},
            "relation_type": "supports",
            "reason": "the basis of the change",
            "confirmation_state": "confirmed",
            "recorded_at": T1,
            "revision": "6",
            "source_reference_ids": EVIDENCE,
        },
        {
            "kind": "summary",
            "id": "sum-1",
            "result_id": "r-alpha",
            "interval": {"from": T0, "to": T1},
            "body": "Storage settled on SQLite.",
            "open_items": ["备份策略", "benchmark"],
            "recorded_at": T1,
            "revision": "7",
            "fact_refs": [{"type": "event", "id": "ev-1"}, {"type": "relation", "id": "rel-1"}],
            "source_reference_ids": EVIDENCE,
        },
        {
            "kind": "leaf",
            "id": "leaf-1",
            "result_id": "r-alpha",
            "summary": "batch 1",
            "recorded_at": T1,
            "facts": [
                {"object_ref": {"type": "entity", "id": "ent-a"}, "description": "the entity"},
                {"object_ref": {"type": "event", "id": "ev-1"}, "description": "the choice"},
            ],
        },
        *(
            {
                "kind": "story",
                "id": story,
                "level": level,
                "scope": ALPHA,
                "parent_story_id": parent,
                "name": f"SQLite 迁移 ({level})",
                "description": "Moving the store",
                "state": "concluded",
                "state_event_id": "ev-1",
                "started_at": T0,
                "ended_at": T1,
                "started_at_precision": "day",
                "ended_at_precision": "minute",
                "confirmation_state": "user_edited",
                "recorded_at": T1,
                "revision": "8",
            }
            for story, level, parent in (("st-feature", "feature", None), ("st-thread", "thread", "st-feature"))
        ),
        {"kind": "story_event", "story_id": "st-thread", "event_id": "ev-1", "primary": True, "user_set": True},
        {
            "kind": "experience",
            "id": "ex-1",
            "scope": ALPHA,
            "statement": "一个文件就够了",
            "conditions": "one writer",
            "boundaries": "not for analytics",
            "confirmation_state": "user_edited",
            "recorded_at": T1,
            "revision": "9",
        },
        {"kind": "experience_event", "experience_id": "ex-1", "event_id": "ev-1", "role": "formed", "note": "origin"},
        {
            "kind": "memory_item",
            "id": "mem-1",
            "project_id": "alpha",
            "memory_type": "habit",
            "body": "Prefers short answers",
            "confirmation_state": "unconfirmed",
            "updated_at": T1,
        },
    ]


def _set_fields(model: BaseModel, where: str) -> tuple[set[str], set[str]]:
    """The optional fields of `model` and of the models inside it: all of them, and those set to a value other
    than their default."""
    optional: set[str] = set()
    changed: set[str] = set()
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if not info.is_required():
            optional.add(f"{where}.{name}")
            if value != info.get_default(call_default_factory=True):
                changed.add(f"{where}.{name}")
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, BaseModel):
                inner, inner_changed = _set_fields(item, f"{where}.{name}")
                optional |= inner
                changed |= inner_changed
    return optional, changed


def test_the_graph_sets_every_field_of_every_kind() -> None:
    lines = [LINE.validate_python(line) for line in every_field_graph()]
    optional: set[str] = set()
    changed: set[str] = set()
    for line in lines:
        fields, set_here = _set_fields(line, line.kind)
        optional |= fields
        changed |= set_here

    assert {line.kind for line in lines} == set(KIND_ORDER)
    # A field added to a line model must be set here too, or the round trip below cannot see it go missing.
    assert sorted(optional - changed) == []
    assert [line.model_dump(mode="json") for line in lines] == every_field_graph()  # already in exported form


def _exported(db: Path, out: Path) -> list[dict[str, Any]]:
    export_file(db, out)
    return [orjson.loads(line) for line in out.read_bytes().splitlines()]


def test_every_field_of_every_kind_survives_import_and_export(migrated_db: Path, tmp_path: Path) -> None:
    graph = every_field_graph()
    import_file(migrated_db, write_jsonl(tmp_path / "graph.jsonl", graph))

    exported = _exported(migrated_db, tmp_path / "export.jsonl")

    def order(line: dict[str, Any]) -> tuple[int, bytes]:
        return KIND_ORDER.index(line["kind"]), orjson.dumps(line, option=orjson.OPT_SORT_KEYS)

    assert sorted(exported, key=order) == sorted(graph, key=order)


def test_the_export_of_every_field_reimports_unchanged_and_exports_the_same_bytes(
    migrated_db: Path, tmp_path: Path
) -> None:
    import_file(migrated_db, write_jsonl(tmp_path / "graph.jsonl", every_field_graph()))
    first = tmp_path / "first.jsonl"
    export_file(migrated_db, first)
    other = tmp_path / "other.db"
    migrate(other)

    again = import_file(migrated_db, first)
    fresh = import_file(other, first)

    assert (again.total, again.unchanged) == (0, len(every_field_graph()))
    assert fresh.total == len(every_field_graph())
    assert _exported(other, tmp_path / "second.jsonl") == _exported(migrated_db, tmp_path / "first-again.jsonl")
    assert (tmp_path / "second.jsonl").read_bytes() == first.read_bytes()
