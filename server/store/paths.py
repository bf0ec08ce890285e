"""Where bundled data lives, and how to name a database file for sqlite3."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import quote

import server


def bundled(name: str) -> Path:
    """A folder or file shipped with the package.

    The wheel carries it inside the package (`server/<name>`); a source checkout may keep it at
    the repository root (`<repo>/<name>`), as it does `migrations/`.
    """
    package = Path(server.__file__).resolve().parent
    inside = package / name
    return inside if inside.exists() else package.parent / name


def sqlite_uri(path: Path, mode: Literal["ro", "rw", "rwc"]) -> str:
    """A `file:` URI for `sqlite3.connect(..., uri=True)`; quoting keeps `?`, `#` and `%` in names literal."""
    return f"file:{quote(str(Path(path).resolve()))}?mode={mode}"
