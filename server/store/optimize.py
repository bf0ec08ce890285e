"""`db optimize`: the search index merged into one b-tree, for a database that holds it in several.

A bulk import leaves the index in one b-tree (search_index.merge_fts), but a database imported by an earlier
version holds 5-13, and every small import adds one until FTS5 merges a level: each phrase a search reads is read
from every b-tree (docs/performance.md, "The search index in one b-tree"). One write transaction: the graph's data
and revisions stay as they are, so servers reading the file meanwhile go on (they read the old b-trees until it
commits) and keep what they remember; an interrupted or refused merge leaves the index as it was.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from server.store import search_index
from server.store.migrate import open_store, write_failed
from server.store.progress import Progress


@dataclass(frozen=True)
class OptimizeReport:
    database: Path
    before: int
    """The index's b-trees before (0: an empty index)."""
    after: int
    seconds: float

    def __str__(self) -> str:
        if self.before <= 1:
            held = "in one b-tree already" if self.before else "empty"
            return f"{self.database}: the search index is {held}; nothing to do"
        return (
            f"{self.database}: the search index went from {self.before} b-trees to {self.after} in {self.seconds:.1f} s"
        )


def optimize(db_path: Path, progress: Progress | None = None) -> OptimizeReport:
    progress = progress or Progress.silent()
    conn = open_store(db_path, write=True)
    started = time.monotonic()
    try:
        conn.execute("BEGIN IMMEDIATE")  # the write lock: no import writes entries while the index is merged
        before = search_index.b_trees(conn)
        if before > 1:
            progress.phase("merging the search index", "")
            search_index.merge_fts(conn, progress)
        after = search_index.b_trees(conn)
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise write_failed(conn, db_path, exc, "optimize stopped, the index is as it was", "db optimize") from None
    finally:
        progress.stop()
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()
    return OptimizeReport(db_path, before, after, time.monotonic() - started)
