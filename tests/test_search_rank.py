"""The search rank, checked against an independent reading of the stored graph (a reference ranker), and
the index that produces it: bounded totals, identifiers, one- and two-character needles, many-term queries,
and the same index whichever way a writer stores the rows."""

from __future__ import annotations

import itertools
import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonl_graph import imported_graph, write_jsonl
from support import all_items, client_for, ok

from server.contracts.common import Grant
from server.reader.fold import Folder
from server.reader.search_query import (
    MAX_EXACT_TERMS,
    SUBSTRINGS_OVER,
    Needle,
    at_least,
    but_not,
    function_term,
    needed,
    needle,
    needs_trigram_list,
    phrase,
    plan,
    query_terms,
    term_matcher,
)
from server.store.demo import demo_path
from server.store.importer import import_file
from server.store.migrate import migrate
from server.store.search_index import grams

pytestmark = pytest.mark.anyio

SEARCH = "story_graph_search"
ATLAS = {"kind": "projects", "projectIds": ["atlas"]}
WORDS = ["cache", "Cache", "session", "会话", "缓存", "方案", "回顾调度", "rollback", "budget", "SQLite", "redis", "ab"]
WORDS += ["Ｒｅｄｉｓ", "Ｓession　ｃａｃｈｅ"]  # full-width and mixed text, an ideographic space (width-insensitive)
TYPE_ORDER = [
    "story",
    "experience",
    "entity",
    "event",
    "relation",
    "entity_change",
    "story_line",
    "summary",
    "source_reference",
]


def _text(rng: random.Random, words: list[str], low: int, high: int) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(low, high)))


def _time(day: int) -> str:
    return f"2026-04-{1 + day % 28:02d}T10:00:00Z"


def random_graph(seed: int, size: int = 40, words: list[str] = WORDS) -> list[dict[str, Any]]:
    """A seeded graph of one scope: entities with revisions, events, relations, summaries, references, leaves; its
    texts of `words`."""
    rng = random.Random(seed)
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "story_line", "id": "sl", "scope": ATLAS, "topic": _text(rng, words, 1, 3), "recorded_at": _time(0)},
    ]
    results = [f"r{i}" for i in range(3)]
    lines += [
        {"kind": "result", "id": r, "scope": ATLAS, "review_generated_at": _time(i), "recorded_at": _time(i)}
        for i, r in enumerate(results)
    ]
    for i in range(size):
        result = rng.choice(results)
        day = rng.randint(0, 27)
        if i % 4 == 0:
            lines.append(
                {
                    "kind": "entity",
                    "id": f"en{i}",
                    "story_line_id": "sl",
                    "canonical_label": _text(rng, words, 1, 3),
                    "description": _text(rng, words, 0, 5),
                    "updated_at": _time(day),
                }
            )
            lines += [
                {
                    "kind": "entity_revision",
                    "entity_id": f"en{i}",
                    "result_id": r,
                    "canonical_label": _text(rng, words, 1, 3),
                    "description": _text(rng, words, 0, 4),
                    "recorded_at": _time(day + 1),
                }
                for r in rng.sample(results, rng.randint(0, 2))
            ]
        elif i % 4 == 1:
            lines.append(
                {
                    "kind": "event",
                    "id": f"ev{i}",
                    "result_id": result,
                    "event_type": rng.choice(["decision", "change"]),
                    "title": _text(rng, words, 1, 4),
                    "description": _text(rng, words, 0, 6),
                    "event_time": {"start": _time(day)} if rng.random() < 0.7 else None,
                    "recorded_at": _time(day),
                }
            )
        elif i % 4 == 2:
            lines.append(
                {
                    "kind": "source_reference",
                    "id": f"ref{i}",
                    "result_id": result,
                    "source_type": "conversation",
                    "original_source_id": f"msg-{i % 5}",
                    "title": _text(rng, words, 0, 2),
                    "locator": {"message_id": f"m{i}"},
                    "fragment": {"text": _text(rng, words, 1, 8)},
                    "recorded_at": _time(day),
                }
            )
        else:
            lines.append(
                {
                    "kind": "summary",
                    "id": f"sum{i}",
                    "result_id": result,
                    "body": _text(rng, words, 2, 8),
                    "open_items": [_text(rng, words, 1, 2)],
                    "recorded_at": _time(day),
                }
            )
    events = [line["id"] for line in lines if line["kind"] == "event"]
    entities = [line["id"] for line in lines if line["kind"] == "entity"]
    for j in range(size // 5):
        lines.append(
            {
                "kind": "relation",
                "id": f"rel{j}",
                "result_id": rng.choice(results),
                "from_ref": {"type": "entity", "id": rng.choice(entities)},
                "to_ref": {"type": "event", "id": rng.choice(events)},
                "relation_type": rng.choice(["supports", "revised"]),
                "reason": _text(rng, words, 0, 5),
                "recorded_at": _time(j),
            }
        )
    for result in results:
        facts = rng.sample([("event", e) for e in events] + [("entity", e) for e in entities], 4)
        lines.append(
            {
                "kind": "leaf",
                "id": f"leaf-{result}",
                "result_id": result,
                "recorded_at": _time(27),
                "facts": [
                    {"object_ref": {"type": t, "id": i}, "description": _text(rng, words, 1, 4)} for t, i in facts
                ],
            }
        )
    return lines


@dataclass
class Item:
    key: tuple[str, str, str]
    own: bool
    heavy: list[str]
    light: list[str]


def reference_items(lines: list[dict[str, Any]]) -> dict[tuple[str, str, str], Item]:
    """What is searchable, read from the interchange lines (not from the index): SPEC §5 and docs/tools.md."""
    items: dict[tuple[str, str, str], Item] = {}

    def add(key: tuple[str, str, str], own: bool, heavy: list[str], light: list[str]) -> None:
        item = items.setdefault(key, Item(key, own, [], []))
        item.own = item.own or own
        item.heavy += [t for t in heavy if t]
        item.light += [t for t in light if t]

    for line in lines:
        kind = line["kind"]
        if kind == "story_line":
            add(("story_line", line["id"], ""), True, [line["topic"]], [])
        elif kind == "entity":
            add(("entity", line["id"], ""), True, [line["canonical_label"]], [line.get("description", "")])
        elif kind == "entity_revision":
            key = ("entity", line["entity_id"], line["result_id"])
            add(key, False, [line["canonical_label"]], [line.get("description", "")])
        elif kind == "event":
            key = ("event", line["id"], line["result_id"])
            add(key, True, [line["title"]], [line.get("description", ""), line["event_type"]])
        elif kind == "relation":
            add(("relation", line["id"], line["result_id"]), True, [], [line.get("reason", ""), line["relation_type"]])
        elif kind == "summary":
            add(("summary", line["id"], line["result_id"]), True, [line["body"]], [_open_items(line)])
        elif kind == "source_reference":
            key = ("source_reference", line["id"], line["result_id"])
            add(key, True, [line.get("title") or ""], [line["fragment"]["text"]])
        elif kind == "leaf":
            for fact in line["facts"]:
                ref = fact["object_ref"]
                add((ref["type"], ref["id"], line["result_id"]), False, [], [fact["description"] or ""])
    return {key: item for key, item in items.items() if item.heavy or item.light}


def _open_items(line: dict[str, Any]) -> str:
    import orjson

    return orjson.dumps(line.get("open_items", [])).decode()


def reference_classes(
    items: dict[tuple[str, str, str], Item], query: str
) -> dict[tuple[str, str, str], tuple[int, int]]:
    """Each matching item's rank under the documented rule, computed from the texts alone: its class (1–4 whole
    query, 5–8 terms: weight-3 or not, own row or not) and, for term matches of at most MAX_EXACT_TERMS terms, how
    many distinct terms it holds (more first), function words not counted unless every term any item can hold is
    one, or none is."""
    folder = Folder()
    whole = folder.fold(query.strip())
    terms = [t for t in query_terms(whole) if t != whole]
    need = needed(len(terms))
    texts = {
        key: ([folder.fold(t) for t in item.heavy], [folder.fold(t) for t in item.light]) for key, item in items.items()
    }
    # A term the index can hold at all: a short non-CJK one only when some text holds it (it is read through the
    # indexed trigrams it begins); the graph has one scope.
    usable = [
        t
        for t in terms
        if not needs_trigram_list(t) or any(t in x for heavy, light in texts.values() for x in heavy + light)
    ]
    content = {t for t in usable if not function_term(t)}
    counted = content if 0 < len(content) < len(usable) else set(usable)
    ranks = {}
    for key, item in items.items():
        heavy, light = texts[key]
        own_offset = 0 if item.own else 1
        if any(whole in t for t in heavy):
            ranks[key] = (1 + own_offset, 0)
        elif any(whole in t for t in light):
            ranks[key] = (3 + own_offset, 0)
        elif terms:
            held = {t for t in terms if any(t in text for text in heavy + light)}
            if len(held) >= need:
                in_heavy = any(t in text for t in terms for text in heavy)
                level = -len(held & counted) if len(terms) <= MAX_EXACT_TERMS else 0
                ranks[key] = ((5 if in_heavy else 7) + own_offset, level)
    return ranks


def _item_ids(db: Path) -> dict[tuple[str, str, str], int]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT object_type, object_id, result_key, item_id FROM search_items").fetchall()
    return {(t, i, r): item_id for t, i, r, item_id in rows}


QUERIES = [
    "cache",
    "会话",
    "缓",
    "ab",
    "session cache",
    "回顾调度 budget",
    "redis SQLite 方案",
    "cache rollback 方案 缓存",
    "SESSION",
    "a",
    "ＲＥＤＩＳ",
    "ｓｅｓｓｉｏｎ cache",
    "ａ",
    "session cache 会话 缓存 方案 redis rollback budget sqlite",
    # Terms no item holds (the query is planned without them, rarest term first): exact, then checked.
    "zyzzyva session qqqq cache 方案",
    "session zyzzyva cache 会话 qqqq xylophone 方案 wobble redis",
    # A Han run's many pairs (checked): more pairs than a short field has places.
    "会话缓存方案 回顾调度 rollback",
]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_every_page_follows_the_documented_rank_exactly(tmp_path: Path, seed: int) -> None:
    lines = random_graph(seed)
    await _pages_follow_the_rank(tmp_path, lines, QUERIES)
    assert len(query_terms(QUERIES[-1].lower())) > MAX_EXACT_TERMS  # the last queries take the checked path
    assert len(query_terms(QUERIES[-2].lower())) > MAX_EXACT_TERMS
    assert len(query_terms(QUERIES[-4].lower())) > MAX_EXACT_TERMS


FUNCTION_WORDS = ["the", "what", "is", "on", "about", "for", "的", "什么", "缓存的方案"]
QUESTIONS = [
    "what is the session cache",
    "the redis 方案 on budget what",
    "缓存的方案 session",  # 缓存, 存的, 的方, 方案, session: 存的 and 的方 hold a particle
    "什么 is the 会话 about for rollback budget",
    "about the cache",
    # Every term a function word: they all count.
    "what is the on",
    "the",
]


@pytest.mark.parametrize("seed", [1, 2])
async def test_function_words_do_not_count_toward_a_tier(tmp_path: Path, seed: int) -> None:
    """`what is the session TTL on the edge boxes` (8 terms, 4 needed): items holding `what`, `is`, `the` and `on`
    besides one word of the question came before the claim holding `session` and `TTL`. Tiers count the terms that
    are no function words (docs/tools.md, "How search ranks", item 4)."""
    lines = random_graph(seed, size=60, words=WORDS + FUNCTION_WORDS)
    await _pages_follow_the_rank(tmp_path, lines, QUESTIONS)


async def _pages_follow_the_rank(tmp_path: Path, lines: list[dict[str, Any]], queries: list[str]) -> None:
    """Every page of every query, read through the cursors, holds the reference ranker's matches in its order."""
    db = imported_graph(tmp_path, lines)
    items = reference_items(lines)
    ids = _item_ids(db)
    async with client_for(db) as client:
        for query in queries:
            found = await all_items(client, SEARCH, {"query": query, "page_size": 7})
            keys = [(i["object_ref"]["type"], i["object_ref"]["id"], i["result_id"] or "") for i in found]
            expected = reference_classes(items, query)
            # The same matches, each once ...
            assert sorted(keys) == sorted(expected), query
            # ... in class order, and within a class by type (as documented), then newest stored first.
            order = [(expected[k], TYPE_ORDER.index(k[0]), -(ids[k] & ((1 << 38) - 1))) for k in keys]
            assert order == sorted(order), query
            kinds = {"whole_query": (1, 4), "terms": (5, 8)}
            for item, key in zip(found, keys, strict=True):
                low, high = kinds[item["match_kind"]]
                rank_class = expected[key][0]
                assert low <= rank_class <= high and item["own_row"] == (rank_class % 2 == 1)
                assert item["field_weight"] == (3 if rank_class in (1, 2, 5, 6) else 1)


def test_a_term_matcher_holds_what_searching_the_text_for_each_term_finds() -> None:
    """Checked plans ask the matcher which terms a candidate's text holds: by its substrings where a length has more
    terms than the text has places, by searching the text for each term otherwise; the same terms either way, and
    never more than its bound says."""
    rng = random.Random(11)
    alphabet = "ab会话缓 "
    by_substrings = 0
    for _ in range(2_000):
        terms = {"".join(rng.choices(alphabet, k=rng.randint(1, 4))) for _ in range(rng.randint(1, 30))}
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 14)))
        matcher = term_matcher(terms)
        held = {term for term in terms if term in text}
        assert matcher.held(text) == held
        assert matcher.most_held(len(text)) >= len(held)
        two = {t for t in terms if t in text[:5] or t in text[5:]}
        assert matcher.most_held(len(text[:5]), len(text[5:])) >= len(two)
        for need in range(1, len(terms) + 1):
            assert matcher.cannot_hold(need, len(text[:5]), len(text[5:])) == (
                matcher.most_held(len(text[:5]), len(text[5:])) < need
            )
        by_substrings += len(terms) > SUBSTRINGS_OVER * len(matcher.by_length) * len(text)
    assert 100 < by_substrings < 1_900  # both ways were taken


def test_a_plan_leaves_out_the_terms_no_item_holds_and_puts_the_rarest_first() -> None:
    """A sentence of common words (`what should we use for the session cache now`, 9 terms, 5 needed) took ~0.9 s at
    1M: "at least 5 of 8" in query order read the common words' long lists in every branch. Planned rarest first,
    without the terms no item holds, it took 1 ms. The levels (rank classes, named by cursors) stay those of every
    usable term. (No term here is a function word: the tiers count every term, as they always did.)"""
    terms = [needle(t) for t in ("zyzzyva", "ledger", "session", "cache", "rollout")]
    frequency = {"zyzzyva": 0, "ledger": 5, "session": 1000, "cache": 1000, "rollout": 40}
    planned = plan(needle("zyzzyva ledger session cache rollout"), terms, frequency)
    live = ['"ledger"', '"rollout"', '"session"', '"cache"']
    assert planned.need == 3 and [k for k, _ in planned.held] == [5, 4, 3]
    assert planned.held == [
        (5, None),  # no item holds 'zyzzyva': none holds all 5
        (4, at_least(4, live)),
        (3, but_not(at_least(3, live), at_least(4, live))),
    ]
    assert planned.accept == at_least(3, live)
    unplanned = plan(needle("zyzzyva ledger session cache rollout"), terms)
    assert unplanned.accept == at_least(3, ['"zyzzyva"', '"ledger"', '"session"', '"cache"', '"rollout"'])
    # Fewer terms held anywhere than needed: nothing can match.
    assert (
        plan(needle("a b c"), [needle(t) for t in ("aaa", "bbb", "ccc")], {"aaa": 0, "bbb": 0, "ccc": 9}).accept is None
    )


@pytest.mark.parametrize(
    ("query", "frequency", "counted"),
    [
        # 4 of 8 needed, 4 function words: tiers 4 (the four others) down to 0 (all four function words).
        ("what is the session ttl on the edge boxes", None, ["session", "ttl", "edge", "boxes"]),
        (
            "what is the session ttl on the edge boxes",
            {"what": 0, "ttl": 0, "boxes": 3},
            ["session", "ttl", "edge", "boxes"],
        ),
        (
            "what should session cache now",
            {"what": 0, "should": 5, "session": 1000, "cache": 1000, "now": 40},
            ["session", "cache"],
        ),
        ("缓存的方案 session", None, ["缓存", "方案", "session"]),
        # All function words, or none: every term counts.
        ("what is the on", None, ["what", "is", "the", "on"]),
        ("budget import batch sync client audit", {"budget": 9, "audit": 0}, None),
    ],
)
def test_the_tiers_are_the_matches_by_how_many_counted_terms_they_hold(
    query: str, frequency: dict[str, int] | None, counted: list[str] | None
) -> None:
    """Each tier's expression, run by FTS5 over one row per set of terms an item may hold, gives exactly the matches
    (at least half of the terms) holding that many counted terms; the tiers cover every match once, most first, and
    are the same whatever the frequencies (cursors name them)."""
    texts = query_terms(query)
    counted = counted or texts
    needles = [Needle(t, phrase(t), "{hi} : " + phrase(t)) for t in texts]  # a word each, for unicode61
    planned = plan(Needle(query, phrase(query), None), needles, frequency)
    need = needed(len(texts))
    lowest = max(0, need - (len(texts) - len(counted)))
    assert [k for k, _ in planned.held] == list(range(len(counted), lowest - 1, -1))
    assert [k for k, _ in plan(Needle(query, phrase(query), None), needles).held] == [k for k, _ in planned.held]
    live = [t for t in texts if (frequency or {}).get(t) != 0]
    with sqlite3.connect(":memory:") as conn:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
        held_sets = [s for size in range(len(live) + 1) for s in itertools.combinations(live, size)]
        conn.executemany(
            "INSERT INTO t (rowid, text) VALUES (?, ?)", [(i, " ".join(s)) for i, s in enumerate(held_sets)]
        )

        def rows(expression: str | None) -> set[int]:
            if expression is None:
                return set()
            return {row[0] for row in conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,))}

        matches = {i for i, s in enumerate(held_sets) if len(s) >= need}
        assert rows(planned.accept) == matches
        for k, expression in planned.held:
            assert rows(expression) == {i for i in matches if len(set(held_sets[i]) & set(counted)) == k}, k


async def test_an_identifier_puts_its_object_first(tmp_path: Path) -> None:
    lines = random_graph(4)
    db = imported_graph(tmp_path, lines)
    async with client_for(db) as client:
        by_id = await ok(client, SEARCH, {"query": "ev1"})
        by_source = await ok(client, SEARCH, {"query": "msg-2", "page_size": 50})
        by_message = await ok(client, SEARCH, {"query": "m6"})
        by_change = await ok(client, SEARCH, {"query": "en0", "object_types": ["event"]})
    assert by_id["items"][0]["object_ref"] == {"type": "event", "id": "ev1"}
    assert by_id["items"][0]["match_kind"] == "identifier"
    sources = {line["id"] for line in lines if line.get("original_source_id") == "msg-2"}
    assert {i["object_ref"]["id"] for i in by_source["items"]} == sources
    assert by_source["page"]["total_count"] == len(sources)
    assert by_message["items"][0]["object_ref"] == {"type": "source_reference", "id": "ref6"}
    assert by_change["items"] == []  # filters apply to identifiers too


async def test_more_matches_than_are_counted_give_an_unknown_total_with_its_lower_bound(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "result", "id": "r", "scope": ATLAS, "review_generated_at": _time(0), "recorded_at": _time(0)},
    ]
    lines += [
        {
            "kind": "event",
            "id": f"ev{i:05d}",
            "result_id": "r",
            "event_type": "change",
            "title": "cache warmup 预热" if i % 2 else "cache warmup",
            "recorded_at": _time(0),
        }
        for i in range(10_050)
    ]
    db = imported_graph(tmp_path, lines)
    async with client_for(db) as client:
        broad = await ok(client, SEARCH, {"query": "warmup"})
        cjk = await ok(client, SEARCH, {"query": "预"})
        deep = await ok(client, SEARCH, {"query": "warmup", "cursor": broad["page"]["next_cursor"]})
    assert broad["page"]["total_count"] == "unknown" and broad["page"]["total_count_at_least"] == 10_001
    assert cjk["page"]["total_count"] == 5_025 and cjk["page"]["total_count_at_least"] is None
    assert deep["items"] and {i["object_ref"]["id"] for i in deep["items"]}.isdisjoint(
        {i["object_ref"]["id"] for i in broad["items"]}
    )


async def test_the_index_is_the_same_whoever_writes_it(tmp_path: Path) -> None:
    """A raw-SQL writer (triggers rebuild each row at once, grams in SQL) and the importer (one rebuild at the end,
    grams in Python) store the same items."""
    lines = random_graph(5)
    imported = tmp_path / "imported.db"
    migrate(imported)
    import_file(imported, write_jsonl(tmp_path / "graph.jsonl", lines))
    raw = tmp_path / "raw.db"
    migrate(raw)
    with sqlite3.connect(imported) as source, sqlite3.connect(raw) as target:
        target.execute("PRAGMA foreign_keys = ON")
        for table in (
            "projects",
            "scopes",
            "scope_projects",
            "results",
            "story_lines",
            "entities",
            "entity_revisions",
            "events",
            "relations",
            "summaries",
            "source_references",
            "leaves",
            "fact_links",
        ):
            rows = source.execute(f"SELECT * FROM {table}").fetchall()
            if rows:
                marks = ",".join("?" * len(rows[0]))
                target.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    query = (
        "SELECT object_type, object_id, result_key, scope_key, (item_id >> 38) & 31, event_time_start, event_time_end,"
        " review_generated_at, recorded_at, hi, lo, hi_fields, lo_fields, hi_grams, lo_grams FROM search_items"
    )
    with sqlite3.connect(imported) as a, sqlite3.connect(raw) as b:
        assert sorted(a.execute(query).fetchall()) == sorted(b.execute(query).fetchall())
        for conn in (a, b):
            conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")
            assert conn.execute("SELECT count(*) FROM search_dirty").fetchone()[0] == 0


def test_python_and_sql_grams_agree_on_every_script() -> None:
    texts = ["会话缓存 cache", "日本語のテキスト", "한국어 텍스트", "𠀀𠀁 mixed 缓", "no cjk at all", "缓", "ＡＢ全角"]
    with sqlite3.connect(":memory:") as conn:
        migrations = sorted((Path(__file__).parent.parent / "migrations").glob("*.sql"))
        for file in migrations:
            conn.executescript(file.read_text(encoding="utf-8"))
        conn.execute("INSERT INTO projects (id, name) VALUES ('p', 'P')")
        conn.execute("INSERT INTO scopes (scope_key, kind) VALUES ('projects:[\"p\"]', 'projects')")
        conn.execute(
            "INSERT INTO story_lines (id, scope_key, topic, recorded_at)"
            " VALUES ('sl', 'projects:[\"p\"]', 'x', '2026-01-01T00:00:00.000Z')"
        )
        for i, text in enumerate(texts):
            conn.execute(
                "INSERT INTO entities (id, story_line_id, scope_key, canonical_label, updated_at)"
                " VALUES (?, 'sl', 'projects:[\"p\"]', ?, '2026-01-01T00:00:00.000Z')",
                (f"e{i}", text),
            )
        stored = dict(conn.execute("SELECT object_id, hi_grams FROM search_items WHERE object_type = 'entity'"))
    assert {f"e{i}": grams(text + "\x01\x01") for i, text in enumerate(texts)} == stored


async def test_a_grant_scoped_search_never_counts_other_scopes(tmp_path: Path) -> None:
    lines = random_graph(6)
    lines += [
        {"kind": "project", "id": "beacon", "name": "Beacon"},
        {"kind": "scope", "scope": {"kind": "projects", "projectIds": ["beacon"]}},
        {
            "kind": "result",
            "id": "rb",
            "scope": {"kind": "projects", "projectIds": ["beacon"]},
            "review_generated_at": _time(0),
            "recorded_at": _time(0),
        },
        *(
            {
                "kind": "event",
                "id": f"b{i}",
                "result_id": "rb",
                "event_type": "change",
                "title": "cache beacon",
                "recorded_at": _time(1),
            }
            for i in range(30)
        ),
    ]
    db = imported_graph(tmp_path, lines)
    expected = reference_classes(reference_items(random_graph(6)), "cache")
    async with client_for(db, Grant(default_project="atlas", projects=["atlas"])) as client:
        found = await all_items(client, SEARCH, {"query": "cache", "page_size": 50})
    assert len(found) == len(expected)


async def test_queries_that_look_like_fts_syntax_or_hold_nul_are_just_text(tmp_path: Path) -> None:
    lines = random_graph(7)
    lines[2]["topic"] = 'say "NEAR(a b)" * OR * {hi}: AND'
    db = imported_graph(tmp_path, lines)
    async with client_for(db) as client:
        answers = {
            query: await ok(client, SEARCH, {"query": query})
            for query in ['"', '"NEAR(a b)"', "* OR *", "{hi}:", "AND", "ca\x00che", "\x02\x02"]
        }
    assert [i["object_ref"]["id"] for i in answers['"NEAR(a b)"']["items"]] == ["sl"]
    assert answers["* OR *"]["items"][0]["object_ref"]["id"] == "sl"
    assert answers["ca\x00che"]["query_terms"] == ["cache"]  # NUL ends an FTS5 string: it is dropped
    assert answers["\x02\x02"]["items"] == [] and answers["\x02\x02"]["page"]["total_count"] == 0


# Times around every edge of the month tokens (migrations/0009): month and year boundaries, the first and last
# months with a token of their own (1970-01, 2269-12) and beyond them, and intervals up to and over 24 months.
INSTANTS = [
    "1965-06-15T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "1970-01-01T00:00:00Z",
    "2024-12-31T23:59:59Z",
    "2025-01-01T00:00:00Z",
    "2025-01-31T23:59:59Z",
    "2025-02-01T00:00:00Z",
    "2025-03-15T12:00:00+08:00",
    "2269-12-31T23:59:59Z",
    "2270-01-01T00:00:00Z",
    "2400-05-05T00:00:00Z",
]
TIME_RANGES = [
    ("2025-01-01T00:00:00Z", "2025-01-31T23:59:59Z"),  # one month, to its last second
    ("2025-01-31T23:59:59Z", "2025-02-01T00:00:00Z"),  # two seconds across a month boundary
    ("2024-12-15T00:00:00Z", "2025-01-15T00:00:00Z"),  # across a year boundary
    ("2026-06-01T00:00:00Z", "2026-06-30T00:00:00Z"),  # inside long intervals only
    ("1969-01-01T00:00:00Z", "1970-01-31T00:00:00Z"),  # before the first month with a token, and into it
    ("2269-12-01T00:00:00Z", "2270-12-31T00:00:00Z"),  # across the last month with a token
    ("1960-01-01T00:00:00Z", "1966-01-01T00:00:00Z"),  # only before
    ("2000-01-01T00:00:00Z", "2030-01-01T00:00:00Z"),  # wider than the tokens are used for
]
IN_RANGE_SQL = {
    "event_time": "event_time_start <= :to AND event_time_end >= :from",
    "review_generated_at": "review_generated_at BETWEEN :from AND :to",
    "recorded_at": "recorded_at BETWEEN :from AND :to",
}


def _interval_end(rng: random.Random, start: str) -> str | None:
    """None (an instant), or an end 0-40 months later (the importer keeps the year under 10000)."""
    if rng.random() < 0.5:
        return None
    months = rng.choice([0, 1, 2, 11, 12, 23, 24, 25, 40])
    if months == 0:
        return start
    year, month = int(start[:4]), int(start[5:7]) - 1 + months
    return f"{year + month // 12:04d}-{month % 12 + 1:02d}-01T00:00:00Z"


async def test_a_time_range_keeps_exactly_the_items_whose_stored_time_is_in_it(tmp_path: Path) -> None:
    """The month tokens only let the index skip: every basis and range gives exactly the matches the documented
    test on the stored times keeps (intersecting intervals, inclusive bounds), with exact totals and unknown-time
    counts, also for times a raw SQL writer stored in another form."""
    rng = random.Random(9)
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
    ]
    lines += [
        {"kind": "result", "id": f"r{i}", "scope": ATLAS, "review_generated_at": t, "recorded_at": INSTANTS[-1 - i]}
        for i, t in enumerate(INSTANTS)
    ]
    for i in range(120):
        start = rng.choice(INSTANTS)
        event_time = None if i % 10 == 0 else {"start": start, "end": _interval_end(rng, start)}
        lines.append(
            {
                "kind": "event",
                "id": f"ev{i}",
                "result_id": f"r{i % len(INSTANTS)}",
                "event_type": "decision",
                "title": f"cache decision {i}",
                "event_time": event_time,
                "recorded_at": rng.choice(INSTANTS),
            }
        )
    db = imported_graph(tmp_path, lines)
    with sqlite3.connect(db) as conn:  # a raw SQL writer's times, not in the importer's form
        conn.execute("UPDATE events SET event_time_start = '2025-1-9', event_time_end = '2025-1-9' WHERE id = 'ev1'")
        conn.execute("UPDATE events SET recorded_at = '2025-01' WHERE id = 'ev2'")
        conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")  # old tokens went out
    async with client_for(db) as client:
        for basis, test in IN_RANGE_SQL.items():
            time_column = test.split()[0]
            with sqlite3.connect(db) as conn:
                unknown = conn.execute(
                    f"SELECT count(*) FROM search_items WHERE object_type = 'event' AND {time_column} IS NULL"
                ).fetchone()[0]
            for low, high in TIME_RANGES:
                args = {"query": "cache", "time_basis": basis, "time_range": {"from": low, "to": high}, "page_size": 50}
                page = await ok(client, SEARCH, args)
                found = sorted(item["object_ref"]["id"] for item in await all_items(client, SEARCH, args))
                with sqlite3.connect(db) as conn:
                    bounds = {"from": page["time_range"]["from"], "to": page["time_range"]["to"]}
                    sql = f"SELECT object_id FROM search_items WHERE object_type = 'event' AND {test}"
                    expected = sorted(row[0] for row in conn.execute(sql, bounds))
                assert found == expected, (basis, low, high)
                assert page["page"]["total_count"] == len(expected)
                assert page["unknown_time_excluded_count"] == unknown
        # The edges were really exercised: something was found in the range inside long intervals only, and
        # before 1970.
        for low, high in (TIME_RANGES[3], TIME_RANGES[6]):
            args = {"query": "cache", "time_range": {"from": low, "to": high}}
            assert (await ok(client, SEARCH, args))["page"]["total_count"] > 0, (low, high)


async def test_a_query_of_many_terms_counts_the_matches_its_time_range_leaves_out(tmp_path: Path) -> None:
    """A query of more than eight terms is matched by checking candidates' text; the matches a time range leaves
    out for their unknown time are counted the same way, exactly, not reported as "unknown" on a small graph."""
    words = ["cache", "decision", "rollback", "budget", "session", "alpha", "beta", "gamma", "delta"]
    query = " ".join(words)
    titles = {
        "ev-dated-5": " ".join(words[:5]),  # five of nine terms: a match
        "ev-dated-whole": query,
        "ev-undated-5": " ".join(words[4:]),  # the last five: a match
        "ev-undated-6": " ".join(words[:6]),
        "ev-undated-whole": f"notes: {query}",  # the whole query: counted once
        "ev-undated-4": " ".join(words[:4]),  # four of nine: no match
    }
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "result", "id": "r1", "scope": ATLAS, "review_generated_at": _time(0), "recorded_at": _time(0)},
    ]
    lines += [
        {
            "kind": "event",
            "id": event_id,
            "result_id": "r1",
            "event_type": "decision",
            "title": title,
            "event_time": {"start": _time(3)} if "-dated-" in event_id else None,
            "recorded_at": _time(3),
        }
        for event_id, title in titles.items()
    ]
    db = imported_graph(tmp_path, lines)
    window = {"from": _time(0), "to": _time(10)}
    async with client_for(db) as client:
        everything = await all_items(client, SEARCH, {"query": query, "page_size": 50})
        page = await ok(client, SEARCH, {"query": query, "time_range": window, "page_size": 50})
    assert len(page["query_terms"]) == 9
    assert {i["object_ref"]["id"] for i in everything} == set(titles) - {"ev-undated-4"}
    assert sorted(i["object_ref"]["id"] for i in page["items"]) == ["ev-dated-5", "ev-dated-whole"]
    assert page["page"]["total_count"] == 2
    assert page["unknown_time_excluded_count"] == 3


DECISION_STORY = {
    "decision A": {("entity", "ent-decision-a"), ("event", "evt-decision-a")},
    "revision evidence": {
        ("event", "evt-revision-a-to-b"),
        ("relation", "rel-b-replaces-a"),
        ("relation", "rel-b-revised-a"),
        ("source_reference", "ref-revision-1"),
        ("source_reference", "ref-revision-2"),
        ("source_reference", "ref-revision-3"),
        ("entity_change", "ent-decision-a#revised-2026-05"),
    },
    "decision B": {("entity", "ent-decision-b"), ("event", "evt-decision-b")},
}


@pytest.mark.parametrize("query", ["session cache decision", "Redis SQLite", "会话缓存"])
async def test_the_decision_story_leads_the_first_page_among_many_newer_objects_mentioning_its_words(
    tmp_path: Path, query: str
) -> None:
    """SPEC §7, decision evolution: a search for the decision's subject puts A, the revision evidence and B on the
    first page at the default page size, in a project where hundreds of newer objects mention the same words (in
    passing: in descriptions, one or two of them at a time, never the whole subject as one phrase)."""
    demo = [orjson.loads(line) for line in demo_path().read_bytes().splitlines() if line.strip()]
    passing = [
        "cache hit rate per session",
        "the decision log was tidied",
        "Redis memory graphs",
        "SQLite file sizes per box",
        "会话 counts and 缓存 sizes",
        "session counts; the cache is warm",
    ]
    noise = [
        {
            "kind": "event",
            "id": f"evt-noise-{i:04d}",
            "result_id": "res-atlas-2026-07",
            "story_line_id": "sl-atlas-cache",
            "event_type": "discussion",
            "title": f"Weekly sync {i}",
            "description": f"{passing[i % len(passing)]}; {passing[(i * 7 + 1) % len(passing)]}",
            "event_time": {"start": f"2026-07-{1 + i % 28:02d}T10:00:00Z"},
            "recorded_at": "2026-07-15T10:03:00Z",  # newer than every object of the decision story
        }
        for i in range(300)
    ]
    db = imported_graph(tmp_path, demo + noise)
    async with client_for(db) as client:
        page = await ok(client, SEARCH, {"query": query})
    on_page = {(i["object_ref"]["type"], i["object_ref"]["id"]) for i in page["items"]}
    assert page["page"]["total_count"] > 100 and len(page["items"]) == 10  # the noise really matches
    missing = [need for need, refs in DECISION_STORY.items() if not refs & on_page]
    assert missing == [], (query, sorted(on_page))


async def test_an_empty_first_page_out_of_work_budget_says_why_and_what_to_try(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pasted paragraph's first page, its check of candidates out of budget before any match, came back empty with
    an unknown total and no note at all. It now has the no-match note, saying the check stopped (not that nothing
    matches), with the terms that match alone and the unchecked ones named up to twelve; the cursor walks on to the
    matches."""
    from server.reader import search

    words = [f"{a}{b}" for a in "bcdfg" for b in ("ola", "ute", "ink", "arp", "ent", "ise")]  # 30 terms, 15 needed
    monkeypatch.setattr(search, "CHECK_WORK", 10 * len(words))  # 10 candidates per call
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "result", "id": "r1", "scope": ATLAS, "review_generated_at": _time(0), "recorded_at": _time(0)},
    ]
    titles = {f"ev-match-{n}": " ".join(words[n : n + 16]) for n in range(2)}  # stored first: checked last
    titles |= {f"ev-ten-{n:02}": " ".join(words[n % 20 : n % 20 + 10]) for n in range(40)}
    lines += [
        {"kind": "event", "id": event_id, "result_id": "r1", "event_type": "note", "title": title}
        | {"recorded_at": _time(1)}
        for event_id, title in titles.items()
    ]
    arguments = {"query": " ".join(words), "scope": ATLAS}
    async with client_for(imported_graph(tmp_path, lines)) as client:
        first = await ok(client, SEARCH, arguments)
        found = await all_items(client, SEARCH, arguments)
    assert first["items"] == [] and first["page"]["limit_reason"] == "work_budget"
    assert first["page"]["total_count"] == "unknown" and first["page"]["next_cursor"] is not None
    note = first["no_match_note"]
    assert note.startswith(
        "No object found yet that holds the whole query or at least 15 of its 30 terms: this call checked as many "
        "candidates against the query's terms as one call may (limit_reason work_budget), and next_cursor checks "
        "the next ones; try fewer or other words. Terms that match alone (of the 8 checked; not checked: "
    )
    assert " and 10 more): " in note  # 22 unchecked, 12 named
    assert sorted(item["object_ref"]["id"] for item in found) == ["ev-match-0", "ev-match-1"]


async def test_a_many_term_query_out_of_work_budget_stops_its_page_and_the_cursor_walks_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query of more than eight terms checks its candidates' text, at most CHECK_WORK // terms per call (lowered
    here to 20 for 9 terms, so that a small graph reaches it): a page that runs out stops early with
    `limit_reason: "work_budget"` and a cursor, and the walk goes on from the last candidate checked, so every match
    is found once, in rank order."""
    from server.reader import search

    monkeypatch.setattr(search, "CHECK_WORK", 20 * 9)
    words = ["amber", "basalt", "cobalt", "dolomite", "emerald", "feldspar", "garnet", "hematite", "ilmenite"]
    matches = [f"ev-match-{n}" for n in range(3)]  # five of nine terms: stored first, so checked last
    lines: list[dict[str, Any]] = [
        {"kind": "project", "id": "atlas", "name": "Atlas"},
        {"kind": "scope", "scope": ATLAS},
        {"kind": "result", "id": "r1", "scope": ATLAS, "review_generated_at": _time(0), "recorded_at": _time(0)},
    ]
    titles = {event_id: " ".join(words[n : n + 5]) for n, event_id in enumerate(matches)}
    titles |= {f"ev-four-{n:03}": " ".join(words[n % 5 : n % 5 + 4]) for n in range(80)}  # four of nine: no match
    lines += [
        {
            "kind": "event",
            "id": event_id,
            "result_id": "r1",
            "event_type": "note",
            "title": title,
            "recorded_at": _time(1),
        }
        for event_id, title in titles.items()
    ]
    db = imported_graph(tmp_path, lines)
    arguments = {"query": " ".join(words), "scope": ATLAS, "page_size": 10}
    async with client_for(db) as client:
        first = await ok(client, SEARCH, arguments)
        found = await all_items(client, SEARCH, arguments)
    assert first["page"]["limit_reason"] == "work_budget" and first["page"]["next_cursor"] is not None
    assert len(first["items"]) < 3
    assert sorted(item["object_ref"]["id"] for item in found) == matches
