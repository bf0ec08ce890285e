"""Write a large, deterministic interchange file (JSON Lines, docs/interchange.md) for import benchmarks.

    python benchmarks/make_jsonl.py /tmp/graph-100k.jsonl --objects 100000

Objects are counted as in make_large_graph.py (story lines, events, entities, entity revisions, entity changes,
relations, summaries, source references, in the same shares and scopes); projects, scopes, results, sources and
their versions come on top. Lines are streamed to the file (memory holds ids, not lines), and every reference
stays inside its scope, so the file imports cleanly into an empty database. The same --objects and --seed always
give the same bytes.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

import orjson
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
from make_large_graph import DEFAULT_SEED, SCOPES, ScopePlan, counts_for

JSONL_VERSION: Final = 3
"""Bump when the generated lines change (cached files are named by it)."""
SEARCHABLE: Final = frozenset(
    {"story_line", "event", "entity", "entity_revision", "entity_change", "relation", "summary", "source_reference"}
)

Line = dict[str, Any]


@dataclass
class Scope:
    plan: ScopePlan
    results: list[tuple[str, int]] = field(default_factory=list)
    sources: list[tuple[str, str]] = field(default_factory=list)
    """(id, text of its one version v1): a reference saves a slice of that text."""
    """(id, text length)."""
    story_lines: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)

    @property
    def wire(self) -> dict[str, Any]:
        if self.plan.kind == "global":
            return {"kind": "global"}
        return {"kind": "projects", "projectIds": list(self.plan.projects)}


class Generator:
    def __init__(self, objects: int, seed: int) -> None:
        self.objects = objects
        self.rng = random.Random(seed)
        self.text = Text(self.rng)
        self.scopes = [Scope(plan) for plan in SCOPES]
        self.weights = [plan.share for plan in SCOPES]

    def scope(self) -> Scope:
        return self.rng.choices(self.scopes, weights=self.weights)[0]

    def result_in(self, scope: Scope) -> tuple[str, int]:
        return self.rng.choice(scope.results)

    def evidence(self, scope: Scope) -> list[str]:
        if not scope.references or self.rng.random() < 0.3:
            return []
        return sorted(set(self.rng.sample(scope.references, min(len(scope.references), self.rng.choice((1, 1, 2))))))

    def lines(self) -> Iterator[Line]:
        counts = counts_for(self.objects)
        rng, text = self.rng, self.text
        for project in ("alpha", "beta", "big", "small"):
            yield {"kind": "project", "id": project, "name": f"Project {project}"}
        for scope in self.scopes:
            yield {"kind": "scope", "scope": scope.wire}
        # Sources live in the first project of their scope; Global's have none.
        for n in range(max(len(self.scopes), self.objects // 200)):
            scope = self.scopes[n % len(self.scopes)] if n < len(self.scopes) else self.scope()
            source_id, body = f"src-{n:07d}", text.words(60, 160)
            updated = iso(EPOCH_START + rng.randrange(EPOCH_SPAN))
            scope.sources.append((source_id, body))
            yield {
                "kind": "source",
                "id": source_id,
                "source_type": "conversation",
                "project_id": scope.plan.projects[0] if scope.plan.projects else None,
                "conversation_id": f"conv-{n // 20:06d}",
                "title": body[:40],
                "current_version": "v1",
                "updated_at": updated,
            }
            yield {
                "kind": "source_version",
                "source_id": source_id,
                "version": "v1",
                "text": body,
                "recorded_at": updated,
            }
        results = min(2_000, max(4 * len(self.scopes), self.objects // 50))
        for n in range(results):
            scope = self.scopes[n % len(self.scopes)] if n < 4 * len(self.scopes) else self.scope()
            yield self.result(scope, n, results)
        for n in range(counts["story_line"]):
            scope = self.scopes[n % len(self.scopes)] if n < len(self.scopes) else self.scope()
            story_id = f"sl-{n:06d}"
            scope.story_lines.append(story_id)
            recorded = iso(EPOCH_START + rng.randrange(EPOCH_SPAN))
            yield {
                "kind": "story_line",
                "id": story_id,
                "scope": scope.wire,
                "topic": text.words(2, 5),
                "recorded_at": recorded,
            }
        for n, scope in enumerate(self.scopes):  # every scope needs a story line for its entities
            if not scope.story_lines:
                story_id = f"sl-extra-{n:02d}"
                scope.story_lines.append(story_id)
                yield {
                    "kind": "story_line",
                    "id": story_id,
                    "scope": scope.wire,
                    "topic": "misc",
                    "recorded_at": iso(EPOCH_START),
                }
        yield from self.references(counts["source_reference"])
        yield from self.events(counts["event"])
        yield from self.entities(counts["entity"], counts["entity_revision"], counts["entity_change"])
        yield from self.relations(counts["relation"])
        yield from self.summaries(counts["summary"])

    def result(self, scope: Scope, n: int, results: int) -> Line:
        rng = self.rng
        result_id = f"res-{n:06d}"
        generated = EPOCH_START + (n * EPOCH_SPAN) // results + rng.randrange(3600)
        scope.results.append((result_id, generated))
        coverage: dict[str, Any] | None
        if n % 10 == 9:
            coverage = None
        elif n % 10 == 8:
            coverage = {"kind": "legacy_count", "count": rng.randrange(1, 500)}
        else:
            covered = rng.sample(scope.sources, min(2, len(scope.sources)))
            coverage = {
                "kind": "detailed",
                "processed_range": {"from": iso(generated - 30 * 86_400), "to": iso(generated)},
                "sources": [
                    {"source_id": s, "source_version": "v1", "fragments": [[0, len(body)]], "status": "processed"}
                    for s, body in covered
                ],
                "missing": [],
                "unprocessed_sources": rng.choice([0, 0, 0, 1]),
                "source_types_included": ["conversation"],
                "source_types_not_included": ["task", "knowledge"],
            }
        return {
            "kind": "result",
            "id": result_id,
            "scope": scope.wire,
            "review_generated_at": iso(generated),
            "recorded_at": iso(generated + 120),
            "revision": f"{result_id}.1",
            "coverage": coverage,
        }

    def references(self, count: int) -> Iterator[Line]:
        rng, text = self.rng, self.text
        for n in range(count):
            scope = self.scope()
            result_id, generated = self.result_in(scope)
            source_id, body = rng.choice(scope.sources)
            length = len(body)
            size = len(text.words(10, 30))
            start = rng.randrange(max(1, length - 40))
            fragment = body[start : start + size]  # the text of v1 at [start, start + len): imports compare them
            reference_id = f"sref-{n:07d}"
            scope.references.append(reference_id)
            locator = None
            if n % 17:
                locator = {
                    "project_id": scope.plan.projects[0] if scope.plan.projects else None,
                    "conversation_id": f"conv-{int(source_id[4:]) // 20:06d}",
                    "message_id": f"msg-{n:07d}",
                    "order": n % 50,
                    "role": "user" if n % 2 else "assistant",
                }
            yield {
                "kind": "source_reference",
                "id": reference_id,
                "result_id": result_id,
                "source_type": "conversation",
                "original_source_id": source_id,
                "source_version": "v1",
                "locator": locator,
                "title": text.words(2, 5) if n % 3 else None,
                "fragment": {
                    "text": fragment,
                    "start": None if locator is None else start,
                    "end": None if locator is None else start + len(fragment),
                },
                "source_length": length,
                "recorded_at": iso(generated + 120),
            }

    def events(self, count: int) -> Iterator[Line]:
        rng, text = self.rng, self.text
        for n in range(count):
            scope = self.scope()
            result_id, generated = self.result_in(scope)
            event_id = f"ev-{n:07d}"
            scope.events.append(event_id)
            event_time = None
            roll = rng.random()
            if roll >= 0.12:
                at = generated - rng.randrange(30 * 86_400)
                interval = roll < 0.30
                event_time = {
                    "start": iso(at),
                    "end": iso(at + rng.randrange(3600, 7 * 86_400)) if interval else None,
                    "precision": "day" if interval else "minute",
                    "basis": "stated_in_source" if interval else "message_time",
                }
            yield {
                "kind": "event",
                "id": event_id,
                "result_id": result_id,
                "story_line_id": rng.choice(scope.story_lines) if rng.random() < 0.7 else None,
                "event_type": rng.choice(EVENT_TYPES),
                "title": text.words(3, 7),
                "description": text.words(8, 22),
                "event_time": event_time,
                "recorded_at": iso(generated + 120),
                "confirmation_state": rng.choice(CONFIRMATION),
                "revision": "1",
                "source_reference_ids": self.evidence(scope),
            }

    def entities(self, count: int, revisions: int, changes: int) -> Iterator[Line]:
        rng, text = self.rng, self.text
        owners: list[Scope] = []
        for n in range(count):
            scope = self.scope()
            entity_id = f"ent-{n:07d}"
            scope.entities.append(entity_id)
            owners.append(scope)
            yield {
                "kind": "entity",
                "id": entity_id,
                "story_line_id": rng.choice(scope.story_lines),
                "entity_type": rng.choice(ENTITY_TYPES),
                "canonical_label": text.words(2, 4),
                "description": text.words(6, 16),
                "confirmation_state": rng.choice(CONFIRMATION),
                "decision_status": rng.choice((None, "proposed", "decided")),
                "updated_at": iso(EPOCH_START + rng.randrange(EPOCH_SPAN)),
                "revision": "3",
                "source_reference_ids": self.evidence(scope) if n % 2 == 0 else [],
            }
        emitted, round_number = 0, 0
        rounds = max(len(scope.results) for scope in self.scopes)
        while emitted < revisions and owners and round_number < rounds:
            for n, scope in enumerate(owners):  # entity n, under distinct results of its scope, round-robin
                if emitted >= revisions or round_number >= len(scope.results):
                    continue
                result_id, generated = scope.results[(n * 7 + round_number) % len(scope.results)]
                emitted += 1
                yield {
                    "kind": "entity_revision",
                    "entity_id": f"ent-{n:07d}",
                    "result_id": result_id,
                    "revision": str(round_number + 1),
                    "canonical_label": text.words(2, 4),
                    "description": text.words(6, 16),
                    "confirmation_state": rng.choice(CONFIRMATION),
                    "recorded_at": iso(generated + 120),
                }
            round_number += 1
        per_entity: dict[int, int] = {}
        for _ in range(changes if owners else 0):
            n = rng.randrange(len(owners))
            scope = owners[n]
            k = per_entity[n] = per_entity.get(n, 0) + 1
            result_id, generated = self.result_in(scope)
            yield {
                "kind": "entity_change",
                "entity_id": f"ent-{n:07d}",
                "association_key": f"c{k}",
                "result_id": result_id,
                "event_id": rng.choice(scope.events) if scope.events and rng.random() < 0.8 else None,
                "change_type": rng.choice(CHANGE_TYPES),
                "description": text.words(5, 14),
                "entity_revision": str(k),
                "applicable_from": iso(generated - 86_400),
                "recorded_at": iso(generated + 120),
            }

    def relations(self, count: int) -> Iterator[Line]:
        rng, text = self.rng, self.text

        def end(scope: Scope) -> dict[str, str]:
            if scope.entities and (rng.random() < 0.6 or not scope.events):
                return {"type": "entity", "id": rng.choice(scope.entities)}
            if scope.events:
                return {"type": "event", "id": rng.choice(scope.events)}
            return {"type": "story_line", "id": rng.choice(scope.story_lines)}

        for n in range(count):
            scope = self.scope()
            result_id, generated = self.result_in(scope)
            yield {
                "kind": "relation",
                "id": f"rel-{n:07d}",
                "result_id": result_id,
                "from_ref": end(scope),
                "to_ref": end(scope),
                "relation_type": rng.choice(RELATION_TYPES),
                "reason": text.words(4, 12),
                "recorded_at": iso(generated + 120),
                "revision": "1",
            }

    def summaries(self, count: int) -> Iterator[Line]:
        rng, text = self.rng, self.text
        for n in range(count):
            scope = self.scope()
            result_id, generated = self.result_in(scope)
            known = rng.random() < 0.9
            yield {
                "kind": "summary",
                "id": f"sum-{n:07d}",
                "result_id": result_id,
                "interval": {"from": iso(generated - 30 * 86_400), "to": iso(generated)} if known else None,
                "body": text.words(30, 80),
                "open_items": [text.words(3, 6) for _ in range(rng.randrange(0, 3))],
                "recorded_at": iso(generated + 120),
            }


def write(path: Path, objects: int, seed: int = DEFAULT_SEED) -> tuple[int, int]:
    """Write the file; returns (lines, searchable objects)."""
    lines = searchable = 0
    with path.open("wb") as out:
        sink: BinaryIO = out
        for line in Generator(objects, seed).lines():
            sink.write(orjson.dumps(line) + b"\n")
            lines += 1
            searchable += line["kind"] in SEARCHABLE
    return lines, searchable


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("path", type=Path, help="the JSON Lines file to write (replaced if it exists)")
    parser.add_argument("--objects", type=int, default=100_000, help="searchable objects (default 100,000)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.objects < 1_000:
        parser.error("--objects must be at least 1,000")
    started = time.perf_counter()
    lines, searchable = write(args.path, args.objects, args.seed)
    size = args.path.stat().st_size / 2**20
    print(
        f"wrote {args.path}: {lines:,} lines, {searchable:,} objects, {size:,.1f} MiB in "
        f"{time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
