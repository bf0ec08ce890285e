"""Errors a user can fix: bad files, bad databases, bad interchange lines. One clear line each."""


class StoreError(Exception):
    """Base: printed as one line on stderr with a non-zero exit, never as a traceback."""


class DatabaseUnusable(StoreError):
    """Missing file, not a SQLite database, or a schema version this build does not support."""


class ImportRejected(StoreError):
    """An interchange line is invalid; the database was left exactly as it was.

    `location` says where the line came from in its source: `line 12` for a JSON Lines file, or
    e.g. `table supervision_events row id=7` for a source that reads another database.
    """

    def __init__(self, location: str, field: str, problem: str) -> None:
        where = location + (f", field '{field}'" if field else "")
        super().__init__(f"import aborted, nothing was written: {where}: {problem}")
        self.location = location
        self.field = field
        self.problem = problem
