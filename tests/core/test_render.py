"""Rendering of issue 2: all three formats are lossless, read back from the context string alone.

`_parse` below knows only the documented syntax (render.py's module docstring): a header line,
a shared line whose entries end in `@<item numbers>` or `@all`, one header per item, fenced
blocks (labelled with their block id when several items use them) and repeat references. Names
and values are bare atoms or JSON strings.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from stream_ctx.core.accumulator import ContextItem
from stream_ctx.core.config import BundleConfig, ContextFormat
from stream_ctx.core.dag import StateDag, block_id
from stream_ctx.core.events import RenderOrder, RetrievedItem
from stream_ctx.core.processor import ContextProcessor
from stream_ctx.core.render import Placed, atom, fence_for, render
from stream_ctx.core.scoring import rank_key
from tests.factories import (
    DAY_MS,
    T0,
    make_context_item,
    make_finalize,
    make_item,
    make_retrieval,
    odd_text,
    retrieved_from,
)

FORMATS: tuple[ContextFormat, ...] = ("compact", "full", "token_optimized")

_BARE = re.compile(r'[^\s\[\](){}=;,#"@|`\\]+')
_NUMBER = re.compile(r"[-+0-9.eEinfa]+")
_INT = re.compile(r"-?[0-9]+")
_BID = re.compile(r"b[0-9a-f]+")
_HOLDERS = re.compile(r"all|[0-9]+(?:,[0-9]+)*")
_JSON = json.JSONDecoder()


@dataclass
class ParsedItem:
    number: int
    id: str
    kind: str
    salience: float | None = None
    created_at: int | None = None
    content: str = ""
    attributes: dict[str, str] = field(default_factory=dict)
    tags: set[str] = field(default_factory=set)


@dataclass
class ParsedContext:
    items: list[ParsedItem]
    labelled: dict[str, str]
    blocks_printed: int
    # Hoisted entries: (field, name, value) -> the item numbers holding it.
    shared: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)


class _Reader:
    """A cursor over the context with one method per syntactic element."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.pos = 0

    def at_end(self) -> bool:
        return self.pos >= len(self.s)

    def peek(self, literal: str) -> bool:
        return self.s.startswith(literal, self.pos)

    def expect(self, literal: str) -> None:
        assert self.peek(literal), f"expected {literal!r} at {self.s[self.pos : self.pos + 60]!r}"
        self.pos += len(literal)

    def regex(self, pattern: re.Pattern[str]) -> str:
        found = pattern.match(self.s, self.pos)
        assert found, f"expected {pattern.pattern} at {self.s[self.pos : self.pos + 60]!r}"
        self.pos = found.end()
        return found.group()

    def atom(self) -> str:
        if self.peek('"'):
            value, self.pos = _JSON.raw_decode(self.s, self.pos)
            assert isinstance(value, str)
            return value
        return self.regex(_BARE)

    def attribute(self) -> tuple[str, str, str]:
        if self.peek("#"):
            self.pos += 1
            return ("tags", "tag", self.atom())
        name = self.atom()
        self.expect("=")
        return ("attributes", name, self.atom())

    def shared_entry(self) -> tuple[tuple[str, str, str], str]:
        attribute = self.attribute()
        self.expect(" @")
        return attribute, self.regex(_HOLDERS)

    def fenced_block(self) -> tuple[str, str]:
        """`(label, text)` of a fenced block; the closing fence is the first fence-only line."""
        fence = self.regex(re.compile(r"`+"))
        label = self.regex(re.compile(r"[^\n]*"))
        self.expect("\n")
        end = self.s.index(f"\n{fence}\n", self.pos)
        text = self.s[self.pos : end]
        self.pos = end + len(fence) + 2
        return label, text


_SHARED_OPENERS = {
    "full": "Shared by items (@ item numbers):\n",
    "compact": "Shared: ",
    "token_optimized": "shared ",
}
_ITEM_OPENER = re.compile(r"\[[0-9]+\] ")


def _shared_section(r: _Reader, fmt: ContextFormat) -> list[tuple[tuple[str, str, str], str]]:
    """The shared attributes line(s), or nothing when the cursor is not at them."""
    if not r.peek(_SHARED_OPENERS[fmt]):
        return []
    r.expect(_SHARED_OPENERS[fmt])
    entries = []
    if fmt == "full":
        while r.peek("- "):
            r.expect("- ")
            entries.append(r.shared_entry())
            r.expect("\n")
        assert entries
        return entries
    separator = "; " if fmt == "compact" else " "
    entries.append(r.shared_entry())
    while r.peek(separator):
        r.expect(separator)
        entries.append(r.shared_entry())
    r.expect("\n")
    return entries


def _at_item(r: _Reader, fmt: ContextFormat) -> bool:
    if fmt == "full":
        return r.peek("## [")
    return _ITEM_OPENER.match(r.s, r.pos) is not None


def _parse(context: str, fmt: ContextFormat) -> ParsedContext:
    r = _Reader(context)
    if fmt != "token_optimized" and context:
        # A constant title line ("Retrieved context:"); its wording is not part of the syntax.
        title = r.regex(re.compile(r"[^\n]*\n"))
        assert not title.startswith(("[", "## [", "Shared", "`"))
    # The shared attributes sit before the items, or after them (prompt-cache friendly).
    shared = _shared_section(r, fmt)

    items: list[ParsedItem] = []
    labelled: dict[str, str] = {}
    printed = 0
    while not r.at_end() and _at_item(r, fmt):
        item = _item_header(r, fmt)
        assert item.number == len(items) + 1
        while not r.at_end():
            if r.peek("`"):
                label, text = r.fenced_block()
                printed += 1
                if label:
                    assert _BID.fullmatch(label)
                    assert label not in labelled, f"block {label} printed twice"
                    labelled[label] = text
                item.content += text
                continue
            ref = _repeat(r, fmt)
            if ref is None:
                break
            item.content += labelled[ref]
        items.append(item)
    if not shared:
        shared = _shared_section(r, fmt)
    assert r.at_end(), f"unparsed context: {r.s[r.pos : r.pos + 80]!r}"

    hoisted: dict[tuple[str, str, str], list[int]] = {}
    for attribute, holders in shared:
        assert attribute not in hoisted, f"{attribute} hoisted twice"
        numbers = (
            list(range(1, len(items) + 1))
            if holders == "all"
            else [int(n) for n in holders.split(",")]
        )
        hoisted[attribute] = numbers
        kind, name, value = attribute
        for number in numbers:
            holder = items[number - 1]
            if kind == "tags":
                holder.tags.add(value)
            else:
                assert name not in holder.attributes
                holder.attributes[name] = value
    return ParsedContext(items, labelled, printed, hoisted)


def _own_attributes(r: _Reader, item: ParsedItem, *, separator: str = " ") -> None:
    while r.peek(separator) and not r.peek("\n"):
        r.expect(separator)
        kind, name, value = r.attribute()
        if kind == "tags":
            item.tags.add(value)
        else:
            assert name not in item.attributes
            item.attributes[name] = value


def _item_header(r: _Reader, fmt: ContextFormat) -> ParsedItem:
    if fmt == "full":
        r.expect("## [")
        number = int(r.regex(_INT))
        r.expect("] ")
        ident = r.atom()
        r.expect("\nkind: ")
        kind = r.atom()
        r.expect("; salience: ")
        salience = float(r.regex(_NUMBER))
        r.expect("; priority: ")
        r.regex(_NUMBER)
        r.expect("; created_at: ")
        created_at = int(r.regex(_INT))
        r.expect("\n")
        item = ParsedItem(number, ident, kind, salience, created_at)
        if r.peek("attributes: "):
            r.expect("attributes:")
            _own_attributes(r, item)
            assert item.attributes or item.tags
            r.expect("\n")
        return item
    r.expect("[")
    number = int(r.regex(_INT))
    r.expect("] ")
    ident = r.atom()
    if fmt == "compact":
        r.expect(" (")
        kind = r.atom()
        r.expect(", salience ")
        item = ParsedItem(number, ident, kind, float(r.regex(_NUMBER)))
        r.expect(")")
    else:
        r.expect(" ")
        item = ParsedItem(number, ident, r.atom())
    _own_attributes(r, item)
    r.expect("\n")
    return item


def _repeat(r: _Reader, fmt: ContextFormat) -> str | None:
    """The block id of a repeat reference at the cursor, or None when there is none."""
    prefix, suffix = {
        "compact": ("[same as ", "]\n"),
        "full": ("(the text of block ", ", shown above, continues here)\n"),
        "token_optimized": ("=", "\n"),
    }[fmt]
    if not r.peek(prefix):
        return None
    r.expect(prefix)
    bid = r.regex(_BID)
    r.expect(suffix)
    return bid


def _assert_matches(parsed: ParsedContext, items: list[ContextItem], fmt: ContextFormat) -> None:
    assert len(parsed.items) == len(items)
    for got, want in zip(parsed.items, items, strict=True):
        assert (got.id, got.kind, got.content) == (want.id, want.kind, want.content)
        assert got.attributes == want.attributes
        assert got.tags == set(want.tags)
        if fmt != "token_optimized":
            assert got.salience == want.salience
        if fmt == "full":
            assert got.created_at == want.created_at


def _placed(items: list[ContextItem], dag: StateDag) -> list[Placed]:
    return [
        Placed(n, item, 0.5, ids)
        for n, (item, ids) in enumerate(zip(items, dag.item_blocks, strict=True), start=1)
    ]


def _context(items: list[ContextItem], fmt: ContextFormat, *, is_naive: bool = False) -> str:
    dag = StateDag.build(items)
    segments = render(
        _placed(items, dag), None if is_naive else dag, fmt=fmt, fence=fence_for(items)
    )
    return "".join(text for _, text in segments)


# Strategies --------------------------------------------------------------------------------------

_WORDS = ("rust", "go", "web-api", "a b", "", "all", "1,2", '"q"', "x=y", "#t", "@3", "k;v", "é")
_atoms = st.sampled_from(_WORDS) | odd_text(max_pieces=3)


def _prose(seed: int) -> str:
    words = ("the", "token", "cache", "rejects", "expired", "JWTs", "under", "load", "retry")
    return " ".join(
        words[(seed * 7 + n * n * 13 + n) % len(words)] + str((seed + n) % 97) for n in range(120)
    )


@st.composite
def window_items(draw: st.DrawFn, *, max_items: int = 5) -> list[ContextItem]:
    """Items whose contents overlap (slices of one text, an inserted passage) with odd text."""
    prose = st.integers(0, 999).map(_prose) | st.just("")
    base = draw(odd_text(max_pieces=20)) + draw(prose) + draw(odd_text(max_pieces=20))
    passage = draw(odd_text(max_pieces=8)) + draw(prose)[:150] + draw(odd_text(max_pieces=8))
    prefixes = st.sampled_from(["ep-", "a", "x y ", "[1]", "c:0/"]) | odd_text(max_pieces=3)
    ids = [f"{draw(prefixes)}{n}" for n in range(draw(st.integers(0, max_items)))]
    assume(len(set(ids)) == len(ids))
    items = []
    for n, item_id in enumerate(ids):
        start = draw(st.integers(0, len(base)))
        text = base[start : draw(st.integers(start, len(base)))]
        if draw(st.booleans()):
            at = draw(st.integers(0, len(text)))
            text = text[:at] + passage + text[at:]
        items.append(
            make_context_item(
                id=item_id,
                kind=draw(st.sampled_from(["chunk", "tool_result", ""]) | _atoms),
                salience=draw(st.sampled_from([0.0, 0.5, 1.0, 1e-05]) | st.floats(0, 1)),
                created_at=T0 - draw(st.integers(-DAY_MS, 90 * DAY_MS)),
                content=text,
                attributes=draw(st.dictionaries(_atoms, _atoms, max_size=3)),
                tags=draw(st.lists(_atoms, max_size=3)),
                entered=n,
            )
        )
    return items


# Tests -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=window_items())
def test_render_is_lossless_from_context_alone(
    fmt: ContextFormat, items: list[ContextItem]
) -> None:
    context = _context(items, fmt)
    parsed = _parse(context, fmt)
    _assert_matches(parsed, items, fmt)
    dag = StateDag.build(items)
    # Every block once: single-use blocks inline, multi-use blocks labelled once then referenced.
    assert parsed.blocks_printed == len(dag.blocks)
    assert set(parsed.labelled) == {b for b, uses in dag.block_uses.items() if uses > 1}
    fence = fence_for(items)
    for bid, text in parsed.labelled.items():
        assert bid == block_id(text)
        assert context.count(f"{fence}{bid}\n{text}\n{fence}\n") == 1


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=window_items())
def test_naive_render_is_lossless_from_context_alone(
    fmt: ContextFormat, items: list[ContextItem]
) -> None:
    parsed = _parse(_context(items, fmt, is_naive=True), fmt)
    _assert_matches(parsed, items, fmt)
    assert parsed.labelled == {}


@pytest.mark.parametrize("fmt", FORMATS)
def test_render_hoists_shared_attribute_with_item_numbers(fmt: ContextFormat) -> None:
    items = [
        make_context_item(id="x", content="one", attributes={"language": "rust"}, tags=["auth"]),
        make_context_item(id="y", content="two", attributes={"language": "go"}, tags=["auth"]),
        make_context_item(id="z", content="three", attributes={"language": "rust"}, tags=["auth"]),
    ]
    context = _context(items, fmt)
    assert context.count("language=rust") == 1
    assert "language=rust @1,3" in context
    assert "#auth @all" in context
    assert context.count("language=go") == 1
    _assert_matches(_parse(context, fmt), items, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_render_prints_shared_block_once_and_references_it(fmt: ContextFormat) -> None:
    passage = _prose(5)[:300]
    items = [
        make_context_item(id="a", content="Intro A. " + passage + " Outro A."),
        make_context_item(id="b", content="Intro B! " + passage + " Outro B!"),
    ]
    context = _context(items, fmt)
    parsed = _parse(context, fmt)
    _assert_matches(parsed, items, fmt)
    assert len(parsed.labelled) == 1
    assert context.count(passage) == 1


def test_render_fence_outruns_backticks_in_content() -> None:
    items = [make_context_item(content="a ``` b"), make_context_item(id="b", content="`````x")]
    assert fence_for(items) == "``````"
    assert fence_for([make_context_item(content="plain")]) == "```"
    context = _context(items, "compact")
    _assert_matches(_parse(context, "compact"), items, "compact")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rust", "rust"),
        ("web-api", "web-api"),
        ("a b", '"a b"'),
        ("", '""'),
        ("x=y", '"x=y"'),
        ("line\nbreak", '"line\\nbreak"'),
        ("@1", '"@1"'),
        ("#t", '"#t"'),
    ],
)
def test_atom_is_bare_only_when_unambiguous(text: str, expected: str) -> None:
    assert atom(text) == expected


@settings(max_examples=200, deadline=None)
@given(odd_text(max_pieces=6))
def test_atom_reads_back(text: str) -> None:
    r = _Reader(atom(text) + "\n")
    assert r.atom() == text
    assert r.peek("\n")


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=window_items(max_items=4), budget=st.none() | st.integers(50, 3000))
def test_bundle_context_reads_back_as_bundle_items(
    fmt: ContextFormat, items: list[ContextItem], budget: int | None
) -> None:
    processor = ContextProcessor(BundleConfig(format=fmt, min_salience_threshold=0.0))
    offered = [retrieved_from(i) for i in items]
    processor.apply(make_retrieval(items=offered), position=1)
    bundle = processor.apply(make_finalize(ts=T0 + 1, max_tokens=budget), position=2)
    assert bundle is not None
    parsed = _parse(bundle.context, fmt)
    assert len(parsed.items) == len(bundle.items)
    for got, want in zip(parsed.items, bundle.items, strict=True):
        assert (got.id, got.kind) == (want.id, want.kind)
        assert got.content == "".join(bundle.blocks[b] for b in want.blocks)
        assert got.attributes == want.attributes
        assert got.tags == set(want.tags)
    by_id = {i.id: i for i in items}
    for entry in bundle.items:
        assert "".join(bundle.blocks[b] for b in entry.blocks) == by_id[entry.id].content


@pytest.mark.parametrize("fmt", FORMATS)
def test_bundle_shared_attributes_are_the_ones_context_hoists(fmt: ContextFormat) -> None:
    # Two items with one common tag: hoisting "#x" costs more tokens than repeating it.
    processor = ContextProcessor(BundleConfig(format=fmt))
    items = [
        make_item(id="a", tags=["x"], content="one", created_at=T0),
        make_item(id="b", tags=["x"], content="two", created_at=T0),
    ]
    processor.apply(make_retrieval(items=items), position=1)
    bundle = processor.apply(make_finalize(ts=T0 + 1), position=2)
    assert bundle is not None
    parsed = _parse(bundle.context, fmt)
    numbers = {item.id: n for n, item in enumerate(bundle.items, start=1)}
    # The issue: context holds each shared attribute once; `shared` says which those are.
    assert {(s.field, s.name, s.value): [numbers[i] for i in s.items] for s in bundle.shared} == (
        parsed.shared
    )


_PASSAGE = _prose(1)[:300]
_plain_items = st.lists(
    st.builds(
        make_item,
        id=st.sampled_from(["a", "b", "c", "d"]),
        salience=st.sampled_from([0.3, 0.6, 0.9]),
        created_at=st.just(T0),
        content=st.sampled_from(["t", "", _PASSAGE, "intro " + _PASSAGE, _PASSAGE[:150] + "!"]),
        attributes=st.dictionaries(st.sampled_from(["lang", "os"]), st.sampled_from(["go", "rs"])),
        tags=st.lists(st.sampled_from(["x", "y"]), max_size=2),
    ),
    max_size=4,
)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=40, deadline=None)
@given(items=_plain_items)
def test_bundle_context_prints_each_bundle_block_once(
    fmt: ContextFormat, items: list[RetrievedItem]
) -> None:
    processor = ContextProcessor(BundleConfig(format=fmt))
    processor.apply(make_retrieval(items=items), position=1)
    bundle = processor.apply(make_finalize(ts=T0 + 1), position=2)
    assert bundle is not None
    parsed = _parse(bundle.context, fmt)
    uses = Counter(b for item in bundle.items for b in item.blocks)
    if not bundle.stats.deduplicated:
        # Sharing did not pay: the naive form, one fenced block per non-empty item, which the
        # bundle describes as such. Two items with the same short text then print it twice:
        # the "every block once" yields to "tokens_bundle <= tokens_naive".
        assert bundle.shared == []
        assert parsed.labelled == {}
        assert all(len(item.blocks) <= 1 for item in bundle.items)
        assert parsed.blocks_printed == sum(uses.values())
        return
    # The issue: context holds every block of every included item exactly once.
    assert set(parsed.labelled) == {b for b, n in uses.items() if n > 1}
    assert parsed.blocks_printed == len(uses)


@pytest.mark.parametrize("order", ["priority", "stable", "edges"])
@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=15, deadline=None)
@given(items=_plain_items, budget=st.none() | st.integers(30, 400))
def test_bundle_in_every_order_lists_items_by_priority_and_reads_back(
    order: RenderOrder, fmt: ContextFormat, items: list[RetrievedItem], budget: int | None
) -> None:
    processor = ContextProcessor(BundleConfig(format=fmt, order=order))
    processor.apply(make_retrieval(items=items[:2]), position=1)
    processor.apply(make_retrieval(ts=T0 + 1, items=items[2:]), position=2)
    bundle = processor.apply(make_finalize(ts=T0 + 2, max_tokens=budget), position=3)
    assert bundle is not None
    assert bundle.order == order
    keys = [rank_key(i.priority, i.salience, i.created_at, i.id) for i in bundle.items]
    assert keys == sorted(keys)
    reference = ContextProcessor(BundleConfig(format=fmt))
    reference.apply(make_retrieval(items=items[:2]), position=1)
    reference.apply(make_retrieval(ts=T0 + 1, items=items[2:]), position=2)
    by_priority = reference.apply(make_finalize(ts=T0 + 2, max_tokens=budget), position=3)
    assert by_priority is not None
    assert [i.id for i in bundle.items] == [i.id for i in by_priority.items]
    parsed = {p.id: p for p in _parse(bundle.context, fmt).items}
    assert set(parsed) == {i.id for i in bundle.items}
    for entry in bundle.items:
        got = parsed[entry.id]
        assert got.content == "".join(bundle.blocks[b] for b in entry.blocks)
        assert (got.attributes, got.tags) == (entry.attributes, set(entry.tags))
