"""Logging: one format on stderr for the server, the SDK and uvicorn; the SDK's per-request noise removed.

What the log holds: an access line per HTTP request (`story_graph_mcp.access`), policy reloads and policy
errors (`story_graph_mcp.policy`), refusals (INFO) and read failures (ERROR) of tool calls
(`story_graph_mcp.calls`), unreadable stdio lines, and the SDK's and uvicorn's start-up lines and real errors.
Never a token, a token hash or tool arguments. stdout is left alone: on stdio it is the protocol stream.
"""

from __future__ import annotations

import logging
import sys
from typing import Final

from starlette.requests import ClientDisconnect

FORMAT: Final = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"
"""The process id names the worker that wrote a line (`serve --workers N`): uvicorn's `Started server process
[PID]` line says which worker has it."""
QUIET: Final = {
    # Logs "Terminating session: None" at INFO for every stateless request.
    "mcp.server.streamable_http": logging.WARNING,
}


class ClientDisconnectFilter(logging.Filter):
    """A client that hangs up before sending its whole request body is not a server error: one line, no
    traceback (the SDK logs it with logger.exception)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], ClientDisconnect):
            record.exc_info = None
            record.exc_text = None
            record.msg, record.args = "client disconnected before sending the whole request", ()
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def configure_logging(level: int = logging.INFO) -> None:
    """Idempotent: safe to call from `serve` and from the uvicorn factory in every worker."""
    root = logging.getLogger()
    if not any(getattr(handler, "_story_graph", False) for handler in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT))
        handler._story_graph = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(level)
    for name, quiet in QUIET.items():
        logging.getLogger(name).setLevel(quiet)
    sdk = logging.getLogger("mcp.server.streamable_http")
    if not any(isinstance(f, ClientDisconnectFilter) for f in sdk.filters):
        sdk.addFilter(ClientDisconnectFilter())
