"""A loopback reverse proxy that adds one bearer token to every request, for HTTP-only test tools that cannot
send headers (the MCP conformance suite 0.1.x).

The server under test keeps its production behaviour (it never serves unauthenticated); this proxy only
adds `Authorization: Bearer $AUTH_PROXY_TOKEN`. Everything else is passed through verbatim in both directions,
including the `Host` and `Origin` headers, so DNS-rebinding checks are answered by the real server.

    AUTH_PROXY_TOKEN=... python auth_proxy.py --port 8800 --upstream http://127.0.0.1:8765

The token comes from the environment so it never shows in the process list.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}


def build_app(upstream: str, token: str) -> Starlette:
    client = httpx2.AsyncClient(base_url=upstream, timeout=httpx2.Timeout(60.0))

    async def forward(request: Request) -> StreamingResponse:
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP | {"authorization"}]
        headers.append(("authorization", f"Bearer {token}"))
        outgoing = client.build_request(
            request.method,
            request.url.path + (f"?{request.url.query}" if request.url.query else ""),
            headers=headers,
            content=await request.body(),
        )
        response = await client.send(outgoing, stream=True)
        return StreamingResponse(
            response.aiter_raw(),
            status_code=response.status_code,
            headers={k: v for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP},
            background=BackgroundTask(response.aclose),
        )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncGenerator[None, None]:
        async with client:
            yield

    methods = ["GET", "POST", "DELETE", "OPTIONS", "HEAD", "PUT", "PATCH"]
    return Starlette(routes=[Route("/{path:path}", forward, methods=methods)], lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="e.g. http://127.0.0.1:8765")
    args = parser.parse_args()
    token = os.environ.get("AUTH_PROXY_TOKEN", "")
    if not token:
        parser.error("set AUTH_PROXY_TOKEN")
    uvicorn.run(build_app(args.upstream, token), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
