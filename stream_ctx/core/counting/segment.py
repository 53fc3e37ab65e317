"""Segments: an entry cut where the pre-tokenizer always splits, so a context's token count is the
sum of its segments' counts, each cached under its key (see tokenizer.py)."""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Hashable

__all__ = ("Counted", "Segment", "entry_cuts", "segment_key")

Segment = tuple[Hashable, str]
"""A segment's count-cache key and its text."""
Counted = tuple[str, int]
"""A segment's text and its token count."""

# Count-cache keys hash the segment text: 128 bits, so no two texts ever share a count. A text
# up to _KEY_CHARS long is its own key: hashing it would cost more than comparing it.
_KEY_BYTES = 16
_KEY_CHARS = 64


def segment_key(text: str) -> Hashable:
    """A segment's count-cache key: the text itself, or its 128-bit hash when long."""
    if len(text) <= _KEY_CHARS:
        return text
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=_KEY_BYTES).digest()


def entry_cuts(rest: str) -> list[int]:
    """Where an entry's text after its lead (`§n`, or the baseline's `[n]`) is cut: after its
    header line, and after its last letter or digit (the baseline ends in one more newline). The
    pre-tokenizer always splits at these cuts, so counts add up; the counts survive renumbering,
    and the lean entry and the baseline share the count of a text they write alike."""
    cuts = []
    header_end = rest.find("\n") + 1
    if 0 < header_end < len(rest) and not rest[header_end].isspace():
        cuts.append(header_end)  # a newline before a non-space character: FORCED_JOINT
    tail = _after_last_word(rest, cuts[-1] if cuts else 0)
    if (cuts[-1] if cuts else 0) < tail < len(rest):
        cuts.append(tail)
    return cuts


def _after_last_word(text: str, start: int) -> int:
    """Just after the last letter or digit of text[start:] (or `start`): no pre-token runs from
    a letter or digit into the punctuation and white space after the last one (unless a
    combining mark follows, which o200k_base joins to the letters before it)."""
    for pos in range(len(text) - 1, start - 1, -1):
        if text[pos].isalpha() or text[pos].isnumeric():
            rest = text[pos + 1 :]
            if rest.isascii() or not any(unicodedata.category(c)[0] == "M" for c in rest):
                return pos + 1
            return start
    return start
