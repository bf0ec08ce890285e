"""`story-graph-mcp serve`: build the server from the command line and run it on stdio or HTTP."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from server.app import Access, StaticAccess, build_server
from server.contracts.common import Grant
from server.reader.cursor import CursorCodec
from server.reader.db import check_database
from server.store.errors import StoreError

DEMO_DEFAULT_PROJECT = "atlas"


def cursor_secret(path: Path | None) -> bytes | None:
    """The shared cursor secret: a file, else STORY_GRAPH_CURSOR_SECRET, else None (a random per-process one)."""
    if path is not None:
        try:
            secret = path.read_bytes().strip()
        except OSError as exc:
            raise StoreError(f"cannot read the cursor secret file {path}: {exc.strerror}") from exc
        if len(secret) < 16:
            raise StoreError(f"the cursor secret in {path} is shorter than 16 bytes; use a long random value")
        return secret
    env = os.environ.get("STORY_GRAPH_CURSOR_SECRET", "").encode()
    return env or None


def serve(args: argparse.Namespace) -> int:
    if args.demo:
        from server.store.demo import write_demo

        db_path = Path(tempfile.mkdtemp(prefix="story-graph-demo-")) / "demo.db"
        write_demo(db_path)
    else:
        db_path = args.db
    check_database(db_path)
    project = args.project or (DEMO_DEFAULT_PROJECT if args.demo else None)
    codec = CursorCodec(cursor_secret(args.cursor_secret_file))
    if args.transport == "http":
        from server.http import serve_http

        return serve_http(args, db_path, project, codec)
    access: Access
    if args.policy is not None:
        from server.policy import PolicyFile, StdioPolicyAccess

        # The policy's server switch and its [stdio] grant; --project overrides stdio.default_project.
        fallback = DEMO_DEFAULT_PROJECT if args.demo else None
        access = StdioPolicyAccess(PolicyFile(args.policy), project=args.project, fallback_project=fallback)
    else:
        access = StaticAccess(Grant(default_project=project))
    server = build_server(db_path, access, codec)
    server.run("stdio")
    return 0
