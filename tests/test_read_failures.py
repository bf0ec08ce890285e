"""A database that cannot be read right now — locked by a writer past the busy timeout, damaged, deleted or
replaced — gives `read_failed` naming which (and that nothing was changed), never a bare SQLite message; the
server keeps serving, `/healthz` reports the same, and a WAL database in a read-only directory is explained at
start-up. Real files, real locks, real client sessions (in process and over HTTP)."""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import sqlite3
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import httpx2
import pytest
from http_support import PYTHON, REPO, TOKENS, http_client, http_server, policy_text, server_env
from support import client_for, demo_db, error, ok

from server.contracts.errors import ERROR_CODES

pytestmark = pytest.mark.anyio

SEARCH, SOURCE = "story_graph_search", "story_graph_read_source"
QUERY = {"query": "session cache"}


def rollback_journal(db: Path) -> Path:
    """A database in DELETE journal mode, where a writer's exclusive lock blocks readers (in WAL it cannot)."""
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    return db


@contextmanager
def writer_holding_the_lock(db: Path) -> Iterator[None]:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("UPDATE graph_state SET data_revision = data_revision + 1 WHERE id = 1")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def damage(db: Path, *tables: str) -> None:
    """Overwrite the root page of each table and index named (SQL LIKE patterns) with junk, leaving the header
    and the schema readable."""
    with sqlite3.connect(db) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        roots = [
            root
            for pattern in tables
            for (root,) in conn.execute(
                "SELECT rootpage FROM sqlite_schema WHERE name LIKE ? AND rootpage > 0", (pattern,)
            )
        ]
    assert roots, tables
    with db.open("r+b") as file:
        for root in roots:
            file.seek((root - 1) * page_size)
            file.write(b"\xa5" * page_size)


def assert_read_failed(payload: dict[str, object], *words: str) -> None:
    assert payload["error"] == "read_failed" and "read_failed" in ERROR_CODES
    message = str(payload["message"])
    assert message.startswith("the story graph database could not be read: ") and "Nothing was changed." in message
    for word in words:
        assert word in message, message
    assert "Retrying later is safe" in str(payload["next_step"])


async def test_a_writer_holding_the_lock_past_the_busy_timeout_is_read_failed_then_it_reads_again(
    tmp_path: Path,
) -> None:
    from support import server_for

    db = rollback_journal(demo_db(tmp_path))
    server = server_for(db)
    server.busy_timeout = 0.3
    from mcp import Client

    async with Client(server) as client:
        await ok(client, SEARCH, QUERY)
        with writer_holding_the_lock(db):
            started = time.monotonic()
            locked = await error(client, SEARCH, QUERY)
            waited = time.monotonic() - started
            source = await error(client, SOURCE, {"source_reference_id": "ref-long-doc", "content_kind": "current"})
        assert_read_failed(locked, "locked by another process", "busy timeout (0.3 s)")
        assert source["error"] == "read_failed"
        assert 0.25 <= waited < 5, waited
        # The lock is gone: the same connections read again (none was left inside a broken transaction).
        for _ in range(6):
            assert (await ok(client, SEARCH, QUERY))["items"]


async def test_damaged_pages_are_read_failed_and_say_so(tmp_path: Path) -> None:
    db = demo_db(tmp_path)
    damage(db, "search%", "source_chunks", "events")
    async with client_for(db) as client:
        searched = await error(client, SEARCH, QUERY)
        read = await error(client, SOURCE, {"source_reference_id": "ref-long-doc", "content_kind": "current"})
        # Parts of the file that are intact still read: a snapshot saved without a range (one with a range and a
        # stored version also reads that version's text, to check the range, and so fails here too).
        snapshot = await ok(client, SOURCE, {"source_reference_id": "ref-no-locator"})
        checked = await error(client, SOURCE, {"source_reference_id": "ref-revision-2"})
    assert_read_failed(searched, "damaged")
    assert_read_failed(read, "damaged")
    assert_read_failed(checked, "damaged")
    assert snapshot["content"]


async def test_a_deleted_or_replaced_database_file_is_read_failed(tmp_path: Path) -> None:
    db = demo_db(tmp_path)
    spare = tmp_path / "spare.db"
    shutil.copyfile(db, spare)
    async with client_for(db) as client:
        await ok(client, SEARCH, QUERY)
        db.unlink()
        gone = await error(client, SEARCH, QUERY)
        spare.rename(db)
        replaced = await error(client, SEARCH, QUERY)
    assert_read_failed(gone, "gone (deleted or moved)")
    assert_read_failed(replaced, "replaced", "restarted")
    assert str(tmp_path) not in str(gone) + str(replaced), "no file system path reaches the client"


async def test_a_file_renamed_over_the_served_one_leaves_the_old_journal_files_and_the_log_says_to_remove_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator imports into a new file and renames it over the served one (docs/deployment.md). A write committed
    to the old file while the server held it open stays in its -wal (only the last connection checkpoints), and SQLite
    takes a -wal at a database's path as that database's: restarted as the docs said, the server read the old file's
    last write as part of the new one, without a word. The log line of the replacement now says to remove them."""
    db = demo_db(tmp_path)
    new = tmp_path / "new.db"
    shutil.copyfile(db, new)
    with closing(sqlite3.connect(new)) as conn, conn:
        conn.execute("UPDATE projects SET name = 'Atlas, the new import' WHERE id = 'atlas'")
    async with client_for(db) as client:
        await ok(client, SEARCH, QUERY)
        with closing(sqlite3.connect(db)) as writer, writer:  # an import or the app, while the server reads
            assert writer.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            writer.execute("UPDATE projects SET name = 'Atlas, the old file' WHERE id = 'atlas'")
        new.rename(db)
        with caplog.at_level(logging.ERROR, logger="story_graph_mcp"):
            replaced = await error(client, SEARCH, QUERY)
    assert_read_failed(replaced, "replaced", "restarted")
    assert "demo.db-wal and demo.db-shm beside it are the replaced file's" in caplog.text
    assert "remove them before the restart" in caplog.text and "Replacing the database file" in caplog.text
    assert "-wal" not in str(replaced), "the client is told to wait for a restart, not the operator's procedure"

    async def atlas_name() -> str:
        async with client_for(db) as client:
            names: dict[str, str] = (await ok(client, SEARCH, QUERY))["project_names"]
            return names["atlas"]

    assert await atlas_name() == "Atlas, the old file", "what the log warns of: the old file's write, read as new"
    for leftover in ("demo.db-wal", "demo.db-shm"):
        (tmp_path / leftover).unlink()
    assert await atlas_name() == "Atlas, the new import"


async def test_a_schema_migrated_while_serving_is_read_failed_and_healthz_says_so(tmp_path: Path) -> None:
    """A newer build's `db migrate` run while an older server serves (an upgrade before the restart): the server
    went on reading tables whose meaning may have changed, as if nothing had happened, and /healthz said ok."""
    from server.health import probe
    from server.store.migrate import SCHEMA_VERSION

    db = demo_db(tmp_path)
    async with client_for(db) as client:
        await ok(client, SEARCH, QUERY)
        with sqlite3.connect(db) as conn:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        newer = await error(client, SEARCH, QUERY)
        read = await error(client, SOURCE, {"source_reference_id": "ref-long-doc", "content_kind": "current"})
        health = probe(db, 1.0)
        with sqlite3.connect(db) as conn:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        assert (await ok(client, SEARCH, QUERY))["items"], "back at its version, the same connections read again"
    assert_read_failed(newer, f"schema version changed to {SCHEMA_VERSION + 1}", "must be restarted with a")
    assert_read_failed(read, "schema version changed")
    assert str(tmp_path) not in str(newer)
    assert health is not None and health.kind == "schema" and str(tmp_path) not in health.reason


async def test_healthz_reports_locked_and_damaged_databases_honestly(tmp_path: Path) -> None:
    db = rollback_journal(demo_db(tmp_path))
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text(clients={"alpha": {"projects": "*", "default_project": "atlas"}}))
    args = ["--db", str(db), "--policy", str(policy), "--busy-timeout", "0.3"]
    async with http_server(args, tmp_path) as server, httpx2.AsyncClient() as http:
        health = f"{server.base}/healthz"
        assert (await http.get(health)).json() == {"status": "ok", "database": "readable"}
        with writer_holding_the_lock(db):
            locked = await http.get(health)
            async with http_client(server.url, TOKENS["alpha"]) as client:
                assert_read_failed(await error(client, SEARCH, QUERY), "busy timeout (0.3 s)")
        assert locked.status_code == 503 and locked.json()["database"] == "locked"
        assert (await http.get(health)).status_code == 200

        # Damage only what tool calls read, not what the probe reads: the call's finding is remembered.
        damage(db, "search%")
        assert (await http.get(health)).status_code == 200, "a few pages read fine"
        async with http_client(server.url, TOKENS["alpha"]) as client:
            assert_read_failed(await error(client, SEARCH, QUERY), "damaged")
        damaged = await http.get(health)
        assert damaged.status_code == 503 and damaged.json()["database"] == "corrupt"
        # Damage what the probe reads: found by the probe itself.
        damage(db, "scopes", "projects")
        assert (await http.get(health)).json()["database"] == "corrupt"
    log = server.log.read_text()
    assert "read failed (locked)" in log and "read failed (corrupt)" in log
    assert "Traceback" not in log


def _drop_file_permission_override() -> None:
    """In the child, before exec: as root, give up CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (from the bounding
    set, so they stay dropped across exec) so that directory permissions apply as they do to any user."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _serve_in(directory: Path, db: Path) -> subprocess.CompletedProcess[str]:
    as_root = os.geteuid() == 0
    return subprocess.run(
        [PYTHON, "-m", "server", "serve", "--db", str(db)],
        preexec_fn=_drop_file_permission_override if as_root else None,  # no threads started yet
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
        env=server_env(),
        check=False,
    )


def test_a_wal_database_in_a_read_only_directory_is_explained_in_one_line(tmp_path: Path) -> None:
    directory = Path(tempfile.mkdtemp(prefix="sg-readonly-"))
    try:
        wal = directory / "graph.db"
        shutil.copyfile(demo_db(tmp_path), wal)
        plain = directory / "plain.db"
        shutil.copyfile(wal, plain)
        rollback_journal(plain)
        directory.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        try:
            refused = _serve_in(directory, wal)
            served = _serve_in(directory, plain)
        except (OSError, subprocess.SubprocessError) as exc:
            pytest.skip(f"cannot make a directory read-only for a child process here: {exc}")
    finally:
        directory.chmod(stat.S_IRWXU)
        shutil.rmtree(directory)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert "is in WAL journal mode" in line and "is read-only for this user" in line
    assert "make the directory writable" in line and "PRAGMA journal_mode=DELETE" in line
    assert "not a SQLite database" not in line
    # The fix the message names works: the same graph in DELETE journal mode is served from there.
    assert served.returncode == 0, served.stderr


def test_damaged_pages_found_at_start_are_named_with_the_fix(tmp_path: Path) -> None:
    """`serve --project` reads the projects at start: a damaged table there was `cannot read the projects of …:
    database disk image is malformed`, a bare SQLite message, where every other command names the damage and its fix."""
    db = demo_db(tmp_path)
    damage(db, "projects")
    result = subprocess.run(
        [PYTHON, "-m", "server", "serve", "--db", str(db), "--project", "atlas"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
        env=server_env(),
        check=False,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"{db} is damaged (database disk image is malformed); restore it from a backup" in line


def _leave_a_hot_journal(db: Path) -> None:
    """A writer killed in the middle of a big transaction on a DELETE-mode database: its -journal stays, and the
    database file holds pages of the unfinished transaction until someone who may write rolls it back."""
    rows = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) SELECT randomblob(2000) FROM n"
    )
    script = (
        "import sqlite3, sys, time\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('PRAGMA cache_size = 5')\n"  # spill pages into the file before the commit
        "conn.execute('BEGIN')\n"
        "conn.execute(\"UPDATE projects SET name = 'unfinished' WHERE id = 'atlas'\")\n"
        "conn.execute('CREATE TABLE junk (x)')\n"
        f"conn.execute('INSERT INTO junk {rows}')\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    writer = subprocess.Popen([PYTHON, "-c", script, str(db)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    writer.kill()
    writer.wait()
    writer.stdout.close()
    assert db.with_name(db.name + "-journal").exists()


def test_a_hot_journal_the_server_may_not_roll_back_is_named_with_the_fix(tmp_path: Path) -> None:
    """SQLite must roll back a crashed writer's -journal before anyone reads: a server that may not write the file
    was told the directory is read-only and SQLite must create journal files there (the wrong problem)."""
    directory = Path(tempfile.mkdtemp(prefix="sg-hot-journal-"))
    try:
        db = directory / "graph.db"
        shutil.copyfile(demo_db(tmp_path), db)
        rollback_journal(db)
        _leave_a_hot_journal(db)
        db.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        directory.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        try:
            refused = _serve_in(directory, db)
        except (OSError, subprocess.SubprocessError) as exc:
            pytest.skip(f"cannot make a file read-only for a child process here: {exc}")
        # The fix the line names: read it once as a user that may write (here: the owner, permissions restored).
        directory.chmod(stat.S_IRWXU)
        db.chmod(stat.S_IRUSR | stat.S_IWUSR)
        stats = subprocess.run(
            [PYTHON, "-m", "server", "db", "stats", "--db", str(db)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=server_env(),
            check=False,
            timeout=60,
        )
        assert stats.returncode == 0, stats.stderr
        assert not db.with_name(db.name + "-journal").exists()
        directory.chmod(stat.S_IRUSR | stat.S_IXUSR)
        served = _serve_in(directory, db)
    finally:
        directory.chmod(stat.S_IRWXU)
        shutil.rmtree(directory)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert "has the journal of a transaction its writer did not finish" in line
    assert f"(story-graph-mcp db stats --db {db})" in line and "must create" not in line
    assert served.returncode == 0, served.stderr
