"""Open the story graph read-only, check its schema, hand out consistent read snapshots, and bind id lists.

Each connection has its own thread (aiosqlite), so a long query never blocks the event loop. But every
operation on that thread is a round trip (a queue, a thread wake-up, GIL hand-overs, a wake-up of the
loop) that costs more than a short indexed query itself, and a call makes dozens of statements. So inside
a snapshot, `execute_fetchall` first runs the statement on the event loop's own thread with a budget of
SQLite virtual-machine steps (a progress handler): short statements, which are most, finish there; one
over budget is interrupted and run again on the connection's thread, where it may take as long as it
needs. The budget is checked between steps only, so a statement that can spend unbounded time inside one
step never runs inline: every statement reading the full-text index (ONE_STEP_UNBOUNDED) goes straight to
the thread, whatever its query. While it runs there, the loop keeps answering other calls of the session
and a cancellation; a cancelled statement is interrupted at its next step and its snapshot ends after it.
The snapshot's read lock is taken inline when it is free (with no busy timeout, so a writer's lock fails
at once instead of waiting), else on the thread, where it waits up to the busy timeout; either way a statement
run inline never waits for a writer's lock on the loop's thread (the snapshot holds the read lock), and ending a
read transaction never waits. A page of get_context or read_source then makes no hop at all."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

import aiosqlite
import anyio
import orjson

from server.store.errors import DatabaseUnusable
from server.store.migrate import (
    SCHEMA_VERSION,
    USER_VERSION,
    check_schema,
    migrate_command,
    open_for_reading,
)
from server.store.paths import sqlite_uri

Row = aiosqlite.Row
T = TypeVar("T")
IDS: Final = "(SELECT value FROM json_each(:ids))"
"""The list parameter :ids (bound with json_ids) as a subquery, for `x IN {IDS}`."""
INLINE_STEPS: Final = 20_000
"""SQLite virtual-machine steps a statement may take on the event loop's thread (a fraction of a millisecond)
before it is interrupted and run again on its connection's thread; 0 runs every statement on the thread."""
ONE_STEP_UNBOUNDED: Final = ("search_fts", "search_terms")
"""Tables whose statements can spend unbounded time inside one virtual-machine step, where the step budget cannot
stop them: the FTS5 index matches a phrase of many trigrams in the step that opens it (0.1-0.45 s at 1M objects),
and its vocabulary (fts5vocab) reads a term's whole doclist in the step that returns the term. A statement naming
one of them always runs on its connection's thread."""
ITER_CHUNK_SIZE: Final = 64
"""Rows a cursor's `async for` fetches per hop (aiosqlite's default)."""
# Reading the schema page starts the read transaction: from here on the snapshot is fixed and its lock held.
FIRST_READ: Final = "SELECT 1 FROM sqlite_schema LIMIT 1"
BEGIN_SNAPSHOT: Final = f"BEGIN; {FIRST_READ};"
Spare = Callable[[], AbstractAsyncContextManager["aiosqlite.Connection | None"]]
"""Database.spare: a second connection in a snapshot of its own for a call's parallel reads, or None."""


class SchemaChanged(RuntimeError):
    """The database's schema version is no longer the one this build reads: it was migrated (by a newer build's
    `db migrate`) while the server served it. Its tables may now mean something else, so nothing is read."""

    def __init__(self, found: int) -> None:
        super().__init__(f"schema version {found}, not {SCHEMA_VERSION}")
        self.found = found


def json_ids(ids: Iterable[str]) -> str:
    """A list of ids bound as one parameter: JSON text, sorted and without duplicates."""
    return orjson.dumps(sorted(set(ids))).decode()


class ReadConnection(aiosqlite.Connection):
    """An aiosqlite connection whose `execute_fetchall` runs short statements without the hop to its thread
    while its snapshot holds the read lock (module docstring). Every other operation goes through the thread."""

    def __init__(self, path: Path, busy_timeout: float, inline_steps: int) -> None:
        self._raw: sqlite3.Connection | None = None
        self._inline_steps = inline_steps
        self._busy_ms = int(busy_timeout * 1000)  # as sqlite3.connect sets it
        self.holds_snapshot = False
        """True from the snapshot's BEGIN (its read lock taken) to its COMMIT."""
        self._abandoned = False
        """A statement or BEGIN on the thread was cancelled while it ran: the thread may still be in it."""
        self.inline_runs = 0
        self.thread_runs = 0
        """Statements `execute_fetchall` started inline / ran on the thread (an interrupted one counts in both)."""

        def connect() -> sqlite3.Connection:
            # mode=ro makes a write impossible at the file level; query_only guards the connection as well.
            # check_same_thread=False: inline statements run on the loop's thread, never while the connection's
            # own thread runs one (a connection serves one call at a time, and a call awaits each statement).
            raw = sqlite3.connect(
                sqlite_uri(path, "ro"), uri=True, isolation_level=None, timeout=busy_timeout, check_same_thread=False
            )
            self._raw = raw
            return raw

        super().__init__(connect, ITER_CHUNK_SIZE)

    async def execute_fetchall(  # type: ignore[override]  # awaited only (aiosqlite also allows `async with`)
        self, sql: str, parameters: Any = None
    ) -> Iterable[sqlite3.Row]:
        if self.holds_snapshot and self._inline_steps and self._raw is not None and runs_inline(sql):
            self.inline_runs += 1
            rows = _bounded_fetchall(self._raw, sql, () if parameters is None else parameters, self._inline_steps)
            if rows is not None:
                return rows
        self.thread_runs += 1
        try:
            return await super().execute_fetchall(sql, parameters)
        except anyio.get_cancelled_exc_class():  # the client cancelled the call or went away: stop the statement
            if self._raw is not None:
                self._raw.interrupt()  # thread-safe; takes effect at the statement's next step
            self._abandoned = True
            raise

    async def run_on_thread(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work(connection)` on the connection's thread (inside the snapshot), cancelled as a statement is."""
        self.thread_runs += 1
        try:
            return await self._execute(work, self._conn)  # type: ignore[no-any-return, no-untyped-call]  # aiosqlite: run on its thread
        except anyio.get_cancelled_exc_class():
            if self._raw is not None:
                self._raw.interrupt()
            self._abandoned = True
            raise

    async def begin_snapshot(self, *, wait: bool = True) -> bool:
        """Begin the snapshot; True when begun. `wait=False`: only when that needs no waiting, the read lock free
        right now and nothing left queued on the thread, else False and nothing begun (Database.spare: a call that
        holds a snapshot and would wait for a second one could wait for a writer that waits for the first)."""
        # After a BEGIN cancelled on the thread (the call waited for a writer's lock and its client left), that BEGIN
        # may still be queued or waiting there, and may leave a transaction open: begin on the thread, after it.
        if self._abandoned or not self._begin_inline():
            if not wait:
                return False
            try:
                # sqlite3's executescript first commits a transaction left open (by such a cancelled BEGIN).
                await self.executescript(BEGIN_SNAPSHOT)
            except anyio.get_cancelled_exc_class():
                # The BEGIN may still wait on the thread for a writer's lock (up to the busy timeout) and would then
                # hold a read transaction, and its lock, until this connection's next use: a writer could not
                # checkpoint (or, with a rollback journal, write) meanwhile. Queued after it, a COMMIT ends it once
                # taken; shielded, as the caller is being cancelled.
                self._abandoned = True
                with anyio.CancelScope(shield=True):
                    await self._execute(self._end_left_transaction)  # type: ignore[no-untyped-call]  # aiosqlite: run on its thread
                self._abandoned = False
                raise
            except sqlite3.Error:
                if self.in_transaction:  # BEGIN ran, the first read failed (locked, damaged): the caller sees the error
                    await self.execute("ROLLBACK")
                self._abandoned = False  # the thread is done with what was queued before
                raise
            self._abandoned = False
        self.holds_snapshot = True
        # The schema is checked at start-up, but a newer build's `db migrate` may run while the server serves (an
        # upgrade before the restart). One header read per snapshot (page 1 is cached): a call then answers
        # read_failed, instead of reading tables whose meaning changed as if they had not.
        version = await self._schema_version()
        if version != SCHEMA_VERSION:
            await self.end_snapshot()
            raise SchemaChanged(version)
        return True

    def _end_left_transaction(self) -> None:
        """On the connection's thread, after a cancelled BEGIN: end the transaction it opened, if it did."""
        if self._raw is not None and self._raw.in_transaction:
            self._raw.execute("COMMIT")

    def _begin_inline(self) -> bool:
        """Take the snapshot's read lock on the loop's thread when it is free right now; False when a writer holds
        it (the caller then begins on the connection's thread, which waits up to the busy timeout). With the busy
        timeout off, SQLite answers SQLITE_BUSY at once instead of waiting, so the loop never waits for a lock (in
        WAL mode a writer hardly ever keeps a reader out). The hop it saves (a thread wake-up and GIL hand-overs,
        under load a wait for a CPU) was the last one of a get_context or read_source page, whose statements run
        inline: ~0.1 ms of CPU per call, more than most of those statements."""
        raw = self._raw
        if not self._inline_steps or raw is None:
            return False
        raw.execute("PRAGMA busy_timeout = 0")
        try:
            raw.execute("BEGIN")
            raw.execute(FIRST_READ).fetchall()
        except sqlite3.Error as exc:
            if raw.in_transaction:
                raw.execute("ROLLBACK")
            if (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == sqlite3.SQLITE_BUSY:
                return False
            raise  # damaged, gone: what the thread would have raised
        finally:
            raw.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        return True

    async def _schema_version(self) -> int:
        """PRAGMA user_version, inside the snapshot (not counted in inline_runs/thread_runs: no statement of a tool)."""
        if self._inline_steps and self._raw is not None:  # a header field: a few steps, and the read lock is held
            row = self._raw.execute(USER_VERSION).fetchone()
        else:
            [row] = await super().execute_fetchall(USER_VERSION)
        return int(row[0])

    async def end_snapshot(self) -> None:
        self.holds_snapshot = False
        if self._abandoned:
            # The thread may still be inside the cancelled statement: a COMMIT on the loop's thread would wait
            # for it there (the connection's mutex). Queued on the thread, it runs once the statement stopped;
            # shielded, because the caller is being cancelled and the connection must not go back half-used.
            self._abandoned = False
            with anyio.CancelScope(shield=True):
                await self.execute("COMMIT")
        elif self._inline_steps and self._raw is not None:
            self._raw.execute("COMMIT")
        else:
            await self.execute("COMMIT")


@functools.lru_cache(maxsize=1024)
def runs_inline(sql: str) -> bool:
    """Whether a statement may be tried on the event loop's thread: not when it reads a table of ONE_STEP_UNBOUNDED.
    (The statements are the reader's own templates, so the names are matched in their text; remembered per text.)"""
    return not any(table in sql for table in ONE_STEP_UNBOUNDED)


def _bounded_fetchall(raw: sqlite3.Connection, sql: str, parameters: Any, steps: int) -> list[sqlite3.Row] | None:
    """All rows, or None when the statement needed more than `steps` virtual-machine steps (interrupted; a
    read statement's interruption leaves its transaction and snapshot as they were)."""
    raw.set_progress_handler(_interrupt, steps)
    try:
        return raw.execute(sql, parameters).fetchall()
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_INTERRUPT:
            return None
        raise
    finally:
        raw.set_progress_handler(None, 0)


def _interrupt() -> int:
    return 1


class Database:
    """A small pool of read-only connections. Each read runs inside one transaction, so every query of
    a call sees the same snapshot (the data revision it checks is the one it reads)."""

    def __init__(self, path: Path, connections: list[ReadConnection]) -> None:
        self.path = path
        self._all = list(connections)
        self._free = connections
        self._available = anyio.Semaphore(len(connections))

    @classmethod
    async def open(
        cls, path: Path, size: int = 4, busy_timeout: float = 5.0, inline_steps: int = INLINE_STEPS
    ) -> Database:
        """`busy_timeout`: seconds a read waits for a writer's lock before SQLite gives up (SQLITE_BUSY).
        `inline_steps`: see INLINE_STEPS."""
        check_database(path)
        connections = [await _connect(path, busy_timeout, inline_steps) for _ in range(size)]
        return cls(path, connections)

    async def close(self) -> None:
        """Close every connection, also when the caller is being cancelled (the transport broke, Ctrl-C): each
        connection has a thread of its own, and a thread left running keeps the process from exiting."""
        with anyio.CancelScope(shield=True):
            for conn in self._all:
                await conn.close()
        self._all = self._free = []

    @asynccontextmanager
    async def snapshot(self) -> AsyncGenerator[aiosqlite.Connection, None]:
        async with self._available, self._taken() as conn:
            assert conn is not None  # begun, waiting if it had to
            yield conn

    @asynccontextmanager
    async def spare(self) -> AsyncGenerator[aiosqlite.Connection | None, None]:
        """Another connection in a snapshot of its own, when one is free and another stays free for other calls, and
        its snapshot begins without waiting; else None (a call holding a snapshot never waits for a second one, and a
        busy server's calls keep every connection they would have had; with `inline_steps` 0 no snapshot begins at
        once, so there is none). A call reads on it beside its own connection (term sets,
        server/reader/search_sets.py) once it has checked that both snapshots see the same graph revision."""
        if self._available.value < 2:
            yield None
            return
        self._available.acquire_nowait()  # no await since the check: the permit is still there
        try:
            async with self._taken(wait=False) as conn:
                yield conn
        finally:
            self._available.release()

    @asynccontextmanager
    async def _taken(self, *, wait: bool = True) -> AsyncGenerator[ReadConnection | None, None]:
        """A free connection (the caller holds a permit of `_available`) in a snapshot, given back after; None when
        `wait` is False and the snapshot could not begin at once (ReadConnection.begin_snapshot)."""
        conn = self._free.pop()
        try:
            if not await conn.begin_snapshot(wait=wait):
                yield None
                return
            try:
                yield conn
            finally:
                await conn.end_snapshot()
        finally:
            self._free.append(conn)


async def _connect(path: Path, busy_timeout: float, inline_steps: int) -> ReadConnection:
    conn = ReadConnection(path, busy_timeout, inline_steps)
    await conn  # starts its thread and opens the file there
    conn.row_factory = aiosqlite.Row
    await conn.execute("PRAGMA query_only = 1")
    return conn


def check_database(path: Path) -> None:
    """Refuse a missing file, a non-SQLite file or an unsupported schema version with one clear line."""
    if not path.exists():
        if path.is_absolute():
            raise DatabaseUnusable(f"{path}: no such database file (create one with: {migrate_command(path)})")
        # Agent runtimes start the server in a directory of their choosing: say where we looked.
        raise DatabaseUnusable(
            f"{path}: no such database file (looked for {path.absolute()}: a relative --db is read from the working"
            f" directory, and an agent runtime may start the server in another one, so give an absolute path;"
            f" to create a new database: {migrate_command(path.absolute())})"
        )
    conn = open_for_reading(path)  # a start that fails here leaves no -wal/-shm files it created behind
    try:
        check_schema(conn, path)
    finally:
        conn.close()


async def on_thread(conn: aiosqlite.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """`work(connection)` on the connection's own thread: a read of many rows that only yields something smaller (a
    term's items as a bit set, server/reader/search_sets.py), kept off the event loop, which goes on serving. The
    reader's connections are Database's (typed as aiosqlite's, as every reader function takes them)."""
    assert isinstance(conn, ReadConnection), "a connection of Database.snapshot()"
    return await conn.run_on_thread(work)


async def scalar(conn: aiosqlite.Connection, sql: str, params: dict[str, Any] | None = None) -> Any:
    """The first column of the first row of a query that always returns one row (a count, a revision)."""
    rows = await conn.execute_fetchall(sql, params or {})
    return next(iter(rows))[0]
