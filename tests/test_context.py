"""story_graph_get_context through a real MCP client against real SQLite: the decision story and the contract."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonl_graph import ALPHA as ALPHA_SMALL
from jsonl_graph import PAIR as GRAPH_PAIR
from jsonl_graph import imported_graph, small_graph, story_graph
from mcp import Client
from support import all_pages, client_for, demo_db, error, ok

from server.contracts.common import Grant
from server.contracts.context import TIME_FILTER_NOTE, TIMELINE_NOTE

pytestmark = pytest.mark.anyio

CONTEXT = "story_graph_get_context"
ATLAS = {"kind": "projects", "projectIds": ["atlas"]}
BEACON = {"kind": "projects", "projectIds": ["beacon"]}
PAIR = {"kind": "projects", "projectIds": ["beacon", "atlas"]}
GLOBAL = {"kind": "global"}


def _ref(object_type: str, object_id: str) -> dict[str, str]:
    return {"type": object_type, "id": object_id}


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    return demo_db(tmp_path)


async def read_all(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    """Every page of one get_context query; lists concatenated in page order, header/frame from the first page."""
    pages = await all_pages(client, CONTEXT, args, limit=500)
    for page in pages:
        assert page["page"]["returned_count"] == len(page["items"])  # as upstream: items on this page
    return pages[0] | {name: [value for page in pages for value in page[name]] for name in ("items", "background")}


def objects(page: dict[str, Any], *lists: str) -> dict[tuple[str, str, str | None], dict[str, Any]]:
    """Reassembled objects per (type, id, result_id), with the metadata of their first fragment."""
    found: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    texts: dict[tuple[str, str, str | None], list[str]] = {}
    for name in lists or ("items",):
        for item in page[name]:
            key = (item["object_ref"]["type"], item["object_ref"]["id"], item["result_id"])
            found.setdefault(key, item)
            texts.setdefault(key, []).append(item["content"])
    return {key: found[key] | {"data": orjson.loads("".join(texts[key]))} for key in found}


def ids(page: dict[str, Any], *lists: str) -> list[str]:
    return [key[1] for key in objects(page, *lists)]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_decision_story_end_to_end_from_search_through_both_modes(demo: Path, mode: str) -> None:
    async with client_for(demo, mode=mode) as client:
        hits = await ok(client, "story_graph_search", {"query": "会话缓存 SQLite", "object_types": ["entity"]})
        decision_b = next(i for i in hits["items"] if i["object_ref"]["id"] == "ent-decision-b")
        current = await read_all(client, {"object_ref": decision_b["object_ref"]})
        b_timeline = await read_all(client, {"object_ref": decision_b["object_ref"], "mode": "timeline"})
        a_timeline = await read_all(client, {"object_ref": _ref("entity", "ent-decision-a"), "mode": "timeline"})

    found = objects(current)
    header = current["header"]
    # B is decided but not completed; the task record is shown for checking, not turned into a status.
    assert header["decision_status"] == "decided"
    assert header["work_status"] == header["completion"]["work_status"] == "unknown"
    assert header["completion"]["basis"] == "none"
    assert [t["ref"]["id"] for t in header["completion"]["task_records"]] == ["ent-task-cache-migration"]
    assert header["completion"]["task_records"][0]["work_status"] == "in_progress"
    assert "decided is not completed" in header["completion"]["note"]
    # Decision A, the revision relation with its basis, and the revision event are all there.
    assert found[("entity", "ent-decision-a", None)]["role"] == "related"
    revised = found[("relation", "rel-b-revised-a", "res-atlas-2026-05")]
    replaces = found[("relation", "rel-b-replaces-a", "res-atlas-2026-05")]
    assert revised["data"]["relation_type"] == "revised" and replaces["data"]["relation_type"] == "replaces"
    assert revised["relation"]["to"] == {"ref": _ref("entity", "ent-decision-a"), "in_scope": True}
    assert replaces["source_reference_ids"] == ["ref-revision-1", "ref-revision-2", "ref-revision-3"]
    assert {"ref-revision-1", "ref-revision-2", "ref-revision-3"} <= set(ids(current))
    assert found[("event", "evt-revision-a-to-b", "res-atlas-2026-05")]["role"] == "evolution"
    # Option C has no replacement evidence: its stored 'contrasts' stays as stored and is a conflict to check.
    contrasts = found[("relation", "rel-c-contrasts-b", "res-atlas-2026-07")]
    assert contrasts["relation"]["relation_type"] == contrasts["data"]["relation_type"] == "contrasts"
    [conflict] = header["conflicts"]
    assert conflict["status"] == "needs_check" and conflict["relation_ref"]["id"] == "rel-c-contrasts-b"
    assert [c["ref"]["id"] for c in conflict["claims"]] == ["ent-option-c", "ent-decision-b"]
    assert {r["relation_type"] for r in header["relations"]} == {
        "replaces",
        "revised",
        "contrasts",
        "supports",
        "depends-on",
    }
    # Every row of B: the current projection, each result's revision and each leaf's own description.
    targets = [key for key, item in found.items() if item["role"] == "target"]
    assert targets == [
        ("entity", "ent-decision-b", None),
        ("entity", "ent-decision-b", "res-atlas-2026-05"),
        ("entity", "ent-decision-b", "res-atlas-2026-07"),
        ("entity", "leaf:leaf-atlas-2026-05-a:ent-decision-b", "res-atlas-2026-05"),
        ("entity", "leaf:leaf-atlas-2026-07-a:ent-decision-b", "res-atlas-2026-07"),
    ]
    assert found[targets[1]]["data"]["description"] != found[targets[2]]["data"]["description"]
    assert header["result_ids"] == ["res-atlas-2026-05", "res-atlas-2026-07"]
    assert all(item["validity"] == "unknown" for item in found.values())

    # Timelines: event-time order, old decision beside its revision; every object in items, undated ones last,
    # each marked, with their count (a client written for upstream sees every object).
    b_objects = objects(b_timeline)
    assert set(b_objects) == set(objects(current)), "timeline and current select the same objects"
    times = [i["event_time"] for i in b_objects.values()]
    undated_from = times.index(None)
    assert None not in times[:undated_from] and set(times[undated_from:]) == {None}
    assert times[:undated_from] == sorted(times[:undated_from])
    assert [i["undated"] for i in b_objects.values()] == [t is None for t in times]
    assert b_timeline["undated_count"] == len(times) - undated_from == 23
    assert "unknown_time_items" not in b_timeline
    assert ids(b_timeline, "items")[:3] == [
        "sum-atlas-2026-05",
        "evt-load-test-window",
        "ent-decision-b#proposed-2026-05",
    ]
    a_dated = ids(a_timeline, "items")
    assert a_dated.index("evt-decision-a") < a_dated.index("evt-revision-a-to-b")
    a_undated = {key: i for key, i in objects(a_timeline).items() if i["undated"]}
    assert list(a_undated) == list(objects(a_timeline))[-len(a_undated) :], "undated objects come last"
    assert ("entity", "ent-decision-a", "res-atlas-2026-03") in a_undated
    assert ("entity", "ent-decision-a", "res-atlas-2026-05") in a_undated
    assert ("event", "evt-unknown-time-1", "res-atlas-2026-05") in a_undated
    assert TIMELINE_NOTE in a_timeline["notes"] and a_timeline["header"] is None
    assert "known at the time" in TIMELINE_NOTE


async def test_a_late_recorded_old_event_keeps_its_event_time_position(demo: Path) -> None:
    async with client_for(demo) as client:
        timeline = await read_all(client, {"object_ref": _ref("story_line", "sl-atlas-cache"), "mode": "timeline"})
    dated = [i for i in objects(timeline).values() if not i["undated"]]
    assert [i["event_time"] for i in dated] == sorted(i["event_time"] for i in dated)
    kickoff = dated[0]
    assert kickoff["object_ref"]["id"] == "evt-late-recorded-kickoff"
    assert kickoff["event_time"] == "2026-02-01T02:00:00.000Z"
    # Recorded last of all, still first by event time; the record time is reported, never used for order.
    assert kickoff["recorded_at"] == max(i["recorded_at"] for i in dated)
    assert kickoff["review_generated_at"] == "2026-07-15T10:00:00.000Z"
    undated = {key: i for key, i in objects(timeline).items() if i["undated"]}
    assert all(i["event_time"] is None for i in undated.values()) and len(undated) == timeline["undated_count"]
    assert ("event", "evt-unknown-time-1", "res-atlas-2026-05") in undated
    gaps = {g["kind"]: g for g in timeline["known_gaps"]}
    assert {"type": "event", "id": "evt-unknown-time-1"} in gaps["unknown_event_time"]["refs"]


async def test_a_time_range_names_the_undated_events_it_left_out_as_a_known_gap(demo: Path) -> None:
    """Asked "what happened in March?" on the story line: the timeline kept March's dated items and dropped the undated
    evt-unknown-time-1 and two undated changes, and known_gaps lost unknown_event_time, so nothing said that any of
    them may have happened in March (unknown_time_excluded_count, 35, mixes them with entities, relations and
    references, which never have an event time; a timeline has no header to break it down). The gap now names them,
    in both modes, and says they were left out by the range."""
    march = {"time_range": {"from": "2026-03-01T00:00:00Z", "to": "2026-03-31T23:59:59.999Z"}}
    line = {"object_ref": _ref("story_line", "sl-atlas-cache")}
    async with client_for(demo) as client:
        whole = await ok(client, CONTEXT, line | {"mode": "timeline", "page_size": 1})
        timeline = await read_all(client, line | march | {"mode": "timeline"})
        current = await ok(client, CONTEXT, line | march | {"page_size": 1})
        dated = await ok(client, CONTEXT, {"object_ref": _ref("event", "evt-decision-a")} | march)
    undated = next(g for g in whole["known_gaps"] if g["kind"] == "unknown_event_time")
    assert undated["count"] == 3 and _ref("event", "evt-unknown-time-1") in undated["refs"]
    assert timeline["undated_count"] == 0 and timeline["unknown_time_excluded_count"] == 35
    for page in (timeline, current):
        gap = next(g for g in page["known_gaps"] if g["kind"] == "unknown_event_time")
        assert (gap["count"], gap["refs"]) == (undated["count"], undated["refs"])
        assert gap["detail"].endswith(
            " 3 of them were left out by time_range (counted in unknown_time_excluded_count) and may lie within it: "
            "call again without time_range to read them."
        )
    # An object whose selection holds no undated event or change gets no such gap, with or without a range.
    assert "unknown_event_time" not in {g["kind"] for g in dated["known_gaps"]}


async def test_a_leaf_description_is_not_an_event_of_unknown_time(demo: Path) -> None:
    """get_context on the revision event (dated 2026-05-02) named it in known_gaps.unknown_event_time, through its
    leaf description (which stores no time: it is a description, not an event), and counted the undated
    evt-unknown-time-1 twice, once for its own row and once for its leaf's, though a gap counts objects once. The
    gap reads the objects' own rows; the leaf row takes its event's time (test below)."""
    async with client_for(demo) as client:
        dated = await read_all(client, {"object_ref": _ref("event", "evt-revision-a-to-b"), "mode": "timeline"})
        undated = await ok(client, CONTEXT, {"object_ref": _ref("event", "evt-unknown-time-1")})
    event = next(i for i in dated["items"] if i["row_kind"] == "result" and i["object_ref"]["type"] == "event")
    leaf = next(i for i in dated["items"] if i["row_kind"] == "leaf")
    assert leaf["describes"] == _ref("event", "evt-revision-a-to-b")
    assert leaf["undated"] is False and leaf["event_time"] == event["event_time"] == "2026-05-02T01:17:00.000Z"
    assert "unknown_event_time" not in {g["kind"] for g in dated["known_gaps"]}
    gap = next(g for g in undated["known_gaps"] if g["kind"] == "unknown_event_time")
    assert (gap["count"], gap["refs"]) == (1, [_ref("event", "evt-unknown-time-1")])


def _leaf_times_graph() -> list[dict[str, Any]]:
    """small_graph (ev-1 dated T0..T1 with leaf-1's description; ev-2 undated) and a later review whose leaf-2
    describes ev-1 (a result holding no row of it), ev-2, the entity change ent-a#decided (ev-1's), the summary sum-1
    and the source reference ref-1."""
    at = "2026-04-01T00:00:00Z"
    return [
        *small_graph(),
        {"kind": "result", "id": "r-alpha-2", "scope": ALPHA_SMALL, "review_generated_at": at, "recorded_at": at},
        {
            "kind": "leaf",
            "id": "leaf-2",
            "result_id": "r-alpha-2",
            "recorded_at": at,
            "facts": [
                {"object_ref": _ref("event", "ev-1"), "description": "a later review's wording of the choice"},
                {"object_ref": _ref("event", "ev-2"), "description": "still an open question"},
                {"object_ref": _ref("entity_change", "ent-a#decided"), "description": "leaf 2 on the decision"},
                {"object_ref": _ref("summary", "sum-1"), "description": "leaf 2 on the summary"},
                {"object_ref": _ref("source_reference", "ref-1"), "description": "leaf 2 on the message"},
            ],
        },
    ]


async def test_a_leaf_description_takes_its_event_time(tmp_path: Path) -> None:
    """A leaf stores no event time, so a dated event's leaf descriptions were undated items: listed after every
    dated object in the timeline, far from their event, and left out by a time_range that keeps the event (counted
    among the rows with no time, `event 2` in the header's time_note). A leaf's row now takes the event time of the
    object it describes, so it stands at that time, and a time_range keeps or
    drops it with its object; a leaf of an undated event stays undated. Its review and record times stay its own.
    Read one fragment per page: every row once, in order, whichever page it falls on."""
    grant = Grant(default_project="alpha")
    ev1 = {"object_ref": _ref("event", "ev-1"), "mode": "timeline", "page_size": 1}
    ev2 = {"object_ref": _ref("event", "ev-2"), "mode": "timeline", "page_size": 1}
    # Meets ev-1 (2026-03-01T10:00Z to 2026-03-02T10:30Z) by its end only: the leaves must carry the whole interval.
    march_2 = {"time_range": {"from": "2026-03-02T00:00:00Z", "to": "2026-03-02T23:59:59Z"}}
    async with client_for(imported_graph(tmp_path, _leaf_times_graph()), grant) as client:
        timeline = await read_all(client, ev1)
        in_range = await read_all(client, ev1 | march_2)
        current = await ok(client, CONTEXT, {"object_ref": _ref("event", "ev-1")} | march_2)
        undated = await read_all(client, ev2)
        undated_in_range = await read_all(client, ev2 | march_2)

    found = objects(timeline)
    keys = [(i["object_ref"]["type"], i["object_ref"]["id"], i["result_id"]) for i in timeline["items"]]
    assert len(keys) == len(set(keys)) == len(found) == timeline["page"]["total_count"]  # one fragment each here
    event = found[("event", "ev-1", "r-alpha")]
    leaves = {key: i for key, i in found.items() if i["row_kind"] == "leaf"}
    assert set(leaves) == {("event", "leaf:leaf-1:ev-1", "r-alpha"), ("event", "leaf:leaf-2:ev-1", "r-alpha-2")}
    for leaf in leaves.values():
        assert leaf["undated"] is False
        assert (leaf["event_time"], leaf["event_interval"]) == (event["event_time"], event["event_interval"])
        assert leaf["describes"] == _ref("event", "ev-1")
    assert leaves[("event", "leaf:leaf-2:ev-1", "r-alpha-2")]["review_generated_at"] == "2026-04-01T00:00:00.000Z"
    # Dated items in (event time, type, id, result) order, then the undated ones; here the leaves follow their event
    # (same time and type, and "ev-1" < "leaf:…").
    flags = [i["undated"] for i in timeline["items"]]
    assert flags == sorted(flags) and timeline["undated_count"] == sum(flags)
    dated = [(i["event_time"], *key) for i, key in zip(timeline["items"], keys, strict=True) if not i["undated"]]
    assert dated == sorted(dated)
    at = keys.index(("event", "ev-1", "r-alpha"))
    assert set(keys[at + 1 : at + 3]) == set(leaves)

    # With a time_range, the leaves go with their event; the rows left out are those with no time only.
    kept = objects(in_range)
    assert set(leaves) | {("event", "ev-1", "r-alpha")} <= set(kept)
    assert in_range["unknown_time_excluded_count"] == timeline["undated_count"] == len(found) - len(kept)
    assert "event" not in current["header"]["time_note"].split("rows (")[1]

    # A leaf of an undated event stays undated, is left out by a time_range, and the gap counts its event once.
    leaf2 = objects(undated)[("event", "leaf:leaf-2:ev-2", "r-alpha-2")]
    assert (leaf2["undated"], leaf2["event_time"], leaf2["event_interval"]) == (True, None, None)
    gap = next(g for g in undated["known_gaps"] if g["kind"] == "unknown_event_time")
    assert (gap["count"], gap["refs"]) == (1, [_ref("event", "ev-2")])
    assert not any(i["row_kind"] == "leaf" for i in undated_in_range["items"])
    assert undated_in_range["unknown_time_excluded_count"] == undated["undated_count"]


async def test_a_leaf_description_of_a_change_summary_or_source_reference_is_read(tmp_path: Path) -> None:
    """get_context on an entity change, a summary or a source reference that a leaf describes failed with
    internal_error in both modes: the selection and the header read the change's event, the summary's open items and
    the reference's source type from every target row, the leaf's too, which holds none of them. They are read from
    the objects' own rows now; the leaf's description is its own item, at the object's event time (an entity
    change's: its event's), and counts as no summary or evidence of its own."""
    grant = Grant(default_project="alpha")
    async with client_for(imported_graph(tmp_path, _leaf_times_graph()), grant) as client:
        read = {
            (object_type, object_id, mode): await read_all(
                client, {"object_ref": _ref(object_type, object_id), "mode": mode}
            )
            for object_type, object_id in (
                ("entity_change", "ent-a#decided"),
                ("summary", "sum-1"),
                ("source_reference", "ref-1"),
            )
            for mode in ("current", "timeline")
        }
    for (object_type, object_id, _), page in read.items():
        leaf = objects(page)[(object_type, f"leaf:leaf-2:{object_id}", "r-alpha-2")]
        assert leaf["describes"] == _ref(object_type, object_id) and leaf["data"]["leaf_id"] == "leaf-2"
    rows = objects(read[("entity_change", "ent-a#decided", "timeline")])
    own = rows[("entity_change", "ent-a#decided", "r-alpha")]
    leaf = rows[("entity_change", "leaf:leaf-2:ent-a#decided", "r-alpha-2")]
    assert own["event_time"] == rows[("event", "ev-1", "r-alpha")]["event_time"] == "2026-03-01T10:00:00.000Z"
    assert (leaf["undated"], leaf["event_interval"]) == (False, own["event_interval"])
    summary = read[("summary", "sum-1", "current")]["header"]
    assert [o["text"] for o in summary["open_items"]] == ["benchmark", "备份策略"]
    reference = read[("source_reference", "ref-1", "current")]["header"]
    assert reference["evidence_ref_count"] == 1


async def test_the_current_header_lists_the_newest_evolution(demo: Path) -> None:
    """The header of `current` listed the oldest 10 of a story line's 15 evolution entries: up to May, without June's
    option C, the latest change an agent asking 'what should we use now' needs first. It lists the newest 10 dated
    ones in time order now (undated ones, whose place is unknown, fill up a shorter list); the items hold every one."""
    async with client_for(demo) as client:
        line = await read_all(client, {"object_ref": _ref("story_line", "sl-atlas-cache")})
        decision = await ok(client, CONTEXT, {"object_ref": _ref("entity", "ent-decision-a")})
    header = line["header"]
    evolution = {(i["object_ref"]["id"], i["event_time"]) for i in line["items"] if i["role"] == "evolution"}
    dated = sorted((time, ref) for ref, time in evolution if time is not None)
    assert header["evolution_ref_count"] == len(evolution) == 15
    assert [r["id"] for r in header["evolution_refs"]] == [ref for _, ref in dated[-10:]]
    assert header["evolution_refs"][-1] == _ref("event", "evt-option-c")
    refs = [r["id"] for r in decision["header"]["evolution_refs"]]  # six: all listed, the undated one last
    assert (len(refs), refs[0], refs[-1]) == (6, "ent-decision-a#added-2026-03", "evt-unknown-time-1")


async def test_evidence_whose_source_changed_since_is_a_known_gap(demo: Path) -> None:
    """The edge-box constraint rests on a message edited after it was cited (the saved fragment says 512 MB, the
    message now says 1 GB). get_context showed that reference with nothing to say so, and an agent quoting its
    fragment quoted what the source no longer says. known_gaps names it now (source_changed_since_saved), as
    read_source's current read confirms. A source edited later changes no scope's revision: the next call sees it.
    Moved out of the scope since, it is not available here (read_source: outside_scope), and nothing of where it
    went is told."""
    constraint = {"object_ref": _ref("entity", "ent-edge-box-constraint")}
    async with client_for(demo) as client:
        before = await ok(client, CONTEXT, constraint)
        later_page = await ok(client, CONTEXT, constraint | {"cursor": before["page"]["next_cursor"]})
        line = await ok(client, CONTEXT, {"object_ref": _ref("story_line", "sl-atlas-cache")})
        decision = await ok(client, CONTEXT, {"object_ref": _ref("entity", "ent-decision-b")})
        current = await ok(
            client, "story_graph_read_source", {"source_reference_id": "ref-changed-msg", "content_kind": "current"}
        )
        with sqlite3.connect(demo) as conn:  # another writer reverts the edit: no scope revision changes
            conn.execute("UPDATE sources SET current_version = 'v1' WHERE id = 'src-changed-msg'")
        after = await ok(client, CONTEXT, constraint)
        with sqlite3.connect(demo) as conn:  # edited again, and moved to Beacon: Atlas may not read it now
            conn.execute(
                "UPDATE sources SET current_version = 'v2', project_id = 'beacon' WHERE id = 'src-changed-msg'"
            )
        moved = await ok(client, CONTEXT, constraint)
        moved_read = await ok(client, "story_graph_read_source", {"source_reference_id": "ref-changed-msg"})

    def changed(page: dict[str, Any], kind: str = "source_changed_since_saved") -> dict[str, Any] | None:
        return next((g for g in page["known_gaps"] if g["kind"] == kind), None)

    gap = changed(before)
    assert gap is not None and (gap["count"], gap["refs"]) == (1, [_ref("source_reference", "ref-changed-msg")])
    assert "content_kind 'current'" in gap["detail"]
    assert current["differs_from_reference"] is True  # what the gap says, read_source says
    assert changed(later_page) == gap
    line_gap = changed(line)
    assert line_gap is not None and [r["id"] for r in line_gap["refs"]] == ["ref-changed-msg"]
    assert changed(decision) is None
    assert after["data_revision"] == before["data_revision"] and changed(after) is None
    assert changed(moved) is None  # read_source's current would refuse it: nothing about where it lives now
    gone = changed(moved, "source_not_available")
    assert gone is not None and gone["refs"] == [_ref("source_reference", "ref-changed-msg")]
    assert moved_read["original_source_availability"] == "outside_scope" and "beacon" not in str(gone)


async def test_a_source_deleted_after_it_was_cited_is_not_available_in_both_tools(demo: Path) -> None:
    """Another writer deletes the message behind Decision B's reference, saved as available. read_source said the
    original is deleted; get_context's known_gaps read only the availability stored with the reference, so it had
    no source_not_available gap: the two tools disagreed about the same reference. The gap reads the source now."""
    decision = {"object_ref": _ref("entity", "ent-decision-b")}
    async with client_for(demo) as client:
        before = await ok(client, CONTEXT, decision)
        with sqlite3.connect(demo) as conn:
            conn.execute("UPDATE sources SET status = 'deleted' WHERE id = 'src-msg-decision-b'")
        after = await ok(client, CONTEXT, decision)
        read = await ok(client, "story_graph_read_source", {"source_reference_id": "ref-decision-b-msg"})
        deleted_at_saving = await ok(client, CONTEXT, {"object_ref": _ref("event", "evt-unknown-time-1")})
    kinds = {g["kind"]: g for g in after["known_gaps"]}
    assert "source_not_available" not in {g["kind"] for g in before["known_gaps"]}
    assert kinds["source_not_available"]["refs"] == [_ref("source_reference", "ref-decision-b-msg")]
    assert (read["availability"], read["original_source_availability"]) == ("available", "deleted")
    saved = next(g for g in deleted_at_saving["known_gaps"] if g["kind"] == "source_not_available")
    assert saved["refs"] == [_ref("source_reference", "ref-deleted-msg")]  # saved as source_deleted: still named


async def test_the_current_header_lists_the_newest_reviews_open_items(tmp_path: Path) -> None:
    """Four monthly reviews each left three open items about one decision. The header listed the first 10 in review
    order: all of January's, none of April's but one, though April's list is what is open now (January's may since
    be settled). It lists the last 10 now, still in review order, with the count of all."""
    months = ["01", "02", "03", "04"]
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "story_line", "id": "sl", "scope": ATLAS, "topic": "cache", "recorded_at": "2026-01-01T00:00:00Z"},
        {
            "kind": "entity",
            "id": "ent",
            "story_line_id": "sl",
            "canonical_label": "cache",
            "updated_at": "2026-01-01T00:00:00Z",
        },
    ]
    for month in months:
        at = f"2026-{month}-28T00:00:00Z"
        lines += [
            {"kind": "result", "id": f"r-{month}", "scope": ATLAS, "review_generated_at": at, "recorded_at": at},
            {
                "kind": "summary",
                "id": f"sum-{month}",
                "result_id": f"r-{month}",
                "body": f"Month {month}.",
                "open_items": [f"{month}: item {n}" for n in range(3)],
                "recorded_at": at,
                "fact_refs": [{"type": "entity", "id": "ent"}],
            },
        ]
    async with client_for(imported_graph(tmp_path, lines), Grant(default_project="atlas")) as client:
        page = await ok(client, CONTEXT, {"object_ref": _ref("entity", "ent")})
    header = page["header"]
    assert header["open_item_count"] == 12
    assert [o["text"] for o in header["open_items"]] == [f"{m}: item {n}" for m in months for n in range(3)][2:]
    assert header["open_items"][-1] == {"summary_id": "sum-04", "result_id": "r-04", "text": "04: item 2"}


async def test_confirmation_and_validity_stay_apart(demo: Path) -> None:
    async with client_for(demo) as client:
        revoked = await read_all(client, {"object_ref": _ref("entity", "ent-option-redis-cluster")})
        edited = await read_all(client, {"object_ref": _ref("entity", "ent-edge-box-constraint")})
    found = objects(revoked)
    assert revoked["header"]["confirmation_state"] == "revoked"
    assert revoked["header"]["validity"] == "unknown"
    assert found[("entity", "ent-option-redis-cluster", None)]["confirmation_state"] == "revoked"
    assert found[("entity", "ent-option-redis-cluster", "res-atlas-2026-03")]["confirmation_state"] == "automatic"
    assert edited["header"]["confirmation_state"] == "user_edited"
    for page in (revoked, edited):
        assert {i["validity"] for i in objects(page).values()} == {"unknown"}


async def test_a_known_gap_counts_the_objects_it_lists_not_their_rows(demo: Path) -> None:
    # The revoked option has two rows without a revision (its current projection and its March revision): one
    # object. A count of 2 beside one ref (under the cap of 10) read as if a second object were left unlisted.
    async with client_for(demo) as client:
        revoked = await read_all(client, {"object_ref": _ref("entity", "ent-option-redis-cluster")})
    found = objects(revoked)
    assert found[("entity", "ent-option-redis-cluster", None)]["object_revision"] == "unknown"
    assert found[("entity", "ent-option-redis-cluster", "res-atlas-2026-03")]["object_revision"] == "unknown"
    gaps = {g["kind"]: g for g in revoked["known_gaps"]}
    assert gaps["no_reliable_revision"]["refs"] == [_ref("entity", "ent-option-redis-cluster")]
    assert gaps["no_reliable_revision"]["count"] == 1
    for gap in revoked["known_gaps"]:
        if gap["kind"] != "coverage_not_complete" and gap["count"] <= 10:
            assert gap["count"] == len(gap["refs"]), gap


async def test_memory_items_are_labelled_background_for_global_and_the_scopes_own_projects(demo: Path) -> None:
    async with client_for(demo) as client:
        atlas = await read_all(client, {"object_ref": _ref("entity", "ent-decision-b")})
        pair = await read_all(client, {"object_ref": _ref("story_line", "sl-pair-release"), "scope": PAIR})
        global_ = await read_all(client, {"object_ref": _ref("story_line", "sl-global-practices"), "scope": GLOBAL})
        timeline = await read_all(client, {"object_ref": _ref("entity", "ent-decision-b"), "mode": "timeline"})

    def memories(page: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {m["memory_id"]: m for m in page["background"]}

    assert set(memories(atlas)) == {"mem-global-answer-style", "mem-atlas-boring-tech"}
    assert set(memories(pair)) == {"mem-global-answer-style", "mem-atlas-boring-tech", "mem-beacon-offline-first"}
    assert set(memories(global_)) == {"mem-global-answer-style"}
    assert timeline["background"] == [] and timeline["background_note"] is None
    boring = memories(atlas)["mem-atlas-boring-tech"]
    assert boring["label"] == "background_preference"
    assert boring["memory_scope"] == ATLAS and boring["updated_at"] == "2026-05-05T02:00:00.000Z"
    assert orjson.loads(boring["content"])["body"].startswith("Prefer boring")
    assert memories(atlas)["mem-global-answer-style"]["memory_scope"] == GLOBAL
    assert "not events, not history" in atlas["background_note"]
    assert atlas["header"]["background_count"] == 2
    # Never history: no memory id among the graph items.
    assert not any(i.startswith("mem-") for i in ids(atlas))


async def test_the_background_note_of_a_grant_kept_out_of_global_names_no_global_preference(demo: Path) -> None:
    """A grant kept out of Global is shown none of the Global scope's memory items, but the background note said
    the preferences were "of the Global scope and of this scope's projects": an agent would take the missing Global
    preferences to be none."""
    atlas_only = Grant(default_project="atlas", projects=["atlas"], allow_global=False)
    async with client_for(demo, atlas_only) as client:
        kept_out = await read_all(client, {"object_ref": _ref("entity", "ent-decision-b")})
    async with client_for(demo) as client:
        granted = await read_all(client, {"object_ref": _ref("entity", "ent-decision-b")})
    assert [m["memory_id"] for m in kept_out["background"]] == ["mem-atlas-boring-tech"]
    assert "Global scope and" not in kept_out["background_note"]
    assert kept_out["background_note"].startswith("Confirmed long-term preferences of this scope's projects (")
    assert "not events, not history" in kept_out["background_note"]
    assert "mem-global-answer-style" in {m["memory_id"] for m in granted["background"]}
    assert "of the Global scope and of this scope's projects" in granted["background_note"]


async def test_a_time_range_in_current_mode_says_within_the_selected_evidence(demo: Path) -> None:
    window = {"from": "2026-05-01T00:00:00+08:00", "to": "2026-05-31T23:59:59+08:00"}
    async with client_for(demo) as client:
        page = await read_all(client, {"object_ref": _ref("entity", "ent-decision-b"), "time_range": window})
    assert page["header"]["time_note"].startswith(TIME_FILTER_NOTE)
    assert "not the state at the end of the range" in TIME_FILTER_NOTE and TIME_FILTER_NOTE in page["notes"]
    assert page["time_range"] == {"from": "2026-04-30T16:00:00.000Z", "to": "2026-05-31T15:59:59.000Z"}
    kept = objects(page)
    assert set(kept) == {
        ("entity_change", "ent-decision-b#proposed-2026-05", "res-atlas-2026-05"),
        ("entity_change", "ent-decision-b#verified-2026-05", "res-atlas-2026-05"),
        ("event", "evt-revision-a-to-b", "res-atlas-2026-05"),
        ("event", "evt-decision-b", "res-atlas-2026-05"),
        ("summary", "sum-atlas-2026-05", "res-atlas-2026-05"),  # its covered interval intersects May
    }
    assert page["unknown_time_excluded_count"] > 0
    # The header still reports the stored current row, labelled; it is not "the state at the end of May".
    assert page["header"]["decision_status"] == "decided"


async def test_a_time_range_header_says_its_empty_lists_are_not_none(demo: Path) -> None:
    """'What did we decide about the session cache in May?': relations, entities and source references have no
    event time, so the May header of Decision B had relation_count 0, no conflicts and no task records, beside a
    note that unknown times were excluded. Read as 'B has no relations', it contradicts the same call without a
    range (six relations, the replacement of A among them). The note now says how many rows of which types were
    left out, and that an empty list or a 0 in the header does not mean none."""
    may = {"from": "2026-05-01T00:00:00+08:00", "to": "2026-05-31T23:59:59+08:00"}
    target = {"object_ref": _ref("entity", "ent-decision-b")}
    async with client_for(demo) as client:
        within = await ok(client, CONTEXT, target | {"time_range": may})
        whole = await read_all(client, target)
        reviewed = await ok(client, CONTEXT, target | {"time_range": may, "time_basis": "review_generated_at"})
    header = within["header"]
    assert (header["relation_count"], whole["header"]["relation_count"]) == (0, 6)
    assert f"relation {sum(1 for i in whole['items'] if i['object_ref']['type'] == 'relation')}," in header["time_note"]
    assert f"Here that is {within['unknown_time_excluded_count']} rows (" in header["time_note"]
    assert "an empty list or a 0 here does not mean the object has none" in header["time_note"]
    assert reviewed["header"]["time_note"].startswith(TIME_FILTER_NOTE)
    assert whole["header"]["time_note"] is None


async def test_as_of_in_any_form_is_unsupported_and_unknown_arguments_are_refused(demo: Path) -> None:
    target = {"object_ref": _ref("entity", "ent-decision-b")}
    async with client_for(demo) as client:
        as_of = await error(client, CONTEXT, target | {"as_of": "2026-05-01T00:00:00Z"})
        mode = await error(client, CONTEXT, target | {"mode": "as_of"})
        unknown = await error(client, CONTEXT, target | {"verbose": True})
        sizes = await error(client, CONTEXT, target | {"page_size": 51, "content_page_size": 0})
        bad_ref = await error(client, CONTEXT, {"object_ref": {"type": "entity", "id": "x", "extra": 1}})
        bad_type = await error(client, CONTEXT, {"object_ref": {"type": "memory_item", "id": "x"}})
    assert as_of["error"] == mode["error"] == "unsupported_mode"
    assert unknown["error"] == "invalid_arguments" and unknown["field"] == "verbose"
    assert sizes["error"] == "invalid_arguments"
    assert {p["field"] for p in sizes["problems"]} == {"page_size", "content_page_size"}
    assert bad_ref["error"] == bad_type["error"] == "invalid_arguments"


async def test_object_not_found_and_scope_mismatch_never_reveal_what_is_outside_the_grant(demo: Path) -> None:
    atlas_only = Grant(default_project="atlas", projects=["atlas"], allow_global=False)
    both = Grant(default_project="atlas", projects=["atlas", "beacon"], allow_global=True)

    def shape(payload: dict[str, Any], object_id: str) -> str:
        return orjson.dumps(payload).decode().replace(object_id, "<id>")

    async with client_for(demo, atlas_only) as client:
        answers = [
            (
                object_id,
                await error(client, CONTEXT, {"object_ref": _ref(object_type, object_id)}),
                await error(client, CONTEXT, {"object_ref": _ref(object_type, "no-such-id")}),
            )
            for object_type, object_id in (
                ("entity", "ent-beacon-offline-queue"),  # beacon: not granted
                ("summary", "sum-pair-2026-06"),  # atlas+beacon: not granted as a whole
                ("entity", "ent-global-adr-practice"),  # global: not granted
                ("story_line", "sl-legacy-import"),  # an inactive project
            )
        ]
        mine = await ok(client, CONTEXT, {"object_ref": _ref("entity", "ent-decision-b")})
    for object_id, hidden, missing in answers:
        assert missing["error"] == "object_not_found"
        assert shape(hidden, object_id) == shape(missing, "no-such-id")
        assert "beacon" not in orjson.dumps(hidden).decode().replace(object_id, "")
    assert mine["header"]["object_ref"]["id"] == "ent-decision-b"

    async with client_for(demo, both) as client:
        mismatch = await error(client, CONTEXT, {"object_ref": _ref("entity", "ent-beacon-offline-queue")})
        in_beacon = await ok(
            client, CONTEXT, {"object_ref": _ref("entity", "ent-beacon-offline-queue"), "scope": BEACON}
        )
        pair_from_atlas = await error(client, CONTEXT, {"object_ref": _ref("summary", "sum-pair-2026-06")})
        still_hidden = await error(client, CONTEXT, {"object_ref": _ref("story_line", "sl-legacy-import")})
    assert mismatch["error"] == pair_from_atlas["error"] == "scope_mismatch"
    assert mismatch["field"] == "scope" and "beacon" in mismatch["next_step"]
    assert in_beacon["resolved_scope"] == BEACON and in_beacon["items"]
    assert still_hidden["error"] == "object_not_found"


async def test_an_id_asked_for_with_the_wrong_type_names_the_call_that_reads_it(demo: Path) -> None:
    """Agents guess the type of an id they hold (an entity change's event_id, an id from a reason text): the
    refusal names the stored type, and the scope when it is another readable one, so the next call works."""
    atlas_only = Grant(default_project="atlas", projects=["atlas"], allow_global=False)
    both = Grant(default_project="atlas", projects=["atlas", "beacon"], allow_global=True)
    async with client_for(demo, both) as client:
        here = await error(client, CONTEXT, {"object_ref": _ref("event", "ent-edge-box-constraint")})
        assert here["error"] == "object_not_found" and here["field"] == "object_ref"
        assert '{"type":"entity","id":"ent-edge-box-constraint"}' in here["next_step"]
        assert "scope" not in here["next_step"]
        fixed = await ok(client, CONTEXT, {"object_ref": _ref("entity", "ent-edge-box-constraint")})
        assert fixed["header"]["object_ref"] == _ref("entity", "ent-edge-box-constraint")

        there = await error(client, CONTEXT, {"object_ref": _ref("entity", "evt-beacon-push-relay")})
        assert '{"type":"event","id":"evt-beacon-push-relay"}' in there["next_step"]
        assert '{"kind":"projects","projectIds":["beacon"]}' in there["next_step"]
        await ok(client, CONTEXT, {"object_ref": _ref("event", "evt-beacon-push-relay"), "scope": BEACON})

        plain = await error(client, CONTEXT, {"object_ref": _ref("entity", "no-such-id")})
        assert "story_graph_search" in plain["next_step"]
    async with client_for(demo, atlas_only) as client:
        # Stored only in a scope this caller may not read: the answer of an id that does not exist.
        hidden = await error(client, CONTEXT, {"object_ref": _ref("entity", "evt-beacon-push-relay")})
        missing = await error(client, CONTEXT, {"object_ref": _ref("entity", "no-such-id")})
    assert orjson.dumps(hidden).decode().replace("evt-beacon-push-relay", "<id>") == orjson.dumps(
        missing
    ).decode().replace("no-such-id", "<id>")


async def test_an_id_with_whitespace_around_it_names_the_stored_id(demo: Path) -> None:
    """An id copied with a space or newline around it: search trims its query and finds the object, get_context
    answered a plain object_not_found, and the agent concluded the object was gone. The refusal names the
    stored id (never read in its place), and keeps a scope the caller may not read hidden."""
    atlas_only = Grant(default_project="atlas", projects=["atlas"], allow_global=False)
    both = Grant(default_project="atlas", projects=["atlas", "beacon"], allow_global=True)
    async with client_for(demo, both) as client:
        padded = await error(client, CONTEXT, {"object_ref": _ref("entity", " ent-decision-b")})
        change = await error(client, CONTEXT, {"object_ref": _ref("entity_change", "ent-decision-b#added-2026-07\n")})
        typed = await error(client, CONTEXT, {"object_ref": _ref("event", "ent-decision-b ")})
        beacon = await error(client, CONTEXT, {"object_ref": _ref("entity", "ent-beacon-offline-queue ")})
        found = await ok(client, "story_graph_search", {"query": " ent-decision-b"})
    assert found["items"][0]["object_ref"] == _ref("entity", "ent-decision-b")
    assert padded["error"] == "object_not_found" and padded["field"] == "object_ref"
    assert padded["next_step"] == (
        "The id has whitespace around it; 'ent-decision-b' is stored: call again with object_ref "
        '{"type":"entity","id":"ent-decision-b"}.'
    )
    assert '{"type":"entity_change","id":"ent-decision-b#added-2026-07"}' in change["next_step"]
    assert "'ent-decision-b' is stored with type entity: call again with object_ref" in typed["next_step"]
    assert beacon["next_step"].endswith(
        '{"type":"entity","id":"ent-beacon-offline-queue"} and scope {"kind":"projects","projectIds":["beacon"]}.'
    )
    async with client_for(demo, atlas_only) as client:
        hidden = await error(client, CONTEXT, {"object_ref": _ref("entity", "ent-beacon-offline-queue ")})
    assert "search" in hidden["next_step"] and "beacon" not in hidden["next_step"]


async def test_an_id_in_another_letter_case_names_the_stored_id(demo: Path) -> None:
    """Ids are exact (SPEC: a stored id is matched as stored), but an agent that typed EVT-DECISION-A for the
    stored evt-decision-a got a plain object_not_found and concluded the event did not exist. The refusal names the
    stored id (never read in its place), trimmed or not, with its scope when that is another readable one; a scope
    the caller may not read stays hidden."""
    atlas_only = Grant(default_project="atlas", projects=["atlas"], allow_global=False)
    both = Grant(default_project="atlas", projects=["atlas", "beacon"], allow_global=True)
    async with client_for(demo, both) as client:
        upper = await error(client, CONTEXT, {"object_ref": _ref("event", "EVT-DECISION-A")})
        padded_upper = await error(client, CONTEXT, {"object_ref": _ref("event", " EVT-DECISION-A\n")})
        typed = await error(client, CONTEXT, {"object_ref": _ref("entity", "EVT-DECISION-A")})
        beacon = await error(client, CONTEXT, {"object_ref": _ref("event", "EVT-BEACON-PUSH-RELAY")})
    assert upper["error"] == "object_not_found" and upper["field"] == "object_ref"
    assert upper["next_step"] == (
        "The id differs in letter case (ids are exact); 'evt-decision-a' is stored: call again with object_ref "
        '{"type":"event","id":"evt-decision-a"}.'
    )
    assert padded_upper["next_step"].startswith(
        "The id has whitespace around it and differs in letter case (ids are exact); 'evt-decision-a' is stored:"
    )
    assert "'evt-decision-a' is stored with type event: call again with object_ref" in typed["next_step"]
    assert beacon["next_step"].endswith(
        '{"type":"event","id":"evt-beacon-push-relay"} and scope {"kind":"projects","projectIds":["beacon"]}.'
    )
    async with client_for(demo, atlas_only) as client:
        hidden = await error(client, CONTEXT, {"object_ref": _ref("event", "EVT-BEACON-PUSH-RELAY")})
        missing = await error(client, CONTEXT, {"object_ref": _ref("event", "EVT-NO-SUCH-EVENT")})
    assert orjson.dumps(hidden).decode().replace("EVT-BEACON-PUSH-RELAY", "<id>") == orjson.dumps(
        missing
    ).decode().replace("EVT-NO-SUCH-EVENT", "<id>")


async def test_a_relation_end_outside_the_scope_is_never_read(demo: Path) -> None:
    with sqlite3.connect(demo) as conn:
        conn.execute(
            "INSERT INTO relations (id, result_id, scope_key, from_type, from_id, to_type, to_id, relation_type,"
            " reason, recorded_at) VALUES ('rel-cross', 'res-atlas-2026-07', 'projects:[\"atlas\"]', 'entity',"
            " 'ent-decision-b', 'entity', 'ent-beacon-session-cache', 'related', 'legacy mapping',"
            " '2026-07-15T10:03:00.000Z')"
        )
    async with client_for(demo) as client:
        page = await read_all(client, {"object_ref": _ref("entity", "ent-decision-b")})
        relation = await read_all(client, {"object_ref": _ref("relation", "rel-cross")})
    cross = objects(page)[("relation", "rel-cross", "res-atlas-2026-07")]
    assert cross["relation"]["to"] == {"ref": _ref("entity", "ent-beacon-session-cache"), "in_scope": False}
    assert ("entity", "ent-beacon-session-cache", None) not in objects(page)
    stored = next(r for r in page["header"]["relations"] if r["relation_ref"]["id"] == "rel-cross")
    assert stored["other_end"]["in_scope"] is False and stored["other_label"] is None
    for answer in (page, relation):
        text = orjson.dumps(answer).decode()
        assert "token only" not in text and "Keychain" not in text  # the beacon entity's label and description
    gaps = {g["kind"]: g for g in relation["known_gaps"]}
    assert gaps["relation_end_not_in_scope"]["count"] == 1
    assert [i["object_ref"]["id"] for i in relation["items"] if i["role"] == "related"] == ["ent-decision-b"]


@pytest.mark.parametrize(
    ("object_ref", "expected"),
    [
        (_ref("event", "evt-revision-a-to-b"), {"ent-decision-a", "ent-decision-b"}),
        (_ref("entity_change", "ent-decision-a#revised-2026-05"), {"ent-decision-a", "evt-revision-a-to-b"}),
        (_ref("relation", "rel-b-replaces-a"), {"ent-decision-a", "ent-decision-b", "ref-revision-3"}),
        (_ref("summary", "sum-atlas-2026-05"), {"ent-decision-b", "evt-decision-b"}),
        (_ref("source_reference", "ref-revision-3"), {"rel-b-replaces-a", "ent-decision-b"}),
        (_ref("entity", "leaf:leaf-atlas-2026-05-a:ent-decision-b"), {"ent-decision-b", "rel-b-revised-a"}),
    ],
)
async def test_every_object_type_reads_with_its_neighbourhood(
    demo: Path, object_ref: dict[str, str], expected: set[str]
) -> None:
    async with client_for(demo) as client:
        current = await read_all(client, {"object_ref": object_ref})
        timeline = await read_all(client, {"object_ref": object_ref, "mode": "timeline"})
    assert expected <= set(ids(current))
    assert set(objects(current)) == set(objects(timeline))
    assert current["header"]["object_ref"] == current["object_ref"]
    assert all(i["scope"] == ATLAS for i in current["items"])


async def test_open_issues_come_from_the_summaries_that_list_the_object(demo: Path) -> None:
    async with client_for(demo) as client:
        page = await ok(client, CONTEXT, {"object_ref": _ref("entity", "ent-ttl-30m")})
    issues = page["header"]["open_items"]
    assert issues and all(i["summary_id"].startswith("sum-atlas-") for i in issues)
    assert page["header"]["open_item_count"] == len(issues)
    [conflict] = page["header"]["conflicts"]
    assert conflict["relation_ref"]["id"] == "rel-ttl-conflict"
    assert {c["ref"]["id"] for c in conflict["claims"]} == {"ent-ttl-2h", "ent-ttl-30m"}


async def test_a_summarys_header_label_is_its_opening_sentence_as_search_titles_it(demo: Path) -> None:
    """A summary stores no title: its label was null, while every other type's header names the object. It is now
    the summary's own opening words, the same as search's `title` for it."""
    async with client_for(demo) as client:
        march = await ok(client, CONTEXT, {"object_ref": _ref("summary", "sum-atlas-2026-03")})
        may = await ok(client, CONTEXT, {"object_ref": _ref("summary", "sum-atlas-2026-05")})
        found = await ok(client, "story_graph_search", {"query": "sum-atlas-2026-03"})
    # The first line is one 283-code-point paragraph: its first sentence fits the 160 code points of a label.
    opening = (
        "March: the team chose Redis as the session cache (会话缓存), one instance per region, with a 30-minute TTL to "
        "start."
    )
    assert march["header"]["label"] == opening
    assert march["header"]["description"].startswith(opening + " A joking")  # the description stays the whole text
    assert may["header"]["label"] == "April–May: Decision A (Redis) was revised."
    (item,) = [i for i in found["items"] if i["object_ref"] == _ref("summary", "sum-atlas-2026-03")]
    assert item["title"] == opening


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("\n  \n  Week 12: shipped.  \nDetails follow.", "Week 12: shipped."),  # the first line that is not blank
        ("决定用 SQLite。" * 20, "决定用 SQLite。" * 14),  # the sentences that fit (full-width stops count)
        ("v1.2 shipped. " + "x" * 200, "v1.2 shipped."),  # a dot inside a word ends no sentence
        ("y" * 200, "y" * 159 + "…"),  # no sentence fits: cut, and marked as cut
        ("  \n\t", None),  # nothing to name it by: null, not made up
        (None, None),
    ],
)
def test_a_summary_title_is_its_own_opening_words(text: str | None, title: str | None) -> None:
    from server.reader.objects import summary_title

    assert summary_title(text) == title


LISTED_GAP = "listed_event_coverage_not_complete"


@pytest.mark.parametrize(
    "object_ref",
    [_ref("experience", "exp-edge-box-infra"), _ref("story", "story-pair-edge-stack")],
    ids=["exp", "cross"],
)
async def test_a_shared_objects_gaps_name_the_incomplete_coverage_of_its_events_own_scopes(
    demo: Path, object_ref: dict[str, str]
) -> None:
    """The pair's own coverage is complete, but three of the four events the experience and the cross story list
    are Atlas's (partial: a failed leaf batch) and Beacon's (unknown: a count-only record). `coverage` stays the
    pair's (SPEC §4); a gap says the rest, on every page and in both modes, where before nothing did."""
    async with client_for(demo) as client:
        pages = await all_pages(client, CONTEXT, {"object_ref": object_ref, "scope": PAIR, "page_size": 2})
        timeline = await ok(client, CONTEXT, {"object_ref": object_ref, "scope": PAIR, "mode": "timeline"})
        atlas = await ok(client, "story_graph_search", {"query": "Redis"})
        beacon = await ok(client, "story_graph_search", {"query": "Redis", "scope": BEACON})
    assert (atlas["coverage"]["status"], beacon["coverage"]["status"]) == ("partial", "unknown")
    assert len(pages) > 1
    for page in [*pages, timeline]:
        assert page["coverage"]["status"] == "complete"  # the pair's own, unchanged
        assert "coverage_not_complete" not in {g["kind"] for g in page["known_gaps"]}
        (gap,) = [g for g in page["known_gaps"] if g["kind"] == LISTED_GAP]
        assert gap["count"] == 3
        assert gap["refs"] == [
            _ref("event", i) for i in ("evt-beacon-push-relay", "evt-decision-b", "evt-revision-a-to-b")
        ]
        assert (
            '{"kind":"projects","projectIds":["atlas"]} partial (2 events), '
            '{"kind":"projects","projectIds":["beacon"]} unknown (1 event)'
        ) in gap["detail"]
        assert "pair" not in gap["detail"] and '["atlas","beacon"]' not in gap["detail"]  # the pair's own is `coverage`


async def test_the_listed_events_coverage_is_read_at_their_scopes_current_revision(tmp_path: Path) -> None:
    """A review recorded in Beta changes Beta's coverage but not the pair's data revision: the cross story's gap
    follows it at once (it is read per call, not remembered with the pair's selection). Alpha, complete, is never
    named."""
    db = imported_graph(tmp_path, story_graph())
    arguments = {"object_ref": _ref("story", "st-cross"), "scope": GRAPH_PAIR}
    async with client_for(db, Grant(default_project="alpha")) as client:
        before = await ok(client, CONTEXT, arguments)
        with sqlite3.connect(db) as conn:
            span = {"from": "2026-01-01T00:00:00Z", "to": "2026-03-01T00:00:00Z"}
            complete = {"kind": "detailed", "processed_range": span, "sources": [], "unprocessed_sources": 0}
            conn.execute("UPDATE results SET coverage_json = ? WHERE id = 'r-beta'", (orjson.dumps(complete).decode(),))
        after = await ok(client, CONTEXT, arguments)
    (gap,) = [g for g in before["known_gaps"] if g["kind"] == LISTED_GAP]
    assert (gap["count"], gap["refs"]) == (1, [_ref("event", "ev-b1")])
    assert '{"kind":"projects","projectIds":["beta"]} unknown (1 event)' in gap["detail"]
    assert "alpha" not in gap["detail"]
    assert before["data_revision"] == after["data_revision"]  # the pair's revision did not move
    assert LISTED_GAP not in {g["kind"] for g in after["known_gaps"]}


async def test_a_story_of_one_project_has_no_listed_event_gap(demo: Path) -> None:
    """Its events are all stored in its own scope: the scope's own coverage gap says it all."""
    async with client_for(demo) as client:
        page = await ok(client, CONTEXT, {"object_ref": _ref("story", "story-atlas-session-cache")})
    kinds = [g["kind"] for g in page["known_gaps"]]
    assert "coverage_not_complete" in kinds and LISTED_GAP not in kinds
