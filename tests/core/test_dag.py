"""StateDag: lossless, content-addressed blocks cut at every repeat; shared attributes listed."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_ctx.core.accumulator import ContextItem
from stream_ctx.core.dag import SharedAttribute, StateDag, block_id
from stream_ctx.core.repeats import plan_texts
from tests.factories import make_context_item, odd_text


def _build(items: list[ContextItem]) -> StateDag:
    return StateDag.build(items, plan_texts([item.content for item in items]))


def _items(contents: list[str]) -> list[ContextItem]:
    return [make_context_item(id=f"i{n}", content=text) for n, text in enumerate(contents)]


def _text_of(dag: StateDag, n: int) -> str:
    return "".join(dag.blocks[b] for b in dag.item_blocks[n])


def _random_prose(seed: int, chars: int) -> str:
    """Random words and separators: like prose, but no 32-character window ever repeats."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    separators = (" ", " ", " ", ". ", ", ", "; ", "\n", "\n\n", "\t", " - ")
    parts: list[str] = []
    size = 0
    while size < chars:
        word = "".join(rng.choice(letters) for _ in range(rng.randint(1, 9)))
        parts.append(word + rng.choice(separators))
        size += len(parts[-1])
    return "".join(parts)[:chars]


def _assert_well_formed(dag: StateDag, contents: list[str]) -> None:
    assert len(dag.item_blocks) == len(contents)
    for n, content in enumerate(contents):
        assert _text_of(dag, n) == content
    for bid, text in dag.blocks.items():
        assert text
        assert bid == block_id(text)
    used = [b for ids in dag.item_blocks for b in ids]
    assert set(used) == set(dag.blocks)
    assert dag.block_uses == Counter(used)


@st.composite
def overlapping_contents(draw: st.DrawFn) -> list[str]:
    """Slices of one random text at overlapping offsets, some with a common passage inserted."""
    base = draw(
        odd_text(max_pieces=80) | st.integers(0, 10**6).map(lambda s: _random_prose(s, 600))
    )
    passage = draw(
        odd_text(max_pieces=30) | st.integers(0, 10**6).map(lambda s: _random_prose(s, 150))
    )
    contents = []
    for _ in range(draw(st.integers(1, 6))):
        start = draw(st.integers(0, len(base)))
        text = base[start : draw(st.integers(start, len(base)))]
        for _ in range(draw(st.integers(0, 2))):
            at = draw(st.integers(0, len(text)))
            text = text[:at] + passage + text[at:]
        contents.append(text)
    return contents


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(overlapping_contents())
def test_dag_round_trip_is_lossless_for_overlapping_odd_text(contents: list[str]) -> None:
    _assert_well_formed(_build(_items(contents)), contents)


@settings(max_examples=100, deadline=None)
@given(st.lists(odd_text(), max_size=5))
def test_dag_round_trip_is_lossless_for_unrelated_odd_text(contents: list[str]) -> None:
    _assert_well_formed(_build(_items(contents)), contents)


def test_a_copy_from_inside_a_text_takes_the_blocks_its_source_is_cut_into() -> None:
    shared = "the shared passage that every retrieval returns in full"
    second = "and a second passage that only two of them return"
    contents = [
        f"An introduction of some length comes first. {shared} {second} Then the first one ends.",
        f"Another text starts here. {shared} And it ends otherwise.",
        f"A third text begins. {shared} {second} And it ends its own way.",
    ]
    dag = _build(_items(contents))
    _assert_well_formed(dag, contents)
    # The second item's copy cuts the first text around `shared`; the third copies `shared` and
    # `second` in one stretch from the middle of the first, and keeps that cut: both passages
    # are blocks of their own, stored once.
    first, copy, both = ([dag.blocks[b] for b in ids] for ids in dag.item_blocks)
    (passage,) = [text for text in copy if shared in text]
    assert passage in first and passage in both
    (rest,) = [text for text in first if second in text]
    assert rest in both
    assert dag.block_uses[block_id(passage)] == 3


def test_dag_empty_and_single_items() -> None:
    _assert_well_formed(_build([]), [])
    _assert_well_formed(_build(_items([""])), [""])
    _assert_well_formed(_build(_items(["\n"])), ["\n"])
    _assert_well_formed(_build(_items(["", "x", ""])), ["", "x", ""])


# Repeats are found through content-defined anchors (dag.py): a repeat of MIN_SHARED_CHARS is
# usually found, one of 250 characters of prose always (every anchor rule samples many of its
# ~35 word starts). The tests below use the sure size so that they test sharing, not luck.
SURE_REPEAT = 250


def test_dag_neighbour_chunks_share_their_overlap_block() -> None:
    text = _random_prose(1, 1000)
    contents = [text[0:500], text[250:750], text[500:1000]]
    dag = _build(_items(contents))
    _assert_well_formed(dag, contents)
    first, second, third = dag.item_blocks
    assert first[-1] == second[0]
    assert dag.blocks[first[-1]] == text[250:500]
    assert second[-1] == third[0]
    assert dag.blocks[second[-1]] == text[500:750]
    assert dag.block_uses[first[-1]] == 2
    assert dag.block_uses[second[-1]] == 2


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    size=st.integers(SURE_REPEAT + 1, 900),
    overlap=st.integers(SURE_REPEAT, 400),
)
def test_dag_neighbour_overlap_is_one_shared_block(seed: int, size: int, overlap: int) -> None:
    overlap = min(overlap, size - 1)
    text = _random_prose(seed, 2 * size)
    start = size - overlap
    contents = [text[:size], text[start : start + size]]
    dag = _build(_items(contents))
    _assert_well_formed(dag, contents)
    shared = dag.item_blocks[0][-1]
    assert shared == dag.item_blocks[1][0]
    assert dag.blocks[shared] == text[start:size]


def _shared_cover(dag: StateDag, n: int, other: int) -> list[bool]:
    """For each character of item n: is it in a block that item `other` uses too?"""
    others = set(dag.item_blocks[other])
    cover: list[bool] = []
    for bid in dag.item_blocks[n]:
        cover += [bid in others] * len(dag.blocks[bid])
    return cover


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    passage_len=st.integers(SURE_REPEAT, 500),
    heads=st.tuples(st.integers(1, 200), st.integers(1, 200)),
    tails=st.tuples(st.integers(0, 200), st.integers(0, 200)),
)
def test_dag_passage_inside_two_documents_becomes_shared(
    seed: int, passage_len: int, heads: tuple[int, int], tails: tuple[int, int]
) -> None:
    rng_text = _random_prose(seed, 2200)
    passage = rng_text[:passage_len]
    a = rng_text[600 : 600 + heads[0]] + passage + rng_text[900 : 900 + tails[0]]
    b = rng_text[1200 : 1200 + heads[1]] + passage + rng_text[1500 : 1500 + tails[1]]
    dag = _build(_items([a, b]))
    _assert_well_formed(dag, [a, b])
    cover_a, cover_b = _shared_cover(dag, 0, 1), _shared_cover(dag, 1, 0)
    assert all(cover_a[heads[0] : heads[0] + passage_len])
    assert all(cover_b[heads[1] : heads[1] + passage_len])


def test_dag_same_passage_retrieved_twice_is_one_block() -> None:
    text = _random_prose(7, 300)
    dag = _build(_items([text, text, text]))
    _assert_well_formed(dag, [text] * 3)
    assert dag.item_blocks == [[block_id(text)]] * 3
    assert dag.block_uses[block_id(text)] == 3


def test_dag_short_repeats_stay_inline() -> None:
    # Repeats shorter than the sharing threshold cost more in references than they save.
    contents = ["hello world, short", "short hello world"]
    dag = _build(_items(contents))
    _assert_well_formed(dag, contents)
    assert all(uses == 1 for uses in dag.block_uses.values())


def test_dag_block_ids_are_content_addressed_across_builds() -> None:
    prose = _random_prose(3, 1200)
    passage = prose[: SURE_REPEAT + 50]
    first = _build(
        _items(
            ["A" + prose[300:400] + "A" + passage + "C", "B" + prose[500:600] + "B" + passage + "D"]
        )
    )
    second = _build(_items([passage, "X" + prose[700:800] + "X" + passage]))
    assert first.blocks[block_id(passage)] == passage
    assert second.blocks[block_id(passage)] == passage
    assert block_id(passage) in first.item_blocks[0]
    assert block_id(passage) in second.item_blocks[1]


def test_block_id_is_stable_across_processes() -> None:
    text = "same text, same id \u2028 in every bundle\r\n"
    code = (
        "import sys; from stream_ctx.core.dag import block_id; "
        "sys.stdout.write(block_id(sys.stdin.read()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=text.encode(),
        capture_output=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PYTHONIOENCODING": "utf-8"},
    )
    assert out.stdout.decode() == block_id(text)
    assert block_id(text) != block_id(text + " ")


# Shared attributes and tags ----------------------------------------------------------------------


def _three_items() -> list[ContextItem]:
    return [
        make_context_item(
            id="x",
            content="one",
            attributes={"language": "rust", "domain": "cli"},
            tags=["auth", "db"],
        ),
        make_context_item(
            id="y", content="two", attributes={"language": "rust", "domain": "web"}, tags=["auth"]
        ),
        make_context_item(
            id="z", content="three", attributes={"language": "go", "domain": "ops"}, tags=["auth"]
        ),
    ]


def test_dag_lists_value_held_by_two_of_three_items() -> None:
    dag = _build(_three_items())
    by_key = {(s.field, s.name, s.value): s for s in dag.shared}
    rust = by_key[("attributes", "language", "rust")]
    assert (rust.count, rust.items) == (2, ["x", "y"])
    auth = by_key[("tags", "tag", "auth")]
    assert (auth.count, auth.items) == (3, ["x", "y", "z"])


def test_dag_does_not_list_values_held_by_one_item() -> None:
    dag = _build(_three_items())
    keys = {(s.field, s.name, s.value) for s in dag.shared}
    assert keys == {("attributes", "language", "rust"), ("tags", "tag", "auth")}


def test_dag_one_outlier_does_not_stop_sharing() -> None:
    items = [
        make_context_item(
            id=f"i{n}", content=str(n), attributes={"language": "go" if n == 4 else "rust"}
        )
        for n in range(5)
    ]
    dag = _build(items)
    assert dag.shared == [
        SharedAttribute(
            field="attributes",
            name="language",
            value="rust",
            count=4,
            items=["i0", "i1", "i2", "i3"],
        )
    ]


def test_dag_duplicate_tags_on_one_item_are_not_shared() -> None:
    items = [make_context_item(id="a", tags=["t", "t"]), make_context_item(id="b", tags=[])]
    assert _build(items).shared == []


def test_dag_build_is_deterministic() -> None:
    prose = _random_prose(11, 900)
    items = [
        make_context_item(
            id=f"i{n}",
            content=prose[n * 200 : n * 200 + 400],
            attributes={"a": str(n % 2), "b": "x"},
            tags=[str(n % 3), "k"],
        )
        for n in range(4)
    ]
    first, second = _build(items), _build(list(items))
    assert first == second
    assert list(first.blocks) == list(second.blocks)
    assert [s.value for s in first.shared] == [s.value for s in second.shared]


def test_dag_pieces_of_one_text_used_nowhere_else_join_into_one_block() -> None:
    # Three times one passage: a literal, then a copy of it that runs into what it produces. No
    # other item shares either piece, so the item is one block.
    passage = _random_prose(3, 300)
    contents = [passage * 3, "a short text of its own"]
    dag = _build(_items(contents))
    _assert_well_formed(dag, contents)
    assert [[dag.blocks[b] for b in ids] for ids in dag.item_blocks] == [
        [passage * 3],
        [contents[1]],
    ]


def test_dag_lists_shared_values_most_widely_held_first_then_by_field_name_and_value() -> None:
    def item(item_id: str, attributes: dict[str, str], tags: list[str]) -> ContextItem:
        return make_context_item(id=item_id, content=item_id, attributes=attributes, tags=tags)

    items = [
        item("x", {"lang": "rust", "area": "core"}, ["beta", "auth"]),
        item("y", {"lang": "rust", "area": "core"}, ["beta", "auth"]),
        item("z", {"lang": "go"}, ["auth"]),
    ]
    assert [(s.field, s.name, s.value, s.count) for s in _build(items).shared] == [
        ("tags", "tag", "auth", 3),
        ("attributes", "area", "core", 2),
        ("attributes", "lang", "rust", 2),
        ("tags", "tag", "beta", 2),
    ]


def test_dag_build_refuses_parsed_pieces_for_another_number_of_items() -> None:
    items = _items(["first text", "second text"])
    with pytest.raises(ValueError, match="shorter"):
        StateDag.build(items, plan_texts(["first text"]))
