"""Schema versions: create or upgrade a database, and open one that is at the supported version.

The schema lives in numbered, forward-only files `migrations/NNNN_name.sql`, each ending with
`PRAGMA user_version = NNNN`. The version a file declares is the version of the database once it
has been applied, so `SCHEMA_VERSION` is simply the highest file number.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path
from typing import Final, Literal

from server.store.errors import DatabaseUnusable, Interrupted, StoreError
from server.store.paths import bundled, sqlite_uri

MIGRATION_FILE: Final = re.compile(r"^(\d{4})_[A-Za-z0-9_]+\.sql$")

USER_VERSION: Final = "PRAGMA user_version"
TABLE_COUNT: Final = "SELECT count(*) FROM sqlite_schema WHERE type = 'table'"
ENABLE_WAL: Final = "PRAGMA journal_mode = WAL"


def migrations_dir() -> Path:
    """The folder holding `NNNN_*.sql`: inside the installed package, else the source checkout's."""
    return bundled("migrations")


def migration_files() -> list[tuple[int, Path]]:
    """Every migration as (version it produces, file), in order."""
    found: list[tuple[int, Path]] = []
    for file in migrations_dir().glob("*.sql"):
        match = MIGRATION_FILE.match(file.name)
        if match:
            found.append((int(match.group(1)), file))
    found.sort()
    numbers = [number for number, _ in found]
    if numbers != list(range(1, len(numbers) + 1)):
        raise RuntimeError(f"migrations in {migrations_dir()} must be numbered 0001, 0002, ... without gaps")
    return found


SCHEMA_VERSION: Final[int] = migration_files()[-1][0]


def migrate_command(path: Path) -> str:
    return f"story-graph-mcp db migrate --db {path}"


def schema_problem(path: Path, found: int) -> str | None:
    """Why a database at `found` cannot be used by this build, or None when it can."""
    if found == SCHEMA_VERSION:
        return None
    if found == 0:
        return f"{path} is not a story graph database yet (schema version 0); run `{migrate_command(path)}`"
    if found < SCHEMA_VERSION:
        return (
            f"{path} has schema version {found}, older than the version {SCHEMA_VERSION} this build uses;"
            f" run `{migrate_command(path)}`"
        )
    return (
        f"{path} has schema version {found}, newer than the newest version this build supports"
        f" ({SCHEMA_VERSION}); upgrade story-graph-mcp to read it"
    )


MIN_PAGE_SIZE: Final = 512
"""SQLite's smallest page: a database file that holds anything is at least this long."""


def unversioned_problem(conn: sqlite3.Connection, path: Path) -> str:
    """Why a database at schema version 0 cannot be read, and what to do. "Run db migrate" fits only a database with
    nothing in it: SQLite also reads an empty file, and a file cut short inside its first page, as an empty
    database, and `db migrate` refuses one holding another application's tables."""
    size = path.stat().st_size
    if size == 0:
        return (
            f"{path} is an empty file (0 bytes), not a story graph database: if it should hold one, it was not"
            f" copied or restored completely; to start a new, empty graph in it, run `{migrate_command(path)}`"
        )
    if size < MIN_PAGE_SIZE:
        return (
            f"{path} is cut short ({size} byte{'s' if size != 1 else ''}, less than one SQLite page), not a story"
            " graph database: a copy that did not finish? copy or restore it again"
        )
    if conn.execute(TABLE_COUNT).fetchone()[0] > 0:
        return (
            f"{path} holds tables but no schema version: it is not a story graph database (another application's?);"
            " give --db the story graph's file"
        )
    return schema_problem(path, 0) or ""


# Migrations 0003 and 0005 were changed after builds of 2026-11-30 (before commit 368aab8) had applied them: a
# database those builds wrote at version 3 to 6 lacks the search index's apply trigger, which 0009 replaces, so
# upgrading it failed there and left it at version 8, too new for the build that wrote it. Such a database is
# refused before anything is applied (an applied migration is never edited, and none before 0009 can repair it).
PRE_PORT_VERSIONS: Final = (3, 8)
PORT_TRIGGER: Final = "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'search_apply_now'"


def pre_port_problem(path: Path, found: int) -> str:
    return (
        f"{path} is at schema version {found} as written by a build from before 2026-11-30 10:00 UTC (its search"
        " index predates a change to migrations 0003 and 0005), which cannot be upgraded in place; nothing was"
        f" changed: export it with the build that wrote it (`story-graph-mcp db export --db {path} graph.jsonl`),"
        " then create a new database with this build and import the file"
        " (`story-graph-mcp db migrate --db new.db && story-graph-mcp db import --db new.db graph.jsonl`)"
    )


def read_version(conn: sqlite3.Connection, path: Path) -> int:
    """`PRAGMA user_version`; this first read is also where SQLite notices a file is not a database, is damaged,
    is locked by a writer or cannot be read here."""
    try:
        row = conn.execute(USER_VERSION).fetchone()
    except sqlite3.DatabaseError as exc:
        raise DatabaseUnusable(unreadable(conn, path, exc)) from None
    return int(row[0])


def unreadable(conn: sqlite3.Connection, path: Path, exc: sqlite3.Error, damaged_fix: str | None = None) -> str:
    """Why the first read of `path` failed, and what to do (`damaged_fix`: for a damaged file that is not ours to
    rebuild). Every failure used to read "is not a SQLite database",
    also a database locked by an import or one whose directory is read-only, sending the operator after the wrong
    problem."""
    code = _primary_code(exc)
    if code == sqlite3.SQLITE_NOTADB:
        return f"{path} is not a SQLite database ({exc})"
    if code == sqlite3.SQLITE_CORRUPT:
        fix = damaged_fix or (
            f"restore it from a backup, or rebuild it: `{migrate_command(Path('NEW.db'))}` and import an export into it"
        )
        return f"{path} is damaged ({exc}); {fix}"
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        waited = conn.execute("PRAGMA busy_timeout").fetchone()[0] / 1000
        return (
            f"{path} is locked by another process (an import, or the application that writes it) for longer than"
            f" {waited:g} seconds; try again when it has finished"
        )
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_READONLY_ROLLBACK:
        return f"{path} {HOT_JOURNAL}, and this user may not write the file or its directory: {hot_journal_fix(path)}"
    # Reading needs no write access to the file, but a WAL database's readers create its -wal and -shm files.
    return directory_problem(path) or f"cannot read {path}: {exc}"


HOT_JOURNAL: Final = (
    "has the journal of a transaction its writer did not finish (it stopped, or its machine did), which SQLite must"
    " roll back before anyone reads the database"
)
"""SQLITE_READONLY_ROLLBACK: a hot -journal beside a database this user can only read. It was reported as a
directory SQLite must create journal files in, which sent the operator after the wrong problem."""


def hot_journal_fix(path: Path) -> str:
    return f"read it once as a user that can write both, which rolls it back (story-graph-mcp db stats --db {path})"


def _primary_code(exc: sqlite3.Error) -> int:
    """The primary result code of a SQLite error (its extended code without the detail bits; 0 when unknown)."""
    return (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF


def readonly_problem(path: Path, exc: sqlite3.Error) -> str | None:
    """For a write refused as read-only (SQLITE_READONLY): why, naming the file or its directory; None otherwise."""
    return write_problem(path) if _primary_code(exc) == sqlite3.SQLITE_READONLY else None


def write_failed(conn: sqlite3.Connection, path: Path, exc: sqlite3.Error, outcome: str, again: str) -> StoreError:
    """A write transaction's failure as one line: `outcome` (what became of the database), then why; `again` is what
    to run again once another writer's lock is gone."""
    if _primary_code(exc) == sqlite3.SQLITE_BUSY:
        waited = conn.execute("PRAGMA busy_timeout").fetchone()[0] / 1000
        return StoreError(
            f"{outcome}: {path} is locked by another writer (another import, or the application that owns it) for"
            f" longer than {waited:g} seconds; run {again} again when it has finished"
        )
    return StoreError(f"{outcome}: {readonly_problem(path, exc) or f'{path}: {exc}'}")


def read_problem(path: Path) -> str | None:
    """Why this user cannot read `path`, or None: SQLite says only `unable to open database file`."""
    if path.exists() and not os.access(path, os.R_OK):
        return (
            f"{path} is not readable for this user: run the command as the user that owns it, or make it readable"
            f" (chmod u+r {path})"
        )
    return None


def write_problem(path: Path) -> str | None:
    """Why SQLite cannot write `path` or the journal files it keeps next to it, or None when both are writable."""
    if path.exists() and not os.access(path, os.W_OK):
        return (
            f"{path} is read-only for this user: run the command as the user that owns it, or make it writable"
            f" (chmod u+w {path})"
        )
    return directory_problem(path)


def directory_problem(path: Path) -> str | None:
    """The directory of `path` is read-only: SQLite cannot create the journal files it keeps next to a database."""
    directory = path.resolve().parent
    if os.access(directory, os.W_OK):
        return None
    return (
        f"the directory of {path}, {directory}, is read-only for this user, and SQLite must create the database's"
        f" journal files there ({path.name}-wal and -shm in WAL mode, which readers need too, or -journal): make the"
        " directory writable for this user"
    )


def check_schema(conn: sqlite3.Connection, path: Path) -> int:
    """Raise DatabaseUnusable unless the open database is at SCHEMA_VERSION; return the version."""
    found = read_version(conn, path)
    problem = unversioned_problem(conn, path) if found == 0 else schema_problem(path, found)
    if problem is not None:
        raise DatabaseUnusable(problem)
    return found


WRITE_LOCK_WAIT: Final = 5.0
"""Seconds an import (or export) waits for another process's lock before it gives up and says so."""


def open_store(path: Path, *, write: bool) -> sqlite3.Connection:
    """Open an existing database at the current schema, read-only or for an import.

    Autocommit mode (`isolation_level=None`): callers issue BEGIN/COMMIT themselves, so a whole
    import is exactly one transaction and an export reads one snapshot.
    """
    if not path.exists():
        raise DatabaseUnusable(f"{path} does not exist; create it with `{migrate_command(path)}`")
    if path.is_dir():
        raise DatabaseUnusable(f"{path} is a directory, not a database file")
    try:
        if write:
            conn = sqlite3.connect(sqlite_uri(path, "rw"), uri=True, isolation_level=None, timeout=WRITE_LOCK_WAIT)
        else:
            conn = open_for_reading(path)
    except sqlite3.Error as exc:
        raise DatabaseUnusable(f"cannot open {path}: {read_problem(path) or exc}") from None
    try:
        check_schema(conn, path)
        conn.row_factory = sqlite3.Row
        if write:
            # Scope consistency is enforced by composite foreign keys; SQLite checks them only when asked.
            conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def open_for_reading(path: Path, *, timeout: float = WRITE_LOCK_WAIT) -> sqlite3.Connection:
    """A connection of a command that only reads (export, stats, `policy check --db`, `serve`'s start-up checks),
    which leaves the database's directory as it found it.

    Reading a WAL database creates its `-wal` and `-shm` files, and only a connection that may write removes them:
    when it closes as the last connection, after checkpointing (SQLite checks both; a `mode=ro` reader never can).
    So when neither file exists yet, the connection is `mode=rw` with `PRAGMA query_only`: it writes nothing, and the
    files it creates are gone when it closes (unless another process has opened the database meanwhile: then they
    are that process's too, and stay). When either exists already (a writer or a server has the database open, or
    one that stopped left them), it is `mode=ro`: they are not this command's to remove, and a command that only
    reads must not checkpoint another process's write-ahead log into the database. SQLite opens a file the user
    cannot write read-only anyway (the files then stay, as they must)."""
    mode: Literal["ro", "rw"] = "ro" if any(journal_files(path)) else "rw"
    conn = sqlite3.connect(sqlite_uri(path, mode), uri=True, isolation_level=None, timeout=timeout)
    try:
        conn.execute("PRAGMA query_only = 1")
    except BaseException:
        conn.close()
        raise
    return conn


def journal_files(path: Path) -> list[Path]:
    """The `-wal` and `-shm` files next to `path` that exist now."""
    found = (path.with_name(path.name + suffix) for suffix in ("-wal", "-shm"))
    return [file for file in found if os.path.lexists(file)]


SIGNAL_CHECK_STEPS: Final = 100_000
"""SQLite virtual-machine steps between calls into Python during a migration (a fraction of a millisecond): a
migration is one long SQL script, and Python runs its Ctrl-C handler only when it gets control back."""


def migrate(path: Path) -> tuple[int, int]:
    """Create the database if missing and apply every pending migration; return (before, after).

    Ctrl-C raises `Interrupted`, saying which migrations were applied and kept: each one commits on its own, and
    the one that was running is rolled back, so running `migrate` again continues from there."""
    if path.is_dir():
        raise DatabaseUnusable(f"{path} is a directory, not a database file")
    if not path.parent.is_dir():
        folder = path.parent
        raise DatabaseUnusable(
            f"cannot create {path}: the directory {folder} does not exist; create it first (mkdir -p {folder})"
        )
    created = not path.exists()
    try:
        conn = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error as exc:
        raise DatabaseUnusable(
            f"cannot open or create {path}: {read_problem(path) or write_problem(path) or exc}"
        ) from None
    before = None
    try:
        # Python runs signal handlers only between its own instructions; this hands it control now and then, and a
        # Ctrl-C raised there stops the statement (SQLITE_INTERRUPT) instead of waiting for the script to end.
        conn.set_progress_handler(_no_op, SIGNAL_CHECK_STEPS)
        before = read_version(conn, path)
        if before > SCHEMA_VERSION:
            raise DatabaseUnusable(schema_problem(path, before) or "")
        if before == 0 and conn.execute(TABLE_COUNT).fetchone()[0] > 0:
            raise DatabaseUnusable(unversioned_problem(conn, path))  # another application's tables
        if PRE_PORT_VERSIONS[0] <= before <= PRE_PORT_VERSIONS[1] and not conn.execute(PORT_TRIGGER).fetchone():
            raise DatabaseUnusable(pre_port_problem(path, before))
        if before == 0:
            # A new database: readers keep working while a writer imports. An existing one keeps the journal mode
            # its operator chose (a snapshot published in DELETE mode for a read-only directory stays so). Set
            # first, so that a new database whose migration was interrupted and then continued has it too.
            conn.execute(ENABLE_WAL)
        for number, file in migration_files():
            if number > before:
                _apply(conn, path, number, file)
        return before, read_version(conn, path)
    except KeyboardInterrupt:
        raise Interrupted(_interrupted_note(conn, path, before, created)) from None
    except sqlite3.Error as exc:
        raise DatabaseUnusable(f"cannot migrate {path}: {readonly_problem(path, exc) or exc}") from None
    finally:
        conn.close()


def _locked_problem(conn: sqlite3.Connection, path: Path, exc: sqlite3.Error) -> str | None:
    """For a write lock not granted in time (`database is locked`): who holds it, and what to do."""
    if _primary_code(exc) not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return None
    waited = conn.execute("PRAGMA busy_timeout").fetchone()[0] / 1000
    return (
        f"another process (an import, or the application that writes it) held {path} locked for longer than"
        f" {waited:g} seconds; run `{migrate_command(path)}` again when it has finished"
    )


def _no_op() -> int:
    return 0


def _interrupted_note(conn: sqlite3.Connection, path: Path, before: int | None, created: bool) -> str:
    """What an interrupted `migrate` kept, read back from the database (the interrupt may have come at any point)."""
    if before is None:  # before the first read: no migration was begun
        state = f"{path} was created, with no schema yet" if created else "nothing was changed"
        return f"{state}; run `{migrate_command(path)}` again"
    if conn.in_transaction:  # the running migration's: closing would roll it back too, but the version is read first
        conn.execute("ROLLBACK")
    now = int(conn.execute(USER_VERSION).fetchone()[0])
    if now == before:
        state = (
            f"{path} was created, with no schema yet (version 0)"
            if created
            else f"nothing was changed: {path} is still at schema version {now}"
        )
    else:
        applied = [file.name for number, file in migration_files() if before < number <= now]
        state = (
            f"{path} is at schema version {now}: {_listed(applied)} {'was' if len(applied) == 1 else 'were'}"
            " applied and kept"
        )
    if now >= SCHEMA_VERSION:
        return f"{state}, the current version; nothing is left to do"
    running = next(file.name for number, file in migration_files() if number == now + 1)
    return (
        f"{state}; {running}, the one running, was not applied (each applies completely or not at all); run"
        f" `{migrate_command(path)}` again to continue from there (to version {SCHEMA_VERSION})"
    )


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _apply(conn: sqlite3.Connection, path: Path, number: int, file: Path) -> None:
    """Run one migration file in its own transaction: it applies completely or not at all."""
    # executescript() commits any open transaction first, then runs the script; the script's own
    # BEGIN leaves the transaction open so the version can be checked before COMMIT.
    try:
        conn.executescript("BEGIN IMMEDIATE;\n" + file.read_text(encoding="utf-8"))
        declared = read_version(conn, path)
        if declared != number:
            raise DatabaseUnusable(f"migration {file.name} sets user_version {declared}, expected {number}")
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        if _primary_code(exc) == sqlite3.SQLITE_INTERRUPT:  # Ctrl-C, seen by the progress handler (migrate)
            raise KeyboardInterrupt from None
        raise DatabaseUnusable(
            f"migration {file.name} failed on {path}, which was left at schema version {number - 1}:"
            f" {readonly_problem(path, exc) or _locked_problem(conn, path, exc) or exc}"
        ) from None
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
