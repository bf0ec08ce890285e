"""A saved fragment whose text, `[start, end)` and `source_length` contradict each other or the stored text of the
version it names: an interchange file is refused naming the field and the fix (its writer can correct the line);
read_source and get_context never show such a range as exact. GoodBuddy rows (another program's data) are kept with
the contradicted part unknown: see test_import_goodbuddy.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Final

import orjson
import pytest
from jsonl_graph import ALPHA, T0, dump, imported_graph, small_graph, write_jsonl
from support import client_for, ok

from server.store.errors import ImportRejected
from server.store.exporter import export_file
from server.store.importer import import_file, import_source
from server.store.jsonl import JsonlSource
from server.store.sync import SyncPolicy

pytestmark = pytest.mark.anyio

READ, CONTEXT = "story_graph_read_source", "story_graph_get_context"


def with_ref1(**changes: Any) -> list[dict[str, Any]]:
    """The small graph with ref-1 (fragment 'first text' at [6, 16) of the 16-code-point v1) changed."""
    lines = small_graph()
    for line in lines:
        if line.get("id") == "ref-1":
            line.update(changes)
    return lines


def refused(db: Path, folder: Path, lines: list[dict[str, Any]]) -> ImportRejected:
    """Import `lines` into `db`, which refuses them and stays as it was: what it said."""
    before = dump(db)
    with pytest.raises(ImportRejected) as caught:
        import_file(db, write_jsonl(folder / "bad.jsonl", lines))
    assert dump(db) == before
    return caught.value


@pytest.mark.parametrize(
    ("changes", "field", "problem"),
    [
        (
            {"fragment": {"text": "first text", "start": 0, "end": 5}},
            "fragment.end",
            "end - start is 5 but fragment.text is 10 code points long; [start, end) must span exactly the text:"
            " set end to 10, or null if unknown",
        ),
        (
            # An astral character is one code point (two UTF-16 units): 'a🚀b' is 3 long, so [0, 4) is refused.
            {"fragment": {"text": "a🚀b", "start": 0, "end": 4}},
            "fragment.end",
            "end - start is 4 but fragment.text is 3 code points long",
        ),
        (
            {"fragment": {"text": "first text", "start": 6, "end": 16}, "source_length": 10},
            "source_length",
            "source_length 10 is shorter than fragment.end 16: the fragment must lie within the source; give the"
            " source's whole length in code points, or null if unknown",
        ),
        (
            {"fragment": {"text": "first text", "start": 12}, "source_length": 10},
            "source_length",
            "source_length 10 is shorter than fragment.start 12",
        ),
        (
            # Where the fragment lies is unknown, but it is a part of the source: it cannot be longer.
            {"fragment": {"text": "first text", "start": None, "end": None}, "source_length": 3},
            "source_length",
            "source_length 3 is shorter than fragment.text (10 code points)",
        ),
    ],
)
def test_a_self_contradictory_fragment_line_is_refused_naming_the_field_and_the_fix(
    tmp_path: Path, changes: dict[str, Any], field: str, problem: str
) -> None:
    lines = with_ref1(**changes)
    number = 1 + next(n for n, line in enumerate(lines) if line.get("id") == "ref-1")

    rejected = refused(imported_graph(tmp_path, small_graph()[:1]), tmp_path, lines)

    assert (rejected.location, rejected.field) == (f"line {number}", field)
    assert problem in rejected.problem


# ref-1 names src-1 version v1, 'short first text' (16 code points): 'first text' is at [6, 16).
AGAINST_ITS_VERSION = [
    (
        # U+0000 where v1 has a space: SQLite's length() and substr() stop at it, so only 'first' was compared.
        {"fragment": {"text": "first\x00text", "start": 6, "end": None}},
        "fragment.text",
        "fragment.text is not the text of source 'src-1' version 'v1' at [6, 16)",
    ),
    (
        {"fragment": {"text": "first text", "start": 0, "end": 10}},
        "fragment.text",
        "fragment.text is not the text of source 'src-1' version 'v1' at [0, 10), which reads 'short firs': give the"
        " start and end where the text is in that version, the version it was saved from, or null start and end if"
        " unknown",
    ),
    (
        {"fragment": {"text": "first text", "start": 10, "end": 20}, "source_length": None},
        "fragment.end",
        "fragment.end 20 is past the end of source 'src-1' version 'v1', whose stored text is 16 code points long",
    ),
    (
        # A start alone still says where the text begins: 10 + 10 code points runs past v1 too.
        {"fragment": {"text": "first text", "start": 10, "end": None}, "source_length": None},
        "fragment.end",
        "the fragment's end (10 + its length = 20) is past the end of source 'src-1' version 'v1'",
    ),
    (
        {"source_length": 40},
        "source_length",
        "source_length 40 is not the length of source 'src-1' version 'v1', whose stored text is 16 code points"
        " long: set it to 16, or null if unknown",
    ),
]


@pytest.mark.parametrize(("changes", "field", "problem"), AGAINST_ITS_VERSION)
def test_a_fragment_its_version_in_the_same_file_contradicts_is_refused_wherever_the_version_line_is(
    tmp_path: Path, changes: dict[str, Any], field: str, problem: str
) -> None:
    lines = with_ref1(**changes)
    # The reference comes first, long before the source_version line it is checked against.
    lines.insert(0, lines.pop(next(n for n, line in enumerate(lines) if line.get("id") == "ref-1")))

    rejected = refused(imported_graph(tmp_path, small_graph()[:1]), tmp_path, lines)

    assert (rejected.location, rejected.field) == ("line 1", field)
    assert problem in rejected.problem


@pytest.mark.parametrize(("changes", "field", "problem"), AGAINST_ITS_VERSION)
def test_a_fragment_a_version_stored_earlier_contradicts_is_refused(
    tmp_path: Path, changes: dict[str, Any], field: str, problem: str
) -> None:
    line = next(line for line in with_ref1(**changes) if line.get("id") == "ref-1") | {"id": "ref-new"}
    other = {"kind": "result", "id": "r-other", "scope": ALPHA, "review_generated_at": T0, "recorded_at": T0}

    rejected = refused(imported_graph(tmp_path, small_graph()), tmp_path, [other, line | {"result_id": "r-other"}])

    assert (rejected.location, rejected.field) == ("line 2", field)
    assert problem in rejected.problem


def test_a_fragment_in_a_part_of_a_stored_version_its_chunks_leave_out_is_refused(tmp_path: Path) -> None:
    """v1 is recorded 16 code points long, but another writer's chunks hold only 'short first' ([0, 11)): a new
    reference saying 'first text' is at [6, 16) of v1 cannot be checked there, and was taken as exact."""
    db = imported_graph(tmp_path, small_graph())
    spoiled(db, "UPDATE source_chunks SET text = 'short first' WHERE source_id = 'src-1' AND version = 'v1'")
    line = next(line for line in small_graph() if line.get("id") == "ref-1") | {"id": "ref-new"}

    rejected = refused(db, tmp_path, [line])

    assert (rejected.location, rejected.field) == ("line 1", "fragment.text")
    assert "fragment.text is not the text of source 'src-1' version 'v1' at [6, 16)" in rejected.problem


async def test_a_fragment_whose_version_is_not_stored_keeps_its_range(tmp_path: Path) -> None:
    """Nothing stored to compare with: the saved range stands (the text of a version gone is not known here)."""
    db = imported_graph(tmp_path, with_ref1(source_version="v-gone", fragment={"text": "xyz", "start": 0, "end": 3}))

    async with client_for(db) as client:
        snapshot = await ok(client, READ, {"source_reference_id": "ref-1", "scope": ALPHA})

    assert snapshot["saved_fragment"] == {"start": 0, "end": 3, "length": 3}


@pytest.mark.parametrize(
    "changes",
    [
        {"fragment": {"text": "first text", "start": 6, "end": None}, "source_length": 16},
        {"fragment": {"text": "first text", "start": None, "end": None}, "source_length": 16},
        {"fragment": {"text": "first text", "start": 6, "end": 16}, "source_length": None},
        {"fragment": {"text": "first text", "start": 6, "end": 16}, "source_length": 16},
        {"fragment": {"text": "", "start": 16, "end": 16}, "source_length": 16},
    ],
)
async def test_unknown_positions_and_lengths_stay_allowed(tmp_path: Path, changes: dict[str, Any]) -> None:
    db = imported_graph(tmp_path, with_ref1(**changes))

    async with client_for(db) as client:
        snapshot = await ok(client, READ, {"source_reference_id": "ref-1", "scope": ALPHA})

    fragment = changes["fragment"]
    assert snapshot["content"] == fragment["text"]
    assert snapshot["saved_fragment"]["start"] == (fragment["start"] if fragment["start"] is not None else "unknown")
    assert snapshot["saved_fragment"]["end"] == (fragment["end"] if fragment["end"] is not None else "unknown")
    length = changes["source_length"]
    assert snapshot["reviewed_source_length"] == (length if length is not None else "unknown")


def spoiled(db: Path, sql: str) -> None:
    """A database imported before these checks, holding a contradictory reference (real SQLite, written directly)."""
    with sqlite3.connect(db) as conn:
        conn.executescript(sql)


@pytest.mark.parametrize(
    ("sql", "length", "why"),
    [
        # 'first text' is 10 code points; [6, 11) is 5.
        (
            "UPDATE source_references SET fragment_end = 11 WHERE id = 'ref-1'",
            16,
            "[6, 11) stored with it does not span",
        ),
        # (Its version is not stored here, so only the reference's own numbers can be compared.)
        (
            "UPDATE source_references SET source_length = 12, source_version = 'v-gone' WHERE id = 'ref-1'",
            "unknown",
            "reaches past",
        ),
        # The right length, in the wrong place: v1 holds 'short firs' at [0, 10).
        (
            "UPDATE source_references SET fragment_start = 0, fragment_end = 10 WHERE id = 'ref-1'",
            16,
            "the range [0, 10) stored with it does not hold its text in version 'v1' stored here",
        ),
        (
            "UPDATE source_references SET fragment_start = 10, fragment_end = NULL WHERE id = 'ref-1'",
            16,
            "the range [10, unknown) stored with it ends past the 16 code points of version 'v1' stored here",
        ),
        # Chunks another writer left short of v1's recorded 16 code points: [6, 16) holds no stored text at all. The
        # comparison found no chunk differing and showed the range as exact (reading v1 there fails: a gap).
        (
            "UPDATE source_chunks SET text = 'short' WHERE source_id = 'src-1' AND version = 'v1'",
            16,
            "the range [6, 16) stored with it does not hold its text in version 'v1' stored here",
        ),
        # A gap inside the range: v1 holds 'short ' at [0, 6) and 'text' at [12, 16), nothing at [6, 12). The part
        # stored agrees with the fragment's 'text'; the rest is not there.
        (
            "UPDATE source_chunks SET text = 'short ' WHERE source_id = 'src-1' AND version = 'v1';"
            " INSERT INTO source_chunks VALUES ('src-1', 'v1', 12, 'text')",
            16,
            "the range [6, 16) stored with it does not hold its text in version 'v1' stored here",
        ),
    ],
)
async def test_a_stored_contradictory_range_is_never_shown_as_exact(
    tmp_path: Path, sql: str, length: int | str, why: str
) -> None:
    db = imported_graph(tmp_path, small_graph())
    spoiled(db, sql)

    async with client_for(db) as client:
        snapshot = await ok(client, READ, {"source_reference_id": "ref-1", "scope": ALPHA})
        current = await ok(client, READ, {"source_reference_id": "ref-1", "scope": ALPHA, "content_kind": "current"})
        context = await ok(client, CONTEXT, {"object_ref": {"type": "source_reference", "id": "ref-1"}, "scope": ALPHA})

    assert snapshot["content"] == "first text"
    assert snapshot["saved_fragment"] == {"start": "unknown", "end": "unknown", "length": 10}
    assert snapshot["source_location"]["start"] == snapshot["source_location"]["end"] == "missing"
    assert snapshot["position"]["source_start"] == snapshot["position"]["source_end"] == "unknown"
    assert snapshot["reviewed_source_length"] == snapshot["original_source_length"] == length
    assert why in snapshot["content_note"] and "position in the source is unknown" in snapshot["content_note"]
    # The saved range cannot be compared with the current text: not "differs" (False), but unknown.
    assert current["fragment_matches_current"] == "unknown"
    line = context_line(context)
    assert (line["fragment"]["start"], line["fragment"]["end"], line["source_length"]) == (
        None,
        None,
        None if length == "unknown" else length,
    )
    assert (
        why in line["fragment"]["position_note"] and "so its position is unknown" in line["fragment"]["position_note"]
    )


def context_line(context: dict[str, Any]) -> dict[str, Any]:
    """ref-1's stored data as a get_context page shows it (its fragments joined)."""
    parts = [i for i in context["items"] if i["object_ref"] == {"type": "source_reference", "id": "ref-1"}]
    line: dict[str, Any] = orjson.loads("".join(part["content"] for part in parts))
    return line


async def snapshot_own_version_and_context(db: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """ref-1 read as saved, its own stored version v1 read whole, and ref-1's data as get_context shows it."""
    async with client_for(db) as client:
        snapshot = await ok(client, READ, {"source_reference_id": "ref-1", "scope": ALPHA})
        own = await ok(
            client,
            READ,
            {"source_reference_id": "ref-1", "scope": ALPHA, "content_kind": "version", "source_version": "v1"},
        )
        context = await ok(client, CONTEXT, {"object_ref": {"type": "source_reference", "id": "ref-1"}, "scope": ALPHA})
    return snapshot, own, context_line(context)


async def test_a_range_ending_past_its_own_stored_version_is_shown_unknown(tmp_path: Path) -> None:
    db = imported_graph(tmp_path, small_graph())
    # [10, 20) ends past v1's 16 code points (the length saved with the reference is unknown).
    spoiled(
        db,
        "UPDATE source_references SET fragment_start = 10, fragment_end = 20, source_length = NULL WHERE id = 'ref-1'",
    )

    snapshot, own, line = await snapshot_own_version_and_context(db)

    assert snapshot["content"] == "first text"
    assert snapshot["saved_fragment"] == {"start": "unknown", "end": "unknown", "length": 10}
    assert snapshot["position"]["source_start"] == "unknown"
    why = "the range [10, 20) stored with it ends past the 16 code points of version 'v1' stored here"
    assert why in snapshot["content_note"]
    # Reading that very version: same version, and no range claimed for the fragment in it.
    assert own["differs_from_reference"] is False and own["saved_fragment"]["start"] == "unknown"
    # get_context compares with the same stored version (it used to show [10, 20) as saved).
    assert (line["fragment"]["start"], line["fragment"]["end"]) == (None, None)
    assert why in line["fragment"]["position_note"]


async def test_a_source_length_other_than_its_stored_versions_is_shown_unknown(tmp_path: Path) -> None:
    db = imported_graph(tmp_path, small_graph())
    spoiled(db, "UPDATE source_references SET source_length = 40 WHERE id = 'ref-1'")  # v1 is 16 long

    snapshot, own, line = await snapshot_own_version_and_context(db)

    # The range does hold the text in v1, so it stays exact; the length saved with it contradicts v1's own.
    assert snapshot["saved_fragment"] == {"start": 6, "end": 16, "length": 10}
    assert snapshot["reviewed_source_length"] == snapshot["original_source_length"] == "unknown"
    assert own["reviewed_source_length"] == "unknown" and own["original_source_length"] == 16
    # get_context shows the same (it used to show the 40 saved with it).
    assert (line["fragment"], line["source_length"]) == ({"text": "first text", "start": 6, "end": 16}, None)


V3_DIFFERS: Final = {"kind": "source_version", "source_id": "src-1", "version": "v3", "text": "short other text"}
V3_LONGER: Final = {"kind": "source_version", "source_id": "src-1", "version": "v3", "text": "short first text, longer"}


@pytest.mark.parametrize(
    ("later", "sql"),
    [
        # ref-1 says it was saved from v3, not stored then; a later sync stores v3: 'other text' at [6, 16).
        (V3_DIFFERS, ""),
        # v3 does hold 'first text' at [6, 16), but it is 24 code points long, not the 16 saved with ref-1.
        (V3_LONGER, ""),
        # A database imported before the check: v1 holds 'short firs' at [0, 10).
        (None, "UPDATE source_references SET fragment_start = 0, fragment_end = 10 WHERE id = 'ref-1'"),
    ],
)
async def test_a_range_its_stored_version_contradicts_exports_as_shown_and_imports_again(
    tmp_path: Path, later: dict[str, Any] | None, sql: str
) -> None:
    """An export writes a saved range and source length as the tools show them: what the stored text of the
    reference's own version contradicts is null. It wrote the stored numbers, which the import then refused at
    fragment.text or source_length, so the backup of a graph built by an import and a sync could not be restored."""
    version = "v3" if later is not None else "v1"
    db = imported_graph(tmp_path, with_ref1(source_version=version))
    if later is not None:  # a sync that repairs keeps the stored reference (a plain import refuses v3)
        later_file = write_jsonl(tmp_path / "later.jsonl", [later | {"recorded_at": T0}])
        import_source(db, JsonlSource(later_file), policy=SyncPolicy(repair=True))
    if sql:
        spoiled(db, sql)
    out = tmp_path / "export.jsonl"

    export_file(db, out)
    copy = imported_graph(tmp_path, [], name="copy")
    import_file(copy, out)  # refused before
    again = import_file(db, out)

    assert again.total == 0 and again.unchanged == len(out.read_bytes().splitlines())
    shown = []
    for graph in (db, copy):
        async with client_for(graph) as client:
            snapshot = await ok(client, READ, {"source_reference_id": "ref-1", "scope": ALPHA})
        shown.append((snapshot["saved_fragment"], snapshot["reviewed_source_length"]))
    # The copy shows what the graph showed (without the reason: its range is simply unknown there).
    exact = later is V3_LONGER  # its range holds; its length is the contradicted part
    saved = {"start": 6, "end": 16, "length": 10} if exact else {"start": "unknown", "end": "unknown", "length": 10}
    assert shown == [(saved, "unknown" if exact else 16)] * 2


async def test_a_stored_fragment_holding_u0000_is_never_shown_at_its_start(tmp_path: Path) -> None:
    """No stored version text holds U+0000 (a source text is refused with it; GoodBuddy stores U+FFFD), so a fragment
    that does is not its version's text at any start. Both tools showed [6, unknown) as saved: they compared only the
    text before U+0000, 'first', with v1's."""
    db = imported_graph(tmp_path, small_graph())
    spoiled(
        db,
        "UPDATE source_references SET fragment = 'first' || char(0) || 'text', fragment_end = NULL WHERE id = 'ref-1'",
    )

    async with client_for(db) as client:
        snapshot = await ok(client, READ, {"source_reference_id": "ref-1", "scope": ALPHA})
        context = await ok(client, CONTEXT, {"object_ref": {"type": "source_reference", "id": "ref-1"}, "scope": ALPHA})

    assert snapshot["content"] == "first\x00text"
    assert snapshot["saved_fragment"] == {"start": "unknown", "end": "unknown", "length": 10}
    why = "the range [6, unknown) stored with it does not hold its text in version 'v1' stored here"
    assert why in snapshot["content_note"]
    line = context_line(context)
    assert (line["fragment"]["start"], line["fragment"]["end"]) == (None, None) and why in line["fragment"][
        "position_note"
    ]


V3_SHORTER: Final = {"kind": "source_version", "source_id": "src-1", "version": "v3", "text": "short first"}
LATER_VERSIONS: Final = [
    (
        V3_DIFFERS,
        "source_reference 'ref-1', stored before this import, saved 'first text' at [6, 16) of source 'src-1' version"
        " 'v3', but this text reads 'other text' there: correct this text, or add a source_reference line for 'ref-1'"
        " with null start and end to this file (an import does not change a stored reference: it keeps what it"
        " saved, read as unknown)",
    ),
    (
        V3_SHORTER,
        "source_reference 'ref-1', stored before this import, saved 'first text' at [6, 16) of source 'src-1' version"
        " 'v3', but this text is 11 code points long: correct this text, or add a source_reference line for 'ref-1'"
        " with null start, end and source_length to this file",
    ),
    (
        V3_LONGER,
        "source_reference 'ref-1', stored before this import, saved source_length 16 for source 'src-1' version 'v3',"
        " but this text is 24 code points long: correct this text, or add a source_reference line for 'ref-1' with"
        " null source_length to this file",
    ),
]


@pytest.mark.parametrize("repeated", [False, True])
@pytest.mark.parametrize(("later", "problem"), LATER_VERSIONS)
def test_a_version_a_reference_stored_earlier_contradicts_is_refused_at_its_text(
    tmp_path: Path, later: dict[str, Any], problem: str, repeated: bool
) -> None:
    """ref-1 was imported naming v3, not stored then (nothing to compare with); a later file stores v3, whose text
    contradicts what ref-1 saved. It was accepted silently, and the tools then showed ref-1's range unknown. The same
    with ref-1's line repeated unchanged in the later file (a line equal to a stored one writes nothing)."""
    lines = with_ref1(source_version="v3")
    db = imported_graph(tmp_path, lines)
    ref1 = [line for line in lines if line.get("id") == "ref-1"] if repeated else []

    rejected = refused(db, tmp_path, [*ref1, later | {"recorded_at": T0}])

    assert (rejected.location, rejected.field) == (f"line {1 + len(ref1)}", "text")
    assert problem in rejected.problem


@pytest.mark.parametrize(("later", "problem"), LATER_VERSIONS)
async def test_the_fix_a_refusal_gives_imports_the_version_and_the_tools_read_what_it_nulls_as_unknown(
    tmp_path: Path, later: dict[str, Any], problem: str
) -> None:
    lines = with_ref1(source_version="v3")
    db = imported_graph(tmp_path, lines)
    ref1 = next(line for line in lines if line.get("id") == "ref-1")
    nulled = problem.split("with null ")[1].split(" to this file")[0]
    fragment = {"text": "first text", "start": None, "end": None} if "start" in nulled else ref1["fragment"]
    fixed = ref1 | {"fragment": fragment, "source_length": None if "source_length" in nulled else 16}

    report = import_file(db, write_jsonl(tmp_path / "fixed.jsonl", [later | {"recorded_at": T0}, fixed]))

    assert report.written == {"source_version": 1} and report.unchanged == 1
    async with client_for(db) as client:
        snapshot = await ok(client, READ, {"source_reference_id": "ref-1", "scope": ALPHA})
    assert snapshot["saved_fragment"]["start"] == ("unknown" if "start" in nulled else 6)
    assert snapshot["reviewed_source_length"] == ("unknown" if "source_length" in nulled else 16)


def test_a_later_version_that_agrees_with_a_stored_reference_is_imported(tmp_path: Path) -> None:
    db = imported_graph(tmp_path, with_ref1(source_version="v3"))
    agrees = V3_DIFFERS | {"text": "short first text", "recorded_at": T0}

    report = import_file(db, write_jsonl(tmp_path / "later.jsonl", [agrees]))

    assert report.written == {"source_version": 1}


@pytest.mark.parametrize(
    ("later", "note"),
    [
        (
            V3_DIFFERS,
            "saved fragments stored before whose [start, end) does not hold their text in the version this import"
            " stored (kept; read as unknown)",
        ),
        (
            V3_LONGER,
            "saved fragments stored before whose source length is not the length of the version this import stored"
            " (kept; read as unknown)",
        ),
    ],
)
async def test_a_sync_that_repairs_keeps_a_stored_reference_a_new_version_contradicts_and_counts_it(
    tmp_path: Path, later: dict[str, Any], note: str
) -> None:
    """A source synced as GoodBuddy is (SyncPolicy repair) keeps the stored reference as it is, counted in the
    report; the tools read its contradicted part as unknown."""
    db = imported_graph(tmp_path, with_ref1(source_version="v3"))
    source = JsonlSource(write_jsonl(tmp_path / "later.jsonl", [later | {"recorded_at": T0}]))

    report = import_source(db, source, policy=SyncPolicy(repair=True))

    assert report.written == {"source_version": 1}
    assert report.repaired == {note: 1}
    with sqlite3.connect(db) as conn:
        stored = conn.execute(
            "SELECT fragment_start, fragment_end, source_length FROM source_references WHERE id = 'ref-1'"
        ).fetchone()
    assert stored == (6, 16, 16)
    async with client_for(db) as client:
        snapshot = await ok(client, READ, {"source_reference_id": "ref-1", "scope": ALPHA})
    if later is V3_LONGER:
        assert (snapshot["saved_fragment"]["start"], snapshot["reviewed_source_length"]) == (6, "unknown")
    else:
        assert (snapshot["saved_fragment"]["start"], snapshot["reviewed_source_length"]) == ("unknown", 16)


def test_a_sync_that_does_not_repair_takes_a_corrected_reference_line_with_the_version(tmp_path: Path) -> None:
    """The fix a sync's message gives: the corrected reference in the same import replaces the stored one."""
    lines = with_ref1(source_version="v3")
    db = imported_graph(tmp_path, lines)
    ref1 = next(line for line in lines if line.get("id") == "ref-1")
    later = [V3_DIFFERS | {"recorded_at": T0}]
    policy = SyncPolicy()

    with pytest.raises(ImportRejected) as caught:
        import_source(db, JsonlSource(write_jsonl(tmp_path / "later.jsonl", later)), policy=policy)
    assert "correct this text, or add a corrected source_reference line for 'ref-1'" in caught.value.problem
    corrected = ref1 | {"fragment": {"text": "other text", "start": 6, "end": 16}}
    report = import_source(db, JsonlSource(write_jsonl(tmp_path / "fixed.jsonl", [*later, corrected])), policy=policy)

    assert report.written == {"source_version": 1} and report.updated == {"source_reference": 1}
