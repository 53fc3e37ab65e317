"""The lean format: lossless from the context alone, every repeat of whole lines shared,
prefix-stable, escaped only where content looks like framing; and the fixed naive baseline."""

from __future__ import annotations

import random
import re
import uuid
from collections import Counter

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.counting.tokenizer import get_tokenizer
from stream_ctx.core.entries.entry import Numbering, lean_template, render_lean
from stream_ctx.core.entries.reader import ReadItem, read_context, read_references
from stream_ctx.core.entries.render import (
    KIND,
    LOOSE_ID,
    NAME,
    NAME_AFTER_BASE,
    READING_GUIDE,
    TAG,
    TAG_AFTER_BASE,
    VALUE,
    VALUE_AFTER_BASE,
    atom,
    parts_of,
    render_naive,
)
from stream_ctx.core.memo import Memos
from stream_ctx.core.text.plan import Ref, TextPlan
from stream_ctx.core.text.quotes import choose_quotes
from stream_ctx.core.text.repeats import is_worth, plan_texts
from stream_ctx.core.window.accumulator import ContextItem
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.window.scoring import rank_key
from stream_ctx.core.wire.events import RenderOrder, RetrievedItem
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

ORDERS: tuple[RenderOrder, ...] = ("priority", "stable", "edges")


def _lean(items: list[ContextItem]) -> str:
    plans = plan_texts([item.content for item in items])
    return "".join(text for _, text in render_lean(items, plans))


def _naive(items: list[ContextItem]) -> str:
    return "".join(text for _, text in render_naive(items))


def _assert_reads_back(read: list[ReadItem], items: list[ContextItem]) -> None:
    assert [r.number for r in read] == list(range(1, len(items) + 1))
    for got, want in zip(read, items, strict=True):
        assert (got.id, got.kind, got.content) == (want.id, want.kind, want.content)
        assert got.attributes == want.attributes
        assert got.tags == want.tags


# Strategies --------------------------------------------------------------------------------------

_WORDS = ("rust", "go", "web-api", "a b", "", "all", "1,2", '"q"', "x=y", "#t", "^2", "-x", "é")
_atoms = st.sampled_from(_WORDS) | odd_text(max_pieces=3)
_VOCABULARY = (
    "the token cache rejects expired JWTs under load retry when a key rotates clients must refresh"
).split()


def _prose(seed: int, words: int = 120) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_VOCABULARY) + str(rng.randrange(97)) for _ in range(words))


def _lines(seed: int, count: int) -> list[str]:
    """Lines of eight to twelve random words, each with its newline."""
    rng = random.Random(seed)
    return [_prose(rng.randrange(10**9), rng.randint(8, 12)) + "\n" for _ in range(count)]


@st.composite
def window_items(draw: st.DrawFn, *, max_items: int = 5) -> list[ContextItem]:
    """Items whose contents overlap (slices of one text, an inserted passage), in odd text, with
    metadata drawn from look-alikes of the framing."""
    prose = st.integers(0, 999).map(_prose) | st.just("")
    base = draw(odd_text(max_pieces=20)) + draw(prose) + draw(odd_text(max_pieces=20))
    passage = draw(odd_text(max_pieces=8)) + draw(prose)[:150] + draw(odd_text(max_pieces=8))
    prefixes = st.sampled_from(["ep-", "a", "x y ", "[1]", "c:0/", "^", "-"]) | odd_text(
        max_pieces=3
    )
    ids = [f"{draw(prefixes)}{n}" for n in range(draw(st.integers(0, max_items)))]
    assume(len(set(ids)) == len(ids))
    shared_attributes = draw(st.dictionaries(_atoms, _atoms, max_size=3))
    items = []
    for n, item_id in enumerate(ids):
        start = draw(st.integers(0, len(base)))
        text = base[start : draw(st.integers(start, len(base)))]
        if draw(st.booleans()):
            at = draw(st.integers(0, len(text)))
            text = text[:at] + passage + text[at:]
        attributes = draw(st.dictionaries(_atoms, _atoms, max_size=3))
        if draw(st.booleans()):
            attributes = shared_attributes | attributes
        if draw(st.booleans()):
            attributes["source"] = item_id.rpartition(draw(st.sampled_from(":#/")))[0]
        items.append(
            make_context_item(
                id=item_id,
                kind=draw(st.sampled_from(["chunk", "tool_result", ""]) | _atoms),
                salience=draw(st.sampled_from([0.0, 0.5, 1.0, 1e-05]) | st.floats(0, 1)),
                created_at=T0 - draw(st.integers(-DAY_MS, 90 * DAY_MS)),
                content=text,
                attributes=attributes,
                tags=draw(st.lists(_atoms, max_size=3)),
                entered=n,
            )
        )
    return items


@st.composite
def planted_repeats(draw: st.DrawFn) -> list[str]:
    """Unrelated texts with stretches of one planted into others at random offsets: inside words,
    at text starts and ends, several times, across three or more texts."""
    count = draw(st.integers(3, 6))
    texts = [_prose(draw(st.integers(0, 10_000)), draw(st.integers(0, 60))) for _ in range(count)]
    for _ in range(draw(st.integers(1, 6))):
        source = draw(st.integers(0, count - 1))
        if len(texts[source]) < 40:
            continue
        start = draw(st.integers(0, len(texts[source]) - 32))
        stretch = texts[source][start : start + draw(st.integers(32, 200))]
        for target in draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=4)):
            at = draw(st.sampled_from([0, len(texts[target])]) | st.integers(0, len(texts[target])))
            texts[target] = texts[target][:at] + stretch + texts[target][at:]
    return texts


@st.composite
def planted_lines(draw: st.DrawFn) -> list[str]:
    """Texts of lines: unrelated sources, then texts with their own lines and runs of two or
    more of a source's lines planted between them (at starts and ends, several times, runs that
    overlap across texts). No text holds a line twice, and each ends with a newline: the
    planner takes the longest earlier run, and does not try another source when that one's
    first line stands earlier in it (which quotes cannot find) or when it stops before a last
    line written without its newline."""
    seeds = draw(st.lists(st.integers(0, 10_000), min_size=6, max_size=6, unique=True))
    sources = [_lines(seed, draw(st.integers(2, 12))) for seed in seeds[:2]]
    texts = []
    for seed in seeds[2 : 2 + draw(st.integers(1, 4))]:
        blocks = [[line] for line in _lines(seed, draw(st.integers(0, 6)))]
        for _ in range(draw(st.integers(1, 4))):
            source = sources[draw(st.integers(0, len(sources) - 1))]
            start = draw(st.integers(0, len(source) - 2))
            run = source[start : start + draw(st.integers(2, 6))]
            if not set(run) & {line for block in blocks for line in block}:
                at = draw(st.sampled_from([0, len(blocks)]) | st.integers(0, len(blocks)))
                blocks.insert(at, run)
        texts.append("".join(line for block in blocks for line in block))
    return ["".join(lines) for lines in sources] + texts


def _reference_pays(line: str, texts: list[str]) -> bool:
    """Whether a reference to `line` where it first stands would save enough to be written: a
    lone line that greedy runs left out may stay literal when it would not."""
    source = next(text for text in texts if line in text)
    quotes = choose_quotes(source, line)
    return quotes is not None and is_worth(0, line, quotes[0], quotes[1])


def _written_lines(context: str) -> list[str]:
    """The lines a context writes out: its entries' texts without their references and diffs."""
    written, pos = [], 0
    for reference in read_references(context):
        written.append(context[pos : reference.start])
        pos = reference.end
    written.append(context[pos:])
    lines = "\n".join(written).split("\n")
    return [line for line in lines if line and not re.match(r"§\d+ ", line)]


# Lossless ----------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=window_items())
def test_lean_context_reads_back_every_item_exactly(items: list[ContextItem]) -> None:
    _assert_reads_back(read_context(_lean(items)), items)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=planted_lines())
def test_no_repeated_run_of_lines_survives_and_context_reads_back(texts: list[str]) -> None:
    items = [make_context_item(id=f"d{n}", content=t, entered=n) for n, t in enumerate(texts)]
    context = _lean(items)
    repeated = [line for line, uses in Counter(_written_lines(context)).items() if uses > 1]
    assert [line for line in repeated if _reference_pays(line, texts)] == []
    _assert_reads_back(read_context(context), items)


def test_a_passage_repeated_inside_one_item_refers_back_to_it() -> None:
    passage = "".join(f"clients must refresh {what} before the grace hour ends\n" for what in "ABC")
    items = [
        make_context_item(id="a", content="start\n" + passage + "middle\n" + passage + "end"),
        make_context_item(id="b", content=passage + passage),
    ]
    context = _lean(items)
    reference = '[§1 "clients"…"C before the grace hour ends"]'
    assert context.count(passage) == 1
    assert f"\nmiddle\n{reference}\nend\n" in context
    assert context.endswith(f"\n§2 b ^1\n{reference}\n{reference}\n\n")
    _assert_reads_back(read_context(context), items)


def test_neighbour_chunks_share_their_overlap_as_one_reference() -> None:
    # Cut as a chunker cuts: the first chunk at a line's end, the second between two words of
    # a line of the first, so that its first line is a part of one.
    text = "".join(_lines(7, 30))
    end = text.index("\n", 1200) + 1
    start = text.index(" ", text.rindex("\n", 0, 800)) + 1
    first, second = text[:end], text[start:]
    items = [
        make_context_item(id="doc:1", content=first),
        make_context_item(id="doc:2", content=second),
    ]
    body = _lean(items).split("\n§2 doc:2 ^1\n")[1]
    reference = re.match(r'\[§1 "([^"]+)"…"([^"]+)"\]', body)
    assert reference is not None
    assert second.startswith(reference[1]) and first[: end - 1].endswith(reference[2])
    assert body[reference.end() :] == text[end - 1 :] + "\n"
    backwards = _lean(items[::-1]).split("\n§2 doc:1 ^1\n")[1]
    assert backwards.startswith(text[: text.index("\n", start) + 1] + '[§1 "')
    assert backwards.endswith('"]\n\n')
    both = _lean([items[0], make_context_item(id="again", content=first)])
    assert both.endswith("\n§2 again ^1\n[§1]\n")
    _assert_reads_back(read_context(_lean(items)), items)
    _assert_reads_back(read_context(_lean(items[::-1])), items[::-1])


def test_short_repeats_and_repeats_of_few_words_stay_written() -> None:
    items = [
        make_context_item(id="a", content="the cache rejects tokens. " + "=" * 60),
        make_context_item(id="b", content="the cache rejects tokens! " + "=" * 60),
    ]
    context = _lean(items)
    assert "[§" not in context
    _assert_reads_back(read_context(context), items)


# Framing ----------------------------------------------------------------------------------------


def test_plain_prose_has_no_fences_or_escapes() -> None:
    items = [make_context_item(id="a", content="Plain prose, with [brackets] and a \\ backslash.")]
    assert _lean(items) == "§1 a (chunk)\nPlain prose, with [brackets] and a \\ backslash.\n"


@pytest.mark.parametrize(
    ("content", "written"),
    [
        ("x\n§2 y (chunk)\n", "x\n\\§2 y (chunk)\n"),
        ("§7 starts like a header", "\\§7 starts like a header"),
        ("x\n\\§3 already escaped", "x\n\\\\§3 already escaped"),
        ("x\n[2] y (chunk)\n and § 4", "x\n[2] y (chunk)\n and § 4"),
        ('a [§1 "b c"…"d e"] look-alike [§', 'a [\\§1 "b c"…"d e"] look-alike [\\§'),
        ("[§1]\n[\\§2] already escaped", "[\\§1]\n[\\\\§2] already escaped"),
        ("[§1 with changes:]\n@@\n-x\n+y", "[\\§1 with changes:]\n@@\n-x\n+y"),
        ("a «1:0+3» guillemet is plain text «", "a «1:0+3» guillemet is plain text «"),
    ],
)
def test_content_that_looks_like_framing_is_escaped(content: str, written: str) -> None:
    items = [make_context_item(id="a", content=content)]
    context = _lean(items)
    assert context == f"§1 a (chunk)\n{written}\n"
    _assert_reads_back(read_context(context), items)


def test_header_names_a_base_and_writes_only_what_differs() -> None:
    source = {"source": "numpy/linalg/_linalg.py", "section": "Notes"}
    items = [
        make_context_item(id="a", content="one", attributes=source, tags=["numpy", "linalg"]),
        make_context_item(id="b", content="two", attributes=source, tags=["numpy", "linalg"]),
        make_context_item(
            id="c", content="three", attributes=source | {"section": "Examples"}, tags=["numpy"]
        ),
    ]
    context = _lean(items)
    assert context.count("numpy/linalg/_linalg.py") == 1
    assert "§2 b ^1\n" in context
    assert "§3 c ^2 section=Examples -#linalg\n" in context
    _assert_reads_back(read_context(context), items)


@pytest.mark.parametrize(
    ("text", "form", "expected"),
    [
        ("web-api", TAG, "web-api"),
        ("a b", TAG, "a b"),
        ("", TAG, ""),
        ("a #b", TAG, '"a #b"'),
        ("a -#b", TAG, "a -#b"),
        ("a -#b", TAG_AFTER_BASE, '"a -#b"'),
        ('"q', TAG, '"\\"q"'),
        ("line\nbreak", TAG, '"line\\nbreak"'),
        ("x=y", VALUE, "x=y"),
        ("a b=c", VALUE, '"a b=c"'),
        ("a - b", VALUE, "a - b"),
        ("a - b", VALUE_AFTER_BASE, '"a - b"'),
        ("~", VALUE, '"~"'),
        ("~x", VALUE, "~x"),
        ("-x", NAME, "-x"),
        ("-x", NAME_AFTER_BASE, '"-x"'),
        ("x=y", NAME, '"x=y"'),
        ("my kind", KIND, "my kind"),
        ("f(x)", KIND, '"f(x)"'),
        ("a (b)", LOOSE_ID, '"a (b)"'),
        ("a -#b=c", LOOSE_ID, "a -#b=c"),
    ],
)
def test_an_atom_is_bare_unless_its_form_would_read_it_otherwise(
    text: str, form: re.Pattern[str], expected: str
) -> None:
    assert atom(text, form) == expected


def test_reading_guide_names_every_construct() -> None:
    constructs: tuple[str, ...] = (
        "§n id (kind)",
        "§n id ^k",
        "name=value",
        "-name",
        "-#tag",
        "`~rest`",
        "[§k]",
    )
    constructs += ('[§k "first words"…"last words"]', "[§k with changes:]", "@@", "[\\§")
    constructs += ("Still applies:", "No longer applies:")
    for construct in constructs:
        assert construct in READING_GUIDE


# Prefix stability --------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=window_items(max_items=6), cut=st.integers(0, 6))
def test_an_entry_depends_only_on_the_entries_before_it(items: list[ContextItem], cut: int) -> None:
    before = _lean(items[:cut])
    assert _lean(items).startswith(before)


def test_stable_order_renders_an_unchanged_item_identically_in_the_next_bundle() -> None:
    text = _prose(3, 300)
    processor = ContextProcessor(BundleConfig(order="stable", max_items=3))
    first = [
        make_item(id="doc:1", content=text[:700], salience=0.9, attributes={"source": "doc"}),
        make_item(id="doc:2", content=text[560:1260], salience=0.8, attributes={"source": "doc"}),
    ]
    processor.apply(make_retrieval(items=first), position=1)
    one = processor.apply(make_finalize(ts=T0 + 1), position=2)
    # The neighbour before doc:1 arrives, and doc:2 is retrieved again with a higher salience.
    again = [
        make_item(id="doc:0", content=text[:140] + _prose(4, 100), salience=0.7),
        make_item(id="doc:2", content=text[560:1260], salience=0.95, attributes={"source": "doc"}),
    ]
    processor.apply(make_retrieval(ts=T0 + 2, items=again), position=3)
    two = processor.apply(make_finalize(ts=T0 + 3), position=4)
    assert one is not None and two is not None
    assert two.context.startswith(one.context)
    assert two.stats.tokens_prefix_reused == one.stats.tokens_bundle


# Naive baseline ---------------------------------------------------------------------------------


def test_naive_baseline_is_the_documented_text() -> None:
    items = [
        make_context_item(id="a", kind="doc", content="x", attributes={"b": "2", "a": "1 1"}),
        make_context_item(id="b", content="y\n", tags=["t", "u"]),
    ]
    assert _naive(items) == "[1] a (doc) b=2 a=1 1\nx\n\n[2] b (chunk) #t #u\ny\n\n\n"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=window_items(max_items=4))
def test_tokens_naive_is_the_count_of_the_baseline_text(items: list[ContextItem]) -> None:
    processor = ContextProcessor(BundleConfig(min_salience_threshold=0.0, max_items=10))
    processor.apply(make_retrieval(items=[retrieved_from(i) for i in items]), position=1)
    bundle = processor.apply(make_finalize(ts=T0 + 1), position=2)
    assert bundle is not None
    by_id = {i.id: i for i in items}
    included = [by_id[entry.id] for entry in bundle.items]
    tokenizer = get_tokenizer()
    assert bundle.stats.tokens_naive == tokenizer.count(_naive(included))
    assert bundle.stats.tokens_bundle == tokenizer.count(bundle.context)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=planted_repeats(), order=st.sampled_from(ORDERS))
def test_bundle_never_costs_more_than_naive_on_prose(texts: list[str], order: RenderOrder) -> None:
    processor = ContextProcessor(BundleConfig(order=order))
    offered = [
        make_item(id=f"d{n}", content=t, attributes={"src": "x"}) for n, t in enumerate(texts)
    ]
    processor.apply(make_retrieval(items=offered), position=1)
    bundle = processor.apply(make_finalize(ts=T0 + 1), position=2)
    assert bundle is not None
    assert bundle.stats.tokens_bundle <= bundle.stats.tokens_naive


# Bundles -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("order", ORDERS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=window_items(max_items=4), budget=st.none() | st.integers(50, 3000))
def test_bundle_context_reads_back_as_bundle_items(
    order: RenderOrder, items: list[ContextItem], budget: int | None
) -> None:
    processor = ContextProcessor(BundleConfig(order=order, min_salience_threshold=0.0))
    processor.apply(make_retrieval(items=[retrieved_from(i) for i in items]), position=1)
    bundle = processor.apply(make_finalize(ts=T0 + 1, max_tokens=budget), position=2)
    assert bundle is not None
    keys = [rank_key(i.priority, i.salience, i.created_at, i.id) for i in bundle.items]
    assert keys == sorted(keys)
    read = {r.id: r for r in read_context(bundle.context)}
    assert set(read) == {entry.id for entry in bundle.items}
    by_id = {i.id: i for i in items}
    for entry in bundle.items:
        got = read[entry.id]
        assert got.content == "".join(bundle.blocks[b] for b in entry.blocks)
        assert got.content == by_id[entry.id].content
        assert (got.kind, got.attributes, got.tags) == (entry.kind, entry.attributes, entry.tags)


def test_bundle_lists_shared_attributes_with_their_holders() -> None:
    processor = ContextProcessor(BundleConfig())
    items = [
        make_item(id="a", tags=["x"], attributes={"lang": "go"}, content="one", created_at=T0),
        make_item(id="b", tags=["x"], attributes={"lang": "rs"}, content="two", created_at=T0),
    ]
    processor.apply(make_retrieval(items=items), position=1)
    bundle = processor.apply(make_finalize(ts=T0 + 1), position=2)
    assert bundle is not None
    assert [(s.field, s.value, sorted(s.items)) for s in bundle.shared] == [
        ("tags", "x", ["a", "b"])
    ]


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("priority", ["a", "b", "c", "d", "e"]),
        ("stable", ["c", "a", "e", "b", "d"]),
        ("edges", ["a", "c", "e", "d", "b"]),
    ],
)
def test_context_lists_items_in_the_order_asked_for(
    order: RenderOrder, expected: list[str]
) -> None:
    def item(item_id: str, salience: float) -> RetrievedItem:
        return make_item(id=item_id, salience=salience, content=f"text {item_id}", created_at=T0)

    processor = ContextProcessor(BundleConfig(order=order))
    processor.apply(make_retrieval(items=[item("c", 0.5), item("a", 0.9)]), position=1)
    later = [item("e", 0.3), item("b", 0.7), item("d", 0.4)]
    processor.apply(make_retrieval(ts=T0 + 1, items=later), position=2)
    bundle = processor.apply(make_finalize(ts=T0 + 2), position=3)
    assert bundle is not None
    assert [r.id for r in read_context(bundle.context)] == expected
    assert [i.id for i in bundle.items] == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize(("slack", "included"), [(-1, ["a"]), (0, ["a", "b"]), (1, ["a", "b"])])
def test_budget_at_one_below_and_one_above_the_cost_of_two_items(
    slack: int, included: list[str]
) -> None:
    items = [
        make_item(id="a", salience=0.9, content=_prose(1, 30), created_at=T0),
        make_item(id="b", salience=0.8, content=_prose(2, 30), created_at=T0),
        make_item(id="c", salience=0.7, content=_prose(3, 400), created_at=T0),
    ]
    unbounded = ContextProcessor(BundleConfig())
    unbounded.apply(make_retrieval(items=items[:2]), position=1)
    two = unbounded.apply(make_finalize(ts=T0 + 1), position=2)
    assert two is not None
    processor = ContextProcessor(BundleConfig())
    processor.apply(make_retrieval(items=items), position=1)
    budget = two.stats.tokens_bundle + slack
    bundle = processor.apply(make_finalize(ts=T0 + 1, max_tokens=budget), position=2)
    assert bundle is not None
    assert [i.id for i in bundle.items] == included
    assert bundle.stats.tokens_bundle <= budget
    assert bundle.stats.skipped_for_budget == 3 - len(included)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), orders=st.lists(st.sampled_from(ORDERS), min_size=12))
def test_every_bundle_of_a_long_conversation_counts_its_context_exactly(
    seed: int, orders: list[RenderOrder]
) -> None:
    # Per-order renders, bases and references change from turn to turn: a stale cached count
    # anywhere would show as a difference from a direct count of the context.
    text = _prose(seed, 400)
    processor = ContextProcessor(BundleConfig(max_items=4))
    tokenizer = get_tokenizer()
    for turn, order in enumerate(orders):
        start = (turn * 37 * (seed % 7 + 1)) % (len(text) - 300)
        offered = [
            make_item(id=f"doc:{start}", content=text[start : start + 300], created_at=T0),
            make_item(id=f"doc:{turn % 3}", content=text[turn % 3 * 90 :][:250], created_at=T0),
        ]
        processor.apply(make_retrieval(ts=T0 + 2 * turn, items=offered), position=2 * turn)
        bundle = processor.apply(
            make_finalize(ts=T0 + 2 * turn + 1, order=order), position=2 * turn + 1
        )
        assert bundle is not None
        assert bundle.stats.tokens_bundle == tokenizer.count(bundle.context)


def test_new_metadata_is_written_in_full_then_as_changes_to_a_base_item() -> None:
    # Fresh in every run, also in a process forked from one that ran this test (mutmut's):
    # header parts and their differences are memoized, so only metadata never seen is rendered
    # anew.
    fresh = uuid.uuid4().hex[:12]
    source = f"doc-{fresh}"
    common = {"source": source, "team": "platform services", "region": "europe-west"}
    first = {**common, "lang": fresh, "owner": "core"}
    second = {**common, "lang": "go"}
    processor = ContextProcessor(BundleConfig())
    items = [
        make_item(
            id=f"{source}:1",
            salience=0.9,
            content="first text",
            attributes=first,
            tags=["auth", "billing", "search", fresh],
        ),
        make_item(
            id=f"{source}:2",
            content="second text",
            attributes=second,
            tags=["auth", "billing", "search", f"{fresh}-2"],
        ),
    ]
    processor.apply(make_retrieval(items=items), position=1)
    bundle = processor.apply(make_finalize(), position=2)
    assert bundle is not None
    assert bundle.context == (
        f"§1 {source}:1 (chunk) source=~ team=platform services region=europe-west"
        f" lang={fresh} owner=core #auth #billing #search #{fresh}\nfirst text\n"
        f"§2 ~2 ^1 lang=go -owner -#{fresh} #{fresh}-2\nsecond text\n"
    )
    assert [(r.id, r.attributes, r.tags) for r in read_context(bundle.context)] == [
        (f"{source}:1", first, ["auth", "billing", "search", fresh]),
        (f"{source}:2", second, ["auth", "billing", "search", f"{fresh}-2"]),
    ]


def _lean_context(items: list[RetrievedItem]) -> str:
    processor = ContextProcessor(BundleConfig())
    processor.apply(make_retrieval(items=items), position=1)
    bundle = processor.apply(make_finalize(), position=2)
    assert bundle is not None
    return bundle.context


def test_a_header_names_a_base_only_when_that_costs_fewer_tokens_than_writing_it_out() -> None:
    # A tag fresh in every run (letters only, so it is priced as one word): the header parts and
    # their differences are memoized, and a warm memo would price them unchanged.
    fresh = uuid.uuid4().hex.translate(str.maketrans("0123456789", "ghijklmnop"))

    def two(dropped: str, tags: list[str]) -> list[RetrievedItem]:
        return [
            make_item(id="one", salience=0.9, content="1", attributes={dropped: "x"}, tags=tags),
            make_item(id="two", salience=0.8, content="2", attributes={"a": "1"}, tags=tags),
        ]

    # ` ^1 a=1 -b2` is estimated at 8 tokens (` ^1` costs 2): as much as ` (chunk) a=1 #...`.
    assert _lean_context(two("b2", [fresh])) == (
        f"§1 one (chunk) b2=x #{fresh}\n1\n§2 two (chunk) a=1 #{fresh}\n2\n"
    )
    # ` ^1 a=1 -b` costs 7, one less: the base is named; so it is when one more shared tag
    # makes writing it out cost 10.
    assert _lean_context(two("b", [fresh])).endswith("§2 two ^1 a=1 -b\n2\n")
    assert _lean_context(two("b2", [fresh, "u"])).endswith("§2 two ^1 a=1 -b2\n2\n")


def test_a_header_looks_past_an_earlier_item_its_tags_cannot_be_written_from() -> None:
    metadata = {"attributes": {"lang": "go", "team": "core"}}
    items = [
        make_item(id="a", salience=0.9, content="first", tags=["x", "y"], **metadata),
        make_item(id="b", salience=0.8, content="second", tags=["y", "x"], **metadata),
        make_item(id="c", salience=0.7, content="third", tags=["x", "y"], **metadata),
    ]
    assert _lean_context(items) == (
        "§1 a (chunk) lang=go team=core #x #y\nfirst\n"
        "§2 b (chunk) lang=go team=core #y #x\nsecond\n"
        "§3 c ^1\nthird\n"
    )


def test_a_lead_look_alike_right_after_a_reference_is_written_as_it_is() -> None:
    # Not at a line's start, it reads as text. (The planner ends a reference before a blank,
    # so plans are built by hand.)
    passage = " ".join(f"word{n}" for n in range(30))
    tail = "§2 looks like a lead"
    items = [
        make_context_item(id="a", content=passage),
        make_context_item(id="b", content=passage + tail),
        make_context_item(id="c", content=passage + tail),
    ]
    plans = [
        TextPlan([passage]),
        TextPlan([Ref(0, 0, len(passage)), tail]),
        TextPlan([Ref(0, 0, len(passage), "word0", "word29"), tail]),
    ]
    context = "".join(text for _, text in render_lean(items, plans))
    assert context.endswith(f'§2 b ^1\n[§1]{tail}\n§3 c ^2\n[§1 "word0"…"word29"]{tail}\n')
    assert [r.content for r in read_context(context)] == [item.content for item in items]


def test_naming_a_base_numbered_1000_or_more_costs_a_token_more() -> None:
    # ` ^1 a=1 -b` is estimated at 7 tokens, ` (chunk) a=1 #t` at 8; ` ^1000` costs one more
    # than ` ^1` (3: ` ^`, `100`, `0`), so the same header is written out after 999 others.
    def last_entries(fillers: int) -> list[str]:
        items = [
            make_context_item(id=f"f{n}", kind="filler", content=str(n), attributes={"f": str(n)})
            for n in range(fillers)
        ]
        items += [
            make_context_item(id="one", content="first", attributes={"b": "x"}, tags=["t"]),
            make_context_item(id="two", content="second", attributes={"a": "1"}, tags=["t"]),
        ]
        segments = render_lean(items, plan_texts([item.content for item in items]))
        return "".join(text for _, text in segments).split("§")[-2:]

    assert last_entries(0) == ["1 one (chunk) b=x #t\nfirst\n", "2 two ^1 a=1 -b\nsecond\n"]
    assert last_entries(999) == [
        "1000 one (chunk) b=x #t\nfirst\n",
        "1001 two (chunk) a=1 #t\nsecond\n",
    ]


def test_an_entry_is_cut_after_its_header_so_the_baseline_shares_its_texts_count() -> None:
    item = make_context_item(
        id="one", content="some content here.", attributes={"team": "platform services"}
    )
    lean = render_lean([item], plan_texts([item.content]))
    naive = render_naive([item])
    assert [text for _, text in lean] == [
        "§1",
        " one (chunk) team=platform services\n",
        "some content here",
        ".\n",
    ]
    # A value of words is written bare, as the baseline writes it: both share the header's and
    # the content's counts.
    assert set(lean) & set(naive) == {lean[1], lean[2]}


def _named(item_id: str, salience: float, **attributes: str) -> RetrievedItem:
    """An item whose content is its id."""
    return make_item(id=item_id, salience=salience, content=item_id, attributes=attributes)


def test_a_header_takes_the_cheapest_base_not_the_nearest_that_beats_writing_it_out() -> None:
    context = _lean_context(
        [
            _named("a", 0.9, lang="go", team="core", region="eu"),
            _named("b", 0.8, lang="go", team="web", region="us"),
            _named("c", 0.7, lang="go", team="core", region="eu", owner="x"),
        ]
    )
    assert context.endswith("§3 c ^1 owner=x\nc\n")


def test_an_empty_value_is_not_taken_for_the_ids_stem() -> None:
    context = _lean_context([make_item(id="document:1", content="text", attributes={"note": ""})])
    assert context == "§1 document:1 (chunk) note=\ntext\n"
    assert read_context(context)[0].attributes == {"note": ""}


def test_a_header_looks_past_an_earlier_item_that_costs_more_to_name_than_writing_it_out() -> None:
    context = _lean_context(
        [
            _named("a", 0.9, lang="go", team="core", region="eu"),
            _named("b", 0.8, owner="someone", area="billing", tier="gold"),
            _named("c", 0.7, lang="go", team="core", region="eu", owner="x"),
        ]
    )
    assert context.endswith(
        "§2 b (chunk) owner=someone area=billing tier=gold\nb\n§3 c ^1 owner=x\nc\n"
    )


def test_a_content_without_letters_or_digits_gets_no_empty_segment() -> None:
    # No letter or digit after the header: no cut after the last one, so no segment of nothing.
    item = make_context_item(id="rule", content="-- ** --\n", attributes={"kind": "hr"})
    for segments in (render_lean([item], plan_texts([item.content])), render_naive([item])):
        assert all(text for _, text in segments)
        assert len(segments) == 3  # the lead, the header line, the content and what ends it


def test_a_segment_up_to_64_characters_is_its_own_count_key_and_a_longer_one_a_digest() -> None:
    # Cache memory: a long text is held by its 16-byte hash, a short one is cheaper as itself.
    for length in (64, 65):
        content = "x" * length + "."  # cut after the last letter: the run of x, then ".\n"
        item = make_context_item(id="k", content=content)
        for segments in (render_lean([item], plan_texts([content])), render_naive([item])):
            (key,) = [key for key, text in segments if text == "x" * length]
            if length == 64:
                assert key == "x" * 64
            else:
                assert isinstance(key, bytes) and len(key) == 16


@pytest.mark.parametrize(
    ("content", "cut"),
    [
        ("a.", "a"),  # the last letter is the text's first character
        ("wait\u2026", "wait"),  # non-ASCII punctuation after it, no combining mark
        ("e\u0301a.", "e\u0301a"),  # a combining mark before the last letter, none after it
    ],
)
def test_an_entry_is_cut_just_after_its_last_letter(content: str, cut: str) -> None:
    item = make_context_item(id=uuid.uuid4().hex, content=content)
    segments = [text for _, text in render_lean([item], plan_texts([content]))]
    assert segments[2:] == [cut, content[len(cut) :] + "\n"]


def test_an_id_stem_of_exactly_eight_characters_is_abbreviated() -> None:
    first, second = (make_context_item(id=f"abcdefg:{n}", content=f"text {n}") for n in (1, 2))
    context = "".join(t for _, t in render_lean([first, second], plan_texts(["a", "b"])))
    assert "\n§2 ~2 ^1\n" in context


def test_render_lean_refuses_plans_for_another_number_of_items() -> None:
    items = [make_context_item(id=f"i{n}", content="text") for n in range(2)]
    with pytest.raises(ValueError, match="zip"):
        render_lean(items, [TextPlan(["text"])])


def test_a_header_after_a_base_quotes_what_would_read_as_a_removal() -> None:
    # After `^k`, `-` and `-#` start terms: a value `a - b` is quoted there, but tags and a
    # removed name are bare or quoted by their own forms, not a value's.
    common = {"team": "platform services", "region": "europe-west", "owner": "core"}
    items = [
        make_context_item(
            id="one", content="first", attributes=common | {"a b": "1"}, tags=["keep", "p q=r"]
        ),
        make_context_item(
            id="two",
            content="second",
            attributes=common | {"mode": "a - b"},
            tags=["keep", "a b=c"],
        ),
    ]
    context = _lean(items)
    assert context.endswith('§2 two ^1 mode="a - b" -"a b" -#p q=r #a b=c\nsecond\n')
    _assert_reads_back(read_context(context), items)


def test_an_id_after_a_base_is_bare_where_an_id_reads_back_whole() -> None:
    items = [
        make_context_item(id=item_id, content=content)
        for item_id, content in [("document:1", "a"), ("document:x y=z", "b"), ("p q=r", "c")]
    ]
    context = _lean(items)
    assert context == "§1 document:1 (chunk)\na\n§2 ~x y=z ^1\nb\n§3 p q=r ^2\nc\n"
    _assert_reads_back(read_context(context), items)


def test_render_lean_writes_each_item_under_the_number_it_is_given() -> None:
    items = [make_context_item(id=f"i{n}", content=f"text {n}") for n in range(2)]
    segments = render_lean(items, plan_texts(["text 0", "text 1"]), numbers=[5, 1000])
    assert "".join(text for _, text in segments) == "§5 i0 (chunk)\ntext 0\n§1000 i1 ^5\ntext 1\n"


def test_a_lead_look_alike_starting_a_piece_after_a_line_end_is_escaped() -> None:
    # A plan by hand, with two literal runs in a row.
    items = [make_context_item(id="a", content="x\n"), make_context_item(id="b", content="x\n§2 y")]
    context = "".join(
        text for _, text in render_lean(items, [TextPlan(["x\n"]), TextPlan(["x\n", "§2 y"])])
    )
    assert context.endswith("§2 b ^1\nx\n\\§2 y\n")
    _assert_reads_back(read_context(context), items)


def test_a_template_holds_its_numbers_as_slots_and_no_empty_text() -> None:
    items = [make_context_item(id=i, content="some words here") for i in ("a", "b")]
    memos = Memos()
    parts = [parts_of(item, memos) for item in items]
    template = lean_template(items, parts, 1, [0, 1], TextPlan([Ref(0, 0, 15)]), memos)
    assert template.segments == (("§", 1), (" b ^", 0, "\n"), ("[§", 0), "]\n")


def test_a_numbering_counts_each_number_on_its_own() -> None:
    assert Numbering({0: 7, 1: 1234}, get_tokenizer()).tokens == {0: 1, 1: 2}
