"""story_graph_read_source through a real MCP client session against the demo graph in real SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from support import client_for, demo_db, error, ok

from server.contracts.common import Grant
from server.reader.source_rows import SOURCE_CHUNKS, StoredTextBroken, read_slice

pytestmark = pytest.mark.anyio

READ = "story_graph_read_source"
ATLAS = {"kind": "projects", "projectIds": ["atlas"]}
BEACON = {"kind": "projects", "projectIds": ["beacon"]}
PAIR = {"kind": "projects", "projectIds": ["beacon", "atlas"]}
GLOBAL = {"kind": "global"}
UPSTREAM_OUTPUT_NAMES = (
    *("requested_scope", "resolved_scope", "read_at", "coverage", "page", "source_reference_id", "result_id"),
    *("original_source_id", "source_type", "content_kind", "requested_version", "content_extent", "source_version"),
    *("reference_version", "differs_from_reference", "object_revision", "source_location", "availability"),
    *("original_source_availability", "source_record_time", "event_time", "review_generated_at", "recorded_at"),
    *("content", "position", "saved_fragment", "reviewed_source_length", "original_source_length"),
)
ATLAS_ONLY = Grant(projects=["atlas"], allow_global=False, default_project="atlas")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return demo_db(tmp_path)


def stored_text(db: Path, source_id: str, version: str) -> str:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT text FROM source_chunks WHERE source_id = ? AND version = ? ORDER BY start", (source_id, version)
        ).fetchall()
    return "".join(row[0] for row in rows)


def reference(db: Path, reference_id: str) -> sqlite3.Row:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        row: sqlite3.Row | None = conn.execute(
            "SELECT * FROM source_references WHERE id = ?", (reference_id,)
        ).fetchone()
    assert row is not None
    return row


def write(db: Path, sql: str, *params: Any) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql, params)


async def walk(client: Client, arguments: dict[str, Any], limit: int | None = None) -> list[dict[str, Any]]:
    """Every page of one read (or the first `limit`), checking that pages abut, counts agree and no character
    is broken."""
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while limit is None or len(pages) < limit:
        page = await ok(client, READ, arguments | ({"cursor": cursor} if cursor else {}))
        content, position, meta = page["content"], page["position"], page["page"]
        content.encode("utf-8")  # a lone surrogate (a split astral character) would raise here
        assert position["start"] == (pages[-1]["position"]["end"] if pages else 0)
        assert position["end"] - position["start"] == len(content) == meta["returned_count"]
        assert 0 < len(content) <= arguments.get("page_size", 4000) or meta["total_count"] == 0
        assert meta["has_more"] is not meta["complete"]
        assert (meta["limit_reason"] == "page_size") is meta["has_more"]
        pages.append(page)
        cursor = meta["next_cursor"]
        if cursor is None:
            assert position["end"] == meta["total_count"]
            return pages
    return pages


def joined(pages: list[dict[str, Any]]) -> str:
    return "".join(page["content"] for page in pages)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_snapshot_of_each_fragment_of_one_source_returns_exactly_that_saved_fragment(db: Path, mode: str) -> None:
    whole = stored_text(db, "src-msg-revision", "v1")
    async with client_for(db, mode=mode) as client:
        reads = {n: await ok(client, READ, {"source_reference_id": f"ref-revision-{n}"}) for n in (1, 2, 3)}
    for n, read in reads.items():
        row = reference(db, f"ref-revision-{n}")
        start, end = row["fragment_start"], row["fragment_end"]
        assert read["content"] == row["fragment"] == whole[start:end]
        assert read["content_kind"] == "snapshot" and read["content_extent"] == "saved_fragment"
        assert read["original_source_id"] == "src-msg-revision" and read["source_type"] == "conversation"
        assert read["source_version"] == read["reference_version"] == "v1"
        assert read["differs_from_reference"] is False
        assert read["saved_fragment"] == {"start": start, "end": end, "length": end - start}
        assert read["position"] == {
            "start": 0,
            "end": end - start,
            "unit": "unicode_code_point",
            "source_start": start,
            "source_end": end,
        }
        assert read["reviewed_source_length"] == read["original_source_length"] == len(whole)
        location = read["source_location"]
        assert location["basis"] == "saved_reference" and location["locator"] == "stored"
        assert (location["project_id"], location["conversation_id"], location["message_id"], location["role"]) == (
            "atlas",
            "conv-atlas-cache",
            "msg-cache-0040",
            "user",
        )
        assert location["order"] == 40 and location["document_id"] == "missing"
        assert (location["start"], location["end"]) == (start, end)
        assert read["page"]["complete"] is True and read["page"]["total_count"] == end - start
        assert read["event_time"] is None and read["review_generated_at"] and read["recorded_at"]
        assert read["requested_scope"] == "current_project" and read["resolved_scope"] == ATLAS
        assert read["coverage"]["historical_reconstruction"] is False
        assert read["source_coverage"]["record"] == "detailed" and "error" not in read  # omitted on success
        assert "not the whole source" in read["content_note"]
    assert len({read["object_revision"] for read in reads.values()}) == 3


@pytest.mark.parametrize("page_size", [4000, 8000, 4096, 4097, 428])
async def test_the_long_source_with_emoji_and_cjk_reassembles_exactly_at_any_page_size(
    db: Path, page_size: int
) -> None:
    text = stored_text(db, "src-long-design-doc", "v1")
    assert any(ord(ch) > 0xFFFF for ch in text) and any("\u4e00" <= ch <= "\u9fff" for ch in text)
    async with client_for(db) as client:
        pages = await walk(
            client, {"source_reference_id": "ref-long-doc", "content_kind": "current", "page_size": page_size}
        )
    assert joined(pages) == text
    assert len(pages) == -(-len(text) // page_size)
    # Worked out on the first page and carried along: the saved fragment of v1 is still in the current text.
    assert {page["fragment_matches_current"] for page in pages} == {True}
    assert {page["page"]["total_count"] for page in pages} == {len(text)}
    assert pages[0]["page"]["complete"] is False and "More follows" in pages[0]["content_note"]


@pytest.mark.parametrize("page_size", [369, 370, 371, 4000, 8000])
async def test_the_long_saved_fragment_reassembles_exactly_even_when_pages_split_beside_astral_characters(
    db: Path, page_size: int
) -> None:
    fragment = reference(db, "ref-long-doc")["fragment"]
    # The boundaries of pages of 369 and 370 fall right before and between astral characters.
    assert ord(fragment[369]) > 0xFFFF and ord(fragment[370]) > 0xFFFF
    async with client_for(db) as client:
        pages = await walk(client, {"source_reference_id": "ref-long-doc", "page_size": page_size})
    assert joined(pages) == fragment
    start = reference(db, "ref-long-doc")["fragment_start"]
    assert [p["position"]["source_start"] - start for p in pages] == [p["position"]["start"] for p in pages]


async def test_small_page_sizes_walk_every_code_point_including_astral_ones(db: Path) -> None:
    long_fragment = reference(db, "ref-long-doc")["fragment"]
    async with client_for(db) as client:
        ones = await walk(client, {"source_reference_id": "ref-revision-1", "page_size": 1})
        sevens = await walk(client, {"source_reference_id": "ref-revision-3", "page_size": 7})
        # Through the long fragment's first astral characters (at 369, 370, 372, 375), without reading it all.
        long_ones = await walk(client, {"source_reference_id": "ref-long-doc", "page_size": 1}, limit=380)
        long_sevens = await walk(client, {"source_reference_id": "ref-long-doc", "page_size": 7}, limit=60)
    assert [len(p["content"]) for p in ones] == [1] * len(ones)
    assert joined(ones) == reference(db, "ref-revision-1")["fragment"]
    assert joined(sevens) == reference(db, "ref-revision-3")["fragment"]
    assert joined(long_ones) == long_fragment[:380] and ord(long_ones[369]["content"]) > 0xFFFF
    assert joined(long_sevens) == long_fragment[:420]


async def test_a_deleted_source_keeps_its_labelled_fragment_and_reports_version_and_current_unavailable(
    db: Path,
) -> None:
    async with client_for(db) as client:
        snapshot = await ok(client, READ, {"source_reference_id": "ref-deleted-msg"})
        current = await ok(client, READ, {"source_reference_id": "ref-deleted-msg", "content_kind": "current"})
        version = await ok(
            client, READ, {"source_reference_id": "ref-deleted-msg", "content_kind": "version", "source_version": "v1"}
        )
    row = reference(db, "ref-deleted-msg")
    assert snapshot["content"] == row["fragment"] and snapshot["content_extent"] == "saved_fragment"
    assert snapshot["availability"] == "source_deleted"
    assert snapshot["original_source_availability"] == "deleted"
    assert snapshot["saved_fragment"] == {
        "start": row["fragment_start"],
        "end": row["fragment_end"],
        "length": len(row["fragment"]),
    }
    assert "deleted" in snapshot["content_note"] and "still readable" in snapshot["content_note"]
    assert snapshot["available_content_kinds"] == ["snapshot"]
    for result, code in ((current, "current_source_unavailable"), (version, "historical_version_unavailable")):
        assert result["error"] == code
        assert result["content"] is None and result["position"] is None and result["content_extent"] is None
        assert result["original_source_availability"] == "deleted"
        assert result["available_content_kinds"] == ["snapshot"]
        assert result["page"]["returned_count"] == 0 and result["page"]["next_cursor"] is None
        assert result["source_version"] is None and result["differs_from_reference"] == "unknown"
    assert version["requested_version"] == "v1"


async def test_current_reads_the_new_revision_and_says_it_differs_from_the_referenced_one(db: Path) -> None:
    v1, v2 = stored_text(db, "src-changed-msg", "v1"), stored_text(db, "src-changed-msg", "v2")
    row = reference(db, "ref-changed-msg")
    async with client_for(db) as client:
        current = await ok(client, READ, {"source_reference_id": "ref-changed-msg", "content_kind": "current"})
        old = await ok(
            client, READ, {"source_reference_id": "ref-changed-msg", "content_kind": "version", "source_version": "v1"}
        )
        snapshot = await ok(client, READ, {"source_reference_id": "ref-changed-msg"})
    assert current["content"] == v2 and current["content_extent"] == "source_record"
    assert (current["source_version"], current["reference_version"]) == ("v2", "v1")
    assert current["differs_from_reference"] is True
    assert current["original_source_length"] == len(v2) and current["reviewed_source_length"] == len(v1)
    assert current["fragment_matches_current"] is (v2[row["fragment_start"] : row["fragment_end"]] == row["fragment"])
    assert current["fragment_matches_current"] is False
    assert current["source_location"]["basis"] == "current_source"
    assert current["source_location"]["project_id"] == "atlas"
    assert old["content"] == v1 and old["source_version"] == "v1" and old["differs_from_reference"] is False
    assert old["fragment_matches_current"] is None
    assert snapshot["content"] == row["fragment"] == v1[row["fragment_start"] : row["fragment_end"]]
    assert snapshot["content"] not in v2  # the snapshot is never current text
    assert current["available_content_kinds"] == ["snapshot", "version", "current"]
    assert current["available_versions"] == ["v1", "v2"] and current["available_version_count"] == 2


async def test_an_unchanged_source_read_as_current_still_matches_its_saved_fragment(db: Path) -> None:
    async with client_for(db) as client:
        current = await ok(client, READ, {"source_reference_id": "ref-revision-2", "content_kind": "current"})
    assert current["content"] == stored_text(db, "src-msg-revision", "v1")
    assert current["differs_from_reference"] is False and current["fragment_matches_current"] is True


async def test_a_version_that_is_not_stored_is_a_normal_result_naming_what_can_be_read(db: Path) -> None:
    async with client_for(db) as client:
        absent = await ok(
            client, READ, {"source_reference_id": "ref-changed-msg", "content_kind": "version", "source_version": "v0"}
        )
        required = await error(client, READ, {"source_reference_id": "ref-changed-msg", "content_kind": "version"})
    assert absent["error"] == "historical_version_unavailable" and absent["content"] is None
    assert absent["original_source_availability"] == "available"
    assert absent["available_content_kinds"] == ["snapshot", "version", "current"]
    assert absent["available_versions"] == ["v1", "v2"]
    assert "'v0'" in absent["content_note"] and "No other text was substituted" in absent["content_note"]
    assert required["error"] == "source_version_required" and required["field"] == "source_version"


async def test_an_old_reference_without_a_locator_reads_as_snapshot_with_its_position_marked_missing(db: Path) -> None:
    async with client_for(db) as client:
        snapshot = await ok(client, READ, {"source_reference_id": "ref-no-locator"})
        current = await ok(client, READ, {"source_reference_id": "ref-no-locator", "content_kind": "current"})
    assert snapshot["content"] == reference(db, "ref-no-locator")["fragment"]
    location = snapshot["source_location"]
    assert location["locator"] == "missing"
    assert {v for k, v in location.items() if k not in ("basis", "locator", "unit")} == {"missing"}
    assert snapshot["saved_fragment"]["start"] == snapshot["saved_fragment"]["end"] == "unknown"
    assert snapshot["position"]["source_start"] == snapshot["position"]["source_end"] == "unknown"
    assert snapshot["source_version"] == snapshot["reference_version"] == "unknown"
    assert snapshot["differs_from_reference"] == "unknown"
    assert snapshot["reviewed_source_length"] == snapshot["original_source_length"] == "unknown"
    assert "position in the source is missing" in snapshot["content_note"]
    assert current["content"] == stored_text(db, "src-old-standup", "v1")
    assert current["differs_from_reference"] == "unknown" and current["fragment_matches_current"] == "unknown"


async def test_a_reference_outside_the_grant_is_answered_exactly_like_one_that_does_not_exist(db: Path) -> None:
    async with client_for(db, ATLAS_ONLY) as client:
        hidden = await error(client, READ, {"source_reference_id": "ref-beacon-sync-1"})
        hidden_current = await error(
            client, READ, {"source_reference_id": "ref-beacon-sync-1", "content_kind": "current"}
        )
        global_ref = await error(client, READ, {"source_reference_id": "ref-global-adr"})
        missing = await error(client, READ, {"source_reference_id": "ref-does-not-exist"})
        other_scope = await error(client, READ, {"source_reference_id": "ref-beacon-sync-1", "scope": BEACON})
    assert hidden == hidden_current == global_ref == missing
    assert missing["error"] == "source_not_found" and "beacon" not in orjson.dumps(missing).decode()
    assert other_scope["error"] == "scope_unavailable"


async def test_a_readable_reference_of_another_scope_is_a_scope_mismatch(db: Path) -> None:
    async with client_for(db) as client:
        wrong = await error(client, READ, {"source_reference_id": "ref-beacon-sync-1"})
        right = await ok(client, READ, {"source_reference_id": "ref-beacon-sync-1", "scope": BEACON})
        pair = await error(client, READ, {"source_reference_id": "ref-pair-go-no-go"})
        pair_current = await ok(
            client, READ, {"source_reference_id": "ref-pair-go-no-go", "scope": PAIR, "content_kind": "current"}
        )
        global_current = await ok(
            client, READ, {"source_reference_id": "ref-global-adr", "scope": GLOBAL, "content_kind": "current"}
        )
    assert wrong["error"] == pair["error"] == "scope_mismatch"
    # The refusal names the scope to repeat the call with (it is readable, so naming it leaks nothing).
    assert wrong["field"] == pair["field"] == "scope"
    assert wrong["next_step"].startswith('Repeat with scope {"kind":"projects","projectIds":["beacon"]}')
    assert pair["next_step"].startswith('Repeat with scope {"kind":"projects","projectIds":["atlas","beacon"]}')
    assert right["content"] == reference(db, "ref-beacon-sync-1")["fragment"]
    assert right["resolved_scope"] == BEACON and right["requested_scope"] == BEACON
    assert pair_current["content"] == stored_text(db, "src-pair-gonogo-msg", "v1")
    assert pair_current["resolved_scope"] == {"kind": "projects", "projectIds": ["atlas", "beacon"]}
    assert global_current["content"] == stored_text(db, "src-global-note", "v1")
    assert global_current["source_location"]["project_id"] == "missing"  # a Global note has no project
    assert global_current["source_location"]["document_id"] == "doc-eng-handbook"


async def test_a_reference_id_with_whitespace_around_it_names_the_stored_id(db: Path) -> None:
    """A reference id copied with a space or newline around it got 'use a source_reference_id from a search
    item', though it was one: the refusal names the stored id, and its scope only when the caller may read it."""
    both = Grant(default_project="atlas", projects=["atlas", "beacon"], allow_global=False)
    async with client_for(db, both) as client:
        padded = await error(client, READ, {"source_reference_id": "ref-revision-2 "})
        beacon = await error(client, READ, {"source_reference_id": "\nref-beacon-push"})
    assert padded["error"] == "source_not_found" and padded["field"] == "source_reference_id"
    assert (
        padded["next_step"] == "The id has whitespace around it; 'ref-revision-2' is stored: call again with that id."
    )
    assert beacon["next_step"].endswith(
        'call again with that id and scope {"kind":"projects","projectIds":["beacon"]}.'
    )
    async with client_for(db, Grant(default_project="atlas", projects=["atlas"], allow_global=False)) as client:
        hidden = await error(client, READ, {"source_reference_id": "\nref-beacon-push"})
        missing = await error(client, READ, {"source_reference_id": "\nno-such-reference"})
    assert hidden["next_step"] == missing["next_step"]  # Beacon is not granted: nothing about it


async def test_a_source_version_the_kind_does_not_use_is_named_in_the_note(db: Path) -> None:
    """'Show me v2 of the edited message' sent as a snapshot returned the v1 fragment, and the note only said it
    was the saved fragment: the answer echoed requested_version 'v2' beside v1 text, easy to quote as v2."""
    async with client_for(db) as client:
        snapshot = await ok(client, READ, {"source_reference_id": "ref-changed-msg", "source_version": "v2"})
        current = await ok(
            client, READ, {"source_reference_id": "ref-changed-msg", "content_kind": "current", "source_version": "v1"}
        )
        same = await ok(client, READ, {"source_reference_id": "ref-changed-msg", "source_version": "v1"})
        version = await ok(
            client, READ, {"source_reference_id": "ref-changed-msg", "content_kind": "version", "source_version": "v1"}
        )
    assert (snapshot["requested_version"], snapshot["source_version"]) == ("v2", "v1")
    assert snapshot["content"] == reference(db, "ref-changed-msg")["fragment"]
    assert snapshot["content_note"].endswith(
        "source_version 'v2' was not used: a snapshot is the fragment saved with the reference (version 'v1'); "
        "read content_kind 'version' with source_version 'v2' for that version's text."
    )
    assert (current["requested_version"], current["source_version"]) == ("v1", "v2")
    assert "source_version 'v1' was not used: this is the current text (version 'v2')" in current["content_note"]
    for read in (same, version):  # the version asked for is the one read: nothing to say
        assert "was not used" not in read["content_note"]


async def test_a_source_moved_out_of_the_scope_is_refused_for_current_and_version_but_its_snapshot_reads(
    db: Path,
) -> None:
    async with client_for(db) as client:
        current = await error(client, READ, {"source_reference_id": "ref-moved-msg", "content_kind": "current"})
        version = await error(
            client, READ, {"source_reference_id": "ref-moved-msg", "content_kind": "version", "source_version": "v1"}
        )
        snapshot = await ok(client, READ, {"source_reference_id": "ref-moved-msg"})
    assert current["error"] == version["error"] == "scope_mismatch"
    assert "moved out of the requested scope" in current["message"]
    # The argument to change: the reference is Atlas's and the source Beacon's now, so no scope reads both.
    assert current["field"] == version["field"] == "content_kind"
    assert current["next_step"] == "Read content_kind 'snapshot' for the fragment saved with this reference."
    assert snapshot["content"] == reference(db, "ref-moved-msg")["fragment"]
    assert snapshot["original_source_availability"] == "outside_scope"
    assert snapshot["available_content_kinds"] == ["snapshot"] and snapshot["available_versions"] == []
    assert "beacon" not in orjson.dumps(snapshot).decode()  # where it went is not revealed


async def test_task_and_document_locators_keep_what_was_stored(db: Path) -> None:
    async with client_for(db) as client:
        task = await ok(client, READ, {"source_reference_id": "ref-task-cache-migration", "content_kind": "current"})
        doc = await ok(client, READ, {"source_reference_id": "ref-kickoff-notes"})
    assert task["source_type"] == "task" and task["source_version"] == "2026-07-10"
    assert task["source_location"]["external"] == {"tracker": "ATL", "task_key": "ATL-212"}
    assert task["source_location"]["message_id"] == "missing"
    assert task["content"] == stored_text(db, "src-task-cache-migration", "2026-07-10")
    assert (doc["source_location"]["document_id"], doc["source_location"]["chunk_id"]) == ("doc-atlas-kickoff", "risks")
    assert doc["source_location"]["conversation_id"] == "missing"


async def test_a_change_to_the_source_or_its_reference_between_pages_gives_stale_cursor(db: Path) -> None:
    arguments = {"source_reference_id": "ref-long-doc", "content_kind": "current", "page_size": 5000}
    async with client_for(db) as client:
        first = await ok(client, READ, arguments)
        cursor = first["page"]["next_cursor"]
        second = await ok(client, READ, arguments | {"cursor": cursor})
        assert second["position"]["start"] == 5000
        write(db, "UPDATE sources SET updated_at = '2026-09-01T00:00:00.000Z' WHERE id = 'src-long-design-doc'")
        after_source = await error(client, READ, arguments | {"cursor": cursor})
        snapshot = {"source_reference_id": "ref-revision-1", "page_size": 10}
        first_snapshot = await ok(client, READ, snapshot)
        write(db, "UPDATE source_references SET title = 'retitled' WHERE id = 'ref-revision-1'")
        after_reference = await error(client, READ, snapshot | {"cursor": first_snapshot["page"]["next_cursor"]})
        again = await ok(client, READ, snapshot)
        # The reference's result: its review time is shown on every page.
        write(db, "UPDATE results SET review_generated_at = '2026-06-01T12:00:00.000Z' WHERE id = 'res-atlas-2026-05'")
        after_result = await error(client, READ, snapshot | {"cursor": again["page"]["next_cursor"]})
    assert after_source["error"] == after_reference["error"] == after_result["error"] == "stale_cursor"
    assert after_source["message"].startswith("this source reference or the source it reads changed")


async def test_a_write_elsewhere_in_the_scope_leaves_a_read_source_cursor_valid_but_a_hidden_project_refuses_it(
    db: Path,
) -> None:
    """The cursor is bound to the reference and the source it reads, not to the scope's data revision: another
    reference retitled, an event edited or a memory note written in the scope change no page of this text (they
    used to give stale_cursor). The scope is resolved on every page: its project hidden refuses the next one."""
    arguments = {"source_reference_id": "ref-long-doc", "content_kind": "current", "page_size": 5000}
    async with client_for(db) as client:
        whole = joined(await walk(client, arguments))
        first = await ok(client, READ, arguments)
        write(db, "UPDATE source_references SET title = 'retitled' WHERE id = 'ref-decision-a-msg'")
        write(db, "UPDATE events SET title = title || ' (edited)' WHERE id = 'evt-decision-a'")
        write(db, "UPDATE memory_items SET body = 'changed' WHERE id = 'mem-atlas-boring-tech'")
        pages, cursor = [first], first["page"]["next_cursor"]
        while cursor is not None:
            pages.append(await ok(client, READ, arguments | {"cursor": cursor}))
            cursor = pages[-1]["page"]["next_cursor"]
        assert int(pages[1]["data_revision"]) > int(first["data_revision"])  # the scope did change
        assert joined(pages) == whole and len(pages) > 2
        again = await ok(client, READ, arguments)
        write(db, "UPDATE projects SET status = 'archived' WHERE id = 'atlas'")
        hidden = await error(client, READ, arguments | {"cursor": again["page"]["next_cursor"]})
        write(db, "DELETE FROM projects WHERE id = 'atlas'")  # foreign keys are off: a careless writer
        removed = await error(client, READ, arguments | {"cursor": again["page"]["next_cursor"]})
    assert hidden["error"] == removed["error"] == "scope_unavailable"


async def test_a_stored_text_rewritten_in_place_between_pages_gives_stale_cursor_never_a_mix(db: Path) -> None:
    """A writer edits a stored version's chunks without touching the source or version rows (same length, same
    times): the cursor is bound to the version's own text revision (migration 0003), so pages never mix."""
    doc = {"source_reference_id": "ref-long-doc", "content_kind": "version", "source_version": "v1", "page_size": 100}
    whole = stored_text(db, "src-long-design-doc", "v1")
    async with client_for(db) as client:
        first = await ok(client, READ, doc)
        # In place, same length: every chunk's text upper-cased (the design note is mostly ASCII).
        write(db, "UPDATE source_chunks SET text = upper(text) WHERE source_id = 'src-long-design-doc'")
        edited = await error(client, READ, doc | {"cursor": first["page"]["next_cursor"]})
        restart = await ok(client, READ, doc)
        assert restart["content"] == stored_text(db, "src-long-design-doc", "v1")[:100] != whole[:100]
        # Delete the version and store it again under the same name, length and times, with other text.
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA foreign_keys = ON")
            row = conn.execute(
                "SELECT length, recorded_at FROM source_versions WHERE source_id = 'src-long-design-doc'"
                " AND version = 'v1'"
            ).fetchone()
            chunks = conn.execute(
                "SELECT start, text FROM source_chunks WHERE source_id = 'src-long-design-doc' AND version = 'v1'"
            ).fetchall()
            conn.execute("DELETE FROM source_versions WHERE source_id = 'src-long-design-doc' AND version = 'v1'")
            conn.execute(
                "INSERT INTO source_versions (source_id, version, length, recorded_at) VALUES (?, 'v1', ?, ?)",
                ("src-long-design-doc", *row),
            )
            conn.executemany(
                "INSERT INTO source_chunks (source_id, version, start, text)"
                " VALUES ('src-long-design-doc', 'v1', ?, ?)",
                [(start, text.lower()) for start, text in chunks],
            )
        recreated = await error(client, READ, doc | {"cursor": restart["page"]["next_cursor"]})
    assert edited["error"] == recreated["error"] == "stale_cursor"


async def test_a_current_read_goes_stale_when_the_source_gets_a_new_current_revision(db: Path) -> None:
    arguments = {"source_reference_id": "ref-changed-msg", "content_kind": "current", "page_size": 50}
    async with client_for(db) as client:
        first = await ok(client, READ, arguments)
        write(db, "UPDATE sources SET current_version = 'v1' WHERE id = 'src-changed-msg'")
        stale = await error(client, READ, arguments | {"cursor": first["page"]["next_cursor"]})
        fresh = await ok(client, READ, arguments)
    assert stale["error"] == "stale_cursor"
    assert fresh["source_version"] == "v1" and fresh["differs_from_reference"] is False


async def test_tampered_foreign_and_mismatched_cursors_are_refused(db: Path) -> None:
    arguments = {"source_reference_id": "ref-long-doc", "page_size": 1000}
    async with client_for(db) as client:
        cursor = (await ok(client, READ, arguments))["page"]["next_cursor"]
        body, _, mac = cursor.partition(".")
        flipped = body[:-1] + ("A" if body[-1] != "A" else "B") + "." + mac
        tampered = await error(client, READ, arguments | {"cursor": flipped})
        truncated = await error(client, READ, arguments | {"cursor": cursor[:-3]})
        other_size = await ok(client, READ, arguments | {"page_size": 999, "cursor": cursor})
        other_kind = await error(client, READ, arguments | {"content_kind": "current", "cursor": cursor})
        other_ref = await error(
            client, READ, {"source_reference_id": "ref-revision-1", "page_size": 1000, "cursor": cursor}
        )
        search_cursor = (await ok(client, "story_graph_search", {"query": "cache", "page_size": 1}))["page"][
            "next_cursor"
        ]
        from_search = await error(client, READ, arguments | {"cursor": search_cursor})
        other_scope = await error(client, READ, arguments | {"scope": GLOBAL, "cursor": cursor})
    async with client_for(db, secret=b"another-server-secret-000") as other_server:
        foreign = await error(other_server, READ, arguments | {"cursor": cursor})
    refused = [tampered, truncated, other_kind, other_ref, from_search, other_scope, foreign]
    assert {r["error"] for r in refused} == {"invalid_cursor"}
    assert other_size["position"]["start"] == 1000  # page sizes may change between pages
    assert other_size["position"]["end"] == 1999


async def test_a_cursor_keeps_the_scope_of_the_first_page(db: Path) -> None:
    arguments = {"source_reference_id": "ref-long-doc", "page_size": 6000}
    async with client_for(db) as client:
        first = await ok(client, READ, arguments)
    async with client_for(db, Grant(default_project="beacon")) as client:
        second = await ok(client, READ, arguments | {"cursor": first["page"]["next_cursor"]})
    assert second["resolved_scope"] == ATLAS and second["position"]["start"] == 6000


async def test_a_page_reads_only_the_chunks_it_overlaps(db: Path) -> None:
    text = stored_text(db, "src-long-design-doc", "v1")
    arguments = {"source_reference_id": "ref-long-doc", "content_kind": "current", "page_size": 8000}
    async with client_for(db) as client:
        pages = [await ok(client, READ, arguments)]
        while pages[-1]["position"]["end"] < 56000:
            pages.append(await ok(client, READ, arguments | {"cursor": pages[-1]["page"]["next_cursor"]}))
        # Drop every chunk that the last page does not overlap, behind the reader's back: without the trigger
        # that gives the version a new text revision (which would make the cursor stale, as it must for a
        # real edit), so only what the next page reads decides whether it succeeds. Each page also checks the
        # reference's saved range [14637, 23260) against its version (saved_range.py): those chunks stay.
        write(db, "DROP TRIGGER source_chunks_text_revision_del")
        write(
            db,
            "DELETE FROM source_chunks WHERE source_id = 'src-long-design-doc' AND start < 53248"
            " AND NOT (start < 23260 AND start + length(text) > 14637)",
        )
        last = await ok(client, READ, arguments | {"cursor": pages[-1]["page"]["next_cursor"]})
    assert last["content"] == text[56000:] and last["page"]["complete"] is True


async def test_as_of_and_malformed_arguments_are_refused(db: Path) -> None:
    async with client_for(db) as client:
        as_of = await error(client, READ, {"source_reference_id": "ref-revision-1", "as_of": "2026-05-01T00:00:00Z"})
        mode = await error(client, READ, {"source_reference_id": "ref-revision-1", "mode": "as_of"})
        problems = [
            await error(client, READ, arguments)
            for arguments in (
                {"source_reference_id": ""},
                {"source_reference_id": "x" * 257},
                {"source_reference_id": "ref-revision-1", "page_size": 0},
                {"source_reference_id": "ref-revision-1", "page_size": 8001},
                {"source_reference_id": "ref-revision-1", "content_kind": "latest"},
                {"source_reference_id": "ref-revision-1", "source_version": ""},
                {"source_reference_id": "ref-revision-1", "time_range": {"from": "x", "to": "y"}},
                {"source_reference_id": "ref-revision-1", "cursor": ""},
                {},
            )
        ]
    assert as_of["error"] == mode["error"] == "unsupported_mode"
    assert {p["error"] for p in problems} == {"invalid_arguments"}


async def test_read_source_is_listed_read_only_with_upstream_input_names(db: Path) -> None:
    async with client_for(db) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    tool = tools[READ]
    assert tool.annotations is not None and tool.annotations.read_only_hint is True
    assert tool.input_schema["additionalProperties"] is False
    assert set(tool.input_schema["properties"]) == {
        "source_reference_id",
        "scope",
        "content_kind",
        "source_version",
        "page_size",
        "cursor",
    }
    assert tool.input_schema["required"] == ["source_reference_id"]
    assert tool.output_schema is not None
    assert set(UPSTREAM_OUTPUT_NAMES) <= set(tool.output_schema["properties"])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_agent_goes_from_a_search_hit_through_its_context_to_the_source_text(db: Path, mode: str) -> None:
    async with client_for(db, mode=mode) as client:
        found = await ok(client, "story_graph_search", {"query": "Redis", "object_types": ["event"], "page_size": 50})
        hit = next(item for item in found["items"] if item["object_ref"]["id"] == "evt-revision-a-to-b")
        context = await ok(client, "story_graph_get_context", {"object_ref": hit["object_ref"]})
        ids = sorted({i for item in context["items"] for i in item["source_reference_ids"]})
        assert set(hit["source_reference_ids"]) <= set(ids)
        reads = {i: await walk(client, {"source_reference_id": i}) for i in ids}
        current = await ok(client, READ, {"source_reference_id": "ref-revision-3", "content_kind": "current"})
    for i, pages in reads.items():
        assert {page["source_reference_id"] for page in pages} == {i}
        assert joined(pages) == reference(db, i)["fragment"]
    # Quoting precisely: the saved fragment sits at its saved range of the current text.
    row = reference(db, "ref-revision-3")
    assert current["content"][row["fragment_start"] : row["fragment_end"]] == row["fragment"]
    assert current["fragment_matches_current"] is True


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(page_size=st.integers(min_value=300, max_value=8000), kind=st.sampled_from(["snapshot", "current"]))
def test_any_page_size_walks_the_text_with_no_gap_or_overlap(db: Path, page_size: int, kind: str) -> None:
    expected = (
        reference(db, "ref-long-doc")["fragment"]
        if kind == "snapshot"
        else stored_text(db, "src-long-design-doc", "v1")
    )

    async def read_all() -> list[dict[str, Any]]:
        async with client_for(db) as client:
            return await walk(
                client, {"source_reference_id": "ref-long-doc", "content_kind": kind, "page_size": page_size}
            )

    assert joined(anyio.run(read_all, backend="asyncio")) == expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.integers(min_value=0, max_value=60206), size=st.integers(min_value=0, max_value=9000))
def test_any_code_point_range_is_cut_from_the_right_chunks(db: Path, start: int, size: int) -> None:
    text = stored_text(db, "src-long-design-doc", "v1")
    end = min(start + size, len(text))

    async def cut() -> str:
        async with aiosqlite.connect(db) as conn:
            return await read_slice(conn, "src-long-design-doc", "v1", start, end)

    assert anyio.run(cut, backend="asyncio") == text[start:end]


async def test_a_gap_in_the_stored_chunks_is_a_read_failure_not_a_short_page(db: Path) -> None:
    write(db, "DELETE FROM source_chunks WHERE source_id = 'src-long-design-doc' AND start = 4096")
    async with aiosqlite.connect(db) as conn:
        with pytest.raises(StoredTextBroken):
            await read_slice(conn, "src-long-design-doc", "v1", 4000, 4200)
        async with conn.execute(
            "EXPLAIN QUERY PLAN " + SOURCE_CHUNKS, dict.fromkeys(("source_id", "version", "start", "end"), 1)
        ) as cur:
            plan = " ".join(str(row[3]) for row in await cur.fetchall())
    assert "SCAN" not in plan and "PRIMARY KEY" in plan


async def test_an_original_source_message_or_object_id_is_answered_with_the_references_that_carry_it(
    tmp_path: Path,
) -> None:
    """A read shows original_source_id and message_id beside source_reference_id, and agents pass the wrong one;
    the refusal names this scope's references for that id, so the next call reads it. Never another scope's."""
    db = demo_db(tmp_path)
    atlas_only = Grant(default_project="atlas", projects=["atlas"], allow_global=False)
    async with client_for(db, atlas_only) as client:
        by_source = await error(client, READ, {"source_reference_id": "src-msg-revision"})
        by_message = await error(client, READ, {"source_reference_id": "msg-cache-0040"})
        by_object = await error(client, READ, {"source_reference_id": "ent-decision-b"})
        fixed = await ok(client, READ, {"source_reference_id": "ref-revision-2"})
        beacon_source = await error(client, READ, {"source_reference_id": "src-beacon-msg"})
        missing = await error(client, READ, {"source_reference_id": "no-such-id"})
    assert by_source["error"] == by_message["error"] == by_object["error"] == "source_not_found"
    assert by_source["next_step"] == by_message["next_step"]
    assert "ref-revision-1, ref-revision-2, ref-revision-3. Call again with one of them." in by_source["next_step"]
    assert "ref-decision-b-msg, ref-revision-3, ref-task-cache-migration." in by_object["next_step"]
    assert fixed["original_source_id"] == "src-msg-revision"
    # Beacon's source, asked by a caller granted only Atlas: the answer of an id that does not exist.
    assert orjson.dumps(beacon_source).decode().replace("src-beacon-msg", "<id>") == orjson.dumps(
        missing
    ).decode().replace("no-such-id", "<id>")


async def test_a_snapshot_or_version_of_a_source_edited_since_names_its_current_version(db: Path) -> None:
    """The demo's edited message: its saved fragment says 512 MB, the message now says 1 GB. A snapshot read (the
    default, what an agent quotes) said nothing of it: differs_from_reference false, a note about the fragment only,
    so the old wording was quoted as what the source says. The note now names the current version and the read."""
    async with client_for(db) as client:
        snapshot = await ok(client, READ, {"source_reference_id": "ref-changed-msg"})
        old = await ok(
            client, READ, {"source_reference_id": "ref-changed-msg", "content_kind": "version", "source_version": "v1"}
        )
        new = await ok(
            client, READ, {"source_reference_id": "ref-changed-msg", "content_kind": "version", "source_version": "v2"}
        )
        current = await ok(client, READ, {"source_reference_id": "ref-changed-msg", "content_kind": "current"})
        unchanged = await ok(client, READ, {"source_reference_id": "ref-revision-2"})
        deleted = await ok(client, READ, {"source_reference_id": "ref-deleted-msg"})
        moved = await ok(client, READ, {"source_reference_id": "ref-moved-msg"})
        described = next(t for t in (await client.list_tools()).tools if t.name == READ).description
    assert described is not None and "content_note says when the source has changed since" in described
    assert snapshot["differs_from_reference"] is False  # unchanged meaning: the reference's own version was read
    assert (
        "The source has changed since this reference was saved: its current version is 'v2' (the fragment is from "
        "'v1'); read content_kind 'current' for what it says now." in snapshot["content_note"]
    )
    assert "This is not the source's current version, 'v2': read content_kind 'current'" in old["content_note"]
    for read in (new, current, unchanged, deleted, moved):
        assert "current version" not in read["content_note"], read["content_note"]
    assert "deleted" in deleted["content_note"]
    assert "moved out of this scope; this saved fragment is still readable" in moved["content_note"]
    assert moved["original_source_availability"] == "outside_scope"


async def test_a_story_or_experience_id_is_sent_to_get_context_for_its_events_sources(db: Path) -> None:
    """A story's or an experience's id passed as a reference (an agent asking for "the sources of this story") got
    the plain 'use a source_reference_id from a search or get_context item': a story cites no source itself, and
    nothing said where its sources are. The next step names the get_context call whose event items carry them,
    each with the scope to read it in. Only the requested scope is looked at: from Atlas alone, the pair's
    experience gets the plain answer."""
    experience = {"source_reference_id": "exp-edge-box-infra", "scope": PAIR}
    async with client_for(db) as client:
        story = await error(client, READ, {"source_reference_id": "story-atlas-session-cache"})
        lesson = await error(client, READ, experience)
        elsewhere = await error(client, READ, {"source_reference_id": "exp-edge-box-infra"})
        followed = await ok(
            client,
            "story_graph_get_context",
            {"object_ref": {"type": "experience", "id": "exp-edge-box-infra"}, "scope": PAIR, "page_size": 50},
        )
        event = next(i for i in followed["items"] if i["object_ref"]["id"] == "evt-beacon-push-relay")
        quoted = await ok(
            client, READ, {"source_reference_id": event["source_reference_ids"][0], "scope": event["scope"]}
        )
    assert story["error"] == lesson["error"] == "source_not_found"
    assert story["next_step"].startswith("That id is a story of this scope, which has no source references of its own")
    assert 'object_ref {"type":"story","id":"story-atlas-session-cache"}' in story["next_step"]
    assert 'object_ref {"type":"experience","id":"exp-edge-box-infra"}' in lesson["next_step"]
    assert elsewhere["next_step"] == "Use a source_reference_id from a search or get_context item of this scope."
    assert quoted["content"]  # the step works when followed


async def test_a_reference_id_in_another_letter_case_names_the_stored_id(db: Path) -> None:
    """REF-REVISION-2 for the stored ref-revision-2 got 'use a source_reference_id from a search item': ids are
    exact, and the refusal names the stored one (with its scope only when the caller may read that scope)."""
    both = Grant(default_project="atlas", projects=["atlas", "beacon"], allow_global=False)
    async with client_for(db, both) as client:
        upper = await error(client, READ, {"source_reference_id": "REF-REVISION-2"})
        padded = await error(client, READ, {"source_reference_id": " Ref-Revision-2 "})
        beacon = await error(client, READ, {"source_reference_id": "REF-BEACON-PUSH"})
    assert upper["error"] == "source_not_found" and upper["field"] == "source_reference_id"
    assert upper["next_step"] == (
        "The id differs in letter case (ids are exact); 'ref-revision-2' is stored: call again with that id."
    )
    assert padded["next_step"] == (
        "The id has whitespace around it and differs in letter case (ids are exact); 'ref-revision-2' is stored: "
        "call again with that id."
    )
    assert beacon["next_step"].endswith(
        'call again with that id and scope {"kind":"projects","projectIds":["beacon"]}.'
    )
    async with client_for(db, Grant(default_project="atlas", projects=["atlas"], allow_global=False)) as client:
        hidden = await error(client, READ, {"source_reference_id": "REF-BEACON-PUSH"})
        missing = await error(client, READ, {"source_reference_id": "REF-NO-SUCH-REFERENCE"})
    assert hidden["next_step"] == missing["next_step"]  # Beacon is not granted: nothing about it


async def test_source_version_required_names_the_versions_that_can_be_sent(db: Path) -> None:
    """The refusal said to pass 'a reference_version from an earlier read', but ref-no-locator's reference_version
    is 'unknown' (saved without one): following the hint led nowhere. It now names the source's stored versions,
    newest first (the current one and the reference's own marked), and the reference's version when recorded."""
    async with client_for(db) as client:
        old = await error(client, READ, {"source_reference_id": "ref-no-locator", "content_kind": "version"})
        changed = await error(client, READ, {"source_reference_id": "ref-changed-msg", "content_kind": "version"})
        sent = await ok(
            client,
            READ,
            {
                "source_reference_id": "ref-no-locator",
                "content_kind": "version",
                "source_version": old["newest_versions"][0],
            },
        )
    assert old["error"] == "source_version_required" and old["field"] == "source_version"
    assert old["newest_versions"] == ["v1"] and old["available_version_count"] == 1
    assert old["reference_version"] == "unknown"
    assert "'src-old-standup': 'v1' (current)" in old["next_step"] and "is not recorded" in old["next_step"]
    assert "earlier read" not in old["next_step"]
    assert sent["content"] == stored_text(db, "src-old-standup", "v1")  # what the refusal named is readable
    assert changed["newest_versions"] == ["v2", "v1"] and changed["reference_version"] == "v1"
    assert "newest first: 'v2' (current), 'v1' (reference_version)." in changed["next_step"]


async def test_source_version_required_lists_the_newest_few_and_counts_the_others(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO source_versions (source_id, version, length, recorded_at) VALUES ('src-changed-msg', ?, 0, ?)",
            [(f"v{n}", f"2026-06-{n:02d}T00:00:00.000Z") for n in range(3, 13)],
        )
    async with client_for(db) as client:
        refused = await error(client, READ, {"source_reference_id": "ref-changed-msg", "content_kind": "version"})
    assert refused["newest_versions"] == ["v12", "v11", "v10", "v9", "v8"]
    assert refused["available_version_count"] == 12
    assert (
        "'v8' (and 7 older; a read's available_versions lists the oldest 50); this reference was saved from 'v1'"
        in (refused["next_step"])
    )


async def test_source_version_required_names_no_version_of_a_source_this_scope_cannot_read(db: Path) -> None:
    """A source moved out of the scope (or deleted) has no version this scope may read: none is named, nothing about
    it is said, and the saved fragment is offered."""
    async with client_for(db) as client:
        moved = await error(client, READ, {"source_reference_id": "ref-moved-msg", "content_kind": "version"})
        deleted = await error(client, READ, {"source_reference_id": "ref-deleted-msg", "content_kind": "version"})
    for refused in (moved, deleted):
        assert refused["error"] == "source_version_required"
        assert refused["newest_versions"] == [] and refused["available_version_count"] == 0
        assert refused["reference_version"] == "v1"
        assert refused["next_step"] == (
            "No version of this reference's source can be read in this scope (this reference was saved from 'v1'): "
            "read content_kind 'snapshot', the fragment saved with this reference."
        )
