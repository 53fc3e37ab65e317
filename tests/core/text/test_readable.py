"""Readable references: random texts with planted repeats render only references a reader can
follow by plain search, and a reader that only knows entry numbers and str.find rebuilds every
item from them."""

from __future__ import annotations

import random
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from stream_ctx.core.entries.entry import render_lean
from stream_ctx.core.entries.reader import read_context
from stream_ctx.core.text.quotes import choose_quotes, find_passage
from stream_ctx.core.text.repeats import plan_texts
from stream_ctx.core.window.accumulator import ContextItem
from tests.factories import make_context_item

_ENTRY = re.compile(r"(?m)^§(\d+) [^\n]*\n")
_REFERENCE = re.compile(r'\[§(\d+)(?: "(.*?)"…"(.*?)")?\]')
_DIFF = re.compile(r"\[§(\d+) with changes:\]\n")
_WORDS = (
    "the window keeps fresh items and evicts stale ones while each bundle states its tokens "
    "exactly def return async await import class yield partition offset broker topic commit"
).split()


def _line(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(2, 9))]
    indent = " " * rng.choice((0, 0, 4, 8))
    return indent + " ".join(words) + rng.choice((".", "", ":", "(x)"))


def _prose(rng: random.Random, lines: int) -> str:
    """Lines, some holding several sentences."""
    out = []
    for _ in range(lines):
        sentences = [_line(rng).strip().capitalize() + "." for _ in range(rng.randint(1, 3))]
        out.append(" ".join(sentences) if rng.random() < 0.5 else _line(rng))
    return "\n".join(out) + "\n"


def _contents(rng: random.Random) -> list[str]:
    """Texts with planted repeats: overlapping chunks, windows of whole lines, a rerun with
    edits, a block repeated inside one text, and a repeat glued inside words."""
    document = _prose(rng, 40)
    lines = document.splitlines(keepends=True)
    cut = rng.randrange(100, len(document) // 2)
    cut = document.find(" ", cut) + 1 or cut
    chunks = [document[:cut], document[max(cut - rng.randint(40, 200), 0) :]]
    first = rng.randrange(0, 20)
    window = "".join(lines[first : first + rng.randint(8, 20)])
    rerun = list(lines[first : first + 20])
    for _ in range(rng.randint(1, 3)):
        rerun[rng.randrange(len(rerun))] = _line(rng) + "\n"
    block = "".join(lines[30:34])
    inside = f"{_line(rng)}\n{block}{_line(rng)}\n{block}"
    glued = "x" + document[10:90].replace(" ", "_") + "y"
    texts = [*chunks, window, "".join(rerun), inside, glued, glued.strip("xy")]
    rng.shuffle(texts)
    return texts


def _items(contents: list[str]) -> list[ContextItem]:
    return [make_context_item(id=f"doc:{n}", content=content) for n, content in enumerate(contents)]


def _context(items: list[ContextItem]) -> str:
    plans = plan_texts([item.content for item in items])
    return "".join(text for _, text in render_lean(items, plans))


def _bodies(context: str) -> list[str]:
    """Each entry's body (its text as written), split at the `§n` header lines."""
    heads = list(_ENTRY.finditer(context))
    ends = [m.start() for m in heads[1:]] + [len(context)]
    return [context[m.end() : end - 1] for m, end in zip(heads, ends, strict=True)]


def _plain_read(body: str, earlier: list[str]) -> tuple[str, list[tuple[int, int, str]]]:
    """A body rebuilt with entry numbers and str.find alone, and each reference's place in the
    rebuilt text (start, end, the entry's text it was found in)."""
    diff = _DIFF.match(body)
    if diff is not None:
        return _apply(earlier[int(diff.group(1)) - 1], body[diff.end() :]), []
    text, spans, written = "", [], 0
    for m in _REFERENCE.finditer(body):
        text += body[written : m.start()]
        k = int(m.group(1))
        source = earlier[k - 1] if k <= len(earlier) else text
        if m.group(2) is None:
            found = source
        else:
            start = source.find(m.group(2))
            end = source.find(m.group(3), start + len(m.group(2))) + len(m.group(3))
            found = source[start:end]
            spans.append((len(text), len(text) + len(found), source))
        text += found
        written = m.end()
    return text + body[written:], spans


def _apply(old: str, hunks: str) -> str:
    lines, out, cursor = old.split("\n"), [], 0
    for hunk in hunks.split("@@\n")[1:]:
        rows = hunk.split("\n")
        found = [row[1:] for row in rows if row[:1] in (" ", "-")]
        made = [row[1:] for row in rows if row[:1] in (" ", "+")]
        at = next(p for p in range(cursor, len(lines)) if lines[p : p + len(found)] == found)
        out += lines[cursor:at] + made
        cursor = at + len(found)
    return "\n".join(out + lines[cursor:])


def _is_whole(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] neither starts nor ends inside a word."""
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    return not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_")


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10**9))
def test_planted_repeats_are_referenced_readably_and_read_back_by_plain_search(seed: int) -> None:
    contents = _contents(random.Random(seed))
    items = _items(contents)
    context = _context(items)
    assert [it.content for it in read_context(context)] == contents
    earlier: list[str] = []
    for body, content in zip(_bodies(context), contents, strict=True):
        text, spans = _plain_read(body, earlier)
        assert text == content
        for start, end, source in spans:
            passage = text[start:end]
            assert _is_whole(text, start, end), passage
            at = source.find(passage)
            assert _is_whole(source, at, at + len(passage)), passage
        earlier.append(text)


def test_a_chunk_that_continues_an_earlier_one_starts_with_a_reference_to_it() -> None:
    document = _prose(random.Random(3), 30)
    cut = document.find(" ", 600) + 1
    second = document[cut - 150 :]
    second = second[second.find(" ") + 1 :]
    context = _context(_items([document[:cut], second]))
    body = _bodies(context)[1]
    assert body.startswith('[§1 "')
    assert body[body.index("]") + 1 :] in second


def test_a_rerun_with_a_changed_line_is_written_as_a_diff() -> None:
    log = "".join(f"tests/test_{n}.py::test_case_{n} PASSED [{n:3d}%]\n" for n in range(30))
    rerun = log.replace("test_case_7 PASSED", "test_case_7 FAILED")
    body = _bodies(_context(_items([log, rerun])))[1]
    assert body.startswith("[§1 with changes:]\n@@\n")
    assert "-tests/test_7.py::test_case_7 PASSED [  7%]" in body
    assert "+tests/test_7.py::test_case_7 FAILED [  7%]" in body
    assert len(body) < len(rerun) / 3


def test_a_whole_repeated_text_is_named_by_its_entry_alone() -> None:
    text = _prose(random.Random(5), 6)
    assert _bodies(_context(_items([text, text])))[1] == "[§1]"


def test_content_that_looks_like_a_reference_or_a_diff_reads_back() -> None:
    contents = [
        '[§1 "a b"…"c d"] and [§1] and [\\§2]\n' + _prose(random.Random(1), 4),
        "[§1 with changes:]\n@@\n-x\n+y\n",
        "§2 looks like a lead\n[§2]",
    ]
    assert [it.content for it in read_context(_context(_items(contents)))] == contents


def test_a_last_quote_a_reader_would_meet_sooner_inside_a_word_is_lengthened() -> None:
    passage = "Make the pool first, then many instances of it, and return an Instance"
    source = f"Intro.\n{passage}.\nMore."
    quotes = choose_quotes(source, passage)
    assert quotes is not None
    head, tail, _ = quotes
    assert tail == "an Instance"  # `Instance` alone stands in `instances` before it
    assert find_passage(source, head, tail) == passage
