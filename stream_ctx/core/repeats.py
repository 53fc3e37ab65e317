"""Readable repeats: each text planned as literal runs and references to whole lines or sentences
of the texts before it (or earlier in itself), or as a diff against one of them.

Texts are cut into units, lines and the sentences inside them (quotes.py). A hash index of the
units seen so far finds, at each unit, the earlier texts that go on alike; the longest such run
of whole units becomes a reference when its quotes find it and it saves tokens. A text that
starts with the end of an earlier one (an overlapping chunk) takes its first, partial unit into
the run, and so does one that ends with the start of an earlier one. A text mostly made of
another one's lines is written as a diff against it (rerun.py) when that costs less. Deterministic:
the same texts in the same order give the same plans, and a text's plan depends only on the texts
before it, so an entry sent before is planned alike in a later context.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from stream_ctx.core.plan import DIFF_LEAD, Piece, Ref, TextPlan
from stream_ctx.core.quotes import choose_quotes, rough_tokens, unit_ends
from stream_ctx.core.rerun import rerun

__all__ = ("Units", "plan_texts", "split_units")

# A passage shorter than this is written out: looking it up would cost the reader more.
_MIN_PASSAGE_CHARS = 24
# A reference must save at least this many tokens (roughly counted) over the passage.
_MIN_SAVED_TOKENS = 6
# A passage this many times as long as its reference is taken without pricing it: text of that
# length costs far more than its reference (about 4 characters a token in prose and code).
_SURELY_WORTH = 8
# Only this many earlier places of a unit are tried as the start of a run (the latest ones).
_MAX_CANDIDATES = 8
# A text shares at least this much of its characters with an earlier one to be tried as a diff.
_MIN_DIFF_SHARE = 0.5
# A text's first unit is looked for in earlier texts when it holds this many words.
_MIN_LEAD_WORDS = 3
# How many units a passage may lose at either end to find quotable first and last lines.
_MAX_NARROWED = 3
# A rerun reads best as its changes: a diff is written while it costs at most this many times
# the references that would otherwise stand for it.
_DIFF_PREFERENCE = 1.5


def plan_texts(texts: Sequence[str]) -> list[TextPlan]:
    """Each text's plan, in the given order."""
    finder = _Finder()
    return [finder.plan(n, text) for n, text in enumerate(texts)]


@dataclass(slots=True)
class _Finder:
    """The texts planned so far, their units, and where each unit text occurs."""

    texts: list[str] = field(default_factory=list)
    units: list[list[str]] = field(default_factory=list)
    starts: list[list[int]] = field(default_factory=list)
    places: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    # The texts so far, joined: one search tells whether any of them holds a text's first unit.
    joined: str = ""
    whole: dict[str, int] = field(default_factory=dict)

    def plan(self, n: int, text: str) -> TextPlan:
        units, starts, marks = split_units(text)
        self.joined += text + "\n"
        self.texts.append(text)
        self.units.append(units)
        self.starts.append(starts)
        same = self.whole.get(text)
        self.whole.setdefault(text, n)
        base = self._diff_base(text, units) if same is None else None
        pieces = self._pieces(n, text, (units, starts, marks))
        if same is not None and _is_worth(same, text, "", ""):
            return TextPlan([Ref(same, 0, len(text))])
        if base is not None:
            diff = _diff_plan(base, self.texts[base], text)
            if diff is not None and _cost(diff) <= _DIFF_PREFERENCE * _cost_of_pieces(pieces):
                return diff
        return TextPlan(pieces)

    def _diff_base(self, text: str, units: list[str]) -> int | None:
        """The earlier text sharing the most of this one's units, if it shares enough."""
        shared: dict[int, int] = {}
        places_of = self.places.get
        for unit in units:
            places = places_of(unit)
            if places is None:
                continue
            if len(places) == 1:
                k = places[0][0]
                shared[k] = shared.get(k, 0) + len(unit)
                continue
            for k in {k for k, _ in places}:
                shared[k] = shared.get(k, 0) + len(unit)
        if not shared:
            return None
        best = max(sorted(shared), key=shared.__getitem__)
        return best if shared[best] >= _MIN_DIFF_SHARE * len(text) else None

    def _pieces(self, n: int, text: str, split: Units) -> list[Piece]:
        """The text as literal runs and references, left to right; its units join the index."""
        units, starts, marks = split
        pieces: list[Piece] = []
        written = 0
        i = 0
        while i < len(units):
            found = self._continuation(n, text, units, starts) if i == 0 else None
            if found is None and marks[i] and units[i] in self.places:
                found = self._reference(n, text, units, starts, i, written)
            if found is None:
                if marks[i]:
                    self.places.setdefault(units[i], []).append((n, i))
                i += 1
                continue
            ref, a, b, end = found
            if a > written:
                pieces.append(text[written:a])
            pieces.append(ref)
            written = b
            for j in range(i, end):
                if marks[j]:
                    self.places.setdefault(units[j], []).append((n, j))
            i = end
        if written < len(text):
            pieces.append(text[written:])
        return _joined_literals(pieces)

    def _continuation(
        self, n: int, text: str, units: list[str], starts: list[int]
    ) -> tuple[Ref, int, int, int] | None:
        """The reference for a text that starts where an earlier one goes on (an overlapping
        chunk): its first unit, maybe the end of a sentence or line, found in the nearest
        earlier text at a word's start, and the whole units after it that follow it there."""
        first = units[0]
        if len(first.split(None, _MIN_LEAD_WORDS)) < _MIN_LEAD_WORDS:
            return None
        best: tuple[int, int] | None = None
        words = first.rstrip()
        if self.joined.find(words, 0, len(self.joined) - len(text) - 1) < 0:
            return None  # no earlier text holds it: the common case, decided in one search
        for k in range(n - 1, -1, -1):
            source = self.texts[k]
            at = source.find(words)
            if at < 0 or not _is_word_start(source, at, first):
                continue
            pos, size = at + len(first), 1
            if source.startswith(first, at):  # the units after it may follow it there too
                while size < len(units) and source.startswith(units[size], pos):
                    pos, size = pos + len(units[size]), size + 1
            if best is None or size > best[1]:
                best = k, size
        if best is None:
            return None
        k, size = best
        for first_at, last_at in _narrowed(starts, 0, starts[size]):
            if last_at - first_at < _MIN_PASSAGE_CHARS:
                break  # the spans come widest first
            found = self._quoted(n, k, text, first_at, last_at)
            if found is not None:
                return (*found, size)
        return None

    def _reference(
        self, n: int, text: str, units: list[str], starts: list[int], i: int, written: int
    ) -> tuple[Ref, int, int, int] | None:
        """The reference for the longest run of units from unit `i` that also stands earlier
        (taking in the equal units before it, back to `written`), with where its passage
        starts and ends in the text and the unit after it."""
        run = self._longest_run(n, units, i)
        if run is None:
            return None
        k, j, size = run
        end = i + size
        a, b = starts[i], starts[end]
        if k != n:
            theirs = self.units[k]
            while i > 0 and j > 0 and starts[i - 1] >= written and units[i - 1] == theirs[j - 1]:
                i, j, size = i - 1, j - 1, size + 1
            a, b = self._widened(k, j, size, units, starts, i)
            a = max(a, written)
        for first, last in _narrowed(starts, a, b):
            if last - first < _MIN_PASSAGE_CHARS:
                break  # the spans come widest first
            found = self._quoted(n, k, text, first, last)
            if found is not None:
                return (*found, end)
        return None

    def _quoted(self, n: int, k: int, text: str, a: int, b: int) -> tuple[Ref, int, int] | None:
        """The reference for text[a:b] without its blanks at either end, if quotes find it and
        it is worth it."""
        a += len(text[a:b]) - len(text[a:b].lstrip())
        b = a + len(text[a:b].rstrip())
        passage = text[a:b]
        if len(passage) < _MIN_PASSAGE_CHARS:
            return None
        source = self.texts[k] if k != n else text[:a]
        if k != n and passage == source:
            return (Ref(k, 0, len(passage)), a, b) if _is_worth(k, passage, "", "") else None
        quotes = choose_quotes(source, passage)
        if quotes is None or not _is_worth(k, passage, *quotes[:2]):
            return None
        head, tail, start = quotes
        return Ref(k, start, len(passage), head, tail), a, b

    def _longest_run(self, n: int, units: list[str], i: int) -> tuple[int, int, int] | None:
        """(text, unit, units) of the longest run of earlier units equal to units from `i`."""
        best: tuple[int, int, int] | None = None
        best_chars = 0
        for k, j in self.places.get(units[i], ())[-_MAX_CANDIDATES:]:
            theirs = self.units[k]
            limit = len(theirs) if k != n else i  # a text's own passage ends before it recurs
            size = 1
            while (
                i + size < len(units) and j + size < limit and theirs[j + size] == units[i + size]
            ):
                size += 1
            chars = sum(map(len, units[i : i + size]))
            if chars > best_chars:
                best, best_chars = (k, j, size), chars
        return best

    def _widened(
        self, k: int, j: int, size: int, units: list[str], starts: list[int], i: int
    ) -> tuple[int, int]:
        """The run's span in this text, taking in its partial first unit when the run starts
        at its second one and the source has that unit's text just before (a chunk that
        continues text k), and its partial last unit likewise."""
        source, theirs = self.texts[k], self.starts[k]
        a, b = starts[i], starts[i + size]
        if i == 1:
            first, at = units[0], theirs[j] - len(units[0])
            if at >= 0 and source.startswith(first, at) and _is_word_start(source, at, first):
                a = 0
        if i + size == len(units) - 1:
            last, at = units[-1], theirs[j + size]
            if source.startswith(last, at) and _is_word_end(source, at + len(last), last):
                b = starts[-1]
        return a, b


def _narrowed(starts: list[int], a: int, b: int) -> list[tuple[int, int]]:
    """The span a..b and those a few units narrower at either end, widest first: a passage
    whose first or last line has nothing to quote is tried without it."""
    inner = starts[bisect_right(starts, a) : bisect_left(starts, b)]
    firsts = [a, *inner[:_MAX_NARROWED]]
    lasts = [b, *inner[::-1][:_MAX_NARROWED]]
    spans = [(first, last) for first in firsts for last in lasts if last > first]
    return sorted(spans, key=lambda span: span[0] - span[1])


Units = tuple[list[str], list[int], list[bool]]
"""A text's units, where each starts (then the text's length), and which may start a run."""


@lru_cache(maxsize=1 << 13)
def split_units(text: str) -> Units:
    """A text's units: a held item's are cut once while it stays cached."""
    ends = unit_ends(text)
    starts = [0, *ends]
    units = [text[a:b] for a, b in zip(starts, ends, strict=False)]
    return units, starts, [_is_significant(unit) for unit in units]


def _diff_plan(base: int, old: str, new: str) -> TextPlan | None:
    found = rerun(old, new)
    if found is None:
        return None
    pieces: list[Piece] = []
    written = 0
    for old_start, new_start, length in found.kept:
        if new_start > written:
            pieces.append(new[written:new_start])
        pieces.append(Ref(base, old_start, length))
        written = new_start + length
    if written < len(new):
        pieces.append(new[written:])
    return TextPlan(pieces, base, found.hunks)


def _cost(plan: TextPlan) -> int:
    return rough_tokens(DIFF_LEAD.format(plan.diff_of) + plan.hunks)


def _cost_of_pieces(pieces: list[Piece]) -> int:
    return sum(
        rough_tokens(piece) if isinstance(piece, str) else _ref_tokens(piece) for piece in pieces
    )


def _ref_tokens(ref: Ref) -> int:
    return rough_tokens(f'[§{ref.source + 1} "{ref.head}"…"{ref.tail}"]')


def _is_worth(k: int, passage: str, head: str, tail: str) -> bool:
    """Whether a reference saves enough tokens over writing `passage` out."""
    written = f'[§{k + 1} "{head}"…"{tail}"]' if head else f"[§{k + 1}]"
    if len(passage) >= _SURELY_WORTH * len(written):
        return True
    return rough_tokens(passage) - rough_tokens(written) >= _MIN_SAVED_TOKENS


def _is_significant(unit: str) -> bool:
    """A unit that may start a run: two words at the least, not a bare brace or blank line."""
    return len(unit) >= 8 and len(unit.split(None, 2)) >= 2


def _is_word_start(source: str, at: int, unit: str) -> bool:
    return at == 0 or unit[0].isspace() or source[at - 1].isspace()


def _is_word_end(source: str, at: int, unit: str) -> bool:
    return at == len(source) or unit[-1].isspace() or source[at].isspace()


def _joined_literals(pieces: list[Piece]) -> list[Piece]:
    joined: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, str) and joined and isinstance(joined[-1], str):
            joined[-1] += piece
        else:
            joined.append(piece)
    return joined
