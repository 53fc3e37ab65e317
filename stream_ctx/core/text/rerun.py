"""Reruns as diffs: a text written as line changes against an earlier one, in hunks anchored by
unchanged lines (no line numbers), which a reader applies by plain search.

A hunk is `@@` and then lines that start with ` ` (kept), `-` (removed) or `+` (added). Its kept
and removed lines are found, in order, at the first place after the previous hunk where they stand
together in the earlier text, and replaced by its kept and added lines.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from stream_ctx.core.memo import Memo
from stream_ctx.errors import StreamCtxError

__all__ = (
    "HUNK_LEAD",
    "RERUNS",
    "HunkError",
    "LineMatcher",
    "Rerun",
    "apply_hunks",
    "line_matcher",
    "rerun",
)

HUNK_LEAD = "@@"
# Unchanged lines around each change, tried in turn until every hunk is found where it belongs.
_CONTEXTS = (1, 2, 3)


class HunkError(StreamCtxError):
    """Hunks that do not apply to the text they were written against."""


@dataclass(frozen=True, slots=True)
class Rerun:
    """A text as hunks against an earlier one, and the runs of whole lines it keeps from it:
    (start in the earlier text, start in this one, length), in characters, in order."""

    hunks: str
    kept: tuple[tuple[int, int, int], ...]


class LineMatcher(Protocol):
    """What a rerun reads of difflib.SequenceMatcher over two texts' lines (the compiled core
    has a twin over interned line ids)."""

    def get_matching_blocks(self) -> Iterable[tuple[int, int, int]]: ...

    def get_grouped_opcodes(self, n: int) -> Iterable[list[tuple[str, int, int, int, int]]]: ...


def line_matcher(before: list[str], after: list[str]) -> LineMatcher:
    """difflib's matcher of two line lists, no line taken for junk."""
    return difflib.SequenceMatcher(None, before, after, autojunk=False)


def rerun(
    old: str, new: str, *, matcher: Callable[[list[str], list[str]], LineMatcher] = line_matcher
) -> Rerun | None:
    """`new` as hunks against `old` (lines joined by newlines), or None when no hunks with up
    to three unchanged lines around each change apply back to `new`."""
    before, after = old.split("\n"), new.split("\n")
    matched = matcher(before, after)
    for context in _CONTEXTS:
        hunks = "\n".join(_hunk_lines(matched.get_grouped_opcodes(context), before, after))
        try:
            if apply_hunks(old, hunks) == new:
                return Rerun(hunks, tuple(_kept(matched, before, after, len(old), len(new))))
        except HunkError:
            continue
    return None


RERUNS = Memo("reruns", rerun, 1 << 10)
"""rerun memoized: a window's reruns meet again whenever a text near them is planned anew."""


def _hunk_lines(
    groups: Iterable[list[tuple[str, int, int, int, int]]], before: list[str], after: list[str]
) -> Iterator[str]:
    for group in groups:
        yield HUNK_LEAD
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (" " + line for line in before[i1:i2])
                continue
            yield from ("-" + line for line in before[i1:i2])
            yield from ("+" + line for line in after[j1:j2])


def _kept(
    matcher: LineMatcher,
    before: list[str],
    after: list[str],
    old_size: int,
    new_size: int,
) -> Iterator[tuple[int, int, int]]:
    old_starts, new_starts = _line_starts(before), _line_starts(after)
    for i, j, size in matcher.get_matching_blocks():
        start, at = old_starts[i], new_starts[j]
        length = min(min(old_starts[i + size], old_size) - start, new_size - at)
        length = min(length, new_starts[j + size] - at)
        if length > 0:
            yield start, at, length


def apply_hunks(old: str, hunks: str) -> str:
    """The text `hunks` make of `old`."""
    lines = old.split("\n")
    out: list[str] = []
    cursor = 0
    for hunk in _split(hunks):
        if any(not line or line[0] not in " -+" for line in hunk):
            raise HunkError(f"a hunk line must start with ' ', '-' or '+': {hunk!r}")
        found = [line[1:] for line in hunk if line[0] != "+"]
        made = [line[1:] for line in hunk if line[0] != "-"]
        at = _find(lines, found, cursor)
        out += lines[cursor:at]
        out += made
        cursor = at + len(found)
    out += lines[cursor:]
    return "\n".join(out)


def _split(hunks: str) -> list[list[str]]:
    lines = hunks.split("\n")
    if lines[0] != HUNK_LEAD:
        raise HunkError(f"hunks start with {HUNK_LEAD!r}, got {lines[0]!r}")
    found: list[list[str]] = []
    for line in lines:
        if line == HUNK_LEAD:
            found.append([])
        else:
            found[-1].append(line)
    return found


def _find(lines: list[str], run: list[str], cursor: int) -> int:
    """The first index from `cursor` where `run` stands in `lines`."""
    if not run:
        return cursor
    first = run[0]
    for at in range(cursor, len(lines) - len(run) + 1):
        if lines[at] == first and lines[at : at + len(run)] == run:
            return at
    raise HunkError(f"hunk lines {run[:2]!r}... not found after line {cursor + 1}")


def _line_starts(lines: list[str]) -> list[int]:
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    return starts
