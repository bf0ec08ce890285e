"""stdio serving that answers every line: a line that is not one valid JSON-RPC message gets a JSON-RPC error.

The SDK's stdio transport reads one message per line and hands a line it cannot parse to the server as an
exception, which drops it without a reply, so a client that sent malformed JSON, a lone surrogate, `[]`,
`{}`, a batch or 5,000-deep nesting waits forever. Here such a line gets `-32700 Parse error` (not JSON) or
`-32600 Invalid Request` (JSON, but not one JSON-RPC message; batches are not part of MCP), with the
request's id when one can be read from it and null otherwise, and the server keeps serving. Everything else
is the SDK's transport unchanged (including its guard that keeps stray prints off the protocol stream).
A client that closes our stdout is noticed by polling it once a second (`_output_closed`), not only when the
next answer fails to be written: a client that stops reading but keeps our stdin open does not leave the
server running.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from typing import Any, Final

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from mcp.types import PARSE_ERROR, JSONRPCError
from pydantic import ValidationError

from server.jsonrpc_errors import error, invalid_message

log = logging.getLogger("story_graph_mcp.stdio")
OUTPUT_CHECK_SECONDS: Final = 1.0
"""How often the server checks whether the client still reads its stdout (a poll without waiting)."""
EXIT_GRACE_SECONDS: Final = 5.0
"""Time given to a normal stop after the client closed our stdout, before the process exits regardless."""


def refusal(exc: Exception) -> JSONRPCError:
    """The JSON-RPC error for a line the transport could not turn into a message."""
    if isinstance(exc, ValidationError):
        invalid = [err for err in exc.errors(include_url=False) if err["type"] == "json_invalid"]
        if invalid:
            # e.g. "Invalid JSON: lone leading surrogate in hex escape at line 1 column 60"
            return error(None, PARSE_ERROR, f"Parse error: {invalid[0]['msg']} (send one JSON-RPC message per line)")
        return invalid_message(exc)
    return error(None, PARSE_ERROR, "Parse error: the line could not be read")


class OutputClosed(BrokenPipeError):
    """The client no longer reads the server's stdout, seen before any write failed (logged where it is seen)."""


async def serve_stdio(server: MCPServer[Any]) -> None:
    """`MCPServer.run_stdio_async`, with every unreadable line answered instead of dropped."""
    try:
        await _serve(server)
    except* OutputClosed:
        pass
    except* (BrokenPipeError, ConnectionResetError):
        # The client closed our stdout (it exited or crashed) while calls were in flight: nothing can be
        # answered any more. The calls were cancelled and the database closed on the way out; stop quietly.
        log.info("the client closed the server's output; stopping")


async def _serve(server: MCPServer[Any]) -> None:
    lowlevel = server._lowlevel_server  # the SDK's own stdio runner drives this same object
    output = _watchable_output()
    try:
        await _serve_until_output_closes(server, lowlevel, output)
    finally:
        if output is not None:
            os.close(output)


async def _serve_until_output_closes(server: MCPServer[Any], lowlevel: Any, output: int | None) -> None:
    async with stdio_server() as (transport_in, write_stream):
        to_server, from_transport = create_context_streams[SessionMessage | Exception](0)

        async def pump() -> None:
            async with to_server:
                async for item in transport_in:
                    if isinstance(item, Exception):
                        reply = refusal(item)
                        log.warning("refused an unreadable stdio line: %s", reply.error.message)
                        await write_stream.send(SessionMessage(reply))
                    else:
                        await to_server.send(item)

        async def watch() -> None:
            if output is None:
                return
            await _output_closed(output)
            # Stopped like a failed write (serve_stdio). The SDK's stdin reader is a blocking read on a
            # thread, which nothing interrupts while the client keeps our stdin open: once the calls are
            # cancelled and the database closed, the process ends even if that read never returns.
            exit_later = threading.Timer(EXIT_GRACE_SECONDS, os._exit, (0,))
            exit_later.daemon = True
            exit_later.start()
            log.info("the client closed the server's output; stopping")
            raise OutputClosed

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(pump)
            tasks.start_soon(watch)
            await lowlevel.run(from_transport, write_stream, lowlevel.create_initialization_options())
            tasks.cancel_scope.cancel()


def _watchable_output() -> int | None:
    """A duplicate of stdout to watch for its reader going away (None when stdout is not open, or on a platform
    without poll(2): there the server notices on its next write)."""
    if not hasattr(select, "poll"):
        return None
    try:
        return os.dup(1)
    except OSError:
        return None


async def _output_closed(fd: int) -> None:
    """Return once nobody reads `fd` any more: a pipe whose read end closed reports POLLERR, a socket whose
    peer closed POLLHUP (both are reported whatever events are asked for, so nothing else wakes this up). A
    client that closes our stdout but keeps its end of our stdin open would otherwise be noticed only on the
    next answer written to it."""
    poller = select.poll()
    poller.register(fd, 0)
    while True:
        events = poller.poll(0)
        if any(flags & (select.POLLERR | select.POLLHUP) for _, flags in events):
            return
        await anyio.sleep(OUTPUT_CHECK_SECONDS)
