"""The rows read_source reads, in as few statements as a page allows.

One statement reads the reference with its result, its source, the version to read and the source's
version list; one more reads the chunks a page overlaps (an index range). Each statement is one hop to
the connection's thread, so a page costs the same few hops at any depth of any text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import aiosqlite
import orjson

from server.reader.objects import leaf_splits
from server.reader.saved_range import saved_range, text_differs_sql

VERSION_LIST_LIMIT: Final = 50
# The version row joined is the one the read wants: `:version` for a version read, the source's current
# version for a current read, none for a snapshot. The version list is sorted in Python: SQLite does not
# promise the order in which json_group_array sees a subquery's rows.
REFERENCE: Final = f"""
SELECT r.id, r.result_id, r.scope_key, r.source_type, r.original_source_id, r.source_version, r.locator_json,
       r.title, r.fragment, r.fragment_start, r.fragment_end, r.source_length, r.availability,
       r.source_record_time, r.recorded_at, res.review_generated_at, res.coverage_json,
       s.id AS source_id, s.project_id, s.conversation_id, s.status, s.current_version, s.updated_at,
       v.version AS version, v.length AS version_length, v.recorded_at AS version_recorded_at, v.text_revision,
       rv.length AS reference_version_length, {text_differs_sql("r")} AS reference_text_differs,
       (SELECT count(*) FROM source_versions WHERE source_id = r.original_source_id) AS version_count,
       (SELECT json_group_array(json_array(recorded_at, version))
          FROM (SELECT recorded_at, version FROM source_versions WHERE source_id = r.original_source_id
                 ORDER BY recorded_at, version LIMIT :limit)) AS versions
  FROM source_references AS r
  JOIN results AS res ON res.id = r.result_id
  LEFT JOIN sources AS s ON s.id = r.original_source_id
  LEFT JOIN source_versions AS v
    ON v.source_id = r.original_source_id
   AND v.version = CASE :kind WHEN 'version' THEN :version WHEN 'current' THEN s.current_version END
  LEFT JOIN source_versions AS rv ON rv.source_id = r.original_source_id AND rv.version = r.source_version
 WHERE r.id = :reference_id"""
# The newest versions of a source (source_version_required names them): the source's versions on its primary key,
# sorted; a source keeps few versions, and this runs on that error's path only.
NEWEST_VERSIONS: Final = """
SELECT version FROM source_versions WHERE source_id = :source_id ORDER BY recorded_at DESC, version DESC LIMIT :limit"""
# The chunks overlapping [start, end): from the last chunk starting at or before `start` (one index seek)
# up to the last one starting before `end` (an index range). Chunk sizes are not assumed.
SOURCE_CHUNKS: Final = """
SELECT start, text FROM source_chunks
 WHERE source_id = :source_id AND version = :version AND start < :end
   AND start >= coalesce((SELECT c.start FROM source_chunks AS c
                           WHERE c.source_id = :source_id AND c.version = :version AND c.start <= :start
                           ORDER BY c.start DESC LIMIT 1), 0)
 ORDER BY start"""


class StoredTextBroken(RuntimeError):
    """The stored chunks of a version do not cover its recorded length: a read failure, not an empty page."""


@dataclass(frozen=True)
class Reference:
    id: str
    result_id: str
    scope_key: str
    source_type: str
    original_source_id: str
    source_version: str | None
    locator: dict[str, Any] | None
    title: str | None
    fragment: str
    fragment_start: int | None
    fragment_end: int | None
    source_length: int | None
    availability: str
    source_record_time: str | None
    recorded_at: str
    review_generated_at: str
    coverage: dict[str, Any] | None
    contradiction: str | None = None
    """Why the stored range was dropped (made unknown), for the note: it contradicted the fragment's text, the
    source length saved with it, or the stored text of its own version (a database imported before imports
    refused that, or a row of another program's)."""


@dataclass(frozen=True)
class Source:
    id: str
    project_id: str | None
    conversation_id: str | None
    status: str
    current_version: str | None
    updated_at: str


@dataclass(frozen=True)
class Version:
    """The stored version a read wants (its text is in source_chunks)."""

    version: str
    length: int
    recorded_at: str
    text_revision: int


@dataclass(frozen=True)
class Stored:
    """Everything one read_source page needs besides the text itself."""

    reference: Reference
    source: Source | None
    version: Version | None
    """The wanted version's row; None for a snapshot, or when that version is not stored."""
    version_count: int
    versions: list[str]
    """The first VERSION_LIST_LIMIT versions, oldest first."""
    reference_version_stored: bool
    """Whether the version the reference was saved from is stored (False when it is unknown)."""


async def read_stored(conn: aiosqlite.Connection, reference_id: str, kind: str, version: str | None) -> Stored | None:
    """The reference and what it points at, whatever scope it is in (the caller checks); None if none."""
    params = {"reference_id": reference_id, "kind": kind, "version": version, "limit": VERSION_LIST_LIMIT}
    rows = await conn.execute_fetchall(REFERENCE, params)
    row = next(iter(rows), None)
    if row is None:
        return None
    locator, coverage = row["locator_json"], row["coverage_json"]
    fragment = row["fragment"]
    checked = saved_range(
        fragment,
        row["fragment_start"],
        row["fragment_end"],
        row["source_length"],
        row["source_version"],
        row["reference_version_length"],  # the stored text of the version the reference was saved from
        row["reference_text_differs"],
    )
    reference = Reference(
        id=row["id"],
        result_id=row["result_id"],
        scope_key=row["scope_key"],
        source_type=row["source_type"],
        original_source_id=row["original_source_id"],
        source_version=row["source_version"],
        locator=orjson.loads(locator) if locator is not None else None,
        title=row["title"],
        fragment=fragment,
        fragment_start=checked.start,
        fragment_end=checked.end,
        source_length=checked.length,
        availability=row["availability"],
        source_record_time=row["source_record_time"],
        recorded_at=row["recorded_at"],
        review_generated_at=row["review_generated_at"],
        coverage=orjson.loads(coverage) if coverage is not None else None,
        contradiction=checked.contradiction,
    )
    source = (
        None
        if row["source_id"] is None
        else Source(
            id=row["source_id"],
            project_id=row["project_id"],
            conversation_id=row["conversation_id"],
            status=row["status"],
            current_version=row["current_version"],
            updated_at=row["updated_at"],
        )
    )
    wanted = (
        None
        if row["version"] is None
        else Version(
            version=row["version"],
            length=int(row["version_length"]),
            recorded_at=row["version_recorded_at"],
            text_revision=int(row["text_revision"]),
        )
    )
    listed = sorted((str(at), str(name)) for at, name in orjson.loads(row["versions"]))
    return Stored(
        reference,
        source,
        wanted,
        int(row["version_count"]),
        [name for _, name in listed],
        reference_version_stored=row["reference_version_length"] is not None,
    )


async def newest_versions(conn: aiosqlite.Connection, source_id: str, limit: int) -> list[str]:
    """The source's `limit` newest stored versions, newest first (by recorded time, then name)."""
    rows = await conn.execute_fetchall(NEWEST_VERSIONS, {"source_id": source_id, "limit": limit})
    return [str(row[0]) for row in rows]


async def read_slice(conn: aiosqlite.Connection, source_id: str, version: str, start: int, end: int) -> str:
    """Code points [start, end) of a stored version, from the chunks that overlap it only (one statement)."""
    if end <= start:
        return ""
    params = {"source_id": source_id, "version": version, "start": start, "end": end}
    parts: list[str] = []
    expected: int | None = None
    for chunk_start, chunk in await conn.execute_fetchall(SOURCE_CHUNKS, params):
        if (expected is None and chunk_start > start) or (expected is not None and chunk_start != expected):
            raise StoredTextBroken(f"source {source_id!r} version {version!r} has a gap at code point {start}")
        expected = chunk_start + len(chunk)
        parts.append(chunk[max(start - chunk_start, 0) : end - chunk_start])
    text = "".join(parts)
    if len(text) != end - start:
        raise StoredTextBroken(f"source {source_id!r} version {version!r} is shorter than its recorded length")
    return text


CARRYING_LISTED: Final = 10
# One statement per kind of id (each on its own index), so the error path costs a few index lookups.
REFERENCES_CARRYING: Final = """
SELECT id FROM source_references WHERE original_source_id = :id AND scope_key = :scope_key
UNION SELECT id FROM source_references WHERE json_extract(locator_json, '$.message_id') = :id AND scope_key = :scope_key
UNION SELECT id FROM source_references WHERE json_extract(locator_json, '$.task_id') = :id AND scope_key = :scope_key
UNION SELECT source_reference_id FROM object_sources
       WHERE object_type IN ('story_line', 'story', 'experience', 'event', 'entity', 'entity_change', 'relation',
                             'summary', 'source_reference')
         AND object_id = :id AND scope_key = :scope_key
ORDER BY 1 LIMIT :limit
"""


async def references_carrying(conn: aiosqlite.Connection, scope_key: str, some_id: str) -> list[str]:
    """References of this scope for an id that is not a reference id: agents pass the original_source_id or the
    message id they see in a read, or an object's id. Read only in the requested scope, so nothing leaks."""
    found: list[str] = []
    # A leaf description's id (`leaf:<leaf_id>:<id>`, a get_context item's) names the object it describes, whose
    # current evidence that item lists (evidence_basis 'object').
    for candidate in dict.fromkeys((some_id, *(described for _, described in leaf_splits(some_id)))):
        params = {"id": candidate, "scope_key": scope_key, "limit": CARRYING_LISTED}
        found += [str(row[0]) for row in await conn.execute_fetchall(REFERENCES_CARRYING, params)]
    return sorted(set(found))[:CARRYING_LISTED]
