"""Compact views of a get_context selection: the header of `current` and the known gaps.

Both pass stored states through (unknown where nothing is stored) and report what is missing; neither
infers a state, a replacement or a completion.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import Any, Final

from server.contracts.base import ObjectRef, scope_from_key
from server.contracts.common import (
    TEXT_LIMIT,
    Coverage,
    Entry,
    capped_texts,
    fitting,
    json_size,
    listed_sources,
    newest_fitting,
)
from server.contracts.context import (
    TIME_FILTER_NOTE,
    Claim,
    Completion,
    Conflict,
    ExperienceView,
    Gap,
    Header,
    OpenItem,
    RelationEnd,
    StoredRelation,
    StoryView,
    TaskEvidence,
)
from server.reader.context import Selection, undated_event
from server.reader.context_rows import Ref, Unit
from server.reader.coverage import time_range_unprocessed

LABEL_LIMIT: Final = 160
REASON_LIMIT: Final = 400
DESCRIPTION_LIMIT: Final = 600
HEADER_LIMIT: Final = 10
GAP_REFS: Final = 10
GAP_REFS_BYTES: Final = 4_000
"""A gap's `refs` are its first GAP_REFS that fit in this much JSON (its `count` counts them all): ten ids of 256
code points in 6-byte escapes are 15 KB a gap, and two gaps of them with the coverage block and one content page
went over the response limit, so the first page of get_context could not be read at any page size."""
HEADER_LISTS_BYTES: Final = 24_000
"""What the header's lists hold together, in JSON (each list also counts the whole). One relation of legal but long
stored values (ids of 256 code points, a 400-code-point reason, 100 evidence ids) is about 17 KB of JSON: ten of
them, with the conflicts, open items and refs beside them, made the first page of `current` over the response
limit at any page size. Ordinary headers are a few KB and list everything up to HEADER_LIMIT; the lists are filled
in HeaderLists' order, so what is most read (evolution, relations) is cut last."""
CONFLICT_TYPES: Final = frozenset({"contrasts", "contradicts"})


class HeaderLists:
    """The byte budget the header's lists share (HEADER_LISTS_BYTES): each takes the entries that fit in what the
    lists before it left, at most HEADER_LIMIT (the same `fitting` as every counted list)."""

    def __init__(self) -> None:
        self.left = HEADER_LISTS_BYTES

    def first(self, entries: Iterable[Entry], limit: int = HEADER_LIMIT) -> list[Entry]:
        return self._took(fitting(entries, limit=limit, budget=self.left))

    def newest(self, entries: Sequence[Entry], limit: int = HEADER_LIMIT) -> list[Entry]:
        return self._took(newest_fitting(entries, limit=limit, budget=self.left))

    def _took(self, listed: list[Entry]) -> list[Entry]:
        self.left -= json_size(listed)
        return listed


_DESCRIPTION_FIELD: Final[dict[str, str]] = {
    "entity": "description",
    "event": "description",
    "entity_change": "description",
    "relation": "reason",
    "summary": "body",
    "story_line": "topic",
    "story": "description",
    "experience": "statement",
}
_VERSIONED: Final = frozenset(
    {"story_line", "event", "entity", "entity_change", "relation", "summary", "story", "experience"}
)


def object_ref(ref: Ref) -> ObjectRef:
    return ObjectRef.model_validate({"type": ref[0], "id": ref[1]})


def _excerpt(text: str | None, limit: int) -> tuple[str | None, bool]:
    if text is None:
        return None, False
    return text[:limit], len(text) > limit


def _states(**texts: str) -> dict[str, Any]:
    """Stored states and types (decision_status, work_status, confirmation_state, relation_type) as the header shows
    them: each is free text to an import, so each keeps its first TEXT_LIMIT code points, flagged when cut (one of
    200,000 characters made the first page response_too_large at any page size)."""
    return capped_texts(texts, TEXT_LIMIT)


def _label(unit: Unit | None) -> str | None:
    return _excerpt(unit.label, LABEL_LIMIT)[0] if unit is not None else None


def _description(unit: Unit) -> str | None:
    if unit.row.object_type == "source_reference":
        return str(unit.content["fragment"]["text"])
    name = _DESCRIPTION_FIELD.get(unit.row.object_type)
    value = unit.content.get(name) if name else None
    return value if isinstance(value, str) else None


def _time_order(unit: Unit) -> tuple[str, str, str, str]:
    return (unit.row.event_time_start or "~", unit.row.object_type, unit.row.object_id, unit.row.result_key)


SOURCE_NOT_AVAILABLE_DETAIL: Final = (
    "Saved source references whose original is no longer available; the saved fragment is still readable."
)


def _time_note(sel: Selection) -> str:
    """With a time_range: within the selected evidence, and what it left out. Relations, entities and source
    references have no event time, so a range on that basis leaves them all out: without the counts, relation_count
    0 and an empty conflicts or task_records list read as 'the object has none'."""
    if not sel.unknown_time_excluded:
        return TIME_FILTER_NOTE
    left_out = ", ".join(f"{object_type} {n}" for object_type, n in sel.unknown_time_excluded_types.items())
    return (
        f"{TIME_FILTER_NOTE} Here that is {sel.unknown_time_excluded} rows ({left_out}), left out of this header's "
        "lists and counts too: an empty list or a 0 here does not mean the object has none; call again without "
        "time_range to see them."
    )


def build_header(sel: Selection, *, time_range_used: bool) -> Header:
    """The compact view of `current`: stored states passed through, unknown where nothing is stored."""
    primary = next((u for u in sel.target_units if u.row.row_kind != "leaf" and u.row.result_key == ""), None)
    primary = primary or next((u for u in sel.target_units if u.row.row_kind != "leaf"), None)
    data = primary.content if primary is not None else {}
    is_entity = sel.target[0] == "entity" and primary is not None
    description, cut = _excerpt(_description(primary) if primary else None, DESCRIPTION_LIMIT)
    work_status = data.get("work_status") if is_entity else None

    # The header shows the first HEADER_LIMIT of each list that fit its byte budget and counts the rest: only those
    # are built.
    lists = HeaderLists()
    touching = [u for u in sel.units if u.ends is not None and sel.target in u.ends]
    touching.sort(key=lambda u: u.row.object_id)
    conflicting = [
        u for u in sel.units if u.ends is not None and u.relation_type in CONFLICT_TYPES and all(u.ends_in_scope)
    ]
    conflicting.sort(key=lambda u: u.row.object_id)
    # Read the stored fields of the objects' own rows: a leaf's description of a summary or of a source reference (a
    # target row) holds none of them (no open items, no source type) and is no summary or evidence of its own.
    summaries = sorted(
        (
            u
            for u in sel.units
            if u.row.object_type == "summary" and u.role in ("summary", "target") and u.row.row_kind != "leaf"
        ),
        key=lambda u: (u.row.review_generated_at or "", u.row.object_id),
    )
    open_items = [
        OpenItem(summary_id=u.row.object_id, result_id=u.row.result_key, **capped_texts({"text": text}, REASON_LIMIT))
        for u in summaries
        if isinstance(u.value("open_items"), list)
        for text in u.value("open_items")
        if isinstance(text, str)
    ]
    evolution = [u for u in sel.units if u.role == "evolution"]
    # The newest dated ones, in time order: `current` is about now, and the oldest ten of a long history left out
    # the latest change (the demo's story line listed ten up to May, not June's option C). Undated ones, whose place
    # is unknown, fill what is left; timeline mode and the items list every one.
    dated = heapq.nlargest(HEADER_LIMIT, (u for u in evolution if u.row.event_time_start is not None), key=_time_order)
    undated = heapq.nsmallest(
        HEADER_LIMIT - len(dated), (u for u in evolution if u.row.event_time_start is None), key=_time_order
    )
    shown_dated = lists.newest([object_ref(u.ref) for u in sorted(dated, key=_time_order)])
    shown_evolution = shown_dated + lists.first(
        (object_ref(u.ref) for u in undated), limit=HEADER_LIMIT - len(shown_dated)
    )
    relations = lists.first(_stored_relation(sel, u) for u in touching[:HEADER_LIMIT])
    evidence = [u for u in sel.units if u.row.object_type == "source_reference" and u.row.row_kind != "leaf"]
    results = sorted(
        {(u.row.review_generated_at or "", u.row.result_key) for u in sel.target_units if u.row.result_key}
    )
    task_ends = [
        (u, other)
        for u in touching
        if (other := sel.present.get(_other_end(sel, u))) is not None
        and other.row.object_type == "entity"
        and other.value("entity_type") == "task"
    ]
    # The newest reviews' (the list is in review order): an old summary's open item may since have been settled.
    shown_open_items = lists.newest(open_items[-HEADER_LIMIT:])
    conflicts = lists.first(_conflict(sel, u) for u in conflicting[:HEADER_LIMIT])
    tasks = lists.first(
        TaskEvidence(
            ref=object_ref(other.ref),
            label=_label(other),
            via_relation=u.row.object_id,
            **_states(work_status=other.value("work_status") or "unknown", relation_type=u.relation_type or ""),
        )
        for u, other in task_ends[:HEADER_LIMIT]
    )
    task_ids = lists.first(sorted(u.row.object_id for u in evidence if u.value("source_type") == "task"))
    shown_results = lists.newest([result_id for _, result_id in results][-HEADER_LIMIT:])
    return Header(
        object_ref=object_ref(sel.target),
        label=_label(primary),
        description=description,
        description_is_excerpt=cut,
        **_states(
            decision_status=(data.get("decision_status") or "unknown") if is_entity else "unknown",
            work_status=work_status or "unknown",
            confirmation_state=(primary.row.confirmation_state if primary else None) or "unknown",
        ),
        completion=Completion(
            **_states(work_status=work_status or "unknown"),
            basis="stored_work_status" if work_status else "none",
            task_records=tasks,
            task_source_reference_ids=task_ids,
        ),
        time_note=_time_note(sel) if time_range_used else None,
        open_items=shown_open_items,
        open_item_count=len(open_items),
        relations=relations,
        relation_count=len(touching),
        conflicts=conflicts,
        conflict_count=len(conflicting),
        evolution_refs=shown_evolution,
        evolution_ref_count=len(evolution),
        evidence_ref_count=len(evidence),
        result_ids=shown_results,
        result_count=len(results),
        background_count=len(sel.memories),
        story=_story(sel, primary, lists) if sel.target[0] == "story" and primary is not None else None,
        experience=_experience(primary) if sel.target[0] == "experience" and primary is not None else None,
    )


def _story(sel: Selection, primary: Unit, lists: HeaderLists) -> StoryView:
    data = primary.content
    state_event_id = data["stateEventId"]
    state_unit = next(
        (u for u in sel.units if u.row.object_type == "event" and u.row.object_id == state_event_id), None
    )
    threads = data["thread_ids"]
    return StoryView(
        level=data["level"],
        state=data["state"],
        state_event=object_ref(("event", state_event_id)) if state_event_id else None,
        state_event_title=_label(state_unit),
        state_event_scope=scope_from_key(state_unit.row.scope_key) if state_unit is not None else None,
        started_at=data["startedAt"],
        ended_at=data["endedAt"],
        # Free text to an import, as an event time's precision: capped as the header's stored states are.
        **capped_texts(
            {"started_at_precision": data["startedAtPrecision"], "ended_at_precision": data["endedAtPrecision"]},
            TEXT_LIMIT,
        ),
        parent=object_ref(("story", data["parentId"])) if data["parentId"] else None,
        threads=lists.first(object_ref(("story", i)) for i in threads[:HEADER_LIMIT]),
        thread_count=len(threads),
        event_count=data["event_count"],
    )


def _experience(primary: Unit) -> ExperienceView:
    data = primary.content
    roles = [link["role"] for link in data["events"]]
    return ExperienceView(
        statement=_excerpt(data["statement"], DESCRIPTION_LIMIT)[0] or "",
        conditions=_excerpt(data["conditions"], DESCRIPTION_LIMIT)[0] or "",
        boundaries=_excerpt(data["boundaries"], DESCRIPTION_LIMIT)[0] or "",
        formed_count=roles.count("formed"),
        applied_count=roles.count("applied"),
    )


def _other_end(sel: Selection, relation: Unit) -> Ref:
    """The end of a relation touching the target that is not the target (the target itself for a loop)."""
    assert relation.ends is not None
    from_ref, to_ref = relation.ends
    return to_ref if from_ref == sel.target else from_ref


def _stored_relation(sel: Selection, unit: Unit) -> StoredRelation:
    assert unit.ends is not None
    outgoing = unit.ends[0] == sel.target
    other_ref = _other_end(sel, unit)
    other = sel.present.get(other_ref)
    reason, cut = _excerpt(str(unit.value("reason")), REASON_LIMIT)
    return StoredRelation(
        relation_ref=object_ref(unit.ref),
        result_id=unit.row.result_key,
        direction="outgoing" if outgoing else "incoming",
        other_end=RelationEnd(ref=object_ref(other_ref), in_scope=other is not None),
        other_label=_label(other),
        reason=reason or "",
        reason_is_excerpt=cut,
        **_states(relation_type=unit.relation_type or "", confirmation_state=unit.row.confirmation_state or "unknown"),
        **listed_sources(unit.source_ids),
    )


def _conflict(sel: Selection, unit: Unit) -> Conflict:
    assert unit.ends is not None
    claims = []
    for end in unit.ends:
        other = sel.present.get(end)
        claims.append(
            Claim(
                ref=object_ref(end),
                label=_label(other),
                **_states(confirmation_state=(other.row.confirmation_state if other else None) or "unknown"),
            )
        )
    reason, cut = _excerpt(str(unit.value("reason")), REASON_LIMIT)
    return Conflict(
        relation_ref=object_ref(unit.ref),
        result_id=unit.row.result_key,
        **_states(relation_type=unit.relation_type or ""),
        reason=reason or "",
        reason_is_excerpt=cut,
        claims=claims,
        **listed_sources(unit.source_ids),
    )


GAP_DETAIL_SCOPES_CHARS: Final = 2_000
"""A gap's detail names further scopes only while what it names is shorter than this (then 'and N more')."""
GAPS_BEFORE_LISTED: Final = frozenset({"unknown_event_time", "coverage_not_complete"})
"""The gaps listed before listed_event_coverage_not_complete: it follows the scope's own coverage gap."""
ScopeState = tuple[str, Coverage | None, list[Ref]]
"""A scope the events a story or experience lists are stored in: its key, its coverage (None: not read) and those
events."""


def with_listed_event_coverage(gaps: list[Gap], states: list[ScopeState]) -> list[Gap]:
    """The gaps, plus one naming the narrower scopes of the events a story or experience lists whose own coverage is
    not complete: `coverage` is the requested scope's only (SPEC §4), and an agent reading `complete` there must not
    take those events' reviews for complete. A scope whose coverage was not read (None: beyond the scopes a call
    reads) counts as not complete: unknown never reads as complete."""
    concerned = [
        (scope_key, coverage, refs)
        for scope_key, coverage, refs in states
        if coverage is None or coverage.status != "complete" or time_range_unprocessed(coverage) is not None
    ]
    if not concerned:
        return gaps
    said: list[str] = []
    for scope_key, coverage, refs in concerned:
        # The first GAP_REFS scopes, within a bounded text (a scope may name up to 99 long project ids).
        if len(said) == GAP_REFS or sum(map(len, said)) > GAP_DETAIL_SCOPES_CHARS:
            break
        scope = scope_from_key(scope_key).model_dump_json()
        events = f"{len(refs)} event{'s' if len(refs) != 1 else ''}"
        if coverage is None:
            said.append(f"{scope} not read here ({events})")
            continue
        within = coverage.time_range_coverage.status if coverage.time_range_coverage is not None else None
        in_range = f", time_range {within}" if within in ("partly_covered", "not_covered") else ""
        said.append(f"{scope} {coverage.status}{in_range} ({events})")
    if len(concerned) > len(said):
        said.append(f"and {len(concerned) - len(said)} more scopes")
    refs = sorted({ref for _, _, listed in concerned for ref in listed})
    gap = Gap(
        kind="listed_event_coverage_not_complete",
        count=len(refs),
        detail=(
            "Events listed here are stored in narrower scopes whose own coverage is not complete (coverage above is "
            f"this scope's only): {', '.join(said)}. Their reviews may not have processed every source, so history "
            "of these events may be missing; a call in such a scope shows its coverage."
        ),
        refs=gap_refs(refs),
    )
    # After the scope's own coverage gap (known_gaps lists it, and the unknown event times, first).
    at = sum(1 for g in gaps if g.kind in GAPS_BEFORE_LISTED)
    return [*gaps[:at], gap, *gaps[at:]]


def gap_refs(refs: Sequence[Ref]) -> list[ObjectRef]:
    """The refs a gap lists: the first GAP_REFS that fit in GAP_REFS_BYTES (`fitting`, as every counted list)."""
    return fitting((object_ref(r) for r in refs), limit=GAP_REFS, budget=GAP_REFS_BYTES)


def known_gaps(sel: Selection, coverage: Coverage) -> list[Gap]:
    """What the saved evidence is known to lack for this object; each gap is reported, never filled."""
    gaps: list[Gap] = []

    def add(kind: str, units_or_refs: Sequence[Ref], detail: str, count: int | None = None) -> None:
        # One object may come as several rows (an entity's current projection and its result revisions): the
        # count is of objects, as refs lists them, so a count above the refs listed means more than GAP_REFS.
        distinct = list(dict.fromkeys(units_or_refs))
        if distinct or count:
            refs = gap_refs(distinct)
            gaps.append(
                Gap.model_validate(
                    {"kind": kind, "count": count if count is not None else len(distinct), "detail": detail,
                     "refs": refs}
                )
            )  # fmt: skip

    # With a time_range those the filter left out are named too: each may lie within the range, and without them the
    # gap vanished exactly when an agent asked "what happened in March" (unknown_time_excluded_count alone mixes them
    # with entities, relations and references, which never have an event time).
    undated = [u for u in sel.units if undated_event(u)] + sel.undated_excluded
    undated.sort(key=lambda u: (u.row.object_type, u.row.object_id))
    left_out = len({u.ref for u in sel.undated_excluded})
    add(
        "unknown_event_time",
        [u.ref for u in undated],
        "Events and entity changes whose event time is unknown: their order relative to dated ones is not known "
        "(timeline lists them apart; no time is filled in)."
        + (
            f" {left_out} of them {'was' if left_out == 1 else 'were'} left out by time_range (counted in "
            "unknown_time_excluded_count) and may lie within it: call again without time_range to read them."
            if left_out
            else ""
        ),
    )
    said = []
    if coverage.status != "complete":
        said.append(
            f"Coverage of this scope is {coverage.status}: the stored reviews may not have processed every source, so "
            "history may be missing here (see coverage)."
        )
    unprocessed = time_range_unprocessed(coverage)
    if unprocessed is not None:
        said.append(f"{unprocessed}, so history in it may be missing here.")
    if said:
        gaps.append(Gap(kind="coverage_not_complete", count="unknown", detail=" ".join(said), refs=[]))
    outside = [u for u in sel.units if u.ends is not None and not all(u.ends_in_scope)]
    add(
        "relation_end_not_in_scope",
        [u.ref for u in outside],
        "Relations with an end that is not stored in this scope (missing or outside it); that end is not read "
        "(count: such ends).",
        count=sum(1 for u in outside for inside in u.ends_in_scope if not inside),
    )
    add(
        "evidence_not_in_scope",
        [("source_reference", i) for i in sel.missing_evidence],
        "Source reference ids named by selected objects but not stored in this scope.",
    )
    add(
        "no_reliable_revision",
        [
            u.ref
            for u in sel.units
            if u.row.revision is None and u.row.row_kind != "leaf" and u.row.object_type in _VERSIONED
        ],
        "Objects stored without a reliable revision: object_revision is 'unknown' (updated_at is not a version).",
    )
    # source_not_available and source_changed_since_saved say what the sources are now, which changes no scope's
    # revision: context_summary.known_gaps_now adds them per call, before no_result_rows.
    if sel.target[0] == "entity" and not any(u.row.result_key for u in sel.target_units):
        add(
            "no_result_rows",
            [sel.target],
            "No review result holds a revision or leaf description of this entity: only the current projection is "
            "stored, so its history is missing.",
        )
    return gaps
