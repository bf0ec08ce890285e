"""`db stats`: schema version, data revisions and object counts per scope, as a plain-text table."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

import orjson

from server.contracts.base import ProjectsScope, scope_key
from server.store.migrate import SCHEMA_VERSION, open_store
from server.store.search_index import b_trees

GRAPH_REVISIONS: Final = "SELECT data_revision, memory_revision, global_memory_revision FROM graph_state WHERE id = 1"
# Memory items count apart (migrations/0015): only get_context's background reads them. A scope's memory revision
# counts its own items (the Global scope's: the Global ones), and Global ones also count in graph_state's
# global_memory_revision, which a grant that reads Global sees beside a scope's (migrations/0016).
SCOPE_REVISIONS: Final = "SELECT scope_key, data_revision, memory_revision FROM scopes ORDER BY scope_key"
# (column heading, query counting rows per scope key); tables are fixed names, not input.
PER_SCOPE: Final[tuple[tuple[str, str], ...]] = (
    ("results", "SELECT scope_key, count(*) FROM results GROUP BY scope_key"),
    ("story lines", "SELECT scope_key, count(*) FROM story_lines GROUP BY scope_key"),
    ("events", "SELECT scope_key, count(*) FROM events GROUP BY scope_key"),
    ("entities", "SELECT scope_key, count(*) FROM entities GROUP BY scope_key"),
    ("entity revisions", "SELECT scope_key, count(*) FROM entity_revisions GROUP BY scope_key"),
    ("entity changes", "SELECT scope_key, count(*) FROM entity_changes GROUP BY scope_key"),
    ("relations", "SELECT scope_key, count(*) FROM relations GROUP BY scope_key"),
    ("summaries", "SELECT scope_key, count(*) FROM summaries GROUP BY scope_key"),
    ("leaves", "SELECT scope_key, count(*) FROM leaves GROUP BY scope_key"),
    ("source references", "SELECT scope_key, count(*) FROM source_references GROUP BY scope_key"),
    # Links count where they belong: in their story's or experience's scope (a cross story's links to
    # events of its projects count in the project set's column).
    ("stories", "SELECT scope_key, count(*) FROM stories GROUP BY scope_key"),
    ("story links", "SELECT scope_key, count(*) FROM story_events GROUP BY scope_key"),
    ("experiences", "SELECT scope_key, count(*) FROM experiences GROUP BY scope_key"),
    ("experience links", "SELECT scope_key, count(*) FROM experience_events GROUP BY scope_key"),
)
PROJECTS: Final = "SELECT id, name, status FROM projects ORDER BY id LIMIT :limit"
PROJECTS_LISTED: Final = 50
"""Projects `db stats` names with their name and status (the id is what `serve --project` and a policy's grants name;
only active projects are readable); the overall line counts them all."""
NAME_SHOWN: Final = 80
"""Code points of a project's name shown: an imported app's ids are UUIDs, and the name is how a user tells them
apart; a longer name is cut (with `…`) so one line stays one project."""
# A memory item belongs to Global (no project) or to its one project's scope.
MEMORY_ITEMS_PER_PROJECT: Final = "SELECT project_id, count(*) FROM memory_items GROUP BY project_id"
OVERALL: Final[tuple[tuple[str, str], ...]] = (
    ("projects", "SELECT count(*) FROM projects"),
    ("scopes", "SELECT count(*) FROM scopes"),
    ("sources", "SELECT count(*) FROM sources"),
    ("source versions", "SELECT count(*) FROM source_versions"),
    ("memory items", "SELECT count(*) FROM memory_items"),
)


def stats_text(db_path: Path) -> str:
    """A readable report of one database, opened read-only."""
    conn = open_store(db_path, write=False)
    try:
        conn.execute("BEGIN")  # every count from the same snapshot
        return _report(conn, db_path)
    finally:
        conn.close()


def _projects(conn: sqlite3.Connection) -> str:
    listed = conn.execute(PROJECTS, {"limit": PROJECTS_LISTED + 1}).fetchall()
    named = ", ".join(f"{project_id} {_name(name)} ({status})" for project_id, name, status in listed[:PROJECTS_LISTED])
    more = f", and more (the first {PROJECTS_LISTED} by id)" if len(listed) > PROJECTS_LISTED else ""
    return f"projects: {named or 'none'}{more}"


def _name(name: str) -> str:
    """A project's name as JSON text (quoted; a comma or a parenthesis in it reads as part of the name)."""
    shown = name if len(name) <= NAME_SHOWN else name[: NAME_SHOWN - 1] + "…"
    return orjson.dumps(shown).decode()


def _report(conn: sqlite3.Connection, db_path: Path) -> str:
    declared = conn.execute(SCOPE_REVISIONS).fetchall()
    revisions: dict[str, int | None] = {row[0]: row[1] for row in declared}
    memory_revisions: dict[str, int | None] = {row[0]: row[2] for row in declared}
    counts: dict[str, dict[str, int]] = {}
    for heading, sql in PER_SCOPE:
        counts[heading] = {row[0]: row[1] for row in conn.execute(sql)}
    memory: dict[str, int] = {}
    for project, count in conn.execute(MEMORY_ITEMS_PER_PROJECT):
        key = "global" if project is None else scope_key(ProjectsScope(kind="projects", projectIds=[project]))
        memory[key] = count
    counts["memory items"] = memory
    scopes = sorted(set(revisions).union(*(per.keys() for per in counts.values())))

    graph_data, graph_memory, global_memory = conn.execute(GRAPH_REVISIONS).fetchone()
    lines = [
        f"database: {db_path}",
        f"schema version: {SCHEMA_VERSION}",
        f"graph data revision: {graph_data}, memory revision: {graph_memory}, Global memory revision: {global_memory}",
        "overall: " + ", ".join(f"{name} {conn.execute(sql).fetchone()[0]}" for name, sql in OVERALL),
        _search_index(conn, db_path),
        _projects(conn),
        "",
    ]
    if not scopes:
        return "\n".join([*lines, "no scopes yet"])
    # One column per scope, one row per object type: a handful of scopes reads best this way.
    table = [["", *scopes, "total"]]
    table.append(["data revision", *(_revision(revisions.get(key)) for key in scopes), ""])
    table.append(["memory revision", *(_revision(memory_revisions.get(key)) for key in scopes), ""])
    for heading, per in counts.items():
        table.append([heading, *(str(per.get(key, 0)) for key in scopes), str(sum(per.values()))])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _search_index(conn: sqlite3.Connection, db_path: Path) -> str:
    trees = b_trees(conn)
    if trees <= 1:
        return "search index: " + ("one b-tree" if trees else "empty")
    return (
        f"search index: {trees} b-trees (searches read each; `story-graph-mcp db optimize --db {db_path}` merges them"
        " into one)"
    )


def _revision(value: int | None) -> str:
    """A scope that has rows but no `scopes` row was written by another writer without declaring it."""
    return "undeclared" if value is None else str(value)
