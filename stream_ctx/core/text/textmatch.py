"""The length of the equal run from two positions, compared in C-speed slices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ("T", "common_run")

T = TypeVar("T", str, Sequence[int])

# Slices this long are compared first, then halved: long equal runs cost a few C comparisons.
_STEP = 64


def common_run(a: T, a_pos: int, b: T, b_pos: int) -> int:
    """How many elements a[a_pos:] and b[b_pos:] share from their start."""
    limit = min(len(a) - a_pos, len(b) - b_pos)
    run, step = 0, _STEP
    while step:
        end = run + step
        if end <= limit and a[a_pos + run : a_pos + end] == b[b_pos + run : b_pos + end]:
            run = end
        else:
            step //= 2
    return run
