"""The floor: the least an MCP search server can do, to measure ours against in the same run.

    python benchmarks/floor_server.py --db graph.db                                  # stdio
    python benchmarks/floor_server.py --db graph.db --transport http --port 8766     # Streamable HTTP, one process
    python benchmarks/floor_server.py --db graph.db --transport http --workers 4    # as `serve --workers 4` runs ours
    FLOOR_DB=graph.db uvicorn --factory floor_server:create_app --app-dir benchmarks --workers 4   # uvicorn's workers

One tool, `floor_search(query, limit)`: the query quoted as one FTS5 phrase, ONE indexed query against the same
database file (`FLOOR_SQL`), and the first `limit` rowids plus their count. No scope, ranking, time filter, total,
item texts, coverage, cursor, policy or bearer token: the protocol cost plus one indexed query, nothing else.
HTTP runs stateless with JSON responses and the SDK's loopback Host/Origin checks, as our server does; with
`--workers N` under the same supervisor as `story-graph-mcp serve --workers N` (server/workers.py: a listening socket
per worker on Linux), so that bench_http.py compares the two under the same kind of socket.

A one- or two-character needle is shorter than a trigram, so the floor's phrase matches nothing for it (it then
costs the protocol plus an empty index probe): the `count` it returns says so.

When the search index changes shape, adapt `FLOOR_SQL` (and `phrase`) and nothing else.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from pathlib import Path
from typing import Annotated, Final

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse

HOST: Final = "127.0.0.1"
FLOOR_SQL: Final = "SELECT rowid FROM search_fts WHERE search_fts MATCH :q LIMIT :n"
"""The one indexed query: FTS5 trigram phrase, first :n rows in index order."""


def phrase(query: str) -> str:
    """The whole query as one FTS5 phrase (quotes doubled)."""
    return '"' + query.replace('"', '""') + '"'


class FloorResult(BaseModel):
    rowids: list[int]
    count: int
    """How many rowids were returned (at most `limit`)."""


def build_floor(db: Path) -> MCPServer:
    if not db.is_file():
        raise SystemExit(f"floor_server: {db} does not exist")
    # Read-only, on the event loop: no thread hand-off either, so this really is the floor.
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    server = MCPServer("story-graph-floor", version="1")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def floor_search(
        query: Annotated[str, Field(min_length=1, max_length=4000)],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
    ) -> FloorResult:
        """One FTS5 trigram phrase query; the first `limit` rowids."""
        rowids = [int(row[0]) for row in conn.execute(FLOOR_SQL, {"q": phrase(query), "n": limit})]
        return FloorResult(rowids=rowids, count=len(rowids))

    async def healthz(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    server.custom_route("/healthz", methods=["GET"])(healthz)
    return server


def http_app(db: Path) -> Starlette:
    return build_floor(db).streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True, host=HOST
    )


def create_app() -> Starlette:
    """`uvicorn --factory floor_server:create_app --app-dir benchmarks`: the database from FLOOR_DB."""
    return http_app(Path(os.environ["FLOOR_DB"]))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="The floor MCP server: one FTS5 query per call.")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--workers", type=int, default=1, help="HTTP: worker processes, as `serve --workers` runs ours")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.transport == "stdio":
        build_floor(args.db).run("stdio")
        return 0
    import uvicorn

    if args.workers == 1:
        uvicorn.run(http_app(args.db), host=HOST, port=args.port, log_level="warning", access_log=False)
        return 0
    from server.workers import SharedSocket, SocketPerWorker

    # The workers are spawned: they import this module (its folder is on the sys.path they inherit) and read FLOOR_DB.
    os.environ["FLOOR_DB"] = str(args.db.resolve())
    config = uvicorn.Config(
        "floor_server:create_app",
        factory=True,
        host=HOST,
        port=args.port,
        workers=args.workers,
        log_level="warning",
        access_log=False,
    )
    supervisor = SocketPerWorker if sys.platform.startswith("linux") else SharedSocket
    supervisor(config, HOST, args.port, f"http://{HOST}:{args.port}/mcp").run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
