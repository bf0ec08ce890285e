"""Search is width-insensitive: full-width ASCII (Ｒｅｄｉｓ, ２０２６, ＩＮＣ－４８２１) and the ideographic space
match their half-width forms both ways, in text stored by the importer, by a raw SQL writer, and by an older schema
upgraded in place; positions stay exact code points of the stored text. Real SQLite files, a real MCP session."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from jsonl_graph import imported_graph, write_jsonl
from support import all_items, client_for, migrate_to, ok

from server.reader.fold import WIDE, Folder, narrow
from server.store.importer import import_file
from server.store.migrate import SCHEMA_VERSION, migrate

pytestmark = pytest.mark.anyio

SEARCH = "story_graph_search"
ATLAS = {"kind": "projects", "projectIds": ["atlas"]}
T = "2026-05-01T08:00:00Z"
FULL_WIDTH = "".join(map(chr, range(0xFF01, 0xFF5F))) + "\u3000"
HALF_WIDTH = "".join(map(chr, range(0x21, 0x7F))) + " "
# FTS5 checks its index against the content (the view, with its fold) only when asked with rank 1; it raises
# "database disk image is malformed" on any difference.
INDEX_MATCHES_CONTENT = "INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)"


def _event(event_id: str, title: str, description: str = "") -> dict[str, Any]:
    return {
        "kind": "event",
        "id": event_id,
        "result_id": "r1",
        "event_type": "decision",
        "title": title,
        "description": description,
        "recorded_at": T,
    }


def _graph() -> list[dict[str, Any]]:
    return [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "result", "id": "r1", "scope": ATLAS, "review_generated_at": T, "recorded_at": T},
        _event("ev-wide", "缓存改用Ｒｅｄｉｓ集群，２０２６年上线"),
        _event("ev-narrow", "Redis cluster for the cache, live in 2026"),
        _event("ev-mixed", "Ｒedis 故障", "复盘：ＩＮＣ－４８２１　会话缓存"),
        _event("INC-4821", "Incident review", "the session cache failed over"),
        _event("ev-other", "Kafka lag", "no match here"),
    ]


@pytest.fixture
def graph_db(tmp_path: Path) -> Path:
    return imported_graph(tmp_path, _graph())


async def _ids(client: Any, query: str, **arguments: Any) -> list[str]:
    found = await all_items(client, SEARCH, {"query": query, "scope": ATLAS, **arguments})
    return [item["object_ref"]["id"] for item in found]


def test_the_fold_table_is_full_width_ascii_and_the_ideographic_space() -> None:
    assert FULL_WIDTH.translate(WIDE) == HALF_WIDTH
    edges = FULL_WIDTH + "\uff00\uff5f\u3001 Ｒedis ，，："
    assert narrow(edges) == edges.translate(WIDE) == HALF_WIDTH + "\uff00\uff5f\u3001 Redis ,,:"
    assert Folder().fold("ＲｅＤｉｓ　ＩＮＣ－４８２１") == "redis inc-4821"


def test_ascii_text_folds_as_fts5_folds_each_of_its_characters() -> None:
    """An ASCII text is folded by str.lower(); the characters one by one through SQLite's own fold agree."""
    every = "".join(map(chr, range(1, 128)))
    by_sqlite = "".join(Folder().fold(ch + "é")[0] for ch in every)  # not ASCII: asked of SQLite
    assert Folder().fold(every) == every.lower() == by_sqlite


async def test_the_index_folds_every_character_as_the_server_does(graph_db: Path) -> None:
    """The view's replace() chains (plain SQL, migrations/0011) against the server's table, on all 95 characters
    and their neighbours just outside the folded ranges (U+FF00, U+FF5F, U+3001 stay as they are)."""
    text = FULL_WIDTH + "\uff00\uff5f\u3001 Ｒedis"
    with sqlite3.connect(graph_db) as conn:
        conn.execute(
            "INSERT INTO events (id, result_id, scope_key, event_type, title, description, recorded_at)"
            " VALUES ('ev-all', 'r1', 'projects:[\"atlas\"]', 'decision', ?, ?, ?)",
            (text, text, T),
        )
        hi, lo = conn.execute(
            "SELECT v.hi, v.lo FROM search_index_rows AS v JOIN search_items AS i USING (item_id)"
            " WHERE i.object_id = 'ev-all'"
        ).fetchone()
        conn.execute(INDEX_MATCHES_CONTENT)
    assert text.translate(WIDE) == HALF_WIDTH + "\uff00\uff5f\u3001 Redis"
    assert hi.split("\x01\x01")[0] == text.translate(WIDE)
    assert text.translate(WIDE) in lo
    async with client_for(graph_db) as client:
        page = await ok(client, SEARCH, {"query": HALF_WIDTH, "scope": ATLAS})
    assert [(i["object_ref"]["id"], i["match_position"]["start"]) for i in page["items"]] == [("ev-all", 0)]


async def test_half_and_full_width_queries_find_the_same_objects_both_ways(graph_db: Path) -> None:
    async with client_for(graph_db) as client:
        redis = {q: sorted(await _ids(client, q)) for q in ("Redis", "Ｒｅｄｉｓ", "ｒＥＤＩＳ", "Ｒedis", "REDIS")}
        year = {q: sorted(await _ids(client, q)) for q in ("2026", "２０２６")}
        short = {q: sorted(await _ids(client, q)) for q in ("Re", "Ｒｅ", "ｒ")}
    # Full-width, half-width and mixed stored text are all found by every form of the word.
    assert set(map(tuple, redis.values())) == {("ev-mixed", "ev-narrow", "ev-wide")}
    assert set(map(tuple, year.values())) == {("ev-narrow", "ev-wide")}
    # One- and two-character needles go through the indexed trigrams they begin: folded too.
    assert short["Re"] == short["Ｒｅ"] and {"ev-wide", "ev-mixed", "ev-narrow"} <= set(short["Re"])
    assert {"ev-wide", "ev-mixed", "ev-narrow"} <= set(short["ｒ"])


async def test_whole_query_positions_are_code_points_of_the_stored_text(graph_db: Path) -> None:
    folder = Folder()
    async with client_for(graph_db) as client:
        page = await ok(client, SEARCH, {"query": "ＩＮＣ-4821 会话", "scope": ATLAS})
        wide = await ok(client, SEARCH, {"query": "redis集群,2026", "scope": ATLAS})
    mixed = next(i for i in page["items"] if i["object_ref"]["id"] == "ev-mixed")
    assert mixed["match_kind"] == "whole_query"
    assert mixed["match_position"] == {"field": "description", "start": 3, "end": 14, "unit": "unicode_code_point"}
    stored = "复盘：ＩＮＣ－４８２１　会话缓存"
    assert stored[3:14] == "ＩＮＣ－４８２１　会话"  # the ideographic space matched the query's space
    assert folder.fold(stored[3:14]) == folder.fold("ＩＮＣ-4821 会话")
    assert "复盘：ＩＮＣ－４８２１　会话缓存" in mixed["preview"]  # the stored text, not its fold
    [hit] = [i for i in wide["items"] if i["match_kind"] == "whole_query"]
    assert hit["object_ref"]["id"] == "ev-wide"
    assert hit["match_position"] == {"field": "title", "start": 4, "end": 16, "unit": "unicode_code_point"}
    assert "缓存改用Ｒｅｄｉｓ集群，２０２６年上线" in hit["preview"]
    assert set(hit["matched_terms"]) == {"redis", "集群", "2026"}


async def test_a_full_width_identifier_names_its_object(graph_db: Path) -> None:
    async with client_for(graph_db) as client:
        typed = await ok(client, SEARCH, {"query": "ＩＮＣ－４８２１", "scope": ATLAS})
        narrow = await ok(client, SEARCH, {"query": "INC-4821", "scope": ATLAS})
    for page in (typed, narrow):
        first = page["items"][0]
        assert (first["object_ref"]["id"], first["match_kind"]) == ("INC-4821", "identifier")
        # The text that holds the id in full-width is found as the whole query, after the identifier.
        assert [i["object_ref"]["id"] for i in page["items"][1:]] == ["ev-mixed"]
        assert page["page"]["total_count"] == 2


async def test_text_a_raw_sql_writer_stores_is_found_width_insensitively(graph_db: Path) -> None:
    with sqlite3.connect(graph_db) as conn:  # the plain sqlite3 module: none of our functions
        conn.execute(
            "INSERT INTO events (id, result_id, scope_key, event_type, title, description, recorded_at)"
            " VALUES ('ev-raw', 'r1', 'projects:[\"atlas\"]', 'incident', 'Ｋａｆｋａ　ｌａｇ 告警', '', ?)",
            (T,),
        )
        conn.execute("UPDATE events SET title = 'ＮＡＴＳ queue' WHERE id = 'ev-other'")
        conn.execute(INDEX_MATCHES_CONTENT)
    async with client_for(graph_db) as client:
        assert await _ids(client, "kafka lag") == ["ev-raw"]
        assert await _ids(client, "ＫＡＦＫＡ　ＬＡＧ") == ["ev-raw"]
        assert await _ids(client, "nats") == ["ev-other"]
        assert await _ids(client, "Kafka lag", object_types=["entity"]) == []
    with sqlite3.connect(graph_db) as conn:  # the old text's entries left the index with it
        conn.execute("DELETE FROM events WHERE id = 'ev-raw'")
        conn.execute(INDEX_MATCHES_CONTENT)
    async with client_for(graph_db) as client:
        assert await _ids(client, "kafka") == []


@pytest.mark.parametrize("narrow_title", ["Redis failover", "Redis\u3000failover"], ids=["some-wide", "most-wide"])
async def test_upgrading_a_version_10_database_folds_the_rows_it_already_holds(
    tmp_path: Path, narrow_title: str
) -> None:
    """Items with wide text are re-indexed (one of two), or the index is rebuilt (when most items have some)."""
    path = tmp_path / "v10.db"
    with sqlite3.connect(path) as conn:
        migrate_to(conn, 10)
        conn.executescript(
            """
            INSERT INTO projects (id, name) VALUES ('atlas', 'Atlas');
            INSERT INTO scopes (scope_key, kind) VALUES ('projects:["atlas"]', 'projects');
            INSERT INTO scope_projects (scope_key, project_id) VALUES ('projects:["atlas"]', 'atlas');
            INSERT INTO results (id, scope_key, review_generated_at, recorded_at)
              VALUES ('r1', 'projects:["atlas"]', '2026-05-01T00:00:00.000Z', '2026-05-01T00:00:00.000Z');
            """
        )
        conn.execute(
            "INSERT INTO events (id, result_id, scope_key, event_type, title, description, event_time_start,"
            " recorded_at)"
            " VALUES ('ev-wide', 'r1', 'projects:[\"atlas\"]', 'incident', 'Ｒｅｄｉｓ 切换', '２０２６　会话',"
            "         '2026-05-02T00:00:00.000Z', '2026-05-01T00:00:00.000Z'),"
            "        ('ev-narrow', 'r1', 'projects:[\"atlas\"]', 'incident', ?, '',"
            "         '2026-05-03T00:00:00.000Z', '2026-05-01T00:00:00.000Z')",
            (narrow_title,),
        )
        unfolded = conn.execute("SELECT count(*) FROM search_fts WHERE search_fts MATCH '\"redis\"'").fetchone()[0]
    assert unfolded == 1  # version 10 indexed the full-width title as it was

    assert migrate(path) == (10, SCHEMA_VERSION)

    with sqlite3.connect(path) as conn:
        conn.execute(INDEX_MATCHES_CONTENT)
        assert conn.execute("SELECT count(*) FROM search_fts WHERE search_fts MATCH '\"redis\"'").fetchone()[0] == 2
    may = {"from": "2026-05-01T00:00:00Z", "to": "2026-05-31T23:59:59Z"}
    async with client_for(path) as client:
        assert sorted(await _ids(client, "ＲＥＤＩＳ")) == ["ev-narrow", "ev-wide"]
        assert sorted(await _ids(client, "redis", time_range=may)) == ["ev-narrow", "ev-wide"]
        assert await _ids(client, "2026 会话") == ["ev-wide"]
    with sqlite3.connect(path) as conn:  # later writes keep the upgraded index consistent
        conn.execute("UPDATE events SET title = 'Ｍｅｍｃａｃｈｅｄ 切换' WHERE id = 'ev-wide'")
        conn.execute(INDEX_MATCHES_CONTENT)
    async with client_for(path) as client:
        assert await _ids(client, "redis") == ["ev-narrow"]
        assert await _ids(client, "memcached") == ["ev-wide"]


def _bulk_lines() -> list[dict[str, Any]]:
    """Wide text in the title only (the item's hi), in the description only (lo), in both, in neither, and a
    character the byte search flags but the fold leaves (U+FF00, U+FF5F)."""
    return [
        _event("bulk-hi", "Ｖａｕｌｔ　轮换，" + FULL_WIDTH, "plain description"),
        _event("bulk-lo", "plain title", "复盘：Ｖａｕｌｔ－９" + FULL_WIDTH),
        _event("bulk-both", "Ｖａｕｌｔ（主）", "Ｖａｕｌｔ：备"),
        _event("bulk-none", "vault narrow", "nothing wide"),
        _event("bulk-edge", "\uff00vault\uff5f", "\u3001"),
    ]


@pytest.mark.parametrize("from_version", [None, 11], ids=["new", "upgraded-from-11"])
async def test_an_import_indexes_the_texts_it_folds_itself_exactly_as_the_view_folds(
    tmp_path: Path, from_version: int | None
) -> None:
    """A bulk import writes the index's entries itself, its texts folded in Python (migrations/0012) instead of by
    the view's replace() chains: the index must hold exactly what the view gives (FTS5 compares them, rank 1), for a
    new database and one upgraded in place from version 11, and a raw SQL writer afterwards still goes through the
    view."""
    path = imported_graph(tmp_path, _graph())
    if from_version is not None:  # the same rows written into a version 11 database, then upgraded in place
        old = tmp_path / "v11.db"
        with sqlite3.connect(old) as conn:
            migrate_to(conn, from_version)
            conn.execute("ATTACH DATABASE ? AS new", (str(path),))
            for table in ("projects", "scopes", "scope_projects", "results", "events"):
                # The columns version 11 has (later migrations add some, e.g. scopes.memory_revision in 0015).
                columns = ", ".join(row[1] for row in conn.execute(f"PRAGMA main.table_info({table})"))
                conn.execute(f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM new.{table}")
        assert migrate(old) == (from_version, SCHEMA_VERSION)
        path = old
    import_file(
        path,
        write_jsonl(tmp_path / "bulk.jsonl", [line for line in _graph() if line["kind"] != "event"] + _bulk_lines()),
    )
    with sqlite3.connect(path) as conn:
        conn.execute(INDEX_MATCHES_CONTENT)
        assert conn.execute("SELECT count(*), (SELECT mode FROM search_state) FROM search_dirty").fetchone() == (
            0,
            "immediate",
        )
    async with client_for(path) as client:
        every = ["bulk-both", "bulk-edge", "bulk-hi", "bulk-lo", "bulk-none"]
        assert sorted(await _ids(client, "vault")) == sorted(await _ids(client, "ＶＡＵＬＴ")) == every
        for query, first in (("vault-9", "bulk-lo"), ("ｖａｕｌｔ(主)", "bulk-both"), ("VAULT 轮换,", "bulk-hi")):
            top = (await ok(client, SEARCH, {"query": query, "scope": ATLAS}))["items"][0]
            assert (top["object_ref"]["id"], top["match_kind"]) == (first, "whole_query"), query
        assert await _ids(client, HALF_WIDTH) == ["bulk-hi", "bulk-lo"]
    with sqlite3.connect(path) as conn:  # a raw writer after the bulk load: the view folds its text
        conn.execute("UPDATE events SET title = 'Ｃｏｎｓｕｌ 切换' WHERE id = 'bulk-hi'")
        conn.execute(INDEX_MATCHES_CONTENT)
    async with client_for(path) as client:
        assert await _ids(client, "consul") == ["bulk-hi"]
        assert sorted(await _ids(client, "vault")) == ["bulk-both", "bulk-edge", "bulk-lo", "bulk-none"]
