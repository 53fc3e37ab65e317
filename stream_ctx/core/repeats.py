"""Exact repeat finding: texts parsed left to right into literal runs and back-references.

At every position the longest stretch that also starts earlier (in an earlier text, or earlier in
the same one) is looked up in the longest-previous-factor array of a suffix array (pydivsufsort,
in C): deterministic and exact, no sampling. Such a stretch becomes a reference to its first
earlier copy when it is at least MIN_FACTOR_CHARS long and holds MIN_FACTOR_WORDS distinct words.
That leaves no stretch of 32 characters with 4 distinct words written twice in a context: its
longest extension from the same start holds at least 2 of its words (its last word may be cut,
and a `»` of the framing before it may join its first), and at least 30 of its characters come
from content (a `»` before and a `«` after it may be framing). Words are runs of non-space
characters (as `str.split` finds them); runs of word characters count as well, so
`numpy.linalg.svd` shares like three words.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pydivsufsort

MIN_FACTOR_CHARS = 30
MIN_FACTOR_WORDS = 2
# Never in UTF-8 (surrogates included): a factor can't run from one text into the next.
_SEPARATOR = b"\xff"
# Enough characters to hold a few words: checking them first spares counting a long copy's words.
_HEAD_CHARS = 64
_WORD_CHARS = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Ref:
    """`length` characters copied from text `source` at character `start`; when `source` is the
    text being read, the copy may run into the characters it produces (a periodic run)."""

    source: int
    start: int
    length: int


Piece = str | Ref


def parse_repeats(texts: Sequence[str]) -> list[list[Piece]]:
    """Each text as literal runs and references to the text before it, in the given order."""
    encoded = [text.encode("utf-8", "surrogatepass") for text in texts]
    joined = _SEPARATOR.join(encoded)
    if len(joined) < 2 * MIN_FACTOR_CHARS:
        return [[text] if text else [] for text in texts]
    lpf = _longest_previous_factor(joined)
    starts = [0]
    for raw in encoded[:-1]:
        starts.append(starts[-1] + len(raw) + 1)
    ends = [starts[n] + len(raw) for n, raw in enumerate(encoded)]
    # Where a reference may start, found once for all texts: a numpy pass over each costs more.
    candidates = np.flatnonzero(lpf >= MIN_FACTOR_CHARS)
    firsts = candidates.searchsorted(starts).tolist()
    lasts = candidates.searchsorted(ends).tolist()
    joint = _Joined(texts, encoded, starts, joined, lpf, candidates)
    return [_parse_one(joint, n, firsts[n], lasts[n]) for n in range(len(texts))]


@dataclass(frozen=True, slots=True)
class _Joined:
    """The texts, their encodings and where each starts in `joined` (their join), its longest
    previous factors, and the places where those are long enough for a reference."""

    texts: Sequence[str]
    encoded: list[bytes]
    starts: list[int]
    joined: bytes
    lpf: np.ndarray
    candidates: np.ndarray


def _longest_previous_factor(joined: bytes) -> np.ndarray:
    """lpf[i]: the length of the longest prefix of joined[i:] that also starts before i."""
    suffixes = pydivsufsort.divsufsort(joined)
    lcp = pydivsufsort.kasai(joined, suffixes)
    found: np.ndarray = pydivsufsort.longest_previous_factor(joined, suffixes, lcp)
    return found


def _parse_one(joint: _Joined, n: int, first: int, last: int) -> list[Piece]:
    """Text `n` as pieces; joint.candidates[first:last] are its places of a long enough lpf."""
    encoded, starts, joined, lpf, candidates = (
        joint.encoded,
        joint.starts,
        joint.joined,
        joint.lpf,
        joint.candidates,
    )
    raw, base = encoded[n], starts[n]
    size = len(raw)
    pieces: list[Piece] = []
    literal_from = 0
    k = first
    while k < last:
        at = int(candidates[k])
        k += 1
        pos = at - base
        if raw[pos] & 0xC0 == 0x80:
            continue  # inside a character: the factor starting at its first byte is tried too
        end = min(pos + int(lpf[at]), size)
        while end < size and raw[end] & 0xC0 == 0x80:
            end -= 1
        text = raw[pos:end].decode("utf-8", "surrogatepass")
        if len(text) < MIN_FACTOR_CHARS or not _has_words(text):
            continue
        found = joined.find(raw[pos:end], 0, base + end - 1)
        source = bisect_right(starts, found) - 1
        start = _chars(encoded[source], found - starts[source], joint.texts[source])
        if pos > literal_from:
            pieces.append(raw[literal_from:pos].decode("utf-8", "surrogatepass"))
        pieces.append(Ref(source, start, len(text)))
        literal_from = end
        k = int(candidates.searchsorted(base + end))
    if literal_from < size:
        pieces.append(raw[literal_from:].decode("utf-8", "surrogatepass"))
    return pieces


def _has_words(text: str) -> bool:
    """Whether `text` holds MIN_FACTOR_WORDS distinct words in its first _HEAD_CHARS characters
    or in all of it; the head usually tells."""
    head = text[:_HEAD_CHARS]
    for part in (head, text) if head != text else (head,):
        if len(set(part.split())) >= MIN_FACTOR_WORDS:
            return True  # `str.split` finds exactly the `\S+` runs: the common case, fast
        if len(set(_WORD_CHARS.findall(part))) >= MIN_FACTOR_WORDS:
            return True
    return False


def _chars(raw: bytes, byte_offset: int, text: str) -> int:
    """The character offset of a byte offset (a character boundary) in `raw`, the encoding of
    `text`."""
    if len(raw) == len(text):
        return byte_offset  # ASCII
    return len(raw[:byte_offset].decode("utf-8", "surrogatepass"))


def resolve(pieces: Sequence[Piece], earlier: Sequence[str]) -> str:
    """Rebuild a text from its pieces and the texts before it (the inverse of parse_repeats)."""
    text = ""
    for piece in pieces:
        if isinstance(piece, str):
            text += piece
        elif piece.source < len(earlier):
            text += earlier[piece.source][piece.start : piece.start + piece.length]
        else:
            text = _self_copy(text, piece.start, piece.length)
    return text


def _self_copy(done: str, start: int, length: int) -> str:
    """`done` extended by `length` characters copied from `start`, one at a time when the copy
    runs into what it produces."""
    if start + length <= len(done):
        return done + done[start : start + length]
    chars = list(done)
    for offset in range(length):
        chars.append(chars[start + offset])
    return "".join(chars)
