from pathlib import Path

import pytest

from server.store.migrate import migrate


@pytest.fixture
def anyio_backend() -> str:
    # aiosqlite runs only on asyncio.
    return "asyncio"


@pytest.fixture
def migrated_db(tmp_path: Path) -> Path:
    """A fresh database file at the current schema, with no graph data."""
    path = tmp_path / "graph.db"
    migrate(path)
    return path
