"""A command's results on standard output: a reader that stops early (`| head`) is its choice, not an error; a
failed write (`> /dev/full`, a full disk) is one line on stderr, never a traceback."""

from __future__ import annotations

import os
import sys
from typing import Final

from server.store.errors import StoreError

CLOSED: Final = "it is closed"


def print_out(text: str) -> None:
    """Print one result line (or block) now, so a failure is reported here rather than at the interpreter's exit."""
    if sys.stdout is None:  # started with standard output closed (`>&-`): print() drops the text without a word
        raise StoreError(f"cannot write to standard output: {CLOSED}")
    try:
        print(text, flush=True)
    except OSError as exc:
        failure = stdout_failure(exc)
        if failure is not None:
            raise failure from None


def print_report(text: str) -> None:
    """Print what a command changed (a migration, an import, a file written). When standard output fails, the
    change is done all the same: the report goes to stderr after the reason, and the command succeeds (an error,
    exit status 2, says that nothing was changed)."""
    try:
        print_out(text)
    except StoreError as exc:
        print(f"story-graph-mcp: {exc}; the report instead:\n{text}", file=sys.stderr, flush=True)


def stdout_failure(exc: OSError) -> StoreError | None:
    """Standard output failed: point it at devnull so the interpreter's final flush does not fail again (Python
    docs, "Note on SIGPIPE"). None when the reader closed the pipe, which is not an error."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if isinstance(exc, BrokenPipeError):
        return None
    return StoreError(f"cannot write to standard output: {exc.strerror or exc}")
