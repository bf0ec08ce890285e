"""Coverage of one exact scope, from what its results' stored records really say."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

import aiosqlite
import orjson

from server.contracts.base import format_utc
from server.contracts.common import (
    COVERAGE_LIST_BYTES,
    COVERAGE_LIST_LIMIT,
    COVERAGE_TEXT_LIMIT,
    Coverage,
    CoverageMissing,
    TimeRangeCoverage,
    capped_name,
    capped_texts,
    excerpt,
    fitting,
    newest_fitting,
)
from server.reader.memo import Memo, weight_of

RESULT_COVERAGE: Final = "SELECT id, coverage_json, review_generated_at FROM results WHERE scope_key = :scope_key"
"""Read in the index's order (results_by_scope: scope_key, id) and put in review order in Python (`_in_review_order`):
an ORDER BY review_generated_at made SQLite sort every row, coverage JSON included, in a temporary B-tree, which
doubled the VM steps of a scope's cold coverage read (12,632 to 25,255 for 1,803 results)."""
MEETS: Final = timedelta(seconds=1)
"""A processed range covers the whole second its end falls in (records are mostly to the second: one ending 23:59:59
covers that second), and no more: one ending 12:00:00.500 covers until 12:00:01, not 12:00:01.500."""

Spans = list[tuple[datetime, datetime]]
Entry = TypeVar("Entry")


@dataclass(frozen=True)
class ScopeCoverage:
    coverage: Coverage
    processed: Spans | None
    """Every merged processed range (the coverage lists only the newest); None when they are unknown."""
    recorded: Spans | None = None
    """The merged ranges the detailed records do name, also when other results name none (None if there are none, or
    one is not an instant): what is known to be processed, though not all that may have been."""


async def read_coverage(
    conn: aiosqlite.Connection,
    memo: Memo,
    scope_key: str,
    scope_revision: str,
    time_range: tuple[str, str] | None = None,
    time_basis: str = "event_time",
) -> Coverage:
    """Only this scope's records count: another scope's progress never does. Unknown stays 'unknown'. With a
    time_range on the event_time basis, says how the processed ranges cover it.

    Summarised once per scope data revision (the records change only with it)."""
    remembered = memo.at(scope_key, scope_revision)
    summary: ScopeCoverage | None = remembered.get("coverage")
    if summary is None:
        rows = _in_review_order(await conn.execute_fetchall(RESULT_COVERAGE, {"scope_key": scope_key}))
        records: dict[str, dict[str, Any] | None] = {
            row[0]: (orjson.loads(row[1]) if row[1] is not None else None) for row in rows
        }
        generated = {row[0]: str(row[2]) for row in rows}
        summary = summarise(records, generated)
        # processed is recorded itself, or None: the ranges are listed once.
        summary = remembered.put("coverage", summary, weight_of(len(summary.recorded or [])))
    if time_range is None or time_basis != "event_time":
        return summary.coverage
    within = time_range_coverage(summary.processed, time_range)
    if within.status == "unknown" and summary.recorded:
        # A result without a range may have processed any period, so what is uncovered stays unknown; but it cannot
        # undo what a detailed record says was processed: a range those records cover whole is covered.
        known = time_range_coverage(summary.recorded, time_range)
        within = known if known.status == "covered" else within
    return summary.coverage.model_copy(update={"time_range_coverage": within})


def _in_review_order(rows: Iterable[Any]) -> list[Any]:
    """By review time (stored times are UTC text: text order is time order), ties by id: the coverage lists keep the
    newest reviews' entries, as processed_ranges keeps the newest ranges."""
    return sorted(rows, key=lambda row: (row[2], row[0]))


def _covered_until(last: datetime) -> datetime:
    """The first instant after a processed range ending at `last` (see MEETS)."""
    try:
        return last.replace(microsecond=0) + MEETS
    except OverflowError:  # a range recorded to 9999-12-31T23:59:59 ("until further notice"): no later instant
        return datetime.max.replace(tzinfo=last.tzinfo)


def time_range_unprocessed(coverage: Coverage) -> str | None:
    """The warning for a call whose time_range no review processed all of: reviews that are complete may still have
    processed none of the period asked about. None when it was all processed, or nothing says (no time_range)."""
    within = coverage.time_range_coverage.status if coverage.time_range_coverage is not None else None
    if within == "not_covered":
        return "No review processed any of time_range (coverage.time_range_coverage)"
    if within == "partly_covered":
        return "Part of time_range was processed by no review (coverage.time_range_coverage)"
    return None


def time_range_coverage(processed: Spans | None, time_range: tuple[str, str]) -> TimeRangeCoverage:
    """The stretches of [from, to] no processed range covers (a range covers its last second whole)."""
    if processed is None:
        return TimeRangeCoverage(status="unknown", uncovered_parts="unknown", uncovered_part_count="unknown")
    start, end = (datetime.fromisoformat(t) for t in time_range)
    # A range within one millisecond comes rounded to `from` one millisecond after `to` (tools.md, Time): it holds
    # one instant of the millisecond starting at `to`. Read as empty, it was "covered" wherever it lay; processed
    # ranges start at a stored millisecond and cover whole seconds, so that millisecond's coverage is the instant's.
    start = min(start, end)
    gaps: Spans = []
    covered_until, touched = start, False  # every instant of the range before covered_until is covered
    for first, last in processed:
        if first > end or covered_until > end:
            break
        until = _covered_until(last)
        if until <= covered_until:
            continue
        if first > covered_until:
            gaps.append((covered_until, first))
        covered_until, touched = until, True
    if covered_until <= end:
        gaps.append((covered_until, end))
    status = "covered" if not gaps else "partly_covered" if touched else "not_covered"
    return TimeRangeCoverage(
        status=status,
        # The newest, in time order, as processed_ranges: the latest gaps are where current work continues.
        uncovered_parts=[{"from": format_utc(a), "to": format_utc(b)} for a, b in gaps[-COVERAGE_LIST_LIMIT:]],
        uncovered_part_count=len(gaps),
    )


def summarise(records: dict[str, dict[str, Any] | None], generated: dict[str, str]) -> ScopeCoverage:
    """`records` in review order (RESULT_COVERAGE): each list keeps its last COVERAGE_LIST_LIMIT entries, the newest
    reviews', in that order; the counts are of all of them."""
    counts = {"detailed": 0, "legacy_count": 0, "absent": 0}
    detailed: dict[str, dict[str, Any]] = {}
    without_detail: deque[dict[str, Any]] = deque(maxlen=COVERAGE_LIST_LIMIT)
    for result_id, record in records.items():
        kind = "absent" if record is None else str(record.get("kind"))
        kind = kind if kind in counts else "absent"
        counts[kind] += 1
        if record is not None and kind == "detailed":
            detailed[result_id] = record
        else:
            count = record.get("count") if record is not None and kind == "legacy_count" else None
            without_detail.append(
                {
                    "result_id": result_id,
                    "record": kind,
                    "review_generated_at": generated[result_id],
                    "count": count if isinstance(count, int) else "unknown",
                }
            )
    all_detailed = bool(records) and len(detailed) == len(records)

    parts = [(result_id, part) for result_id, record in detailed.items() for part in record.get("missing", [])]
    # Each entry's ranges are capped too: every response repeats this block, so a record naming thousands of ranges
    # made every call of its scope response_too_large, which no smaller page could fix.
    # And so are its texts (COVERAGE_TEXT_LIMIT): a 300,000-character reason did the same.
    # And each list holds only what fits in COVERAGE_LIST_BYTES (`_listed`): ten entries of ids of 256 code points
    # in 6-byte escapes are about 50 KB, so the block could still leave no room for a page.
    missing = _listed([_missing(result_id, part) for result_id, part in parts[-COVERAGE_LIST_LIMIT:]])
    unprocessed_values = [record.get("unprocessed_sources") for record in detailed.values()]
    unprocessed: int | str = (
        sum(int(v) for v in unprocessed_values if v is not None)
        if all_detailed and all(v is not None for v in unprocessed_values)
        else "unknown"
    )
    ranges = [record.get("processed_range") for record in detailed.values()]
    recorded = _merged([r for r in ranges if r]) if any(ranges) else None
    merged = recorded if all_detailed and all(ranges) else None
    # The hull from the instants, not the stored texts: text order is time order only in the UTC form.
    # Merged ranges are disjoint and in time order: the hull runs from the first one's start to the last one's end.
    processed_range: dict[str, str] | str = (
        {"from": format_utc(merged[0][0]), "to": format_utc(merged[-1][1])} if merged else "unknown"
    )
    versions: list[dict[str, Any]] | str = (
        [
            {"result_id": result_id, **source}
            for result_id, record in detailed.items()
            for source in record.get("sources", [])
        ]
        if all_detailed
        else "unknown"
    )
    not_included_lists = [record.get("source_types_not_included") for record in detailed.values()]
    not_included: list[str] | str = (
        sorted({str(t) for types in not_included_lists if types for t in types})
        if all_detailed and all(types is not None for types in not_included_lists)
        else "unknown"
    )
    has_gap = bool(missing) or any(
        source.get("status") in ("partial", "unprocessed")
        for record in detailed.values()
        for source in record.get("sources", [])
    )
    has_gap = has_gap or any(isinstance(v, int) and v > 0 for v in unprocessed_values)
    if has_gap:
        status = "partial"
    elif all_detailed and unprocessed != "unknown":
        status = "complete"
    else:
        status = "unknown"
    coverage = Coverage.model_validate(
        {
            "status": status,
            "unprocessed_sources": unprocessed,
            "published_result_count": len(records),
            "result_records": counts,
            "processed_range": processed_range,
            "processed_ranges": (
                # The newest: an agent reading the current state needs the recent gaps (the hull shows the span).
                [{"from": format_utc(a), "to": format_utc(b)} for a, b in merged[-COVERAGE_LIST_LIMIT:]]
                if merged is not None
                else "unknown"
            ),
            "processed_range_count": len(merged) if merged is not None else "unknown",
            "processed_source_version_count": len(versions) if isinstance(versions, list) else "unknown",
            "processed_source_versions": (
                _listed([capped_texts(_capped_fragments(v)) for v in versions[-COVERAGE_LIST_LIMIT:]])
                if isinstance(versions, list)
                else versions
            ),
            "missing_count": len(parts) if all_detailed else "unknown",
            "missing": missing,
            "results_without_detail": _listed(list(without_detail)),
            "results_without_detail_count": counts["legacy_count"] + counts["absent"],
            # A list of names like the others: the first in name order (counted whole, then capped), each name capped.
            "source_types_not_included": (
                fitting(
                    (capped_name(t) for t in not_included),
                    limit=COVERAGE_LIST_LIMIT,
                    budget=COVERAGE_LIST_BYTES,
                )
                if isinstance(not_included, list)
                else not_included
            ),
            "source_types_not_included_count": len(not_included) if isinstance(not_included, list) else "unknown",
            "object_types_not_included": [],
        }
    )
    return ScopeCoverage(coverage, merged, recorded)


def _listed(newest: list[Entry]) -> list[Entry]:
    """The newest entries of a coverage list (at most COVERAGE_LIST_LIMIT, oldest first) that fit in
    COVERAGE_LIST_BYTES of JSON; its `*_count` field still counts them all."""
    return newest_fitting(newest, limit=COVERAGE_LIST_LIMIT, budget=COVERAGE_LIST_BYTES)


def _missing(result_id: str, part: dict[str, Any]) -> CoverageMissing:
    """A named unprocessed part with its first COVERAGE_LIST_LIMIT ranges and its texts capped (COVERAGE_TEXT_LIMIT)."""
    source_id, source_id_cut = excerpt(str(part["source_id"]), COVERAGE_TEXT_LIMIT)
    reason, reason_cut = excerpt(str(part.get("reason", "")), COVERAGE_TEXT_LIMIT)
    return CoverageMissing(
        result_id=result_id,
        source_id=source_id,
        ranges=[(int(a), int(b)) for a, b in part.get("ranges", [])[:COVERAGE_LIST_LIMIT]],
        reason=reason,
        range_count=len(part.get("ranges", [])),
        reason_is_excerpt=reason_cut,
        source_id_is_excerpt=source_id_cut,
    )


def _capped_fragments(entry: dict[str, Any]) -> dict[str, Any]:
    """A processed source version with its first COVERAGE_LIST_LIMIT fragment ranges and how many there are."""
    fragments = entry.get("fragments")
    if not isinstance(fragments, list):
        return entry
    return {**entry, "fragments": fragments[:COVERAGE_LIST_LIMIT], "fragment_count": len(fragments)}


def _merged(ranges: list[dict[str, str]]) -> Spans | None:
    """The ranges in time order, joined where they overlap or meet to the second (one ends 23:59:59, the next
    starts 00:00:00: no whole second lies between them); None if a stored time is not an instant."""
    try:
        spans = sorted((datetime.fromisoformat(r["from"]), datetime.fromisoformat(r["to"])) for r in ranges)
    except (KeyError, TypeError, ValueError):
        return None
    if any(end.tzinfo is None or start.tzinfo is None for start, end in spans):
        return None  # a time without an offset is no instant (the sort above compared only naive ones, or failed)
    joined: Spans = []
    for start, end in spans:
        if joined and start <= _covered_until(joined[-1][1]):
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((start, end))
    return joined
