"""TextIndex: the texts a window holds, cut into units (lines and the sentences inside them) and
indexed by them in no order, so a window's next finalize indexes only its new texts.

Each text gets a serial when added; a changed text is removed and added again under a new one.
Besides where each unit stands, the index keeps for each text the others its plan may read
beyond those: the ones that hold its first words (it may continue them) and the ones that share
at least half of its characters in units (it may be their rerun). Where each text stands in a
context is the planner's business (repeats.py).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate, count
from typing import TypeVar

from stream_ctx.core.memo import Memo, Memos
from stream_ctx.core.text.quotes import unit_ends

__all__ = ("UNITS", "IndexedText", "TextIndex", "Units", "lead_of", "split_units")

# A text's first unit is looked for in earlier texts when it holds this many words.
_MIN_LEAD_WORDS = 3

_K = TypeVar("_K")
_V = TypeVar("_V")

Units = tuple[list[str], list[int], list[bool]]
"""A text's units, where each starts (then the text's length), and which may start a run."""


def split_units(text: str) -> Units:
    """A text's units, where they start, and which may start a run."""
    ends = unit_ends(text)
    starts = [0, *ends]
    units = [text[a:b] for a, b in zip(starts, ends, strict=False)]
    return units, starts, [_is_significant(unit) for unit in units]


UNITS = Memo("text_units", split_units, 1 << 13)
"""split_units memoized: a chunk many conversations retrieve is cut once while it stays cached."""


@dataclass(slots=True, eq=False)
class IndexedText:
    """One held text, its units (with how often each that may start a run occurs), which of them
    other held texts hold too (`shared`), the other texts (by serial) that hold its first words
    (`continued_in`: it may continue them) and those that start with words it holds (`leads`)."""

    serial: int
    text: str
    units: list[str]
    starts: list[int]
    marks: list[bool]
    lead: str | None
    occurrences: dict[str, int]
    shared: set[str] = field(default_factory=set)
    continued_in: set[int] = field(default_factory=set)
    leads: set[int] = field(default_factory=set)


class TextIndex:
    """Held texts by serial, where each unit that may start a run stands, and equal texts."""

    __slots__ = ("_serials", "_split", "equal", "places", "texts")

    def __init__(self, memos: Memos) -> None:
        self.texts: dict[int, IndexedText] = {}
        # A unit's places: (serial, unit index), one text's together, texts in no particular order.
        self.places: dict[str, list[tuple[int, int]]] = {}
        self.equal: dict[str, list[int]] = {}
        self._serials = count()
        self._split = memos[UNITS]

    def add(self, texts: Sequence[str]) -> list[IndexedText]:
        """Index `texts`, each under a new serial."""
        added = [self._indexed(text) for text in texts]
        self._link_leads(added)
        return added

    def _indexed(self, text: str) -> IndexedText:
        units, starts, marks = self._split(text)
        serial = next(self._serials)
        occurrences: dict[str, int] = {}
        mine: list[tuple[str, tuple[int, int]]] = []
        for j, unit in enumerate(units):
            if marks[j]:
                occurrences[unit] = occurrences.get(unit, 0) + 1
                mine.append((unit, (serial, j)))
        new = IndexedText(serial, text, units, starts, marks, lead_of(units), occurrences)
        self._share(new)
        places = self.places
        for unit, place in mine:
            held = places.get(unit)
            if held is None:
                places[unit] = [place]
            else:
                held.append(place)
        self.equal.setdefault(text, []).append(serial)
        self.texts[new.serial] = new
        return new

    def _link_leads(self, added: list[IndexedText]) -> None:
        """Record which texts hold the first words of which, for the added texts both ways: a
        search of all texts joined for each added one's words, and of the added ones joined for
        each other text's (first words hold no newline, so no match runs across two texts)."""
        every = list(self.texts.values())
        joined = "\n".join(held.text for held in every)
        starts = list(accumulate((len(held.text) + 1 for held in every), initial=0))
        for new in added:
            at = -1 if new.lead is None else joined.find(new.lead)
            while at >= 0:
                k = bisect_right(starts, at) - 1
                if every[k] is not new:
                    new.continued_in.add(every[k].serial)
                    every[k].leads.add(new.serial)
                at = joined.find(new.lead, starts[k + 1]) if new.lead is not None else -1
        fresh = {new.serial for new in added}
        joined_added = "\n".join(new.text for new in added)
        for other in every:
            if other.lead is None or other.serial in fresh or other.lead not in joined_added:
                continue
            for new in added:
                if other.lead in new.text:
                    other.continued_in.add(new.serial)
                    new.leads.add(other.serial)

    def remove(self, serial: int) -> None:
        """Forget a text and every mention of it."""
        gone = self.texts.pop(serial)
        for j, unit in enumerate(gone.units):
            if gone.marks[j]:
                _discard(self.places, unit, (serial, j))
        for unit in gone.shared:
            holders = {serial for serial, _ in self.places[unit]}
            if len(holders) == 1:
                self.texts[holders.pop()].shared.discard(unit)
        _discard(self.equal, gone.text, serial)
        for other in gone.continued_in:
            self.texts[other].leads.discard(serial)
        for other in gone.leads:
            self.texts[other].continued_in.discard(serial)

    def _share(self, new: IndexedText) -> None:
        """Record, both ways, which units the new text shares with held ones."""
        texts, places = self.texts, self.places
        for unit in new.occurrences:
            held = places.get(unit)
            if held is not None:
                new.shared.add(unit)
                for serial, _ in held:
                    texts[serial].shared.add(unit)


def lead_of(units: list[str]) -> str | None:
    """The first unit's words, if there are enough of them to look for elsewhere."""
    first = units[0]
    if len(first.split(None, _MIN_LEAD_WORDS)) < _MIN_LEAD_WORDS:
        return None
    return first.rstrip()


def _discard(table: dict[_K, list[_V]], key: _K, value: _V) -> None:
    held = table[key]
    held.remove(value)
    if not held:
        del table[key]


def _is_significant(unit: str) -> bool:
    """A unit that may start a run: two words at the least, not a bare brace or blank line."""
    return len(unit) >= 8 and len(unit.split(None, 2)) >= 2
