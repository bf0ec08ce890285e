"""Errors a user can fix: bad files, bad databases, bad interchange lines. One clear line each."""


class StoreError(Exception):
    """Base: printed as one line on stderr with a non-zero exit, never as a traceback."""


class DatabaseUnusable(StoreError):
    """Missing file, not a SQLite database, or a schema version this build does not support."""


class ImportRejected(StoreError):
    """An interchange line is invalid; the database was left exactly as it was."""

    def __init__(self, line_number: int, field: str, problem: str) -> None:
        where = f"line {line_number}" + (f", field '{field}'" if field else "")
        super().__init__(f"import aborted, nothing was written: {where}: {problem}")
        self.line_number = line_number
        self.field = field
        self.problem = problem
