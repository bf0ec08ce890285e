"""A command's results on standard output: a reader that stops early (`| head`) is its choice, not an error; a
failed write (`> /dev/full`, a full disk) is one line on stderr, never a traceback."""

from __future__ import annotations

import os
import sys

from server.store.errors import StoreError


def print_out(text: str) -> None:
    """Print one result line (or block) now, so a failure is reported here rather than at the interpreter's exit."""
    try:
        print(text, flush=True)
    except OSError as exc:
        failure = stdout_failure(exc)
        if failure is not None:
            raise failure from None


def stdout_failure(exc: OSError) -> StoreError | None:
    """Standard output failed: point it at devnull so the interpreter's final flush does not fail again (Python
    docs, "Note on SIGPIPE"). None when the reader closed the pipe, which is not an error."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if isinstance(exc, BrokenPipeError):
        return None
    return StoreError(f"cannot write to standard output: {exc.strerror or exc}")
