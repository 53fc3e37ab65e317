"""How items are written: the lean format's atoms and headers, and the fixed naive baseline.

Lean, one entry per item (entry.py writes them): a header line `§n id (kind)` with its attributes
(`name=value`) and tags (`#tag`), or `§n id ^k` and only what differs from item k (its kind
included); then the text, each repeat of whole lines or sentences written as
`[§k "first words"…"last words"]` (`[§k]` for item k's whole text), or `[§k with changes:]` and
hunks of a diff; then a newline. This module writes the ids, names, values and tags, prices each
header part, and picks the base item a header names.

The baseline is a list of segments (cache key, text) cut where the pre-tokenizer (cl100k_base's
and o200k_base's alike) always splits (segment.py), so its count is the sum of its segments'
cached counts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import msgspec

from stream_ctx.core.counting.segment import Segment, entry_cuts, segment_key
from stream_ctx.core.memo import Memo, Memos
from stream_ctx.core.text.quotes import rough_tokens
from stream_ctx.core.window.accumulator import ContextItem

__all__ = (
    "ATTRIBUTE_DIFFERENCES",
    "BASELINE_ENTRIES",
    "BASE_WINDOW",
    "HEADER_PARTS",
    "KIND",
    "LOOSE_ID",
    "NAME",
    "NAME_AFTER_BASE",
    "READING_GUIDE",
    "TAG",
    "TAG_AFTER_BASE",
    "TAG_DIFFERENCES",
    "VALUE",
    "VALUE_AFTER_BASE",
    "HeaderParts",
    "Priced",
    "atom",
    "attribute_difference",
    "best_base",
    "header_parts",
    "naive_entry",
    "parts_of",
    "reference_cost",
    "render_naive",
    "stem_of",
    "tag_difference",
)

READING_GUIDE = (
    "Retrieved context lists items. `§n id (kind)` starts item n; `name=value` and `#tag` after "
    "it are the item's attributes and tags (a list, in order). `§n id ^k` means: the same kind, "
    "attributes and tags as item k, except what is written after it (`(kind)` right after `^k` "
    "sets the kind, `name=value` sets an attribute, `-name` drops one, `#tag` appends a tag, "
    "`-#tag` drops its every copy). An id written `~rest` is item k's id up to and including its "
    "last `:`, `#` or `/`, then rest; a value written `~` alone is the item's own id up to, not "
    "including, that separator (a value kept from item k stays item k's). A bare id is words "
    "with single spaces between, up to one that starts with `(` or `^`; a bare value likewise, "
    'up to one that starts with `#` or `"` (after `^k`, also `-`) or holds `=`; a bare tag up '
    "to one that starts with `#` (after `^k`, also `-#`), as tags come last; a bare name ends at "
    'its `=` (after `^k`, it does not start with `-`), a bare kind at its `)`; `"` opens a JSON '
    "string. The item's text is the lines after its header, up to the line that starts `§` and "
    "the next item's number; the newline before that line (or the context's last one) is not "
    "part of it. In a text, `[§k]` stands for all of item k's text, and `[§k \"first "
    'words"…"last words"]` for the passage of item k\'s text from the first occurrence of the '
    "first quote to the end of the first occurrence of the last quote after the first quote's "
    'end (k may be the item being read: a passage earlier in it). Quotes stand as written, `"` '
    'and `…` too: the first ends at the first `"…"`, the last at the first `"]`. Elsewhere in '
    "a text, `[\\§` is a literal `[§`: one `\\` is dropped after a `[` that `\\`s and a `§` "
    "follow, and at the start of a line that `\\`s, a `§` and a digit begin. A text that starts "
    "`[§k with changes:]` is item k's text changed by the hunks that follow (taken literally, no "
    "references or escapes): each `@@` line starts a hunk whose lines starting with a space are "
    "kept, `-` removed and `+` added; its kept and removed lines, in order, are replaced by its "
    "kept and added lines where they first stand together as whole lines of item k's text after "
    "the previous hunk's (from the first line for the first hunk). A context that starts with "
    "`Still applies:` adds to the earlier ones: that line names the items that still apply, "
    "grouped by the context that sent them, as in `Still applies: §1-3 §5 (bundle 2), §7 (bundle "
    "3)` (`§1-3` is items 1 to 3); a next line `No longer applies: §4 §6` names those that do "
    "not; its own items are numbered after the earlier ones, which `^k` and `[§k …]` may name. "
    "Any other context replaces all earlier ones.\n"
)
"""A constant for a platform's system prompt: how a model reads a lean context."""

VALUE = re.compile(r'(?:(?!~(?!\S))[^\s"]\S*(?: [^\s#"=][^\s=]*(?!\S))*)?')
"""A value written bare (maybe empty, not a lone `~`): words, single spaces between, none after
the first that starts like a term that may follow it (`#` or a quote) or holds an `=`."""
VALUE_AFTER_BASE = re.compile(r'(?:(?!~(?!\S))[^\s"]\S*(?: [^\s#"=-][^\s=]*(?!\S))*)?')
"""A value in a header that names a base, where `-` starts a term too."""
LOOSE_ID = re.compile(r'(?:[^\s"~]\S*(?: [^\s(^]\S*)*)?')
"""An id written bare: likewise, but only a kind or a base follows it: no word after the first
starts with `(` or `^`."""
TAG = re.compile(r'(?:[^\s"]\S*(?: [^\s#]\S*)*)?')
"""A tag written bare: likewise, but only tags follow it: no word after the first starts with
`#`."""
TAG_AFTER_BASE = re.compile(r'(?:[^\s"]\S*(?: (?!-#)[^\s#]\S*)*)?')
"""A tag in a header that names a base, where `-#` starts a term too."""
NAME = re.compile(r'(?:[^\s"#=][^\s=]*)?')
"""An attribute name written bare: one word, up to its `=`, that starts like no other term."""
NAME_AFTER_BASE = re.compile(r'(?:[^\s"(#=-][^\s=]*)?')
"""A name in a header that names a base, where `-` starts a term too and `(` a kind."""
KIND = re.compile(r'(?:[^\n")][^\n)]*)?')
"""A kind written bare: everything up to its `)`."""
# An id's stem: up to its last separator ("doc:3" -> "doc:"), where chunk ids put their number.
_STEM = re.compile(r".*[:#/]", re.DOTALL)
# Shorter stems are written out: `~` would save too little to be worth reading.
_MIN_STEM_CHARS = 8
BASE_WINDOW = 16
"""Bases are looked for among this many items before: headers stay linear in the window."""
# What naming a base (` ^k`) costs at the least: ` ^` and one run of digits (reference_cost).
_MIN_REFERENCE_COST = 2


def atom(text: str, form: re.Pattern[str] = VALUE) -> str:
    """A value (or with LOOSE_ID, NAME, KIND or TAG, an id, name, kind or tag) as written:
    bare, as the baseline writes it, when `form` reads it back whole; else a JSON string."""
    if form.fullmatch(text):
        return text
    return msgspec.json.encode(text).decode()


def render_naive(items: Sequence[ContextItem], *, memos: Memos | None = None) -> list[Segment]:
    """The fixed baseline `tokens_naive` counts: each item as `[n] id (kind) name=value #tag`, a
    newline, its content and a blank line; values as given, nothing shared."""
    entry_of = (memos if memos is not None else Memos())[BASELINE_ENTRIES]
    segments: list[Segment] = []
    for number, item in enumerate(items, start=1):
        lead = f"[{number}]"
        segments.append((lead, lead))
        attributes = tuple(item.attributes.items())
        segments += entry_of(item.id, item.kind, attributes, tuple(item.tags), item.content)
    return segments


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
    rest = "".join(header) + f"\n{content}\n\n"
    texts = [rest[a:b] for a, b in pairwise([0, *entry_cuts(rest), len(rest)])]
    return tuple((segment_key(text), text) for text in texts)


BASELINE_ENTRIES = Memo("baseline_entries", naive_entry, 1 << 13)
"""naive_entry memoized: a held item's baseline entry is cut and keyed once while cached."""


def stem_of(item_id: str) -> str | None:
    """The id up to and including its last separator, if that is long enough to abbreviate."""
    found = _STEM.match(item_id)
    return found.group() if found and len(found.group()) >= _MIN_STEM_CHARS else None


def best_base(parts: Sequence[HeaderParts], n: int, memos: Memos) -> tuple[int | None, str]:
    """The item before item n whose metadata n's differs least from (the nearest on a tie), if
    naming it costs fewer tokens than writing everything out; only the last BASE_WINDOW are
    tried. Each difference is priced from its memoized halves; only the chosen one is joined."""
    tag_difference_of = memos[TAG_DIFFERENCES]
    attribute_difference_of = memos[ATTRIBUTE_DIFFERENCES]
    mine = parts[n]
    best: tuple[int | None, Sequence[Priced]] = (None, (mine.full,))
    best_cost = mine.full[1]
    for k in range(n - 1, max(n - BASE_WINDOW, 0) - 1, -1):
        base = parts[k]
        tags = tag_difference_of(mine.tags, base.tags)
        if tags is None:
            continue  # its tags can't be reached from base's
        kind = mine.kind_part if mine.kind != base.kind else _NO_PART
        attributes = attribute_difference_of(mine.stem, mine.attributes, base.attributes)
        diff_cost = kind[1] + attributes[1] + tags[1]
        if diff_cost + _MIN_REFERENCE_COST >= best_cost:
            continue  # naming any base costs at least that much: no need to price this one
        cost = reference_cost(k) + diff_cost
        if cost < best_cost:
            best, best_cost = (k, (kind, attributes, tags)), cost
            if not (kind[0] or attributes[0] or tags[0]):
                break  # the same metadata: nothing further back can cost less
    return best[0], _joined(best[1])[0]


Priced = tuple[str, int]
_NO_PART: Priced = ("", 0)


@dataclass(frozen=True, slots=True, eq=False)
class HeaderParts:
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


def parts_of(item: ContextItem, memos: Memos) -> HeaderParts:
    """The item's header parts; its id stem is passed only when a value is written `~`, so
    items of many conversations with the same metadata share parts (and priced differences)."""
    stem = stem_of(item.id)
    if stem is not None and stem[:-1] not in item.attributes.values():
        stem = None
    attributes = tuple(item.attributes.items())
    return memos[HEADER_PARTS](stem, item.kind, attributes, tuple(item.tags))


def header_parts(
    stem: str | None,
    kind: str,
    attributes: tuple[tuple[str, str], ...],
    tags: tuple[str, ...],
) -> HeaderParts:
    """Header parts of one item's metadata (`stem` is its id stem, for `~` values)."""
    kind_part = _priced(f" ({atom(kind, KIND)})")
    full = [
        kind_part,
        *(_attribute_part(stem, name, value, is_after_base=False) for name, value in attributes),
        *(_priced(f" #{atom(tag, TAG)}") for tag in tags),
    ]
    return HeaderParts(stem, kind, kind_part, attributes, tags, _joined(full))


HEADER_PARTS = Memo("header_parts", header_parts, 1 << 13)
"""header_parts memoized: one HeaderParts per metadata, so differences can be memoized by it."""


def attribute_difference(
    stem: str | None, attributes: tuple[tuple[str, str], ...], base: tuple[tuple[str, str], ...]
) -> Priced:
    """The attributes whose values differ from `base`'s, then ` -name` for each name only `base`
    has: a memo of its own, as few attribute sets meet far more often than whole metadata."""
    theirs, names = dict(base), {name for name, _ in attributes}
    changed = [
        _attribute_part(stem, name, value, is_after_base=True)
        for name, value in attributes
        if theirs.get(name) != value
    ]
    return _joined(
        changed
        + [_priced(f" -{atom(name, NAME_AFTER_BASE)}") for name, _ in base if name not in names]
    )


ATTRIBUTE_DIFFERENCES = Memo("header_attribute_differences", attribute_difference, 1 << 14)
"""attribute_difference memoized: a header prices its difference from each of its bases."""


def tag_difference(tags: tuple[str, ...], base: tuple[str, ...]) -> Priced | None:
    """` -#tag` for each of `base`'s tags that `tags` lacks, then ` #tag` for those added after
    the kept ones; None when they can't be reached that way (dropping a tag drops every copy,
    added tags go last)."""
    dropped = [tag for tag in dict.fromkeys(base) if tag not in tags]
    kept = tuple(tag for tag in base if tag not in dropped)
    if tags[: len(kept)] != kept:
        return None
    added = [_priced(f" #{atom(tag, TAG_AFTER_BASE)}") for tag in tags[len(kept) :]]
    return _joined([_priced(f" -#{atom(tag, TAG_AFTER_BASE)}") for tag in dropped] + added)


TAG_DIFFERENCES = Memo("header_tag_differences", tag_difference, 1 << 14)
"""tag_difference memoized, likewise."""


def _attribute_part(stem: str | None, name: str, value: str, *, is_after_base: bool) -> Priced:
    """` name=value`, as a header with a base (where `-` starts a term) or without writes it."""
    name_form, value_form = (NAME_AFTER_BASE, VALUE_AFTER_BASE) if is_after_base else (NAME, VALUE)
    return _priced(f" {atom(name, name_form)}={_value(stem, value, value_form)}")


def _joined(parts: Sequence[Priced]) -> Priced:
    text, cost = "", 0
    for part_text, part_cost in parts:  # a plain loop: these lists are short, and many
        text += part_text
        cost += part_cost
    return text, cost


def reference_cost(k: int) -> int:
    """The cost of ` ^{k + 1}`: the ` ^`, then the digits in runs of up to three."""
    return 1 + -(-len(str(k + 1)) // 3)


def _priced(part: str) -> Priced:
    """A header part and about how many tokens it costs: its words, numbers and punctuation
    runs, each with its leading space."""
    return part, rough_tokens(part)


def _value(stem: str | None, value: str, form: re.Pattern[str]) -> str:
    """An attribute value; `~` when it is the item's own id stem without its separator."""
    return "~" if stem is not None and value == stem[:-1] else atom(value, form)
