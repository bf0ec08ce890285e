"""The needles of a search query and what planning it needs from the index: the indexed trigrams a short non-CJK
needle begins, and how many items hold each term. Both change only with the data, so they are remembered per graph
revision (read in the scope's own statement, in the same snapshot)."""

from __future__ import annotations

from typing import Final, cast

import aiosqlite

from server.reader.db import scalar
from server.reader.memo import GRAPH, Memo, weight_of
from server.reader.search_query import Needle, needle, needs_trigram_list
from server.reader.search_sql import TERM_FREQUENCY, TRIGRAMS_BEGINNING, TRIGRAMS_FROM

FREQUENCY_CAP: Final = 1_000
"""A term's items are counted up to this many to plan a query rarest term first (the commoner ones tie)."""


async def whole_needle(conn: aiosqlite.Connection, memo: Memo, graph_revision: str, text: str) -> Needle:
    """The whole query's needle. The trigrams a short needle begins change only with the data: remembered per graph
    revision (read in the scope's own statement, in the same snapshot)."""
    if not needs_trigram_list(text):
        return needle(text)
    memo_at, key = memo.at(GRAPH, graph_revision), ("trigrams", text)
    trigrams = memo_at.get(key)
    if trigrams is None:
        listed = await _trigrams(conn, text)
        trigrams = memo_at.put(key, listed, weight_of(len(listed)))
    return needle(text, trigrams)


async def term_needles_of(
    conn: aiosqlite.Connection, memo: Memo, graph_revision: str, whole: Needle, texts: list[str]
) -> tuple[list[Needle], dict[str, int] | None]:
    """The terms' needles and, for three or more terms, how many items of the whole index hold each, up to
    FREQUENCY_CAP (such a query is planned rarest term first). Remembered per graph revision as one value per query,
    weighed by the terms and trigrams it lists: a value per term let one pasted paragraph (a thousand Han pairs) push
    out everything the server remembered for every caller."""
    if all(text == whole.text for text in texts):
        return [whole for _ in texts], None
    memo_at, key = memo.at(GRAPH, graph_revision), ("terms", tuple(texts))
    remembered = memo_at.get(key)
    if remembered is not None:
        return cast("tuple[list[Needle], dict[str, int] | None]", remembered)
    needles: list[Needle] = []
    listed = len(texts)
    for text in texts:
        trigrams = await _trigrams(conn, text) if text != whole.text and needs_trigram_list(text) else None
        listed += len(trigrams or ())
        needles.append(whole if text == whole.text else needle(text, trigrams))
    if len(needles) < 3:
        return (needles, None) if listed == len(texts) else memo_at.put(key, (needles, None), weight_of(listed))
    frequency = {
        term.text: int(await scalar(conn, TERM_FREQUENCY, {"expression": term.anywhere, "cap": FREQUENCY_CAP}))
        for term in needles
        if term.anywhere is not None
    }
    return memo_at.put(key, (needles, frequency), weight_of(listed))


async def _trigrams(conn: aiosqlite.Connection, text: str) -> list[str]:
    """The indexed trigrams a short non-CJK needle begins."""
    high = above_prefix(text)
    sql = TRIGRAMS_FROM if high is None else TRIGRAMS_BEGINNING
    rows = await conn.execute_fetchall(sql, {"low": text, "high": high})
    # Not the month tokens' trigrams (they hold U+0003): no text holds them.
    return [str(row[0]) for row in rows if "\x03" not in str(row[0])]


def above_prefix(text: str) -> str | None:
    """The least string above every string that begins with `text` (None: no string is). The next code point
    skips the surrogates, which SQLite text cannot hold; U+10FFFF has no next one, so the prefix before it is
    raised instead."""
    while text:
        last = ord(text[-1])
        if last < 0x10FFFF:
            return text[:-1] + chr(0xE000 if last + 1 == 0xD800 else last + 1)
        text = text[:-1]
    return None
