"""Shared pieces of the demo graph generator: scopes, record times, and a line collector."""

from __future__ import annotations

from typing import Any

Line = dict[str, Any]

ATLAS: Line = {"kind": "projects", "projectIds": ["atlas"]}
BEACON: Line = {"kind": "projects", "projectIds": ["beacon"]}
PAIR: Line = {"kind": "projects", "projectIds": ["atlas", "beacon"]}
LEGACY: Line = {"kind": "projects", "projectIds": ["legacy"]}
GLOBAL: Line = {"kind": "global"}

# When each result was recorded; objects of a result are recorded with it.
RECORDED = {
    "res-atlas-2026-03": "2026-03-31T18:02:11+08:00",
    "res-atlas-2026-05": "2026-05-31T20:04:37+08:00",
    "res-atlas-2026-07": "2026-07-15T10:03:00Z",
    "res-beacon-2026-06": "2026-06-30T09:01:15+08:00",
    "res-pair-2026-06": "2026-07-01T08:00:40+08:00",
    "res-global-2026-07": "2026-08-01T08:02:00Z",
    "res-legacy-2025-11": "2025-11-30T17:00:00+08:00",
}


def ref(kind: str, object_id: str) -> Line:
    return {"type": kind, "id": object_id}


def when(start: str, precision: str, basis: str, end: str | None = None) -> Line:
    return {"start": start, "end": end, "precision": precision, "basis": basis}


class Demo:
    """Collects lines and remembers source texts so references can locate their fragments."""

    def __init__(self) -> None:
        self.lines: list[Line] = []
        self.texts: dict[tuple[str, str], str] = {}

    def add(self, kind: str, **fields: Any) -> None:
        self.lines.append({"kind": kind, **fields})

    def source(self, source_id: str, source_type: str, *, versions: list[tuple[str, str, str]], **fields: Any) -> None:
        """A source and its kept versions `(version, recorded_at, text)`; the last one is current."""
        current = versions[-1][0] if versions else None
        self.add("source", id=source_id, source_type=source_type, current_version=current, **fields)
        for version, recorded_at, text in versions:
            self.texts[(source_id, version)] = text
            self.add("source_version", source_id=source_id, version=version, text=text, recorded_at=recorded_at)

    def reference(
        self,
        ref_id: str,
        result_id: str,
        source_id: str,
        version: str,
        fragment: str,
        *,
        source_type: str = "conversation",
        text: str | None = None,
        **fields: Any,
    ) -> None:
        """A source reference whose fragment is `text[start:end]` of the referenced version.

        `text` is given only for a source whose version is no longer kept (a deleted message).
        """
        full = text if text is not None else self.texts[(source_id, version)]
        assert full.count(fragment) == 1, f"{ref_id}: fragment must occur exactly once in {source_id}@{version}"
        start = full.index(fragment)
        self.add(
            "source_reference",
            id=ref_id,
            result_id=result_id,
            source_type=source_type,
            original_source_id=source_id,
            source_version=version,
            fragment={"text": fragment, "start": start, "end": start + len(fragment)},
            source_length=len(full),
            recorded_at=RECORDED[result_id],
            **fields,
        )

    def whole(self, source_id: str, version: str) -> list[int]:
        return [0, len(self.texts[(source_id, version)])]


def message(project: str, conversation: str, message_id: str, order: int, role: str = "user") -> Line:
    return {
        "project_id": project,
        "conversation_id": conversation,
        "message_id": message_id,
        "order": order,
        "role": role,
    }


def event(d: Demo, event_id: str, result_id: str, **fields: Any) -> None:
    d.add("event", id=event_id, result_id=result_id, recorded_at=RECORDED[result_id], **fields)
