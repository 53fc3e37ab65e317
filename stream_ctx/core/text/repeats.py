"""Readable repeats: each text planned as literal runs and references to whole lines or sentences
of the texts before it (or earlier in itself), or as a diff against one of them.

Texts are cut into units, lines and the sentences inside them, and indexed by them in no order
(textindex.py); a Planner places them in a context's order. At each unit the index finds the
earlier texts that go on alike; the longest such run
of whole units becomes a reference when its quotes find it and it saves tokens. A text that
starts with the end of an earlier one (an overlapping chunk) takes its first, partial unit into
the run, and so does one that ends with the start of an earlier one. A text mostly made of
another one's lines is written as a diff against it (rerun.py) when that costs less. Deterministic:
the same texts in the same order give the same plans, and a text's plan depends only on the texts
before it, so an entry sent before is planned alike in a later context. It depends on few of them,
which the Planner names with each plan, so a plan can be kept while they keep their places.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence

from stream_ctx.core.memo import Memos
from stream_ctx.core.text.plan import DIFF_LEAD, Piece, Ref, TextPlan
from stream_ctx.core.text.quotes import QUOTES, rough_tokens
from stream_ctx.core.text.rerun import RERUNS, Rerun
from stream_ctx.core.text.textindex import IndexedText, TextIndex

__all__ = (
    "DIFF_PREFERENCE",
    "MAX_CANDIDATES",
    "MIN_DIFF_SHARE",
    "MIN_PASSAGE_CHARS",
    "MIN_SAVED_TOKENS",
    "SURELY_WORTH",
    "Planner",
    "diff_cost",
    "diff_plan",
    "is_word_end",
    "is_word_start",
    "is_worth",
    "joined_literals",
    "narrowed",
    "pieces_cost",
    "plan_texts",
)

# A text shares at least this much of its characters with an earlier one to be tried as a diff.
MIN_DIFF_SHARE = 0.5
# A passage shorter than this is written out: looking it up would cost the reader more.
MIN_PASSAGE_CHARS = 24
# A reference must save at least this many tokens (roughly counted) over the passage.
MIN_SAVED_TOKENS = 6
# A passage this many times as long as its reference is taken without pricing it: text of that
# length costs far more than its reference (about 4 characters a token in prose and code).
SURELY_WORTH = 8
# Only this many earlier places of a unit are tried as the start of a run (the latest ones).
MAX_CANDIDATES = 8
# How many units a passage may lose at either end to find quotable first and last lines.
_MAX_NARROWED = 3
# A rerun reads best as its changes: a diff is written while it costs at most this many times
# the references that would otherwise stand for it.
DIFF_PREFERENCE = 1.5


def plan_texts(texts: Sequence[str], *, memos: Memos | None = None) -> list[TextPlan]:
    """Each text's plan, in the given order."""
    memos = memos if memos is not None else Memos()
    index = TextIndex(memos)
    planner = Planner(index, [indexed.serial for indexed in index.add(texts)], memos)
    return [planner.plan(n)[0] for n in range(len(texts))]


class Planner:
    """Plans the texts of one context, given as serials of `index` in context order."""

    __slots__ = (
        "_ordered",
        "_quotes",
        "_read",
        "_rerun",
        "at",
        "index",
        "texts",
        "widths",
    )

    def __init__(self, index: TextIndex, order: Sequence[int], memos: Memos) -> None:
        self.index = index
        self.at = {serial: n for n, serial in enumerate(order)}
        self.texts = [index.texts[serial] for serial in order]
        # Each unit's places among these texts, in context order, made when first asked for.
        self._ordered: dict[str, list[tuple[int, int]]] = {}
        self._quotes = memos[QUOTES]
        self._rerun = memos[RERUNS]
        # The digits of each place k and of its number k + 1: costs are priced with them.
        self.widths = [(len(str(k)), len(str(k + 1))) for k in range(len(order))]
        self._read: set[int] = set()

    def plan(self, n: int) -> tuple[TextPlan, set[int]]:
        """How text `n` is written after the texts before it, and the places of the earlier
        texts that decided it: with the same texts there in the same order, numbered as wide,
        no other text holding what it looked for, the plan is the same (up to numbering)."""
        mine = self.texts[n]
        text = mine.text
        at = self.at
        self._read = read = {k for s in self.index.equal[text] if (k := at.get(s, n)) < n}
        same = min(read, default=None)
        if same is not None and is_worth(same, text, "", ""):
            return TextPlan([Ref(same, 0, len(text))]), read
        pieces = self._pieces(n, mine)
        base = self._diff_base(n, mine) if same is None else None
        if base is not None:
            diff = diff_plan(self._rerun, base, self.texts[base].text, text)
            if diff is not None and diff_cost(diff) <= DIFF_PREFERENCE * pieces_cost(pieces):
                return diff, read
        return TextPlan(pieces), read

    def may_read(self, n: int, places: set[int], units: set[str]) -> bool:
        """Whether the plan of text `n` may read a text at one of `places` before it, given the
        units those texts share: an equal text, one it may continue, one among the latest places
        of a unit they share, or one it may be a rerun of."""
        mine, at = self.texts[n], self.at
        related = (*self.index.equal[mine.text], *mine.continued_in)
        if any((k := at.get(serial, n)) < n and k in places for serial in related):
            return True
        common = mine.shared & units
        if any(k in places for unit in common for k, _ in self._latest(unit, n)):
            return True
        shared = self._shared_chars(n, common)
        return any(k in places and chars >= self._half(n) for k, chars in shared.items())

    def _latest(self, unit: str, n: int) -> list[tuple[int, int]]:
        """The latest places of `unit` (a unit text `n` shares) in the texts before text `n`,
        in context order."""
        ordered = self._ordered_places(unit)
        cut = bisect_left(ordered, (n, -1))
        return ordered[max(cut - MAX_CANDIDATES, 0) : cut]

    def _ordered_places(self, unit: str) -> list[tuple[int, int]]:
        """The places of `unit` among these texts, in context order."""
        ordered = self._ordered.get(unit)
        if ordered is None:
            at = self.at
            ordered = [(at[s], j) for s, j in self.index.places[unit] if s in at]
            ordered.sort()
            self._ordered[unit] = ordered
        return ordered

    def _candidates(
        self, n: int, mine: IndexedText, i: int, own: dict[str, list[int]]
    ) -> list[tuple[int, int]]:
        """The latest places of unit `i` before it (this text's own earlier ones last): where
        a run of units equal to those from unit `i` may start."""
        unit = mine.units[i]
        earlier = self._latest(unit, n) if unit in mine.shared else []
        self._read.update(k for k, _ in earlier)
        if unit not in own:
            return earlier
        return [*earlier, *((n, j) for j in own[unit])][-MAX_CANDIDATES:]

    def _diff_base(self, n: int, mine: IndexedText) -> int | None:
        """The earlier text sharing the most of this one's units (the first on a tie), if it
        shares enough."""
        shared = self._shared_chars(n, mine.shared)
        half = self._half(n)
        self._read.update(k for k, chars in shared.items() if chars >= half)
        if not shared:
            return None
        best = max(sorted(shared), key=shared.__getitem__)
        return best if shared[best] >= half else None

    def _shared_chars(self, n: int, units: set[str]) -> dict[int, int]:
        """For each text before text `n` that holds some of `units` (units of text `n`), the
        characters of text `n` in those units: each occurrence counts its length."""
        mine, at, places = self.texts[n], self.at, self.index.places
        shared: dict[int, int] = {}
        for unit in units:
            chars = mine.occurrences[unit] * len(unit)
            last = -1
            for serial, _ in places[unit]:  # a text's places of a unit stand together
                if serial != last:
                    last = serial
                    k = at.get(serial, n)
                    if k < n:
                        shared[k] = shared.get(k, 0) + chars
        return shared

    def _half(self, n: int) -> float:
        return MIN_DIFF_SHARE * len(self.texts[n].text)

    def _pieces(self, n: int, mine: IndexedText) -> list[Piece]:
        """The text as literal runs and references, left to right."""
        text, units, marks = mine.text, mine.units, mine.marks
        # This text's own units so far: a later one may refer back to them.
        own: dict[str, list[int]] = {}
        pieces: list[Piece] = []
        written = 0
        i = 0
        shared = mine.shared
        while i < len(units):
            found = self._continuation(n, mine) if i == 0 else None
            if found is None and marks[i] and (units[i] in shared or units[i] in own):
                candidates = self._candidates(n, mine, i, own)
                if candidates:
                    found = self._reference(n, mine, i, written, candidates)
            if found is None:
                if marks[i]:
                    own.setdefault(units[i], []).append(i)
                i += 1
                continue
            ref, a, b, end = found
            if a > written:
                pieces.append(text[written:a])
            pieces.append(ref)
            written = b
            for j in range(i, end):
                if marks[j]:
                    own.setdefault(units[j], []).append(j)
            i = end
        if written < len(text):
            pieces.append(text[written:])
        return joined_literals(pieces)

    def _continuation(self, n: int, mine: IndexedText) -> tuple[Ref, int, int, int] | None:
        """The reference for a text that starts where an earlier one goes on (an overlapping
        chunk): its first unit, maybe the end of a sentence or line, found in the nearest
        earlier text at a word's start, and the whole units after it that follow it there."""
        words = mine.lead
        if words is None or not mine.continued_in:
            return None
        at = self.at
        earlier = sorted((k for s in mine.continued_in if (k := at.get(s, n)) < n), reverse=True)
        self._read.update(earlier)
        units, starts = mine.units, mine.starts
        first = units[0]
        best: tuple[int, int] | None = None
        for k in earlier:
            source = self.texts[k].text
            found = source.find(words)
            if not is_word_start(source, found, first):
                continue
            pos, size = found + len(first), 1
            if source.startswith(first, found):  # the units after it may follow it there too
                while size < len(units) and source.startswith(units[size], pos):
                    pos, size = pos + len(units[size]), size + 1
            if best is None or size > best[1]:
                best = k, size
        if best is None:
            return None
        k, size = best
        for first_at, last_at in narrowed(starts, 0, starts[size]):
            if last_at - first_at < MIN_PASSAGE_CHARS:
                break  # the spans come widest first
            quoted = self._quoted(n, k, mine.text, first_at, last_at)
            if quoted is not None:
                return (*quoted, size)
        return None

    def _reference(
        self,
        n: int,
        mine: IndexedText,
        i: int,
        written: int,
        candidates: list[tuple[int, int]],
    ) -> tuple[Ref, int, int, int] | None:
        """The reference for the longest run of units from unit `i` that also stands earlier
        (taking in the equal units before it, back to `written`), with where its passage
        starts and ends in the text and the unit after it."""
        units, starts = mine.units, mine.starts
        run = self._longest_run(n, units, i, candidates)
        if run is None:
            return None
        k, j, size = run
        end = i + size
        a, b = starts[i], starts[end]
        if k != n:
            theirs = self.texts[k].units
            while i > 0 and j > 0 and starts[i - 1] >= written and units[i - 1] == theirs[j - 1]:
                i, j, size = i - 1, j - 1, size + 1
            a, b = self._widened(k, j, size, mine, i)
            a = max(a, written)
        # Earlier texts among the candidates: one that holds the passage whole is named instead.
        holders = sorted({place for place, _ in candidates if place < k})
        for first, last in narrowed(starts, a, b):
            if last - first < MIN_PASSAGE_CHARS:
                break  # the spans come widest first
            quoted = self._quoted(n, k, mine.text, first, last, holders)
            if quoted is not None:
                return (*quoted, end)
        return None

    def _quoted(
        self, n: int, k: int, text: str, a: int, b: int, holders: Sequence[int] = ()
    ) -> tuple[Ref, int, int] | None:
        """The reference for text[a:b] without its blanks at either end, if quotes find it and
        it is worth it; naming the first of `holders` (texts before k) that holds it whole, as
        that text is more likely to write it out than to refer to it."""
        a += len(text[a:b]) - len(text[a:b].lstrip())
        b = a + len(text[a:b].rstrip())
        passage = text[a:b]
        if len(passage) < MIN_PASSAGE_CHARS:
            return None
        for holder in holders:
            if passage in self.texts[holder].text:
                quoted = self._quoted(n, holder, text, a, b)
                if quoted is not None:
                    return quoted
        source = self.texts[k].text if k != n else text[:a]
        if k != n and passage == source:
            return (Ref(k, 0, len(passage)), a, b) if is_worth(k, passage, "", "") else None
        quotes = self._quotes(source, passage)
        if quotes is None or not is_worth(k, passage, *quotes[:2]):
            return None
        head, tail, start = quotes
        return Ref(k, start, len(passage), head, tail), a, b

    def _longest_run(
        self, n: int, units: list[str], i: int, candidates: list[tuple[int, int]]
    ) -> tuple[int, int, int] | None:
        """(text, unit, units) of the longest run of earlier units equal to units from `i`,
        starting at one of `candidates`."""
        best: tuple[int, int, int] | None = None
        best_chars = 0
        for k, j in candidates:
            theirs = self.texts[k].units if k != n else units
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

    def _widened(self, k: int, j: int, size: int, mine: IndexedText, i: int) -> tuple[int, int]:
        """The run's span in this text, taking in its partial first unit when the run starts
        at its second one and the source has that unit's text just before (a chunk that
        continues text k), and its partial last unit likewise."""
        units, starts = mine.units, mine.starts
        source, theirs = self.texts[k].text, self.texts[k].starts
        a, b = starts[i], starts[i + size]
        if i == 1:
            first, at = units[0], theirs[j] - len(units[0])
            if at >= 0 and source.startswith(first, at) and is_word_start(source, at, first):
                a = 0
        if i + size == len(units) - 1:
            last, at = units[-1], theirs[j + size]
            if source.startswith(last, at) and is_word_end(source, at + len(last), last):
                b = starts[-1]
        return a, b


def diff_plan(
    reruns: Callable[[str, str], Rerun | None], base: int, old: str, new: str
) -> TextPlan | None:
    """Text `new` as a diff against `old`, text `base`, with its kept runs as references."""
    found = reruns(old, new)
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


def narrowed(starts: list[int], a: int, b: int) -> list[tuple[int, int]]:
    """The span a..b and those a few units narrower at either end, widest first: a passage
    whose first or last line has nothing to quote is tried without it."""
    inner = starts[bisect_right(starts, a) : bisect_left(starts, b)]
    firsts = [a, *inner[:_MAX_NARROWED]]
    lasts = [b, *inner[::-1][:_MAX_NARROWED]]
    spans = [(first, last) for first in firsts for last in lasts if last > first]
    return sorted(spans, key=lambda span: span[0] - span[1])


def diff_cost(plan: TextPlan) -> int:
    return rough_tokens(DIFF_LEAD.format(plan.diff_of) + plan.hunks)


def pieces_cost(pieces: list[Piece]) -> int:
    return sum(
        rough_tokens(piece) if isinstance(piece, str) else _ref_tokens(piece) for piece in pieces
    )


def _ref_tokens(ref: Ref) -> int:
    return rough_tokens(f'[§{ref.source + 1} "{ref.head}"…"{ref.tail}"]')


def is_worth(k: int, passage: str, head: str, tail: str) -> bool:
    """Whether a reference saves enough tokens over writing `passage` out."""
    written = f'[§{k + 1} "{head}"…"{tail}"]' if head else f"[§{k + 1}]"
    if len(passage) >= SURELY_WORTH * len(written):
        return True
    return rough_tokens(passage) - rough_tokens(written) >= MIN_SAVED_TOKENS


def is_word_start(source: str, at: int, unit: str) -> bool:
    return at == 0 or unit[0].isspace() or source[at - 1].isspace()


def is_word_end(source: str, at: int, unit: str) -> bool:
    return at == len(source) or unit[-1].isspace() or source[at].isspace()


def joined_literals(pieces: list[Piece]) -> list[Piece]:
    joined: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, str) and joined and isinstance(joined[-1], str):
            joined[-1] += piece
        else:
            joined.append(piece)
    return joined
