"""An independent check of the repeat rule: no stretch of 32+ characters holding 4+ distinct words
appears twice in a text. Brute force over a suffix array's neighbours, so it misses nothing.

Words are runs of non-space characters (`str.split`); `IDENTIFIER_PARTS` counts runs of word
characters instead, a stricter reading in which `numpy.linalg.svd` is three words. A library for
the tests and context_bench.py; checking one context takes milliseconds."""

from __future__ import annotations

import re

import numpy as np
import pydivsufsort

MIN_CHARS = 32
MIN_WORDS = 4
WORDS = re.compile(r"\S+")
IDENTIFIER_PARTS = re.compile(r"\w+")


def repeated_stretches(text: str, *, word: re.Pattern[str] = WORDS) -> list[str]:
    """Every stretch that breaks the rule (the shortest qualifying prefix of each repeat found)."""
    if len(text) < 2 * MIN_CHARS:
        return []
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    suffixes = pydivsufsort.divsufsort(codes.astype(np.int64))
    lcp = pydivsufsort.kasai(codes.astype(np.int64), suffixes)
    found = []
    for k in np.flatnonzero(lcp >= MIN_CHARS):
        start = int(suffixes[k])
        common = text[start : start + int(lcp[k])]
        for end in range(MIN_CHARS, len(common) + 1):
            if len(set(word.findall(common[:end]))) >= MIN_WORDS:
                found.append(common[:end])
                break
    return found
