"""The items a search query names by id (ranked first: docs/tools.md, "How search ranks"), and the review result a
query names, which is no object (for the query note)."""

from __future__ import annotations

from dataclasses import dataclass

import aiosqlite
import orjson

from server.reader.fold import narrow
from server.reader.objects import leaf_splits
from server.reader.search_sql import (
    IDENTIFIER_ITEMS,
    IDENTIFIER_TYPES,
    IN_RANGE,
    RESULT_BY_ID,
    Filters,
    filter_parameters,
)


async def identifier_items(
    conn: aiosqlite.Connection, filters: Filters, query: str, scope_key: str, *, time: str | None = None
) -> list[int]:
    """Items the query names by id, as typed or width-folded (ＩＮＣ－４８２１ names INC-4821), in item id order
    (own rows first, then by type, newest first). `time`: the time clause (default: in range, if there is a range)."""
    if time is None:
        time = IN_RANGE[filters.time_basis] if filters.time_range else ""
    sql = IDENTIFIER_ITEMS.format(types=IDENTIFIER_TYPES if filters.type_codes is not None else "", time=time)
    found: set[int] = set()
    # A leaf description's id (`leaf:<leaf_id>:<id>`, as get_context shows it, and accepts) names the object it
    # describes: its items are the ones that id means (matched by terms alone, they ranked anything with 'leaf').
    for some_id in dict.fromkeys((query, *(described for _, described in leaf_splits(query)))):
        params = {"query": some_id, "narrow": narrow(some_id), "scope_key": scope_key} | filter_parameters(filters)
        found.update(int(row[0]) for row in await conn.execute_fetchall(sql, params))
    return sorted(found, reverse=True)


@dataclass(frozen=True)
class NamedResult:
    """A review result that a query names by its id (search finds objects, and a result is none)."""

    id: str
    review_generated_at: str
    summary_ids: list[str]
    """Its first summaries (by id, at most 3)."""


async def named_result(conn: aiosqlite.Connection, scope_key: str, query: str) -> NamedResult | None:
    """The result of this scope whose id the whole query is, if any (one primary-key lookup; none for a query with
    spaces, which no id holds)."""
    text = query.strip()
    if not text or any(ch.isspace() for ch in text):
        return None
    rows = list(await conn.execute_fetchall(RESULT_BY_ID, {"query": text, "scope_key": scope_key}))
    if not rows:
        return None
    generated, summaries = rows[0]
    return NamedResult(text, str(generated), list(orjson.loads(summaries)))
