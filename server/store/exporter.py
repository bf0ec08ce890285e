"""`db export`: write the whole graph as a JSON Lines interchange file.

Lines come in `KIND_ORDER` and, within a kind, in key order, read from one snapshot, so the same
graph always exports to the same bytes and importing the export reproduces it. Rows are read with
cursors and written as they come, so memory does not grow with the size of the graph.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

import orjson

from server.contracts.interchange import KIND_ORDER
from server.store.errors import Interrupted, StoreError
from server.store.jsonl import INTERRUPTED_EXPORT
from server.store.kinds import KINDS
from server.store.lines import iter_lines
from server.store.migrate import open_store
from server.store.progress import Progress
from server.store.stdout import CLOSED, stdout_failure

DATABASE_FILES: Final = ("", "-wal", "-shm", "-journal")
"""The database file and the files SQLite keeps next to it: an export must never be renamed over one of them."""


def export_file(db_path: Path, out: Path | None, *, progress: Progress | None = None) -> int:
    """Export `db_path` to `out` (stdout when None); return the number of lines written.

    Ctrl-C raises `Interrupted`, saying what became of the output: a FILE is left as it was; standard output or
    a FILE that is not a regular file has received part of the export, and then a line that says so."""
    progress = progress or Progress.silent()
    if out is not None:
        _refuse_database_files(db_path, out)
    conn = open_store(db_path, write=False)
    try:
        conn.execute("BEGIN")  # one read snapshot, even while another process writes
        total = _count(conn)
        progress.phase("writing", "lines", total)
        if out is None:
            return _to_stdout(conn, progress, total)
        if out.exists() and not out.is_file():
            # A FIFO, a device, /dev/stdout: write into it. Renaming a new file over it would replace the
            # node itself (as root, even /dev/full).
            return _to_special_file(conn, out, progress, total)
        target = out.resolve()  # through a symlink: the link stays, the file it points to is replaced
        existed = target.exists()
        # Write next to the target and rename, so a failed export never leaves half a file behind.
        partial = target.with_name(target.name + ".partial")
        try:
            with partial.open("wb") as stream:
                if existed:  # the new file keeps the old one's permissions (a private backup stays private)
                    os.chmod(stream.fileno(), stat.S_IMODE(target.stat().st_mode))
                count = _write(conn, stream, progress, _Written())
            os.replace(partial, target)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise StoreError(f"cannot write {out}: {_write_problem(target, partial) or exc.strerror or exc}") from None
        except KeyboardInterrupt:
            partial.unlink(missing_ok=True)
            raise Interrupted(f"{out} was left as it was" if existed else f"{out} was not written") from None
        except BaseException:  # a stored line that is not valid, a database error: no half file either
            partial.unlink(missing_ok=True)
            raise
        return count
    finally:
        progress.stop()
        conn.close()


@dataclass
class _Written:
    """Lines handed to the stream so far (what an interrupted export has sent)."""

    lines: int = 0


def _interrupted_stream(stream: BinaryIO, written: _Written, total: int, where: str) -> Interrupted:
    """End a stream the export was interrupted in with a line that says so (INTERRUPTED_EXPORT): cut between two
    lines, it would look like a whole export, and `db import` of it would load a part of the graph without a word."""
    try:
        # After a newline of its own: the interrupt may have cut a line short.
        stream.write(f"\n{INTERRUPTED_EXPORT}\n".encode())
        stream.flush()
    except OSError:  # the reader has gone (`| head`), or the disk is full: it has no complete export either way
        pass
    return Interrupted(
        f"{where} received only about the first {written.lines:,} of {total:,} lines: it is not a complete export (its"
        " last line says so, and an import of it fails)"
    )


def _write_problem(target: Path, partial: Path) -> str | None:
    """Where the directory is the problem: `Permission denied` for a file the user may write, or `No such file or
    directory` for a path whose folder is missing, sent the operator after the file."""
    folder = target.parent
    if not folder.is_dir():
        return f"the directory {folder} does not exist; create it first (mkdir -p {folder})"
    if not os.access(folder, os.W_OK):
        return (
            f"the directory {folder} is read-only for this user, and an export is written to {partial.name} next to"
            f" {target.name}, then renamed over it: make the directory writable, or export to another directory"
        )
    return None


def _refuse_database_files(db_path: Path, out: Path) -> None:
    """`db export --db graph.db graph.db` (FILE and --db swapped, or a completion gone wrong) replaced the
    database with its own export, and `graph.db-wal` the live write-ahead log: refuse both before writing."""
    target = out.resolve()
    database = db_path.resolve()
    for suffix in DATABASE_FILES:
        own = database.with_name(database.name + suffix)
        if target == own or (suffix == "" and target.exists() and own.exists() and target.samefile(own)):
            what = "the database itself" if suffix == "" else f"the database's {suffix[1:]} file"
            raise StoreError(
                f"will not export to {out}: it is {what} ({db_path}); name a new file for the export, such as"
                f" {database.stem}.jsonl, or leave FILE out to write to standard output"
            )


def export_lines(conn: sqlite3.Connection) -> Iterator[bytes]:
    """Every stored object as one encoded interchange line (with its newline)."""
    for kind in KIND_ORDER:
        for line in iter_lines(conn, kind):
            yield orjson.dumps(line.model_dump(mode="json"), option=orjson.OPT_APPEND_NEWLINE)


def _count(conn: sqlite3.Connection) -> int:
    """The number of lines the export will write: one per stored object."""
    return sum(conn.execute(f"SELECT count(*) FROM {KINDS[kind].table}").fetchone()[0] for kind in KIND_ORDER)


def _to_stdout(conn: sqlite3.Connection, progress: Progress, total: int) -> int:
    if sys.stdout is None:  # started with standard output closed (`>&-`)
        raise StoreError(f"cannot write to standard output: {CLOSED}; name a FILE to export to")
    written = _Written()
    try:
        return _write(conn, sys.stdout.buffer, progress, written)
    except OSError as exc:
        failure = stdout_failure(exc)
        if failure is None:  # the reader stopped early (`| head`)
            return 0
        raise failure from None
    except KeyboardInterrupt:
        raise _interrupted_stream(sys.stdout.buffer, written, total, "standard output") from None


def _to_special_file(conn: sqlite3.Connection, out: Path, progress: Progress, total: int) -> int:
    written = _Written()
    try:
        with out.open("wb") as stream:
            try:
                return _write(conn, stream, progress, written)
            except KeyboardInterrupt:
                raise _interrupted_stream(stream, written, total, str(out)) from None
    except OSError as exc:
        raise StoreError(f"cannot write {out}: {exc.strerror or exc}") from None


def _write(conn: sqlite3.Connection, stream: BinaryIO, progress: Progress, written: _Written) -> int:
    for encoded in export_lines(conn):
        stream.write(encoded)
        written.lines += 1
        if written.lines % 1000 == 0:
            progress.update(written.lines)
    stream.flush()
    progress.update(written.lines)
    progress.finish()
    return written.lines
