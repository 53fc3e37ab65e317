"""Render items as prompt text: the lean lossless format, and the fixed naive baseline.

Lean, one entry per item: a header line `§n id (kind)` with its attributes (`name=value`) and
tags (`#tag`), or `§n id ^k` and only what differs from item k (its kind included); then the
text, each repeat of whole lines or sentences written as `[§k "first words"…"last words"]`
(`[§k]` for item k's whole text), or `[§k with changes:]` and hunks of a diff; then a newline.
Text is escaped only where it could be read as framing: a backslash goes after a `[` before
`§` and before a `\\*§[digits]` that starts a line. An entry depends only on the entries before
it, so in `stable` order an item that was sent before renders byte-identically in place.

Both forms are lists of segments (cache key, text) joined where the pre-tokenizer (cl100k_base's
and o200k_base's alike) always splits (see tokenizer.py), so a context's count is the sum of its
segments' cached counts.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

import msgspec

from stream_ctx.core.accumulator import ContextItem
from stream_ctx.core.plan import DIFF_LEAD, Ref, TextPlan
from stream_ctx.core.quotes import rough_tokens

__all__ = (
    "LOOSE_ID",
    "LOOSE_VALUE",
    "READING_GUIDE",
    "Priced",
    "Segment",
    "atom",
    "attribute_difference",
    "header_parts",
    "is_sharing",
    "loose_atom",
    "naive_entry",
    "render_lean",
    "render_naive",
    "stem_of",
    "tag_difference",
)

Segment = tuple[Hashable, str]

READING_GUIDE = (
    "Retrieved context lists items. `§n id (kind)` starts item n; `name=value` and `#tag`"
    " after it are the item's attributes and tags. `§n id ^k` means: the same kind, attributes"
    " and tags as item k, except what is written after it (`(kind)` sets the kind, `name=value`"
    " sets an attribute, `-name` drops one, `#tag` adds a tag, `-#tag` drops one). An id written"
    " `~rest` is item k's id up to its last `:`, `#` or `/`, then rest; a value `~` is the item's"
    " own id up to that separator. The item's text follows, up to the next `§n` line. In a text,"
    ' `[§k]` stands for all of item k\'s text, and `[§k "first words"…"last words"]` for'
    " the passage of item k's text that starts where the first quote first occurs and ends with"
    " the next occurrence of the last quote (k may be the item being read: a passage earlier in"
    " it). A text that starts `[§k with changes:]` is item k's text changed by the hunks that"
    " follow: each `@@` starts a hunk whose lines starting with a space are kept, `-` removed and"
    " `+` added; its kept and removed lines stand together in item k's text after the previous"
    " hunk's. `[\\§` is a literal `[§`; a backslash before a `§` that starts a line is not part"
    " of the text. A context that starts with `Still applies:` adds to the earlier ones: the"
    " items that line names still apply (`§a-b` is items a to b, `(bundle s)` the context that"
    " sent them), those after `No longer applies:` do not, and its own items are numbered after"
    " the earlier ones, which `^k` and `[§k …]` may name. Any other context replaces all"
    " earlier ones.\n"
)
"""A constant for a platform's system prompt: how a model reads a lean context."""

_PLAIN_ATOM = re.compile(r'[^\s\[\](){}=;,#"@|`\\^«»~-][^\s\[\](){}=;,#"@|`\\«»]*')
LOOSE_ID = re.compile(r'[^\s"~]\S*(?: [^\s(^#"~=-][^\s=]*(?!\S))*')
"""An id written bare: words, single spaces between, none after the first that starts like a
header term (`(`, `^`, `#`, `-`, a quote or `~`) or holds an `=`."""
LOOSE_VALUE = re.compile(r'[^\s"~]\S*(?: [^\s#"~=-][^\s=]*(?!\S))*')
"""A value written bare: as an id, but later words may start with `(` or `^`, since a kind or a
base is written only before the attributes."""
# An id's stem: up to its last separator ("doc:3" -> "doc:"), where chunk ids put their number.
_STEM = re.compile(r".*[:#/]", re.DOTALL)
# Shorter stems are written out: `~` would save too little to be worth reading.
_MIN_STEM_CHARS = 8
_LINE_START_LOOKALIKE = re.compile(r"(?<=\n)(?=\\*§\d)")
_AT_START_LOOKALIKE = re.compile(r"\\*§\d")
_REFERENCE_LOOKALIKE = re.compile(r"\[(?=\\*§)")
# Count-cache keys hash the segment text: 128 bits, so no two texts ever share a count. A text
# up to _KEY_CHARS long is its own key: hashing it would cost more than comparing it.
_KEY_BYTES = 16
_KEY_CHARS = 64
# Bases are looked for among this many items before: headers stay linear in the window.
_BASE_WINDOW = 16
# What naming a base (` ^k`) costs at the least: ` ^` and one run of digits (_reference_cost).
_MIN_REFERENCE_COST = 2


def atom(text: str) -> str:
    """A name, kind or tag as written in a lean header: bare when unambiguous, else a JSON
    string."""
    if _PLAIN_ATOM.fullmatch(text):
        return text
    return msgspec.json.encode(text).decode()


def loose_atom(text: str, form: re.Pattern[str] = LOOSE_ID) -> str:
    """An id or (with LOOSE_VALUE) a value: bare, as the baseline writes it, when `form` reads it
    back whole; else a JSON string."""
    if form.fullmatch(text):
        return text
    return msgspec.json.encode(text).decode()


def render_naive(items: Sequence[ContextItem]) -> list[Segment]:
    """The fixed baseline `tokens_naive` counts: each item as `[n] id (kind) name=value #tag`, a
    newline, its content and a blank line; values as given, nothing shared."""
    segments: list[Segment] = []
    for number, item in enumerate(items, start=1):
        lead = f"[{number}]"
        segments.append((lead, lead))
        attributes = tuple(item.attributes.items())
        segments += naive_entry(item.id, item.kind, attributes, tuple(item.tags), item.content)
    return segments


@lru_cache(maxsize=1 << 13)
def naive_entry(
    item_id: str,
    kind: str,
    attributes: tuple[tuple[str, str], ...],
    tags: tuple[str, ...],
    content: str,
) -> tuple[Segment, ...]:
    """An item's baseline entry after its number: it never changes while the item is held."""
    header = [f" {item_id} ({kind})"]
    header += [f" {name}={value}" for name, value in attributes]
    header += [f" #{tag}" for tag in tags]
    return tuple(_entry("", "".join(header) + f"\n{content}\n\n")[1:])


def render_lean(
    items: Sequence[ContextItem],
    plans: Sequence[TextPlan],
    *,
    sent: int = 0,
    numbers: Sequence[int] | None = None,
) -> list[Segment]:
    """The lean context of `items` in this order, their contents planned by plan_texts.

    Entries are numbered 1, 2, ... unless `numbers` gives each item's number. The first `sent`
    items are already in the reader's history (a delta bundle): they are not written, and the
    entries after them may refer to them.
    """
    numbered = range(1, len(items) + 1) if numbers is None else numbers
    parts = [_parts_of(item) for item in items]
    segments: list[Segment] = []
    for n, (_, plan) in enumerate(zip(items, plans, strict=True)):
        if n >= sent:
            header = _header(n, items, parts, numbered)
            body = _body(plan, numbered)
            segments += _entry(f"§{numbered[n]}", header + body + "\n")
    return segments


def is_sharing(items: Sequence[ContextItem], plans: Sequence[TextPlan]) -> bool:
    """Whether the lean context shares anything: a repeat, a diff or a header that names a base
    item."""
    if any(isinstance(piece, Ref) for plan in plans for piece in plan.pieces):
        return True
    parts = [_parts_of(item) for item in items]
    return any(_best_base(parts, n)[0] is not None for n in range(len(parts)))


def _entry(lead: str, rest: str) -> list[Segment]:
    """An entry as its lead (`§n`, or the baseline's `[n]`), its header line, its text up to the
    last letter or digit, and what follows that (the baseline ends in one more newline). The
    pre-tokenizer always splits at these cuts, so counts add up; the counts survive renumbering,
    and the lean entry and the baseline share the count of a text they write alike."""
    cuts = []
    header_end = rest.find("\n") + 1
    if 0 < header_end < len(rest) and not rest[header_end].isspace():
        cuts.append(header_end)  # a newline before a non-space character: FORCED_JOINT
    tail = _after_last_word(rest, cuts[-1] if cuts else 0)
    if (cuts[-1] if cuts else 0) < tail < len(rest):
        cuts.append(tail)
    segments: list[Segment] = [(lead, lead)]
    for start, end in pairwise([0, *cuts, len(rest)]):
        text = rest[start:end]
        segments.append((text if len(text) <= _KEY_CHARS else _text_key(text), text))
    return segments


def _text_key(text: str) -> bytes:
    """A long segment's count-cache key: its 128-bit hash."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=_KEY_BYTES).digest()


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


def _body(plan: TextPlan, numbers: Sequence[int]) -> str:
    if plan.diff_of is not None:
        return DIFF_LEAD.format(numbers[plan.diff_of]) + plan.hunks
    out = []
    is_line_start = True
    for piece in plan.pieces:
        if isinstance(piece, Ref):
            out.append(_reference(piece, numbers))
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
    return "".join(out)


def _reference(ref: Ref, numbers: Sequence[int]) -> str:
    """`[§k "head"…"tail"]`, or `[§k]` for item k's whole text."""
    k = numbers[ref.source]
    return f'[§{k} "{ref.head}"…"{ref.tail}"]' if ref.head else f"[§{k}]"


def _header(
    n: int, items: Sequence[ContextItem], parts: list[_HeaderParts], numbers: Sequence[int]
) -> str:
    """The header after `§n`: the id (`~rest` when it has its base's stem), then kind,
    attributes and tags in full, or as the shortest difference from a base item."""
    item = items[n]
    base, diff = _best_base(parts, n)
    if base is None:
        return f" {loose_atom(item.id)}{diff}\n"
    stem = stem_of(items[base].id)
    if stem is not None and item.id.startswith(stem):
        return f" ~{loose_atom(item.id[len(stem) :])} ^{numbers[base]}{diff}\n"
    return f" {loose_atom(item.id)} ^{numbers[base]}{diff}\n"


def stem_of(item_id: str) -> str | None:
    """The id up to and including its last separator, if that is long enough to abbreviate."""
    found = _STEM.match(item_id)
    return found.group() if found and len(found.group()) >= _MIN_STEM_CHARS else None


def _best_base(parts: list[_HeaderParts], n: int) -> tuple[int | None, str]:
    """The item before item n whose metadata n's differs least from (the nearest on a tie), if
    naming it costs fewer tokens than writing everything out; only the last _BASE_WINDOW are
    tried. Each difference is priced from its memoized halves; only the chosen one is joined."""
    mine = parts[n]
    best: tuple[int | None, Sequence[Priced]] = (None, (mine.full,))
    best_cost = mine.full[1]
    for k in range(n - 1, max(n - _BASE_WINDOW, 0) - 1, -1):
        base = parts[k]
        tags = tag_difference(mine.tags, base.tags)
        if tags is None:
            continue  # its tags can't be reached from base's
        kind = mine.kind_part if mine.kind != base.kind else _NO_PART
        attributes = attribute_difference(mine.stem, mine.attributes, base.attributes)
        diff_cost = kind[1] + attributes[1] + tags[1]
        if diff_cost + _MIN_REFERENCE_COST >= best_cost:
            continue  # naming any base costs at least that much: no need to price this one
        cost = _reference_cost(k) + diff_cost
        if cost < best_cost:
            best, best_cost = (k, (kind, attributes, tags)), cost
            if not (kind[0] or attributes[0] or tags[0]):
                break  # the same metadata: nothing further back can cost less
    return best[0], _joined(best[1])[0]


Priced = tuple[str, int]
_NO_PART: Priced = ("", 0)


@dataclass(frozen=True, slots=True, eq=False)
class _HeaderParts:
    """An item's metadata, and its header parts in full (` (kind)`, ` name=value`, ` #tag`)
    with their estimated cost: every part starts with a space, so a header costs the sum of its
    parts. Hashed by identity (header_parts makes one per metadata), so differences between two
    can be memoized."""

    stem: str | None
    kind: str
    kind_part: Priced
    attributes: tuple[tuple[str, str], ...]
    tags: tuple[str, ...]
    full: Priced


def _parts_of(item: ContextItem) -> _HeaderParts:
    """The item's header parts; its id stem is passed only when a value is written `~`, so
    items of many conversations with the same metadata share parts (and priced differences)."""
    stem = stem_of(item.id)
    if stem is not None and stem[:-1] not in item.attributes.values():
        stem = None
    return header_parts(stem, item.kind, tuple(item.attributes.items()), tuple(item.tags))


@lru_cache(maxsize=1 << 13)
def header_parts(
    stem: str | None,
    kind: str,
    attributes: tuple[tuple[str, str], ...],
    tags: tuple[str, ...],
) -> _HeaderParts:
    """Header parts of one item's metadata (`stem` is its id stem, for `~` values)."""
    kind_part = _priced(f" ({atom(kind)})")
    full = [
        kind_part,
        *(_attribute_part(stem, name, value) for name, value in attributes),
        *(_priced(f" #{atom(tag)}") for tag in tags),
    ]
    return _HeaderParts(stem, kind, kind_part, attributes, tags, _joined(full))


@lru_cache(maxsize=1 << 14)
def attribute_difference(
    stem: str | None, attributes: tuple[tuple[str, str], ...], base: tuple[tuple[str, str], ...]
) -> Priced:
    """The attributes whose values differ from `base`'s, then ` -name` for each name only `base`
    has: a memo of its own, as few attribute sets meet far more often than whole metadata."""
    theirs, names = dict(base), {name for name, _ in attributes}
    changed = [
        _attribute_part(stem, name, value)
        for name, value in attributes
        if theirs.get(name) != value
    ]
    return _joined(changed + [_priced(f" -{atom(name)}") for name, _ in base if name not in names])


@lru_cache(maxsize=1 << 14)
def tag_difference(tags: tuple[str, ...], base: tuple[str, ...]) -> Priced | None:
    """` -#tag` for each of `base`'s tags that `tags` lacks, then ` #tag` for those added after
    the kept ones; None when they can't be reached that way (dropping a tag drops every copy,
    added tags go last)."""
    dropped = [tag for tag in dict.fromkeys(base) if tag not in tags]
    kept = tuple(tag for tag in base if tag not in dropped)
    if tags[: len(kept)] != kept:
        return None
    added = [_priced(f" #{atom(tag)}") for tag in tags[len(kept) :]]
    return _joined([_priced(f" -#{atom(tag)}") for tag in dropped] + added)


def _attribute_part(stem: str | None, name: str, value: str) -> Priced:
    return _priced(f" {atom(name)}={_value(stem, value)}")


def _joined(parts: Sequence[Priced]) -> Priced:
    text, cost = "", 0
    for part_text, part_cost in parts:  # a plain loop: these lists are short, and many
        text += part_text
        cost += part_cost
    return text, cost


def _reference_cost(k: int) -> int:
    """The cost of ` ^{k + 1}`: the ` ^`, then the digits in runs of up to three."""
    return 1 + -(-len(str(k + 1)) // 3)


@lru_cache(maxsize=1 << 13)
def _priced(part: str) -> Priced:
    """A header part and about how many tokens it costs: its words, numbers and punctuation
    runs, each with its leading space."""
    return part, rough_tokens(part)


def _value(stem: str | None, value: str) -> str:
    """An attribute value; `~` when it is the item's own id stem without its separator."""
    return "~" if stem is not None and value == stem[:-1] else loose_atom(value, LOOSE_VALUE)
