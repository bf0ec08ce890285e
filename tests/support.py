"""Test helpers: real demo databases and real MCP client sessions (no mocks)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.types import CallToolResult, TextContent

from server.app import StaticAccess, StoryGraphServer, build_server
from server.contracts.common import Grant
from server.reader.cursor import CursorCodec
from server.reader.db import ReadConnection
from server.store.migrate import migration_files

_DEMO_CACHE: dict[str, Path] = {}


def demo_db(tmp_path: Path) -> Path:
    """A fresh copy of the demo database in tmp_path (built once per test session, then copied)."""
    from server.store.demo import write_demo

    cached = _DEMO_CACHE.get("demo")
    if cached is None or not cached.exists():
        import tempfile

        cached = Path(tempfile.mkdtemp(prefix="sg-demo-cache-")) / "demo.db"
        write_demo(cached)
        _DEMO_CACHE["demo"] = cached
    target = tmp_path / "demo.db"
    shutil.copyfile(cached, target)
    return target


def server_for(
    db_path: Path, grant: Grant | None = None, secret: bytes = b"test-secret-0123456789"
) -> StoryGraphServer:
    return build_server(db_path, StaticAccess(grant or Grant(default_project="atlas")), CursorCodec(secret))


@asynccontextmanager
async def client_for(
    db_path: Path, grant: Grant | None = None, mode: str = "auto", secret: bytes = b"test-secret-0123456789"
) -> AsyncGenerator[Client, None]:
    """A real MCP client session, in process. mode 'legacy' runs the JSON-RPC loop, 'auto' the 2026-07-28 path."""
    async with Client(server_for(db_path, grant, secret), mode=mode, raise_exceptions=mode != "legacy") as client:
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    return await client.call_tool(tool, arguments)


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call and assert success; return the structured content (checked equal to the JSON text item)."""
    import orjson

    result = await client.call_tool(tool, arguments)
    text = result.content[0]
    assert isinstance(text, TextContent)
    assert not result.is_error, text.text
    assert result.structured_content is not None
    assert orjson.loads(text.text) == result.structured_content
    content: dict[str, Any] = result.structured_content
    return content


async def all_pages(client: Client, tool: str, arguments: dict[str, Any], limit: int = 5000) -> list[dict[str, Any]]:
    """Every page of one query, following next_cursor (checked consistent with has_more and complete)."""
    pages: list[dict[str, Any]] = []
    cursor = None
    for _ in range(limit):
        page = await ok(client, tool, arguments | ({"cursor": cursor} if cursor else {}))
        pages.append(page)
        cursor = page["page"]["next_cursor"]
        assert page["page"]["has_more"] == (cursor is not None) == (not page["page"]["complete"])
        if cursor is None:
            return pages
    raise AssertionError("paging did not end")


async def all_items(client: Client, tool: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of every page of one query, in page order."""
    return [item for page in await all_pages(client, tool, arguments) for item in page["items"]]


async def error(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call and assert an isError result; return its payload (code in 'error'), parsed from the text."""
    return error_payload(await client.call_tool(tool, arguments))


def error_payload(result: CallToolResult) -> dict[str, Any]:
    """An error result as SPEC §5b shapes it: no structuredContent (TypeScript clients would validate it against
    the outputSchema and drop the error), one text item whose first line starts with the code and a colon and
    whose last line is the JSON payload. Returns the payload."""
    import orjson

    assert result.is_error, result.content
    assert result.structured_content is None
    assert len(result.content) == 1
    text = result.content[0]
    assert isinstance(text, TextContent)
    first, _, last = text.text.rpartition("\n")
    payload: dict[str, Any] = orjson.loads(last)
    assert first.startswith(payload["error"] + ": "), text.text
    assert payload["message"] in first and payload["next_step"] in first
    return payload


def migrate_to(conn: sqlite3.Connection, version: int) -> None:
    """Apply the migration files up to `version`: a database as an earlier build left it, to upgrade in place."""
    for number, file in migration_files():
        if number <= version:
            conn.executescript(file.read_text(encoding="utf-8"))


def count_hops(conn: ReadConnection) -> list[int]:
    """Counts what `conn` runs on its own thread from now on (each a hop from the event loop), in the list's one
    element (set it to 0 to count again)."""
    hops = [0]
    hop: Callable[..., Awaitable[Any]] = conn._execute

    async def counting_hop(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        hops[0] += 1
        return await hop(function, *args, **kwargs)

    conn._execute = counting_hop  # type: ignore[method-assign,assignment]
    return hops
