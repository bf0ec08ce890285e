"""What a search query asks of the index: its folded whole text, its terms, and FTS5 expressions for them.

Terms: the folded query split on whitespace, punctuation and symbols; a run of Han characters gives
its overlapping pairs (回顾调度 → 回顾, 顾调, 调度); other runs count when at least two characters long
or holding a digit. An object matches when a field holds the whole query, or its fields together
hold at least half of the distinct terms (rounded up, at least one).

Every needle (the whole query or a term) becomes an FTS5 expression over search_fts
(migrations/0003): three or more characters are a trigram phrase; one or two CJK characters are a
phrase of the grams columns; any other one- or two-character needle is the OR of the indexed
trigrams it begins (each field ends with two U+0001, so every occurrence begins one).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Final

from server.store.search_index import (
    BIGRAM_PAD,
    CJK_RUN,
    LONG_MONTH,
    MONTHS,
    OUTSIDE_MONTH,
    UNIGRAM_PAD,
    month_number,
    time_gram,
)

# The index's own separators (U+0003 wraps the month tokens), and NUL (which ends an FTS5 query string): never part
# of a needle.
MARKERS: Final = str.maketrans("", "", "\x00\x01\x02\x03")
MAX_RANGE_MONTHS: Final = 120
"""A time range of at most this many months is also matched by its month tokens in the index (migrations/0009)."""
MAX_EXACT_TERMS: Final = 8
"""Up to this many distinct terms the at-least-half rule is one FTS5 expression (125 phrases for 8 terms; it
doubles with every term). With more, candidates holding one of the rarest terms are checked against the text."""

_HAN: Final = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+")


def query_terms(folded_query: str) -> list[str]:
    """Split on whitespace, punctuation and symbols; Han runs give overlapping pairs (回顾调度 → 回顾, 顾调, 调度).
    Other runs count when at least two characters long or containing a digit."""
    return list(dict.fromkeys(term for group in _term_groups(folded_query) for term, _, _ in group))


Term = tuple[str, int, int]
"""A term and where it stands in the folded query: (text, start, end). Folding maps one code point to one code point
(server/reader/fold.py), so these are also its place in the query as typed."""


def _term_groups(folded_query: str) -> list[list[Term]]:
    """The query's terms in order (repeats kept): a Han run's overlapping pairs as one group, every other term a
    group of its own."""
    words: list[tuple[str, int]] = []
    start = 0
    for at, ch in enumerate(folded_query):
        if unicodedata.category(ch)[0] in "PSZC":
            if at > start:
                words.append((folded_query[start:at], start))
            start = at + 1
    if len(folded_query) > start:
        words.append((folded_query[start:], start))
    groups: list[list[Term]] = []
    for word, offset in words:
        position = 0
        for han in _HAN.finditer(word):
            groups.extend([term] for term in _plain_terms(word, position, han.start(), offset))
            run, at = han.group(), offset + han.start()
            pairs = (
                [(run, at, at + 1)]
                if len(run) == 1
                else [(run[i : i + 2], at + i, at + i + 2) for i in range(len(run) - 1)]
            )
            groups.append(pairs)
            position = han.end()
        groups.extend([term] for term in _plain_terms(word, position, len(word), offset))
    return groups


def terms_as_query(folded_query: str, kept: Collection[str], typed: str | None = None, most: int | None = None) -> str:
    """The kept terms as one query, in the query's order and as `typed` (the query before folding, index markers
    removed; default: the folded query). A Han run's consecutive kept pairs are joined back into the stretch they
    came from (会话, 话缓, 缓存 → 会话缓存), a particle at a stretch's edge dropped (么会话 → 会话); other kept terms
    next to each other with only punctuation or symbols between them stay one word (inc, 4821 → INC-4821): an agent
    searches for the id or name it typed, not for its folded pieces. `most`: at most so many words, the first."""
    text = folded_query if typed is None else typed
    if len(text) != len(folded_query):
        raise ValueError("the typed query must be the folded query's source, of the same length")
    spans: list[tuple[int, int] | None] = []  # the kept stretches in order, (start, end); None: none
    joined: tuple[int, int] | None = None  # the plain kept terms joined so far
    for group in _term_groups(folded_query):
        if _HAN.fullmatch(group[0][0]) is None:  # a plain term (a group of its own)
            term, start, end = group[0]
            if term in kept and joined is not None and _joins(text, joined[1], start):
                joined = (joined[0], end)
                continue
            spans.append(joined)
            joined = (start, end) if term in kept else None
            continue
        spans.append(joined)
        joined = None
        stretch: tuple[int, int] | None = None
        for term, start, end in group:
            if term in kept:
                stretch = (start, end) if stretch is None else (stretch[0], end)  # a run's pairs overlap by one
                continue
            spans.append(stretch and _trimmed(folded_query, *stretch))
            stretch = None
        spans.append(stretch and _trimmed(folded_query, *stretch))
    spans.append(joined)
    parts: dict[str, str] = {}  # folded → as typed: a repeat, in any case, is offered once
    for start, end in filter(None, spans):
        parts.setdefault(folded_query[start:end], text[start:end])
    return " ".join(list(parts.values())[:most])


def _joins(text: str, end: int, start: int) -> bool:
    """Whether two terms are one word as typed: only punctuation or symbols between them (INC-4821, v2.1)."""
    between = text[end:start]
    return bool(between) and all(unicodedata.category(ch)[0] in "PS" for ch in between)


def _trimmed(folded_query: str, start: int, end: int) -> tuple[int, int]:
    while end - start > 2 and folded_query[start] in HAN_PARTICLES:
        start += 1
    while end - start > 2 and folded_query[end - 1] in HAN_PARTICLES:
        end -= 1
    return start, end


COMMON_WORDS: Final = frozenset(
    """a about after all also am an and any are as at be been before being but by can could did do does done for
    from had has have he her here him his how i if in into is it its just me may might must my no not now of on or
    our out over shall she should so some than that the their them then there these they this those to too up us
    very was we were what when where which while who whom whose why will with would yes you your""".split()  # noqa: SIM905
    + """为什 什么 怎么 怎样 如何 为何 哪些 哪个 哪里 是否 是不 不是 我们 你们 他们 她们 它们 这个 那个
    这些 那些 这样 那样 因为 所以 但是 而且 或者 还是 可以 应该 已经 没有 一个 一些 时候 现在 之前
    之后 以前 以后 就是 然后 关于""".split()  # noqa: SIM905
)
"""Function and question words, English and Chinese (as the Han pairs a query splits into: 为什么 → 为什, 什么): terms
that hold nothing of what an agent looks for, yet match most fields (the half-of-the-terms rule counts them like any
other)."""
HAN_FUNCTION_CHARACTERS: Final = frozenset("的了吗呢吧啊么被把是在和与我你他她它们这那哪谁啥怎什为")
"""Particles, pronouns and question characters: a Han pair holding one is often no word of the query but two words'
edges (缓存方案被修改 → 案被), so the no-match note checks such pairs after the others."""
HAN_PARTICLES: Final = frozenset("的了吗呢吧啊么")
"""Characters that end a phrase (修改了) or are left over from a question word (什么会话 → 么会): dropped at the edge
of a stretch of terms offered as the next query."""


def function_term(term: str) -> bool:
    """A common word, or a Han pair holding a particle, pronoun or question character (为什, 案被, 改了): in a question
    typed as a sentence, a term that names nothing the agent looks for, yet counts toward the half of the terms an
    item needs."""
    return term in COMMON_WORDS or any(ch in HAN_FUNCTION_CHARACTERS for ch in term)


def _plain_terms(word: str, start: int, end: int, offset: int) -> list[Term]:
    """word[start:end] as a term (placed at `offset` + start in the query), when it counts as one."""
    run = word[start:end]
    return [(run, offset + start, offset + end)] if len(run) >= 2 or any(ch.isdigit() for ch in run) else []


def phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def needs_trigram_list(needle: str) -> bool:
    """One or two characters that are not all CJK: matched through the trigrams they begin."""
    return len(needle) < 3 and CJK_RUN.fullmatch(needle) is None


@dataclass(frozen=True)
class Needle:
    text: str
    """Folded, without index markers."""
    anywhere: str | None
    """An FTS5 expression matching items that hold the needle in any field; None: nothing can."""
    heavy: str | None
    """The same, restricted to weight-3 fields."""


def needle(text: str, trigrams: list[str] | None = None) -> Needle:
    """The expressions for one needle; `trigrams` (the indexed trigrams it begins) for a short non-CJK needle."""
    if len(text) >= 3:
        return Needle(text, phrase(text), "{hi} : " + phrase(text))
    if not needs_trigram_list(text):
        gram = phrase(text + (UNIGRAM_PAD if len(text) == 1 else BIGRAM_PAD))
        return Needle(text, gram, "{hi_grams} : " + gram)
    if not trigrams:
        return Needle(text, None, None)
    alternatives = "(" + " OR ".join(phrase(t) for t in trigrams) + ")"
    return Needle(text, alternatives, "{hi} : " + alternatives)


def needed(term_count: int) -> int:
    """How many distinct terms an object's fields must hold together: half, rounded up, at least one."""
    return max(1, math.ceil(term_count / 2))


@dataclass(frozen=True)
class Plan:
    """What the index is asked for one query."""

    whole: Needle
    terms: list[Needle]
    """The distinct terms other than the whole query itself (none for a one-word query)."""
    need: int
    accept: str | None
    """Items whose fields hold at least `need` distinct terms (exact); or — when `checked` — candidates that
    hold at least one of any len(terms) - need + 1 terms, to be checked against the text. None: no term
    can match."""
    checked: bool
    held: list[tuple[int, str | None]]
    """Exact plans: the matching items in tiers by how many distinct counted terms they hold, most first (the
    coordination level): [(k, expression), ...], each expression the matches holding exactly k counted terms (None:
    no item can). The counted terms are the usable terms other than function terms (`function_term`), from all of
    them down to what a match needs besides the function terms (need - function terms, at least 0); when every
    usable term is a function term, or none is, every usable term counts, from all of them down to `need`."""

    @property
    def terms_heavy(self) -> str | None:
        """Items with a term in a weight-3 field."""
        return any_of(*(t.heavy for t in self.terms))

    @cached_property
    def matcher(self) -> TermMatcher:
        return term_matcher(t.text for t in self.terms)


@dataclass(frozen=True)
class TermMatcher:
    """Which of a query's terms a text holds (checked plans ask it of every candidate's text). A pasted paragraph
    has hundreds of terms and a candidate's text a hundred characters: searching the text for every term cost
    ~0.2 ms per candidate (1.8 s per call at 1M). A text with far fewer places than terms is looked up by its
    substrings instead, and one too short to hold the terms needed is not read at all."""

    terms: frozenset[str]
    by_length: dict[int, frozenset[str]]
    widest: int
    """The most terms of one length."""
    longest: int

    def held(self, text: str) -> set[str]:
        if len(self.terms) <= SUBSTRINGS_OVER * len(self.by_length) * len(text):  # searches are the cheaper
            return {term for term in self.terms if term in text}
        found: set[str] = set()
        for length, terms in self.by_length.items():
            places = len(text) - length + 1
            if places > 0:
                found.update(terms.intersection([text[i : i + length] for i in range(places)]))
        return found

    def most_held(self, *text_lengths: int) -> int:
        """At most how many distinct terms texts of these lengths hold together: each held term begins at some place
        of some text, and distinct terms of one length begin at distinct places."""
        return sum(
            min(len(terms), sum(max(0, size - length + 1) for size in text_lengths))
            for length, terms in self.by_length.items()
        )

    def cannot_hold(self, need: int, *text_lengths: int) -> bool:
        """Whether texts of these lengths are too short to hold `need` distinct terms (most_held, asked only when
        it can say so: a text has at least as many places for each length as there are terms of that length)."""
        size = sum(text_lengths)
        if len(self.by_length) * size < need:
            return True
        if self.widest <= size - len(text_lengths) * (self.longest - 1):
            return False
        return self.most_held(*text_lengths) < need


SUBSTRINGS_OVER: Final = 2
"""A slice of the text (one per place and term length) costs about what two searches of it for a term cost."""


def term_matcher(terms: Iterable[str]) -> TermMatcher:
    by_length: dict[int, set[str]] = {}
    for term in terms:
        by_length.setdefault(len(term), set()).add(term)
    groups = {length: frozenset(group) for length, group in by_length.items()}
    return TermMatcher(
        frozenset().union(*groups.values()), groups, max(map(len, groups.values()), default=0), max(groups, default=0)
    )


def plan(whole: Needle, terms: list[Needle], frequency: Mapping[str, int] | None = None) -> Plan:
    """`frequency`: how many items hold each term (capped), when known. The terms no item holds are left out of the
    expressions and the others go rarest first: the same matches, for far less work (an expression whose branches
    each begin with a rare term reads that term's short list; "at least 5 of 8" over the common words of a sentence
    took ~200 ms per id range at 1M in query order). The tiers stay those of every usable term (`tiers`: which of them
    count is read from their text alone), so the rank classes (and the cursors naming them) do not depend on what the
    rest of the graph holds."""
    # A term equal to the whole query is matched as the whole query.
    terms = [t for t in terms if t.text != whole.text]
    if not terms:
        return Plan(whole, [], 1, None, False, [])
    need = needed(len(terms))
    usable = [t for t in terms if t.anywhere is not None]
    if len(usable) < need:
        return Plan(whole, terms, need, None, False, [])
    known = frequency or {}
    live = sorted((t for t in usable if known.get(t.text) != 0), key=lambda t: known.get(t.text, 0))
    expressions = [t.anywhere for t in live if t.anywhere is not None]
    if len(usable) <= MAX_EXACT_TERMS:
        accept = some(need, expressions)
        return Plan(whole, terms, need, accept, False, tiers(need, usable, live))
    # Any object holding `need` of the terms holds one of any len(expressions) - need + 1 of those it can hold.
    if len(expressions) < need:
        return Plan(whole, terms, need, None, True, [])
    return Plan(whole, terms, need, any_of(*expressions[: len(expressions) - need + 1]), True, [])


def tiers(need: int, usable: list[Needle], live: list[Needle]) -> list[tuple[int, str | None]]:
    """An exact plan's tiers (Plan.held), from the usable terms and the live ones (held by some item, in plan order).
    Function terms do not count: most texts hold them (`on` is in `session`), so for `what is the session TTL on the
    edge boxes` (8 terms, 4 needed) an item holding `what`, `is`, `the`, `on` and one word of the question ranked
    above one holding four of the words that name the thing. A match holding exactly c counted terms holds at least
    need - c of the others, so a tier is "exactly c counted terms" alone when c >= need, and with "at least need - c
    of the others" below (smaller than the whole match expression, and the same items)."""
    counted = counted_terms(usable)
    mine = [t.anywhere for t in live if t.text in counted and t.anywhere is not None]
    others = [t.anywhere for t in live if t.text not in counted and t.anywhere is not None]
    lowest = max(0, need - (len(usable) - len(counted)))

    held: list[tuple[int, str | None]] = []
    for k in range(len(counted), lowest - 1, -1):
        fewer = need - k  # how many of the other terms a match holding exactly k counted terms needs besides
        if k == 0:  # none of the counted terms: FTS5's NOT needs something on its left
            held.append((k, but_not(some(fewer, others), any_of(*mine))))
            continue
        exactly = but_not(some(k, mine), some(k + 1, mine))
        held.append((k, exactly if fewer <= 0 else both(exactly, some(fewer, others))))
    return held


def counted_terms(usable: list[Needle]) -> set[str]:
    """The terms a tier counts (`tiers`): the usable terms other than function terms; all of them when every usable
    term is a function term, or none is."""
    content = {t.text for t in usable if not function_term(t.text)}
    return content if 0 < len(content) < len(usable) else {t.text for t in usable}


def some(k: int, expressions: list[str]) -> str | None:
    """At least k of the expressions (None: no item can hold so many)."""
    return at_least(k, expressions) if k <= len(expressions) else None


def at_least(need: int, expressions: list[str]) -> str:
    """An FTS5 expression true where at least `need` of the expressions are: factored as (first AND at least
    need-1 of the rest) OR (at least need of the rest), which keeps it far smaller than listing every
    combination."""
    if need == 1:
        return any_of(*expressions) or ""
    if need == len(expressions):
        return " AND ".join(expressions)
    first, rest = expressions[0], expressions[1:]
    return f"({first} AND ({at_least(need - 1, rest)})) OR ({at_least(need, rest)})"


def any_of(*parts: str | None) -> str | None:
    present = [p for p in parts if p]
    if not present:
        return None
    return present[0] if len(present) == 1 else " OR ".join(f"({p})" for p in present)


def but_not(keep: str | None, drop: str | None) -> str | None:
    if keep is None:
        return None
    return keep if drop is None else f"({keep}) NOT ({drop})"


def both(first: str | None, second: str | None) -> str | None:
    if first is None or second is None:
        return None
    return f"({first}) AND ({second})"


def time_match(basis: str, time_range: tuple[str, str]) -> str | None:
    """An FTS5 expression for the items with a time on `basis` in a month of `time_range` (UTC, 'YYYY-MM-...'),
    or outside the months that have tokens, or (event time) in a long interval: a superset of the items in the
    range, for the index to skip the others. None when the range spans more than MAX_RANGE_MONTHS months."""
    first, last = (month_number(time) for time in time_range)
    months = range(max(first, 0), min(last, MONTHS - 1) + 1)
    if len(months) > MAX_RANGE_MONTHS:
        return None
    tokens = [time_gram(basis, month) for month in (*months, OUTSIDE_MONTH, LONG_MONTH)]
    return "{time_grams} : (" + " OR ".join(phrase(token) for token in tokens) + ")"
