"""StateDag: lossless, content-addressed blocks cut at every repeat; shared attributes listed."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_ctx.core.assembly.dag import StateDag, block_id
from stream_ctx.core.text.repeats import plan_texts
from stream_ctx.core.window.accumulator import ContextItem
from stream_ctx.core.wire.bundle import SharedAttribute
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


def _random_lines(seed: int, count: int) -> list[str]:
    """Lines of eight to fourteen random words (of three to nine letters and digits), each with
    its newline: repeats are shared by whole lines and sentences, and no line of these repeats
    another."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    words = [
        ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(n)]
        for n in (rng.randint(8, 14) for _ in range(count))
    ]
    return [" ".join(line) + "\n" for line in words]


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
    shared = "The shared passage that every retrieval returns in full, worth a reference."
    second = "And a second passage that only two of them return, worth one of its own."
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


# A reference stands for whole lines or sentences without the blank or newline after them: a
# repeat of lines is the block of those lines up to the last one's newline.


def test_dag_neighbour_chunks_share_their_overlap_block() -> None:
    lines = _random_lines(1, 20)
    contents = ["".join(lines[0:10]), "".join(lines[5:15]), "".join(lines[10:20])]
    dag = _build(_items(contents))
    _assert_well_formed(dag, contents)
    first, second, third = dag.item_blocks
    assert first[1] == second[0]
    assert dag.blocks[first[1]] == "".join(lines[5:10])[:-1]
    assert second[2] == third[0]
    assert dag.blocks[second[2]] == "".join(lines[10:15])[:-1]
    assert dag.block_uses[first[1]] == 2
    assert dag.block_uses[second[2]] == 2


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    size=st.integers(4, 16),
    overlap=st.integers(3, 12),
    within=st.integers(0, 13),
)
def test_dag_neighbour_overlap_is_one_shared_block(
    seed: int, size: int, overlap: int, within: int
) -> None:
    # The second chunk starts at a line's start, or between two words inside the line before,
    # two words or more before its end (its first, partial line is then taken into the
    # reference, and quoted: its words are three characters or more).
    overlap = min(overlap, size - 1)
    lines = _random_lines(seed, 2 * size)
    text = "".join(lines)
    start = len("".join(lines[: size - overlap]))
    if within and size > overlap + 1:
        line = lines[size - overlap - 1]
        spaces = [n + 1 for n, c in enumerate(line) if c == " "][:-1]
        start = len("".join(lines[: size - overlap - 1])) + spaces[within % len(spaces)]
    end = len("".join(lines[:size]))
    contents = [text[:end], text[start : start + end]]
    dag = _build(_items(contents))
    _assert_well_formed(dag, contents)
    shared = dag.item_blocks[0][-2]
    assert shared == dag.item_blocks[1][0]
    assert dag.blocks[shared] == text[start : end - 1]


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
    passage_lines=st.integers(2, 8),
    heads=st.tuples(st.integers(0, 6), st.integers(0, 6)),
    tails=st.tuples(st.integers(0, 6), st.integers(0, 6)),
)
def test_dag_passage_inside_two_documents_becomes_shared(
    seed: int, passage_lines: int, heads: tuple[int, int], tails: tuple[int, int]
) -> None:
    lines = _random_lines(seed, 32)
    passage = "".join(lines[:passage_lines])
    a = "".join(lines[8 : 8 + heads[0]]) + passage + "".join(lines[14 : 14 + tails[0]])
    b = "".join(lines[20 : 20 + heads[1]]) + passage + "".join(lines[26 : 26 + tails[1]])
    dag = _build(_items([a, b]))
    _assert_well_formed(dag, [a, b])
    cover_a, cover_b = _shared_cover(dag, 0, 1), _shared_cover(dag, 1, 0)
    at_a, at_b = a.index(passage), b.index(passage)
    assert all(cover_a[at_a : at_a + len(passage) - 1])
    assert all(cover_b[at_b : at_b + len(passage) - 1])


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
    lines = _random_lines(3, 12)
    passage = "".join(lines[:4])[:-1]
    first = _build(
        _items(
            [
                "".join(lines[4:6]) + passage + "\n" + lines[6],
                "".join(lines[7:9]) + passage + "\n" + lines[9],
            ]
        )
    )
    second = _build(_items([passage, "".join(lines[10:12]) + passage]))
    assert first.blocks[block_id(passage)] == passage
    assert second.blocks[block_id(passage)] == passage
    assert block_id(passage) in first.item_blocks[0]
    assert block_id(passage) in second.item_blocks[1]


def test_block_id_is_stable_across_processes() -> None:
    text = "same text, same id \u2028 in every bundle\r\n"
    code = (
        "import sys; from stream_ctx.core.assembly.dag import block_id; "
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


def test_a_block_id_is_b_and_the_text_s_48_bit_blake2b_in_hex() -> None:
    assert block_id("The cat sat.") == "b8b63b50c0966"
    assert block_id("") == "bddd9c40767f9"


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
    # The third text copies from the second a line of its own and the start of its copy of the
    # first, and takes the second's cut between them: the piece from that copy is used nowhere
    # else, nor is the line after it, so the two are one block.
    lines = _random_lines(3, 10)
    first = "".join(lines[0:6])
    second = lines[6] + lines[7] + first + lines[8]
    third = lines[7] + "".join(lines[0:3]) + lines[9]
    contents = [first, second, third]
    dag = _build(_items(contents))
    _assert_well_formed(dag, contents)
    blocks = [[dag.blocks[b] for b in ids] for ids in dag.item_blocks]
    assert blocks[2] == [lines[7], "".join(lines[0:3])[:-1] + "\n" + lines[9]]
    assert dag.block_uses[dag.item_blocks[2][0]] == 2


def test_dag_reruns_that_change_their_last_line_alike_share_no_empty_block() -> None:
    # Diffs (the second against the first, the third against the second) whose last kept line
    # is only the empty one after the last newline.
    config = [f"  replicas_{n}: {n * 3}\n" for n in range(12)]
    changed = [*config[:-1], "  replicas_final: 1\n"]
    also = list(changed)
    also[3] = "  replicas_3: 10\n"
    contents = ["".join(config), "".join(changed), "".join(also)]
    dag = _build(_items(contents))
    _assert_well_formed(dag, contents)


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
