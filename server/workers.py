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
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from typing import Final

import uvicorn
from uvicorn.supervisors import Multiprocess

from server.http import KEEP_ALIVE_SECONDS, listening_socket
from server.settings import ServeSettings

log = logging.getLogger("story_graph_mcp.http")

BACKLOG: Final = 2048
"""Pending connections per listening socket (uvicorn's default)."""


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
    )
    check_port_free(http.host, http.port)  # SO_REUSEPORT would otherwise share a port another server holds
    # Linux balances new connections over the sockets of a SO_REUSEPORT group; other systems accept the option
    # without balancing (one socket would get every connection), so they share one socket instead.
    supervisor = SocketPerWorker if sys.platform.startswith("linux") else SharedSocket
    # uvicorn logs the address only when it binds the socket itself; say it, as one process does.
    host = f"[{http.host}]" if ":" in http.host else http.host
    log.info("serving on http://%s:%d/mcp with %d worker processes", host, http.port, http.workers)
    supervisor(config, http.host, http.port).run()
    return 0


def check_port_free(host: str, port: int) -> None:
    listening_socket(host, port, reuse_port=False).close()


class SocketPerWorker(Multiprocess):
    """uvicorn's supervisor (start, health checks, restarts, signals), handing each worker it starts a socket of
    its own: uvicorn reads `self.sockets` once per worker it starts."""

    def __init__(self, config: uvicorn.Config, host: str, port: int) -> None:
        self._address = (host, port)
        super().__init__(config, sockets=[])

    @property
    def sockets(self) -> list[socket.socket]:
        return [listening_socket(*self._address, reuse_port=True)]

    @sockets.setter
    def sockets(self, _: list[socket.socket]) -> None:
        """uvicorn's __init__ assigns the shared list; each worker gets a new socket instead."""


class SharedSocket(Multiprocess):
    def __init__(self, config: uvicorn.Config, host: str, port: int) -> None:
        super().__init__(config, sockets=[listening_socket(host, port, reuse_port=False)])
