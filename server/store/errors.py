"""Errors a user can fix: bad files, bad databases, bad interchange lines. One clear line each."""

from __future__ import annotations

Where = int | str
"""Where an imported line came from: a line number of a file, or a place such as
`table supervision_events row id=e-1` in a foreign database."""


class StoreError(Exception):
    """Base: printed as one line on stderr with a non-zero exit, never as a traceback."""


class DatabaseUnusable(StoreError):
    """Missing file, not a SQLite database, or a schema version this build does not support."""


class ImportRejected(StoreError):
    """An imported line is invalid; the database was left exactly as it was."""

    def __init__(self, where: Where, field: str, problem: str) -> None:
        place = f"line {where}" if isinstance(where, int) else where
        super().__init__(
            f"import aborted, nothing was written: {place}" + (f", field '{field}'" if field else "") + f": {problem}"
        )
        self.where = where
        self.field = field
        self.problem = problem

    @property
    def line_number(self) -> int | None:
        """The line number, when the line came from a file."""
        return self.where if isinstance(self.where, int) else None
