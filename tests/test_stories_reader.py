"""Stories and experiences through the three tools, over every transport (in process, stdio, HTTP).

The demo graph (docs/demo.md, "Stories and experiences") plus a feature story of 500 Atlas events, read by
two callers: one granted Atlas and Beacon (it may read the pair), one granted only Beacon. Every transport
must give the same structured results, call for call, apart from `read_at`; the scenarios assert what a
user would notice: stories and experiences are found in their exact scope only, a story's or experience's
events come in time order (undated last) with their own scope and source entry points, long stories page
to their last page, and a caller never sees — nor counts — a cross story's or experience's events outside
its grant.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from http_support import SECRET, TOKENS, http_client, http_server, policy_text, stdio_session, write_secret
from jsonl_graph import write_jsonl
from mcp import Client
from support import client_for, demo_db, error, ok

from server.app import build_server
from server.contracts.common import Grant
from server.contracts.context import OWN_SCOPE_NOTE
from server.policy import PolicyFile, StdioPolicyAccess
from server.reader.cursor import CursorCodec
from server.store.importer import import_file

pytestmark = pytest.mark.anyio

SEARCH, CONTEXT, SOURCE = "story_graph_search", "story_graph_get_context", "story_graph_read_source"
ATLAS = {"kind": "projects", "projectIds": ["atlas"]}
BEACON = {"kind": "projects", "projectIds": ["beacon"]}
PAIR = {"kind": "projects", "projectIds": ["atlas", "beacon"]}
BOTH = {"default_project": "atlas", "projects": ["atlas", "beacon"], "allow_global": False}
BEACON_ONLY = {"default_project": "beacon", "projects": ["beacon"], "allow_global": False}
LONG_STORY = "story-atlas-load-history"
LONG_EVENTS = 500
STORY_KEYS = {
    "id", "projectId", "projectName", "parentId", "level", "name", "description", "state", "stateEventId",
    "userEdited", "startedAt", "endedAt", "event_ids", "thread_ids", "event_count",
}  # fmt: skip
EXPERIENCE_EVENT_KEYS = {
    "id", "role", "note", "title", "projectId", "at", "storyId", "storyName", "atEnd", "atPrecision", "scope",
}  # fmt: skip


def long_story_lines() -> list[dict[str, Any]]:
    """A feature story of 500 Atlas events: every ninth undated, the others spread over 2026 (deterministic)."""
    lines: list[dict[str, Any]] = []
    for n in range(LONG_EVENTS):
        event: dict[str, Any] = {
            "kind": "event",
            "id": f"evt-load-{n:03d}",
            "result_id": "res-atlas-2026-07",
            "event_type": "milestone",
            "title": f"Load test run {n} / 负载测试 {n}",
            "recorded_at": "2026-07-15T10:00:00Z",
        }
        if n % 9 != 4:
            event["event_time"] = {"start": f"2026-{1 + (n * 7) % 12:02d}-{1 + (n * 13) % 28:02d}T{n % 24:02d}:00:00Z"}
        lines.append(event)
    lines.append(
        {
            "kind": "story",
            "id": LONG_STORY,
            "level": "feature",
            "scope": ATLAS,
            "name": "Load history / 负载历史",
            "description": "Every load test run of the sync service.",
            "started_at": "2026-01-01T00:00:00Z",
            "recorded_at": "2026-07-15T10:00:00Z",
        }
    )
    lines += [
        {"kind": "story_event", "story_id": LONG_STORY, "event_id": f"evt-load-{n:03d}", "primary": True}
        for n in range(LONG_EVENTS)
    ]
    return lines


def stories_db(work: Path) -> Path:
    db = demo_db(work)
    import_file(db, write_jsonl(work / "long-story.jsonl", long_story_lines()))
    return db


@dataclass
class Session:
    client: Client
    transcript: list[tuple[str, Any]] = field(default_factory=list)

    async def ok(self, label: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await ok(self.client, tool, arguments)
        self.transcript.append((label, _without_read_at(result)))
        return result

    async def error(self, label: str, tool: str, arguments: dict[str, Any], code: str) -> dict[str, Any]:
        payload = await error(self.client, tool, arguments)
        assert payload["error"] == code, payload
        self.transcript.append((label, payload))
        return payload

    async def read_all(self, label: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
        pages = [await self.ok(f"{label} p1", CONTEXT, arguments)]
        while pages[-1]["page"]["next_cursor"] is not None:
            assert len(pages) < 200, "paging does not end"
            cursor = pages[-1]["page"]["next_cursor"]
            pages.append(await self.ok(f"{label} p{len(pages) + 1}", CONTEXT, arguments | {"cursor": cursor}))
        assert pages[-1]["page"]["complete"] is True
        return pages


def _without_read_at(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_read_at(v) for k, v in value.items() if k != "read_at"}
    if isinstance(value, list):
        return [_without_read_at(v) for v in value]
    return value


def objects(pages: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Reassembled graph objects per (type, id), in stream order, each with its first fragment's fields."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    texts: dict[tuple[str, str], str] = {}
    for page in pages:
        for item in page["items"]:
            key = (item["object_ref"]["type"], item["object_ref"]["id"])
            found.setdefault(key, item)
            assert item["position"]["start"] == len(texts.get(key, ""))
            texts[key] = texts.get(key, "") + item["content"]
    return {key: found[key] | {"data": orjson.loads(texts[key])} for key in found}


def refs(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(i["object_ref"]["type"], i["object_ref"]["id"]) for i in items]


# ---------------------------------------------------------------- what a caller granted Atlas and Beacon sees


async def search_in_exact_scopes(s: Session) -> None:
    feature = await s.ok("story by name", SEARCH, {"query": "Session cache", "object_types": ["story"]})
    assert ("story", "story-atlas-session-cache") in refs(feature["items"])
    assert all(i["scope"] == ATLAS for i in feature["items"]) and ("story", "story-pair-edge-stack") not in refs(
        feature["items"]
    )
    # Stories lead a tie: the feature named 会话缓存 comes before every other whole-query match in a title.
    mixed = await s.ok("story leads", SEARCH, {"query": "会话缓存", "page_size": 3})
    assert refs(mixed["items"])[0] == ("story", "story-atlas-session-cache")
    story = mixed["items"][0]
    assert story["title"] == "Session cache / 会话缓存" and story["confirmation_state"] == "user_edited"
    assert story["event_time"] == "2026-02-01T02:00:00.000Z" and story["result_id"] is None
    assert story["source_reference_ids"] == [] and "name" in story["matched_fields"]

    statement = {"query": "infrastructure ops cannot run", "object_types": ["experience"]}
    in_atlas = await s.ok("experience from atlas", SEARCH, statement)
    assert in_atlas["items"] == [] and in_atlas["page"]["total_count"] == 0
    in_pair = await s.ok("experience in the pair", SEARCH, statement | {"scope": PAIR})
    [lesson] = in_pair["items"]
    assert lesson["object_ref"] == {"type": "experience", "id": "exp-edge-box-infra"}
    assert lesson["match_kind"] == "whole_query" and "statement" in lesson["matched_fields"]
    assert lesson["title"].startswith("Don't pick infrastructure ops cannot run on the edge boxes")
    assert lesson["event_time"] == "2026-05-02T01:17:00.000Z"  # its first formation: the May revision
    assert lesson["confirmation_state"] == "automatic" and lesson["scope"] == PAIR
    cross = await s.ok("cross story", SEARCH, {"query": "edge boxes", "object_types": ["story"], "scope": PAIR})
    assert refs(cross["items"]) == [("story", "story-pair-edge-stack")]
    assert in_pair["coverage"]["object_types_not_included"] == []


async def a_feature_story_end_to_end(s: Session) -> None:
    story = {"type": "story", "id": "story-atlas-session-cache"}
    [current] = await s.read_all("feature current", {"object_ref": story, "page_size": 50})
    header = current["header"]
    assert header["label"] == "Session cache / 会话缓存" and header["confirmation_state"] == "user_edited"
    assert header["story"]["level"] == "feature" and header["story"]["state"] == "active"
    assert [t["id"] for t in header["story"]["threads"]] == ["story-atlas-redis-plan", "story-atlas-sqlite-wal"]
    found = objects([current])
    data = found[("story", "story-atlas-session-cache")]["data"]
    assert set(data) >= STORY_KEYS and data["userEdited"] is True and data["parentId"] is None
    # Its events: its own primary events and its threads', each an item in its own scope with its evidence.
    events = [key for key in found if key[0] == "event"]
    assert [key[1] for key in events] == data["event_ids"] and data["event_count"] == 8
    assert {"evt-decision-a", "evt-decision-b", "evt-late-recorded-kickoff"} <= set(data["event_ids"])
    assert "evt-retry-policy" not in data["event_ids"]  # in no story
    assert all(found[key]["scope"] == ATLAS and found[key]["role"] == "evolution" for key in events)
    assert found[("event", "evt-revision-a-to-b")]["source_reference_ids"] == [
        "ref-revision-1",
        "ref-revision-2",
        "ref-revision-3",
    ]
    quote = await s.ok("quote an event", SOURCE, {"source_reference_id": "ref-revision-2"})
    assert "cannot run Redis on the edge boxes" in quote["content"]

    pages = await s.read_all("feature timeline", {"object_ref": story, "mode": "timeline", "page_size": 4})
    timeline = objects(pages)
    times = [i["event_time"] for i in timeline.values()]
    first_undated = times.index(None)
    assert times[:first_undated] == sorted(times[:first_undated]) and set(times[first_undated:]) == {None}
    assert [i["undated"] for i in timeline.values()] == [t is None for t in times]
    assert [key[1] for key in timeline if timeline[key]["undated"]] == ["evt-unknown-time-1", "evt-unknown-time-2"]
    assert pages[0]["undated_count"] == 2 and pages[0]["header"] is None
    assert set(timeline) == set(found)

    thread = await s.ok("thread", CONTEXT, {"object_ref": {"type": "story", "id": "story-atlas-redis-plan"}})
    view = thread["header"]["story"]
    assert view["state"] == "concluded" and view["state_event"] == {"type": "event", "id": "evt-revision-a-to-b"}
    assert view["state_event_scope"] == ATLAS and view["state_event_title"].startswith("Session cache plan revised")
    assert view["parent"] == {"type": "story", "id": "story-atlas-session-cache"}


async def cross_story_and_experience(s: Session) -> None:
    cross = await s.read_all(
        "cross story", {"object_ref": {"type": "story", "id": "story-pair-edge-stack"}, "scope": PAIR}
    )
    found = objects(cross)
    scopes = {key[1]: found[key]["scope"] for key in found if key[0] == "event"}
    assert scopes == {
        "evt-revision-a-to-b": ATLAS,
        "evt-decision-b": ATLAS,
        "evt-pair-edge-box-rule": PAIR,
        "evt-beacon-push-relay": BEACON,
    }
    assert cross[0]["header"]["story"]["level"] == "cross" and cross[0]["header"]["story"]["event_count"] == 4
    assert OWN_SCOPE_NOTE in cross[0]["notes"]
    # An event's sources are read in the event's own scope, which its item names.
    beacon_event = found[("event", "evt-beacon-push-relay")]
    assert beacon_event["source_reference_ids"] == ["ref-beacon-push"]
    quote = await s.ok("beacon quote", SOURCE, {"source_reference_id": "ref-beacon-push", "scope": BEACON})
    assert "long-poll" in quote["content"]
    await s.error(
        "quote in the pair", SOURCE, {"source_reference_id": "ref-beacon-push", "scope": PAIR}, "scope_mismatch"
    )

    lesson = await s.read_all(
        "experience", {"object_ref": {"type": "experience", "id": "exp-edge-box-infra"}, "scope": PAIR}
    )
    view = lesson[0]["header"]["experience"]
    assert view["formed_count"] == 2 and view["applied_count"] == 2 and "advice, not a rule" in view["note"]
    data = objects(lesson)[("experience", "exp-edge-box-infra")]["data"]
    links = {(link["id"], link["role"]): link for link in data["events"]}
    assert set(links) == {
        ("evt-revision-a-to-b", "formed"),
        ("evt-decision-b", "applied"),
        ("evt-pair-edge-box-rule", "formed"),
        ("evt-beacon-push-relay", "applied"),
    }
    assert all(set(link) >= EXPERIENCE_EVENT_KEYS for link in data["events"])
    applied = links[("evt-beacon-push-relay", "applied")]
    assert applied["projectId"] == "beacon" and applied["scope"] == BEACON and "MQTT" in applied["note"]
    assert links[("evt-pair-edge-box-rule", "formed")]["projectId"] is None  # an event of the pair itself
    assert links[("evt-decision-b", "applied")]["storyId"] == "story-atlas-sqlite-wal"
    decided = links[("evt-decision-b", "applied")]  # its time: 2026-05-03 15:00 +08:00, to the minute
    assert (decided["at"], decided["atEnd"], decided["atPrecision"]) == ("2026-05-03T07:00:00.000Z", None, "minute")
    assert [key[1] for key in objects(lesson) if key[0] == "event"] == data["event_ids"]


async def a_long_story_to_its_last_page(s: Session) -> None:
    story = {"type": "story", "id": LONG_STORY}
    pages = await s.read_all("long timeline", {"object_ref": story, "mode": "timeline", "page_size": 50})
    assert len(pages) > LONG_EVENTS // 50
    found = objects(pages)
    events = [item for key, item in found.items() if key[0] == "event"]
    assert len(events) == LONG_EVENTS == pages[0]["page"]["total_count"] - 1  # and the story itself
    times = [i["event_time"] for i in events]
    dated = [t for t in times if t is not None]
    assert times[: len(dated)] == sorted(dated) and set(times[len(dated) :]) == {None}
    assert pages[0]["undated_count"] == len(times) - len(dated) == LONG_EVENTS // 9 + 1
    assert [i["object_ref"]["id"] for i in events if i["undated"]] == sorted(
        f"evt-load-{n:03d}" for n in range(LONG_EVENTS) if n % 9 == 4
    )
    # current: the story first (its event_ids cut across fragments), then the events in the same order.
    current = await s.read_all("long current", {"object_ref": story, "page_size": 20, "content_page_size": 2000})
    listed = objects(current)
    assert listed[("story", LONG_STORY)]["data"]["event_ids"] == [i["object_ref"]["id"] for i in events]
    assert current[0]["header"]["story"]["event_count"] == LONG_EVENTS
    assert [key for key in listed if key[0] == "event"] == [key for key in found if key[0] == "event"]


FULL_GRANT: tuple[Callable[[Session], Awaitable[None]], ...] = (
    search_in_exact_scopes,
    a_feature_story_end_to_end,
    cross_story_and_experience,
    a_long_story_to_its_last_page,
)


# ---------------------------------------------------------------- what a caller granted only Beacon sees


async def beacon_only(s: Session) -> None:
    for query in ("edge boxes", "infrastructure ops cannot run", "story-pair-edge-stack", "exp-edge-box-infra"):
        found = await s.ok(f"search {query}", SEARCH, {"query": query, "page_size": 50})
        assert not {i["object_ref"]["type"] for i in found["items"]} & {"story", "experience"}, query
    for object_type, object_id in (("story", "story-pair-edge-stack"), ("experience", "exp-edge-box-infra")):
        ref = {"type": object_type, "id": object_id}
        hidden = await s.error(f"hidden {object_id}", CONTEXT, {"object_ref": ref}, "object_not_found")
        missing = await s.error(
            f"missing {object_type}", CONTEXT, {"object_ref": ref | {"id": "no-such-id"}}, "object_not_found"
        )
        # Exactly the answer for an id that does not exist: nothing says the object exists elsewhere.
        assert orjson.dumps(hidden).decode().replace(object_id, "<id>") == orjson.dumps(missing).decode().replace(
            "no-such-id", "<id>"
        )
    await s.error(
        "the pair",
        CONTEXT,
        {"object_ref": {"type": "story", "id": "story-pair-edge-stack"}, "scope": PAIR},
        "scope_unavailable",
    )
    # Beacon's own event shows no trace of the story or the lesson that list it.
    event = await s.read_all("beacon event", {"object_ref": {"type": "event", "id": "evt-beacon-push-relay"}})
    text = orjson.dumps(event).decode()
    assert "story-pair-edge-stack" not in text and "exp-edge-box-infra" not in text and "evt-decision-b" not in text
    assert {key[0] for key in objects(event)} <= {"event", "entity", "source_reference", "summary", "relation"}


BEACON_GRANT: tuple[Callable[[Session], Awaitable[None]], ...] = (beacon_only,)


# ---------------------------------------------------------------- the transports

Connect = Callable[[Path, Path, str], AbstractAsyncContextManager[Client]]
"""(database, work directory, 'both' or 'beacon') -> a client with that grant."""


def _grant(who: str) -> dict[str, Any]:
    return BOTH if who == "both" else BEACON_ONLY


def _policy(work: Path, who: str) -> Path:
    path = work / f"policy-{who}.toml"
    path.write_text(policy_text(stdio=_grant(who), clients={"alpha": BOTH, "beta": BEACON_ONLY}))
    return path


@asynccontextmanager
async def in_process(db: Path, work: Path, who: str) -> AsyncGenerator[Client, None]:
    access = StdioPolicyAccess(PolicyFile(_policy(work, who)), project=_grant(who)["default_project"])
    async with Client(build_server(db, access, CursorCodec(SECRET.encode()))) as client:
        yield client


@asynccontextmanager
async def over_stdio(db: Path, work: Path, who: str) -> AsyncGenerator[Client, None]:
    args = ["--db", str(db), "--project", _grant(who)["default_project"], "--policy", str(_policy(work, who))]
    async with stdio_session([*args, "--cursor-secret-file", str(write_secret(work))], work) as client:
        yield client


@asynccontextmanager
async def over_http(db: Path, work: Path, who: str) -> AsyncGenerator[Client, None]:
    args = ["--db", str(db), "--policy", str(_policy(work, who)), "--cursor-secret-file", str(write_secret(work))]
    token = TOKENS["alpha" if who == "both" else "beta"]
    async with http_server(args, work) as server, http_client(server.url, token) as client:
        yield client


TRANSPORTS: dict[str, Connect] = {"in-process": in_process, "stdio": over_stdio, "http": over_http}


async def test_stories_and_experiences_read_the_same_over_every_transport(tmp_path: Path) -> None:
    transcripts: dict[str, list[tuple[str, Any]]] = {}
    for name, connect in TRANSPORTS.items():
        work = tmp_path / name
        work.mkdir()
        db = stories_db(work)
        transcript: list[tuple[str, Any]] = []
        for who, scenarios in (("both", FULL_GRANT), ("beacon", BEACON_GRANT)):
            async with connect(db, work, who) as client:
                session = Session(client)
                for scenario in scenarios:
                    await scenario(session)
                transcript += [(f"{who}: {label}", value) for label, value in session.transcript]
        transcripts[name] = transcript
    reference = transcripts["in-process"]
    assert len(reference) > 60
    for name, transcript in transcripts.items():
        assert [label for label, _ in transcript] == [label for label, _ in reference], name
        for (label, got), (_, want) in zip(transcript, reference, strict=True):
            assert got == want, f"{name} differs from in-process at {label!r}"


# ---------------------------------------------------------------- in process: revisions across scopes


async def test_a_write_to_an_event_a_cross_story_lists_makes_its_cursor_stale(tmp_path: Path) -> None:
    """The pair's story shows Beacon's event: changing that event changes what the pair reads, so a cursor of
    the pair is stale (the selection remembered for the old revision is never used for the new one)."""
    db = demo_db(tmp_path)
    args = {"object_ref": {"type": "story", "id": "story-pair-edge-stack"}, "scope": PAIR, "page_size": 2}
    async with client_for(db, Grant(**BOTH)) as client:
        first = await ok(client, CONTEXT, args)
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE events SET title = 'Push via long-poll' WHERE id = 'evt-beacon-push-relay'")
        stale = await error(client, CONTEXT, args | {"cursor": first["page"]["next_cursor"]})
        again = await ok(client, CONTEXT, args | {"page_size": 50})
    assert stale["error"] == "stale_cursor"
    titles = {o["data"]["id"]: o["data"].get("title") for o in objects([again]).values()}
    assert titles["evt-beacon-push-relay"] == "Push via long-poll"


async def test_a_story_bound_dated_by_day_carries_its_precision(tmp_path: Path) -> None:
    """story-atlas-sqlite-wal starts with its load test, dated by day from 2026-04-01: its `startedAt` was a bare
    2026-04-01T00:00:00.000Z (the day's midnight), with nothing saying it is the whole day, where an experience's
    event carries `atPrecision` beside `at`. Its header and content now carry the bounds' precisions (added keys;
    null: the instant's own, as the feature's)."""
    async with client_for(demo_db(tmp_path)) as client:
        found = {}
        for story_id in ("story-atlas-sqlite-wal", "story-atlas-session-cache"):
            ref = {"type": "story", "id": story_id}
            page = await ok(client, CONTEXT, {"object_ref": ref, "content_page_size": 8000, "page_size": 1})
            [item] = page["items"]
            assert item["object_ref"] == ref and item["position"]["start"] == 0  # the whole story: one fragment
            found[story_id] = (page["header"]["story"], orjson.loads(item["content"]))
    header, data = found["story-atlas-sqlite-wal"]
    assert (header["started_at"], header["started_at_precision"]) == ("2026-04-01T00:00:00.000Z", "day")
    assert (data["startedAt"], data["startedAtPrecision"]) == ("2026-04-01T00:00:00.000Z", "day")
    assert header["ended_at_precision"] is None and data["endedAtPrecision"] is None
    header, data = found["story-atlas-session-cache"]
    assert (header["started_at_precision"], data["startedAtPrecision"]) == (None, None)


async def test_a_story_items_interval_carries_its_bounds_precision_when_they_agree(tmp_path: Path) -> None:
    """A story's search item (and get_context item) showed `event_interval.precision` null whatever its bounds'
    precisions: a story the GoodBuddy app dated 2026-03-01 to 2026-03-31 read as two midnights. The interval now
    carries the bounds' precision when they agree; when they differ it stays null (the header gives each)."""
    from jsonl_graph import imported_graph, story_graph

    lines = story_graph()
    for line in lines:
        if line.get("kind") == "story" and line["id"] == "st-thread":
            line |= {"started_at_precision": "day", "ended_at_precision": "day"}
        if line.get("kind") == "story" and line["id"] == "st-feature":
            line |= {"started_at": "2026-03-01T00:00:00Z", "started_at_precision": "day"}
            line |= {"ended_at": "2026-03-09T10:30:00Z"}
    db = imported_graph(tmp_path, lines)
    alpha = {"kind": "projects", "projectIds": ["alpha"]}
    async with client_for(db, Grant(default_project="alpha")) as client:
        found = await ok(client, SEARCH, {"query": "SQLite 迁移", "object_types": ["story"]})
        mixed = await ok(client, SEARCH, {"query": "Storage", "object_types": ["story"], "scope": alpha})
        context = await ok(client, CONTEXT, {"object_ref": {"type": "story", "id": "st-thread"}, "mode": "timeline"})
    [thread] = [i for i in found["items"] if i["object_ref"]["id"] == "st-thread"]
    assert thread["event_interval"]["precision"] == "day" and thread["event_interval"]["basis"] == "story_span"
    [own] = [i for i in context["items"] if i["object_ref"] == {"type": "story", "id": "st-thread"}]
    assert own["event_interval"] == thread["event_interval"]
    [feature] = [i for i in mixed["items"] if i["object_ref"]["id"] == "st-feature"]
    assert feature["event_interval"]["start"] == "2026-03-01T00:00:00.000Z"
    assert feature["event_interval"]["precision"] is None
