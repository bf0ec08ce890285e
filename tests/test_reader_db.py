"""The reader's connections cannot write, and keep reading while another process writes (WAL)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support import demo_db

from server.reader.db import Database
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
