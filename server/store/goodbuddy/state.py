"""What one GoodBuddy import has read so far: the scope each object lives in, the lines still waiting, the notes.

Whatever grows with the app's history is kept in temporary tables of the app connection, which SQLite spills
to a temporary file, never in Python collections: the results read (and the entities and relations their
graph snapshots name, and their leaves), the scope of each saved fragment, entity and event, the stories'
plans (story_mapping.py), the newest saved fragment of each live record (reviews.py) and the lines that must
wait for lines made after them. Readers join these tables into their queries or look a list of ids up at
once, so memory stays flat however long the app has been used. Only the projects and the scope keys (a
handful) are kept in Python. The tables are made inside the import's read transaction and go with its rollback.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson

from server.contracts.interchange import Line, SummaryLine
from server.store.errors import Where
from server.store.jsonl import validate_line
from server.store.notes import Notes

SCRATCH: Final = (
    "PRAGMA temp_store = FILE",
    "PRAGMA temp.cache_size = -8192",  # KiB: 8 MiB, the rest of the scratch tables stays in their file
    # Results in creation order (`seq`), each in the scope of its review.
    "CREATE TEMP TABLE gb_result (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, scope_key TEXT NOT NULL,"
    " created_at TEXT NOT NULL)",
    "CREATE INDEX temp.gb_result_scope ON gb_result (scope_key, seq)",
    # What a result's graph snapshot names: its entities (the first time each is listed) and its relations,
    # each relation only with the first result of a scope that lists it.
    "CREATE TEMP TABLE gb_snapshot_entity (result_seq INTEGER NOT NULL, position INTEGER NOT NULL,"
    " entity_id TEXT NOT NULL, label TEXT NOT NULL, description TEXT NOT NULL, state TEXT NOT NULL,"
    " refs TEXT, PRIMARY KEY (result_seq, position))",
    "CREATE TEMP TABLE gb_snapshot_relation (relation_id TEXT NOT NULL, scope_key TEXT NOT NULL,"
    " result_seq INTEGER NOT NULL, PRIMARY KEY (relation_id, scope_key))",
    # A successful leaf; its facts (entity id -> its own description, as a JSON object) wait for the entities.
    "CREATE TEMP TABLE gb_leaf (seq INTEGER PRIMARY KEY, location TEXT NOT NULL, id TEXT NOT NULL,"
    " result_id TEXT NOT NULL, summary TEXT, facts TEXT NOT NULL)",
    # The scope each story line, saved fragment, entity and written event lives in.
    "CREATE TEMP TABLE gb_story_line (id TEXT PRIMARY KEY, scope_key TEXT NOT NULL)",
    "CREATE TEMP TABLE gb_reference (id TEXT PRIMARY KEY, scope_key TEXT NOT NULL)",
    "CREATE TEMP TABLE gb_entity (id TEXT PRIMARY KEY, scope_key TEXT NOT NULL)",
    "CREATE TEMP TABLE gb_event (id TEXT PRIMARY KEY, scope_key TEXT NOT NULL)",
    # The newest saved fragment of each live record (reviews.py), and the latest time any of them names.
    "CREATE TEMP TABLE gb_source (key TEXT PRIMARY KEY, source_id TEXT NOT NULL, created_at TEXT NOT NULL,"
    " last_time TEXT)",
    # Current stories that can be written, with what their plan found (story_mapping.py).
    "CREATE TEMP TABLE gb_story (id TEXT PRIMARY KEY, level TEXT NOT NULL, parent_id TEXT, scope_key TEXT,"
    " why_not TEXT NOT NULL, has_events INTEGER NOT NULL, has_links INTEGER NOT NULL)",
    "CREATE INDEX temp.gb_story_parent ON gb_story (parent_id)",
    # Validated lines that go out after lines made later (`part` first, then the order they came in).
    "CREATE TEMP TABLE gb_waiting (seq INTEGER PRIMARY KEY, part INTEGER NOT NULL, location TEXT NOT NULL,"
    " line BLOB NOT NULL)",
    # The summaries (a result's, a leaf's), validated, until the facts they list are known; and those facts: what
    # each result recorded (its events, entity changes, snapshot entities and relations) and each leaf described,
    # as written here, by the id of the summary that lists them.
    "CREATE TEMP TABLE gb_summary (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, location TEXT NOT NULL,"
    " line BLOB NOT NULL)",
    "CREATE TEMP TABLE gb_fact (summary_id TEXT NOT NULL, type TEXT NOT NULL, id TEXT NOT NULL,"
    " PRIMARY KEY (summary_id, type, id))",
)
ADD_RESULT: Final = """
INSERT INTO temp.gb_result (id, scope_key, created_at) VALUES (?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET scope_key = excluded.scope_key, created_at = excluded.created_at
RETURNING seq"""
ADD_SNAPSHOT_ENTITY: Final = "INSERT OR REPLACE INTO temp.gb_snapshot_entity VALUES (?, ?, ?, ?, ?, ?, ?)"
ADD_SNAPSHOT_RELATION: Final = "INSERT OR IGNORE INTO temp.gb_snapshot_relation VALUES (?, ?, ?)"
ADD_LEAF: Final = "INSERT INTO temp.gb_leaf (location, id, result_id, summary, facts) VALUES (?, ?, ?, ?, ?)"
WAIT: Final = "INSERT INTO temp.gb_waiting (part, location, line) VALUES (?, ?, ?)"
WAITING: Final = "SELECT location, line FROM temp.gb_waiting ORDER BY part, seq"
HOLD_SUMMARY: Final = "INSERT INTO temp.gb_summary (id, location, line) VALUES (?, ?, ?)"
ADD_FACT: Final = "INSERT OR IGNORE INTO temp.gb_fact VALUES (?, ?, ?)"
SUMMARIES: Final = """
SELECT s.location, s.line,
       (SELECT json_group_array(json_object('type', f.type, 'id', f.id))
          FROM (SELECT type, id FROM temp.gb_fact WHERE summary_id = s.id ORDER BY type, id) AS f) AS facts
  FROM temp.gb_summary AS s ORDER BY s.seq"""

ScopeTable = Literal["gb_story_line", "gb_reference", "gb_entity", "gb_event"]


@dataclass
class Seen:
    """Shared by the readers of one snapshot. Objects keep the app's ids; each lives in the scope of its review."""

    conn: sqlite3.Connection
    """The app connection, whose temporary tables hold what was read."""
    now: str
    """The import's time: `recorded_at` of source versions (write-once, see server/store/sync.py)."""
    notes: Notes
    projects: set[str] = field(default_factory=set)
    scopes: set[str] = field(default_factory=set)
    """Scope keys declared by a `scope` line of this import."""

    def __post_init__(self) -> None:
        for sql in SCRATCH:
            self.conn.execute(sql)

    def line(self, where: Where, value: dict[str, Any]) -> tuple[Where, Line]:
        return (where, validate_line(where, value))

    def child_text(self, text: object, what: str) -> object:
        """`text` as our store can keep it whole: U+0000 (which the interchange refuses in source text and leaf
        descriptions, see ChildText) becomes U+FFFD, one code point for one, so positions stay; counted in the notes.
        One such app message must not stop the whole sync."""
        if isinstance(text, str) and "\x00" in text:
            self.notes.add(f"{what} holding U+0000 (stored with U+FFFD in its place; positions unchanged)")
            return text.replace("\x00", "\ufffd")
        return text

    def wait(self, item: tuple[Where, Line], part: int) -> None:
        """Keep a line (validated already, so errors still come in the order of the rows) until `waiting`."""
        where, line = item
        self.conn.execute(WAIT, (part, str(where), orjson.dumps(line.model_dump(mode="json", exclude_unset=True))))

    def waiting(self) -> Iterator[tuple[Where, Line]]:
        """The lines kept by `wait`, part by part, each in the order it came; the same lines again."""
        for where, dumped in self.conn.execute(WAITING):
            yield self.line(where, orjson.loads(dumped))
        self.conn.execute("DELETE FROM temp.gb_waiting")

    def hold_summary(self, item: tuple[Where, Line]) -> None:
        """Keep a summary line (validated already) until `summaries`, when the facts it lists are known."""
        where, line = item
        assert isinstance(line, SummaryLine)
        dumped = orjson.dumps(line.model_dump(mode="json", exclude_unset=True))
        self.conn.execute(HOLD_SUMMARY, (line.id, str(where), dumped))

    def add_fact(self, summary_id: str, object_type: str, object_id: str) -> None:
        """A fact written by this import that the summary `summary_id` lists: one its result recorded (the result's
        summary has the result's id) or its leaf described (`leaf:<batch id>`)."""
        self.conn.execute(ADD_FACT, (summary_id, object_type, object_id))

    def summaries(self) -> Iterator[tuple[Where, Line]]:
        """The summaries kept by `hold_summary`, each with the facts written for it as its `fact_refs` (sorted):
        where an agent that found a summary reads on, as the app's reader brings in the whole result."""
        for where, dumped, facts in self.conn.execute(SUMMARIES):
            yield self.line(where, orjson.loads(dumped) | {"fact_refs": orjson.loads(facts)})
        self.conn.execute("DELETE FROM temp.gb_summary")

    def add_result(self, result_id: str, scope_key: str, created_at: str, snapshot: object) -> None:
        """A result read, and the part of its graph snapshot the import reads later (facts.py): its entities' id,
        label, description, confirmation state and evidence, by their list positions (lines are located by them),
        and its relations' ids."""
        (seq,) = self.conn.execute(ADD_RESULT, (result_id, scope_key, created_at)).fetchone()
        entities = snapshot.get("entities") if isinstance(snapshot, dict) else None
        relations = snapshot.get("relations") if isinstance(snapshot, dict) else None
        listed: set[str] = set()
        for position, entity in enumerate(entities if isinstance(entities, list) else []):
            entity_id = entity.get("id") if isinstance(entity, dict) else None
            if not isinstance(entity_id, str) or entity_id in listed:
                continue
            listed.add(entity_id)
            state = entity.get("confirmation_state")
            label, description = (str(entity.get(name) or "") for name in ("canonical_label", "description"))
            state = state if isinstance(state, str) else "automatic"
            refs = self._snapshot_refs(entity.get("source_reference_ids_json"))
            self.conn.execute(ADD_SNAPSHOT_ENTITY, (seq, position, entity_id, label, description, state, refs))
        for relation in relations if isinstance(relations, list) else []:
            if isinstance(relation, dict) and isinstance(relation.get("id"), str):
                self.conn.execute(ADD_SNAPSHOT_RELATION, (relation["id"], scope_key, seq))

    def _snapshot_refs(self, value: object) -> str | None:
        """A snapshot entity's `source_reference_ids_json` (the entity row as that result saved it, with that
        result's references) as a JSON list of ids; None when it holds none (absent or null: the revision's
        evidence is unknown) or none we can read (counted in the notes)."""
        if value is None:
            return None
        try:
            ids = orjson.loads(value) if isinstance(value, str) else value
        except orjson.JSONDecodeError:
            ids = None
        if not isinstance(ids, list) or not all(isinstance(item, str) for item in ids):
            self.notes.add(
                "result snapshot entities whose source_reference_ids_json is not a JSON array of ids"
                " (their evidence is stored as unknown)"
            )
            return None
        return orjson.dumps(list(dict.fromkeys(ids))).decode()

    def add_leaf(
        self, where: str, leaf_id: str, result_id: str, summary: str | None, facts: dict[str, str | None]
    ) -> None:
        """A successful leaf, written once the entities (its facts' targets) are known; `facts` maps each entity
        it re-identified to the leaf's own description of it."""
        self.conn.execute(ADD_LEAF, (where, leaf_id, result_id, summary, orjson.dumps(facts).decode()))

    def scopes_of(self, table: ScopeTable, ids: list[str]) -> dict[str, str]:
        """The scope of each of `ids` that `table` holds."""
        if not ids:
            return {}
        sql = f"SELECT id, scope_key FROM temp.{table} WHERE id IN (SELECT value FROM json_each(?))"
        return dict(self.conn.execute(sql, (orjson.dumps(ids).decode(),)).fetchall())

    def in_scope(self, ids: list[str], scope: str, table: ScopeTable, what: str) -> list[str]:
        """`same_scope`, with the scopes looked up in `table`."""
        return self.same_scope(ids, scope, self.scopes_of(table, ids), what)

    def same_scope(self, ids: list[str], scope: str, known: Mapping[str, str | None], what: str) -> list[str]:
        """The linked ids that live in `scope`; the others are counted, not linked across scopes. `known` says
        where each id lives (None or absent: it is not in this import)."""
        kept = [item for item in ids if known.get(item) == scope]
        gone = [item for item in ids if known.get(item) is None]
        self.notes.add(f"links to {what} no longer in the app (not imported)", len(gone))
        self.notes.add(
            f"links to {what} in another review scope (not imported: an object lives in one scope here)",
            len(ids) - len(kept) - len(gone),
        )
        return kept
