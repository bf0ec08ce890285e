"""`db export`: write the whole graph as a JSON Lines interchange file.

Lines come in `KIND_ORDER` and, within a kind, in key order, read from one snapshot, so the same
graph always exports to the same bytes and importing the export reproduces it.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import orjson

from server.contracts.interchange import KIND_ORDER
from server.store.errors import StoreError
from server.store.lines import iter_lines
from server.store.migrate import open_store


def export_file(db_path: Path, out: Path | None) -> int:
    """Export `db_path` to `out` (stdout when None); return the number of lines written."""
    conn = open_store(db_path, write=False)
    try:
        conn.execute("BEGIN")  # one read snapshot, even while another process writes
        if out is None:
            return _to_stdout(conn)
        # Write next to the target and rename, so a failed export never leaves half a file behind.
        partial = out.with_name(out.name + ".partial")
        try:
            with partial.open("wb") as stream:
                count = _write(conn, stream)
            os.replace(partial, out)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise StoreError(f"cannot write {out}: {exc.strerror or exc}") from None
        return count
    finally:
        conn.close()


def export_lines(conn: sqlite3.Connection) -> Iterator[bytes]:
    """Every stored object as one encoded interchange line (with its newline)."""
    for kind in KIND_ORDER:
        for line in iter_lines(conn, kind):
            yield orjson.dumps(line.model_dump(mode="json"), option=orjson.OPT_APPEND_NEWLINE)


def _to_stdout(conn: sqlite3.Connection) -> int:
    try:
        return _write(conn, sys.stdout.buffer)
    except BrokenPipeError:
        # The reader stopped early (`| head`): not an error. Point stdout at devnull so the
        # interpreter's final flush does not fail again (Python docs, "Note on SIGPIPE").
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _write(conn: sqlite3.Connection, stream: BinaryIO) -> int:
    count = 0
    for encoded in export_lines(conn):
        stream.write(encoded)
        count += 1
    stream.flush()
    return count
