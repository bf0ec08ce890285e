"""GoodBuddy stories and experiences as the app stores them (read here; story_mapping.py maps them).

Facts (schema 54/55 of mesalogo/goodbuddy, `supervision-stories.ts` and `supervision-experiences.ts`):
a story is a `feature` or `thread` of one project (`project_id`; a thread has a parent feature of the
same project) or a `cross` story (no project: it links the same work across projects). Only
`status = 'current'` ones are shown; merged and removed ones are the app's undo history. `user_edited`
makes it `user_edited` instead of `automatic`; `state_event_id` is the event that concluded it. Its
events are linked in `supervision_event_stories`, one primary story per event (never a cross story) and
`user_set` when the user placed it. The app works out a story's span from its current linked events
(the primary ones; all of them for a cross story): the earliest `COALESCE(started_at, occurred_at)`,
text order, and the latest `COALESCE(ended_at, occurred_at)`. An experience is a statement with
conditions and boundaries, linked to the events that `formed` it and those where it was `applied`
(each with a note); the app shows it only while it has a current formed event. Links to events the
app marks superseded are not shown by the app and are not read here either.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from server.store.goodbuddy.rows import at, instant
from server.store.merge_join import RowsByKey

STORIES: Final = """
SELECT id, project_id, parent_id, level, name, description, state, state_event_id, status, user_edited, created_at
  FROM supervision_stories ORDER BY id"""
# The app's span of a story reads each event's time this way, in text order.
STORY_EVENTS: Final = """
SELECT l.story_id, l.event_id, l.is_primary, l.user_set,
       COALESCE(e.started_at, e.occurred_at), COALESCE(e.ended_at, e.occurred_at)
  FROM supervision_event_stories AS l JOIN supervision_events AS e ON e.id = l.event_id
 WHERE e.superseded_by IS NULL ORDER BY l.story_id, l.event_id"""
EXPERIENCES: Final = """
SELECT id, statement, conditions, boundaries, status, user_edited, created_at
  FROM supervision_experiences ORDER BY id"""
EXPERIENCE_EVENTS: Final = """
SELECT l.experience_id, l.event_id, l.role, l.note
  FROM supervision_experience_events AS l JOIN supervision_events AS e ON e.id = l.event_id
 WHERE e.superseded_by IS NULL ORDER BY l.experience_id, l.event_id, l.role"""


@dataclass(frozen=True)
class StoryEvent:
    event_id: str
    primary: bool
    user_set: bool
    started: str
    """The event's start as the app's span reads it (`started_at`, else `occurred_at`), as written."""
    ended: str


@dataclass(frozen=True)
class Story:
    where: str
    id: str
    project_id: str | None
    """Null for a cross-project story."""
    parent_id: str | None
    level: str
    name: str
    description: str
    state: str
    state_event_id: str | None
    current: bool
    """`status = 'current'`: the app shows it."""
    confirmation_state: str
    """`user_edited` when the user edited it, else `automatic`."""
    created_at: str
    events: tuple[StoryEvent, ...]
    """Links to current events, in event id order."""


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
    current: bool
    confirmation_state: str
    created_at: str
    events: tuple[ExperienceEvent, ...]
    """Links to current events."""

    @property
    def shown(self) -> bool:
        """The app shows an experience while it is current and a current event formed it."""
        return self.current and any(link.role == "formed" for link in self.events)


def _state(user_edited: object) -> str:
    return "user_edited" if user_edited else "automatic"


def read_stories(conn: sqlite3.Connection) -> Iterator[Story]:
    """Every story in id order, with its links (a merge join: one story's links in memory at a time)."""
    links = RowsByKey(conn.execute(STORY_EVENTS))
    for row in conn.execute(STORIES):
        where = at("supervision_stories", id=row[0])
        yield Story(
            where=where,
            id=row[0],
            project_id=row[1] if row[3] != "cross" else None,
            parent_id=row[2],
            level=row[3],
            name=row[4],
            description=row[5],
            state=row[6],
            state_event_id=row[7],
            current=row[8] == "current",
            confirmation_state=_state(row[9]),
            created_at=instant(where, "created_at", row[10]),
            events=tuple(
                StoryEvent(event_id, bool(primary), bool(user_set), str(started), str(ended))
                for _, event_id, primary, user_set, started, ended in links.of(row[0])
            ),
        )


def read_experiences(conn: sqlite3.Connection) -> Iterator[Experience]:
    """Every experience in id order, with its links (a merge join, as for stories)."""
    links = RowsByKey(conn.execute(EXPERIENCE_EVENTS))
    for row in conn.execute(EXPERIENCES):
        where = at("supervision_experiences", id=row[0])
        yield Experience(
            where=where,
            id=row[0],
            statement=row[1],
            conditions=row[2],
            boundaries=row[3],
            current=row[4] == "current",
            confirmation_state=_state(row[5]),
            created_at=instant(where, "created_at", row[6]),
            events=tuple(ExperienceEvent(event_id, role, note) for _, event_id, role, note in links.of(row[0])),
        )
