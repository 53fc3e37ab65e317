"""Lean entries with their numbers left open: a Template is an entry made once and written again
under other numbers (a context renumbered by a newcomer, or a delta's numbering) by filling them in.

Its count is the count of its texts plus its numbers': the pre-tokenizer (cl100k_base's and
o200k_base's alike) always splits between a digit and anything else, and every number stands
between a `§` or `^` and a blank, `]` or newline. An entry depends only on the entries before it,
so in `stable` order an item that was sent before renders byte-identically in place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from stream_ctx.core.counting.segment import Counted, Segment, entry_cuts, segment_key
from stream_ctx.core.counting.tokenizer import Tokenizer
from stream_ctx.core.entries.render import LOOSE_ID, HeaderParts, atom, best_base, parts_of, stem_of
from stream_ctx.core.memo import Memos
from stream_ctx.core.text.plan import DIFF_LEAD, Ref, TextPlan
from stream_ctx.core.window.accumulator import ContextItem

__all__ = (
    "Numbering",
    "Part",
    "Template",
    "is_sharing",
    "lean_template",
    "plain_plan",
    "render_lean",
)

Part = str | int
"""Text, or a slot (an int naming an entry) that the number of that entry fills."""

_DIFF_OPEN, _DIFF_CLOSE = DIFF_LEAD.split("{}")
_LINE_START_LOOKALIKE = re.compile(r"(?<=\n)(?=\\*§\d)")
_AT_START_LOOKALIKE = re.compile(r"\\*§\d")
_REFERENCE_LOOKALIKE = re.compile(r"\[(?=\\*§)")


@dataclass(slots=True, eq=False)
class Template:
    """One entry as segments of texts and slots (a segment without slots is its text), and
    whether its header names a base item. Its texts' counts are taken once, by the first
    tokenizer that asks."""

    segments: tuple[str | tuple[Part, ...], ...]
    has_base: bool
    _tokens: tuple[int, ...] | None = field(default=None, init=False)

    def texts(self, written: Mapping[int, str]) -> list[str]:
        """The entry's segments with each slot's number as `written`."""
        return [
            segment
            if isinstance(segment, str)
            else "".join(written[part] if isinstance(part, int) else part for part in segment)
            for segment in self.segments
        ]

    def counted(self, numbering: Numbering, tokenizer: Tokenizer) -> list[Counted]:
        """The entry's segments as `numbering` writes them, each with its token count."""
        written, numbers = numbering.written, numbering.tokens
        counted: list[Counted] = []
        for segment, tokens in zip(self.segments, self._text_tokens(tokenizer), strict=True):
            if isinstance(segment, str):
                counted.append((segment, tokens))
                continue
            text = ""
            for part in segment:
                if isinstance(part, str):
                    text += part
                else:
                    text += written[part]
                    tokens += numbers[part]
            counted.append((text, tokens))
        return counted

    def tokens(self, numbering: Numbering, tokenizer: Tokenizer) -> int:
        """The entry's token count as `numbering` writes it."""
        numbers = numbering.tokens
        slots = (
            part for segment in self.segments if not isinstance(segment, str) for part in segment
        )
        return sum(self._text_tokens(tokenizer)) + sum(
            numbers[part] for part in slots if isinstance(part, int)
        )

    def _text_tokens(self, tokenizer: Tokenizer) -> tuple[int, ...]:
        """Each segment's tokens without its numbers, counted (and cached) text by text."""
        if self._tokens is None:
            self._tokens = tuple(_text_tokens(segment, tokenizer) for segment in self.segments)
        return self._tokens


class Numbering:
    """Each slot's number as written, and its token count."""

    __slots__ = ("tokens", "written")

    def __init__(self, numbers: Mapping[int, int], tokenizer: Tokenizer) -> None:
        self.written = {slot: str(number) for slot, number in numbers.items()}
        count = tokenizer.count_segment
        self.tokens = {slot: count(text, text) for slot, text in self.written.items()}


def lean_template(
    items: Sequence[ContextItem],
    parts: Sequence[HeaderParts],
    n: int,
    slots: Sequence[int],
    plan: TextPlan,
    memos: Memos,
    *,
    is_plain: bool = False,
) -> Template:
    """Entry `n` of `items` (whose header parts are `parts`), its contents planned as `plan`
    with references naming slots; `slots[k]` is entry k's slot, for its number and its base's.
    A plain entry writes its metadata in full, naming no base."""
    item = items[n]
    base, diff = (None, parts[n].full[0]) if is_plain else best_base(parts, n, memos)
    header: list[Part]
    if base is None:
        header = [f" {atom(item.id, LOOSE_ID)}{diff}\n"]
    else:
        stem = stem_of(items[base].id)
        if stem is not None and item.id.startswith(stem):
            name = f"~{atom(item.id[len(stem) :], LOOSE_ID)}"
        else:
            name = atom(item.id, LOOSE_ID)
        header = [f" {name} ^", slots[base], f"{diff}\n"]
    return Template(_segments(slots[n], [*header, *_body(plan), "\n"]), base is not None)


def render_lean(
    items: Sequence[ContextItem],
    plans: Sequence[TextPlan],
    *,
    sent: int = 0,
    numbers: Sequence[int] | None = None,
    memos: Memos | None = None,
) -> list[Segment]:
    """The lean context of `items` in this order, their contents planned by plan_texts.

    Entries are numbered 1, 2, ... unless `numbers` gives each item's number. The first `sent`
    items are already in the reader's history (a delta bundle): they are not written, and the
    entries after them may refer to them.
    """
    memos = memos if memos is not None else Memos()
    numbered = range(1, len(items) + 1) if numbers is None else numbers
    written = {k: str(number) for k, number in enumerate(numbered)}
    parts = [parts_of(item, memos) for item in items]
    slots = range(len(items))
    segments: list[Segment] = []
    for n, (_, plan) in enumerate(zip(items, plans, strict=True)):
        if n >= sent:
            texts = lean_template(items, parts, n, slots, plan, memos).texts(written)
            segments += [(segment_key(text), text) for text in texts]
    return segments


def plain_plan(content: str) -> TextPlan:
    """A text written out whole: what a plain rendering writes."""
    return TextPlan([content] if content else [])


def is_sharing(templates: Sequence[Template], plans: Sequence[TextPlan]) -> bool:
    """Whether a lean context shares anything: a repeat, a diff or a header that names a base
    item."""
    if any(isinstance(piece, Ref) for plan in plans for piece in plan.pieces):
        return True
    return any(template.has_base for template in templates)


def _body(plan: TextPlan) -> list[Part]:
    """The entry's text: references and a diff's base as slots, literal runs escaped where
    they could be read as framing."""
    if plan.diff_of is not None:
        return [_DIFF_OPEN, plan.diff_of, _DIFF_CLOSE + plan.hunks]
    out: list[Part] = []
    is_line_start = True
    for piece in plan.pieces:
        if isinstance(piece, Ref):
            quoted = f' "{piece.head}"…"{piece.tail}"]' if piece.head else "]"
            out += ["[§", piece.source, quoted]
            is_line_start = False
            continue
        text = piece
        if "§" in text:  # only a `§` can start a look-alike of a lead or a reference
            text = _REFERENCE_LOOKALIKE.sub("[\\\\", text)
            text = _LINE_START_LOOKALIKE.sub("\\\\", text)
            if is_line_start and _AT_START_LOOKALIKE.match(text):
                text = "\\" + text
        out.append(text)
        is_line_start = text.endswith("\n")
    return out


def _segments(slot: int, rest: list[Part]) -> tuple[str | tuple[Part, ...], ...]:
    """The lead `§n` (n filling `slot`), then `rest` cut as entry_cuts cuts its text. Sketched
    with every number as one digit, the cuts fall where they fall for any number: a number is
    digits only, so it holds neither the header's newline nor a cut (a cut after the last digit
    is one after the slot)."""
    slots: list[tuple[int, int]] = []  # (place in the sketch, slot)
    texts: list[str] = []
    at = 0
    for part in rest:
        text = part if isinstance(part, str) else "0"
        if isinstance(part, int):
            slots.append((at, part))
        texts.append(text)
        at += len(text)
    sketch = "".join(texts)
    bounds = [0, *entry_cuts(sketch), len(sketch)]
    lead: tuple[Part, ...] = ("§", slot)
    return (lead, *(_segment(sketch, slots, a, b) for a, b in pairwise(bounds)))


def _segment(
    sketch: str, slots: list[tuple[int, int]], start: int, end: int
) -> str | tuple[Part, ...]:
    """sketch[start:end] with its slots put back; its text when it holds none."""
    parts: list[Part] = []
    written = start
    for at, slot in slots:
        if start <= at < end:
            parts += [sketch[written:at], slot]
            written = at + 1
    if not parts:
        return sketch[start:end]
    parts.append(sketch[written:end])
    return tuple(part for part in parts if part != "")


def _text_tokens(segment: str | tuple[Part, ...], tokenizer: Tokenizer) -> int:
    """The tokens of a segment's texts, each counted (and cached) on its own."""
    texts = [segment] if isinstance(segment, str) else [p for p in segment if isinstance(p, str)]
    return sum(tokenizer.count_segment(segment_key(text), text) for text in texts)
