"""The order of get_context's stream, and the sections that are read page by page with a keyset query.

Every object of the stream has a sort key (section, time, row kind, type, id, result key):
- `current`: section = role (target, relation, related, evolution, summary, evidence, then background);
  time is the event time for evolution ('~' when unknown, so undated evolution comes last) and '' for
  every other role;
- `timeline`: section 0 with the event time for dated objects, section 1 with '' for undated ones (they
  come after every dated one); the row kind is not used.

A keyset *arm* is one large, direct section whose order an index gives (migrations/0006): a story
line's entities (by id), its events (by event time, then id), the relations leaving or reaching one
object (by id). A page asks each arm only for the rows after its position, `LIMIT` what the page can
hold, so a page of a story line with 10,000 events reads about as many rows as it returns. Every
other section is small per object or lies several links away; the selection of those is computed once
per scope revision (context_summary) and kept in order in memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

import aiosqlite

SortKey = tuple[int, str, int, str, str, str]
Mode = Literal["current", "timeline"]

ROLE_ORDER: Final[dict[str, int]] = {
    "target": 0,
    "relation": 1,
    "related": 2,
    "evolution": 3,
    "summary": 4,
    "evidence": 5,
    "background": 6,
}
ROW_KIND_ORDER: Final[dict[str, int]] = {"current": 0, "result": 1, "leaf": 2}


@dataclass(frozen=True)
class Candidate:
    """One object of the stream, before its content is read."""

    role: str
    kind: int
    object_type: str
    object_id: str
    result_key: str
    time: str | None
    """The start of its event time; None when unknown."""
    scope_key: str
    """The scope the object is stored in: the resolved scope, or (events of a story or experience) a narrower one."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.object_type, self.object_id, self.result_key)


def sort_key(c: Candidate, mode: Mode) -> SortKey:
    if mode == "timeline":
        if c.time is not None:
            return (0, c.time, 0, c.object_type, c.object_id, c.result_key)
        return (1, "", 0, c.object_type, c.object_id, c.result_key)
    time = (c.time or "~") if c.role == "evolution" else ""
    return (ROLE_ORDER[c.role], time, c.kind, c.object_type, c.object_id, c.result_key)


@dataclass(frozen=True)
class Arm:
    """A section read page by page. `sql` selects (id, result key, event time start) and ends in a WHERE clause;
    `id_column` and `time_column` name the indexed order (time_column None: the rows have no event time)."""

    name: str
    role: str
    object_type: str
    kind: int
    sql: str
    id_column: str
    time_column: str | None = None


STORY_LINE_ENTITIES: Final = Arm(
    "story_line_entities",
    "related",
    "entity",
    ROW_KIND_ORDER["current"],
    "SELECT n.id, '', NULL FROM entities AS n WHERE n.story_line_id = :id AND +n.scope_key = :scope_key",
    "n.id",
)
STORY_LINE_EVENTS: Final = Arm(
    "story_line_events",
    "evolution",
    "event",
    ROW_KIND_ORDER["result"],
    "SELECT e.id, e.result_id, e.event_time_start FROM events AS e"
    " WHERE e.story_line_id = :id AND +e.scope_key = :scope_key",
    "e.id",
    "e.event_time_start",
)
RELATIONS_FROM: Final = Arm(
    "relations_from",
    "relation",
    "relation",
    ROW_KIND_ORDER["result"],
    "SELECT r.id, r.result_id, NULL FROM relations AS r"
    " WHERE r.from_id = :id AND r.from_type = :object_type AND +r.scope_key = :scope_key",
    "r.id",
)
RELATIONS_TO: Final = Arm(
    "relations_to",
    "relation",
    "relation",
    ROW_KIND_ORDER["result"],
    "SELECT r.id, r.result_id, NULL FROM relations AS r"
    " WHERE r.to_id = :id AND r.to_type = :object_type AND +r.scope_key = :scope_key",
    "r.id",
)
ARMS: Final = (STORY_LINE_ENTITIES, STORY_LINE_EVENTS, RELATIONS_FROM, RELATIONS_TO)


@dataclass(frozen=True)
class BoundArm:
    """An arm with its parameters for one target in one scope."""

    arm: Arm
    params: dict[str, Any] = field(hash=False)

    async def all_ids(self, conn: aiosqlite.Connection) -> list[str]:
        """Every id of the section (the selection reads it whole once per scope revision)."""
        return [row[0] for row in await conn.execute_fetchall(self.arm.sql, self.params)]

    def queries(self, mode: Mode, after: SortKey | None, limit: int) -> list[tuple[str, dict[str, Any]]]:
        """The keyset queries (one per part of the arm) for up to `limit` rows at or after `after`."""
        found = []
        for part in _parts(self.arm, mode):
            bound = part.bound(self.arm, after)
            if bound is not None:
                sql = f"{self.arm.sql}{part.where(self.arm)}{bound[0]} ORDER BY {part.order(self.arm)} LIMIT :limit"
                found.append((sql, self.params | bound[1] | {"limit": limit}))
        return found

    async def page(self, conn: aiosqlite.Connection, mode: Mode, after: SortKey | None, limit: int) -> list[Candidate]:
        """Up to `limit` candidates whose sort key is at or after `after`, in sort-key order (parts in turn)."""
        found: list[Candidate] = []
        for sql, params in self.queries(mode, after, limit):
            for object_id, result_key, time in await conn.execute_fetchall(sql, params):
                candidate = Candidate(
                    self.arm.role,
                    self.arm.kind,
                    self.arm.object_type,
                    object_id,
                    result_key,
                    time,
                    self.params["scope_key"],
                )
                if after is None or sort_key(candidate, mode) >= after:
                    found.append(candidate)
        return found


@dataclass(frozen=True)
class _Part:
    """The rows of an arm that share every sort-key component but time, id and result key: all of them
    (`flat`), those with an event time (`dated`), or those without (`undated`)."""

    shape: Literal["flat", "dated", "undated"]
    section: int
    time: str
    """The constant time component of a flat or undated part."""
    kind: int

    def where(self, arm: Arm) -> str:
        if arm.time_column is None or self.shape == "flat":
            return ""
        return f" AND {arm.time_column} IS {'NOT ' if self.shape == 'dated' else ''}NULL"

    def order(self, arm: Arm) -> str:
        if self.shape == "dated":
            return f"{arm.time_column}, {arm.id_column}"
        return arm.id_column

    def bound(self, arm: Arm, after: SortKey | None) -> tuple[str, dict[str, Any]] | None:
        """The keyset condition for rows at or after `after`: ('', {}) for every row, None for none. Ids are
        unique within an arm, so (time, id) orders its rows; the result key is compared after the query."""
        if self.shape == "dated" and arm.time_column is None:
            return None
        if after is None:
            return "", {}
        fixed = (self.kind, arm.object_type)
        if self.shape != "dated":
            prefix = (self.section, self.time, *fixed)
            if after[:4] != prefix:
                return ("", {}) if after[:4] < prefix else None
            return f" AND {arm.id_column} >= :after_id", {"after_id": after[4]}
        if after[0] != self.section:
            return ("", {}) if after[0] < self.section else None
        params = {"after_time": after[1], "after_id": after[4]}
        if fixed > (after[2], after[3]):
            return f" AND {arm.time_column} >= :after_time", params
        if fixed < (after[2], after[3]):
            return f" AND {arm.time_column} > :after_time", params
        return f" AND ({arm.time_column}, {arm.id_column}) >= (:after_time, :after_id)", params


def _parts(arm: Arm, mode: Mode) -> list[_Part]:
    if mode == "timeline":
        return [_Part("dated", 0, "", 0), _Part("undated", 1, "", 0)]
    section = ROLE_ORDER[arm.role]
    if arm.role == "evolution":
        return [_Part("dated", section, "", arm.kind), _Part("undated", section, "~", arm.kind)]
    return [_Part("flat", section, "", arm.kind)]
