"""TextIndex: the texts a window holds, cut into units (lines and the sentences inside them) and
indexed by them in no order, so a window's next finalize indexes only its new texts.

Each text gets a serial when added; a changed text is removed and added again under a new one.
Besides where each unit stands, the index keeps for each text the others its plan may read
beyond those: the ones that hold its first words (it may continue them) and the ones that share
at least half of its characters in units (it may be their rerun). Where each text stands in a
context is the planner's business (repeats.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count
from typing import TypeVar

from stream_ctx.core.memo import Memo, Memos
from stream_ctx.core.quotes import unit_ends

__all__ = ("MIN_DIFF_SHARE", "UNITS", "IndexedText", "TextIndex", "Units", "split_units")

# A text shares at least this much of its characters with an earlier one to be tried as a diff.
MIN_DIFF_SHARE = 0.5
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
    """One held text, its units, which of them other held texts hold too (`shared`), and the
    other texts (by serial) its plan may read besides those: `continued_in` hold its first words,
    `shares` hold at least half of its characters in units (with how many). `version` counts
    the changes to what its plan may read: a text added or removed that it may read."""

    serial: int
    text: str
    units: list[str]
    starts: list[int]
    marks: list[bool]
    lead: str | None
    occurrences: dict[str, int]
    shared: set[str] = field(default_factory=set)
    continued_in: set[int] = field(default_factory=set)
    shares: dict[int, int] = field(default_factory=dict)
    version: int = 0


class TextIndex:
    """Held texts by serial, where each unit that may start a run stands, and equal texts."""

    __slots__ = ("_serials", "_split", "equal", "places", "texts")

    def __init__(self, memos: Memos) -> None:
        self.texts: dict[int, IndexedText] = {}
        # A unit's places: (serial, unit index), in no particular order.
        self.places: dict[str, list[tuple[int, int]]] = {}
        self.equal: dict[str, list[int]] = {}
        self._serials = count()
        self._split = memos[UNITS]

    def add(self, text: str) -> IndexedText:
        """Index `text` under a new serial."""
        units, starts, marks = self._split(text)
        occurrences: dict[str, int] = {}
        for unit, mark in zip(units, marks, strict=True):
            if mark:
                occurrences[unit] = occurrences.get(unit, 0) + 1
        new = IndexedText(
            next(self._serials), text, units, starts, marks, _lead(units), occurrences
        )
        touched = self._share(new)
        touched.update(self.equal.get(text, ()))
        for other in self.texts.values():
            if new.lead is not None and new.lead in other.text:
                new.continued_in.add(other.serial)
            if other.lead is not None and other.lead in text:
                other.continued_in.add(new.serial)
                touched.add(other.serial)
        for j, unit in enumerate(units):
            if marks[j]:
                self.places.setdefault(unit, []).append((new.serial, j))
        self.equal.setdefault(text, []).append(new.serial)
        self.texts[new.serial] = new
        self._touch(touched)
        return new

    def remove(self, serial: int) -> None:
        """Forget a text and every mention of it."""
        gone = self.texts.pop(serial)
        touched: set[int] = set()
        for j, unit in enumerate(gone.units):
            if gone.marks[j]:
                _discard(self.places, unit, (serial, j))
        for unit in gone.shared:
            holders = {serial for serial, _ in self.places[unit]}
            touched |= holders
            if len(holders) == 1:
                self.texts[holders.pop()].shared.discard(unit)
        _discard(self.equal, gone.text, serial)
        touched.update(self.equal.get(gone.text, ()))
        for other in self.texts.values():
            if serial in other.continued_in or serial in other.shares:
                other.continued_in.discard(serial)
                other.shares.pop(serial, None)
                touched.add(other.serial)
        self._touch(touched)

    def _touch(self, serials: set[int]) -> None:
        for serial in serials:
            self.texts[serial].version += 1

    def _share(self, new: IndexedText) -> set[int]:
        """Record, both ways, which units the new text shares with held ones, and which held
        texts share at least half of the other's characters in units (each unit of a text
        counts its length once for every other text holding it); returns the texts sharing a
        unit with it."""
        mine: dict[int, int] = {}
        theirs: dict[int, int] = {}
        for unit, times in new.occurrences.items():
            held = self.places.get(unit)
            if held is None:
                continue
            size = len(unit)
            new.shared.add(unit)
            for serial, _ in held:
                theirs[serial] = theirs.get(serial, 0) + size
            for serial in {serial for serial, _ in held}:
                mine[serial] = mine.get(serial, 0) + times * size
                self.texts[serial].shared.add(unit)
        half = MIN_DIFF_SHARE * len(new.text)
        new.shares = {serial: chars for serial, chars in mine.items() if chars >= half}
        for serial, chars in theirs.items():
            other = self.texts[serial]
            if chars >= MIN_DIFF_SHARE * len(other.text):
                other.shares[new.serial] = chars
        return set(theirs)


def _lead(units: list[str]) -> str | None:
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
