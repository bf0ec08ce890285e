"""Bad start-up states give one clear line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from server.store.migrate import SCHEMA_VERSION, migrate


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _newer(tmp_path: Path) -> Path:
    path = tmp_path / "newer.db"
    migrate(path)
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    return path


def _missing(tmp_path: Path) -> Path:
    return tmp_path / "missing.db"


def _not_sqlite(tmp_path: Path) -> Path:
    path = tmp_path / "text.db"
    path.write_text("hello, not sqlite " * 100, encoding="utf-8")
    return path


def _older(tmp_path: Path) -> Path:
    path = tmp_path / "older.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("PRAGMA user_version = 1")
    return path


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (_missing, "no such database file"),
        (_not_sqlite, "is not a SQLite database"),
        (_newer, f"newer than the newest version this build supports ({SCHEMA_VERSION})"),
        (_older, f"schema version 1, older than the version {SCHEMA_VERSION} this build uses; run `story-graph-mcp db"),
    ],
    ids=["missing", "not-sqlite", "newer-schema", "older-schema"],
)
def test_serve_refuses_an_unusable_database_in_one_line(
    tmp_path: Path, make: Callable[[Path], Path], expected: str
) -> None:
    path = make(tmp_path)
    result = _serve("--db", str(path))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]
