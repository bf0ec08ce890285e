"""Database read failures: what went wrong (locked, corrupt, gone, replaced), said the same way to a tool
caller (`read_failed`), to `/healthz` and to the log. Also the cheap probe behind `/healthz`.

Nothing here writes: the probe opens its own read-only connection, reads a few pages and closes it.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from server.contracts.errors import StoryGraphError, read_failed
from server.reader.db import SchemaChanged
from server.reader.source_rows import StoredTextBroken
from server.store.migrate import HOT_JOURNAL, SCHEMA_VERSION, USER_VERSION, hot_journal_fix
from server.store.paths import sqlite_uri

FailureKind = Literal["locked", "corrupt", "missing", "replaced", "schema", "unreadable"]
FileIdentity = tuple[int, int]
"""(device, inode): which file a path named when the server opened it."""

PROBE_TIMEOUT_CAP: Final = 2.0
"""A health check waits at most this long for a writer's lock, whatever the busy timeout."""
# A few real pages: the schema (parsed to prepare any statement), the graph revision and the first rows of two
# tables every tool reads. Cheap at any size; corruption elsewhere shows up in tool calls (and then here).
PROBE_QUERIES: Final = (
    "SELECT data_revision FROM graph_state WHERE id = 1",
    "SELECT scope_key, data_revision FROM scopes ORDER BY scope_key LIMIT 1",
    "SELECT id, status FROM projects ORDER BY id LIMIT 1",
)


@dataclass(frozen=True)
class ReadFailure:
    kind: FailureKind
    reason: str
    """For the caller and /healthz: what is wrong, with no file system path."""
    detail: str
    """For the log: the SQLite message and the path."""

    def error(self) -> StoryGraphError:
        return read_failed(self.reason)


def identity(path: Path) -> FileIdentity | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)


def file_changed(path: Path, opened: FileIdentity | None) -> ReadFailure | None:
    """The database file was deleted, moved or replaced since the server opened it (one stat, no read)."""
    now = identity(path)
    if now is None:
        return ReadFailure(
            "missing",
            "the database file is gone (deleted or moved) since the server opened it",
            f"{path} no longer exists",
        )
    if opened is not None and now != opened:
        return ReadFailure(
            "replaced",
            "the database file was replaced since the server opened it; the server must be restarted to read it",
            f"{path} is another file than the one opened at start-up" + _leftover_journals(path),
        )
    return None


def _leftover_journals(path: Path) -> str:
    """For the log: the replaced file's -wal/-shm left beside the new one. SQLite reads a -wal at a database's path
    as that database's, whatever its journal mode, so a restart would read the replaced file's last writes (those a
    writer committed while the server held it open) into the new file, and a writer would checkpoint them into it."""
    names = [f"{path.name}{suffix}" for suffix in ("-wal", "-shm") if Path(f"{path}{suffix}").exists()]
    if not names:
        return ""
    return (
        f"; {' and '.join(names)} beside it are the replaced file's unless a process has written the new one since:"
        " remove them before the restart, or SQLite reads the replaced file's last writes into the new one"
        " (docs/deployment.md, 'Replacing the database file')"
    )


def classify(exc: BaseException, path: Path, busy_timeout: float) -> ReadFailure:
    """What a failed read means, from SQLite's error code (and whether the file is still there)."""
    if isinstance(exc, SchemaChanged):
        return schema_changed(path, exc.found)
    if isinstance(exc, StoredTextBroken):
        return ReadFailure("corrupt", "stored source text is incomplete (damaged data)", f"{path}: {exc}")
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    detail = f"{path}: {exc} ({name or type(exc).__name__})"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return ReadFailure(
            "locked",
            f"it is locked by another process for longer than the busy timeout ({busy_timeout:g} s)",
            detail,
        )
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return ReadFailure("corrupt", f"the database file is damaged (SQLite: {exc})", detail)
    if not path.exists():
        return ReadFailure("missing", "the database file is gone (deleted or moved)", detail)
    if name == "SQLITE_READONLY_ROLLBACK":
        return ReadFailure(
            "unreadable",
            f"it {HOT_JOURNAL}, and the server may not write it; it reads again once the operator has rolled it back",
            f"{path} {HOT_JOURNAL}, and the server's user may not write the file or its directory:"
            f" {hot_journal_fix(path)}",
        )
    return ReadFailure("unreadable", f"SQLite could not read it ({exc})", detail)


def schema_changed(path: Path, found: int) -> ReadFailure:
    newer = found > SCHEMA_VERSION
    return ReadFailure(
        "schema",
        f"the database's schema version changed to {found} since the server started, and this server reads"
        f" version {SCHEMA_VERSION}; the server must be restarted"
        + (" with a story-graph-mcp that reads the new version" if newer else ""),
        f"{path} has schema version {found}, not {SCHEMA_VERSION}: restart the server"
        + (" after upgrading story-graph-mcp" if newer else ""),
    )


def probe(path: Path, busy_timeout: float) -> ReadFailure | None:
    """Open the file read-only and read a few real pages in one transaction; None when that works."""
    if not path.exists():
        return ReadFailure("missing", "the database file is gone (deleted or moved)", f"{path} does not exist")
    timeout = min(busy_timeout, PROBE_TIMEOUT_CAP)
    try:
        conn = sqlite3.connect(sqlite_uri(path, "ro"), uri=True, timeout=timeout, isolation_level=None)
        try:
            conn.execute("BEGIN")
            [(version,)] = conn.execute(USER_VERSION).fetchall()
            if version != SCHEMA_VERSION:
                conn.execute("COMMIT")
                return schema_changed(path, version)
            for query in PROBE_QUERIES:
                conn.execute(query).fetchall()
            conn.execute("COMMIT")
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return classify(exc, path, timeout)
    return None


def same_file_state(path: Path) -> tuple[int, int, int, int] | None:
    """Identity, size and modification time: a corruption seen by a tool call holds until this changes."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
