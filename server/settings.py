"""Start-up settings shared by `serve` (stdio and HTTP) and the uvicorn factory, and the checks run before serving.

One home for what both entry points need: the database path and its checks, the current project, the policy
file, the cursor secret, the SQLite busy timeout and the HTTP bind/host settings. `serve` fills them from the
command line (`from_args`), the factory from the environment (`from_env`). Every problem is a `StoreError`:
one line on stderr, a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import gc
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from server.policy import Policy, granted_projects
from server.reader.db import check_database
from server.store.errors import DatabaseUnusable, StoreError
from server.store.migrate import open_for_reading, read_problem, unreadable

DEFAULT_BUSY_TIMEOUT: Final = 5.0
"""Seconds a read waits for a writer's lock before giving up with `read_failed` (SQLite's busy timeout)."""
MAX_BUSY_TIMEOUT: Final = 600.0
MIN_SECRET_BYTES: Final = 16
PROJECTS_LISTED: Final = 10
SQLITE_HEADER: Final = b"SQLite format 3\x00"
INSPECTOR: Final = "@modelcontextprotocol/inspector@2.12.0"
"""The MCP Inspector the start-up hints of stdio and HTTP, the docs and CI name (pinned: an unpinned npx on
Node 20 picks 0.15.0)."""
WAL_FORMAT: Final = 2
"""File format read/write version (header bytes 18 and 19) of a database in WAL journal mode."""


@dataclass(frozen=True)
class HttpSettings:
    host: str = "127.0.0.1"
    """The bind address; loopback unless told otherwise."""
    port: int = 8765
    allowed_hosts: tuple[str, ...] = ()
    """Extra Host header values accepted (DNS-rebinding protection); `name` also accepts `name:<any port>`."""
    allowed_origins: tuple[str, ...] = ()
    """Extra Origin values accepted, e.g. `https://agents.example.com`."""
    public_url: str | None = None
    """The URL clients use for /mcp (behind a proxy); its host and origin pass the Host/Origin checks."""
    workers: int = 1
    """Worker processes sharing the listening socket (`serve --transport http --workers N`)."""
    loopback_hosts: tuple[str, ...] = field(
        default=("127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]")
    )
    """Always accepted, with any port or none (port 80, or a local proxy passing `Host: localhost`)."""


@dataclass(frozen=True)
class ServeSettings:
    db: Path
    project: str | None = None
    """The caller's current project on stdio (and the one-run token's default over HTTP)."""
    policy: Path | None = None
    cursor_secret: bytes | None = None
    """None: a random per-process secret (cursors die with the process)."""
    cursor_secret_file: Path | None = None
    """Where `cursor_secret` was read from (None: STORY_GRAPH_CURSOR_SECRET, or none at all)."""
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT
    http: HttpSettings = field(default_factory=HttpSettings)

    @classmethod
    def from_args(cls, args: argparse.Namespace, db: Path, project: str | None) -> ServeSettings:
        http_only(args)
        return cls(
            db=db,
            project=project,
            policy=args.policy,
            cursor_secret=cursor_secret(args.cursor_secret_file),
            cursor_secret_file=args.cursor_secret_file,
            busy_timeout=busy_timeout(args.busy_timeout),
            http=HttpSettings(
                host=args.host or HttpSettings.host,
                port=HttpSettings.port if args.port is None else _port(str(args.port), "--port"),
                allowed_hosts=tuple(args.allowed_host),
                allowed_origins=tuple(args.allowed_origin),
                public_url=_public_url(args.public_url, "--public-url"),
                workers=workers(args.workers, args.transport),
            ),
        )

    @classmethod
    def from_env(cls) -> ServeSettings:
        """The uvicorn factory's settings (docs/deployment.md, 'Several workers'): every worker must share the
        policy file and the cursor secret, so both are required. There is no port setting: uvicorn binds the port
        of its own `--port`, and nothing in the app depends on it (STORY_GRAPH_PORT_IGNORED)."""
        db = Path(_required_env("STORY_GRAPH_DB"))
        secret_file = os.environ.get("STORY_GRAPH_CURSOR_SECRET_FILE", "").strip()
        secret = cursor_secret(Path(secret_file) if secret_file else None)
        if secret is None:
            raise StoreError("set STORY_GRAPH_CURSOR_SECRET_FILE or STORY_GRAPH_CURSOR_SECRET: workers must share it")
        policy = Path(_required_env("STORY_GRAPH_POLICY"))
        timeout = os.environ.get("STORY_GRAPH_BUSY_TIMEOUT", "").strip()
        return cls(
            db=db,
            policy=policy,
            cursor_secret=secret,
            cursor_secret_file=Path(secret_file) if secret_file else None,
            busy_timeout=busy_timeout(_seconds(timeout, "STORY_GRAPH_BUSY_TIMEOUT") if timeout else None),
            http=HttpSettings(
                host=os.environ.get("STORY_GRAPH_HOST", "").strip() or HttpSettings.host,
                allowed_hosts=_csv("STORY_GRAPH_ALLOWED_HOSTS"),
                allowed_origins=_csv("STORY_GRAPH_ALLOWED_ORIGINS"),
                public_url=_public_url(os.environ.get("STORY_GRAPH_PUBLIC_URL") or None, "STORY_GRAPH_PUBLIC_URL"),
            ),
        )

    def worker_env(self) -> dict[str, str]:
        """These settings as the environment `from_env` reads: what `serve --workers N` hands its workers."""
        if self.policy is None:
            raise StoreError("--workers needs --policy: workers cannot share a one-run token")
        if self.cursor_secret is None:
            raise StoreError("--workers needs --cursor-secret-file (or STORY_GRAPH_CURSOR_SECRET): workers share it")
        http = self.http
        env = {
            "STORY_GRAPH_DB": str(self.db.resolve()),
            "STORY_GRAPH_POLICY": str(self.policy.resolve()),
            "STORY_GRAPH_BUSY_TIMEOUT": repr(self.busy_timeout),
            "STORY_GRAPH_HOST": http.host,
            "STORY_GRAPH_ALLOWED_HOSTS": ",".join(http.allowed_hosts),
            "STORY_GRAPH_ALLOWED_ORIGINS": ",".join(http.allowed_origins),
            "STORY_GRAPH_PUBLIC_URL": http.public_url or "",
        }
        if self.cursor_secret_file is not None:
            env["STORY_GRAPH_CURSOR_SECRET_FILE"] = str(self.cursor_secret_file.resolve())
        return env


STORY_GRAPH_PORT_IGNORED: Final = (
    "STORY_GRAPH_PORT is set but has no effect: uvicorn listens on the port of its own --port (default 8000), "
    "and the app needs no port; remove STORY_GRAPH_PORT"
)
"""Logged by the factory when STORY_GRAPH_PORT is set (earlier docs said to set it to uvicorn's --port; an operator
who set it instead of --port got uvicorn's default port, without a word)."""

MAX_WORKERS: Final = 64


def workers(count: int, transport: str) -> int:
    if not 1 <= count <= MAX_WORKERS:
        raise StoreError(f"--workers must be between 1 and {MAX_WORKERS}, not {count}")
    if count > 1 and transport != "http":
        raise StoreError("--workers applies to --transport http (stdio serves one client in one process)")
    return count


def cursor_secret(path: Path | None) -> bytes | None:
    """The shared cursor secret: a file, else STORY_GRAPH_CURSOR_SECRET, else None (a random per-process one)."""
    if path is not None:
        try:
            secret = path.read_bytes().strip()
        except OSError as exc:
            raise StoreError(f"cannot read the cursor secret file {path}: {exc.strerror}") from exc
        if len(secret) < MIN_SECRET_BYTES:
            raise StoreError(f"the cursor secret in {path} is shorter than 16 bytes; use a long random value")
        return secret
    env = os.environ.get("STORY_GRAPH_CURSOR_SECRET", "").encode()
    if env and len(env) < MIN_SECRET_BYTES:
        raise StoreError("STORY_GRAPH_CURSOR_SECRET is shorter than 16 bytes; use a long random value")
    return env or None


def busy_timeout(seconds: float | None) -> float:
    if seconds is None:
        return DEFAULT_BUSY_TIMEOUT
    if not 0 <= seconds <= MAX_BUSY_TIMEOUT:
        raise StoreError(f"the busy timeout must be between 0 and {MAX_BUSY_TIMEOUT:g} seconds, not {seconds:g}")
    return seconds


def check_startup(settings: ServeSettings) -> None:
    """Everything that can be known wrong before serving: the database file and schema, and the project."""
    check_database_file(settings.db)
    if settings.project is not None:
        check_project(settings.db, settings.project)


def check_database_file(path: Path) -> None:
    """`check_database`, with the one cause SQLite reports misleadingly spelled out: a WAL database whose
    directory this process cannot write (readers must create the `-shm` file next to it). A directory, or a file
    SQLite cannot even open, is one line too (`serve --db /srv` ended in a traceback, `disk I/O error`)."""
    if path.is_dir():
        raise DatabaseUnusable(f"{path} is a directory, not a database file")
    try:
        check_database(path)
    except DatabaseUnusable:
        problem = wal_problem(path)
        if problem is not None:
            raise DatabaseUnusable(problem) from None
        raise
    except sqlite3.Error as exc:
        raise DatabaseUnusable(f"cannot open {path}: {read_problem(path) or exc}") from None


def wal_problem(path: Path) -> str | None:
    """Why a WAL-mode database cannot be opened read-only here, or None when that is not the problem."""
    try:
        with path.open("rb") as file:
            header = file.read(20)
    except OSError:
        return None
    if len(header) < 20 or not header.startswith(SQLITE_HEADER) or header[18] != WAL_FORMAT:
        return None
    directory = path.resolve().parent
    shm = path.with_name(path.name + "-shm")
    if shm.exists() or os.access(directory, os.W_OK):
        return None
    return (
        f"{path} is in WAL journal mode and its directory {directory} is read-only for this user, so SQLite "
        f"cannot create {shm.name} to read it; make the directory writable for the server's user, or publish "
        f"the database in DELETE journal mode (sqlite3 {path} 'PRAGMA journal_mode=DELETE'), which needs no "
        "-wal/-shm files"
    )


def check_project(db: Path, project: str) -> None:
    """`serve --project X`: X must exist and be active, so a typo is caught at start, not on the first call."""
    conn = open_for_reading(db)  # a refused --project leaves no -wal/-shm files it created behind
    try:
        row = conn.execute("SELECT status FROM projects WHERE id = ?", (project,)).fetchone()
        active = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM projects WHERE status = 'active' ORDER BY id LIMIT ?", (PROJECTS_LISTED + 1,)
            )
        ]
    except sqlite3.Error as exc:
        # Damaged, locked or unreadable, said as every command says it, with its fix (not a bare SQLite message).
        raise DatabaseUnusable(unreadable(conn, db, exc)) from None
    finally:
        conn.close()
    if row is not None and row[0] == "active":
        return
    listed = ", ".join(active[:PROJECTS_LISTED]) + (", ..." if len(active) > PROJECTS_LISTED else "")
    choose = f"active projects: {listed}" if active else "the database has no active project"
    state = "is not in" if row is None else f"is {row[0]} (not active) in"
    raise StoreError(f"--project {project!r} {state} {db}; {choose}")


def policy_warnings(policy: Policy, db: Path) -> list[str]:
    """Projects a grant names that the database does not hold, or holds but not active: a typo would otherwise show
    only as that client's calls refused with scope_unavailable. Warnings, not errors: an import may add them later."""
    named = granted_projects(policy)
    wanted = sorted({project for ids in named.values() for project in ids})
    if not wanted:
        return []
    conn = open_for_reading(db)  # `policy check --db` leaves no -wal/-shm files behind
    try:
        marks = ",".join("?" * len(wanted))
        status = dict(conn.execute(f"SELECT id, status FROM projects WHERE id IN ({marks})", wanted).fetchall())
    except sqlite3.Error as exc:
        raise DatabaseUnusable(unreadable(conn, db, exc)) from None
    finally:
        conn.close()
    warnings = []
    for holder, ids in named.items():
        for project in ids:
            if status.get(project) == "active":
                continue
            state = "is not in" if project not in status else f"is {status[project]} in"
            warnings.append(f"{holder} is granted project {project!r}, which {state} {db}; calls for it are refused")
    return warnings


def _required_env(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise StoreError(f"{name} is not set (see docs/deployment.md, 'Several workers')")
    return value


def _seconds(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise StoreError(f"{name} must be a number of seconds, not {text!r}") from None


def _port(text: str, name: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise StoreError(f"{name} must be a port number (1-65535), not {text}")
    return int(text)


def _public_url(text: str | None, name: str) -> str | None:
    """The URL clients reach /mcp at: http(s), with a host (and a valid port, if any), and nothing else. Its host
    and origin pass the Host/Origin checks and the start-up hints print it; a query, a fragment or credentials
    are no part of what a client sends as Host or Origin, so they are refused rather than silently dropped."""
    if text is None:
        return None
    parts = urlsplit(text)
    try:
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:  # a port out of range
        valid = False
    if not valid:
        raise StoreError(f"{name} must be an http(s) URL such as https://mcp.example.com/mcp, not {text!r}")
    extra = [
        what
        for what, present in (
            ("a query", "?" in text),
            ("a fragment", "#" in text),
            ("a user name or password", "@" in parts.netloc),
        )
        if present
    ]
    if extra:
        raise StoreError(
            f"{name} is the URL clients use for the MCP endpoint, without {' or '.join(extra)}: "
            f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"  # never echoes a password
        )
    return text


HTTP_ONLY: Final = ("host", "port", "allowed_host", "allowed_origin", "public_url")


def http_only(args: argparse.Namespace) -> None:
    """HTTP options on a stdio server are a mistake (the operator meant HTTP and would get a silent stdio
    server waiting on its input): refuse them, as for --workers."""
    given = [f"--{name.replace('_', '-')}" for name in HTTP_ONLY if getattr(args, name) not in (None, [])]
    if given and args.transport != "http":
        raise StoreError(
            f"{', '.join(given)} only {'apply' if len(given) > 1 else 'applies'} to --transport http; add"
            f" --transport http, or leave {'them' if len(given) > 1 else 'it'} out for stdio"
        )


def _csv(name: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in os.environ.get(name, "").split(",") if part.strip())


def settle_heap() -> None:
    """Once the server is built and before it serves: move every object made so far (modules, schemas, the app)
    out of the garbage collector's generations, and turn the collector on (`serve` starts with it off: cli.py).
    They live as long as the process, and otherwise every full collection walks them all; a call that allocates a
    lot triggers several. Measured on a 1M graph: the first get_context of a 10,000-member story line took 0.36 s
    with them frozen, 0.57-0.64 s without.

    No collection first: building the server leaves about 1,700 objects of cyclic garbage (kept for the process's
    life, a few hundred KB), and a full collection of the ~90,000 objects built costs 60-150 ms of start-up. With the
    collector off while the modules are built, the ~200 collections that would run then (70-110 ms) are saved too."""
    gc.freeze()
    gc.enable()
