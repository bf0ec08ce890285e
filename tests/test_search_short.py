"""One- and two-character needles that are not all CJK (`AI`, `C`, `x8`) are matched through the indexed trigrams
they begin (docs/tools.md, "Matching"). The reader lists them from `search_trigrams` (migrations/0013) instead of the
FTS5 vocabulary: the list must be the vocabulary's, term for term, whoever wrote the index (the importer's bulk load,
a raw SQL writer through the triggers, an upgrade in place), after updates and deletes too; and a needle at the very
end of a field matches. Real SQLite files, a real MCP session."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from jsonl_graph import imported_graph, write_jsonl
from support import all_items, client_for, migrate_to
from test_search_rank import random_graph

from server.reader.search_needles import above_prefix
from server.reader.search_query import MARKERS, needs_trigram_list
from server.reader.search_sql import TRIGRAMS_BEGINNING, TRIGRAMS_FROM
from server.store.importer import import_file
from server.store.migrate import SCHEMA_VERSION, migrate

pytestmark = pytest.mark.anyio

SEARCH = "story_graph_search"
ATLAS = {"kind": "projects", "projectIds": ["atlas"]}
ATLAS_KEY = 'projects:["atlas"]'
T = "2026-05-01T08:00:00Z"
# Rows a raw SQL writer adds: mixed case, full-width letters (the index folds both), an accent, Cyrillic, a quote.
RAW_EVENTS = (
    ("raw-1", "We use AI", 'Ｇｏ and "C" at the end: x8'),
    ("raw-2", "Éclair ДЕПЛОЙ", "naïve ＡＩ"),
)
TABLES = (
    *("projects", "scopes", "scope_projects", "results", "story_lines", "entities", "entity_revisions", "events"),
    *("relations", "summaries", "source_references", "leaves", "fact_links"),
)


def vocabulary(conn: sqlite3.Connection) -> list[str]:
    """Every term of the FTS5 index, in its order (what the reader listed from before migration 0013)."""
    return [str(row[0]) for row in conn.execute("SELECT term FROM search_terms")]


def short_needles(terms: list[str]) -> list[str]:
    """Every one- and two-character needle that some term begins and that is matched through the trigram list,
    and a few that none begins (the last code point has no next one: the list runs to the end)."""
    needles = {n for term in terms for n in (term[:1], term[:2]) if n.translate(MARKERS) == n}
    needles |= {"x8", "zq", "\U0010ffff", "a\U0010ffff"}
    return sorted(n for n in needles if needs_trigram_list(n))


def listed(conn: sqlite3.Connection, needle: str) -> list[str]:
    """The reader's list for a needle (server/reader/search_needles.py `whole_needle`, before its memo)."""
    high = above_prefix(needle)
    sql = TRIGRAMS_FROM if high is None else TRIGRAMS_BEGINNING
    return [str(row[0]) for row in conn.execute(sql, {"low": needle, "high": high}) if "\x03" not in str(row[0])]


def expected(terms: list[str], needle: str) -> list[str]:
    high = above_prefix(needle)
    return [t for t in terms if t >= needle and (high is None or t < high) and "\x03" not in t]


def assert_lists_match_the_vocabulary(path: Path) -> int:
    """Every short needle's list equals the vocabulary's; returns how many needles begin some trigram."""
    with sqlite3.connect(path) as conn:
        terms = vocabulary(conn)
        needles = short_needles(terms)
        assert len(needles) > 50
        for needle in needles:
            assert listed(conn, needle) == expected(terms, needle), needle
    return sum(bool(expected(terms, n)) for n in needles)


def copy_rows(source: Path, target: Path) -> None:
    """The graph's rows into a migrated database with plain INSERTs: the schema's triggers index them one by one."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        dst.execute("PRAGMA foreign_keys = ON")
        for table in TABLES:
            # The target's columns: an older schema has fewer (entity_revisions.sources_stored is version 14's).
            columns = ", ".join(str(row[1]) for row in dst.execute(f"PRAGMA table_info({table})"))
            rows = src.execute(f"SELECT {columns} FROM {table}").fetchall()
            if rows:
                dst.executemany(f"INSERT INTO {table} ({columns}) VALUES ({','.join('?' * len(rows[0]))})", rows)


def raw_writes(path: Path) -> None:
    """Inserts, an update and deletes by a raw SQL writer: trigrams of the old texts leave the index."""
    with sqlite3.connect(path) as conn:
        result = conn.execute("SELECT id FROM results ORDER BY id LIMIT 1").fetchone()[0]
        for event_id, title, description in RAW_EVENTS:
            conn.execute(
                "INSERT INTO events (id, result_id, scope_key, event_type, title, description, recorded_at)"
                " VALUES (?, ?, ?, 'decision', ?, ?, ?)",
                (event_id, result, ATLAS_KEY, title, description, T),
            )
        conn.execute("UPDATE events SET title = 'Zebra quota' WHERE id = 'raw-2'")
        conn.execute("DELETE FROM events WHERE id = 'raw-1'")
        conn.execute("DELETE FROM relations")


@pytest.mark.parametrize("writer", ["import", "raw-sql"])
async def test_a_short_needle_lists_exactly_the_trigrams_of_the_index(tmp_path: Path, writer: str) -> None:
    imported = imported_graph(tmp_path, random_graph(11, size=60))
    path = imported
    if writer == "raw-sql":
        path = tmp_path / "raw.db"
        migrate(path)
        copy_rows(imported, path)
    assert assert_lists_match_the_vocabulary(path) > 20

    raw_writes(path)

    with sqlite3.connect(path) as conn:
        stale = {str(r[0]) for r in conn.execute("SELECT term FROM search_trigrams")} - set(vocabulary(conn))
    assert {"we ", "x8\x01", "écl", "деп"} <= stale  # left the index with the deleted and the updated text
    assert assert_lists_match_the_vocabulary(path) > 20


async def test_the_importer_and_a_raw_sql_writer_store_the_same_trigrams(tmp_path: Path) -> None:
    """The bulk load reads the texts unfolded and width-folds the trigrams; the trigger reads the view's folded
    texts. Both give FTS5's own trigrams, none beginning with U+0001."""
    imported = imported_graph(tmp_path, random_graph(12, size=60))
    raw = tmp_path / "raw.db"
    migrate(raw)
    copy_rows(imported, raw)
    query = "SELECT term FROM search_trigrams ORDER BY term"
    with sqlite3.connect(imported) as a, sqlite3.connect(raw) as b:
        trigrams = a.execute(query).fetchall()
        assert trigrams == b.execute(query).fetchall()
        assert all(term[0] != "\x01" and term == term.lower() for (term,) in trigrams)
        assert {"ｒｅｄ", "red"} & {term for (term,) in trigrams} == {"red"}  # Ｒｅｄｉｓ is folded
        assert a.execute("SELECT count(*) FROM search_trigram_scratch_terms").fetchone()[0] == 0  # emptied


async def test_upgrading_a_version_12_database_lists_the_trigrams_it_holds(tmp_path: Path) -> None:
    imported = imported_graph(tmp_path, random_graph(13, size=40))
    old = tmp_path / "v12.db"
    with sqlite3.connect(old) as conn:
        migrate_to(conn, 12)
    copy_rows(imported, old)

    assert migrate(old) == (12, SCHEMA_VERSION)

    assert assert_lists_match_the_vocabulary(old) > 20
    raw_writes(old)
    assert assert_lists_match_the_vocabulary(old) > 20


def _event(event_id: str, title: str, description: str = "") -> dict[str, Any]:
    return {
        "kind": "event",
        "id": event_id,
        "result_id": "r1",
        "event_type": "note",  # searched too: none of the needles below is in it
        "title": title,
        "description": description,
        "recorded_at": T,
    }


async def _ids(client: Any, query: str) -> list[str]:
    found = await all_items(client, SEARCH, {"query": query, "scope": ATLAS})
    return sorted(item["object_ref"]["id"] for item in found)


async def test_one_or_two_characters_match_at_the_end_of_a_field_and_alone(tmp_path: Path) -> None:
    """Each field ends with two U+0001 in the index, so the last one or two characters of a field begin a trigram."""
    path = imported_graph(
        tmp_path,
        [
            {"kind": "project", "id": "atlas", "name": "Atlas"},
            {"kind": "scope", "scope": ATLAS},
            {"kind": "result", "id": "r1", "scope": ATLAS, "review_generated_at": T, "recorded_at": T},
            _event("ev-end", "we use AI", "written in Go"),
            _event("ev-alone", "C", "x8"),
            _event("ev-middle", "some title", "no such letters here"),
        ],
    )
    async with client_for(path) as client:
        assert await _ids(client, "AI") == ["ev-end"]
        assert await _ids(client, "go") == ["ev-end"]
        assert await _ids(client, "c") == ["ev-alone", "ev-middle"]  # `C` alone; `such` in the middle
        assert await _ids(client, "x8") == ["ev-alone"]
        assert await _ids(client, "I") == ["ev-end", "ev-middle"]  # the last character of `AI`; `written`, `title`
        assert await _ids(client, "8") == ["ev-alone"]  # one character, the last of a field
    # Texts written after the import (a raw SQL writer, another import) are listed too, by the running server
    # that listed the needle's trigrams before the write (it remembers them per graph revision).
    async with client_for(path) as client:
        assert await _ids(client, "ZQ") == []
        assert await _ids(client, "qz") == []
        with sqlite3.connect(path) as conn:
            conn.execute(
                "INSERT INTO events (id, result_id, scope_key, event_type, title, description, recorded_at)"
                " VALUES ('ev-raw', 'r1', ?, 'decision', 'Zq', '', ?)",
                (ATLAS_KEY, T),
            )
        assert await _ids(client, "ZQ") == ["ev-raw"]
        import_file(path, write_jsonl(tmp_path / "more.jsonl", [_event("ev-more", "Qz on its own")]))
        assert await _ids(client, "qz") == ["ev-more"]
