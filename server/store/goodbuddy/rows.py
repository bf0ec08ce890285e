"""Pure mappings from GoodBuddy assistant-database values to interchange fields (no I/O).

The facts behind them (schema 62 of mesalogo/goodbuddy, read for ../shared/notes/upstream-contract.md §5):
times are JavaScript `toISOString` text, except an event's `occurred_at`, which the review model wrote
and may be empty, a bare date or anything else; locators are JSON objects whose `source` key names the
live record (`message:<id>`, `task:<id>`, `knowledge:<messageId>:<index>`) and whose `revision` is the
sha256 hex of that record's `context` in the view `supervision_review_current`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final

import orjson

from server.contracts.base import parse_instant
from server.store.errors import ImportRejected, Where

EVENT_TIME_BASIS: Final = "review_extracted"
"""An upstream event time is what the review model read from its evidence, not a record's timestamp."""
DATE_ONLY: Final = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def at(table: str, **key: object) -> str:
    """Where a line came from: `table supervision_events row id=...`."""
    return f"table {table} row " + ", ".join(f"{name}={value}" for name, value in key.items())


def instant(where: Where, column: str, value: object) -> str:
    """A time the app always writes with `toISOString`, as our UTC text; anything else is refused."""
    if isinstance(value, str):
        try:
            return parse_instant(value)
        except ValueError as exc:
            raise ImportRejected(where, column, str(exc)) from None
    raise ImportRejected(where, column, f"expected an ISO 8601 time, found {value!r}")


def maybe_instant(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_instant(value)
    except ValueError:
        return None


def event_time(value: object) -> dict[str, str | None] | None:
    """An upstream `occurred_at` as an event time, or None (unknown) when it names no instant.

    A full time with an offset is an instant; a bare `YYYY-MM-DD` is that UTC day, as the app's
    `Date.parse` reads it: the whole day, so that a time range within it (an afternoon) finds the event, not only
    one that holds its midnight; a time without an offset would depend on the app's time zone and stays unknown.
    """
    if not isinstance(value, str):
        return None
    text = value.strip()
    if DATE_ONLY.match(text):
        start, end = maybe_instant(f"{text}T00:00:00Z"), maybe_instant(f"{text}T23:59:59.999Z")
        if start is None or end is None:
            return None
        return {"start": start, "end": end, "precision": "day", "basis": EVENT_TIME_BASIS}
    start = maybe_instant(text)
    return None if start is None else {"start": start, "basis": EVENT_TIME_BASIS}


def json_column(where: Where, column: str, value: object) -> Any:
    """A JSON text column; malformed JSON is refused naming the row and column."""
    if value is None:
        return None
    try:
        return orjson.loads(str(value))
    except orjson.JSONDecodeError as exc:
        raise ImportRejected(where, column, f"not valid JSON ({exc.msg})") from None


def id_list(where: Where, column: str, value: object) -> list[str]:
    ids = json_column(where, column, value)
    if ids is None:
        return []
    if not isinstance(ids, list) or not all(isinstance(item, str) for item in ids):
        raise ImportRejected(where, column, "expected a JSON array of ids")
    return list(dict.fromkeys(ids))


def revision_of(context: object) -> str:
    """The app's revision of a live record: sha256 hex of its `context` text."""
    return hashlib.sha256(str(context).encode()).hexdigest()


def source_key(source_type: str, source_id: str, locator: dict[str, Any] | None) -> str:
    """The live record a saved fragment came from, named as the app names it.

    New locators carry it as `source`; older ones lack it, and the app then falls back to the message of
    a conversation fragment and the task of a task fragment.
    """
    found = (locator or {}).get("source")
    if isinstance(found, str) and found:
        return found
    message = (locator or {}).get("messageId")
    index = (locator or {}).get("referenceIndex")
    if source_type == "conversation" and isinstance(message, str):
        return f"message:{message}"
    if source_type == "knowledge" and isinstance(message, str) and isinstance(index, int):
        return f"knowledge:{message}:{index}"
    if source_type == "task":
        return f"task:{source_id}"
    if source_type == "memory":
        return f"memory:{source_id}"
    return f"{source_type}:{source_id}"


def live_record(key: str) -> tuple[str, int, str] | None:
    """(record_id, reference_index, view type) of a source key, or None when the view holds no such records."""
    kind, _, rest = key.partition(":")
    if kind == "message":
        return (rest, 0, "conversation")
    if kind == "task":
        return (rest, 0, "task")
    if kind == "knowledge":
        record, _, index = rest.rpartition(":")
        return (record, int(index), "knowledge") if index.isascii() and index.isdigit() else None
    return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def locator(upstream: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    """Our locator: the fields we know by name, and the app's whole locator kept as `external`. A task fragment's
    task id is the one its source key names (`task:<id>`: the app's locator has no field of its own for it)."""
    if upstream is None:
        return None
    kind, _, record = key.partition(":")
    sequence = upstream.get("sequence")
    known = {
        "project_id": _text(upstream.get("projectId")),
        "conversation_id": _text(upstream.get("conversationId")),
        "message_id": _text(upstream.get("messageId")),
        "order": sequence if isinstance(sequence, int) and not isinstance(sequence, bool) else None,
        "role": _text(upstream.get("role")),
        "document_id": _text(upstream.get("documentId")),
        "chunk_id": _text(upstream.get("chunkId")),
        "task_id": _text(record) if kind == "task" else None,
    }
    return {name: value for name, value in known.items() if value is not None} | {"external": upstream}


def offset(upstream: dict[str, Any] | None, name: str) -> int | None:
    value = (upstream or {}).get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def scope_key_of(scope: dict[str, Any]) -> str:
    """Our canonical key of an app scope object (validated by the caller)."""
    if scope.get("kind") == "global":
        return "global"
    return "projects:" + orjson.dumps(sorted(scope["projectIds"])).decode()


def _whole(row: dict[str, Any], column: str) -> int:
    """An offset column of `supervision_review_sources`; anything but a whole number is refused naming the row."""
    value = row[column]
    if isinstance(value, int):
        return value
    where = at("supervision_review_sources", run_id=row["run_id"], source=row["source"])
    raise ImportRejected(where, column, f"expected a whole number of code points, found {value!r}")


UNREACHED: Final = "not reached by this review run (it stopped before the end of this source version)"


def coverage(
    where: Where, stored: object, review_sources: list[dict[str, Any]], omitted: int, interval: dict[str, str] | None
) -> dict[str, Any] | None:
    """What a result's run really recorded about its progress.

    A review run (schema 47+) keeps every source it read with the range it processed: detailed coverage.
    Older results hold only `{"evidence": N}`: a count. Anything else is no coverage record (unknown).
    """
    if review_sources:
        sources, missing = [], []
        for row in review_sources:
            start, end, length = (_whole(row, name) for name in ("initial_offset", "processed_offset", "length"))
            status = "processed" if end >= length else "partial" if end > start else "unprocessed"
            sources.append(
                {
                    "source_id": row["source"],
                    "source_version": row["revision"],
                    "fragments": [[start, end]] if end > start else [],
                    "status": status,
                }
            )
            stopped = max(start, end)
            if stopped < length:  # the run's own record of what it did not reach: [where it stopped, the end)
                missing.append({"source_id": row["source"], "ranges": [[stopped, length]], "reason": UNREACHED})
        return {
            "kind": "detailed",
            "processed_range": interval,
            "sources": sources,
            "missing": missing,
            "unprocessed_sources": sum(source["status"] != "processed" for source in sources) + omitted,
        }
    count = stored.get("evidence") if isinstance(stored, dict) else None
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return {"kind": "legacy_count", "count": count}
    return None
