"""A table's plain indexes built once after a bulk write instead of updated row by row.

A write that adds rows in an order other than an index's puts each row's entry on a random page of that
index. Once the index no longer fits the page cache (the import's is small, to bound its memory), every
row costs page reads and writes: at 1,000,000 objects the inserts into `events` and `search_items` took
about twice their linear share. Creating the index afterwards sorts its entries once instead.

Only plain indexes are dropped: a unique index enforces a constraint and serves foreign keys, and a partial
one is small and may be what a trigger looks rows up by (`search_items_without_grams`). They are created
again with their own SQL, so the database ends with the same indexes holding the same entries. This runs
inside the caller's transaction: if the write fails, the caller's rollback restores the indexes (nothing
here creates them again on an error). A database with `ANALYZE` statistics is left as it is, since dropping
an index drops its statistics.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

HAS_STATISTICS = "SELECT 1 FROM sqlite_schema WHERE name = 'sqlite_stat1'"
# A table's indexes in the order they were created, with the SQL that created them.
INDEXES = "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL ORDER BY rowid"
# index_list: whether each index is unique and whether it is partial.
INDEX_LIST = 'SELECT name FROM pragma_index_list(?) WHERE NOT "unique" AND NOT partial'


@contextmanager
def built_after(conn: sqlite3.Connection, table: str, adding: int) -> Iterator[None]:
    """Drop `table`'s plain indexes while `adding` rows are written, when that at least doubles the table,
    and create them again once the write is done."""
    plain = _plain_indexes(conn, table) if adding > 0 else []
    if not plain or not doubles(conn, table, adding) or conn.execute(HAS_STATISTICS).fetchone() is not None:
        yield
        return
    for name, _ in plain:
        conn.execute(f'DROP INDEX "{name}"')
    yield
    for _, sql in plain:
        conn.execute(sql)


def _plain_indexes(conn: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    """(name, SQL) of the table's CREATE INDEX indexes that are neither unique nor partial, oldest first."""
    plain = {name for (name,) in conn.execute(INDEX_LIST, (table,))}
    return [(name, sql) for name, sql in conn.execute(INDEXES, (table,)) if name in plain]


def doubles(conn: sqlite3.Connection, table: str, adding: int) -> bool:
    """Whether writing `adding` rows at least doubles `table`: it holds fewer than that many (reads no more)."""
    if adding <= 0:
        return False
    (found,) = conn.execute(f'SELECT count(*) FROM (SELECT 1 FROM "{table}" LIMIT ?)', (adding,)).fetchone()
    return bool(found < adding)
