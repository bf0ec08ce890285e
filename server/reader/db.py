"""Open the story graph read-only, check its schema, hand out consistent read snapshots, and bind id lists."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncGenerator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import aiosqlite
import anyio
import orjson

from server.store.errors import DatabaseUnusable
from server.store.migrate import migrate_command, read_version, schema_problem
from server.store.paths import sqlite_uri

Row = aiosqlite.Row
IDS: Final = "(SELECT value FROM json_each(:ids))"
"""The list parameter :ids (bound with json_ids) as a subquery, for `x IN {IDS}`."""


def json_ids(ids: Iterable[str]) -> str:
    """A list of ids bound as one parameter: JSON text, sorted and without duplicates."""
    return orjson.dumps(sorted(set(ids))).decode()


class Database:
    """A small pool of read-only connections. Each read runs inside one transaction, so every query of
    a call sees the same snapshot (the data revision it checks is the one it reads)."""

    def __init__(self, path: Path, connections: list[aiosqlite.Connection]) -> None:
        self.path = path
        self._free = connections
        self._available = anyio.Semaphore(len(connections))

    @classmethod
    async def open(cls, path: Path, size: int = 4, busy_timeout: float = 5.0) -> Database:
        """`busy_timeout`: seconds a read waits for a writer's lock before SQLite gives up (SQLITE_BUSY)."""
        check_database(path)
        connections = [await _connect(path, busy_timeout) for _ in range(size)]
        return cls(path, connections)

    async def close(self) -> None:
        for conn in self._free:
            await conn.close()
        self._free = []

    @asynccontextmanager
    async def snapshot(self) -> AsyncGenerator[aiosqlite.Connection, None]:
        async with self._available:
            conn = self._free.pop()
            try:
                await conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    await conn.execute("COMMIT")
            finally:
                self._free.append(conn)


async def _connect(path: Path, busy_timeout: float) -> aiosqlite.Connection:
    # mode=ro makes a write impossible at the file level; query_only guards the connection as well.
    conn = await aiosqlite.connect(sqlite_uri(path, "ro"), uri=True, isolation_level=None, timeout=busy_timeout)
    conn.row_factory = aiosqlite.Row
    await conn.execute("PRAGMA query_only = 1")
    return conn


def check_database(path: Path) -> None:
    """Refuse a missing file, a non-SQLite file or an unsupported schema version with one clear line."""
    if not path.exists():
        raise DatabaseUnusable(f"{path}: no such database file (create one with: {migrate_command(path)})")
    conn = sqlite3.connect(sqlite_uri(path, "ro"), uri=True)
    try:
        problem = schema_problem(path, read_version(conn, path))
    finally:
        conn.close()
    if problem is not None:
        raise DatabaseUnusable(problem)


async def scalar(conn: aiosqlite.Connection, sql: str, params: dict[str, Any] | None = None) -> Any:
    """The first column of the first row of a query that always returns one row (a count, a revision)."""
    rows = await conn.execute_fetchall(sql, params or {})
    return next(iter(rows))[0]
