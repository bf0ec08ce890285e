"""The reader's connections cannot write, and keep reading while another process writes (WAL)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from support import count_hops, demo_db

from server.reader.db import Database, ReadConnection
from server.reader.fold import Folder

pytestmark = pytest.mark.anyio


async def test_the_reader_connection_cannot_write(tmp_path: Path) -> None:
    path = demo_db(tmp_path)
    before = path.read_bytes()
    db = await Database.open(path)
    try:
        for statement in (
            "INSERT INTO projects (id, name) VALUES ('x', 'x')",
            "UPDATE graph_state SET data_revision = 0",
            "DELETE FROM events",
            "CREATE TABLE scratch (x)",
        ):
            async with db.snapshot() as conn:
                with pytest.raises(sqlite3.OperationalError, match=r"readonly|read-only|query_only"):
                    await conn.execute(statement)
    finally:
        await db.close()
    assert path.read_bytes() == before


async def test_reads_continue_while_another_process_writes_with_wal(tmp_path: Path) -> None:
    path = demo_db(tmp_path)
    db = await Database.open(path)
    try:
        writer = sqlite3.connect(path)
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE projects SET name = 'Atlas v2' WHERE id = 'atlas'")
        async with db.snapshot() as conn, conn.execute("SELECT name FROM projects WHERE id = 'atlas'") as cur:
            assert (await cur.fetchone())[0] == "Atlas sync service"  # type: ignore[index]
        writer.commit()
        async with db.snapshot() as conn, conn.execute("SELECT name FROM projects WHERE id = 'atlas'") as cur:
            assert (await cur.fetchone())[0] == "Atlas v2"  # type: ignore[index]
        writer.close()
    finally:
        await db.close()


def test_folding_keeps_code_point_positions_in_any_script() -> None:
    folder = Folder()
    for text in ("ΣΑΣ Straße İstanbul ǅ", "AbC😀方案𠀀", "", "a"):
        folded = folder.fold(text)
        assert len(folded) == len(text)
    assert folder.fold("SQLite WAL 会话缓存") == "sqlite wal 会话缓存"


ATLAS_NAME = "SELECT name FROM projects WHERE id = 'atlas'"
# Far over any inline budget: about a million virtual-machine steps.
LONG_COUNT = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300000) SELECT count(*) FROM n"


async def test_short_statements_skip_the_thread_and_return_the_same_rows(tmp_path: Path) -> None:
    path = demo_db(tmp_path)
    inline, threaded = await Database.open(path, size=1), await Database.open(path, size=1, inline_steps=0)
    queries = ("SELECT id, status FROM projects ORDER BY id", "SELECT scope_key, data_revision FROM scopes ORDER BY 1")
    try:
        async with inline.snapshot() as fast, threaded.snapshot() as slow:
            for sql in queries:
                assert [tuple(r) for r in await fast.execute_fetchall(sql)] == [
                    tuple(r) for r in await slow.execute_fetchall(sql)
                ]
            assert isinstance(fast, ReadConnection) and isinstance(slow, ReadConnection)
            assert (fast.inline_runs, fast.thread_runs) == (2, 0)
            assert (slow.inline_runs, slow.thread_runs) == (0, 2)
            with pytest.raises(sqlite3.OperationalError, match="no such table"):
                await fast.execute_fetchall("SELECT * FROM no_such_table")
    finally:
        await inline.close()
        await threaded.close()


async def test_a_statement_over_its_budget_runs_again_on_the_thread_in_the_same_snapshot(tmp_path: Path) -> None:
    path = demo_db(tmp_path)
    db = await Database.open(path, size=1, inline_steps=1)  # every statement is interrupted at once
    writer = sqlite3.connect(path)
    try:
        async with db.snapshot() as conn:
            before = await conn.execute_fetchall(ATLAS_NAME)
            writer.execute("UPDATE projects SET name = 'Atlas v2' WHERE id = 'atlas'")
            writer.commit()
            after = await conn.execute_fetchall(ATLAS_NAME)  # interrupted inline, read again on the thread
            assert isinstance(conn, ReadConnection) and (conn.inline_runs, conn.thread_runs) == (2, 2)
        assert [r[0] for r in before] == [r[0] for r in after] == ["Atlas sync service"]
        async with db.snapshot() as conn:
            assert [r[0] for r in await conn.execute_fetchall(ATLAS_NAME)] == ["Atlas v2"]
    finally:
        writer.close()
        await db.close()


class Ticker:
    """Counts the turns the event loop gave another task: a statement run inline gives none."""

    def __init__(self) -> None:
        self.ticks = 0
        self.done = anyio.Event()

    async def run(self) -> None:
        while not self.done.is_set():
            self.ticks += 1
            await anyio.lowlevel.checkpoint()


async def test_a_long_statement_does_not_hold_up_the_event_loop(tmp_path: Path) -> None:
    """Over its inline budget, a statement finishes on the connection's thread while other tasks keep running."""
    db = await Database.open(demo_db(tmp_path), size=1)
    ticker = Ticker()
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(ticker.run)
            async with db.snapshot() as conn:
                rows = await conn.execute_fetchall(LONG_COUNT)
                assert isinstance(conn, ReadConnection) and conn.thread_runs == 1
            ticker.done.set()
        assert [r[0] for r in rows] == [300000]
        assert ticker.ticks > 10  # the loop ran the ticker while SQLite counted
    finally:
        await db.close()


async def test_a_full_text_statement_never_runs_on_the_event_loop(tmp_path: Path) -> None:
    """Statements on the FTS index (and its vocabulary) go to the connection's thread even when short: FTS5 can spend
    unbounded time inside one step, where the inline step budget cannot stop it (server/reader/db.py). Other tasks
    run while such a statement runs; a short statement on an ordinary table still finishes without a yield."""
    db = await Database.open(demo_db(tmp_path), size=1)
    ticker = Ticker()
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(ticker.run)
            async with db.snapshot() as conn:
                await anyio.lowlevel.checkpoint()  # the ticker is running
                before = ticker.ticks
                found = await conn.execute_fetchall(
                    "SELECT rowid FROM search_fts WHERE search_fts MATCH :q LIMIT 5", {"q": '"atlas"'}
                )
                during_fts = ticker.ticks - before
                before = ticker.ticks
                await conn.execute_fetchall("SELECT count(*) FROM search_terms WHERE term >= 'at' AND term < 'au'")
                during_vocabulary = ticker.ticks - before
                before = ticker.ticks
                await conn.execute_fetchall("SELECT name FROM projects")
                during_plain = ticker.ticks - before
            ticker.done.set()
        assert len(list(found)) > 0
        assert during_fts > 0 and during_vocabulary > 0  # the loop served the ticker meanwhile
        assert during_plain == 0  # inline: no hop to the thread for a short ordinary statement
    finally:
        await db.close()


def rollback_journal_demo(tmp_path: Path) -> Path:
    """The demo database in DELETE journal mode, where a writer's exclusive lock keeps readers out."""
    path = demo_db(tmp_path)
    with sqlite3.connect(path) as setup:
        assert setup.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    return path


def hold_the_lock(writer: sqlite3.Connection, seconds: float) -> Callable[[], Coroutine[Any, Any, None]]:
    """Take the exclusive lock (renaming Atlas) now; the task returned commits after `seconds`."""
    writer.execute("BEGIN EXCLUSIVE")
    writer.execute("UPDATE projects SET name = 'Atlas v2' WHERE id = 'atlas'")

    async def writer_finishes() -> None:
        await anyio.sleep(seconds)
        writer.execute("COMMIT")

    return writer_finishes


async def test_a_snapshot_begins_on_the_loops_thread_unless_a_writer_holds_the_lock(tmp_path: Path) -> None:
    """A free read lock is taken inline (no hop to the connection's thread: a wake-up that cost more than the
    statements of a get_context page); while a writer holds the lock (rollback journal: an exclusive lock keeps
    readers out) the snapshot begins on the thread and waits there, the loop serving other tasks, and reads once the
    writer is done. The busy timeout the inline attempt turns off is the configured one again afterwards."""
    path = rollback_journal_demo(tmp_path)
    db = await Database.open(path, size=1, busy_timeout=5.0)
    [conn] = db._all
    assert isinstance(conn, ReadConnection)
    hops = count_hops(conn)
    writer = sqlite3.connect(path, isolation_level=None)
    ticker = Ticker()
    try:
        async with db.snapshot() as snap:
            assert [r[0] for r in await snap.execute_fetchall(ATLAS_NAME)] == ["Atlas sync service"]
            assert [r[0] for r in await snap.execute_fetchall("PRAGMA busy_timeout")] == [5000]
        assert hops[0] == 0

        writer_finishes = hold_the_lock(writer, seconds=0.3)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(ticker.run)
            tasks.start_soon(writer_finishes)
            async with db.snapshot() as snap:
                names = [r[0] for r in await snap.execute_fetchall(ATLAS_NAME)]
                assert [r[0] for r in await snap.execute_fetchall("PRAGMA busy_timeout")] == [5000]
            ticker.done.set()
        assert names == ["Atlas v2"]
        assert hops[0] >= 1 and ticker.ticks > 10  # began on the thread; the loop ran the ticker meanwhile
    finally:
        writer.close()
        await db.close()


async def test_a_snapshot_cancelled_while_it_waits_for_a_writer_leaves_no_read_lock_behind(tmp_path: Path) -> None:
    """A call whose snapshot waited on the thread for a writer's lock, and was cancelled (its client left): the BEGIN
    went on waiting there, then took the read lock and held it until the connection's next use, however long the
    server idled, so a writer (rollback journal) could not write, nor (WAL) checkpoint. It is now ended once taken."""
    path = rollback_journal_demo(tmp_path)
    db = await Database.open(path, size=1, busy_timeout=5.0)
    writer = sqlite3.connect(path, isolation_level=None)
    later = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        writer_finishes = hold_the_lock(writer, seconds=0.6)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(writer_finishes)
            with anyio.move_on_after(0.3) as waited:
                async with db.snapshot():
                    pass
        assert waited.cancelled_caught
        await anyio.sleep(0.3)  # the thread's BEGIN has had the lock since the writer was done
        later.execute("BEGIN EXCLUSIVE")  # refused ("database is locked") while a reader holds its lock
        later.execute("ROLLBACK")
        async with db.snapshot() as snap:  # and the connection serves the next call
            assert [r[0] for r in await snap.execute_fetchall(ATLAS_NAME)] == ["Atlas v2"]
    finally:
        writer.close()
        later.close()
        await db.close()


async def test_a_spare_connection_is_lent_only_while_another_stays_free_for_other_calls(tmp_path: Path) -> None:
    """Database.spare (a call's second connection, for reading term lists at once): never one that a waiting or a
    later call would need, never waited for, and back in the pool after."""
    db = await Database.open(demo_db(tmp_path), size=3)
    try:
        async with db.snapshot() as first, db.spare() as second:
            assert second is not None and second is not first
            async with db.spare() as third:
                assert third is None  # the last free connection stays for other calls
            async with db.snapshot() as other_call:  # which get it at once
                assert other_call not in (first, second)
                async with db.spare() as none_left:
                    assert none_left is None
        async with db.snapshot() as first, db.spare() as second:
            assert second is not None  # all three back
    finally:
        await db.close()
