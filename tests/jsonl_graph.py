"""A small interchange graph for store tests: two project scopes, Global, and one of every kind."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from server.store.importer import import_file
from server.store.migrate import migrate

Line = dict[str, Any]

ALPHA = {"kind": "projects", "projectIds": ["alpha"]}
BETA = {"kind": "projects", "projectIds": ["beta"]}
GLOBAL = {"kind": "global"}
PAIR = {"kind": "projects", "projectIds": ["beta", "alpha"]}
ALPHA_KEY = 'projects:["alpha"]'
BETA_KEY = 'projects:["beta"]'
PAIR_KEY = 'projects:["alpha","beta"]'
T0 = "2026-03-01T10:00:00Z"
T1 = "2026-03-02T18:30:00+08:00"
# Over two chunks of 4096 code points, with emoji and CJK, so chunk boundaries count code points.
LONG_TEXT = ("讨论：选方案 B 🚀 " * 700)[:5000]


def small_graph() -> list[Line]:
    return [
        {"kind": "project", "id": "alpha", "name": "Alpha"},
        {"kind": "project", "id": "beta", "name": "Beta", "status": "active"},
        {"kind": "scope", "scope": ALPHA},
        {"kind": "scope", "scope": BETA},
        {"kind": "scope", "scope": GLOBAL},
        {
            "kind": "result",
            "id": "r-alpha",
            "scope": ALPHA,
            "review_generated_at": T1,
            "recorded_at": T1,
            "revision": "3",
            "coverage": {
                "kind": "detailed",
                "processed_range": {"from": T0, "to": T1},
                "sources": [{"source_id": "src-1", "source_version": "v2", "fragments": [[0, 120]]}],
                "unprocessed_sources": 0,
            },
        },
        {
            "kind": "result",
            "id": "r-beta",
            "scope": BETA,
            "review_generated_at": T0,
            "recorded_at": T0,
            "coverage": {"kind": "legacy_count", "count": 4},
        },
        {"kind": "result", "id": "r-global", "scope": GLOBAL, "review_generated_at": T0, "recorded_at": T0},
        {"kind": "story_line", "id": "sl-alpha", "scope": ALPHA, "topic": "Storage engine choice", "recorded_at": T0},
        {"kind": "story_line", "id": "sl-beta", "scope": BETA, "topic": "发布计划", "recorded_at": T0},
        {
            "kind": "source",
            "id": "src-1",
            "source_type": "conversation",
            "project_id": "alpha",
            "conversation_id": "conv-1",
            "title": "Design chat",
            "current_version": "v2",
            "updated_at": T1,
        },
        {
            "kind": "source_version",
            "source_id": "src-1",
            "version": "v1",
            "text": "short first text",
            "recorded_at": T0,
        },
        {"kind": "source_version", "source_id": "src-1", "version": "v2", "text": LONG_TEXT, "recorded_at": T1},
        {
            "kind": "source_reference",
            "id": "ref-1",
            "result_id": "r-alpha",
            "source_type": "conversation",
            "original_source_id": "src-1",
            "source_version": "v1",
            "locator": {"project_id": "alpha", "conversation_id": "conv-1", "message_id": "m-7", "order": 7},
            "title": "Decision message",
            "fragment": {"text": "first text", "start": 6, "end": 16},
            "source_length": 16,
            "recorded_at": T1,
        },
        {
            "kind": "source_reference",
            "id": "ref-2",
            "result_id": "r-beta",
            "source_type": "note",
            "original_source_id": "note-9",
            "fragment": {"text": "旧的说明"},
            "availability": "deleted",
            "recorded_at": T0,
        },
        {
            "kind": "entity",
            "id": "ent-a",
            "story_line_id": "sl-alpha",
            "entity_type": "decision",
            "canonical_label": "Use SQLite",
            "description": "Store the graph in one SQLite file",
            "confirmation_state": "confirmed",
            "decision_status": "decided",
            "updated_at": T1,
            "source_reference_ids": ["ref-1"],
        },
        {"kind": "entity", "id": "ent-b", "story_line_id": "sl-beta", "canonical_label": "发布窗口", "updated_at": T0},
        {
            "kind": "entity_revision",
            "entity_id": "ent-a",
            "result_id": "r-alpha",
            "revision": "2",
            "canonical_label": "Use SQLite",
            "recorded_at": T1,
        },
        {
            "kind": "event",
            "id": "ev-1",
            "result_id": "r-alpha",
            "story_line_id": "sl-alpha",
            "event_type": "decision",
            "title": "Chose SQLite over Postgres",
            "description": "Team agreed in the design chat",
            "event_time": {"start": T0, "end": T1, "precision": "day", "basis": "stated_in_source"},
            "recorded_at": T1,
            "entity_ids": ["ent-a"],
            "source_reference_ids": ["ref-1"],
        },
        {
            "kind": "event",
            "id": "ev-2",
            "result_id": "r-alpha",
            "event_type": "discussion",
            "title": "Open question",
            "recorded_at": T1,
        },
        {
            "kind": "entity_change",
            "entity_id": "ent-a",
            "association_key": "decided",
            "result_id": "r-alpha",
            "event_id": "ev-1",
            "change_type": "added",
            "description": "Decision recorded",
            "applicable_from": T0,
            "recorded_at": T1,
            "source_reference_ids": ["ref-1"],
        },
        {
            "kind": "relation",
            "id": "rel-1",
            "result_id": "r-alpha",
            "from_ref": {"type": "event", "id": "ev-1"},
            "to_ref": {"type": "entity_change", "id": "ent-a#decided"},
            "relation_type": "supports",
            "reason": "the event is the basis of the change",
            "recorded_at": T1,
            "source_reference_ids": ["ref-1"],
        },
        {
            # Points forward: to a later relation line's kind sibling and to a summary.
            "kind": "relation",
            "id": "rel-0",
            "result_id": "r-alpha",
            "from_ref": {"type": "relation", "id": "rel-1"},
            "to_ref": {"type": "summary", "id": "sum-1"},
            "relation_type": "related",
            "recorded_at": T1,
        },
        {
            "kind": "summary",
            "id": "sum-1",
            "result_id": "r-alpha",
            "interval": {"from": T0, "to": T1},
            "body": "Storage settled on SQLite.",
            "open_items": ["benchmark", "备份策略"],
            "recorded_at": T1,
            "fact_refs": [{"type": "relation", "id": "rel-1"}, {"type": "event", "id": "ev-1"}],
        },
        {
            "kind": "leaf",
            "id": "leaf-1",
            "result_id": "r-alpha",
            "summary": "batch 1",
            "recorded_at": T1,
            "facts": [
                {"object_ref": {"type": "event", "id": "ev-1"}, "description": "leaf wording of the choice"},
                {"object_ref": {"type": "entity", "id": "ent-a"}},
            ],
        },
        {
            "kind": "memory_item",
            "id": "mem-1",
            "project_id": "alpha",
            "body": "Prefers short answers",
            "updated_at": T0,
        },
        {"kind": "memory_item", "id": "mem-2", "body": "Writes in English and 中文", "updated_at": T1},
    ]


def leaf_times_graph() -> list[Line]:
    """`small_graph` and a later review, r-alpha-2, whose leaf-2 describes in a word no other row holds ("zephyr")
    objects stored under r-alpha only, so each description is an item of its own under r-alpha-2 with no row of its
    object: the event ev-1 (dated T0 to T1), its entity change ent-a#decided (dated by ev-1), the summary sum-1
    (interval T0 to T1), the undated event ev-2 and the entity ent-a (no event time)."""
    at = "2026-04-01T00:00:00Z"
    facts = [
        ("event", "ev-1", "zephyr: a later review's wording of the choice"),
        ("entity_change", "ent-a#decided", "zephyr: the decision as the later review saw it"),
        ("summary", "sum-1", "zephyr: the storage summary reworded"),
        ("event", "ev-2", "zephyr: still an open question"),
        ("entity", "ent-a", "zephyr: the entity reworded"),
    ]
    return [
        *small_graph(),
        {"kind": "result", "id": "r-alpha-2", "scope": ALPHA, "review_generated_at": at, "recorded_at": at},
        {
            "kind": "leaf",
            "id": "leaf-2",
            "result_id": "r-alpha-2",
            "recorded_at": at,
            "facts": [{"object_ref": {"type": t, "id": i}, "description": text} for t, i, text in facts],
        },
    ]


def story_graph() -> list[Line]:
    """`small_graph` plus the project pair, an event in each scope, stories of every level and two experiences.

    The thread comes before its feature, so the importer must check the parent once every line is in.
    """
    return [
        *small_graph(),
        {"kind": "scope", "scope": PAIR},
        {"kind": "result", "id": "r-pair", "scope": PAIR, "review_generated_at": T1, "recorded_at": T1},
        {
            "kind": "event",
            "id": "ev-b1",
            "result_id": "r-beta",
            "event_type": "change",
            "title": "Beta",
            "recorded_at": T0,
        },
        {
            "kind": "event",
            "id": "ev-p1",
            "result_id": "r-pair",
            "event_type": "decision",
            "title": "Pair",
            "recorded_at": T1,
        },
        {
            "kind": "story",
            "id": "st-thread",
            "level": "thread",
            "scope": ALPHA,
            "parent_story_id": "st-feature",
            "name": "SQLite 迁移",
            "description": "Moving the store to SQLite",
            "state": "concluded",
            "state_event_id": "ev-1",
            "started_at": T0,
            "ended_at": T1,
            "confirmation_state": "user_edited",
            "recorded_at": T1,
            "revision": "2",
        },
        {"kind": "story", "id": "st-feature", "level": "feature", "scope": ALPHA, "name": "Storage", "recorded_at": T1},
        {"kind": "story", "id": "st-cross", "level": "cross", "scope": PAIR, "name": "Shared store", "recorded_at": T1},
        {"kind": "story_event", "story_id": "st-thread", "event_id": "ev-1", "primary": True, "user_set": True},
        {"kind": "story_event", "story_id": "st-feature", "event_id": "ev-2", "primary": True},
        {"kind": "story_event", "story_id": "st-cross", "event_id": "ev-1"},
        {"kind": "story_event", "story_id": "st-cross", "event_id": "ev-b1"},
        {"kind": "story_event", "story_id": "st-cross", "event_id": "ev-p1"},
        {
            "kind": "experience",
            "id": "ex-pair",
            "scope": PAIR,
            "statement": "Pick storage both teams can run",
            "conditions": "shared deployments",
            "boundaries": "not for analytics",
            "recorded_at": T1,
        },
        {"kind": "experience", "id": "ex-alpha", "scope": ALPHA, "statement": "一个文件就够了", "recorded_at": T1},
        {"kind": "experience_event", "experience_id": "ex-pair", "event_id": "ev-1", "role": "formed"},
        {"kind": "experience_event", "experience_id": "ex-pair", "event_id": "ev-p1", "role": "formed"},
        {
            "kind": "experience_event",
            "experience_id": "ex-pair",
            "event_id": "ev-b1",
            "role": "applied",
            "note": "Beta",
        },
        {"kind": "experience_event", "experience_id": "ex-alpha", "event_id": "ev-1", "role": "formed"},
        {
            "kind": "experience_event",
            "experience_id": "ex-alpha",
            "event_id": "ev-1",
            "role": "applied",
            "note": "again",
        },
    ]


def write_jsonl(path: Path, lines: Iterable[Line | str]) -> Path:
    """One line per item; a str is written as is (for malformed lines)."""
    encoded = (item.encode() if isinstance(item, str) else orjson.dumps(item) for item in lines)
    path.write_bytes(b"\n".join(encoded) + b"\n")
    return path


def imported_graph(folder: Path, lines: Iterable[Line | str], name: str = "graph") -> Path:
    """A new graph database `folder/NAME.db` holding `lines` (written to `folder/NAME.jsonl`, imported)."""
    db = folder / f"{name}.db"
    migrate(db)
    import_file(db, write_jsonl(folder / f"{name}.jsonl", lines))
    return db


def dump(db: Path) -> list[str]:
    """The whole database as SQL text, for "nothing changed" checks."""
    with sqlite3.connect(db) as conn:
        return list(conn.iterdump())


GRAPH_TABLES = (
    "graph_state",
    "projects",
    "scopes",
    "scope_projects",
    "results",
    "leaves",
    "story_lines",
    "events",
    "event_entities",
    "entities",
    "entity_revisions",
    "entity_changes",
    "relations",
    "summaries",
    "fact_links",
    "sources",
    "source_versions",
    "source_chunks",
    "source_references",
    "object_sources",
    "entity_revision_sources",
    "memory_items",
    "stories",
    "story_events",
    "experiences",
    "experience_events",
)


def content(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every graph row, sorted, and the search items without their sequence numbers: equal for equal graphs. A
    source version's text_revision is a change counter (it depends on write order, not content), so it is left out."""
    with sqlite3.connect(db) as conn:
        tables = {table: sorted(conn.execute(f"SELECT * FROM {table}").fetchall()) for table in GRAPH_TABLES}
        tables["source_versions"] = sorted(
            conn.execute("SELECT source_id, version, length, recorded_at FROM source_versions").fetchall()
        )
        search = conn.execute(
            "SELECT (item_id >> 38) & 31, object_type, object_id, result_key, scope_key, event_time_start,"
            " event_time_end, review_generated_at, recorded_at, hi, lo, hi_fields, lo_fields, hi_grams, lo_grams"
            " FROM search_items"
        )
        tables["search_items"] = sorted(search.fetchall())
    return tables


def nested_json(depth: int) -> str:
    """A JSON object `depth` levels deep, `{"a":{"a":...{}...}}`, as text: orjson writes at most 254 levels."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def by_id(lines: list[Line], identifier: str) -> Line:
    return next(line for line in lines if line.get("id") == identifier)


def file_hash(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


def revisions(db: Path) -> dict[str, int]:
    """The data revisions of the graph and of each scope (by scope key), and their memory revisions ('memory:' and
    the same key; the Global memory items' own as 'global memory:graph')."""
    with sqlite3.connect(db) as conn:
        graph, graph_memory, global_memory = conn.execute(
            "SELECT data_revision, memory_revision, global_memory_revision FROM graph_state"
        ).fetchone()
        rows = conn.execute("SELECT scope_key, data_revision, memory_revision FROM scopes").fetchall()
    return (
        {"graph": graph, "memory:graph": graph_memory, "global memory:graph": global_memory}
        | {key: data for key, data, _ in rows}
        | {f"memory:{key}": memory for key, _, memory in rows}
    )


def chain_graph(events: int) -> list[Line]:
    """A graph of `events` events (and entities, evidence, changes, relations) in the `alpha` scope,
    listed so that every link points *forward* in the file: each kind before the kinds it names,
    and each relation before the relation it names."""
    entities, references = max(events // 5, 1), max(events // 10, 1)
    head: list[Line] = [
        {"kind": "project", "id": "alpha", "name": "Alpha"},
        {"kind": "scope", "scope": ALPHA},
        {"kind": "result", "id": "r-alpha", "scope": ALPHA, "review_generated_at": T0, "recorded_at": T1},
        {"kind": "story_line", "id": "sl-alpha", "scope": ALPHA, "topic": "Chain", "recorded_at": T0},
        {"kind": "source", "id": "src-1", "source_type": "note", "current_version": "v1", "updated_at": T0},
        {"kind": "source_version", "source_id": "src-1", "version": "v1", "text": LONG_TEXT, "recorded_at": T0},
    ]
    references_ = [
        {
            "kind": "source_reference",
            "id": f"ref-{i:06d}",
            "result_id": "r-alpha",
            "source_type": "note",
            "original_source_id": "src-1",
            "fragment": {"text": f"fragment {i}", "start": i, "end": i + len(f"fragment {i}")},
            "recorded_at": T1,
        }
        for i in range(references)
    ]
    entities_ = [
        {
            "kind": "entity",
            "id": f"ent-{i:06d}",
            "story_line_id": "sl-alpha",
            "canonical_label": f"Entity {i}",
            "updated_at": T0,
            "source_reference_ids": [f"ref-{i % references:06d}"],
        }
        for i in range(entities)
    ]
    events_ = [
        {
            "kind": "event",
            "id": f"ev-{i:06d}",
            "result_id": "r-alpha",
            "story_line_id": "sl-alpha",
            "event_type": "change",
            "title": f"Event {i} 方案",
            "event_time": {"start": T0},
            "recorded_at": T1,
            "entity_ids": [f"ent-{i % entities:06d}"],
            "source_reference_ids": [f"ref-{i % references:06d}"],
        }
        for i in range(events)
    ]
    changes = [
        {
            "kind": "entity_change",
            "entity_id": f"ent-{i:06d}",
            "association_key": "added",
            "result_id": "r-alpha",
            "event_id": f"ev-{i:06d}",
            "change_type": "added",
            "recorded_at": T1,
        }
        for i in range(entities)
    ]
    # Each relation names the next one; the last names an entity change.
    relations = [
        {
            "kind": "relation",
            "id": f"rel-{i:06d}",
            "result_id": "r-alpha",
            "from_ref": {"type": "event", "id": f"ev-{i:06d}"},
            "to_ref": {"type": "relation", "id": f"rel-{i + 1:06d}"}
            if i + 1 < events
            else {"type": "entity_change", "id": "ent-000000#added"},
            "relation_type": "related",
            "recorded_at": T1,
        }
        for i in range(events)
    ]
    body = references_ + entities_ + events_ + changes + relations
    tail: list[Line] = [
        {
            "kind": "summary",
            "id": "sum-1",
            "result_id": "r-alpha",
            "body": "The chain.",
            "recorded_at": T1,
            "fact_refs": [{"type": "relation", "id": "rel-000000"}, {"type": "event", "id": f"ev-{events - 1:06d}"}],
        },
        {
            "kind": "leaf",
            "id": "leaf-1",
            "result_id": "r-alpha",
            "recorded_at": T1,
            "facts": [{"object_ref": {"type": "entity_change", "id": "ent-000000#added"}, "description": "first"}],
        },
    ]
    # Reversed: whatever a line names comes later in the file.
    return list(reversed(head + body + tail))


def stats_table(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """`db stats`'s per-scope table, which follows its first blank line: (the scope keys heading its columns,
    then "total"; each row's heading -> its cells)."""
    lines = text.splitlines()
    at = lines.index("") + 1
    rows = {line[:17].strip(): line[17:].split() for line in lines[at + 1 :]}
    return lines[at].split(), rows
