"""`story-graph-mcp demo PATH` and `serve --demo`: the bundled demo graph written to a new database."""

from __future__ import annotations

from pathlib import Path

from server.store.errors import Interrupted, StoreError
from server.store.importer import ImportReport, import_file
from server.store.migrate import migrate
from server.store.paths import bundled


def demo_path() -> Path:
    """The bundled demo graph, `server/demo/demo_graph.jsonl`."""
    return bundled("demo") / "demo_graph.jsonl"


def write_demo(path: Path) -> ImportReport:
    """Create `path` (which must not exist yet), migrate it and import the demo graph into it."""
    if path.exists():
        raise StoreError(f"{path} already exists; choose a new file for the demo graph")
    source = demo_path()
    if not source.is_file():
        raise StoreError(f"the bundled demo graph is missing from this installation ({source})")
    try:
        migrate(path)
        return import_file(path, source)
    except BaseException as exc:
        # The file is ours: leave nothing half-built behind. Through a symlink (one that named no file yet), the
        # file it names and its journal files (SQLite keeps them beside it); the link stays, as it was.
        built = path.resolve()
        for leftover in (built, built.with_name(built.name + "-wal"), built.with_name(built.name + "-shm")):
            leftover.unlink(missing_ok=True)
        if isinstance(exc, KeyboardInterrupt):  # not what `migrate` would say: there is nothing to continue
            raise Interrupted(f"{path} was not written (its half-built file was removed)") from None
        raise
