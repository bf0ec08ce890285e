"""What story_graph_search says beside its items: the no-match note on an empty first page (what the rule required,
the filter that left matches out, the terms that match alone and the next query they make, the other scopes), the
query note (a result's id, a sentence of common words) and the counts those notes cite, each a bounded lookup."""

from __future__ import annotations

from typing import Any, Final

import orjson

from server.contracts.base import OBJECT_TYPES, GlobalScope, ProjectsScope
from server.contracts.common import Coverage, project_names, range_bounds
from server.contracts.errors import named_scope
from server.contracts.search import SearchArgs
from server.reader import search as reader
from server.reader.coverage import time_range_unprocessed
from server.reader.scope import READABLE_SCOPES_LISTED, ResolvedScope, readable_scopes, shared_scopes
from server.reader.search_ids import NamedResult
from server.reader.search_query import (
    COMMON_WORDS,
    MARKERS,
    function_term,
    needed,
    query_terms,
    terms_as_query,
)
from server.tools.base import Call

TERMS_CHECKED: Final = 8
"""A note on zero hits checks at most this many terms one by one."""
NEXT_QUERY_WORDS: Final = 4
"""The words a no-match note's next query is made of, at most: the first that match alone, in the query's order (the
2-4 keywords the notes advise; eight words of a pasted paragraph made a query that cost a second to count at 1M)."""
UNCHECKED_LISTED: Final = 12
"""The terms left unchecked that the note names (a pasted paragraph has hundreds)."""
SHARED_SCOPES_LISTED: Final = 3
"""Project sets holding shared work that a search which found nothing names (reader.scope.shared_scopes)."""


async def no_match_note(
    call: Call, conn: Any, scope: ResolvedScope, args: SearchArgs, page: reader.SearchPage, coverage: Coverage
) -> str:
    """Zero hits, or none yet on a first page whose check of candidates ran out of budget (a query of very many terms,
    such as a pasted paragraph, which otherwise got an empty page, an unknown total and no word of why): say what the
    rule required and what else to try. An agent cannot tell an empty scope from a query that missed, nor guess which
    other scopes (another project, a project set, Global) it may read; the list comes from the grant only, as in
    scope_unavailable."""
    if scope.revision == "0":
        # Nothing was ever written to this exact scope (often a project set nobody stored shared work under): other
        # words cannot match, and the lookups below would all find nothing.
        stored = "Nothing is stored in this scope (no review result, object or story), so no query matches here."
        return f"{stored} {await _other_scopes(conn, call, scope)}"
    terms = len(page.terms)
    needed = f" or at least {(terms + 1) // 2} of its {terms} terms" if terms > 1 else ""
    types = " of the requested object_types" if args.object_types is not None else ""
    within = " within time_range" if args.time_range is not None else ""
    # Which filter left the matches out: the words are then right, and "other words" would mislead.
    all_types = sorted(set(OBJECT_TYPES))
    time_range = range_bounds(args.time_range)
    filtered: list[str] = []
    if time_range is not None:
        wider = await _match_count(call, conn, scope, args.query, _types(args), None, args.time_basis)
        if wider is not None:
            filtered.append(
                f"Without time_range (time_basis {args.time_basis}) it matches {wider}: widen time_range or try "
                "another time_basis."
            )
    if args.object_types is not None:
        wider = await _match_count(call, conn, scope, args.query, all_types, time_range, args.time_basis)
        if wider is not None:
            filtered.append(f"Without object_types it matches {wider}: add their types or leave object_types out.")
    if filtered:
        advice = "."
    elif terms == 0:
        advice = (
            "; the query holds no search term (punctuation and symbols only separate terms, and there is no "
            "wildcard), so only its exact text was looked for: search for words or an id."
        )
    else:
        advice = "; try other words." if terms == 1 else "; try fewer or other words."
    if page.limit_reason == "work_budget":
        lead = (
            f"No object{types}{within} found yet that holds the whole query{needed}: this call checked as many "
            "candidates against the query's terms as one call may (limit_reason work_budget), and next_cursor "
            f"checks the next ones{advice}"
        )
    else:
        lead = f"No object{types}{within} holds the whole query{needed}{advice}"
    parts = [lead, *filtered]
    if terms > 1:
        # The words that name something first, then common words: a question typed as a sentence spent the eight
        # lookups on 'could', 'me', 'what', ... and never checked 'edge' or 'boxes', naming 'team, said' instead.
        # A Chinese sentence's pairs across two words' edges (方案被修改 → 案被) hold a particle or pronoun: after.
        probed = sorted(page.terms, key=_probe_order)[:TERMS_CHECKED]
        alone = [term for term in probed if await _matches_alone(call, conn, scope, args, term)]
        unchecked = [term for term in page.terms if term not in probed]
        listed = ", ".join(unchecked[:UNCHECKED_LISTED])
        more = f" and {len(unchecked) - UNCHECKED_LISTED} more" if len(unchecked) > UNCHECKED_LISTED else ""
        checked = f" (of the {TERMS_CHECKED} checked; not checked: {listed}{more})" if unchecked else ""
        # A common word matching alone is no next query: "Terms that match alone: the." sent agents to search "the".
        words = [term for term in alone if term not in COMMON_WORDS]
        common = [term for term in alone if term in COMMON_WORDS]
        if words:
            also = f" (and common words: {', '.join(common)})" if common else ""
            parts.append(f"Terms that match alone{checked}: {', '.join(words)}{also}.")
            parts.extend(await _together(call, conn, scope, args, page, words))
        elif common:
            parts.append(
                f"Only common words match alone{checked} ({', '.join(common)}), which says little: search for the "
                "words that name what you look for."
            )
        else:
            parts.append(f"No term{checked} matches alone.")
    excluded = page.unknown_time_excluded
    if excluded is not None and excluded.count > 0:
        count = excluded.count if excluded.exact else f"at least {excluded.count}"
        parts.append(f"Matches left out because they have no {args.time_basis}: {count}; search without time_range.")
    if coverage.status != "complete":
        parts.append(f"Coverage of this scope is {coverage.status}: no match does not prove nothing happened.")
    unprocessed = time_range_unprocessed(coverage)
    if unprocessed is not None:
        parts.append(f"{unprocessed}: no match there does not prove nothing happened.")
    parts.append(await _other_scopes(conn, call, scope))
    return " ".join(parts)


async def _other_scopes(conn: Any, call: Call, scope: ResolvedScope) -> str:
    """The other scopes this caller can read (from its grant only, as in scope_unavailable), and the project sets
    holding data that share a project with the one searched: shared work (a cross story, an experience) lives in the
    set's own scope. A set was once named by example (the searched project and the next readable one), which often
    held nothing, and searching it gave this note again with a larger example."""
    readable, _, readable_names = await readable_scopes(conn, call.grant, READABLE_SCOPES_LISTED + 1)
    others = [other for other in readable if other != scope.scope][:READABLE_SCOPES_LISTED]
    searched = scope.scope.projectIds if isinstance(scope.scope, ProjectsScope) else []
    shared = await shared_scopes(conn, call.grant, searched, scope.key, SHARED_SCOPES_LISTED) if searched else None
    # Each project's name in parentheses: an agent asked about "Beacon" cannot tell which id (often a UUID) it is.
    names = project_names(readable_names | scope.names | (shared.names if shared else {}))
    listed = ", ".join(_named(other, names) for other in others)
    if shared is not None and shared.scopes:
        sets = ", ".join(named_scope(s, names) for s in shared.scopes)
        listed += f"{', and' if listed else ''} project sets holding shared work: {sets}"
    return "Only this scope was searched" + (f"; other scopes this client can read: {listed}." if listed else ".")


def result_note(result: NamedResult | None) -> str | None:
    """A query that is a review result's id: say so. Every item shows its `result_id`, and an agent that searched one
    got the items holding its words ('atlas', '2026', '05'), which read like that review's objects and are not."""
    if result is None:
        return None
    said = (
        f"{result.id} is the id of a review result (generated {result.review_generated_at}), not of an object: "
        "search finds objects by their words and ids, so the items found only share words with it. Each item's "
        "result_id names the result that stored that row."
    )
    if not result.summary_ids:
        return f"{said} That result stored no summary."
    listed = ", ".join(result.summary_ids)
    return f"{said} What it covered is in its summary ({listed}): read it with story_graph_get_context."


async def query_note(
    call: Call, conn: Any, scope: ResolvedScope, args: SearchArgs, page: reader.SearchPage, held: list[list[str]]
) -> str | None:
    """When function terms (common words, and Han pairs holding a particle, pronoun or question character) can make
    an item match, or made one on this page match: say so, and what the other words match alone, as a next query.
    `held`: the terms each item of the page matched by terms holds.

    `what should we use for the session cache now` needs 5 of its 9 terms, 6 of which are common words: its hits hold
    `we`, `for`, `the` ..., and Decision B (`session cache` and little else) is not one. A Chinese question has few
    common words but many pairs across its words' edges (为什么会话缓存方案被修改了: 为什, 什么, 么会, 案被, 被修, 改了
    of 12, 6 needed), which chatter holds as readily; and a hit holding 'what', 'the', 'after' and only two of seven
    other terms ranked first for `what blocked ATL-212 after the Redis quokka narwhal outage`."""
    # An empty page: nothing matched through such pairs, and no_match_note offers the terms that match alone (a Han
    # pair such as 个消 or 做会, across two words' edges without a particle, made this note's other words read
    # `当初 个消息队列` where that note offered `消息队列`). Only common words are counted then, as always.
    weak = [term for term in page.terms if (function_term(term) if page.hits else term in COMMON_WORDS)]
    need = needed(len(page.terms))
    if len(page.terms) < 2 or not weak:
        return None
    other = terms_as_query(page.needle, {t for t in page.terms if t not in weak}, args.query.translate(MARKERS))
    other_terms = query_terms(call.folder.fold(other))
    other_need = needed(len(other_terms))
    # The hits that the other words alone would not match: they hold fewer than half of those words' terms (the
    # whole of the other words is then not in them either).
    carried = [terms for terms in held if len(set(terms) & set(other_terms)) < other_need]
    if len(weak) < need and not carried:
        return None
    common = all(term in COMMON_WORDS for term in weak)
    kind = "common words" if common else "common words or Han pairs holding a particle, pronoun or question character"
    those = "common words" if common else "such terms"
    if len(weak) >= need:
        said = f"{len(weak)} of the query's {len(page.terms)} terms are {kind} ({', '.join(weak)})"
        rule = f"an item matches with any {need} of the {len(page.terms)} terms, so a hit may hold only {those}"
        if not other:
            return f"{said}: {rule}. Search for the words that name what you look for (2–4 keywords or an id)."
        said = f"{said}: {rule}, and an item holding only the other words may not match"
    else:
        hold = "holds" if len(carried) == 1 else "hold"
        said = (
            f"{len(carried)} of the {len(held)} items this page matched by terms {hold} fewer than {other_need} of the "
            f"{len(other_terms)} terms of the query's other words, matching through its {kind} ({', '.join(weak)}): "
            f"an item matches with any {need} of the {len(page.terms)} terms"
        )
    count = await _as_asked(call, conn, scope, args, other)
    return f"{said}. The other words alone ({_call(_suggested(args, scope, other))}) match {count or 'nothing'}."


def _suggested(args: SearchArgs, scope: ResolvedScope, query: str) -> dict[str, Any]:
    """The arguments of a suggested search: the request's own filters, so the call shown is the one counted
    (`{"query": "change plan"}` alone, shown for a search of entities, matched 2 items where the note said
    "nothing")."""
    suggested: dict[str, Any] = {"query": query}
    if args.scope is not None:
        suggested["scope"] = scope.scope.model_dump(mode="json", by_alias=True)
    if args.object_types is not None:
        suggested["object_types"] = list(args.object_types)
    if args.time_range is not None:
        suggested["time_range"] = args.time_range.model_dump(by_alias=True)
    if args.time_basis != "event_time":
        suggested["time_basis"] = args.time_basis
    return suggested


def _call(arguments: dict[str, Any]) -> str:
    """Arguments as JSON with a space after each top-level colon and comma, as the notes have always shown them."""
    pairs = (f"{orjson.dumps(key).decode()}: {orjson.dumps(value).decode()}" for key, value in arguments.items())
    return "{" + ", ".join(pairs) + "}"


def _types(args: SearchArgs) -> list[str]:
    return sorted(set(args.object_types or OBJECT_TYPES))


def _probe_order(term: str) -> tuple[bool, bool]:
    return term in COMMON_WORDS, function_term(term)


async def _together(
    call: Call, conn: Any, scope: ResolvedScope, args: SearchArgs, page: reader.SearchPage, words: list[str]
) -> list[str]:
    """The terms that match alone as one next query, as typed, with what it matches (the count is of that exact text,
    made as the call shown). A Chinese question typed as a sentence (为什么会话缓存方案被修改了: 12 pairs, 6 needed)
    found nothing, and the note listed pairs such as 话缓 and 存方, which no agent would search for; joined back in the
    query's order they read 会话缓存方案. The folded terms were offered once (`inc 4821` for INC-4821, `redis` for
    Redis): an id no longer named its object, and the query read as not the agent's. Said only when it is another
    query than the one made and it matches something (a dead end is no next step)."""
    together = terms_as_query(page.needle, set(words), args.query.translate(MARKERS), most=NEXT_QUERY_WORDS)
    if set(query_terms(call.folder.fold(together))) == set(page.terms):
        return []
    count = await _as_asked(call, conn, scope, args, together)
    if count is None:
        return []
    return [f"As a next query, {_call(_suggested(args, scope, together))} matches {count}."]


async def _matches_alone(call: Call, conn: Any, scope: ResolvedScope, args: SearchArgs, term: str) -> bool:
    """Whether one term, searched on its own with the same filters, finds anything (a bounded first page)."""
    return await _as_asked(call, conn, scope, args, term) is not None


async def _as_asked(call: Call, conn: Any, scope: ResolvedScope, args: SearchArgs, query: str) -> str | None:
    """What another query matches with the request's own filters (_match_count)."""
    time_range = range_bounds(args.time_range)
    return await _match_count(call, conn, scope, query, _types(args), time_range, args.time_basis)


async def _match_count(
    call: Call,
    conn: Any,
    scope: ResolvedScope,
    query: str,
    object_types: list[str],
    time_range: tuple[str, str] | None,
    time_basis: str,
) -> str | None:
    """How many items a query matches with these filters ('3 items', 'at least 10001 items'), or None for none:
    a bounded first page with its capped total."""
    found = await reader.search(
        conn,
        call.folder,
        call.memo,
        query=query,
        scope_key=scope.key,
        scope_revision=scope.revision,
        graph_revision=scope.graph_revision,
        object_types=object_types,
        time_range=time_range,
        time_basis=time_basis,
        page_size=1,
        position=None,
        spare=call.db.spare,
    )
    if found.total.count == 0:
        return None
    count = found.total.count if found.total.exact else f"at least {found.total.count}"
    return f"{count} item{'s' if found.total.count != 1 else ''}"


def _named(scope: GlobalScope | ProjectsScope, names: dict[str, str]) -> str:
    return named_scope(scope.model_dump(mode="json", by_alias=True), names)
