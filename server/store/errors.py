"""Errors a user can fix: bad files, bad databases, bad interchange lines. One clear line each."""

from __future__ import annotations

import re
from typing import Final

Where = int | str
"""Where an imported line came from: a line number of a file, or a place such as
`table supervision_events row id=e-1` in a foreign database (or `line 3, observations[0]`)."""

LINE_NUMBER: Final = re.compile(r"line (\d+)(?:,|$)")


def location_of(where: Where) -> str:
    """The text that names a line's place in errors: `line 12` for a line number, else as given."""
    return f"line {where}" if isinstance(where, int) else where


class StoreError(Exception):
    """Base: printed as one line on stderr with a non-zero exit, never as a traceback."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what the interrupted command kept and how to go on: the CLI prints `interrupted; <note>`."""

    def __init__(self, note: str) -> None:
        super().__init__(note)
        self.note = note


class DatabaseUnusable(StoreError):
    """Missing file, not a SQLite database, or a schema version this build does not support."""


class ImportRejected(StoreError):
    """An imported line is invalid; the database was left exactly as it was.

    `location` says where the line came from in its source: `line 12` for a JSON Lines file, or
    e.g. `table supervision_events row id=7` for a source that reads another database.
    """

    def __init__(self, where: Where, field: str, problem: str) -> None:
        location = location_of(where)
        named = f", field '{field}'" if field else ""
        super().__init__(f"import aborted, nothing was written: {location}{named}: {problem}")
        self.location = location
        self.field = field
        self.problem = problem

    @property
    def line_number(self) -> int | None:
        """The line number, when the line came from a file (`line 12`, `line 12, observations[0]`)."""
        match = LINE_NUMBER.match(self.location)
        return int(match.group(1)) if match else None
