"""The fields every returned object carries, from its uniform stored row."""

from __future__ import annotations

from typing import Any

from server.contracts.base import GlobalScope, ProjectsScope
from server.contracts.common import TEXT_LIMIT, EventInterval, capped_texts, listed_sources
from server.reader.objects import ObjectRow


def item_base(
    row: ObjectRow, scope: GlobalScope | ProjectsScope, source_reference_ids: list[str], evidence_basis: str
) -> dict[str, Any]:
    """`evidence_basis`: 'row' when `source_reference_ids` is the row's own stored evidence, 'object' when the
    row stored none and they are its object's current evidence (objects.Evidence.of)."""
    interval = row.event_interval
    # The stored texts beside the content are capped (TEXT_LIMIT, flagged when cut): any of them is free text to an
    # import, and one of 200,000 characters made every page showing the item response_too_large.
    texts = {
        "object_revision": row.revision if row.revision is not None else "unknown",
        "confirmation_state": row.confirmation_state if row.confirmation_state is not None else "unknown",
    }
    return (
        {
            "object_ref": {"type": row.object_type, "id": row.object_id},
            "result_id": row.result_key or None,
            "scope": scope,
            "event_time": row.event_time_start,
            "event_interval": EventInterval.model_validate(capped_texts(interval, TEXT_LIMIT))
            if interval is not None
            else None,
            "review_generated_at": row.review_generated_at,
            "recorded_at": row.recorded_at,
            "validity": "unknown",
        }
        | capped_texts(texts, TEXT_LIMIT)
        | listed_sources(source_reference_ids)
        | {"evidence_basis": evidence_basis}
    )
