"""The SQL of context_rows.py: each kind's content by id in one scope, and the few fields read instead of the
content of the objects a selection reads without it (context_rows' docstring says which and why)."""

from __future__ import annotations

from typing import Final

from server.reader import db
from server.reader.saved_range import own_length_sql, text_differs_sql

STORY_LINES_BY_ID: Final = f"""
SELECT id, scope_key, topic, recorded_at, revision FROM story_lines WHERE id IN {db.IDS} AND scope_key = :scope_key
"""
ENTITIES_BY_ID: Final = f"""
SELECT id, story_line_id, entity_type, canonical_label, description, confirmation_state, decision_status,
       work_status, updated_at, revision
  FROM entities WHERE id IN {db.IDS} AND scope_key = :scope_key
"""
ENTITY_REVISIONS_OF: Final = """
SELECT entity_id, result_id, revision, canonical_label, description, confirmation_state, recorded_at
  FROM entity_revisions WHERE entity_id = :entity_id AND scope_key = :scope_key
"""
LEAF_FACTS_OF: Final = """
SELECT f.owner_id, l.result_id, f.object_type, f.object_id, f.description, l.recorded_at, r.review_generated_at
  FROM fact_links AS f JOIN leaves AS l ON l.id = f.owner_id JOIN results AS r ON r.id = l.result_id
 WHERE f.owner_type = 'leaf' AND f.object_type = :object_type AND f.object_id = :object_id
   AND f.scope_key = :scope_key AND l.scope_key = :scope_key
"""
EVENTS_BY_ID: Final = f"""
SELECT id, result_id, story_line_id, event_type, title, description, recorded_at, confirmation_state, revision
  FROM events WHERE id IN {db.IDS} AND scope_key = :scope_key
"""
EVENT_ENTITY_IDS: Final = f"""
SELECT event_id, entity_id FROM event_entities WHERE event_id IN {db.IDS} ORDER BY event_id, entity_id
"""
# Entity changes and relations are read with their content or with the fields read instead of it (module
# docstring): the same rows in the same order, as those columns are a prefix of the content's.
_CHANGE_COLUMNS: Final = """
SELECT entity_id, association_key, result_id, event_id, change_type, description, entity_revision, applicable_from,
       applicable_to, confirmation_state, recorded_at
  FROM entity_changes"""
_CHANGE_FIELDS: Final = "SELECT entity_id, association_key, result_id, event_id FROM entity_changes"
_OF_ENTITIES: Final = f" WHERE entity_id IN {db.IDS} AND scope_key = :scope_key ORDER BY entity_id, association_key"
_OF_EVENTS: Final = f" WHERE event_id IN {db.IDS} AND scope_key = :scope_key ORDER BY entity_id, association_key"
CHANGES_OF_ENTITIES: Final = _CHANGE_COLUMNS + _OF_ENTITIES
CHANGES_OF_EVENTS: Final = _CHANGE_COLUMNS + _OF_EVENTS
CHANGE_FIELDS_OF_ENTITIES: Final = _CHANGE_FIELDS + _OF_ENTITIES
CHANGE_FIELDS_OF_EVENTS: Final = _CHANGE_FIELDS + _OF_EVENTS
_RELATION_COLUMNS: Final = """
SELECT id, result_id, from_type, from_id, to_type, to_id, relation_type, reason, confirmation_state, recorded_at,
       revision
  FROM relations"""
_RELATION_FIELDS: Final = (
    "SELECT id, result_id, from_type, from_id, to_type, to_id, relation_type, reason FROM relations"
)
_BY_ID: Final = f" WHERE id IN {db.IDS} AND scope_key = :scope_key"
_FROM_ANY: Final = f" WHERE from_type = :object_type AND from_id IN {db.IDS} AND scope_key = :scope_key"
_TO_ANY: Final = f" WHERE to_type = :object_type AND to_id IN {db.IDS} AND scope_key = :scope_key"
RELATIONS_BY_ID: Final = _RELATION_COLUMNS + _BY_ID
RELATIONS_TOUCHING: Final = f"{_RELATION_COLUMNS}{_FROM_ANY}\nUNION\n{_RELATION_COLUMNS}{_TO_ANY}"
RELATION_FIELDS_BY_ID: Final = _RELATION_FIELDS + _BY_ID
RELATION_FIELDS_TOUCHING: Final = f"{_RELATION_FIELDS}{_FROM_ANY}\nUNION\n{_RELATION_FIELDS}{_TO_ANY}"
SUMMARIES_BY_ID: Final = f"""
SELECT id, result_id, interval_from, interval_to, body, open_items, recorded_at, revision
  FROM summaries WHERE id IN {db.IDS} AND scope_key = :scope_key
"""
SUMMARY_FACT_REFS: Final = f"""
SELECT owner_id, object_type, object_id FROM fact_links
 WHERE owner_type = 'summary' AND owner_id IN {db.IDS} ORDER BY owner_id, object_type, object_id
"""
# Read instead of the content of objects read without it: what the header and the known gaps show (module docstring).
ENTITY_FIELDS: Final = f"""
SELECT id, entity_type, work_status FROM entities WHERE id IN {db.IDS} AND scope_key = :scope_key
"""
SUMMARY_FIELDS: Final = f"""
SELECT id, open_items FROM summaries WHERE id IN {db.IDS} AND scope_key = :scope_key
"""
SOURCE_REFERENCE_FIELDS: Final = f"""
SELECT id, source_type, availability FROM source_references WHERE id IN {db.IDS} AND scope_key = :scope_key
"""
# With what its own stored version says of its range, as read_source reads it (saved_range.py).
SOURCE_REFERENCES_BY_ID: Final = f"""
SELECT r.id, r.result_id, r.source_type, r.original_source_id, r.source_version, r.title, r.locator_json, r.fragment,
       r.fragment_start, r.fragment_end, r.source_length, r.availability, r.source_record_time, r.recorded_at,
       {own_length_sql("r")} AS own_length, {text_differs_sql("r")} AS own_text_differs
  FROM source_references AS r WHERE r.id IN {db.IDS} AND r.scope_key = :scope_key
"""
# Background: Global memory items (for a caller whose grant reads Global) and those of the scope's own projects.
MEMORY_ITEMS_FOR: Final = f"""
SELECT id, project_id, memory_type, body, confirmation_state, updated_at FROM memory_items
 WHERE (project_id IS NULL AND :with_global) OR project_id IN {db.IDS} ORDER BY id
"""
