"""Lookups by id stay on an index, whatever the scope holds (no ANALYZE statistics are assumed)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from server.reader.objects import LEAF_ROWS, OBJECT_ROWS

PARAMS = {"ids": '["x"]', "scope_key": "global", "object_type": "event"}


@pytest.mark.parametrize("sql", [*OBJECT_ROWS.values(), LEAF_ROWS], ids=[*OBJECT_ROWS, "leaf"])
def test_object_row_lookups_never_scan_a_graph_table(migrated_db: Path, sql: str) -> None:
    with sqlite3.connect(migrated_db) as conn:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, PARAMS)]
    scans = [step for step in plan if step.startswith("SCAN") and "json_each" not in step]
    assert scans == [], plan
