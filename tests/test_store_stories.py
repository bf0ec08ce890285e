"""Stories, experiences and their event links in the store: import, export, scope rules, revisions."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from jsonl_graph import (
    ALPHA,
    ALPHA_KEY,
    BETA,
    BETA_KEY,
    GLOBAL,
    PAIR,
    PAIR_KEY,
    T0,
    T1,
    Line,
    content,
    dump,
    file_hash,
    revisions,
    stats_table,
    story_graph,
    write_jsonl,
)

from server.store.errors import ImportRejected
from server.store.exporter import export_file
from server.store.importer import import_file
from server.store.migrate import migrate
from server.store.stats import stats_text

GRAPH = story_graph()
N = len(GRAPH)


def _imported(db: Path, tmp_path: Path, lines: list[Line]) -> Path:
    import_file(db, write_jsonl(tmp_path / "graph.jsonl", lines))
    return db


def _line_of(match: Callable[[Line], bool]) -> int:
    """The 1-based line number of the first GRAPH line that matches."""
    return next(index for index, line in enumerate(GRAPH, start=1) if match(line))


def _link(story: str, event: str, **flags: bool) -> Line:
    return {"kind": "story_event", "story_id": story, "event_id": event, **flags}


def _story(story_id: str, level: str, scope: Line, **fields: object) -> Line:
    return {
        "kind": "story",
        "id": story_id,
        "level": level,
        "scope": scope,
        "name": story_id,
        "recorded_at": T1,
        **fields,
    }


def _use(experience: str, event: str, role: str = "applied") -> Line:
    return {"kind": "experience_event", "experience_id": experience, "event_id": event, "role": role}


def _experience(experience_id: str, scope: Line) -> Line:
    return {"kind": "experience", "id": experience_id, "scope": scope, "statement": "s", "recorded_at": T1}


GLOBAL_EVENT: Line = {
    "kind": "event",
    "id": "ev-g",
    "result_id": "r-global",
    "event_type": "x",
    "title": "G",
    "recorded_at": T0,
}
PRIMARY_OF_EV_1 = _line_of(lambda line: line.get("story_id") == "st-thread" and line.get("event_id") == "ev-1")
FIRST_CROSS_LINK = _line_of(lambda line: line.get("story_id") == "st-cross")

# (extra lines appended after GRAPH, line number of the error, field, words the problem must contain)
BAD_LINES: dict[str, tuple[list[Line], int, str, str]] = {
    "dangling event link of a story": (
        [_link("st-feature", "ev-missing")],
        N + 1,
        "event_id",
        "no event 'ev-missing' in the file or the database",
    ),
    "dangling event link of an experience": (
        [_use("ex-alpha", "ev-missing")],
        N + 1,
        "event_id",
        "no event 'ev-missing' in the file or the database",
    ),
    "link to a missing story": ([_link("st-missing", "ev-1")], N + 1, "story_id", "no story 'st-missing'"),
    "link to a missing experience": ([_use("ex-missing", "ev-1")], N + 1, "experience_id", "no experience"),
    "second primary story for one event": (
        [_link("st-feature", "ev-1", primary=True)],
        N + 1,
        "primary",
        f"event 'ev-1' already has the primary story 'st-thread' (set by line {PRIMARY_OF_EV_1});"
        " an event has at most one primary story",
    ),
    "a cross story as primary story": (
        [_link("st-cross", "ev-2", primary=True)],
        N + 1,
        "primary",
        "is a cross-project story, which is never an event's primary story",
    ),
    "unknown level": (
        [_story("st-x", "epic", ALPHA)],
        N + 1,
        "level",
        "Input should be 'feature', 'thread' or 'cross'",
    ),
    "unknown role": ([_use("ex-alpha", "ev-2", role="used")], N + 1, "role", "Input should be 'formed' or 'applied'"),
    "unknown state": (
        [_story("st-x", "feature", ALPHA, state="paused")],
        N + 1,
        "state",
        "Input should be 'active' or 'concluded'",
    ),
    "unknown confirmation state": (
        [_story("st-x", "feature", ALPHA, confirmation_state="confirmed")],
        N + 1,
        "confirmation_state",
        "Input should be 'automatic' or 'user_edited'",
    ),
    "a feature linking another project's event": (
        [_link("st-feature", "ev-b1")],
        N + 1,
        "event_id",
        "event 'ev-b1' belongs to scope projects:[\"beta\"], which is not within this story's scope"
        ' projects:["alpha"]; links across scopes are not allowed',
    ),
    "a feature linking the project set's event": (
        [_link("st-feature", "ev-p1")],
        N + 1,
        "event_id",
        "links across scopes are not allowed",
    ),
    "a cross story linking a Global event": (
        [GLOBAL_EVENT, _link("st-cross", "ev-g")],
        N + 2,
        "event_id",
        "belongs to scope global, which is not within this story's scope",
    ),
    "an experience applied in another project": (
        [_use("ex-alpha", "ev-b1")],
        N + 1,
        "event_id",
        "which is not within this experience's scope",
    ),
    "a state event from another project": (
        [_story("st-x", "feature", ALPHA, state="concluded", state_event_id="ev-b1")],
        N + 1,
        "state_event_id",
        "links across scopes are not allowed",
    ),
    "a thread without a parent": (
        [_story("st-x", "thread", ALPHA)],
        N + 1,
        "parent_story_id",
        "a thread needs parent_story_id",
    ),
    "a feature with a parent": (
        [_story("st-x", "feature", ALPHA, parent_story_id="st-feature")],
        N + 1,
        "parent_story_id",
        "only a thread has a parent story",
    ),
    "a thread inside a thread": (
        [_story("st-x", "thread", ALPHA, parent_story_id="st-thread")],
        N + 1,
        "parent_story_id",
        "story 'st-thread' is a thread, but a thread's parent must be a feature",
    ),
    "a thread of another project's feature": (
        [_story("st-beta", "feature", BETA), _story("st-x", "thread", ALPHA, parent_story_id="st-beta")],
        N + 2,
        "parent_story_id",
        "links across scopes are not allowed",
    ),
    "a thread whose feature is nowhere": (
        [_story("st-x", "thread", ALPHA, parent_story_id="st-nowhere")],
        N + 1,
        "parent_story_id",
        "no story 'st-nowhere' in the file or the database",
    ),
    "a feature of two projects": (
        [_story("st-x", "feature", PAIR)],
        N + 1,
        "scope",
        "a feature belongs to exactly one project",
    ),
    "a story in Global": ([_story("st-x", "cross", GLOBAL)], N + 1, "scope", "never to Global"),
    "an undeclared story scope": (
        [_story("st-x", "cross", {"kind": "projects", "projectIds": ["alpha", "gamma"]})],
        N + 1,
        "scope",
        "is not declared",
    ),
    "an end before the start": (
        [_story("st-x", "feature", ALPHA, started_at=T1, ended_at=T0)],
        N + 1,
        "ended_at",
        "ended_at needs a started_at at or before it",
    ),
    "an experience formed from nothing": (
        [_experience("ex-x", ALPHA), _use("ex-x", "ev-2", "applied")],
        N + 1,
        "id",
        "experience 'ex-x' has no event it was formed from",
    ),
    "an experience wider than the events that formed it": (
        [_experience("ex-x", PAIR), _use("ex-x", "ev-1", "formed"), _use("ex-x", "ev-b1", "applied")],
        N + 1,
        "scope",
        'experience \'ex-x\' belongs to scope projects:["alpha","beta"], but none of the events it was formed'
        " from is in project(s) beta",
    ),
    "a link redefined with other flags": (
        [_link("st-cross", "ev-1", user_set=True)],
        N + 1,
        "event_id",
        f"story_event 'st-cross/ev-1' is already defined by line {FIRST_CROSS_LINK} with different content"
        " (differs in: user_set)",
    ),
    "a relation to a story": (
        [
            {
                "kind": "relation",
                "id": "rel-x",
                "result_id": "r-alpha",
                "from_ref": {"type": "event", "id": "ev-1"},
                "to_ref": {"type": "story", "id": "st-feature"},
                "relation_type": "related",
                "recorded_at": T1,
            }
        ],
        N + 1,
        "to_ref.type",
        "relations, summaries and leaves cannot link to a story yet",
    ),
}


def test_export_then_import_into_a_fresh_database_exports_the_same_bytes(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, GRAPH)
    first = tmp_path / "a.jsonl"
    export_file(migrated_db, first)
    other = tmp_path / "b.db"
    migrate(other)
    import_file(other, first)
    second = tmp_path / "b.jsonl"
    export_file(other, second)

    assert first.read_bytes() == second.read_bytes()
    assert content(migrated_db) == content(other)
    exported = first.read_text(encoding="utf-8")
    assert '{"kind":"story_event","story_id":"st-thread","event_id":"ev-1","primary":true,"user_set":true}' in exported
    assert (
        '{"kind":"experience_event","experience_id":"ex-pair","event_id":"ev-b1","role":"applied","note":"Beta"}'
        in exported
    )


def test_importing_twice_or_in_reverse_order_gives_the_same_graph(migrated_db: Path, tmp_path: Path) -> None:
    graph = write_jsonl(tmp_path / "graph.jsonl", GRAPH)
    first = import_file(migrated_db, graph)
    before, revisions_before = dump(migrated_db), revisions(migrated_db)
    again = import_file(migrated_db, graph)
    reversed_db = tmp_path / "reversed.db"
    migrate(reversed_db)
    import_file(reversed_db, write_jsonl(tmp_path / "reversed.jsonl", list(reversed(GRAPH))))

    assert (first.written["story"], first.written["story_event"]) == (3, 5)
    assert (first.written["experience"], first.written["experience_event"]) == (2, 5)
    assert (again.total, again.unchanged) == (0, N)
    assert dump(migrated_db) == before
    assert revisions(migrated_db) == revisions_before
    assert content(reversed_db) == content(migrated_db)


def test_links_are_stored_in_their_owners_scope_beside_the_events_scope(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, GRAPH)
    with sqlite3.connect(migrated_db) as conn:
        stories = dict(conn.execute("SELECT id, scope_key FROM stories").fetchall())
        links = conn.execute(
            "SELECT story_id, event_id, scope_key, event_scope_key, is_primary, user_set FROM story_events"
            " ORDER BY story_id, event_id"
        ).fetchall()
        uses = conn.execute(
            "SELECT experience_id, event_id, role, scope_key, event_scope_key FROM experience_events"
            " ORDER BY experience_id, event_id, role"
        ).fetchall()
        in_alpha = conn.execute("SELECT story_id FROM story_events WHERE scope_key = ?", (ALPHA_KEY,)).fetchall()

    assert stories == {"st-feature": ALPHA_KEY, "st-thread": ALPHA_KEY, "st-cross": PAIR_KEY}
    assert links == [
        ("st-cross", "ev-1", PAIR_KEY, ALPHA_KEY, 0, 0),
        ("st-cross", "ev-b1", PAIR_KEY, BETA_KEY, 0, 0),
        ("st-cross", "ev-p1", PAIR_KEY, PAIR_KEY, 0, 0),
        ("st-feature", "ev-2", ALPHA_KEY, ALPHA_KEY, 1, 0),
        ("st-thread", "ev-1", ALPHA_KEY, ALPHA_KEY, 1, 1),
    ]
    assert uses == [
        ("ex-alpha", "ev-1", "applied", ALPHA_KEY, ALPHA_KEY),
        ("ex-alpha", "ev-1", "formed", ALPHA_KEY, ALPHA_KEY),
        ("ex-pair", "ev-1", "formed", PAIR_KEY, ALPHA_KEY),
        ("ex-pair", "ev-b1", "applied", PAIR_KEY, BETA_KEY),
        ("ex-pair", "ev-p1", "formed", PAIR_KEY, PAIR_KEY),
    ]
    # Whatever reads Alpha's rows never meets the cross story's link to Alpha's event.
    assert sorted(row[0] for row in in_alpha) == ["st-feature", "st-thread"]


@pytest.mark.parametrize("case", list(BAD_LINES), ids=list(BAD_LINES))
def test_a_bad_story_or_experience_line_aborts_the_import_and_writes_nothing(
    case: str, migrated_db: Path, tmp_path: Path
) -> None:
    extra, line_number, field, problem = BAD_LINES[case]
    _imported(migrated_db, tmp_path, GRAPH[:1])
    bad_file = write_jsonl(tmp_path / "bad.jsonl", [*GRAPH, *extra])
    before, hash_before = dump(migrated_db), file_hash(migrated_db)

    with pytest.raises(ImportRejected) as caught:
        import_file(migrated_db, bad_file)

    assert (caught.value.line_number, caught.value.field) == (line_number, field), caught.value
    assert problem in caught.value.problem
    assert dump(migrated_db) == before
    assert file_hash(migrated_db) == hash_before


def test_a_second_primary_story_is_refused_against_the_database_too(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, GRAPH)
    before = dump(migrated_db)

    with pytest.raises(ImportRejected) as caught:
        import_file(migrated_db, write_jsonl(tmp_path / "more.jsonl", [_link("st-feature", "ev-1", primary=True)]))

    assert (caught.value.line_number, caught.value.field) == (1, "primary")
    assert "already has the primary story 'st-thread' (set by the database)" in caught.value.problem
    assert dump(migrated_db) == before


def test_a_later_import_adds_events_and_applications_without_rewriting(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, GRAPH)
    later = [
        {
            "kind": "event",
            "id": "ev-3",
            "result_id": "r-alpha",
            "event_type": "change",
            "title": "Later",
            "recorded_at": T1,
        },
        _link("st-thread", "ev-3", primary=True),
        _link("st-cross", "ev-3"),
        _use("ex-pair", "ev-3"),
    ]

    report = import_file(migrated_db, write_jsonl(tmp_path / "later.jsonl", later))

    assert report.written == {"event": 1, "story_event": 2, "experience_event": 1}


SCOPES_AND_EVENTS = f"""
INSERT INTO projects (id, name) VALUES ('alpha', 'Alpha'), ('beta', 'Beta');
INSERT INTO scopes (scope_key, kind) VALUES ('{ALPHA_KEY}', 'projects'), ('{BETA_KEY}', 'projects'),
  ('{PAIR_KEY}', 'projects'), ('global', 'global');
INSERT INTO scope_projects (scope_key, project_id) VALUES ('{ALPHA_KEY}', 'alpha'), ('{BETA_KEY}', 'beta'),
  ('{PAIR_KEY}', 'alpha'), ('{PAIR_KEY}', 'beta');
INSERT INTO results (id, scope_key, review_generated_at, recorded_at) VALUES
  ('r-a', '{ALPHA_KEY}', '{T0}', '{T0}'), ('r-b', '{BETA_KEY}', '{T0}', '{T0}'), ('r-g', 'global', '{T0}', '{T0}');
INSERT INTO events (id, result_id, scope_key, event_type, title, recorded_at) VALUES
  ('ev-a', 'r-a', '{ALPHA_KEY}', 'change', 'A', '{T0}'), ('ev-b', 'r-b', '{BETA_KEY}', 'change', 'B', '{T0}'),
  ('ev-g', 'r-g', 'global', 'change', 'G', '{T0}');
INSERT INTO stories (id, scope_key, level, name, recorded_at) VALUES
  ('feat-a', '{ALPHA_KEY}', 'feature', 'Feature', '{T0}'), ('cross', '{PAIR_KEY}', 'cross', 'Cross', '{T0}');
INSERT INTO experiences (id, scope_key, statement, recorded_at) VALUES ('exp-a', '{ALPHA_KEY}', 'Lesson', '{T0}');
"""

# Raw writes another application might try, and the words of the refusal.
REFUSED_WRITES = {
    "link to an event outside the story's scope": (
        f"INSERT INTO story_events VALUES ('feat-a', 'ev-b', '{ALPHA_KEY}', '{BETA_KEY}', 0, 0)",
        "the event's scope must lie within the story's scope",
    ),
    "link to a Global event from a project set": (
        f"INSERT INTO story_events VALUES ('cross', 'ev-g', '{PAIR_KEY}', 'global', 0, 0)",
        "the event's scope must lie within the story's scope",
    ),
    "link that misstates the event's scope": (
        f"INSERT INTO story_events VALUES ('cross', 'ev-b', '{PAIR_KEY}', '{ALPHA_KEY}', 0, 0)",
        "FOREIGN KEY constraint failed",
    ),
    "cross story as primary": (
        f"INSERT INTO story_events VALUES ('cross', 'ev-a', '{PAIR_KEY}', '{ALPHA_KEY}', 1, 0)",
        "a cross-project story is never an event's primary story",
    ),
    "second primary story": (
        f"INSERT INTO stories (id, scope_key, level, name, recorded_at) VALUES ('f2', '{ALPHA_KEY}', 'feature', 'F',"
        f" '{T0}'); INSERT INTO story_events VALUES ('feat-a', 'ev-a', '{ALPHA_KEY}', '{ALPHA_KEY}', 1, 0);"
        f" INSERT INTO story_events VALUES ('f2', 'ev-a', '{ALPHA_KEY}', '{ALPHA_KEY}', 1, 0)",
        "UNIQUE constraint failed: story_events.event_id",
    ),
    "feature of two projects": (
        f"INSERT INTO stories (id, scope_key, level, name, recorded_at) VALUES ('f2', '{PAIR_KEY}', 'feature', 'F',"
        f" '{T0}')",
        "CHECK constraint failed",
    ),
    "story in Global": (
        f"INSERT INTO stories (id, scope_key, level, name, recorded_at) VALUES ('c2', 'global', 'cross', 'C', '{T0}')",
        "CHECK constraint failed",
    ),
    "thread inside a cross story": (
        f"INSERT INTO stories (id, scope_key, level, parent_story_id, name, recorded_at)"
        f" VALUES ('t2', '{PAIR_KEY}', 'thread', 'cross', 'T', '{T0}')",
        "a thread's parent_story_id must name a feature story",
    ),
    "state event outside the story's scope": (
        "UPDATE stories SET state = 'concluded', state_event_id = 'ev-b' WHERE id = 'feat-a'",
        "must name an event whose scope lies within the story's scope",
    ),
    "experience applied outside its scope": (
        f"INSERT INTO experience_events VALUES ('exp-a', 'ev-b', 'applied', '{ALPHA_KEY}', '{BETA_KEY}', '')",
        "the event's scope must lie within the experience's scope",
    ),
    "unknown role": (
        f"INSERT INTO experience_events VALUES ('exp-a', 'ev-a', 'used', '{ALPHA_KEY}', '{ALPHA_KEY}', '')",
        "CHECK constraint failed",
    ),
}


@pytest.fixture
def raw_db(migrated_db: Path) -> Path:
    with sqlite3.connect(migrated_db) as conn:
        conn.executescript("PRAGMA foreign_keys = ON;" + SCOPES_AND_EVENTS)
    return migrated_db


@pytest.mark.parametrize("case", list(REFUSED_WRITES), ids=list(REFUSED_WRITES))
def test_other_writers_cannot_break_the_scope_rules(case: str, raw_db: Path) -> None:
    sql, refusal = REFUSED_WRITES[case]
    with sqlite3.connect(raw_db) as conn, pytest.raises(sqlite3.IntegrityError) as caught:
        conn.executescript("PRAGMA foreign_keys = ON;" + sql)

    assert refusal in str(caught.value)


def test_allowed_raw_links_bump_only_the_owners_scope(raw_db: Path) -> None:
    before = revisions(raw_db)
    with sqlite3.connect(raw_db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"INSERT INTO story_events VALUES ('cross', 'ev-a', '{PAIR_KEY}', '{ALPHA_KEY}', 0, 0)")
        conn.execute(f"INSERT INTO story_events VALUES ('cross', 'ev-b', '{PAIR_KEY}', '{BETA_KEY}', 0, 0)")
    after = revisions(raw_db)

    assert after[PAIR_KEY] == before[PAIR_KEY] + 2
    assert (after[ALPHA_KEY], after[BETA_KEY], after["global"]) == (
        before[ALPHA_KEY],
        before[BETA_KEY],
        before["global"],
    )
    assert after["graph"] == before["graph"] + 2


def test_a_change_to_a_listed_event_bumps_the_scopes_of_the_stories_and_experiences_listing_it(
    migrated_db: Path, tmp_path: Path
) -> None:
    _imported(migrated_db, tmp_path, GRAPH)
    before = revisions(migrated_db)
    with sqlite3.connect(migrated_db) as conn:
        conn.execute("UPDATE events SET title = 'Retitled' WHERE id = 'ev-b1'")
    after_title = revisions(migrated_db)
    with sqlite3.connect(migrated_db) as conn:
        conn.execute(
            "INSERT INTO object_sources (object_type, object_id, source_reference_id, scope_key)"
            " VALUES ('event', 'ev-b1', 'ref-2', ?)",
            (BETA_KEY,),
        )
    after_evidence = revisions(migrated_db)

    # ev-b1 lives in Beta and is listed by the pair's cross story and experience.
    assert after_title[BETA_KEY] == before[BETA_KEY] + 1
    assert after_title[PAIR_KEY] == before[PAIR_KEY] + 1
    assert after_title[ALPHA_KEY] == before[ALPHA_KEY]
    assert after_evidence[BETA_KEY] == after_title[BETA_KEY] + 1
    assert after_evidence[PAIR_KEY] == after_title[PAIR_KEY] + 1
    assert after_evidence[ALPHA_KEY] == before[ALPHA_KEY]


def test_deleting_an_event_removes_its_links_and_clears_a_state_event(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, GRAPH)
    with sqlite3.connect(migrated_db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM entity_changes WHERE event_id = 'ev-1'")
        conn.execute("DELETE FROM events WHERE id = 'ev-1'")
        links = conn.execute("SELECT count(*) FROM story_events WHERE event_id = 'ev-1'").fetchone()[0]
        uses = conn.execute("SELECT count(*) FROM experience_events WHERE event_id = 'ev-1'").fetchone()[0]
        state = conn.execute("SELECT state, state_event_id FROM stories WHERE id = 'st-thread'").fetchone()

    assert (links, uses) == (0, 0)
    assert state == ("concluded", None)


def test_stats_count_stories_and_experiences_in_their_own_scopes(migrated_db: Path, tmp_path: Path) -> None:
    _imported(migrated_db, tmp_path, GRAPH)

    text = stats_text(migrated_db)

    header, rows = stats_table(text)
    assert header == ["global", PAIR_KEY, ALPHA_KEY, BETA_KEY, "total"]
    assert rows["stories"] == ["0", "1", "2", "0", "3"]
    assert rows["story links"] == ["0", "3", "2", "0", "5"]
    assert rows["experiences"] == ["0", "1", "1", "0", "2"]
    assert rows["experience links"] == ["0", "3", "2", "0", "5"]


def test_the_thread_may_come_before_its_feature_within_one_file(migrated_db: Path, tmp_path: Path) -> None:
    thread = _story("st-late", "thread", BETA, parent_story_id="st-beta")
    feature = _story("st-beta", "feature", BETA)

    report = import_file(migrated_db, write_jsonl(tmp_path / "g.jsonl", [*GRAPH, thread, feature]))

    assert report.written["story"] == 5


def test_an_experience_formed_from_global_events_belongs_to_global(migrated_db: Path, tmp_path: Path) -> None:
    lines = [*GRAPH, GLOBAL_EVENT, _experience("ex-global", GLOBAL), _use("ex-global", "ev-g", "formed")]

    report = import_file(migrated_db, write_jsonl(tmp_path / "g.jsonl", lines))

    assert report.written["experience"] == 3
    with sqlite3.connect(migrated_db) as conn:
        row = conn.execute("SELECT scope_key, event_scope_key FROM experience_events WHERE experience_id = 'ex-global'")
        assert row.fetchall() == [("global", "global")]
