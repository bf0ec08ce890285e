"""get_context paging: every fragment of every object reassembles the stored data exactly, cursors are keyset
positions bound to the scope revision, and a page never exceeds the response limit."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonl_graph import imported_graph, write_jsonl
from support import all_pages, client_for, count_hops, demo_db, error, ok

from server.contracts.common import Grant
from server.contracts.context import ContextArgs
from server.reader.cursor import CursorCodec
from server.reader.db import Database, ReadConnection
from server.reader.fold import Folder
from server.reader.memo import Memo
from server.store.importer import import_file
from server.store.lines import load_line
from server.store.migrate import migrate, open_store
from server.tools import context as context_tool
from server.tools.base import Call

pytestmark = pytest.mark.anyio

CONTEXT = "story_graph_get_context"
ATLAS = {"kind": "projects", "projectIds": ["atlas"]}
BEACON = {"kind": "projects", "projectIds": ["beacon"]}
T = "2026-05-01T08:00:00+08:00"
# Astral characters (surrogate pairs in UTF-16) beside CJK, quotes, backslashes and a newline: every split
# point next to them must still rejoin to the same text.
ASTRAL = 'a😀b𝄞"c\\d🚀会话\n缓存🀄e'
Key = tuple[str, str, str | None]


def _graph(fragments: int = 3, fragment_text: str = ASTRAL * 5) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "project", "id": "beacon", "name": "Beacon"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "scope", "scope": BEACON},
        {"kind": "result", "id": "r-1", "scope": ATLAS, "review_generated_at": T, "recorded_at": T},
        {"kind": "result", "id": "r-2", "scope": ATLAS, "review_generated_at": T, "recorded_at": T, "revision": "2"},
        {"kind": "result", "id": "r-beacon", "scope": BEACON, "review_generated_at": T, "recorded_at": T},
        {"kind": "story_line", "id": "sl", "scope": ATLAS, "topic": "缓存 " + ASTRAL, "recorded_at": T},
        {"kind": "story_line", "id": "sl-beacon", "scope": BEACON, "topic": "beacon", "recorded_at": T},
        {"kind": "source", "id": "src", "source_type": "conversation", "project_id": "atlas", "updated_at": T},
        *(
            {
                "kind": "source_reference",
                "id": f"ref-{n}",
                "result_id": "r-1",
                "source_type": "conversation",
                "original_source_id": "src",
                "locator": {"project_id": "atlas", "message_id": f"m-{n}", "order": n},
                "fragment": {"text": fragment_text, "start": 0, "end": len(fragment_text)},
                "recorded_at": T,
            }
            for n in range(fragments)
        ),
        {
            "kind": "entity",
            "id": "ent-x",
            "story_line_id": "sl",
            "entity_type": "decision",
            "canonical_label": "X " + ASTRAL,
            "description": ASTRAL * 7,
            "decision_status": "decided",
            "updated_at": T,
            "revision": "x@2",
            "source_reference_ids": [f"ref-{n}" for n in range(fragments)],
        },
        {"kind": "entity", "id": "ent-y", "story_line_id": "sl", "canonical_label": "Y 😀", "updated_at": T},
        {"kind": "entity", "id": "ent-b", "story_line_id": "sl-beacon", "canonical_label": "B", "updated_at": T},
        *(
            {
                "kind": "entity_revision",
                "entity_id": "ent-x",
                "result_id": result_id,
                "canonical_label": "X",
                "description": f"{result_id}: " + ASTRAL * 3,
                "recorded_at": T,
            }
            for result_id in ("r-1", "r-2")
        ),
        {
            "kind": "event",
            "id": "ev-1",
            "result_id": "r-1",
            "story_line_id": "sl",
            "event_type": "decision",
            "title": "决定 " + ASTRAL,
            "event_time": {"start": "2026-04-02T10:00:00Z", "end": "2026-04-03T10:00:00Z", "precision": "day"},
            "recorded_at": T,
            "entity_ids": ["ent-x"],
            "source_reference_ids": ["ref-0"],
        },
        {
            "kind": "event",
            "id": "ev-2",
            "result_id": "r-2",
            "event_type": "change",
            "title": "?",
            "recorded_at": T,
            "entity_ids": ["ent-x", "ent-y"],
        },
        {
            "kind": "entity_change",
            "entity_id": "ent-x",
            "association_key": "k:1",
            "result_id": "r-2",
            "event_id": "ev-1",
            "change_type": "revised",
            "description": ASTRAL,
            "recorded_at": T,
            "source_reference_ids": ["ref-1"],
        },
        {
            "kind": "relation",
            "id": "rel-1",
            "result_id": "r-2",
            "from_ref": {"type": "entity", "id": "ent-y"},
            "to_ref": {"type": "entity", "id": "ent-x"},
            "relation_type": "contrasts",
            "reason": ASTRAL * 2,
            "recorded_at": T,
        },
        {
            "kind": "summary",
            "id": "sum-1",
            "result_id": "r-2",
            "body": ASTRAL * 4,
            "open_items": [ASTRAL, "🚀 open"],
            "recorded_at": T,
            "fact_refs": [{"type": "entity", "id": "ent-x"}],
        },
        {
            "kind": "leaf",
            "id": "leaf:1",
            "result_id": "r-2",
            "recorded_at": T,
            "facts": [{"object_ref": {"type": "entity", "id": "ent-x"}, "description": "leaf " + ASTRAL}],
        },
        {"kind": "memory_item", "id": "mem-g", "body": "全局 " + ASTRAL, "updated_at": T},
        {"kind": "memory_item", "id": "mem-a", "project_id": "atlas", "body": ASTRAL, "updated_at": T},
        {"kind": "memory_item", "id": "mem-b", "project_id": "beacon", "body": "beacon only", "updated_at": T},
    ]
    return lines


@pytest.fixture
def graph_db(tmp_path: Path) -> Path:
    return imported_graph(tmp_path, _graph())


def _key(item: dict[str, Any]) -> Key:
    return (item["object_ref"]["type"], item["object_ref"]["id"], item["result_id"])


def reassemble(every_page: list[dict[str, Any]]) -> dict[Key, str]:
    """Join fragments per (type, id, result_id) — memory per memory_id — checking offsets are contiguous."""
    texts: dict[Key, str] = {}
    lengths: dict[Key, int] = {}
    for page in every_page:
        fragments = [*page["items"], *page["background"]]
        assert page["page"]["returned_count"] == len(page["items"])
        for item in fragments:
            if "memory_id" in item:
                key: Key = ("memory_item", item["memory_id"], None)
            else:
                key = (item["object_ref"]["type"], item["object_ref"]["id"], item["result_id"])
            position = item["position"]
            assert position["unit"] == "unicode_code_point"
            assert position["start"] == len(texts.get(key, "")), key
            assert position["end"] - position["start"] == len(item["content"])
            texts[key] = texts.get(key, "") + item["content"]
            lengths[key] = position["length"]
    assert {k: len(v) for k, v in texts.items()} == lengths
    return texts


def stored(db: Path, key: Key, leaf_id: str | None = None) -> dict[str, Any]:
    """The object as stored, read independently through the store's own interchange reader."""
    conn = open_store(db, write=False)
    try:
        object_type, object_id, result_id = key
        if leaf_id is not None:
            leaf = load_line(conn, "leaf", (leaf_id,))
            assert leaf is not None
            dumped = leaf.model_dump(mode="json")
            described = object_id.removeprefix(f"leaf:{leaf_id}:")
            fact = next(f for f in dumped["facts"] if f["object_ref"] == {"type": object_type, "id": described})
            return {"leaf_id": leaf_id, "result_id": dumped["result_id"], **fact}
        if object_type == "entity" and result_id is not None:
            line = load_line(conn, "entity_revision", (object_id, result_id))
        elif object_type == "entity_change":
            line = load_line(conn, "entity_change", tuple(object_id.rsplit("#", 1)))
        else:
            line = load_line(conn, object_type, (object_id,))
        assert line is not None
        data = line.model_dump(mode="json")
        data.pop("kind")
        if object_type == "source_reference":  # the locator exactly as stored, not with model defaults
            data["locator"] = orjson.loads(
                conn.execute("SELECT locator_json FROM source_references WHERE id = ?", (object_id,)).fetchone()[0]
            )
        return data
    finally:
        conn.close()


def check_exact(db: Path, every_page: list[dict[str, Any]]) -> dict[Key, str]:
    texts = reassemble(every_page)
    leaf_ids = {
        (i["object_ref"]["type"], i["object_ref"]["id"], i["result_id"]): i["leaf_id"]
        for page in every_page
        for i in page["items"]
    }
    for key, text in texts.items():
        parsed = orjson.loads(text)
        assert orjson.dumps(parsed).decode() == text  # compact JSON, non-ASCII kept: byte-identical
        assert parsed == stored(db, key, leaf_ids.get(key)), key
    return texts


@pytest.mark.parametrize("mode", ["current", "timeline"])
@pytest.mark.parametrize(("page_size", "content_page_size"), [(1, 4000), (3, 97), (50, 13), (7, 8000)])
async def test_every_page_and_fragment_reassembles_the_stored_objects_exactly(
    graph_db: Path, mode: str, page_size: int, content_page_size: int
) -> None:
    args = {
        "object_ref": {"type": "entity", "id": "ent-x"},
        "mode": mode,
        "page_size": page_size,
        "content_page_size": content_page_size,
    }
    async with client_for(graph_db) as client:
        whole = await all_pages(client, CONTEXT, args | {"page_size": 50, "content_page_size": 8000})
        paged = await all_pages(client, CONTEXT, args)
    assert len(whole) == 1
    texts = check_exact(graph_db, paged)
    assert texts == reassemble(whole)
    assert len(texts) == whole[0]["page"]["total_count"] == paged[0]["page"]["total_count"]
    for page in paged:
        assert page["page"]["returned_count"] + len(page["background"]) <= page_size
        assert all(len(i["content"]) <= content_page_size for i in page["items"])

    # The stream order is the same whatever the page sizes.
    def order(some: list[dict[str, Any]]) -> list[Key]:
        keys = [_key(i) for p in some for i in p["items"]]
        return list(dict.fromkeys(keys))

    assert order(paged) == order(whole)


async def test_splits_right_before_and_after_astral_characters(graph_db: Path) -> None:
    target = {"object_ref": {"type": "entity", "id": "ent-x"}}
    async with client_for(graph_db) as client:
        whole = await all_pages(client, CONTEXT, target | {"page_size": 50})
        text = reassemble(whole)[("entity", "ent-x", None)]
        astral = [i for i, ch in enumerate(text) if ord(ch) > 0xFFFF]
        sizes = sorted({astral[0], astral[0] + 1, astral[1] - astral[0], 2})
        for size in sizes:
            # The target's current row comes first: read until it is complete.
            fragments: list[dict[str, Any]] = []
            cursor = None
            while not fragments or fragments[-1]["position"]["end"] < len(text):
                page = await ok(
                    client, CONTEXT, target | {"content_page_size": size} | ({"cursor": cursor} if cursor else {})
                )
                fragments.extend(i for i in page["items"] if _key(i) == ("entity", "ent-x", None))
                cursor = page["page"]["next_cursor"]
            assert "".join(f["content"] for f in fragments) == text
            assert all(len(f["content"]) <= size for f in fragments)
            assert [f["position"]["start"] for f in fragments] == list(range(0, len(text), size))
    assert text[astral[0]] == "😀"


async def test_the_demo_story_line_reassembles_exactly_in_both_modes(tmp_path: Path) -> None:
    db = demo_db(tmp_path)
    async with client_for(db) as client:
        for mode in ("current", "timeline"):
            args = {"object_ref": {"type": "story_line", "id": "sl-atlas-cache"}, "mode": mode, "page_size": 50}
            texts = check_exact(db, await all_pages(client, CONTEXT, args | {"content_page_size": 1999}))
            assert ("source_reference", "ref-long-doc", "res-atlas-2026-03") in texts


async def test_page_sizes_may_change_between_pages_and_the_cursor_resumes_at_its_position(graph_db: Path) -> None:
    target = {"object_ref": {"type": "story_line", "id": "sl"}}
    async with client_for(graph_db) as client:
        whole = await all_pages(client, CONTEXT, target | {"page_size": 50})
        first = await ok(client, CONTEXT, target | {"page_size": 2, "content_page_size": 11})
        cursor = first["page"]["next_cursor"]
        rest = await all_pages(client, CONTEXT, target | {"page_size": 50, "content_page_size": 50, "cursor": cursor})
    assert reassemble([first, *rest]) == reassemble(whole)


async def test_a_write_to_the_scope_makes_the_cursor_stale_but_a_write_to_another_scope_does_not(
    graph_db: Path,
) -> None:
    args = {"object_ref": {"type": "entity", "id": "ent-x"}, "page_size": 2}
    async with client_for(graph_db) as client:
        first = await ok(client, CONTEXT, args)
        cursor = first["page"]["next_cursor"]
        with sqlite3.connect(graph_db) as conn:
            conn.execute("UPDATE entities SET description = 'other scope' WHERE id = 'ent-b'")
            conn.execute("UPDATE memory_items SET body = 'beacon changed' WHERE id = 'mem-b'")
        second = await ok(client, CONTEXT, args | {"cursor": cursor})
        assert second["data_revision"] == first["data_revision"]
        with sqlite3.connect(graph_db) as conn:
            conn.execute("UPDATE relations SET reason = 'changed' WHERE id = 'rel-1'")
        stale = await error(client, CONTEXT, args | {"cursor": cursor})
        memory = await ok(client, CONTEXT, args)
        with sqlite3.connect(graph_db) as conn:
            conn.execute("UPDATE memory_items SET body = 'global changed' WHERE id = 'mem-g'")
        stale_by_memory = await error(client, CONTEXT, args | {"cursor": memory["page"]["next_cursor"]})
    assert stale["error"] == stale_by_memory["error"] == "stale_cursor"
    assert stale["field"] == "cursor"
    assert stale_by_memory["message"].startswith("stored evidence or memory items in this scope changed")


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO memory_items (id, project_id, body, updated_at)"
        " VALUES ('mem-new', 'atlas', 'new', '2026-05-01T00:00:00.000Z')",
        "UPDATE memory_items SET body = 'atlas changed' WHERE id = 'mem-a'",
        "DELETE FROM memory_items WHERE id = 'mem-g'",
    ],
    ids=["insert", "update", "delete"],
)
async def test_a_memory_write_stales_current_pages_which_show_memory_items_but_not_timeline_pages(
    graph_db: Path, sql: str
) -> None:
    """Memory items count in the scope's memory revision, not its data revision (migrations/0015): `current` shows
    them as background, so its cursor is refused, and the next first page shows the change; a timeline shows none,
    so its cursor reads on, and reassembles what an undisturbed walk does."""
    current = {"object_ref": {"type": "entity", "id": "ent-x"}, "page_size": 2}
    timeline = current | {"mode": "timeline"}
    async with client_for(graph_db) as client:
        whole_timeline = reassemble(await all_pages(client, CONTEXT, timeline))
        first_current, first_timeline = await ok(client, CONTEXT, current), await ok(client, CONTEXT, timeline)
        with sqlite3.connect(graph_db) as conn:
            conn.execute(sql)
        stale = await error(client, CONTEXT, current | {"cursor": first_current["page"]["next_cursor"]})
        rest = await all_pages(client, CONTEXT, timeline | {"cursor": first_timeline["page"]["next_cursor"]})
        after = await all_pages(client, CONTEXT, current | {"page_size": 50})
    assert stale["error"] == "stale_cursor"
    assert reassemble([first_timeline, *rest]) == whole_timeline
    assert {page["data_revision"] for page in [first_current, *rest, *after]} == {first_current["data_revision"]}
    background = {item["memory_id"]: item["content"] for page in after for item in page["background"]}
    assert ("mem-new" in background) == sql.startswith("INSERT")
    assert ("atlas changed" in background.get("mem-a", "")) == sql.startswith("UPDATE")
    assert ("mem-g" not in background) == sql.startswith("DELETE")


async def test_tampered_foreign_and_mismatched_cursors_are_refused(graph_db: Path) -> None:
    args = {"object_ref": {"type": "entity", "id": "ent-x"}, "page_size": 1}
    async with client_for(graph_db) as client:
        cursor = (await ok(client, CONTEXT, args))["page"]["next_cursor"]
        body, _, mac = cursor.partition(".")
        tampered = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + mac
        answers = [await error(client, CONTEXT, args | {"cursor": bad}) for bad in (tampered, cursor[:-3], "x", body)]
        other_object = await error(
            client, CONTEXT, args | {"object_ref": {"type": "entity", "id": "ent-y"}, "cursor": cursor}
        )
        other_mode = await error(client, CONTEXT, args | {"mode": "timeline", "cursor": cursor})
        other_scope = await error(client, CONTEXT, args | {"scope": BEACON, "cursor": cursor})
        search_cursor = (await ok(client, "story_graph_search", {"query": "缓存", "page_size": 1}))["page"]
        other_tool = await error(client, CONTEXT, args | {"cursor": search_cursor["next_cursor"]})
    async with client_for(graph_db, secret=b"another-server-secret-000") as other_server:
        foreign = await error(other_server, CONTEXT, args | {"cursor": cursor})
    for answer in [*answers, other_object, other_mode, other_scope, other_tool, foreign]:
        assert answer["error"] == "invalid_cursor", answer


async def test_a_page_stops_before_the_response_limit_and_continues_without_loss(tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    migrate(db)
    wide = "缓存😀" * 2500  # 7,500 code points (about 25 KB of UTF-8): each object fits one 8,000 fragment
    import_file(db, write_jsonl(tmp_path / "big.jsonl", _graph(fragments=12, fragment_text=wide)))
    args = {"object_ref": {"type": "entity", "id": "ent-x"}, "page_size": 50, "content_page_size": 8000}
    async with client_for(db) as client:
        every_page = await all_pages(client, CONTEXT, args)
    assert any(p["page"]["limit_reason"] == "response_budget" for p in every_page)
    for page in every_page:
        assert len(orjson.dumps(page)) <= 100_000
    texts = check_exact(db, every_page)
    assert sum(1 for key in texts if key[0] == "source_reference") == 12


async def test_memory_background_pages_like_any_object_and_only_for_this_scope(graph_db: Path) -> None:
    async with client_for(graph_db) as client:
        paged = await all_pages(
            client, CONTEXT, {"object_ref": {"type": "entity", "id": "ent-x"}, "page_size": 1, "content_page_size": 40}
        )
    texts = reassemble(paged)
    memories = {key[1]: orjson.loads(text) for key, text in texts.items() if key[0] == "memory_item"}
    assert set(memories) == {"mem-a", "mem-g"}
    assert memories["mem-g"] == stored(graph_db, ("memory_item", "mem-g", None))
    # Background comes after every graph object.
    kinds = ["background" if p["background"] else "graph" for p in paged]
    assert kinds == sorted(kinds, key=lambda k: k == "background")


BOTH = {"kind": "projects", "projectIds": ["atlas", "beacon"]}
DEMO_OBJECTS: tuple[tuple[dict[str, Any], str, str], ...] = (
    (ATLAS, "entity", "ent-decision-b"),
    (ATLAS, "story_line", "sl-atlas-cache"),
    (ATLAS, "story", "story-atlas-session-cache"),
    (ATLAS, "relation", "rel-b-replaces-a"),
    (ATLAS, "summary", "sum-atlas-2026-03"),
    (ATLAS, "entity_change", "ent-decision-a#revised-2026-05"),
    (BEACON, "event", "evt-beacon-push-relay"),
    (BEACON, "entity", "ent-beacon-session-cache"),
    (BEACON, "source_reference", "ref-beacon-push"),
    (BEACON, "story_line", "sl-beacon-sync"),
    (BOTH, "experience", "exp-edge-box-infra"),
)


async def test_a_remembered_page_runs_whole_on_the_event_loops_thread(tmp_path: Path) -> None:
    """Once a selection is remembered, a page's statements are short keyset and by-key reads: they run inline
    (server/reader/db.py), its snapshot begins inline too, and the only operation on the connection's thread is a
    statement over its inline budget (one, on the demo graph: a long source's reference). Each hop costs more
    than such a statement (a thread wake-up, GIL hand-overs, under load a wait for a CPU): a small object's first
    page made 19 (the BEGIN, and cursors opened with `conn.execute`), and cost more than the last page of an
    entity with 1,000 relations."""
    db = await Database.open(demo_db(tmp_path), size=1)
    [conn] = db._all
    assert isinstance(conn, ReadConnection)
    hops = count_hops(conn)
    codec, memo = CursorCodec(b"test-secret-0123456789"), Memo()
    walked = 0
    try:
        call = Call(db, Grant(default_project="atlas"), codec, Folder(), memo, "2026-11-30T00:00:00.000Z")
        for scope, object_type, object_id in DEMO_OBJECTS:
            for mode in ("current", "timeline"):
                arguments: dict[str, Any] = {"object_ref": {"type": object_type, "id": object_id}, "scope": scope}
                arguments |= {"mode": mode, "page_size": 2}
                await context_tool.run(call, ContextArgs.model_validate(arguments))  # remembers the selection
                pages = 0
                while True:
                    hops[0], long_ones = 0, conn.thread_runs
                    page = await context_tool.run(call, ContextArgs.model_validate(arguments))
                    long_ones = conn.thread_runs - long_ones
                    assert hops[0] == long_ones, (object_type, object_id, mode, pages)
                    assert long_ones <= 1  # reading a long source's stored length and fragment (ref-long-doc)
                    pages += 1
                    if page.page.next_cursor is None:
                        break
                    arguments["cursor"] = page.page.next_cursor
                walked += pages
        assert walked > 4 * len(DEMO_OBJECTS)  # cursors were followed too
    finally:
        await db.close()


async def test_a_page_of_relations_does_not_read_their_ends_again(tmp_path: Path) -> None:
    """Whether a relation's ends are stored in the scope (`in_scope`) is what the remembered selection found at
    this revision: a page of relations reads the relations alone, not the rows of the entities and events at their
    ends (2-5 statements more per page, and their rows built, before), nor the content of the object after the page
    (only its sort key says where the next page starts)."""
    db = await Database.open(demo_db(tmp_path), size=1)
    [conn] = db._all
    assert isinstance(conn, ReadConnection) and conn._raw is not None
    statements: list[str] = []
    conn._raw.set_trace_callback(statements.append)
    call = Call(db, Grant(default_project="atlas"), CursorCodec(b"test-secret-0123456789"), Folder(), Memo(), T)
    arguments: dict[str, Any] = {"object_ref": {"type": "entity", "id": "ent-decision-b"}, "page_size": 1}
    relation_pages = 0
    try:
        await context_tool.run(call, ContextArgs.model_validate(arguments))  # remembers the selection
        while True:
            statements.clear()
            page = await context_tool.run(call, ContextArgs.model_validate(arguments))
            if [item.role for item in page.items] == ["relation"]:
                relation_pages += 1
                assert page.items[0].relation is not None and page.items[0].relation.to_end.in_scope
                # Locating the target reads its own row's scope; nothing else reads an entity or an event.
                ends = [
                    s for s in statements if ("FROM entities" in s or "FROM events" in s) and "scope_key FROM" not in s
                ]
                assert ends == [], ends
            if page.page.next_cursor is None:
                break
            arguments["cursor"] = page.page.next_cursor
    finally:
        await db.close()
    assert relation_pages >= 2
