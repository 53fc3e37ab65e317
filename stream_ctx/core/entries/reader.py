"""Read a lean context back into its items: the inverse of render_lean, from the text alone."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from stream_ctx.core.entries.render import (
    KIND,
    LOOSE_ID,
    NAME,
    NAME_AFTER_BASE,
    TAG,
    TAG_AFTER_BASE,
    VALUE,
    VALUE_AFTER_BASE,
    stem_of,
)
from stream_ctx.core.text.quotes import find_passage
from stream_ctx.core.text.rerun import HunkError, apply_hunks
from stream_ctx.errors import StreamCtxError

__all__ = ("ContextSyntaxError", "ReadItem", "Reference", "read_context", "read_references")

_LEAD = re.compile(r"§(\d+) ")
_BODY_TOKEN = re.compile(r'(?m)^\\(?=\\*§\d)|\[\\(?=\\*§)|\[§(\d+)(?: "(.*?)"…"(.*?)")?\]')
_DIFF = re.compile(r"\[§(\d+) with changes:\]\n")
_JSON = json.JSONDecoder()
_DIGITS = re.compile(r"\d+")


class ContextSyntaxError(StreamCtxError):
    """A context that is not in the lean format."""


@dataclass
class ReadItem:
    """One item as the context states it; `base` is the item its header was written against."""

    number: int
    id: str
    kind: str
    attributes: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    content: str = ""
    base: int | None = None


@dataclass(frozen=True, slots=True)
class Reference:
    """A reference as written in a context (characters `start` to `end`), the item it names, and
    the text it stands for (a diff: the whole body, and the text it makes)."""

    start: int
    end: int
    number: int
    text: str


def read_context(context: str, *, held: Sequence[ReadItem] = (), start: int = 0) -> list[ReadItem]:
    """Every item of a lean context, content rebuilt exactly, references resolved; with `held`,
    the entries a delta's history holds (numbered 1..), the entries from `start` on number after
    them and may refer to them."""
    return _read(context, held, start, None)


def read_references(
    context: str, *, held: Sequence[ReadItem] = (), start: int = 0
) -> list[Reference]:
    """Every reference of a lean context and what it stands for, in order (for a page that
    shows the context as sent)."""
    found: list[Reference] = []
    _read(context, held, start, found)
    return found


def _read(
    context: str, held: Sequence[ReadItem], start: int, found: list[Reference] | None
) -> list[ReadItem]:
    items: list[ReadItem] = list(held)
    pos = start
    while pos < len(context):
        number = len(items) + 1
        lead = _LEAD.match(context, pos)
        if lead is None or int(lead.group(1)) != number:
            raise ContextSyntaxError(f"expected item §{number} at character {pos}")
        item, pos = _header(context, lead.end(), number, items)
        end = context.find(f"\n§{number + 1} ", pos)
        end = len(context) - 1 if end < 0 else end
        if end < pos or context[end] != "\n":
            raise ContextSyntaxError(f"item §{number} does not end with a newline")
        body = _Body(context[pos:end], pos, number, found)
        item.content = body.text([it.content for it in items])
        items.append(item)
        pos = end + 1
    return items[len(held) :]


@dataclass(frozen=True, slots=True)
class _Body:
    """An entry's body, where it starts in the context, its item's number, and where to note
    its references (None: not noted)."""

    body: str
    offset: int
    number: int
    found: list[Reference] | None

    def text(self, earlier: list[str]) -> str:
        """The entry's text: literal runs, passages of earlier texts, or a diff."""
        body, number = self.body, self.number
        diff = _DIFF.match(body)
        if diff is not None:
            source = _source(diff.group(1), earlier, number, diff.group())
            try:
                made = apply_hunks(source, body[diff.end() :])
            except HunkError as exc:
                raise ContextSyntaxError(f"item §{number}: {exc}") from exc
            self._note(0, len(body), diff.group(1), made)
            return made
        text = ""
        literal_from = 0
        for m in _BODY_TOKEN.finditer(body):
            text += _literal(body[literal_from : m.start()], number)
            if m.group().startswith("[\\"):
                text += "["
            elif m.group(1) is not None:
                passage = _passage(m, earlier, text, number)
                self._note(m.start(), m.end(), m.group(1), passage)
                text += passage
            literal_from = m.end()
        return text + _literal(body[literal_from:], number)

    def _note(self, start: int, end: int, number: str, text: str) -> None:
        if self.found is not None:
            at = self.offset
            self.found.append(Reference(at + start, at + end, int(number), text))


def _passage(m: re.Match[str], earlier: list[str], text: str, number: int) -> str:
    """What `[§k]` or `[§k "head"…"tail"]` stands for (k = `number`: earlier in `text`)."""
    source = text if int(m.group(1)) == number else _source(m.group(1), earlier, number, m.group())
    if m.group(2) is None:
        if int(m.group(1)) == number:
            raise ContextSyntaxError(f"item §{number}: {m.group()} names the item being read")
        return source
    found = find_passage(source, m.group(2), m.group(3))
    if found is None:
        raise ContextSyntaxError(f"item §{number}: {m.group()} is not in item §{m.group(1)}")
    return found


def _source(k: str, earlier: list[str], number: int, reference: str) -> str:
    if not 1 <= int(k) <= len(earlier):
        raise ContextSyntaxError(f"item §{number}: {reference} names no earlier item")
    return earlier[int(k) - 1]


def _literal(part: str, number: int) -> str:
    if "[§" in part:
        raise ContextSyntaxError(f"item §{number}: an unreadable reference in {part!r}")
    return part


def _header(s: str, pos: int, number: int, items: list[ReadItem]) -> tuple[ReadItem, int]:
    """Parse `id [^k] [(kind)] terms...\n` from `pos`; returns the item and the position after
    it."""
    is_abbreviated = s.startswith("~", pos)
    item_id, pos = _atom(s, pos + is_abbreviated, LOOSE_ID)
    item = ReadItem(number, item_id, "")
    if s.startswith(" ^", pos):
        pos = _base(s, pos + 2, item, items)
    if s.startswith(" (", pos):
        item.kind, pos = _atom(s, pos + 2, KIND)
        if not s.startswith(")", pos):
            raise ContextSyntaxError(f"item §{number}: expected ')' at character {pos}")
        pos += 1
    elif item.base is None:
        raise ContextSyntaxError(f"item §{number}: neither `(kind)` nor `^k` in its header")
    has_tags = False
    own_stem: set[str] = set()
    while s.startswith(" ", pos):
        pos, is_tag = _metadata_term(s, pos + 1, item, own_stem, has_tags)
        has_tags |= is_tag
    if not s.startswith("\n", pos):
        raise ContextSyntaxError(f"item §{number}: expected a newline at character {pos}")
    if is_abbreviated:
        stem = stem_of(items[item.base - 1].id) if item.base is not None else None
        if stem is None:
            raise ContextSyntaxError(f"item §{number}: `~` id without a base that has a stem")
        item.id = stem + item.id
    stem = stem_of(item.id)
    if own_stem and stem is None:
        raise ContextSyntaxError(f"item §{number}: a `~` value but the id has no stem")
    for name in own_stem:
        item.attributes[name] = stem[:-1] if stem is not None else ""
    return item, pos + 1


def _base(s: str, pos: int, item: ReadItem, items: list[ReadItem]) -> int:
    """Take kind, attributes and tags from the base `^k` whose digits start at `pos`."""
    digits = _DIGITS.match(s, pos)
    if digits is None or not 1 <= int(digits.group()) < item.number:
        raise ContextSyntaxError(f"item §{item.number}: bad base at character {pos - 1}")
    item.base = int(digits.group())
    base = items[item.base - 1]
    item.kind, item.attributes, item.tags = base.kind, dict(base.attributes), list(base.tags)
    return digits.end()


def _metadata_term(
    s: str, pos: int, item: ReadItem, own_stem: set[str], has_tags: bool
) -> tuple[int, bool]:
    """Apply an attribute or tag term to `item`; returns the position after it and whether it
    was a tag. After a tag only tags follow; `-` starts a term only after a base."""
    is_after_base = item.base is not None
    if is_after_base and s.startswith("-#", pos):
        tag, end = _atom(s, pos + 2, TAG_AFTER_BASE)
        item.tags = [t for t in item.tags if t != tag]
        return end, True
    if s.startswith("#", pos):
        tag, end = _atom(s, pos + 1, TAG_AFTER_BASE if is_after_base else TAG)
        item.tags.append(tag)
        return end, True
    if has_tags:
        raise ContextSyntaxError(f"item §{item.number}: an attribute after a tag at {pos}")
    if is_after_base and s.startswith("-", pos):
        name, end = _atom(s, pos + 1, NAME_AFTER_BASE)
        item.attributes.pop(name, None)
        own_stem.discard(name)
        return end, False
    name, end = _atom(s, pos, NAME_AFTER_BASE if is_after_base else NAME)
    if not s.startswith("=", end):
        raise ContextSyntaxError(f"item §{item.number}: expected '=' at character {end}")
    if s.startswith("~", end + 1) and s[end + 2 : end + 3] in (" ", "\n"):
        own_stem.add(name)
        item.attributes[name] = ""
        return end + 2, False
    value, end = _atom(s, end + 1, VALUE_AFTER_BASE if is_after_base else VALUE)
    item.attributes[name] = value
    own_stem.discard(name)
    return end, False


def _atom(s: str, pos: int, bare_form: re.Pattern[str]) -> tuple[str, int]:
    """A JSON string, or the longest bare atom (maybe empty) of `bare_form`, from `pos`."""
    if s.startswith('"', pos):
        try:
            value, end = _JSON.raw_decode(s, pos)
        except ValueError as exc:
            raise ContextSyntaxError(f"expected a JSON string at character {pos}") from exc
        return str(value), end
    bare = bare_form.match(s, pos)
    assert bare is not None  # noqa: S101 - every bare form matches the empty string
    return bare.group(), bare.end()
