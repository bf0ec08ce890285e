"""`story-graph-mcp serve`: check the start-up settings, then run the server on stdio or HTTP."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Final

import anyio

from server.app import Access, StaticAccess, build_server
from server.contracts.common import Grant
from server.logs import configure_logging
from server.policy import STDIO_CALLER, PolicyFile, StdioPolicy
from server.reader.cursor import CursorCodec
from server.settings import INSPECTOR, ServeSettings, check_startup, policy_warnings, settle_heap
from server.stdio import serve_stdio
from server.store.errors import StoreError

DEMO_DEFAULT_PROJECT = "atlas"
log = logging.getLogger("story_graph_mcp.serve")


def _warn_if_outside_stdio_grant(stdio: StdioPolicy, project: str | None, fallback: str | None) -> None:
    """A current project (`--project`, or the demo's) outside `[stdio] projects` refuses every call that names no
    scope with scope_unavailable; said once at start, as a typo in a grant is (the file may still be changed)."""
    chosen, source = (project, "--project") if project else (fallback, "the demo's default project")
    if stdio.default_project and not project:
        return  # the policy itself checks that its default project is in its projects
    if chosen is None or stdio.projects == "*" or chosen in stdio.projects:
        return
    log.warning(
        "policy: the current project %r (%s) is not in [stdio] projects (%s): a call that names no scope is refused"
        " with scope_unavailable; add it to [stdio] projects, or start with a --project from them",
        chosen,
        source,
        ", ".join(stdio.projects),
    )


def serve(args: argparse.Namespace) -> int:
    configure_logging()
    if args.transport == "stdio":
        _check_stdio()
    with _database(args) as db_path:
        project = args.project or (DEMO_DEFAULT_PROJECT if args.demo else None)
        settings = ServeSettings.from_args(args, db_path, project)
        check_startup(settings)
        if settings.policy is not None:
            policy = PolicyFile(settings.policy).last_good()
            for warning in policy_warnings(policy, settings.db):
                log.warning("policy: %s", warning)
            if args.transport == "http" and args.project:
                # Each HTTP client's current project is its grant's; --project was dropped without a word.
                log.warning(
                    "--project %r has no effect over HTTP with --policy: each client's current project is the"
                    " default_project of its grant in the policy file; remove --project",
                    args.project,
                )
            if args.transport == "stdio":
                _warn_if_outside_stdio_grant(policy.stdio, args.project, DEMO_DEFAULT_PROJECT if args.demo else None)
        if args.transport == "http":
            from server.http import serve_http

            return serve_http(settings)
        access: Access
        if settings.policy is not None:
            from server.policy import StdioPolicyAccess

            # The policy's server switch and its [stdio] grant; --project overrides stdio.default_project.
            fallback = DEMO_DEFAULT_PROJECT if args.demo else None
            access = StdioPolicyAccess(PolicyFile(settings.policy), project=args.project, fallback_project=fallback)
        else:
            access = StaticAccess(Grant(client_id=STDIO_CALLER, default_project=project))
        server = build_server(
            settings.db, access, CursorCodec(settings.cursor_secret), busy_timeout=settings.busy_timeout
        )
        settle_heap()
        if sys.stdin.isatty():
            _stdio_hint()
        anyio.run(serve_stdio, server)
        return 0


def _check_stdio() -> None:
    """A stdio server started with its standard input or output closed (`<&-`, `>&-`, a daemon's job) ended in a
    traceback: the client's messages come in on one and the answers go out on the other."""
    closed = [name for name, stream in (("input", sys.stdin), ("output", sys.stdout)) if stream is None]
    if closed:
        raise StoreError(
            f"serving on stdio needs standard input and output, and standard {' and '.join(closed)}"
            f" {'is' if len(closed) == 1 else 'are'} closed: an MCP client starts this command with pipes for both;"
            " to serve without them, use --transport http"
        )


def _stdio_hint() -> None:
    """Started by hand in a terminal, a stdio server would otherwise sit silent, waiting for JSON-RPC on its input.
    (An agent runtime gives it a pipe, never a terminal, so it never sees this.)"""
    command = shlex.join([*_launcher(), *sys.argv[1:]])
    print(
        "story-graph-mcp: serving MCP on stdio: an MCP client launches this command and talks to it over "
        f"stdin/stdout (docs/clients.md). To try it by hand (Node 22 or later):\n  npx -y {INSPECTOR} {command}\n"
        "Ctrl-C to stop.",
        file=sys.stderr,
        flush=True,
    )


def _launcher() -> list[str]:
    """This server's command as it was started, so the hint's Inspector command starts the same one: the console
    script by its bare name only when that is what PATH finds (`.venv/bin/story-graph-mcp serve --demo` from the
    README runs without the virtualenv on PATH), and `python -m server` with this interpreter."""
    script = Path(sys.argv[0])
    if script.name == "__main__.py":
        return [sys.executable, "-m", "server"]
    found = shutil.which(script.name)
    if found is not None and Path(found).resolve() == script.resolve():
        return [script.name]
    return [str(script)]


@contextmanager
def _database(args: argparse.Namespace) -> Iterator[Path]:
    """The database to serve: --db, or with --demo a fresh copy of the demo graph in a temporary folder that
    is removed when the server exits: end of input, Ctrl-C, a closed terminal or SIGTERM (uvicorn handles
    SIGINT and SIGTERM itself while it serves HTTP, and returns normally)."""
    folder = Path(tempfile.mkdtemp(prefix="story-graph-demo-")) if args.demo else None

    def cleanup() -> None:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    try:
        with _stop_on_signals(cleanup):
            if folder is None:
                yield args.db
                return
            from server.store.demo import write_demo

            write_demo(folder / "demo.db")
            yield folder / "demo.db"
    finally:
        cleanup()


STOP_SIGNALS: Final = {signal.SIGTERM: 0, signal.SIGINT: 130, signal.SIGHUP: 129}
"""The exit status for each signal that stops the server: SIGTERM is an orderly stop, Ctrl-C and a closed
terminal say so as a shell does (128 + the signal number)."""


@contextmanager
def _stop_on_signals(cleanup: Callable[[], None]) -> Iterator[None]:
    """Clean up, then exit at once. Unwinding is not an option on stdio: the SDK reads stdin in a worker thread
    that a signal cannot interrupt, so an orderly shutdown would wait for the client to close stdin (asyncio's
    own Ctrl-C handling cancels the serving task and then waits for that read: Ctrl-C did nothing until a
    second one, and then the process still waited). The server only reads, so there is nothing else to finish."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        cleanup()
        if signum == signal.SIGINT:
            print("story-graph-mcp: interrupted", file=sys.stderr, flush=True)
        os._exit(STOP_SIGNALS[signal.Signals(signum)])

    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
