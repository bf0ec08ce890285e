"""Where a saved fragment is: the one rule both tools (and the importer) apply to a source reference's range.

A reference saves its fragment's text, its `[start, end)` in the version it was saved from (`source_version`) and
that source's length. A range is shown as exact only when nothing stored contradicts it: the text and the saved
length (contracts.fragment_range.consistent_range) and, when that version's text is stored here, its length and its
text at the range (all of it: a range its stored chunks do not cover is not that text). The last two come from SQL
(own_length_sql, text_differs_sql) read in the same statement as the reference itself, so a page pays no extra hop:
one index seek for the version's length and one index range over the chunks the range overlaps (a fragment's own
length of text, which the statement reads anyway). The importer
runs the same SQL over its staged lines (store/kinds.py), so a new line is refused, or repaired in sync mode,
by exactly the rule the tools apply to a row stored before it existed.
"""

from __future__ import annotations

from dataclasses import dataclass

from server.contracts.fragment_range import consistent_range


def reach_sql(r: str) -> str:
    """SQL: where the fragment of reference row `r` ends in its source: `fragment_end`, else `start + its length`
    (a known start with an unknown end still claims the text begins there)."""
    return f"coalesce({r}.fragment_end, {r}.fragment_start + length({r}.fragment))"


def own_length_sql(r: str) -> str:
    """SQL: the stored length of the version reference row `r` was saved from; NULL when it is not stored here."""
    return (
        f"(SELECT v.length FROM source_versions AS v"
        f" WHERE v.source_id = {r}.original_source_id AND v.version = {r}.source_version)"
    )


def text_differs_sql(r: str) -> str:
    """SQL: 1 when the stored text of reference row `r`'s own version differs from its fragment somewhere in
    `[start, reach)` or holds no text there, 0 when it holds the fragment there (or that version is not stored),
    NULL without a start.

    Each chunk overlapping the range is compared with the matching piece of the fragment (substr counts code points,
    the positions' unit), so no text is concatenated; the code points they cover must add up to the range's length.
    A stored version whose chunks leave part of the range out (another writer's rows: an import writes every chunk)
    does not hold the fragment there: read_source's reading of that version fails there too (source_rows.read_slice).
    The chunks are an index range: from the last chunk starting at or before `start` to the last starting before the
    reach; chunk sizes are not assumed. A fragment holding U+0000 differs from any stored version's text, which never
    holds it (interchange ChildText; GoodBuddy stores U+FFFD): SQLite's length() and substr() end a text at U+0000,
    so the chunks would be compared with its head only."""
    start, reach = f"{r}.fragment_start", reach_sql(r)
    version = f"c.source_id = {r}.original_source_id AND c.version = {r}.source_version"
    first = (
        f"(SELECT p.start FROM source_chunks AS p WHERE p.source_id = {r}.original_source_id"
        f" AND p.version = {r}.source_version AND p.start <= {start} ORDER BY p.start DESC LIMIT 1)"
    )
    lo, hi = f"max({start}, c.start)", f"min({reach}, c.start + length(c.text))"
    differs = (
        f"coalesce(max(substr(c.text, {lo} - c.start + 1, {hi} - {lo}) IS NOT substr({r}.fragment, {lo} - {start} + 1,"
        f" {hi} - {lo})), 0)"
    )
    covered = f"coalesce(sum({hi} - {lo}), 0)"
    return (
        f"CASE WHEN {start} IS NULL THEN NULL"
        f" WHEN instr({r}.fragment, char(0)) > 0 THEN {own_length_sql(r)} IS NOT NULL"
        f" ELSE {own_length_sql(r)} IS NOT NULL AND (SELECT {differs} OR {covered} <> {reach} - {start}"
        f" FROM source_chunks AS c WHERE {version} AND c.start >= coalesce({first}, 0) AND c.start < {reach}"
        f" AND {hi} > {lo}) END"
    )


def stored_there_sql(r: str) -> str:
    """SQL: the stored text of row `r`'s own version from `start`, within the chunk holding `start` and at most
    the fragment's length (what an error message quotes)."""
    start = f"{r}.fragment_start"
    return (
        f"(SELECT substr(c.text, {start} - c.start + 1, length({r}.fragment)) FROM source_chunks AS c"
        f" WHERE c.source_id = {r}.original_source_id AND c.version = {r}.source_version AND c.start <= {start}"
        f" ORDER BY c.start DESC LIMIT 1)"
    )


@dataclass(frozen=True)
class SavedRange:
    """The range and source length a tool shows (None: unknown), and why a stored one was dropped (for a note)."""

    start: int | None
    end: int | None
    length: int | None
    contradiction: str | None = None


def saved_range(
    text: str,
    start: int | None,
    end: int | None,
    length: int | None,
    version: str | None,
    own_length: int | None,
    text_differs: int | None,
) -> SavedRange:
    """The stored range of a fragment `text` with whatever contradicts what is stored made unknown.

    `own_length` and `text_differs` are own_length_sql and text_differs_sql of the same row (None: that version's
    text is not stored here, nothing to compare). A length other than that text's is unknown (the stored text is what
    is known); a range that contradicts the fragment itself, the saved length, or the stored text of its version is
    unknown, with the reason."""
    saved_start, saved_end, saved_length = start, end, length
    if own_length is not None and length is not None and length != own_length:
        length = None
    start, end, length, failed = consistent_range(text, start, end, length)
    if failed is not None:
        why = _contradiction(failed, len(text), saved_start, saved_end, saved_length)
        return SavedRange(start, end, length, why)
    if start is None or own_length is None:
        return SavedRange(start, end, length)
    reach = end if end is not None else start + len(text)
    shown = f"the range [{start}, {end if end is not None else 'unknown'})"
    if reach > own_length:
        why = f"{shown} stored with it ends past the {own_length} code points of version {version!r} stored here"
        return SavedRange(None, None, length, why)
    if text_differs:
        why = f"{shown} stored with it does not hold its text in version {version!r} stored here"
        return SavedRange(None, None, length, why)
    return SavedRange(start, end, length)


def _contradiction(failed: str, text_length: int, start: int | None, end: int | None, length: int | None) -> str:
    shown = f"[{start}, {end if end is not None else 'unknown'})"
    if failed == "span":
        return f"the range {shown} stored with it does not span its {text_length}-code-point text"
    if start is None:
        return f"the source length {length} stored with it is shorter than its {text_length}-code-point text"
    return f"the range {shown} stored with it reaches past the source length {length} stored with it"
