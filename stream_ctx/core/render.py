"""Render items as prompt text in the compact, full or token_optimized format, all lossless.

Output is a list of segments (cache key, text) joined where cl100k's pre-tokenizer always splits
(see tokenizer.py), so token counts add up exactly and are cached per block id. Content
sits in fences longer than any backtick run it contains; a block used by several items is
printed once with its id as the fence label and referenced by id where it recurs.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import msgspec

from stream_ctx.core.accumulator import ContextItem
from stream_ctx.core.config import ContextFormat
from stream_ctx.core.dag import SharedAttribute, StateDag, block_id

Segment = tuple[Hashable, str]

_PLAIN_ATOM = re.compile(r'[^\s\[\](){}=;,#"@|`\\]+')
_BACKTICK_RUN = re.compile(r"`+")
_MIN_FENCE = 3


@dataclass(frozen=True, slots=True)
class Placed:
    """An included item, where it is rendered (1-based `number`) and its priority."""

    number: int
    item: ContextItem
    priority: float
    block_ids: Sequence[str]


def fence_for(items: Sequence[ContextItem]) -> str:
    """A backtick fence longer than any backtick run in the content, so no content closes it."""
    longest = max(
        (len(run) for item in items for run in _BACKTICK_RUN.findall(item.content)), default=0
    )
    return "`" * max(_MIN_FENCE, longest + 1)


def atom(text: str) -> str:
    """A name or value as written in context: bare when unambiguous, else a JSON string."""
    if _PLAIN_ATOM.fullmatch(text):
        return text
    return msgspec.json.encode(text).decode()


def render(
    placed: Sequence[Placed],
    dag: StateDag | None,
    *,
    fmt: ContextFormat,
    fence: str,
    is_shared_last: bool = False,
) -> list[Segment]:
    """Segments of the context; with `dag=None` the naive form: no hoisting, no shared blocks.

    `is_shared_last` moves the shared attributes after the items, where their changes from one
    turn to the next do not break the prefix that a prompt cache could reuse.
    """
    segments: list[Segment] = []
    if not placed:
        return segments  # nothing retrieved: an empty context, which fits any budget
    header = _HEADERS[fmt]
    if header:
        segments.append((header, header))
    shared: list[Segment] = []
    if dag is not None and dag.shared:
        numbers = {p.item.id: p.number for p in placed}
        line = _shared_line(dag.shared, numbers, len(placed), fmt)
        shared.append((line, line))
    if not is_shared_last:
        segments += shared
    printed: set[str] = set()
    for p in placed:
        lead, rest = _item_header(p, dag, fmt)
        segments += [(lead, lead), (rest, rest)]
        if dag is None:
            content = p.item.content
            if content:
                text = f"{fence}\n{content}\n{fence}\n"
                segments.append((("fenced", fence, block_id(content)), text))
            continue
        for bid in p.block_ids:
            if dag.block_uses[bid] == 1:
                text = f"{fence}\n{dag.blocks[bid]}\n{fence}\n"
                segments.append((("fenced", fence, bid), text))
            elif bid in printed:
                ref = _REPEATS[fmt].format(bid=bid)
                segments.append((ref, ref))
            else:
                printed.add(bid)
                text = f"{fence}{bid}\n{dag.blocks[bid]}\n{fence}\n"
                segments.append((("labelled", fence, bid), text))
    if is_shared_last:
        segments += shared
    return segments


# Constant, so the first line never breaks a prompt-cache prefix.
_HEADERS: dict[ContextFormat, str] = {
    "full": "# Retrieved context\n",
    "compact": "Retrieved context:\n",
    "token_optimized": "",
}
_REPEATS: dict[ContextFormat, str] = {
    "full": "(the text of block {bid}, shown above, continues here)\n",
    "compact": "[same as {bid}]\n",
    "token_optimized": "={bid}\n",
}


def _shared_line(
    shared: Sequence[SharedAttribute], numbers: dict[str, int], total: int, fmt: ContextFormat
) -> str:
    parts = []
    for s in shared:
        held_by = sorted(numbers[i] for i in s.items)
        holders = "all" if s.count == total else ",".join(map(str, held_by))
        parts.append(f"{_attribute(s.field, s.name, s.value)} @{holders}")
    if fmt == "full":
        return "Shared by items (@ item numbers):\n" + "".join(f"- {p}\n" for p in parts)
    if fmt == "compact":
        return "Shared: " + "; ".join(parts) + "\n"
    return "shared " + " ".join(parts) + "\n"


def _attribute(field: str, name: str, value: str) -> str:
    return f"#{atom(value)}" if field == "tags" else f"{atom(name)}={atom(value)}"


def _item_header(p: Placed, dag: StateDag | None, fmt: ContextFormat) -> tuple[str, str]:
    """The header as its numbered lead ("[3]") and the rest, which starts with a space: the
    pre-tokenizer always splits between the two, so the rest's count survives renumbering."""
    item = p.item
    own = [
        _attribute("attributes", name, value)
        for name, value in item.attributes.items()
        if dag is None or not dag.is_hoisted("attributes", name, value)
    ]
    own += [
        _attribute("tags", "tag", tag)
        for tag in item.tags
        if dag is None or not dag.is_hoisted("tags", "tag", tag)
    ]
    lead = f"## [{p.number}]" if fmt == "full" else f"[{p.number}]"
    if fmt == "full":
        lines = [
            f" {atom(item.id)}\n",
            f"kind: {atom(item.kind)}; salience: {item.salience!r}; "
            f"priority: {p.priority:.4f}; created_at: {item.created_at}\n",
        ]
        if own:
            lines.append(f"attributes: {' '.join(own)}\n")
        return lead, "".join(lines)
    if fmt == "compact":
        tail = f" {' '.join(own)}" if own else ""
        return lead, f" {atom(item.id)} ({atom(item.kind)}, salience {item.salience!r}){tail}\n"
    return lead, " " + " ".join([atom(item.id), atom(item.kind), *own]) + "\n"
