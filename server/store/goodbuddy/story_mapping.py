"""GoodBuddy stories and experiences mapped under this graph's scope rules (docs/interchange.md).

Here a feature or thread belongs to its project's scope, a cross story to the scope of the project set
its events lie in, and an experience to the scope whose projects are exactly those of the events that
formed it; every event a story or experience lists must lie within that scope. The app has no such
rule (its events sit on one shared timeline), so some of its links and objects cannot be said here:
they are left out and counted in the notes, never moved to another scope.

The app's current stories and experiences are a mirror: the ones it no longer shows (merged or
removed by the user) and the ones this import cannot express are retired, so a sync never keeps a
stale copy whose links would contradict the current ones.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from server.contracts.base import GlobalScope, ProjectsScope, scope_from_key, scope_key
from server.store.goodbuddy.rows import at, event_time, instant
from server.store.goodbuddy.state import Seen
from server.store.goodbuddy.stories import Experience, Story, StoryEvent, read_experiences, read_stories
from server.store.importer import ImportItem
from server.store.sync import Retired

STORIES_HIDDEN: Final = "stories the app no longer shows (merged or removed by the user; not imported)"
EXPERIENCES_HIDDEN: Final = (
    "experiences the app no longer shows (merged, removed, or no current event formed them; not imported)"
)
STORY_NO_PROJECT: Final = "feature and thread stories of a project not in the app (not imported)"
STORY_NOTHING_IN_SCOPE: Final = (
    "feature and thread stories none of whose events lies in their project's scope, e.g. all from a Global"
    " review (not imported)"
)
THREAD_NO_FEATURE: Final = "threads whose feature is not imported or is not a feature of their project (not imported)"
CROSS_NO_SPAN: Final = (
    "cross stories with no event in a project scope (not imported: the project set they span is unknown)"
)
STORY_LINK_MISSING: Final = "story links to events not in this graph (not imported)"
STORY_LINK_OUTSIDE: Final = (
    "story links to events whose review scope is not within the story's scope, e.g. a Global review's (not imported)"
)
CROSS_PRIMARY: Final = "cross stories marked as an event's primary story (linked as related: never primary here)"
STATE_EVENT_OUTSIDE: Final = (
    "story states set by an event outside the story's scope or not in this graph (state kept, its event not named)"
)
SPAN_DIFFERS: Final = (
    "story spans worked out without the events whose links were not imported (they differ from the app's)"
)
SPAN_UNKNOWN: Final = (
    "story spans whose start or end names no instant, or ends before it starts (that bound stored unknown)"
)
EXPERIENCE_NO_FORMED: Final = "experiences none of whose forming events is in this graph (not imported)"
EXPERIENCE_MIXED: Final = (
    "experiences formed from events of Global and of project scopes (not imported: no one scope holds them)"
)
EXPERIENCE_LINK_MISSING: Final = "experience links to events not in this graph (not imported)"
EXPERIENCE_LINK_OUTSIDE: Final = (
    "experience links to events outside the scope of the events that formed it, e.g. an application in"
    " another project (not imported)"
)


# Which current stories are written: a feature or thread that links events but none in its scope is not (its
# threads' events count for a feature); a thread needs its feature written, in its scope. Features are decided
# first, from their threads' plans; threads then from their features' decisions.
ADD_PLAN: Final = "INSERT OR REPLACE INTO temp.gb_story VALUES (?, ?, ?, ?, ?, ?, ?)"
DECIDE_FEATURES: Final = """
UPDATE temp.gb_story AS f SET scope_key = NULL, why_not = :nothing_in_scope
 WHERE f.level = 'feature' AND f.scope_key IS NOT NULL AND f.has_events AND NOT f.has_links
   AND NOT EXISTS (SELECT 1 FROM temp.gb_story AS t
                    WHERE t.level = 'thread' AND t.parent_id = f.id AND t.scope_key = f.scope_key AND t.has_links)"""
DECIDE_THREADS: Final = """
UPDATE temp.gb_story AS t
   SET scope_key = NULL,
       why_not = CASE WHEN t.has_events AND NOT t.has_links THEN :nothing_in_scope ELSE :no_feature END
 WHERE t.level = 'thread' AND t.scope_key IS NOT NULL
   AND (t.has_events AND NOT t.has_links
        OR NOT EXISTS (SELECT 1 FROM temp.gb_story AS p
                        WHERE p.id = t.parent_id AND p.level = 'feature' AND p.scope_key = t.scope_key))"""
DECIDED: Final = "SELECT scope_key, why_not FROM temp.gb_story WHERE id = ?"
LEVELS: Final = ("cross", "feature", "thread")
EXPERIENCE_TIMES: Final = "SELECT id, created_at FROM supervision_experiences ORDER BY id"


def read_stories_and_experiences(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    """Lines for the stories and experiences the app shows and this graph can hold; the rest retired.

    Runs after the events are read: it needs the scope of every event this import writes. Stories are read
    twice: first to decide which are written (that depends on their features and threads), then to write them.
    Every row's time is checked before the first line of its table is made."""
    _decide(conn, seen)
    yield from story_items(conn, seen)
    for row in conn.execute(EXPERIENCE_TIMES):
        instant(at("supervision_experiences", id=row[0]), "created_at", row[1])
    yield from experience_items(read_experiences(conn), seen)


# --- scopes -------------------------------------------------------------------------------------


def _projects(key: str) -> frozenset[str] | None:
    """The projects of a scope key; None for Global."""
    scope = scope_from_key(key)
    return None if isinstance(scope, GlobalScope) else frozenset(scope.projectIds)


def _within(inner: str, outer: str) -> bool:
    """The rule of migrations/0005's `scope_within`: the same scope, or a project set inside another."""
    if inner == outer:
        return True
    inside, around = _projects(inner), _projects(outer)
    return inside is not None and around is not None and inside <= around


def _project_set(projects: Iterable[str]) -> str:
    return scope_key(ProjectsScope(kind="projects", projectIds=sorted(set(projects))))


def _event_scopes(seen: Seen, event_ids: Iterable[str | None]) -> dict[str, str]:
    """The scope of each of these events that this import writes."""
    return seen.scopes_of("gb_event", [event_id for event_id in event_ids if event_id is not None])


def _declare(seen: Seen, where: str, key: str) -> Iterator[ImportItem]:
    """A `scope` line for a scope no review declared (a cross story's project pair, say)."""
    if key not in seen.scopes:
        seen.scopes.add(key)
        yield seen.line(where, {"kind": "scope", "scope": scope_from_key(key).model_dump()})


# --- stories ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """What of one story can be said here: its scope (None: not expressible) and the links it keeps."""

    scope: str | None
    links: tuple[StoryEvent, ...] = ()
    missing: int = 0
    outside: int = 0
    why_not: str = ""


def _plan(story: Story, seen: Seen, event_scope: Mapping[str, str]) -> _Plan:
    """What of `story` can be said here, given the scope of its events in this graph."""
    in_graph = [link for link in story.events if link.event_id in event_scope]
    missing = len(story.events) - len(in_graph)
    if story.level == "cross":
        kept = [link for link in in_graph if event_scope[link.event_id] != "global"]
        projects = {p for link in kept for p in _projects(event_scope[link.event_id]) or ()}
        if not projects:
            return _Plan(None, why_not=CROSS_NO_SPAN)
        return _Plan(_project_set(projects), tuple(kept), missing, len(in_graph) - len(kept))
    if story.project_id is None or story.project_id not in seen.projects:
        return _Plan(None, why_not=STORY_NO_PROJECT)
    scope = _project_set([story.project_id])
    kept = [link for link in in_graph if event_scope[link.event_id] == scope]
    return _Plan(scope, tuple(kept), missing, len(in_graph) - len(kept))


def _decide(conn: sqlite3.Connection, seen: Seen) -> None:
    """Each current story's plan into the scratch table, then which are written (DECIDE_FEATURES, DECIDE_THREADS)."""
    for story in read_stories(conn):
        if story.current and story.level in LEVELS:
            plan = _plan(story, seen, _event_scopes(seen, (link.event_id for link in story.events)))
            row = (
                story.id,
                story.level,
                story.parent_id,
                plan.scope,
                plan.why_not,
                bool(story.events),
                bool(plan.links),
            )
            conn.execute(ADD_PLAN, row)
    reasons = {"nothing_in_scope": STORY_NOTHING_IN_SCOPE, "no_feature": THREAD_NO_FEATURE}
    conn.execute(DECIDE_FEATURES, reasons)
    conn.execute(DECIDE_THREADS, reasons)


def story_items(conn: sqlite3.Connection, seen: Seen) -> Iterator[ImportItem]:
    for story in read_stories(conn):
        decided = conn.execute(DECIDED, (story.id,)).fetchone()
        if decided is None or decided[0] is None:
            seen.notes.add(STORIES_HIDDEN if decided is None else decided[1])
            yield (story.where, Retired("story", (story.id,), "not shown by the app or not expressible here"))
            continue
        event_scope = _event_scopes(seen, [*(link.event_id for link in story.events), story.state_event_id])
        plan = _plan(story, seen, event_scope)
        yield from _declare(seen, story.where, decided[0])
        yield from _story_lines(story, plan, decided[0], seen, event_scope)


def _story_lines(
    story: Story, plan: _Plan, scope: str, seen: Seen, event_scope: Mapping[str, str]
) -> Iterator[ImportItem]:
    seen.notes.add(STORY_LINK_MISSING, plan.missing)
    seen.notes.add(STORY_LINK_OUTSIDE, plan.outside)
    state_event = story.state_event_id
    if state_event is not None:
        state_scope = event_scope.get(state_event)
        if state_scope is None or not _within(state_scope, scope):
            seen.notes.add(STATE_EVENT_OUTSIDE)
            state_event = None
    (started, started_precision), (ended, ended_precision) = _span(story, plan.links, seen)
    yield seen.line(
        story.where,
        {
            "kind": "story",
            "id": story.id,
            "level": story.level,
            "scope": scope_from_key(scope).model_dump(),
            "parent_story_id": story.parent_id if story.level == "thread" else None,
            "name": story.name,
            "description": story.description,
            "state": story.state,
            "state_event_id": state_event,
            "started_at": started,
            "ended_at": ended,
            "started_at_precision": started_precision,
            "ended_at_precision": ended_precision,
            "confirmation_state": story.confirmation_state,
            "recorded_at": story.created_at,
        },
    )
    for link in plan.links:
        primary = link.primary
        if primary and story.level == "cross":
            seen.notes.add(CROSS_PRIMARY)
            primary = False
        yield seen.line(
            at("supervision_event_stories", event_id=link.event_id, story_id=story.id),
            {
                "kind": "story_event",
                "story_id": story.id,
                "event_id": link.event_id,
                "primary": primary,
                "user_set": link.user_set,
            },
        )


def _span_text(level: str, links: Iterable[StoryEvent]) -> tuple[str | None, str | None]:
    """The app's span of a story from these links, as text: the primary events' (a cross story: all of
    them) earliest start, in text order with the event id breaking ties, and latest end."""
    spanning = [link for link in links if level == "cross" or link.primary]
    if not spanning:
        return None, None
    first = min(spanning, key=lambda link: (link.started, link.event_id))
    return first.started, max(link.ended for link in spanning)


Bound = tuple[str | None, str | None]
"""A span bound: its instant and that instant's precision (None: as precise as the instant, or unknown)."""


def _span(story: Story, kept: tuple[StoryEvent, ...], seen: Seen) -> tuple[Bound, Bound]:
    """The span as the app works it out, but only from the events the story lists here, so that it never
    reflects an event outside its scope; each bound read as an instant like an event's time, with its precision."""
    text = _span_text(story.level, kept)
    if text != _span_text(story.level, story.events):
        seen.notes.add(SPAN_DIFFERS)
    start, end = (_bound(bound) for bound in text)
    if text[0] is not None and (start[0] is None or end[0] is None or end[0] < start[0]):
        seen.notes.add(SPAN_UNKNOWN)
    if start[0] is None or (end[0] is not None and end[0] < start[0]):
        end = (None, None)
    return start, end


def _bound(text: str | None) -> Bound:
    """The start of the bound's time and its precision: a bare date is its UTC day's midnight with precision `day`,
    an end too (its instant is upstream's `Date.parse` of the date; the precision says it was the whole day)."""
    time = event_time(text)
    return (None, None) if time is None else (time["start"], time.get("precision"))


# --- experiences --------------------------------------------------------------------------------


def _experience_scope(formed: set[str]) -> tuple[str | None, str]:
    """Exactly the projects of the scopes of the events that formed it (Global when they are Global events)."""
    if not formed:
        return None, EXPERIENCE_NO_FORMED
    if formed == {"global"}:
        return "global", ""
    if "global" in formed:
        return None, EXPERIENCE_MIXED
    return _project_set(p for key in formed for p in _projects(key) or ()), ""


def experience_items(experiences: Iterable[Experience], seen: Seen) -> Iterator[ImportItem]:
    for experience in experiences:
        if not experience.shown:
            seen.notes.add(EXPERIENCES_HIDDEN)
            yield (experience.where, Retired("experience", (experience.id,), "not shown by the app"))
            continue
        event_scope = _event_scopes(seen, (link.event_id for link in experience.events))
        in_graph = [link for link in experience.events if link.event_id in event_scope]
        formed = {event_scope[link.event_id] for link in in_graph if link.role == "formed"}
        scope, why_not = _experience_scope(formed)
        if scope is None:
            seen.notes.add(why_not)
            yield (experience.where, Retired("experience", (experience.id,), "not expressible here"))
            continue
        kept = [link for link in in_graph if _within(event_scope[link.event_id], scope)]
        seen.notes.add(EXPERIENCE_LINK_MISSING, len(experience.events) - len(in_graph))
        seen.notes.add(EXPERIENCE_LINK_OUTSIDE, len(in_graph) - len(kept))
        yield from _declare(seen, experience.where, scope)
        yield seen.line(
            experience.where,
            {
                "kind": "experience",
                "id": experience.id,
                "scope": scope_from_key(scope).model_dump(),
                "statement": experience.statement,
                "conditions": experience.conditions,
                "boundaries": experience.boundaries,
                "confirmation_state": experience.confirmation_state,
                "recorded_at": experience.created_at,
            },
        )
        for link in kept:
            where = at("supervision_experience_events", experience_id=experience.id, event_id=link.event_id)
            yield seen.line(
                f"{where}, role={link.role}",
                {
                    "kind": "experience_event",
                    "experience_id": experience.id,
                    "event_id": link.event_id,
                    "role": link.role,
                    "note": link.note,
                },
            )
