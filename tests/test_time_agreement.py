"""Time filtering agrees across the tools and with docs/tools.md ("Time"), checked as a property.

Small graphs are generated (events with instants, intervals, no time, day precision; entity changes with and
without events; summaries with and without intervals; leaves describing objects under other results; a story; an
experience; results with different review and record times). For random time ranges, with ends at stored instants,
1 ms beside them, inside intervals and of zero width, and for each time_basis, every item's time on the basis is
worked out here from the generated lines by the documented rule, and:

* search for a word every generated object holds returns exactly the items whose time intersects the range, and
  `unknown_time_excluded_count` counts the matching items whose time is unknown;
* get_context (`current` and `timeline`) of the story line, the entity, the story and the experience lists exactly
  the selected items in range, counts the unknown-time ones, marks undated items and places them last;
* search and get_context give each object the same `event_interval`.
"""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonl_graph import ALPHA, imported_graph, small_graph
from mcp import Client
from support import all_items, all_pages, client_for, ok

from server.contracts.common import Grant

SEARCH = "story_graph_search"
CONTEXT = "story_graph_get_context"
WORD = "quokka"
# Every searchable text holds these five words: a query of nine terms, five of them these, finds every item by
# checking its candidates' text (the path for queries of more than eight terms).
PHRASE = f"{WORD} wombat numbat bilby dingo"
MANY_TERMS = f"{PHRASE} aardvark1 aardvark2 aardvark3 aardvark4"
BASES = ("event_time", "review_generated_at", "recorded_at")
BASE = datetime(2026, 3, 1, tzinfo=UTC)
# Stored instants: whole hours of two days, so that many objects share an edge.
HOURS = [0, 2, 5, 9, 24, 26, 30]
DAY = (BASE + timedelta(days=1), BASE + timedelta(days=2) - timedelta(milliseconds=1))  # 2026-03-02, whole UTC day

Span = tuple[datetime, datetime] | None
Line = dict[str, Any]


def iso(at: datetime) -> str:
    return f"{at.year:04d}" + at.strftime("-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def sent_form(at: datetime) -> str:
    """A range end as sent: to the millisecond, or to the microsecond when it is finer (rounded by the server)."""
    if at.microsecond % 1000 == 0:
        return iso(at)
    return f"{at.year:04d}" + at.strftime("-%m-%dT%H:%M:%S.%fZ")


def ceil_ms(at: datetime) -> datetime:
    return floor_ms(at) + timedelta(milliseconds=1) if at.microsecond % 1000 else at


def floor_ms(at: datetime) -> datetime:
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def hour(rng: random.Random) -> datetime:
    return BASE + timedelta(hours=rng.choice(HOURS))


class Graph:
    """The generated lines and, for each object row, its time on each basis, by the documented rule."""

    def __init__(self, seed: int) -> None:
        rng = self.rng = random.Random(seed)
        self.lines: list[Line] = [
            {"kind": "project", "id": "alpha", "name": "Alpha"},
            {"kind": "scope", "scope": ALPHA},
        ]
        # (object_type, object_id, result_key) -> {basis: span}; leaf rows under "leaf:<leaf>:<id>".
        self.times: dict[tuple[str, str, str], dict[str, Span]] = {}
        self.results: dict[str, Line] = {}
        for n in range(3):
            result: Line = {
                "kind": "result",
                "id": f"r{n}",
                "scope": ALPHA,
                "review_generated_at": self.written(hour(rng)),
                "recorded_at": self.written(hour(rng)),
            }
            if n == 0:  # one detailed coverage record; the others record no processed range
                a, b = sorted((hour(rng), hour(rng)))
                self.processed = (a, b.replace(microsecond=0) + timedelta(seconds=1))  # covers its last second whole
                result["coverage"] = {
                    "kind": "detailed",
                    "processed_range": {"from": self.written(a), "to": self.written(b)},
                    "sources": [],
                    "unprocessed_sources": 0,
                }
            self.results[result["id"]] = result
            self.lines.append(result)
        self.add("story_line", "sl", "", None, None, self.written(hour(rng)))
        self.lines.append(
            {
                "kind": "story_line",
                "id": "sl",
                "scope": ALPHA,
                "topic": f"{PHRASE} line",
                "recorded_at": self.rec("story_line", "sl", ""),
            }
        )
        updated = self.written(hour(rng))
        self.lines.append(
            {
                "kind": "entity",
                "id": "ent",
                "story_line_id": "sl",
                "canonical_label": f"{PHRASE} entity",
                "updated_at": updated,
            }
        )
        self.add("entity", "ent", "", None, None, updated)
        for result_id in rng.sample(sorted(self.results), rng.randint(0, 2)):
            at = self.written(hour(rng))
            self.lines.append(
                {
                    "kind": "entity_revision",
                    "entity_id": "ent",
                    "result_id": result_id,
                    "canonical_label": f"{PHRASE} entity then",
                    "recorded_at": at,
                }
            )
            self.add("entity", "ent", result_id, None, self.review(result_id), at)
        # Events: every shape of event time.
        self.event_span: dict[str, Span] = {}
        self.event_result: dict[str, str] = {}
        shapes = ["none", "instant", "interval", "day_instant", "day_interval"]
        for n in range(rng.randint(3, 6)):
            shape = shapes[n] if n < len(shapes) else rng.choice(shapes)
            event_id = f"ev{n}"
            result_id = rng.choice(sorted(self.results))
            time: Line | None
            span: Span
            if shape == "none":
                time, span = None, None
            elif shape == "instant":
                instant = hour(rng)
                time, span = {"start": self.written(instant), "precision": "minute"}, (instant, instant)
            elif shape == "interval":
                a, b = sorted((hour(rng), hour(rng)))
                time, span = {"start": self.written(a), "end": self.written(b), "precision": "hour"}, (a, b)
            elif shape == "day_instant":  # a day-precision start without end: matched as that instant
                instant = hour(rng) + timedelta(minutes=30)
                time, span = {"start": self.written(instant), "precision": "day"}, (instant, instant)
            else:
                time, span = {"start": self.written(DAY[0]), "end": self.written(DAY[1]), "precision": "day"}, DAY
            at = self.written(hour(rng))
            line: Line = {
                "kind": "event",
                "id": event_id,
                "result_id": result_id,
                "story_line_id": "sl",
                "event_type": "decision",
                "title": f"{PHRASE} event {n}",
                "recorded_at": at,
                "entity_ids": ["ent"],
            }
            if time is not None:
                line["event_time"] = time
            self.lines.append(line)
            self.event_span[event_id] = span
            self.event_result[event_id] = result_id
            self.add("event", event_id, result_id, span, self.review(result_id), at)
        events = sorted(self.event_span)
        # Entity changes: with an event (dated or not) and without one.
        self.change_span: dict[str, Span] = {}
        self.change_result: dict[str, str] = {}
        for n in range(rng.randint(1, 3)):
            result_id = rng.choice(sorted(self.results))
            change_event: str | None = rng.choice([None, *events])
            at = self.written(hour(rng))
            self.lines.append(
                {
                    "kind": "entity_change",
                    "entity_id": "ent",
                    "association_key": f"k{n}",
                    "result_id": result_id,
                    "event_id": change_event,
                    "change_type": "updated",
                    "description": f"{PHRASE} change {n}",
                    "recorded_at": at,
                }
            )
            span = None if change_event is None else self.event_span[change_event]
            self.change_span[f"ent#k{n}"] = span
            self.change_result[f"ent#k{n}"] = result_id
            self.add("entity_change", f"ent#k{n}", result_id, span, self.review(result_id), at)
        # Summaries, with and without an interval, listing events (so get_context of an event or entity shows them).
        self.summary_span: dict[str, Span] = {}
        self.summary_result: dict[str, str] = {}
        for n in range(rng.randint(1, 2)):
            result_id = rng.choice(sorted(self.results))
            a, b = sorted((hour(rng), hour(rng)))
            with_interval = n == 0 or rng.random() < 0.5
            at = self.written(hour(rng))
            line = {
                "kind": "summary",
                "id": f"sum{n}",
                "result_id": result_id,
                "body": f"{PHRASE} summary {n}",
                "recorded_at": at,
                "fact_refs": [{"type": "entity", "id": "ent"}, *({"type": "event", "id": e} for e in events)],
            }
            if with_interval:
                line["interval"] = {"from": self.written(a), "to": self.written(b)}
            self.lines.append(line)
            span = (a, b) if with_interval else None
            self.summary_span[f"sum{n}"] = span
            self.summary_result[f"sum{n}"] = result_id
            self.add("summary", f"sum{n}", result_id, span, self.review(result_id), at)
        # A story over some events, with or without a recorded span; an experience formed by some events.
        story_events = rng.sample(events, rng.randint(1, len(events)))
        story: Line = {
            "kind": "story",
            "id": "st",
            "level": "feature",
            "scope": ALPHA,
            "name": f"{PHRASE} story",
            "recorded_at": self.written(hour(rng)),
        }
        story_span: Span = None
        if rng.random() < 0.8:
            a, b = sorted((hour(rng), hour(rng)))
            story["started_at"] = self.written(a)
            if rng.random() < 0.7:
                story["ended_at"] = self.written(b)
                story_span = (a, b)
            else:
                story_span = (a, a)
        self.lines.append(story)
        self.lines += [{"kind": "story_event", "story_id": "st", "event_id": e, "primary": True} for e in story_events]
        self.add("story", "st", "", story_span, None, story["recorded_at"])
        formed = rng.sample(events, rng.randint(1, 2))
        applied = rng.sample([e for e in events if e not in formed], rng.randint(0, 1))
        experience: Line = {
            "kind": "experience",
            "id": "ex",
            "scope": ALPHA,
            "statement": f"{PHRASE} lesson",
            "recorded_at": self.written(hour(rng)),
        }
        self.lines.append(experience)
        self.lines += [
            {"kind": "experience_event", "experience_id": "ex", "event_id": e, "role": "formed"} for e in formed
        ]
        self.lines += [
            {"kind": "experience_event", "experience_id": "ex", "event_id": e, "role": "applied", "note": WORD}
            for e in applied
        ]
        starts = [span[0] for e in formed if (span := self.event_span[e]) is not None]
        experience_span: Span = (min(starts), min(starts)) if starts else None
        self.add("experience", "ex", "", experience_span, None, experience["recorded_at"])
        # Leaves, each under a result, describing events, changes, summaries and the entity (under any result).
        own_span: dict[tuple[str, str], Span] = {
            **{("event", k): v for k, v in self.event_span.items()},
            **{("entity_change", k): v for k, v in self.change_span.items()},
            **{("summary", k): v for k, v in self.summary_span.items()},
            ("entity", "ent"): None,
            ("story", "st"): story_span,
            ("experience", "ex"): experience_span,
        }
        targets = sorted(k for k in own_span if k[0] not in ("story", "experience"))  # leaves cannot link to them
        for n in range(rng.randint(1, 3)):
            result_id = rng.choice(sorted(self.results))
            at = self.written(hour(rng))
            described = rng.sample(targets, rng.randint(1, min(4, len(targets))))
            self.lines.append(
                {
                    "kind": "leaf",
                    "id": f"leaf{n}",
                    "result_id": result_id,
                    "recorded_at": at,
                    "facts": [
                        {"object_ref": {"type": t, "id": i}, "description": f"{PHRASE} leaf {n}"} for t, i in described
                    ],
                }
            )
            for object_type, object_id in described:
                # A leaf's description carries its object's event time; its review and record times are its own.
                self.add(
                    object_type,
                    f"leaf:leaf{n}:{object_id}",
                    result_id,
                    own_span[(object_type, object_id)],
                    self.review(result_id),
                    at,
                )
        # Rows without any event time: a relation and a source reference.
        ref_result = rng.choice(sorted(self.results))
        at = self.written(hour(rng))
        self.lines.append(
            {
                "kind": "source_reference",
                "id": "ref",
                "result_id": ref_result,
                "source_type": "note",
                "original_source_id": "note-1",
                "title": f"{PHRASE} note",
                "fragment": {"text": f"{PHRASE} said"},
                "recorded_at": at,
            }
        )
        self.add("source_reference", "ref", ref_result, None, self.review(ref_result), at)
        rel_result = rng.choice(sorted(self.results))
        at = self.written(hour(rng))
        self.lines.append(
            {
                "kind": "relation",
                "id": "rel",
                "result_id": rel_result,
                "from_ref": {"type": "event", "id": events[0]},
                "to_ref": {"type": "entity", "id": "ent"},
                "relation_type": "supports",
                "reason": f"{PHRASE} reason",
                "recorded_at": at,
                "source_reference_ids": ["ref"],
            }
        )
        self.add("relation", "rel", rel_result, None, self.review(rel_result), at)

    def written(self, at: datetime) -> str:
        """A stored time as an import may write it: in UTC or with another offset (the graph keeps it in UTC)."""
        offset = timedelta(minutes=self.rng.choice([0, 0, 480, -300, 345]))
        if not offset:
            return iso(at)
        local = at.astimezone(timezone(offset))
        return (
            local.strftime("%Y-%m-%dT%H:%M:%S.")
            + f"{local.microsecond // 1000:03d}"
            + local.strftime("%z")[:3]
            + ":"
            + local.strftime("%z")[3:]
        )

    def review(self, result_id: str) -> str:
        return str(self.results[result_id]["review_generated_at"])

    def rec(self, object_type: str, object_id: str, result_key: str) -> str:
        span = self.times[(object_type, object_id, result_key)]["recorded_at"]
        assert span is not None
        return iso(span[0])

    def add(
        self, object_type: str, object_id: str, result_key: str, event: Span, review: str | None, recorded: str
    ) -> None:
        def instant(text: str | None) -> Span:
            return None if text is None else (parse(text), parse(text))

        self.times[(object_type, object_id, result_key)] = {
            "event_time": event,
            "review_generated_at": instant(review),
            "recorded_at": instant(recorded),
        }

    def search_time(self, object_type: str, object_id: str, result_key: str, basis: str) -> Span:
        """A search item is one object under one result: its own row there, a leaf's description there, or both (an
        object's row and a leaf of the same result describing it). Its time is its row's when it has one (event time:
        the same as its leaves'), else the leaf's; a leaf's record time counts only when there is no row."""
        key = (object_type, object_id, result_key)
        if key in self.times:
            return self.times[key][basis]
        leaves = [
            times[basis]
            for (t, i, r), times in self.times.items()
            if t == object_type and r == result_key and i.startswith("leaf:") and i.endswith(f":{object_id}")
        ]
        assert leaves, key
        if basis == "recorded_at":  # the latest of its leaves' record times
            return max((s for s in leaves if s is not None), default=None)
        return leaves[0]

    def search_keys(self) -> set[tuple[str, str, str]]:
        """Every search item the word finds: each row, and each leaf description as (object, leaf's result)."""
        keys = set()
        for object_type, object_id, result_key in self.times:
            if object_id.startswith("leaf:"):
                object_id = object_id.split(":", 2)[2]
            keys.add((object_type, object_id, result_key))
        return keys


def intersects(span: Span, time_range: tuple[datetime, datetime]) -> bool:
    return span is not None and span[0] <= time_range[1] and span[1] >= time_range[0]


def interval_of(span: Span) -> tuple[str, str] | None:
    return None if span is None else (iso(span[0]), iso(span[1]))


def shown_interval(item: dict[str, Any]) -> tuple[str, str] | None:
    interval = item["event_interval"]
    if interval is None:
        return None
    return (interval["start"], interval["end"] or interval["start"])


def candidate_points(graph: Graph) -> list[datetime]:
    """Range ends: every stored instant, 1 ms before and after, points inside intervals, and far away."""
    stored = {point for times in graph.times.values() for span in times.values() if span is not None for point in span}
    points = set()
    for at in stored:
        points |= {at, at - timedelta(milliseconds=1), at + timedelta(milliseconds=1)}
        points |= {at - timedelta(microseconds=500), at + timedelta(microseconds=500)}  # finer than stored

    ordered = sorted(stored)
    points |= {a + (b - a) / 2 for a, b in itertools.pairwise(ordered)}
    # Far ends, also beyond the 120 months the index reads with the words.
    points |= {BASE - timedelta(days=30), BASE + timedelta(days=30), datetime(1, 1, 1, tzinfo=UTC)}
    points |= {datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)}
    return sorted(points)


# A story line and an entity holding everything, a story, an experience, and objects leaves describe: an undated
# event, an event with an interval, an entity change and a summary.
CONTEXT_TARGETS = (
    ("story_line", "sl"),
    ("entity", "ent"),
    ("story", "st"),
    ("experience", "ex"),
    ("event", "ev0"),
    ("event", "ev2"),
    ("entity_change", "ent#k0"),
    ("summary", "sum0"),
)


def context_key(item: dict[str, Any]) -> tuple[str, str, str]:
    return (item["object_ref"]["type"], item["object_ref"]["id"], item["result_id"] or "")


async def context_items(
    client: Client, target: tuple[str, str], mode: str, extra: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    args = {"object_ref": {"type": target[0], "id": target[1]}, "mode": mode, "page_size": 50} | extra
    pages = await all_pages(client, CONTEXT, args)
    items = {context_key(item): item for page in pages for item in page["items"]}  # fragments of one item: once
    return list(items.values()), pages[0]


_COUNTER = itertools.count()


@settings(
    max_examples=6,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), data=st.data())
def test_time_ranges_agree_across_search_and_get_context(tmp_path: Path, seed: int, data: st.DataObject) -> None:
    graph = Graph(seed)
    folder = tmp_path / f"g{next(_COUNTER)}"
    folder.mkdir()
    db = imported_graph(folder, graph.lines)
    points = candidate_points(graph)
    ranges = []
    for _ in range(3):
        a, b = sorted((data.draw(st.sampled_from(points)), data.draw(st.sampled_from(points))))
        ranges.append((a, a) if data.draw(st.booleans()) else (a, b))  # some of zero width
    anyio.run(_check, graph, db, ranges, backend="asyncio")


async def _check(graph: Graph, db: Path, ranges: list[tuple[datetime, datetime]]) -> None:
    async with client_for(db, Grant(default_project="alpha")) as client:
        # Without a range: every item is found, each at the time the rule gives.
        found = await all_items(client, SEARCH, {"query": WORD, "page_size": 50})
        found_keys = {(i["object_ref"]["type"], i["object_ref"]["id"], i["result_id"] or "") for i in found}
        assert found_keys == graph.search_keys()
        search_interval = {
            key: shown_interval(i)
            for key, i in zip(
                [(i["object_ref"]["type"], i["object_ref"]["id"], i["result_id"] or "") for i in found],
                found,
                strict=True,
            )
        }
        for key, shown in search_interval.items():
            assert shown == interval_of(graph.search_time(*key, "event_time")), key
        whole: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for target in CONTEXT_TARGETS:
            items, _ = await context_items(client, target, "timeline", {})
            whole[target] = items
            for item in items:
                key = context_key(item)
                assert shown_interval(item) == interval_of(graph.times[key]["event_time"]), key
                assert item["undated"] is (graph.times[key]["event_time"] is None), key
                # The same object (or leaf description) as search shows it: the same event time.
                object_id = key[1].split(":", 2)[2] if key[1].startswith("leaf:") else key[1]
                searched = search_interval.get((key[0], object_id, key[2]))
                if searched is not None or (key[0], object_id, key[2]) in search_interval:
                    assert shown_interval(item) == searched, key

        for time_range in ranges:
            a, b = time_range
            sent = {"from": sent_form(a), "to": sent_form(b)}
            used = {"from": iso(ceil_ms(a)), "to": iso(floor_ms(b))}
            for basis in BASES:
                label = f"{basis} [{sent['from']}, {sent['to']}]"
                # time_range_coverage: the one processed range covers every instant of the range (one within a
                # millisecond: the millisecond it lies in), else unknown (the other results record no range).
                low, high = min(ceil_ms(a), floor_ms(b)), floor_ms(b)
                covered = graph.processed[0] <= low and high < graph.processed[1]
                coverage = None if basis != "event_time" else "covered" if covered else "unknown"
                expected = {k for k in graph.search_keys() if intersects(graph.search_time(*k, basis), time_range)}
                unknown = sum(1 for k in graph.search_keys() if graph.search_time(*k, basis) is None)
                # The whole word, a two-letter needle (trigram lookup), a two-term query (term matching) and nine terms.
                # Small pages too: the filter applies before paging.
                for query, page_size in ((WORD, 50), (WORD[:2], 4), (f"{WORD} zyzzyva", 50), (MANY_TERMS, 7)):
                    args = {"query": query, "page_size": page_size, "time_range": sent, "time_basis": basis}
                    page = await all_pages(client, SEARCH, args)
                    keys = {
                        (i["object_ref"]["type"], i["object_ref"]["id"], i["result_id"] or "")
                        for p in page
                        for i in p["items"]
                    }
                    assert keys == expected, (label, query)
                    assert page[0]["unknown_time_excluded_count"] == unknown, (label, query)
                    assert page[0]["page"]["total_count"] == len(expected), (label, query)
                    assert page[0]["time_range"] == used, (label, query)
                    within = page[0]["coverage"]["time_range_coverage"]
                    assert (within and within["status"]) == coverage, (label, query)
                # With a type filter, the same rule among the types asked for.
                types = ["event", "entity_change", "summary", "story", "experience"]
                page = await all_pages(
                    client,
                    SEARCH,
                    {"query": WORD, "object_types": types, "time_range": sent, "time_basis": basis, "page_size": 50},
                )
                keys = {
                    (i["object_ref"]["type"], i["object_ref"]["id"], i["result_id"] or "")
                    for p in page
                    for i in p["items"]
                }
                assert keys == {k for k in expected if k[0] in types}, (label, types)
                typed_unknown = [
                    k for k in graph.search_keys() if k[0] in types and graph.search_time(*k, basis) is None
                ]
                assert page[0]["unknown_time_excluded_count"] == len(typed_unknown), (label, types)
                for target in CONTEXT_TARGETS:
                    selected = whole[target]
                    want = [
                        context_key(i) for i in selected if intersects(graph.times[context_key(i)][basis], time_range)
                    ]
                    unknown_rows = sum(1 for i in selected if graph.times[context_key(i)][basis] is None)
                    for mode in ("timeline", "current"):
                        extra = {"time_range": sent, "time_basis": basis} | (
                            {"page_size": 5} if mode == "current" else {}
                        )
                        items, first = await context_items(client, target, mode, extra)
                        got = [context_key(i) for i in items if i["role"] != "background"]
                        assert sorted(got) == sorted(want), (label, target, mode)
                        assert first["unknown_time_excluded_count"] == unknown_rows, (label, target, mode)
                        undated = [k for k in got if graph.times[k]["event_time"] is None]
                        assert first["undated_count"] == len(undated), (label, target, mode)
                        assert first["time_range"] == used, (label, target, mode)
                        within = first["coverage"]["time_range_coverage"]
                        assert (within and within["status"]) == coverage, (label, target, mode)
                        # Events and changes without event time, by their own rows: those kept, and those the range
                        # left out for having no time (on event_time, every one).
                        gap = sorted(
                            k[:2]
                            for k in (context_key(i) for i in selected)
                            if k[0] in ("event", "entity_change")
                            and not k[1].startswith("leaf:")
                            and graph.times[k]["event_time"] is None
                            and (basis == "event_time" or k in got)
                        )
                        gaps = {g["kind"]: g for g in first["known_gaps"]}
                        if gap:
                            assert gaps["unknown_event_time"]["count"] == len(set(gap)), (label, target, mode)
                        else:
                            assert "unknown_event_time" not in gaps, (label, target, mode)
                        if mode == "timeline":  # dated first, in event-time order, then the undated ones
                            assert got[len(got) - len(undated) :] == [k for k in got if k in undated]
                            dated = [graph.times[k]["event_time"] for k in got[: len(got) - len(undated)]]
                            starts = [span[0] for span in dated if span is not None]
                            assert starts == sorted(starts)


async def _sub_millisecond_coverage(db: Path) -> list[tuple[str, str | None]]:
    async with client_for(db, Grant(default_project="alpha")) as client:
        found = []
        for at in ("2026-03-01T09:00:00.0005Z", "2026-03-01T10:00:00.0005Z", "2026-03-05T09:00:00.0005Z"):
            window = {"time_range": {"from": at, "to": at}}
            searched = await ok(client, SEARCH, {"query": "SQLite"} | window)
            read = await ok(client, CONTEXT, {"object_ref": {"type": "story_line", "id": "sl-alpha"}} | window)
            statuses = {page["coverage"]["time_range_coverage"]["status"] for page in (searched, read)}
            assert len(statuses) == 1
            found.append((searched["time_range"]["from"], statuses.pop()))
    return found


def test_a_range_within_one_millisecond_is_covered_only_where_a_review_processed_it(tmp_path: Path) -> None:
    """A range within one millisecond is rounded to `from` one millisecond after `to`; time_range_coverage read it as
    empty and said `covered` wherever it lay, even an hour before and days after the only processed range (small_graph's
    r-alpha: 2026-03-01T10:00Z to 2026-03-02T10:30Z). It holds one instant, covered only within that range."""
    db = imported_graph(tmp_path, small_graph())
    found = anyio.run(_sub_millisecond_coverage, db, backend="asyncio")
    assert found == [
        ("2026-03-01T09:00:00.001Z", "not_covered"),
        ("2026-03-01T10:00:00.001Z", "covered"),
        ("2026-03-05T09:00:00.001Z", "not_covered"),
    ]
