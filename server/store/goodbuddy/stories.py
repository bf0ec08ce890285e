"""GoodBuddy stories and experiences, read and ready to map once the store has their line kinds (issue 12).

Facts (schema 54/55 of mesalogo/goodbuddy, `supervision-stories.ts` and `supervision-experiences.ts`):
a story is a `feature`, `thread` (with a parent feature) or `cross` story; only `status = 'current'`
ones are shown (merged and removed ones are history of the app's undo); `user_edited` makes it
`user_edited` instead of `automatic`; its events are linked in `supervision_event_stories` with one
primary story per event and `user_set` when the user placed it. An experience is a statement with
conditions and boundaries, linked to the events that `formed` it and those where it was `applied`
(each with a note); the app shows it only while it has a current formed event. Links to events the
app marks superseded are not shown by the app and are not read here either.

Until the interchange has story and experience lines, the import counts these (see the import's
notes) and writes nothing for them.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final

from server.store.goodbuddy.rows import at, instant

STORIES: Final = """
SELECT id, project_id, parent_id, level, name, description, state, state_event_id, user_edited, created_at, updated_at
  FROM supervision_stories WHERE status = 'current' ORDER BY id"""
STORY_EVENTS: Final = """
SELECT l.story_id, l.event_id, l.is_primary, l.user_set
  FROM supervision_event_stories AS l JOIN supervision_events AS e ON e.id = l.event_id
 WHERE e.superseded_by IS NULL ORDER BY l.story_id, l.event_id"""
EXPERIENCES: Final = """
SELECT x.id, x.statement, x.conditions, x.boundaries, x.user_edited, x.created_at, x.updated_at
  FROM supervision_experiences AS x
 WHERE x.status = 'current' AND EXISTS (
       SELECT 1 FROM supervision_experience_events AS f JOIN supervision_events AS e ON e.id = f.event_id
        WHERE f.experience_id = x.id AND f.role = 'formed' AND e.superseded_by IS NULL)
 ORDER BY x.id"""
EXPERIENCE_EVENTS: Final = """
SELECT l.experience_id, l.event_id, l.role, l.note
  FROM supervision_experience_events AS l JOIN supervision_events AS e ON e.id = l.event_id
 WHERE e.superseded_by IS NULL ORDER BY l.experience_id, l.event_id, l.role"""


@dataclass(frozen=True)
class StoryEvent:
    event_id: str
    primary: bool
    user_set: bool


@dataclass(frozen=True)
class Story:
    where: str
    id: str
    project_id: str | None
    """Null for a cross-project story: it spans the projects of its events."""
    parent_id: str | None
    level: str
    name: str
    description: str
    state: str
    state_event_id: str | None
    confirmation_state: str
    """`user_edited` when the user edited it, else `automatic`."""
    created_at: str
    updated_at: str
    events: tuple[StoryEvent, ...]


@dataclass(frozen=True)
class ExperienceEvent:
    event_id: str
    role: str
    note: str


@dataclass(frozen=True)
class Experience:
    where: str
    id: str
    statement: str
    conditions: str
    boundaries: str
    confirmation_state: str
    created_at: str
    updated_at: str
    events: tuple[ExperienceEvent, ...]


def _state(user_edited: object) -> str:
    return "user_edited" if user_edited else "automatic"


def read_stories(conn: sqlite3.Connection) -> list[Story]:
    links: dict[str, list[StoryEvent]] = {}
    for story_id, event_id, primary, user_set in conn.execute(STORY_EVENTS):
        links.setdefault(story_id, []).append(StoryEvent(event_id, bool(primary), bool(user_set)))
    stories = []
    for row in conn.execute(STORIES).fetchall():
        where = at("supervision_stories", id=row[0])
        stories.append(
            Story(
                where=where,
                id=row[0],
                project_id=row[1] if row[3] != "cross" else None,
                parent_id=row[2],
                level=row[3],
                name=row[4],
                description=row[5],
                state=row[6],
                state_event_id=row[7],
                confirmation_state=_state(row[8]),
                created_at=instant(where, "created_at", row[9]),
                updated_at=instant(where, "updated_at", row[10]),
                events=tuple(links.get(row[0], [])),
            )
        )
    return stories


def read_experiences(conn: sqlite3.Connection) -> list[Experience]:
    links: dict[str, list[ExperienceEvent]] = {}
    for experience_id, event_id, role, note in conn.execute(EXPERIENCE_EVENTS):
        links.setdefault(experience_id, []).append(ExperienceEvent(event_id, role, note))
    experiences = []
    for row in conn.execute(EXPERIENCES).fetchall():
        where = at("supervision_experiences", id=row[0])
        experiences.append(
            Experience(
                where=where,
                id=row[0],
                statement=row[1],
                conditions=row[2],
                boundaries=row[3],
                confirmation_state=_state(row[4]),
                created_at=instant(where, "created_at", row[5]),
                updated_at=instant(where, "updated_at", row[6]),
                events=tuple(links.get(row[0], [])),
            )
        )
    return experiences


def count_stories_and_experiences(conn: sqlite3.Connection) -> tuple[int, int]:
    """How many current stories and experiences the app shows (read, but not yet importable)."""
    return len(read_stories(conn)), len(read_experiences(conn))
