"""The `Kind`s of stories, experiences and their event links, with the rules that keep them in scope.

A link names an event whose scope must lie within the story's or experience's scope (migrations/0005);
an event has at most one primary story, never a cross story; a thread's parent is a feature of the
same scope, and may come later in the file; an experience belongs to exactly the projects of the
events that formed it, so it needs at least one (checked once every line is written).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from server.store.kind_model import SCOPE, Check, Kind, Link, Stored

EVENT_SCOPE: Final = ("event_scope_key", "(SELECT e.scope_key FROM events AS e WHERE e.id = s.event_id)")
"""A link row carries the event's own scope beside its owner's."""
SCOPE_LINK: Final = Link("scope_key", "scope", field="scope")


def _flag(field: str, column: str) -> Stored:
    """A true/false field, stored as 1/0."""
    return Stored(field, (column,), lambda value: (int(value),), lambda row: bool(row[column]))


# The parent a thread names, as this import leaves it: staged (new or changed) or else stored.
PARENT: Final = """
SELECT s.seq, s.location, s.parent_story_id, coalesce(n.level, d.level), coalesce(n.scope_key, d.scope_key), s.scope_key
  FROM stage_story AS s
  LEFT JOIN stage_story AS n ON n.id = s.parent_story_id AND n.skip <> 1
  LEFT JOIN stories AS d ON d.id = s.parent_story_id
 WHERE s.skip <> 1 AND s.parent_story_id IS NOT NULL
   AND (coalesce(n.level, d.level) IS NULL OR coalesce(n.scope_key, d.scope_key) <> s.scope_key
        OR coalesce(n.level, d.level) <> 'feature')
 ORDER BY s.seq LIMIT 1"""


def _bad_parent(row: Sequence[Any]) -> str:
    parent, level, scope, own = row[2:]
    if level is None:
        return f"no story {parent!r} in the file or the database"
    if scope != own:
        return (
            f"story {parent!r} belongs to scope {scope}, but this thread belongs to scope {own};"
            " links across scopes are not allowed"
        )
    return f"story {parent!r} is a {level}, but a thread's parent must be a feature"


# Sync mode: a stored thread whose feature this import retired or moved to another scope (the thread's
# foreign key is deferred, so without this check only the commit would fail, and a dry run not at all).
ORPHANED_THREAD: Final = """
SELECT coalesce(r.location, s.location), t.id, t.parent_story_id, p.id IS NULL FROM stories AS t
  LEFT JOIN stories AS p ON p.id = t.parent_story_id
  LEFT JOIN stage_retired AS r ON r.kind = 'story' AND r.key = json_array(t.parent_story_id)
  LEFT JOIN stage_story AS s ON s.id = t.parent_story_id
 WHERE t.parent_story_id IS NOT NULL AND (p.id IS NULL OR p.scope_key <> t.scope_key)
   AND (r.seq IS NOT NULL OR s.seq IS NOT NULL)
 ORDER BY coalesce(r.seq, s.seq) LIMIT 1"""


def orphaned_thread(row: Sequence[Any]) -> str:
    thread, feature, retired = row[1:]
    fate = "is retired" if retired else "moves to another scope"
    return (
        f"story {feature!r} {fate}, but its thread {thread!r} stays in the database without it:"
        " retire the thread too, or keep its feature"
    )


CROSS_PRIMARY: Final = """
SELECT s.seq, s.location, s.story_id FROM stage_story_event AS s JOIN stories AS t ON t.id = s.story_id
 WHERE s.skip <> 1 AND s.is_primary = 1 AND t.level = 'cross' ORDER BY s.seq LIMIT 1"""


def _cross_primary(row: Sequence[Any]) -> str:
    return (
        f"story {row[2]!r} is a cross-project story, which is never an event's primary story;"
        " link it with primary false and make a feature or thread the primary story"
    )


# A primary link of another story to the same event: stored before this import (and not made a related
# link by a line of it, in sync mode), or an earlier line of it.
SECOND_PRIMARY: Final = """
SELECT s.seq, s.location, s.event_id, coalesce(d.story_id, f.story_id), CASE WHEN d.story_id IS NULL THEN f.location END
  FROM stage_story_event AS s
  LEFT JOIN story_events AS d ON d.event_id = s.event_id AND d.is_primary = 1 AND d.story_id <> s.story_id
   AND NOT EXISTS (SELECT 1 FROM stage_story_event AS r
                    WHERE r.story_id = d.story_id AND r.event_id = d.event_id AND r.is_primary = 0)
  LEFT JOIN stage_story_event AS f
    ON f.event_id = s.event_id AND f.is_primary = 1 AND f.skip <> 1 AND f.seq < s.seq AND f.story_id <> s.story_id
 WHERE s.skip <> 1 AND s.is_primary = 1 AND (d.story_id IS NOT NULL OR f.seq IS NOT NULL)
 ORDER BY s.seq LIMIT 1"""


def _second_primary(row: Sequence[Any]) -> str:
    event, other, where = row[2:]
    return (
        f"event {event!r} already has the primary story {other!r} (set by {where or 'the database'});"
        " an event has at most one primary story: link this one with primary false"
    )


# Sync mode: stored primary links that changed lines make related links give up the primary flag first.
RELEASE_PRIMARY: Final = """
UPDATE story_events SET is_primary = 0
 WHERE is_primary = 1 AND (story_id, event_id) IN (
       SELECT story_id, event_id FROM stage_story_event WHERE skip = 2 AND is_primary = 0)"""


# Every listed experience, unchanged ones too: a sync may have dropped the links that formed it.
UNFORMED: Final = """
SELECT s.seq, s.location, s.id FROM stage_experience AS s
 WHERE NOT EXISTS (SELECT 1 FROM experience_events AS x WHERE x.experience_id = s.id AND x.role = 'formed')
 ORDER BY s.seq LIMIT 1"""


def _unformed(row: Sequence[Any]) -> str:
    return f"experience {row[2]!r} has no event it was formed from: add an experience_event line with role 'formed'"


# Projects of an experience's scope that none of the events it was formed from belongs to.
WIDER_THAN_FORMED: Final = """
SELECT seq, location, id, scope_key, missing FROM (
  SELECT s.seq, s.location, s.id, s.scope_key,
         (SELECT group_concat(project_id, ', ') FROM (
            SELECT sp.project_id FROM scope_projects AS sp WHERE sp.scope_key = s.scope_key AND NOT EXISTS (
              SELECT 1 FROM experience_events AS x JOIN scope_projects AS ep ON ep.scope_key = x.event_scope_key
               WHERE x.experience_id = s.id AND x.role = 'formed' AND ep.project_id = sp.project_id)
             ORDER BY sp.project_id)) AS missing
    FROM stage_experience AS s)
 WHERE missing IS NOT NULL ORDER BY seq LIMIT 1"""


def _wider_than_formed(row: Sequence[Any]) -> str:
    experience, scope, missing = row[2:]
    return (
        f"experience {experience!r} belongs to scope {scope}, but none of the events it was formed from"
        f" is in project(s) {missing}; an experience belongs to the scope of the events that formed it"
    )


STORY: Final = Kind(
    "story",
    "stories",
    ("id",),
    (
        "id",
        SCOPE,
        "level",
        "parent_story_id",
        "name",
        "description",
        "state",
        "state_event_id",
        "started_at",
        "ended_at",
        "started_at_precision",
        "ended_at_precision",
        "confirmation_state",
        "recorded_at",
        "revision",
    ),
    links=(SCOPE_LINK, Link("state_event_id", "event", within=True)),
    checks=(Check(PARENT, "parent_story_id", _bad_parent),),
)
STORY_EVENT: Final = Kind(
    "story_event",
    "story_events",
    ("story_id", "event_id"),
    ("story_id", "event_id", _flag("primary", "is_primary"), _flag("user_set", "user_set")),
    owner=Link("story_id", "story"),
    links=(Link("event_id", "event", within=True),),
    derived=(EVENT_SCOPE,),
    checks=(Check(CROSS_PRIMARY, "primary", _cross_primary), Check(SECOND_PRIMARY, "primary", _second_primary)),
    lookups=("event_id",),
    release=(RELEASE_PRIMARY,),
    noun="story",
)
EXPERIENCE: Final = Kind(
    "experience",
    "experiences",
    ("id",),
    ("id", SCOPE, "statement", "conditions", "boundaries", "confirmation_state", "recorded_at", "revision"),
    links=(SCOPE_LINK,),
    after=(Check(UNFORMED, "id", _unformed), Check(WIDER_THAN_FORMED, "scope", _wider_than_formed)),
)
EXPERIENCE_EVENT: Final = Kind(
    "experience_event",
    "experience_events",
    ("experience_id", "event_id", "role"),
    ("experience_id", "event_id", "role", "note"),
    owner=Link("experience_id", "experience"),
    links=(Link("event_id", "event", within=True),),
    derived=(EVENT_SCOPE,),
    noun="experience",
)
