"""Build a large, deterministic story graph in SQLite for benchmarks.

    python benchmarks/make_large_graph.py /tmp/sg-1m.db --objects 1000000

The database is created with the real migrations (`python -m server db migrate`), then filled with
raw SQL `executemany` inserts in a few big transactions. The schema's own triggers maintain the search
index (`search_docs`, `search_fts`) and the per-scope data revisions, exactly as for any other writer;
nothing here writes to the index directly.

"Objects" are rows of the searchable object tables: story lines, events, entities, entity revisions,
entity changes, relations, summaries and source references. Supporting rows (projects, scopes, 2,000
results by default, leaves, fact links, sources, evidence links) come on top. The same `--objects` and
`--seed` always give the same rows, ids and texts.

Scopes: `projects:["big"]` holds about 90 % of everything and is the benchmarks' default project;
`projects:["small"]` about 1 %; `alpha`, `beta`, the pair `alpha+beta` and `global` the rest.

Texts mix English and Chinese words from a fixed, skewed vocabulary (so `cache` and `方案` are common),
plus marker words at fixed frequencies so that some queries have few hits:

| marker | where | hits at 1M objects (big scope) |
| --- | --- | --- |
| `xylophone` | event descriptions, every 20,000th event | ~18 |
| `麒麟` | event titles, every 25,000th event | ~14 |
| `moderato` | event descriptions, every 200th event | ~1,800 |

On top of the objects, `graph_plants.py` plants what the benchmarks and the relevance set need (a big
neighbourhood, a big story line, a big source, identifier targets, decision stories, ops chatter).
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import orjson
from graph_plants import Plan, plant
from graph_text import (
    CHANGE_TYPES,
    CONFIRMATION,
    ENTITY_TYPES,
    EPOCH_SPAN,
    EPOCH_START,
    EVENT_TYPES,
    RELATION_TYPES,
    Text,
    iso,
)

ROOT: Final = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from server.store import search_index  # noqa: E402  (the bulk rebuild any bulk writer may use)

DEFAULT_OBJECTS: Final = 1_000_000
DEFAULT_RESULTS: Final = 2_000
DEFAULT_SEED: Final = 20260801
DEFAULT_SOURCE_CODE_POINTS: Final = 10_000_000
GRAPH_VERSION: Final = 6
"""Bump when the generated rows change, or how they are written (6: the search index merged into one b-tree, as an
import leaves it), so cached graphs (bench_common.ensure_graph) are rebuilt."""
BATCH: Final = 100_000
"""Rows per transaction."""

SEARCHABLE_TABLES: Final = frozenset(
    {
        "story_lines",
        "events",
        "entities",
        "entity_revisions",
        "entity_changes",
        "relations",
        "summaries",
        "source_references",
    }
)
BIG_PROJECT: Final = "big"
SMALL_PROJECT: Final = "small"

# Share of the searchable objects per type (adds up to 1).
TYPE_SHARES: Final[dict[str, float]] = {
    "story_line": 0.002,
    "event": 0.40,
    "entity": 0.10,
    "entity_revision": 0.15,
    "entity_change": 0.13,
    "relation": 0.10,
    "summary": 0.005,
    "source_reference": 0.113,
}


@dataclass(frozen=True)
class ScopePlan:
    key: str
    kind: str
    projects: tuple[str, ...]
    share: float
    """Share of the objects and of the results."""


SCOPES: Final[tuple[ScopePlan, ...]] = (
    ScopePlan('projects:["big"]', "projects", ("big",), 0.90),
    ScopePlan('projects:["alpha"]', "projects", ("alpha",), 0.04),
    ScopePlan('projects:["beta"]', "projects", ("beta",), 0.02),
    ScopePlan('projects:["alpha","beta"]', "projects", ("alpha", "beta"), 0.02),
    ScopePlan('projects:["small"]', "projects", ("small",), 0.01),
    ScopePlan("global", "global", (), 0.01),
)
BIG_SCOPE: Final = SCOPES[0].key
SMALL_SCOPE: Final = SCOPES[4].key


RARE_EN: Final = ("xylophone", 20_000, 11)
"""(word, every n-th event, offset): in the event description."""
RARE_ZH: Final = ("麒麟", 25_000, 13)
"""In the event title."""
MEDIUM_EN: Final = ("moderato", 200, 17)
"""In the event description."""


@dataclass
class Scope:
    plan: ScopePlan
    results: list[str] = field(default_factory=list)
    result_times: list[int] = field(default_factory=list)
    story_lines: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    source_references: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    leaves: list[str] = field(default_factory=list)


@dataclass
class BuildReport:
    path: Path
    objects: int
    seconds: float
    counts: dict[str, int]
    size_bytes: int
    planted: int = 0
    """Searchable objects planted on top of `objects` (graph_plants.py)."""

    def lines(self) -> list[str]:
        size = self.size_bytes / 2**20
        out = [
            f"built {self.path} ({self.objects:,} objects + {self.planted:,} planted) in {self.seconds:.1f} s,"
            f" {size:.0f} MiB"
        ]
        out += [f"  {table:<20} {count:>12,}" for table, count in self.counts.items()]
        return out


Row = tuple[object, ...]
Progress = Callable[[str], None]


def counts_for(objects: int) -> dict[str, int]:
    counts = {name: int(objects * share) for name, share in TYPE_SHARES.items()}
    counts["event"] += objects - sum(counts.values())
    return counts


def _split(total: int, minimum: int) -> list[int]:
    """Split `total` over the scopes by share, each at least `minimum`, adding up exactly when that is possible."""
    parts = [max(minimum, int(total * s.share)) for s in SCOPES]
    parts[0] = max(minimum, parts[0] + total - sum(parts))  # tiny graphs: a little over `total`
    return parts


def build(
    path: Path,
    objects: int = DEFAULT_OBJECTS,
    *,
    results: int = DEFAULT_RESULTS,
    seed: int = DEFAULT_SEED,
    source_code_points: int = DEFAULT_SOURCE_CODE_POINTS,
    progress: Progress | None = None,
) -> BuildReport:
    """Create `path` (which must not exist) and fill it. Returns the counts and the build time."""
    if path.exists():
        raise FileExistsError(f"{path} exists; remove it or choose another path")
    say = progress or (lambda _message: None)
    started = time.perf_counter()
    # The project's own command creates the schema, exactly as a user would.
    subprocess.run(
        [sys.executable, "-m", "server", "db", "migrate", "--db", str(path)],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        # Build-time settings only: a crash mid-build leaves a file to delete, not a database to trust.
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -1048576")  # 1 GiB
        conn.execute("PRAGMA temp_store = MEMORY")
        search_index.defer(conn)  # the triggers collect the touched items; one rebuild at the end
        _fill(conn, objects, results, seed, say)
        planted = plant(conn, Plan.for_size(objects, source_code_points), seed, say)
        index_started = time.perf_counter()
        conn.execute("BEGIN")
        search_index.rebuild(conn)
        conn.execute("COMMIT")
        say(f"  {'search index':<18} {'':>10} rebuilt in {time.perf_counter() - index_started:6.1f} s")
        conn.execute("PRAGMA journal_mode = WAL")  # as migrate() leaves it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        counts = {
            table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for table in (
                "results",
                "story_lines",
                "events",
                "entities",
                "entity_revisions",
                "entity_changes",
                "relations",
                "summaries",
                "source_references",
                "object_sources",
                "leaves",
                "fact_links",
                "sources",
                "search_items",
            )
        }
    finally:
        conn.close()
    seconds = time.perf_counter() - started
    searchable = sum(n for table, n in planted.items() if table in SEARCHABLE_TABLES)
    return BuildReport(path, objects, seconds, counts, path.stat().st_size, searchable)


def _insert(conn: sqlite3.Connection, sql: str, rows: Iterator[Row], say: Progress, label: str) -> int:
    """Insert in transactions of BATCH rows."""
    total = 0
    started = time.perf_counter()
    while True:
        batch: list[Row] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= BATCH:
                break
        if not batch:
            break
        conn.execute("BEGIN")
        conn.executemany(sql, batch)
        conn.execute("COMMIT")
        total += len(batch)
    say(f"  {label:<18} {total:>10,} rows in {time.perf_counter() - started:6.1f} s")
    return total


def _fill(conn: sqlite3.Connection, objects: int, result_count: int, seed: int, say: Progress) -> None:
    counts = counts_for(objects)
    rng = random.Random(seed)
    text = Text(rng)
    scopes = [Scope(plan) for plan in SCOPES]

    shares = [plan.share for plan in SCOPES]

    def pick_scope() -> Scope:
        return rng.choices(scopes, weights=shares)[0]

    # Projects, scopes, sources (a source lives in the first project of its scope; Global's have none).
    conn.execute("BEGIN")
    for project in ("alpha", "beta", "big", "small"):
        conn.execute("INSERT INTO projects (id, name) VALUES (?, ?)", (project, f"Project {project}"))
    for scope in scopes:
        conn.execute("INSERT INTO scopes (scope_key, kind) VALUES (?, ?)", (scope.plan.key, scope.plan.kind))
        for project in scope.plan.projects:
            conn.execute("INSERT INTO scope_projects (scope_key, project_id) VALUES (?, ?)", (scope.plan.key, project))
    conn.execute("COMMIT")

    source_count = max(len(scopes), objects // 200)
    source_rows: list[Row] = []
    version_rows: list[Row] = []
    chunk_rows: list[Row] = []
    for i, n in enumerate(_split(source_count, 1)):
        scope = scopes[i]
        for _ in range(n):
            source_id = f"src-{len(source_rows):07d}"
            body = text.words(60, 160)
            updated = iso(EPOCH_START + rng.randrange(EPOCH_SPAN))
            home = scope.plan.projects[0] if scope.plan.projects else None
            source_rows.append(
                (source_id, "conversation", home, f"conv-{len(source_rows) // 20:06d}", body[:40], "v1", updated)
            )
            version_rows.append((source_id, "v1", len(body), updated))
            chunk_rows.append((source_id, "v1", 0, body))
            scope.sources.append(source_id)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO sources (id, source_type, project_id, conversation_id, title, current_version, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        source_rows,
    )
    conn.executemany(
        "INSERT INTO source_versions (source_id, version, length, recorded_at) VALUES (?, ?, ?, ?)", version_rows
    )
    conn.executemany("INSERT INTO source_chunks (source_id, version, start, text) VALUES (?,?,?,?)", chunk_rows)
    conn.execute("COMMIT")
    source_lengths = {row[0]: int(str(row[2])) for row in version_rows}
    source_texts = {str(row[0]): str(row[3]) for row in chunk_rows}  # one chunk each: the whole text of v1
    say(f"  {'sources':<18} {len(source_rows):>10,} rows")

    # Results, with detailed coverage records (some absent, some legacy counts).
    result_rows: list[Row] = []
    for i, n in enumerate(_split(result_count, 20)):
        scope = scopes[i]
        for _ in range(n):
            number = len(result_rows)
            result_id = f"res-{number:06d}"
            generated = EPOCH_START + (number * EPOCH_SPAN) // max(1, result_count) + rng.randrange(3600)
            coverage: bytes | None
            if number % 10 == 9:
                coverage = None
            elif number % 10 == 8:
                coverage = orjson.dumps({"kind": "legacy_count", "count": rng.randrange(1, 500)})
            else:
                covered = rng.sample(scope.sources, min(2, len(scope.sources)))
                coverage = orjson.dumps(
                    {
                        "kind": "detailed",
                        "processed_range": {"from": iso(generated - 30 * 86_400), "to": iso(generated)},
                        "sources": [
                            {
                                "source_id": s,
                                "source_version": "v1",
                                "fragments": [[0, source_lengths[s]]],
                                "status": "processed",
                            }
                            for s in covered
                        ],
                        "missing": [],
                        "unprocessed_sources": rng.choice([0, 0, 0, 1]),
                        "source_types_included": ["conversation"],
                        "source_types_not_included": ["task", "knowledge"],
                    }
                )
            result_rows.append(
                (
                    result_id,
                    scope.plan.key,
                    iso(generated),
                    iso(generated + 120),
                    f"{result_id}.1",
                    None if coverage is None else coverage.decode(),
                )
            )
            scope.results.append(result_id)
            scope.result_times.append(generated)
    _insert(
        conn,
        "INSERT INTO results (id, scope_key, review_generated_at, recorded_at, revision, coverage_json)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        iter(result_rows),
        say,
        "results",
    )
    leaf_rows: list[Row] = []
    for scope in scopes:
        for k, result_id in enumerate(scope.results):
            leaf_id = f"leaf-{result_id}"
            leaf_rows.append((leaf_id, result_id, scope.plan.key, None, iso(scope.result_times[k] + 60)))
            scope.leaves.append(leaf_id)
    _insert(
        conn,
        "INSERT INTO leaves (id, result_id, scope_key, summary, recorded_at) VALUES (?, ?, ?, ?, ?)",
        iter(leaf_rows),
        say,
        "leaves",
    )

    def story_lines() -> Iterator[Row]:
        # Every scope gets at least one story line (entities need one).
        for i, n in enumerate(_split(counts["story_line"], 1)):
            scope = scopes[i]
            for _ in range(n):
                sid = f"sl-{sum(len(s.story_lines) for s in scopes):06d}"
                scope.story_lines.append(sid)
                yield (sid, scope.plan.key, text.words(2, 5), iso(EPOCH_START + rng.randrange(EPOCH_SPAN)), "1")

    _insert(
        conn,
        "INSERT INTO story_lines (id, scope_key, topic, recorded_at, revision) VALUES (?, ?, ?, ?, ?)",
        story_lines(),
        say,
        "story_lines",
    )

    def result_in(scope: Scope) -> tuple[str, int]:
        k = rng.randrange(len(scope.results))
        return scope.results[k], scope.result_times[k]

    def events() -> Iterator[Row]:
        for i in range(counts["event"]):
            scope = pick_scope()
            event_id = f"ev-{i:07d}"
            scope.events.append(event_id)
            result_id, generated = result_in(scope)
            title = text.words(3, 7)
            description = text.words(8, 22)
            for word, every, offset in (RARE_EN, MEDIUM_EN):
                if i % every == offset:
                    description += f" {word}"
            if i % RARE_ZH[1] == RARE_ZH[2]:
                title = f"{RARE_ZH[0]}{title}"
            start: str | None = None
            end: str | None = None
            precision: str | None = None
            basis: str | None = None
            roll = rng.random()
            if roll >= 0.12:  # 88 % of events have a known time
                at = generated - rng.randrange(30 * 86_400)
                start = iso(at)
                precision, basis = "minute", "message_time"
                if roll < 0.30:  # an interval
                    end = iso(at + rng.randrange(3600, 7 * 86_400))
                    precision, basis = "day", "stated_in_source"
            story_line = rng.choice(scope.story_lines) if rng.random() < 0.7 else None
            yield (
                event_id,
                result_id,
                scope.plan.key,
                story_line,
                rng.choice(EVENT_TYPES),
                title,
                description,
                start,
                end,
                precision,
                basis,
                iso(generated + 120),
                rng.choice(CONFIRMATION),
                "1",
            )

    _insert(
        conn,
        "INSERT INTO events (id, result_id, scope_key, story_line_id, event_type, title, description,"
        " event_time_start, event_time_end, event_time_precision, event_time_basis, recorded_at,"
        " confirmation_state, revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        events(),
        say,
        "events",
    )

    entity_scope: list[Scope] = []

    def entities() -> Iterator[Row]:
        for i in range(counts["entity"]):
            scope = pick_scope()
            entity_id = f"ent-{i:07d}"
            scope.entities.append(entity_id)
            entity_scope.append(scope)
            yield (
                entity_id,
                rng.choice(scope.story_lines),
                scope.plan.key,
                rng.choice(ENTITY_TYPES),
                text.words(2, 4),
                text.words(6, 16),
                rng.choice(CONFIRMATION),
                rng.choice((None, "proposed", "decided")),
                None,
                iso(EPOCH_START + rng.randrange(EPOCH_SPAN)),
                "3",
            )

    _insert(
        conn,
        "INSERT INTO entities (id, story_line_id, scope_key, entity_type, canonical_label, description,"
        " confirmation_state, decision_status, work_status, updated_at, revision)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        entities(),
        say,
        "entities",
    )

    def entity_revisions() -> Iterator[Row]:
        # Entity i gets revisions under distinct results of its scope, round-robin until the count is reached.
        emitted = 0
        round_number = 0
        while emitted < counts["entity_revision"] and entity_scope:
            for i, scope in enumerate(entity_scope):
                if emitted >= counts["entity_revision"]:
                    return
                if round_number >= len(scope.results):
                    continue
                k = (i * 7 + round_number) % len(scope.results)
                yield (
                    f"ent-{i:07d}",
                    scope.results[k],
                    scope.plan.key,
                    str(round_number + 1),
                    text.words(2, 4),
                    text.words(6, 16),
                    rng.choice(CONFIRMATION),
                    iso(scope.result_times[k] + 120),
                )
                emitted += 1
            round_number += 1

    _insert(
        conn,
        "INSERT INTO entity_revisions (entity_id, result_id, scope_key, revision, canonical_label, description,"
        " confirmation_state, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        entity_revisions(),
        say,
        "entity_revisions",
    )

    def entity_changes() -> Iterator[Row]:
        per_entity: dict[int, int] = {}
        for _ in range(counts["entity_change"]):
            i = rng.randrange(len(entity_scope))
            scope = entity_scope[i]
            n = per_entity.get(i, 0)
            per_entity[i] = n + 1
            result_id, generated = result_in(scope)
            event_id = rng.choice(scope.events) if scope.events and rng.random() < 0.8 else None
            yield (
                f"ent-{i:07d}",
                f"c{n}",
                result_id,
                scope.plan.key,
                event_id,
                rng.choice(CHANGE_TYPES),
                text.words(5, 14),
                str(n + 1),
                iso(generated - 86_400),
                None,
                rng.choice(CONFIRMATION),
                iso(generated + 120),
            )

    _insert(
        conn,
        "INSERT INTO entity_changes (entity_id, association_key, result_id, scope_key, event_id, change_type,"
        " description, entity_revision, applicable_from, applicable_to, confirmation_state, recorded_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        entity_changes(),
        say,
        "entity_changes",
    )

    def end_in(scope: Scope) -> tuple[str, str]:
        if scope.entities and (rng.random() < 0.6 or not scope.events):
            return "entity", rng.choice(scope.entities)
        if scope.events:
            return "event", rng.choice(scope.events)
        return "story_line", rng.choice(scope.story_lines)

    def relations() -> Iterator[Row]:
        for i in range(counts["relation"]):
            scope = pick_scope()
            result_id, generated = result_in(scope)
            from_type, from_id = end_in(scope)
            to_type, to_id = end_in(scope)
            yield (
                f"rel-{i:07d}",
                result_id,
                scope.plan.key,
                from_type,
                from_id,
                to_type,
                to_id,
                rng.choice(RELATION_TYPES),
                text.words(4, 12),
                rng.choice(CONFIRMATION),
                iso(generated + 120),
                "1",
            )

    _insert(
        conn,
        "INSERT INTO relations (id, result_id, scope_key, from_type, from_id, to_type, to_id, relation_type, reason,"
        " confirmation_state, recorded_at, revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        relations(),
        say,
        "relations",
    )

    def summaries() -> Iterator[Row]:
        for i in range(counts["summary"]):
            scope = pick_scope()
            result_id, generated = result_in(scope)
            known = rng.random() < 0.9
            open_items = orjson.dumps([text.words(3, 6) for _ in range(rng.randrange(0, 3))]).decode()
            yield (
                f"sum-{i:07d}",
                result_id,
                scope.plan.key,
                iso(generated - 30 * 86_400) if known else None,
                iso(generated) if known else None,
                text.words(30, 80),
                open_items,
                iso(generated + 120),
                "1",
            )

    _insert(
        conn,
        "INSERT INTO summaries (id, result_id, scope_key, interval_from, interval_to, body, open_items, recorded_at,"
        " revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        summaries(),
        say,
        "summaries",
    )

    def source_references() -> Iterator[Row]:
        for i in range(counts["source_reference"]):
            scope = pick_scope()
            result_id, generated = result_in(scope)
            source_id = rng.choice(scope.sources)
            length = source_lengths[source_id]
            start = rng.randrange(max(1, length - 40))
            size = len(text.words(10, 30))
            fragment = source_texts[source_id][start : start + size]  # v1's text there, as imports require
            reference_id = f"sref-{i:07d}"
            scope.source_references.append(reference_id)
            locator = (
                None
                if i % 17 == 0
                else orjson.dumps(
                    {
                        "project_id": scope.plan.projects[0] if scope.plan.projects else None,
                        "conversation_id": f"conv-{int(source_id[4:]) // 20:06d}",
                        "message_id": f"msg-{i:07d}",
                        "order": i % 50,
                        "role": "user" if i % 2 else "assistant",
                    }
                ).decode()
            )
            yield (
                reference_id,
                result_id,
                scope.plan.key,
                "conversation",
                source_id,
                "v1",
                locator,
                text.words(2, 5) if i % 3 else None,
                fragment,
                None if locator is None else start,
                None if locator is None else start + len(fragment),
                length,
                "available",
                iso(generated - rng.randrange(30 * 86_400)),
                iso(generated + 120),
            )

    _insert(
        conn,
        "INSERT INTO source_references (id, result_id, scope_key, source_type, original_source_id, source_version,"
        " locator_json, title, fragment, fragment_start, fragment_end, source_length, availability,"
        " source_record_time, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        source_references(),
        say,
        "source_references",
    )

    def object_sources() -> Iterator[Row]:
        # Evidence: every event and every other entity point at one or two references of their scope.
        seen: set[tuple[str, str, str]] = set()
        for scope in scopes:
            if not scope.source_references:
                continue
            owners: list[tuple[str, str]] = [("event", e) for e in scope.events]
            owners += [("entity", e) for e in scope.entities[::2]]
            for object_type, object_id in owners:
                for _ in range(rng.choice((1, 1, 2))):
                    reference = rng.choice(scope.source_references)
                    key = (object_type, object_id, reference)
                    if key not in seen:
                        seen.add(key)
                        yield (object_type, object_id, reference, scope.plan.key)

    _insert(
        conn,
        "INSERT INTO object_sources (object_type, object_id, source_reference_id, scope_key) VALUES (?, ?, ?, ?)",
        object_sources(),
        say,
        "object_sources",
    )

    def fact_links() -> Iterator[Row]:
        # Each leaf describes a few events of its scope in its own words (searched as 'leaf:<id>').
        for scope in scopes:
            if not scope.events:
                continue
            per_leaf = max(1, min(10, len(scope.events) // (20 * len(scope.leaves)) or 1))
            for leaf_id in scope.leaves:
                for event_id in sorted(set(rng.sample(scope.events, min(per_leaf, len(scope.events))))):
                    yield ("leaf", leaf_id, "event", event_id, scope.plan.key, text.words(6, 14))

    _insert(
        conn,
        "INSERT INTO fact_links (owner_type, owner_id, object_type, object_id, scope_key, description)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        fact_links(),
        say,
        "fact_links",
    )

    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO memory_items (id, project_id, body, updated_at) VALUES"
        " ('mem-1', NULL, 'Prefer 会话缓存 decisions in writing', '2025-01-01T00:00:00.000Z'),"
        " ('mem-2', 'big', 'Keep cache TTL under two hours', '2025-02-01T00:00:00.000Z')"
    )
    conn.execute("COMMIT")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("path", type=Path, help="database file to create (must not exist unless --force)")
    parser.add_argument("--objects", type=int, default=DEFAULT_OBJECTS, help="searchable objects (default 1,000,000)")
    parser.add_argument("--results", type=int, default=DEFAULT_RESULTS, help="review results (default 2,000)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--source-code-points",
        type=int,
        default=DEFAULT_SOURCE_CODE_POINTS,
        help="size of the planted big source (default 10,000,000)",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.objects < 1_000:
        parser.error("--objects must be at least 1,000")
    if args.force:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{args.path}{suffix}").unlink(missing_ok=True)
    report = build(
        args.path,
        args.objects,
        results=args.results,
        seed=args.seed,
        source_code_points=args.source_code_points,
        progress=print,
    )
    print("\n".join(report.lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
