"""get_context's selection reads the objects around its target without their content (RowLoader(content=False)):
such a unit carries the same row, evidence ids, relation ends and stored fields as one read with its content, and
refuses to hand out content or a field that was not read, instead of passing on a wrong value."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import demo_db

from server.reader.context_rows import Ref, RowLoader
from server.reader.db import Database

pytestmark = pytest.mark.anyio

ATLAS = 'projects:["atlas"]'
# Each type read without content, with the fields a selection reads instead (context_rows' module docstring).
FIELDS_READ: dict[Ref, tuple[str, ...]] = {
    ("entity", "ent-decision-b"): ("entity_type", "work_status"),
    ("event", "evt-decision-b"): (),
    ("source_reference", "ref-decision-b-msg"): ("source_type", "availability"),
    ("relation", "rel-b-replaces-a"): ("reason",),
    ("entity_change", "ent-decision-a#revised-2026-05"): ("event_id",),
    ("summary", "sum-atlas-2026-05"): ("open_items",),
}


@pytest.mark.parametrize("ref", list(FIELDS_READ), ids=[ref[0] for ref in FIELDS_READ])
async def test_a_unit_read_without_content_refuses_its_content_and_any_field_not_read(tmp_path: Path, ref: Ref) -> None:
    db = await Database.open(demo_db(tmp_path))
    try:
        async with db.snapshot() as conn:
            full = (await RowLoader(conn, ATLAS).primary([ref]))[ref]
            bare = (await RowLoader(conn, ATLAS, content=False).primary([ref]))[ref]
    finally:
        await db.close()
    assert full is not None and bare is not None
    assert (bare.row, bare.source_ids, bare.ends, bare.relation_type) == (
        full.row,
        full.source_ids,
        full.ends,
        full.relation_type,
    )
    for name in FIELDS_READ[ref]:
        assert bare.value(name) == full.value(name) == full.content[name]
    with pytest.raises(RuntimeError, match=r"content of .* was not read"):
        bare.content  # noqa: B018
    unread = next(name for name in full.content if name not in FIELDS_READ[ref])
    with pytest.raises(RuntimeError, match=rf"{unread} of .* was not read"):
        bare.value(unread)


async def test_the_changes_and_relations_of_a_neighbourhood_are_the_same_rows_in_the_same_order_without_content(
    tmp_path: Path,
) -> None:
    """The selection's order of units shows in its known gaps: reading without content keeps it."""
    db = await Database.open(demo_db(tmp_path))
    try:
        async with db.snapshot() as conn:
            loaded = []
            for content in (True, False):
                load = RowLoader(conn, ATLAS, content=content)
                entities = ["ent-decision-a", "ent-decision-b", "ent-ttl-2h", "ent-option-c"]
                units = await load.changes_of_entities(entities)
                units += await load.changes_of_events(["evt-revision-a-to-b", "evt-decision-b"])
                units += await load.relations_touching("entity", entities)
                loaded.append([(u.key, u.source_ids, u.ends, u.relation_type) for u in units])
    finally:
        await db.close()
    assert len(loaded[0]) > 10
    assert loaded[1] == loaded[0]
