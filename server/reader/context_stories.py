"""Stories and experiences as get_context reads them: their content (upstream's data keys) and their events.

A story lists its events as upstream does: a feature or thread its own primary events plus its threads'
primary events, a cross story every event linked to it. An experience lists the events that formed it
and those where it was applied, each link with its role and note. Each listed event lives in its own
scope, which lies within the owner's (migrations/0005 enforces it for every writer): an Atlas event of
a cross story of {atlas, beacon} is an Atlas event, read in the Atlas scope, its sources quoted there.
So whoever may read the owner may read every event it lists, and nothing else is listed.
"""

from __future__ import annotations

from typing import Any, Final

import aiosqlite

from server.contracts.base import ProjectsScope, scope_from_key
from server.reader.db import IDS, json_ids

# The events a story lists: (story_id, event_id, event scope). Own primary events (every linked event for a
# cross story), then the primary events of its threads.
STORY_EVENT_LINKS: Final = f"""
SELECT s.id AS story_id, l.event_id, l.event_scope_key
  FROM stories AS s JOIN story_events AS l ON l.story_id = s.id AND l.scope_key = s.scope_key
 WHERE s.id IN {IDS} AND s.scope_key = :scope_key AND (l.is_primary = 1 OR s.level = 'cross')
UNION
SELECT s.id, l.event_id, l.event_scope_key
  FROM stories AS s JOIN stories AS t ON t.parent_story_id = s.id AND t.scope_key = s.scope_key
  JOIN story_events AS l ON l.story_id = t.id AND l.is_primary = 1
 WHERE s.id IN {IDS} AND s.scope_key = :scope_key
"""
# Each listed event with its event time, in timeline order (dated by time, then undated, each by id).
STORY_EVENTS: Final = f"""
SELECT k.story_id, e.id, e.result_id, e.event_time_start, e.scope_key
  FROM ({STORY_EVENT_LINKS}) AS k JOIN events AS e ON e.id = k.event_id AND e.scope_key = k.event_scope_key
 ORDER BY k.story_id, e.event_time_start IS NULL, e.event_time_start, e.id
"""
# The event that set a story's state (it may lie outside the story's listed events).
STATE_EVENT: Final = """
SELECT e.id, e.result_id, e.event_time_start, e.scope_key
  FROM stories AS s JOIN events AS e ON e.id = s.state_event_id
 WHERE s.id = :id AND s.scope_key = :scope_key
"""
STORIES_BY_ID: Final = f"""
SELECT s.id, s.scope_key, s.level, s.parent_story_id, s.name, s.description, s.state, s.state_event_id,
       s.started_at, s.ended_at, s.started_at_precision, s.ended_at_precision, s.confirmation_state, s.recorded_at,
       s.revision, p.name AS project_name
  FROM stories AS s
  LEFT JOIN projects AS p ON p.id = json_extract(substr(s.scope_key, 10), '$[0]') AND s.level <> 'cross'
 WHERE s.id IN {IDS} AND s.scope_key = :scope_key
"""
THREAD_IDS: Final = f"""
SELECT parent_story_id, id FROM stories WHERE parent_story_id IN {IDS} AND scope_key = :scope_key ORDER BY id
"""
# A feature's threads, or a thread's feature.
RELATED_STORIES: Final = """
SELECT t.id FROM stories AS t WHERE t.parent_story_id = :id AND t.scope_key = :scope_key
UNION
SELECT p.id FROM stories AS s JOIN stories AS p ON p.id = s.parent_story_id AND p.scope_key = s.scope_key
 WHERE s.id = :id AND s.scope_key = :scope_key
"""
EXPERIENCES_BY_ID: Final = f"""
SELECT id, scope_key, statement, conditions, boundaries, confirmation_state, recorded_at, revision
  FROM experiences WHERE id IN {IDS} AND scope_key = :scope_key
"""
# Each formed/applied link with its event (its time's start, end and precision), and the event's primary story (in
# the event's own scope).
EXPERIENCE_EVENTS: Final = f"""
SELECT l.experience_id, l.event_id, l.role, l.note, e.title, e.scope_key, e.event_time_start, e.result_id,
       e.event_time_end, e.event_time_precision, ps.id AS story_id, ps.name AS story_name
  FROM experience_events AS l
  JOIN events AS e ON e.id = l.event_id AND e.scope_key = l.event_scope_key
  LEFT JOIN story_events AS pl ON pl.event_id = l.event_id AND pl.is_primary = 1
  LEFT JOIN stories AS ps ON ps.id = pl.story_id AND ps.scope_key = pl.scope_key
 WHERE l.experience_id IN {IDS} AND l.scope_key = :scope_key
 ORDER BY l.experience_id, e.event_time_start IS NULL, e.event_time_start, l.event_id, l.role
"""

EventRow = tuple[str, str, str | None, str]
"""(event id, result id, event time start, event scope key)."""


def single_project(scope_key: str) -> str | None:
    """The project of a one-project scope; None for a project set or Global."""
    scope = scope_from_key(scope_key)
    return scope.projectIds[0] if isinstance(scope, ProjectsScope) and len(scope.projectIds) == 1 else None


async def _rows(conn: aiosqlite.Connection, sql: str, params: dict[str, Any]) -> list[aiosqlite.Row]:
    return list(await conn.execute_fetchall(sql, params))


async def story_events(conn: aiosqlite.Connection, scope_key: str, story_ids: list[str]) -> dict[str, list[EventRow]]:
    """The events each story lists, in timeline order."""
    found: dict[str, list[EventRow]] = {story_id: [] for story_id in story_ids}
    for story_id, event_id, result_id, start, event_scope in await _rows(
        conn, STORY_EVENTS, {"ids": json_ids(story_ids), "scope_key": scope_key}
    ):
        found[story_id].append((event_id, result_id, start, event_scope))
    return found


async def story_event_scopes(conn: aiosqlite.Connection, scope_key: str, story_id: str) -> list[tuple[str, str]]:
    """(event id, event scope) of each link to an event the story lists, in no order: for reading the events by id
    (the links alone, without story_events' event times; an event not stored in its scope is not found then)."""
    return [
        (row[1], row[2])
        for row in await _rows(conn, STORY_EVENT_LINKS, {"ids": json_ids([story_id]), "scope_key": scope_key})
    ]


async def state_event(conn: aiosqlite.Connection, scope_key: str, story_id: str) -> EventRow | None:
    rows = await _rows(conn, STATE_EVENT, {"id": story_id, "scope_key": scope_key})
    return (rows[0][0], rows[0][1], rows[0][2], rows[0][3]) if rows else None


async def related_story_ids(conn: aiosqlite.Connection, scope_key: str, story_id: str) -> list[str]:
    return sorted(row[0] for row in await _rows(conn, RELATED_STORIES, {"id": story_id, "scope_key": scope_key}))


async def story_data(conn: aiosqlite.Connection, scope_key: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each story's content, with upstream's data keys (docs/tools.md, "Stories and experiences") and the precision
    of its span's bounds beside them."""
    params = {"ids": json_ids(ids), "scope_key": scope_key}
    threads: dict[str, list[str]] = {}
    for parent, thread in await _rows(conn, THREAD_IDS, params):
        threads.setdefault(parent, []).append(thread)
    events = await story_events(conn, scope_key, ids)
    found = {}
    for r in await _rows(conn, STORIES_BY_ID, params):
        event_ids = [event[0] for event in events[r["id"]]]
        found[r["id"]] = {
            "id": r["id"],
            "projectId": None if r["level"] == "cross" else single_project(r["scope_key"]),
            "projectName": r["project_name"],
            "parentId": r["parent_story_id"],
            "level": r["level"],
            "name": r["name"],
            "description": r["description"],
            "state": r["state"],
            "stateEventId": r["state_event_id"],
            "userEdited": r["confirmation_state"] == "user_edited",
            "startedAt": r["started_at"],
            "endedAt": r["ended_at"],
            # Added keys (SPEC §5b), as an experience's event has atPrecision beside `at`: a bound the writer dated by
            # day is stored as its midnight, which alone reads as an instant.
            "startedAtPrecision": r["started_at_precision"],
            "endedAtPrecision": r["ended_at_precision"],
            "event_ids": event_ids,
            "thread_ids": threads.get(r["id"], []),
            "event_count": len(event_ids),
            "scope": scope_from_key(r["scope_key"]).model_dump(),
            "confirmation_state": r["confirmation_state"],
            "recorded_at": r["recorded_at"],
            "revision": r["revision"],
        }
    return found


async def experience_links(
    conn: aiosqlite.Connection, scope_key: str, ids: list[str]
) -> dict[str, list[tuple[dict[str, Any], EventRow]]]:
    """Each experience's formed/applied links, in event-time order (undated last): the link with upstream's keys
    plus `atEnd`, `atPrecision` and the event's own `scope` (read its sources there), and the event's row.

    `at` is the start of the event time only: for an event dated by day it reads as that day's midnight, so the end
    and precision of the event time come beside it (added keys, SPEC §5b: `at` keeps upstream's meaning)."""
    found: dict[str, list[tuple[dict[str, Any], EventRow]]] = {experience_id: [] for experience_id in ids}
    for r in await _rows(conn, EXPERIENCE_EVENTS, {"ids": json_ids(ids), "scope_key": scope_key}):
        link = {
            "id": r["event_id"],
            "role": r["role"],
            "note": r["note"],
            "title": r["title"],
            "projectId": single_project(r["scope_key"]),
            "at": r["event_time_start"],
            "atEnd": r["event_time_end"],
            "atPrecision": r["event_time_precision"],
            "storyId": r["story_id"],
            "storyName": r["story_name"],
            "scope": scope_from_key(r["scope_key"]).model_dump(),
        }
        found[r["experience_id"]].append((link, (r["event_id"], r["result_id"], r["event_time_start"], r["scope_key"])))
    return found


async def experience_data(conn: aiosqlite.Connection, scope_key: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    links = await experience_links(conn, scope_key, ids)
    found = {}
    for r in await _rows(conn, EXPERIENCES_BY_ID, {"ids": json_ids(ids), "scope_key": scope_key}):
        events = [link for link, _ in links[r["id"]]]
        found[r["id"]] = {
            "id": r["id"],
            "statement": r["statement"],
            "conditions": r["conditions"],
            "boundaries": r["boundaries"],
            "userEdited": r["confirmation_state"] == "user_edited",
            "events": events,
            "event_ids": list(dict.fromkeys(link["id"] for link in events)),
            "scope": scope_from_key(r["scope_key"]).model_dump(),
            "confirmation_state": r["confirmation_state"],
            "recorded_at": r["recorded_at"],
            "revision": r["revision"],
        }
    return found


async def experience_event_rows(conn: aiosqlite.Connection, scope_key: str, experience_id: str) -> list[EventRow]:
    """The distinct events of an experience (formed or applied), in timeline order."""
    links = (await experience_links(conn, scope_key, [experience_id]))[experience_id]
    return list({row[0]: row for _, row in links}.values())
