"""HTTP connections that send no request: closed after the keep-alive timeout, like an idle keep-alive connection.

uvicorn closes a keep-alive connection that idles `timeout_keep_alive` seconds after an answer, but it starts that
timer only once an answer is complete, and stops it at the first byte received. So a connection that sends nothing
after it opens, or sends a request head a byte at a time (slowloris), or a body nobody reads after its answer, was
kept open forever: a few hundred of them, made without any token, used up the process's file descriptors (1,024
under systemd's default `LimitNOFILE`) and every client was refused. Here a connection must send a whole request
head (request line and headers) within the keep-alive timeout of opening, or of its last answer; after the head,
the request is the app's (its body is limited and read by the app, behind the token check).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol


class RequestHeadDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request head (module docstring). Passed as `http=` to
    uvicorn.Config by `serve` and its workers; uvicorn's own `--http` choices cannot name it."""

    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._request_running():  # its head has arrived: the deadline is met
            self._cancel_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # A pipelined request already read may have started in super(): its head is in, no deadline for it.
        if not self.transport.is_closing() and not self._request_running():
            self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_deadline()
        super().connection_lost(exc)

    def _request_running(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _arm_head_deadline(self) -> None:
        self._cancel_head_deadline()
        self._head_deadline = self.loop.call_later(self.timeout_keep_alive, self._head_deadline_passed)

    def _cancel_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_deadline_passed(self) -> None:
        self._head_deadline = None
        if not self.transport.is_closing():
            self.transport.close()  # no answer: there is no request to answer
