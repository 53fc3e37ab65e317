"""Passages a reader can find without counting: a text cut into lines and sentences, and the
quoted first and last words that locate a passage of an earlier text by plain search.

A passage `[§k "head"…"tail"]` is read as: in item k's text, the first place `head` occurs, up
to the end of the first `tail` after it. The writer quotes just enough words for that search to
land on the passage meant, and only words of the passage's first and last line; a last quote a
reader would meet sooner, in a longer word or in other letter case, is lengthened while that
helps.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from stream_ctx.core.memo import Memo

__all__ = ("QUOTES", "choose_quotes", "find_passage", "rough_tokens", "unit_ends")

# A unit ends after a newline, or after a sentence's last mark (and any closing quote or
# bracket) and the blanks after it, where more text follows on the same line.
_UNIT_END = re.compile(r"\n|(?<=[.!?])[\"')\]]*[ \t]+(?=\S)")
_WORD = re.compile(r"\S+")
# Roughly how cl100k and o200k split text: a word or a punctuation run, each with its leading
# space; close enough to choose between ways of writing a text, never used for a count.
_TOKENISH = re.compile(r" ?[^\W\d_]+| ?\d{1,3}| ?[^\w\s]+| ?_+|\s+")
# A quote a person can spot: this many characters, one word of three letters or digits.
MIN_QUOTE_CHARS = 6
_SPOTTABLE = re.compile(r"[^\W_]{3}")
# Quotes of more words than this stop being a glance: the passage is written out instead.
MAX_QUOTED_WORDS = 12
# A quote that holds these would end the reference early when read back.
HEAD_STOP = '"…"'
TAIL_STOP = '"]'


def unit_ends(text: str) -> list[int]:
    """Where each line or sentence of `text` ends (the last is len(text))."""
    ends = [m.end() for m in _UNIT_END.finditer(text)]
    if not ends or ends[-1] != len(text):
        ends.append(len(text))
    return ends


def rough_tokens(text: str) -> int:
    """About how many tokens `text` costs."""
    return len(_TOKENISH.findall(text))


def find_passage(source: str, head: str, tail: str) -> str | None:
    """What `[§k "head"…"tail"]` stands for in `source`, item k's text; None if not found."""
    start = source.find(head)
    if start < 0:
        return None
    end = source.find(tail, start + len(head))
    return source[start : end + len(tail)] if end >= 0 else None


def choose_quotes(source: str, passage: str) -> tuple[str, str, int] | None:
    """The fewest first and last words of `passage` whose search in `source` finds it, and where
    it is found; None when the passage starts or ends with a blank, or no quotes within its
    first and last line find it, or a letter, digit or underscore stands just before or after
    the place they find (it would start or end inside a word there)."""
    if not passage or passage[0].isspace() or passage[-1].isspace():
        return None
    first_line_end = passage.find("\n")
    first_line = passage if first_line_end < 0 else passage[:first_line_end]
    last_line = passage[passage.rfind("\n") + 1 :]
    for head in _heads(first_line):
        start = source.find(head)
        if source.startswith(passage, start):
            end = start + len(passage)
            around = source[max(start - 1, 0) : start] + source[end : end + 1]
            if any(char.isalnum() or char == "_" for char in around):
                return None  # inside a word there, where every longer head finds it too
            return _tail_for(source, passage, start, head, last_line)
    return None


QUOTES = Memo("passage_quotes", choose_quotes, 1 << 14)
"""choose_quotes memoized: a window's passages meet again at every finalize of a new item."""


def _tail_for(
    source: str, passage: str, start: int, head: str, last_line: str
) -> tuple[str, str, int] | None:
    """The shortest tail that ends the search at the passage's end, with the head found at
    `start`; rather one that a reader scanning for it meets nowhere before, not even inside a
    word or in other letter case (`process` in `processes`)."""
    end = start + len(passage)
    found_first: str | None = None
    for tail in _tails(last_line):
        if len(head) + len(tail) > len(passage):
            break
        found = source.find(tail, start + len(head))
        if found + len(tail) != end:
            continue
        if tail.casefold() not in source[start + len(head) : found].casefold():
            return head, tail, start
        found_first = found_first or tail
    return (head, found_first, start) if found_first is not None else None


def _heads(line: str) -> Iterator[str]:
    """Growing runs of `line`'s first words."""
    ends = [m.end() for m in _WORD.finditer(line)][:MAX_QUOTED_WORDS]
    for end in ends:
        head = line[:end]
        if HEAD_STOP in f'"{head}"…':  # as written, the reference would end it early
            continue
        if _is_spottable(head):
            yield head


def _tails(line: str) -> Iterator[str]:
    """Growing runs of `line`'s last words."""
    starts = [m.start() for m in _WORD.finditer(line)][::-1][:MAX_QUOTED_WORDS]
    for start in starts:
        tail = line[start:]
        if TAIL_STOP in tail:
            return
        if _is_spottable(tail):
            yield tail


def _is_spottable(quote: str) -> bool:
    return len(quote) >= MIN_QUOTE_CHARS and _SPOTTABLE.search(quote) is not None
