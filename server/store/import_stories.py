"""`db import` of stories, experiences and their event links (the kinds of issue 12).

A mixin of the importer's `_Import`: it adds one method per kind and the checks that keep these
objects within their scope (see migrations/0003 and docs/interchange.md). A link names an event
whose scope must lie within the story's or experience's scope; an event has at most one primary
story, never a cross story; a thread's parent is a feature; an experience belongs to exactly the
projects of the events that formed it.
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Final

from server.contracts.base import GlobalScope, ProjectsScope
from server.contracts.interchange import ExperienceEventLine, ExperienceLine, StoryEventLine, StoryLine
from server.store.errors import ImportRejected, Where
from server.store.lines import Key

INSERT_STORY: Final = (
    "INSERT INTO stories (id, scope_key, level, parent_story_id, name, description, state, state_event_id,"
    " started_at, ended_at, confirmation_state, recorded_at, revision) VALUES (:id, :scope_key, :level,"
    " :parent_story_id, :name, :description, :state, :state_event_id, :started_at, :ended_at,"
    " :confirmation_state, :recorded_at, :revision)"
)
INSERT_STORY_EVENT: Final = (
    "INSERT INTO story_events (story_id, event_id, scope_key, event_scope_key, is_primary, user_set)"
    " VALUES (:story_id, :event_id, :scope_key, :event_scope_key, :primary, :user_set)"
)
INSERT_EXPERIENCE: Final = (
    "INSERT INTO experiences (id, scope_key, statement, conditions, boundaries, confirmation_state, recorded_at,"
    " revision) VALUES (:id, :scope_key, :statement, :conditions, :boundaries, :confirmation_state, :recorded_at,"
    " :revision)"
)
INSERT_EXPERIENCE_EVENT: Final = (
    "INSERT INTO experience_events (experience_id, event_id, role, scope_key, event_scope_key, note)"
    " VALUES (:experience_id, :event_id, :role, :scope_key, :event_scope_key, :note)"
)
STORY_LEVEL: Final = "SELECT level FROM stories WHERE id = :id"
STORY_SCOPE: Final = "SELECT scope_key FROM stories WHERE id = :id"
EXPERIENCE_SCOPE: Final = "SELECT scope_key FROM experiences WHERE id = :id"
DROP_STORY_LINKS: Final = "DELETE FROM story_events WHERE story_id = :id"
DROP_EXPERIENCE_LINKS: Final = "DELETE FROM experience_events WHERE experience_id = :id"
PRIMARY_STORY: Final = (
    "SELECT story_id FROM story_events WHERE event_id = :id AND is_primary = 1 AND story_id <> :story"
)
# Whether scope :inner lies within scope :outer (the rule of the `scope_within` view in migrations/0003).
WITHIN: Final = "SELECT 1 FROM scope_within WHERE inner_key = :inner AND outer_key = :outer"
FORMED_COUNT: Final = "SELECT count(*) FROM experience_events WHERE experience_id = :id AND role = 'formed'"
# Projects of an experience's scope that none of the events it was formed from belongs to.
UNFORMED_PROJECTS: Final = (
    "SELECT sp.project_id FROM scope_projects AS sp WHERE sp.scope_key = :scope AND NOT EXISTS ("
    " SELECT 1 FROM experience_events AS x JOIN scope_projects AS ep ON ep.scope_key = x.event_scope_key"
    " WHERE x.experience_id = :id AND x.role = 'formed' AND ep.project_id = sp.project_id)"
    " ORDER BY sp.project_id"
)


class StoryKinds(ABC):
    """The story and experience kinds of one import run; `_Import` supplies the shared link checks."""

    conn: sqlite3.Connection
    origin: dict[tuple[str, Key], Where]
    deferred: list[Callable[[], object]]
    replacing: bool
    """Sync mode is rewriting a stored object in place (server/store/sync.py)."""

    @abstractmethod
    def _exec(self, sql: str, params: dict[str, Any]) -> None: ...

    @abstractmethod
    def _declared_scope(self, number: Where, scope: GlobalScope | ProjectsScope) -> str: ...

    @abstractmethod
    def _scope_of(
        self, number: Where, name: str, object_type: str, object_id: str, expected: str | None = None, owner: str = ""
    ) -> str: ...

    def _story(self, number: Where, line: StoryLine) -> None:
        scope = self._declared_scope(number, line.scope)
        if line.state_event_id is not None:
            self._event_within(number, "state_event_id", line.state_event_id, scope, "story")
        parent = line.parent_story_id
        if parent is not None:
            if self.conn.execute(STORY_LEVEL, {"id": parent}).fetchone() is not None:
                self._parent_feature(number, parent, scope)
            else:  # a thread may come before its feature: check once every line is in
                self.deferred.append(lambda: self._parent_feature(number, parent, scope))
        if self.replacing:
            self._rescope(STORY_SCOPE, DROP_STORY_LINKS, line.id, scope)
        self._exec(INSERT_STORY, line.model_dump() | {"scope_key": scope})

    def _parent_feature(self, number: Where, parent: str, scope: str) -> None:
        self._scope_of(number, "parent_story_id", "story", parent, scope, "thread")
        level = self.conn.execute(STORY_LEVEL, {"id": parent}).fetchone()[0]
        if level != "feature":
            raise ImportRejected(
                number, "parent_story_id", f"story {parent!r} is a {level}, but a thread's parent must be a feature"
            )

    def _story_event(self, number: Where, line: StoryEventLine) -> None:
        scope = self._scope_of(number, "story_id", "story", line.story_id)
        event_scope = self._event_within(number, "event_id", line.event_id, scope, "story")
        if line.primary:
            level = self.conn.execute(STORY_LEVEL, {"id": line.story_id}).fetchone()[0]
            if level == "cross":
                raise ImportRejected(
                    number,
                    "primary",
                    f"story {line.story_id!r} is a cross-project story, which is never an event's primary story;"
                    " link it with primary false and make a feature or thread the primary story",
                )
            other = self.conn.execute(PRIMARY_STORY, {"id": line.event_id, "story": line.story_id}).fetchone()
            if other is not None:
                first = self.origin.get(("story_event", (other[0], line.event_id)))
                where = f"line {first}" if first is not None else "the database"
                raise ImportRejected(
                    number,
                    "primary",
                    f"event {line.event_id!r} already has the primary story {other[0]!r} (set by {where});"
                    " an event has at most one primary story: link this one with primary false",
                )
        row = line.model_dump() | {"scope_key": scope, "event_scope_key": event_scope}
        self._exec(INSERT_STORY_EVENT, row)

    def _experience(self, number: Where, line: ExperienceLine) -> None:
        scope = self._declared_scope(number, line.scope)
        if self.replacing:
            self._rescope(EXPERIENCE_SCOPE, DROP_EXPERIENCE_LINKS, line.id, scope)
        self._exec(INSERT_EXPERIENCE, line.model_dump() | {"scope_key": scope})
        # Its formed events come in later lines: check them once every line is in.
        self.deferred.append(lambda: self._formed_in_scope(number, line.id, scope))

    def _formed_in_scope(self, number: Where, experience: str, scope: str) -> None:
        """An experience belongs to the scope of the events that formed it: it needs one, and every project of
        its scope must be one of theirs (links already keep them within the scope)."""
        if self.conn.execute(FORMED_COUNT, {"id": experience}).fetchone()[0] == 0:
            raise ImportRejected(
                number,
                "id",
                f"experience {experience!r} has no event it was formed from: add an experience_event line"
                " with role 'formed'",
            )
        missing = [row[0] for row in self.conn.execute(UNFORMED_PROJECTS, {"id": experience, "scope": scope})]
        if missing:
            raise ImportRejected(
                number,
                "scope",
                f"experience {experience!r} belongs to scope {scope}, but none of the events it was formed from"
                f" is in project(s) {', '.join(missing)}; an experience belongs to the scope of the events"
                " that formed it",
            )

    def _experience_event(self, number: Where, line: ExperienceEventLine) -> None:
        scope = self._scope_of(number, "experience_id", "experience", line.experience_id)
        event_scope = self._event_within(number, "event_id", line.event_id, scope, "experience")
        self._exec(INSERT_EXPERIENCE_EVENT, line.model_dump() | {"scope_key": scope, "event_scope_key": event_scope})

    def _rescope(self, scope_sql: str, drop_links_sql: str, owner: str, scope: str) -> None:
        """Sync mode: a story or experience moving to another scope (a cross story that now spans one more
        project) first loses its stored links, which name its old scope; the sync's lines write them again."""
        if self.conn.execute(scope_sql, {"id": owner}).fetchone()[0] != scope:
            self.conn.execute(drop_links_sql, {"id": owner})

    def _event_within(self, number: Where, name: str, event: str, scope: str, owner: str) -> str:
        """The scope of an event a story or experience names; it must lie within the owner's scope."""
        event_scope = self._scope_of(number, name, "event", event)
        if self.conn.execute(WITHIN, {"inner": event_scope, "outer": scope}).fetchone() is None:
            raise ImportRejected(
                number,
                name,
                f"event {event!r} belongs to scope {event_scope}, which is not within this {owner}'s scope {scope};"
                " links across scopes are not allowed",
            )
        return event_scope
