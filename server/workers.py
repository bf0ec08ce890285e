"""`serve --transport http --workers N`: N worker processes, each with its own listening socket on the one port.

uvicorn's own `--workers` gives every worker the same listening socket, and two things follow:

* The socket is created with protocol 0, so asyncio does not recognise its connections as TCP and leaves
  Nagle's algorithm on: the body of every answer, written after its headers, waits for the client's
  delayed ACK, about 40 ms per request.
* Whichever worker wakes first accepts every pending connection at once, so the keep-alive connections of a
  batch of clients (or of a proxy's connection pool) can all land on one worker while the others idle.

Here every worker (and every replacement uvicorn's supervisor starts for one that died) gets a socket of its
own, bound with SO_REUSEPORT, so the kernel spreads new connections over the workers, and created as TCP, so
its connections get TCP_NODELAY. Outside Linux, where SO_REUSEPORT does not balance, all workers share one
socket, with TCP_NODELAY set. Each worker builds the app with `server.http:create_app` from the settings, handed over as
its environment.

The supervisor says `serving on …` only once every worker answers: each worker starts in a process of its own and
imports and builds the app first (seconds on a busy machine), and a script that waits for that line and then sends
requests got connection errors until then. uvicorn's own health pipe tells whether a worker's server has started.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess
from uvicorn.supervisors.multiprocess import Process

from server.http import BACKLOG, KEEP_ALIVE_SECONDS, listening_socket
from server.http_connections import RequestHeadDeadline
from server.settings import ServeSettings

log = logging.getLogger("story_graph_mcp.http")


def serve_workers(settings: ServeSettings) -> int:
    os.environ.update(settings.worker_env())
    http = settings.http
    config = uvicorn.Config(
        "server.http:create_app",
        factory=True,
        host=http.host,
        port=http.port,
        workers=http.workers,
        backlog=BACKLOG,
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        http=RequestHeadDeadline,  # a connection that sends no request head is closed too (server/http_connections)
    )
    check_port_free(http.host, http.port)  # SO_REUSEPORT would otherwise share a port another server holds
    # Linux balances new connections over the sockets of a SO_REUSEPORT group; other systems accept the option
    # without balancing (one socket would get every connection), so they share one socket instead.
    supervisor = SocketPerWorker if sys.platform.startswith("linux") else SharedSocket
    # uvicorn logs the address only when it binds the socket itself; say it, as one process does, once it is true.
    host = f"[{http.host}]" if ":" in http.host else http.host
    address = f"http://{host}:{http.port}/mcp"
    log.info("starting %d worker processes for %s", http.workers, address)
    running = supervisor(config, http.host, http.port, address)
    running.run()
    # uvicorn's supervisor returns normally when a worker failed to start, as on SIGTERM: say which it was.
    return STARTUP_FAILURE if running.start_failed else 0


def check_port_free(host: str, port: int) -> None:
    listening_socket(host, port, reuse_port=False).close()


class AnnouncesReady(Multiprocess):
    """uvicorn's supervisor (start, health checks, restarts, signals), logging `serving on ADDRESS with N worker
    processes` once, when every worker's server has started (listens and answers). It asks on each of uvicorn's
    half-second health rounds, through the pipe those use, so it adds no wait of its own."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket], address: str) -> None:
        self._address_shown = address
        self._announced = False
        self._again = False
        """A worker was replaced: the next announcement says `again`."""
        self.start_failed = False
        """A worker exited with uvicorn's start-up failure status, and the supervisor stopped for it."""
        super().__init__(config, sockets=sockets)

    def keep_subprocess_alive(self) -> None:
        stopping = self.should_exit.is_set()
        before = list(self.processes)
        super().keep_subprocess_alive()
        if self.should_exit.is_set() and not stopping:
            # Only a worker that failed to start makes uvicorn's health round stop the supervisor (a signal sets
            # should_exit in handle_signals instead): `serve` exited 0 for it, a clean stop to a service manager.
            self.start_failed = True
            return
        for old, new in zip(before, self.processes, strict=False):
            if new is not old:  # uvicorn replaced a worker that died or stopped answering its health checks
                log.warning(
                    "worker process %s %s; started worker process %s in its place", old.pid, _ended(old), new.pid
                )
                self._announced, self._again = False, True
        if self._announced or self.should_exit.is_set() or len(self.processes) < self.processes_num:
            return
        timeout = self.config.timeout_worker_healthcheck
        if all(process.is_ready(timeout=timeout) for process in self.processes):
            self._announced = True
            again = " again" if self._again else ""
            log.info("serving on %s with %d worker processes%s", self._address_shown, len(self.processes), again)


def _ended(process: Process) -> str:
    """How a worker ended, as an operator reads it: its exit status, or the signal that killed it (SIGKILL: the OOM
    killer, someone, or uvicorn after it missed its health checks)."""
    code = process.exitcode
    if code is None:  # not reaped (uvicorn joins a worker before replacing it)
        return "ended"
    if code >= 0:
        return f"exited with status {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


class SocketPerWorker(AnnouncesReady):
    """Each worker it starts gets a socket of its own: uvicorn reads `self.sockets` once per worker it starts."""

    def __init__(self, config: uvicorn.Config, host: str, port: int, address: str) -> None:
        self._address = (host, port)
        super().__init__(config, [], address)

    @property
    def sockets(self) -> list[socket.socket]:
        return [listening_socket(*self._address, reuse_port=True)]

    @sockets.setter
    def sockets(self, _: list[socket.socket]) -> None:
        """uvicorn's __init__ assigns the shared list; each worker gets a new socket instead."""


class SharedSocket(AnnouncesReady):
    def __init__(self, config: uvicorn.Config, host: str, port: int, address: str) -> None:
        super().__init__(config, [listening_socket(host, port, reuse_port=False)], address)
