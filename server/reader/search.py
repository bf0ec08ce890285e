"""Substring search over one exact scope: index-backed matching, deterministic ranking, keyset pages.

Matching is Unicode case-insensitive, with the index's own folding. An object matches when one of
its fields contains the whole query, or its fields together contain at least half (rounded up, at
least one) of the query's distinct terms. Every whole-query match ranks above every term-only match;
then the score (title-like fields weigh 3, others 1), then type, stable id and result id in
code-point order. Needles of three or more characters use the FTS5 trigram index; shorter ones use
the index's term list (every indexed text is padded so a 1–2 character needle prefixes a trigram).
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Final

import aiosqlite
import orjson

from server.reader.db import Folder
from server.reader.objects import Key, ObjectRow, object_rows

LONG_NEEDLE_DOCS: Final = """
SELECT d.doc_id, d.object_type, d.object_id, d.result_key, d.field, d.weight
  FROM search_fts JOIN search_docs AS d ON d.doc_id = search_fts.rowid
 WHERE search_fts MATCH :phrase AND d.scope_key = :scope_key
   AND d.object_type IN (SELECT value FROM json_each(:types))
"""
SHORT_NEEDLE_DOCS: Final = """
SELECT d.doc_id, d.object_type, d.object_id, d.result_key, d.field, d.weight
  FROM search_docs AS d
 WHERE d.doc_id IN (SELECT doc FROM search_terms WHERE term >= :low AND term < :high)
   AND d.scope_key = :scope_key AND d.object_type IN (SELECT value FROM json_each(:types))
"""
FIELD_TEXTS: Final = """
SELECT field, weight, body FROM search_docs
 WHERE object_type = :object_type AND object_id = :object_id AND result_key = :result_key
 ORDER BY weight DESC, field
"""
EVOLUTION_REFS: Final = """
SELECT 'entity_change' AS type, entity_id || '#' || association_key AS id FROM entity_changes
 WHERE :object_type = 'entity' AND entity_id = :object_id AND scope_key = :scope_key
UNION
SELECT 'relation', id FROM relations
 WHERE from_type = :object_type AND from_id = :object_id AND scope_key = :scope_key
UNION
SELECT 'relation', id FROM relations
 WHERE to_type = :object_type AND to_id = :object_id AND scope_key = :scope_key
ORDER BY 1, 2
"""
PAD: Final = "\x01\x01"
PREVIEW_LIMIT: Final = 400
EVOLUTION_LIMIT: Final = 20

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+")


def query_terms(folded_query: str) -> list[str]:
    """Split on whitespace, punctuation and symbols; Han runs give overlapping pairs (回顾调度 → 回顾, 顾调, 调度).
    Other runs count when at least two characters long or containing a digit."""
    words: list[str] = []
    current: list[str] = []
    for ch in folded_query:
        if unicodedata.category(ch)[0] in "PSZC":
            if current:
                words.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        words.append("".join(current))
    terms: list[str] = []
    for word in words:
        position = 0
        for han in _HAN.finditer(word):
            terms.extend(_plain_terms(word[position : han.start()]))
            run = han.group()
            terms.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
            position = han.end()
        terms.extend(_plain_terms(word[position:]))
    return list(dict.fromkeys(terms))


def _plain_terms(run: str) -> list[str]:
    return [run] if len(run) >= 2 or any(ch.isdigit() for ch in run) else []


@dataclass
class Match:
    """How one object matched: per field, whether it holds the whole query and which terms."""

    key: Key
    fields: dict[str, tuple[int, bool, set[str]]] = field(default_factory=dict)

    def add(self, field_name: str, weight: int, whole: bool, term: str | None) -> None:
        _, was_whole, terms = self.fields.get(field_name, (weight, False, set()))
        if term is not None:
            terms.add(term)
        self.fields[field_name] = (weight, was_whole or whole, terms)

    @property
    def whole(self) -> bool:
        return any(whole for _, whole, _ in self.fields.values())

    @property
    def terms(self) -> set[str]:
        return {t for _, _, terms in self.fields.values() for t in terms}

    def score(self, term_count: int) -> int:
        return sum(
            weight * ((term_count + 1 if whole else 0) + len(terms)) for weight, whole, terms in self.fields.values()
        )


@dataclass(frozen=True)
class Ranked:
    sort_key: tuple[int, int, str, str, str]
    """(whole ? 0 : 1, -score, type, id, result id): ascending order is the result order."""
    match: Match
    row: ObjectRow
    score: int


@dataclass(frozen=True)
class SearchPage:
    needle: str
    """The folded whole query (folding keeps code-point positions)."""
    terms: list[str]
    ranked: list[Ranked]
    """The page, in order."""
    total: int
    unknown_time_excluded: int
    has_more: bool


async def search(
    conn: aiosqlite.Connection,
    folder: Folder,
    *,
    query: str,
    scope_key: str,
    object_types: list[str],
    time_range: tuple[str, str] | None,
    time_basis: str,
    page_size: int,
    after: tuple[int, int, str, str, str] | None,
) -> SearchPage:
    whole = folder.fold(query).replace("\x01", "")
    terms = [t.replace("\x01", "") for t in query_terms(whole)]
    terms = [t for t in terms if t]
    types = orjson.dumps(object_types).decode()
    matches: dict[Key, Match] = {}
    for needle, term in [(whole, None), *((t, t) for t in terms)]:
        for _doc, object_type, object_id, result_key, field_name, weight in await _docs(conn, needle, scope_key, types):
            key = (object_type, object_id, result_key)
            matches.setdefault(key, Match(key)).add(field_name, weight, term is None, term)

    needed = max(1, math.ceil(len(terms) / 2)) if terms else None
    accepted = [m for m in matches.values() if m.whole or (needed is not None and len(m.terms) >= needed)]
    rows = await object_rows(conn, scope_key, (m.key for m in accepted))
    excluded = 0
    ranked: list[Ranked] = []
    for m in accepted:
        row = rows.get(m.key)
        if row is None:  # an index row whose object is gone cannot be reported
            continue
        if time_range is not None:
            span = row.time_on(time_basis)
            if span is None:
                excluded += 1
                continue
            if span[0] > time_range[1] or span[1] < time_range[0]:
                continue
        score = m.score(len(terms))
        sort_key = (0 if m.whole else 1, -score, m.key[0], m.key[1], m.key[2])
        ranked.append(Ranked(sort_key, m, row, score))
    ranked.sort(key=lambda r: r.sort_key)
    remaining = [r for r in ranked if after is None or r.sort_key > after]
    return SearchPage(
        needle=whole,
        terms=terms,
        ranked=remaining[:page_size],
        total=len(ranked),
        unknown_time_excluded=excluded,
        has_more=len(remaining) > page_size,
    )


async def _docs(conn: aiosqlite.Connection, needle: str, scope_key: str, types: str) -> list[aiosqlite.Row]:
    if len(needle) >= 3:
        phrase = '"' + needle.replace('"', '""') + '"'
        params: dict[str, str] = {"phrase": phrase, "scope_key": scope_key, "types": types}
        sql = LONG_NEEDLE_DOCS
    else:
        high = needle[:-1] + chr(ord(needle[-1]) + 1)
        params = {"low": needle, "high": high, "scope_key": scope_key, "types": types}
        sql = SHORT_NEEDLE_DOCS
    async with conn.execute(sql, params) as cur:
        return list(await cur.fetchall())


@dataclass(frozen=True)
class FieldText:
    field: str
    weight: int
    text: str


async def field_texts(conn: aiosqlite.Connection, key: Key) -> list[FieldText]:
    params = {"object_type": key[0], "object_id": key[1], "result_key": key[2]}
    async with conn.execute(FIELD_TEXTS, params) as cur:
        return [FieldText(f, w, body.removesuffix(PAD)) for f, w, body in await cur.fetchall()]


async def evolution_refs(conn: aiosqlite.Connection, scope_key: str, object_type: str, object_id: str) -> list[Key]:
    params = {"object_type": object_type, "object_id": object_id, "scope_key": scope_key}
    async with conn.execute(EVOLUTION_REFS, params) as cur:
        return [(t, i, "") for t, i in await cur.fetchall()]
