"""The cases bench_tools.py times: query classes of story_graph_search, get_context and read_source pages.

Every case names the floor query it is compared with: the same text for searches (the floor ignores scope, time
range and paging: it is always one phrase query for the first page), and a selective word for get_context and
read_source (the floor has only a search tool: protocol plus one indexed query is the reference).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from bench_common import CONTEXT, READ_SOURCE, SEARCH, SELECTIVE_QUERIES, SMALL_SCOPE
from graph_plants import (
    BIG_REFERENCE,
    HUB_ENTITY,
    IDENT_EVENT,
    IDENT_MESSAGE,
    IDENT_REFERENCE,
    IDENT_SOURCE,
    SMALL_HUB_ENTITY,
    STORY_LINE,
)
from graph_text import CHINESE, ENGLISH

BIG_SCOPE: Final = {"kind": "projects", "projectIds": ["big"]}
MONTH: Final = {"from": "2025-03-01T00:00:00Z", "to": "2025-03-31T23:59:59Z"}
DEEP_PAGE: Final = 20
FLOOR_REFERENCE: Final = "xylophone"
"""The floor query that get_context and read_source cases are compared with."""

Position = Literal["first", "deep", "last"]


@dataclass(frozen=True)
class Case:
    cls: str
    """The query class (a row of the summary table)."""
    label: str
    tool: str
    arguments: dict[str, Any]
    floor_query: str
    position: Position = "first"
    """first: page 1; deep: page DEEP_PAGE of the search; last: the last page (reached by cursors, untimed)."""
    walk_page_size: int = 50
    """Page size for the untimed walk to a deep or last page (the timed page keeps the case's own)."""
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class QueryClass:
    key: str
    title: str


CLASSES: Final = (
    QueryClass("selective", "selective (rare words)"),
    QueryClass("broad", "broad single word"),
    QueryClass("cjk_short", "1–2-character CJK"),
    QueryClass("latin_short", "1–2-character non-CJK"),
    QueryClass("multi", "multi-word, common terms"),
    QueryClass("identifier", "identifiers (object/source/message id)"),
    QueryClass("zero", "zero hits"),
    QueryClass("time", "time-filtered (one month)"),
    QueryClass("deep", f"deep page ({DEEP_PAGE})"),
    QueryClass("scope_small", "small scope (1 %)"),
    QueryClass("scope_big", "big scope (90 %), same words"),
    QueryClass("sentence", "questions typed as sentences"),
    QueryClass("paragraph", "pasted paragraphs (500–3,900 characters)"),
    QueryClass("common_terms", "five to eight common words"),
    QueryClass("context_small", "get_context: 8 relations"),
    QueryClass("context_hub_first", "get_context: big neighbourhood, first page"),
    QueryClass("context_hub_last", "get_context: big neighbourhood, last page"),
    QueryClass("story_first", "get_context: big story line, first page"),
    QueryClass("story_last", "get_context: big story line, last page"),
    QueryClass("story_timeline_first", "get_context timeline: big story line, first page"),
    QueryClass("story_timeline_last", "get_context timeline: big story line, last page"),
    QueryClass("source_first", "read_source: big source, first page"),
    QueryClass("source_last", "read_source: big source, last page"),
)


def _search(cls: str, query: str, *, position: Position = "first", label: str = "", **extra: Any) -> Case:
    label = (label or f"`{query}`") + (f" page {DEEP_PAGE}" if position == "deep" else "")
    if "scope" in extra:
        label += " in " + "+".join(extra["scope"]["projectIds"])
    if "time_range" in extra:
        label += " + March 2025"
    return Case(cls, label, SEARCH, {"query": query, **extra}, query, position)


def _context(cls: str, label: str, object_type: str, object_id: str, position: Position, mode: str) -> Case:
    arguments: dict[str, Any] = {"object_ref": {"type": object_type, "id": object_id}}
    if mode != "current":
        arguments["mode"] = mode
    return Case(cls, label, CONTEXT, arguments, FLOOR_REFERENCE, position)


def _source(cls: str, position: Position) -> Case:
    arguments = {"source_reference_id": BIG_REFERENCE, "content_kind": "current"}
    return Case(cls, f"`{BIG_REFERENCE}` current text", READ_SOURCE, arguments, FLOOR_REFERENCE, position, 8000)


COMMON: Final = ("cache", "方案", "decision")
SENTENCES: Final = (
    "what should we use for the session cache now",
    "could you tell me what the team said about running things on the edge boxes",
    "我们当初为什么选了这个消息队列",
)
"""What agents type: many terms, half of them needed, most of them common words or two words' edges; each finds
little or nothing, so its answer carries a note made of further bounded lookups (docs/tools.md)."""
COMMON_TERMS: Final = (
    "budget import batch sync client",
    "budget import batch sync client audit",
    "budget import batch sync client audit timeout review",
)
"""Five to eight words that each of tens of thousands of items hold, few of them all: ranked by how many of the
terms an item holds, the page must first find that the higher counts are rare (docs/performance.md)."""
OUTSIDE_MIXED: Final = frozenset({"sentence", "paragraph", "common_terms"})
"""Classes added after the issues' targets were set on the mixed workload, kept out of it."""


def _paragraph(words: tuple[str, ...], separator: str, length: int, seed: int) -> str:
    rng = random.Random(seed)
    text = ""
    while len(text) < length:
        text += separator + rng.choice(words) if text else rng.choice(words)
    return text[:length]


# Text pasted as a query (the longest the tool takes is 4,000 characters): the vocabulary's words with the function
# words of prose, so hundreds of distinct terms of which half must be held; no item holds that many.
_ZH_WORDS: Final = (*CHINESE, "我们", "什么", "所以", "然后", "需要", "这个", "问题")
_EN_WORDS: Final = (*ENGLISH, "the", "we", "what", "so", "then", "need", "this", "issue", "of", "and")
PARAGRAPHS: Final = (
    _paragraph(_ZH_WORDS, "", 500, 1),
    _paragraph(_ZH_WORDS, "", 3_900, 2),
    _paragraph(_EN_WORDS, " ", 3_900, 3),
)


def all_cases() -> list[Case]:
    cases = [_search("selective", q) for q in SELECTIVE_QUERIES]
    cases += [_search("broad", q) for q in ("cache", "decision", "session")]
    cases += [_search("cjk_short", q) for q in ("方案", "缓", "决定")]
    cases += [_search("latin_short", q) for q in ("C", "De", "AI", "x8")]
    cases += [_search("multi", q) for q in ("cache rollback 回顾调度 budget", "export audit", "2019-01-0", "INC-4821")]
    cases += [_search("identifier", q) for q in (IDENT_EVENT, IDENT_SOURCE, IDENT_MESSAGE, IDENT_REFERENCE)]
    cases += [_search("zero", q) for q in ("zyzzogeton", "无此词语")]
    cases += [_search("time", q, time_range=MONTH) for q in ("cache", "方案", "Kafka")]
    cases += [_search("deep", q, position="deep") for q in COMMON]
    cases += [_search("scope_small", q, scope=SMALL_SCOPE) for q in COMMON]
    cases += [_search("scope_big", q, scope=BIG_SCOPE) for q in COMMON]
    cases += [_search("sentence", q) for q in SENTENCES]
    cases += [_search("paragraph", q, label=f"{len(q):,} characters: `{q[:12]}…`") for q in PARAGRAPHS]
    cases += [_search("common_terms", q) for q in COMMON_TERMS]
    cases += [
        _context("context_small", f"`{SMALL_HUB_ENTITY}`", "entity", SMALL_HUB_ENTITY, "first", "current"),
        _context("context_hub_first", f"`{HUB_ENTITY}`", "entity", HUB_ENTITY, "first", "current"),
        _context("context_hub_last", f"`{HUB_ENTITY}`", "entity", HUB_ENTITY, "last", "current"),
        _context("story_first", f"`{STORY_LINE}`", "story_line", STORY_LINE, "first", "current"),
        _context("story_last", f"`{STORY_LINE}`", "story_line", STORY_LINE, "last", "current"),
        _context("story_timeline_first", f"`{STORY_LINE}`", "story_line", STORY_LINE, "first", "timeline"),
        _context("story_timeline_last", f"`{STORY_LINE}`", "story_line", STORY_LINE, "last", "timeline"),
        _source("source_first", "first"),
        _source("source_last", "last"),
    ]
    return cases
