"""Substring search over one exact scope: index-backed matching, ranking and keyset pages in one SQL statement.

Matching is Unicode case-insensitive, with the index's own folding. An object matches when one of
its fields contains the whole query, or its fields together contain at least half (rounded up, at
least one) of the query's distinct terms. Every whole-query match ranks above every term-only match;
then the score (title-like fields weigh 3, others 1), then type, stable id and result id in
code-point order. Needles of three or more characters are FTS5 trigram phrases; a shorter needle
becomes the OR of the indexed trigrams it prefixes (every indexed text is padded with two U+0001, so
each occurrence of a one- or two-character needle prefixes a trigram).

Ranking, filtering, counting and paging all run inside SQLite; Python only sees the page.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Final

import aiosqlite

from server.reader.db import Folder, json_ids
from server.reader.objects import Key

TRIGRAMS_STARTING: Final = "SELECT term FROM search_terms WHERE term >= :low AND term < :high"
NEEDLE_HITS: Final = "SELECT {n} AS n, rowid AS doc_id FROM search_fts WHERE search_fts MATCH :m{n}"
# {hits} is a UNION ALL of NEEDLE_HITS, one per needle: n = 0 for the whole query, k for term k.
RANKED_PAGE: Final = """
WITH hits (n, doc_id) AS ({hits}),
docs AS (
  SELECT d.object_type AS t, d.object_id AS i, d.result_key AS r, d.field, d.weight, h.n,
         d.event_time_start, d.event_time_end, d.review_generated_at, d.recorded_at
    FROM hits AS h CROSS JOIN search_docs AS d ON d.doc_id = h.doc_id
   WHERE d.scope_key = :scope_key AND d.object_type IN (SELECT value FROM json_each(:types))
),
objects AS (
  SELECT t, i, r,
         max(n = 0) AS whole,
         count(DISTINCT nullif(n, 0)) + max(n = 0) * :whole_is_term AS terms,
         sum(weight * CASE n WHEN 0 THEN :term_count + 1 + :whole_is_term ELSE 1 END) AS score,
         min(event_time_start) AS event_start,
         max(coalesce(event_time_end, event_time_start)) AS event_end,
         max(review_generated_at) AS reviewed,
         coalesce(max(CASE WHEN field NOT LIKE 'leaf:%' THEN recorded_at END), max(recorded_at)) AS recorded
    FROM docs GROUP BY t, i, r
),
accepted AS (
  SELECT t, i, r, whole, score,
         CASE :basis WHEN 'event_time' THEN event_start WHEN 'review_generated_at' THEN reviewed ELSE recorded END
           AS span_start,
         CASE :basis WHEN 'event_time' THEN event_end WHEN 'review_generated_at' THEN reviewed ELSE recorded END
           AS span_end
    FROM objects WHERE whole OR terms >= :needed
),
ranked AS (
  SELECT 1 - whole AS k0, -score AS k1, t, i, r FROM accepted
   WHERE :range_from IS NULL OR (span_start <= :range_to AND span_end >= :range_from)
)
SELECT -1, 0, '', '', '', (SELECT count(*) FROM ranked),
       (SELECT count(*) FROM accepted WHERE :range_from IS NOT NULL AND span_start IS NULL)
UNION ALL
SELECT * FROM (
  SELECT k0, k1, t, i, r, NULL, NULL FROM ranked
   WHERE (k0, k1, t, i, r) > (:after_k0, :after_k1, :after_t, :after_i, :after_r)
   ORDER BY k0, k1, t, i, r LIMIT :limit
)
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
# Sorts before every real key: (whole ? 0 : 1, -score, type, id, result id).
FIRST: Final = (-1, 0, "", "", "")

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+")

SortKey = tuple[int, int, str, str, str]


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


@dataclass(frozen=True)
class Ranked:
    sort_key: SortKey
    """(whole ? 0 : 1, -score, type, id, result id): ascending order is the result order."""

    @property
    def key(self) -> Key:
        return self.sort_key[2], self.sort_key[3], self.sort_key[4]

    @property
    def whole(self) -> bool:
        return self.sort_key[0] == 0

    @property
    def score(self) -> int:
        return -self.sort_key[1]


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
    after: SortKey | None,
) -> SearchPage:
    whole = folder.fold(query).replace("\x01", "")
    terms = [t for t in (t.replace("\x01", "") for t in query_terms(whole)) if t]
    params: dict[str, Any] = {
        "scope_key": scope_key,
        "types": json_ids(object_types),
        "term_count": len(terms),
        "needed": max(1, math.ceil(len(terms) / 2)) if terms else len(terms) + 1,
        "basis": time_basis,
        "range_from": time_range[0] if time_range else None,
        "range_to": time_range[1] if time_range else None,
        "limit": page_size + 1,
    }
    params.update(zip(("after_k0", "after_k1", "after_t", "after_i", "after_r"), after or FIRST, strict=True))
    # A term equal to the whole query is held exactly where the whole query is: count it from those hits.
    params["whole_is_term"] = int(whole in terms)
    hits: list[str] = []
    for n, needle in enumerate([whole, *terms]):
        if not needle or (n > 0 and needle == whole):  # a query of only U+0001 padding characters matches nothing
            continue
        match = await _match_expression(conn, needle)
        if match is not None:
            hits.append(NEEDLE_HITS.format(n=n))
            params[f"m{n}"] = match
    if not hits:
        return SearchPage(whole, terms, [], 0, 0, False)
    async with conn.execute(RANKED_PAGE.format(hits=" UNION ALL ".join(hits)), params) as cur:
        rows = list(await cur.fetchall())
    _, _, _, _, _, total, unknown = rows[0]
    ranked = [Ranked((int(k0), int(k1), t, i, r)) for k0, k1, t, i, r, _, _ in rows[1:]]
    return SearchPage(
        needle=whole,
        terms=terms,
        ranked=ranked[:page_size],
        total=int(total),
        unknown_time_excluded=int(unknown),
        has_more=len(ranked) > page_size,
    )


async def _match_expression(conn: aiosqlite.Connection, needle: str) -> str | None:
    """An FTS5 expression matching exactly the texts that contain the needle; None when none can."""
    if len(needle) >= 3:
        return _phrase(needle)
    high = needle[:-1] + chr(ord(needle[-1]) + 1)
    async with conn.execute(TRIGRAMS_STARTING, {"low": needle, "high": high}) as cur:
        trigrams = [row[0] for row in await cur.fetchall()]
    return " OR ".join(_phrase(t) for t in trigrams) if trigrams else None


def _phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


@dataclass(frozen=True)
class FieldMatch:
    field: str
    weight: int
    text: str
    whole: bool
    terms: frozenset[str]


async def field_matches(
    conn: aiosqlite.Connection, folder: Folder, key: Key, needle: str, terms: list[str]
) -> list[FieldMatch]:
    """Every searchable field of one object, with what of the query it holds (as the index decided)."""
    params = {"object_type": key[0], "object_id": key[1], "result_key": key[2]}
    async with conn.execute(FIELD_TEXTS, params) as cur:
        rows = await cur.fetchall()
    fields = []
    for field, weight, body in rows:
        text = body.removesuffix(PAD)
        folded = folder.fold(text)
        held = frozenset(t for t in terms if t in folded)
        fields.append(FieldMatch(field, weight, text, bool(needle) and needle in folded, held))
    return fields


async def evolution_refs(conn: aiosqlite.Connection, scope_key: str, object_type: str, object_id: str) -> list[Key]:
    params = {"object_type": object_type, "object_id": object_id, "scope_key": scope_key}
    async with conn.execute(EVOLUTION_REFS, params) as cur:
        return [(t, i, "") for t, i in await cur.fetchall()]
