"""stdio serving that answers every line: a line that is not one valid JSON-RPC message gets a JSON-RPC error.

The SDK's stdio transport reads one message per line and hands a line it cannot parse to the server as an
exception, which drops it without a reply, so a client that sent malformed JSON, a lone surrogate, `[]`,
`{}`, a batch or 5,000-deep nesting waits forever. Here such a line gets `-32700 Parse error` (not JSON) or
`-32600 Invalid Request` (JSON, but not one JSON-RPC message; batches are not part of MCP), with the
request's id when one can be read from it and null otherwise, and the server keeps serving.

The SDK's reader also gathered a line whole, however long, so a client that wrote a huge line, or bytes with no
newline at all, grew the server's memory without limit. Stdin is read here instead (`StdinLines`): a line over
`MAX_MESSAGE_BYTES` (4 MiB, the HTTP body limit) is answered `-32600` with id null as soon as it passes the limit,
and the rest of it is dropped as it arrives, unread. A line that is not UTF-8 is `-32700`, as the same HTTP body
is (the SDK's reader replaced the bad bytes with U+FFFD and served the message). The rest is the SDK's: lines end at
`\\n`, `\\r\\n` or `\\r`, a last line without one is read at end of input, fd 0 is moved out of the way while
serving (`_claim_fd`, the SDK's own, so a handler or child that reads stdin gets end of input), and so is fd 1 (to
stderr: a stray print stays off the protocol stream). The answers are written as the SDK's transport wrote them
(one JSON line each), but without its two thread hops per answer where they can be spared (`AnswerPipe`).
A client that closes our stdout is noticed by polling it once a second (`_output_closed`), not only when the
next answer fails to be written: a client that stops reading but keeps our stdin open does not leave the
server running.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import stat
import sys
import threading
from dataclasses import dataclass
from typing import Any, BinaryIO, Final

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import _claim_fd, _open_stdin_diversion, _open_stdout_diversion
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from server.jsonrpc_errors import MAX_MESSAGE_BYTES, error, invalid_message

if sys.platform != "win32":
    import fcntl
    import termios

log = logging.getLogger("story_graph_mcp.stdio")
OUTPUT_CHECK_SECONDS: Final = 1.0
"""How often the server checks whether the client still reads its stdout (a poll without waiting)."""
EXIT_GRACE_SECONDS: Final = 5.0
"""Time given to a normal stop after the client closed our stdout, before the process exits regardless."""
INPUT_END_GRACE_SECONDS: Final = 30.0
"""Time given to the requests still being served when the client closes our stdin, before the session closes and
cancels them."""
READ_BYTES: Final = 64 * 1024
"""The most read from stdin at once: with the line being gathered (at most `MAX_MESSAGE_BYTES`), all of its input
the server holds."""
LINE_TOO_LONG: Final = (
    f"Invalid Request: the line is over {MAX_MESSAGE_BYTES:,} bytes ({MAX_MESSAGE_BYTES // 2**20} MiB), the most"
    " this server reads as one message; it was dropped unread (send one JSON-RPC message per line)"
)


def refusal(exc: Exception) -> JSONRPCError:
    """The JSON-RPC error for a line the transport could not turn into a message."""
    if isinstance(exc, ValidationError):
        invalid = [err for err in exc.errors(include_url=False) if err["type"] == "json_invalid"]
        if invalid:
            # e.g. "Invalid JSON: lone leading surrogate in hex escape at line 1 column 60"
            return error(None, PARSE_ERROR, f"Parse error: {invalid[0]['msg']} (send one JSON-RPC message per line)")
        return invalid_message(exc)
    return error(None, PARSE_ERROR, "Parse error: the line could not be read")


class OverLong:
    """A line over `MAX_MESSAGE_BYTES`, dropped as it arrived (what it said is unknown, so its id is too)."""


OVER_LONG: Final = OverLong()


class StdinLines:
    """The lines a client writes to `fd`, read a chunk at a time, holding at most `limit` bytes of one.

    `next` blocks (run it on a thread). Lines end as the SDK's reader ended them (a text file's universal
    newlines): at `\\n`, `\\r\\n` or `\\r`; the end is not part of the line or of its length."""

    def __init__(self, fd: int, limit: int) -> None:
        self._fd = fd
        self._limit = limit
        self._chunk = b""
        self._at = 0  # how much of `_chunk` has been used
        self._line = bytearray()
        self._dropping = False  # inside a line already answered as over-long: the rest of it is skipped
        self._after_cr = False  # the last line ended at a `\r` at the end of a chunk: a `\n` next belongs to it

    def next(self) -> bytes | OverLong | None:
        """The next line; `OVER_LONG` once a line passes the limit, before the rest of it has arrived (the rest
        is then skipped); None at end of input."""
        while True:
            if self._at == len(self._chunk):
                # os.read, not the buffered file: one read returns what the pipe has, up to READ_BYTES, where a
                # buffered readline waits for a line end. Nothing else reads this descriptor.
                self._chunk, self._at = os.read(self._fd, READ_BYTES), 0
                if not self._chunk:
                    return self._last()
                if self._after_cr and self._chunk.startswith(b"\n"):
                    self._at = 1
                self._after_cr = False
                continue
            end = _line_end(self._chunk, self._at)
            stop = len(self._chunk) if end is None else end[0]
            if not self._dropping:
                self._line += memoryview(self._chunk)[self._at : stop]
            self._at = stop if end is None else end[1]
            # A `\r` that ends the chunk may be the first half of a `\r\n`.
            self._after_cr = end is not None and self._at == len(self._chunk) and self._chunk.endswith(b"\r")
            if not self._dropping and len(self._line) > self._limit:
                self._line = bytearray()
                self._dropping = end is None
                return OVER_LONG
            if end is not None:
                if self._dropping:
                    self._dropping = False
                    continue
                line, self._line = bytes(self._line), bytearray()
                return line

    def _last(self) -> bytes | None:
        """At end of input: a last line without its line end is still a line (the SDK's reader read it too)."""
        if self._dropping or not self._line:
            self._dropping = False
            return None
        line, self._line = bytes(self._line), bytearray()
        return line


def _line_end(chunk: bytes, start: int) -> tuple[int, int] | None:
    """Where the first line end in `chunk` from `start` begins and where it ends (after a `\\r\\n`'s `\\n`). With
    bytes.find, which scans at memory speed: a regular expression took seconds for a 200 MiB line."""
    lf = chunk.find(b"\n", start)
    cr = chunk.find(b"\r", start, len(chunk) if lf < 0 else lf)
    if cr >= 0:
        return cr, cr + 2 if cr + 1 == lf else cr + 1
    return None if lf < 0 else (lf, lf + 1)


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
    # The SDK's own guard for fd 0, as its stdio_server applies it when it reads stdin itself: the wire moves to a
    # private descriptor and fd 0 reads the null device until `release` puts it back.
    wire, release = _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
    try:
        await _serve_lines(lowlevel, wire.fileno(), output)
    finally:
        if release is not None:
            release()


async def _serve_lines(lowlevel: Any, wire: int, output: int | None) -> None:
    # The SDK's guard for fd 1, as its stdio_server applies it: the wire moves to a private descriptor and fd 1
    # points at stderr while serving, so a stray print cannot break the protocol stream.
    out, release = _claim_fd(1, sys.stdout, "wb", _open_stdout_diversion)
    try:
        await _serve_on(lowlevel, wire, out, output)
    finally:
        if release is not None:
            release()


async def _serve_on(lowlevel: Any, wire: int, out: BinaryIO, output: int | None) -> None:
    to_server, from_transport = create_context_streams[SessionMessage | Exception](0)
    to_client, from_server = create_context_streams[SessionMessage](0)
    # An answer that fits in the client's pipe or socket, all of whose earlier answers it has read, is written by the
    # event loop itself (`AnswerPipe`); the SDK's transport handed every answer's write and then its flush to a worker
    # thread and back, two thread hops per call, each a wait for a CPU on a busy machine (docs/performance.md, "The
    # selective p95 at 1M"). Any other answer is written and flushed on a thread in one hop.
    pipe = AnswerPipe.of(out)
    unanswered = Unanswered()

    async def pump() -> None:
        lines = StdinLines(wire, MAX_MESSAGE_BYTES)
        async with to_server:
            while (line := await anyio.to_thread.run_sync(lines.next)) is not None:
                if isinstance(line, OverLong):
                    reply = error(None, INVALID_REQUEST, LINE_TOO_LONG)
                else:
                    try:
                        # From the bytes, as an HTTP body is parsed: a line that is not UTF-8 is not JSON.
                        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except Exception as exc:  # any failure is answered, as the SDK's reader passed on any
                        reply = refusal(exc)
                    else:
                        unanswered.read(message)
                        await to_server.send(SessionMessage(message))
                        continue
                log.warning("refused an unreadable stdio line: %s", reply.error.message)
                await to_client.send(SessionMessage(reply))
            # End of input: closing the session now would cancel the requests still being served.
            await unanswered.settle(INPUT_END_GRACE_SECONDS)

    async def answer() -> None:
        async with from_server:
            async for session_message in from_server:
                data = (session_message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()
                written = 0 if pipe is None else pipe.write_now(data)
                if written < len(data):
                    await anyio.to_thread.run_sync(_write_and_flush, out, data[written:])
                unanswered.written(session_message.message)

    async def watch() -> None:
        if output is None:
            return
        await _output_closed(output)
        # Stopped like a failed write (serve_stdio). The stdin reader is a blocking read on a thread, which
        # nothing interrupts while the client keeps our stdin open: once the calls are cancelled and the
        # database closed, the process ends even if that read never returns.
        exit_later = threading.Timer(EXIT_GRACE_SECONDS, os._exit, (0,))
        exit_later.daemon = True
        exit_later.start()
        log.info("the client closed the server's output; stopping")
        raise OutputClosed

    async with anyio.create_task_group() as writing:
        writing.start_soon(answer)  # ends once the session closed `to_client` and every answer is written
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(pump)
            tasks.start_soon(watch)
            async with to_client:
                await lowlevel.run(from_transport, to_client, lowlevel.create_initialization_options())
            tasks.cancel_scope.cancel()


class Unanswered:
    """The client's requests not yet answered. A client that wrote its last requests and closed our stdin (a script
    piping requests in; the spec's way to stop a stdio server) lost their answers: at the end of input the SDK's
    session closed and cancelled them, answering some `Connection closed` and others not at all. The session now
    closes once they are answered (or cancelled by the client), or after a grace period."""

    def __init__(self) -> None:
        self._ids: set[str | int] = set()
        self._changed = anyio.Event()

    def read(self, message: JSONRPCMessage) -> None:
        if isinstance(message, JSONRPCRequest):
            self._ids.add(message.id)
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            self._done((message.params or {}).get("requestId"))  # a cancelled request is not answered

    def written(self, message: JSONRPCMessage) -> None:
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self._done(message.id)

    def _done(self, request_id: Any) -> None:
        if request_id in self._ids:
            self._ids.discard(request_id)
            self._changed.set()
            self._changed = anyio.Event()

    async def settle(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            while self._ids:
                await self._changed.wait()


@dataclass(frozen=True)
class AnswerPipe:
    """The client's end of our answers when `write_now` can tell whether an answer fits in it without waiting (Linux):
    a pipe (the MCP Python SDK's clients), or a Unix stream socket (Node's child processes: the Inspector, desktop
    clients)."""

    fd: int
    socket_room: int | None
    """For a socket, the most one write may send without waiting (half its send buffer: the rest covers the kernel's
    own overhead per message); None for a pipe (its size is read at every write)."""

    @classmethod
    def of(cls, out: BinaryIO) -> AnswerPipe | None:
        """None for anything else (a file, a terminal, stdout served in place): its answers are written on a thread."""
        if out is sys.stdout.buffer or not sys.platform.startswith("linux"):
            return None
        try:
            fd = out.fileno()
            mode = os.fstat(fd).st_mode
            if stat.S_ISFIFO(mode):
                return cls(fd, None)
            if stat.S_ISSOCK(mode):
                with socket.socket(fileno=os.dup(fd)) as sock:
                    if sock.family == socket.AF_UNIX and sock.type == socket.SOCK_STREAM:
                        return cls(fd, sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // 2)
        except (OSError, ValueError):
            pass
        return None

    def write_now(self, data: bytes) -> int:
        """Write `data` at once if the client has read everything before it and it fits: then a write to the blocking
        descriptor returns at once, so the event loop never waits for the client. The bytes written: 0 when it does
        not fit (the caller writes it on a thread, which may wait)."""
        if self.socket_room is None:
            unread = _int_ioctl(self.fd, termios.FIONREAD)  # bytes in the pipe
            room = fcntl.fcntl(self.fd, fcntl.F_GETPIPE_SZ)
        else:
            unread = _int_ioctl(self.fd, termios.TIOCOUTQ)  # bytes sent and not yet read by the peer (SIOCOUTQ)
            room = self.socket_room
        if unread or len(data) > room:
            return 0
        return os.write(self.fd, data)


def _int_ioctl(fd: int, request: int) -> int:
    return int.from_bytes(fcntl.ioctl(fd, request, bytes(4)), sys.byteorder)


def _write_and_flush(out: BinaryIO, data: bytes) -> None:
    out.write(data)
    out.flush()


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
