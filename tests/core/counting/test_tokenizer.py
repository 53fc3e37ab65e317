"""Token counts: a real offline BPE, and per-segment counts that add up exactly."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import inspect
import json
import textwrap
import uuid
from functools import cache

import bpe_openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.counting import tokenizer as tokenizer_module
from stream_ctx.core.counting.tokenizer import (
    O200K_PATTERN,
    BpeTokenizer,
    TiktokenTokenizer,
    get_tokenizer,
    ordinary_ranks,
)
from stream_ctx.core.entries.entry import render_lean
from stream_ctx.core.entries.render import render_naive
from stream_ctx.core.text.repeats import plan_texts
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.corpora.realtext import documents
from stream_ctx.errors import ConfigError
from tests.factories import (
    ODD_FRAGMENTS,
    T0,
    make_context_item,
    make_finalize,
    make_item,
    make_retrieval,
    odd_text,
)

_tokenizer = get_tokenizer("cl100k_base")
_encodings = pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])


def test_tokenizer_is_real_cl100k() -> None:
    # Known cl100k_base encodings: "hello world" is 2 tokens, "tiktoken is great!" 6.
    assert _tokenizer.name == "cl100k_base"
    assert _tokenizer.count("hello world") == 2
    assert _tokenizer.count("tiktoken is great!") == 6
    assert _tokenizer.count("") == 0


def test_special_token_text_is_counted_as_ordinary_text() -> None:
    assert _tokenizer.count("<|endoftext|>") > 1
    assert _tokenizer.count("a <|endoftext|> b <|fim_prefix|>") > 4


def test_unknown_tokenizer_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"tokenizer.*'gpt-9'"):
        TiktokenTokenizer("gpt-9")


def test_count_segment_is_cached_and_equals_count() -> None:
    tok = TiktokenTokenizer()
    text = " a (chunk)\nsome block text\n"
    assert tok.count_segment(b"key", text) == tok.count(text)
    assert tok.count_segment(b"key", "a different text under the same key") == tok.count(text)


def test_get_tokenizer_is_shared_and_fast() -> None:
    assert get_tokenizer() is get_tokenizer("cl100k_base")
    assert isinstance(get_tokenizer(), BpeTokenizer)


def test_a_fresh_fast_counter_defaults_to_cl100k_and_counts_like_tiktoken() -> None:
    # Built here, not taken from get_tokenizer(): the shared one was built before any test ran.
    fast = BpeTokenizer()
    text = "a fresh counter, built in this test: ids equal tiktoken's"
    assert fast.name == "cl100k_base"
    assert fast.encode(text) == TiktokenTokenizer().encode(text)


@st.composite
def rendered_segments(draw: st.DrawFn) -> list[str]:
    """Segments exactly as render_lean() and render_naive() emit them, over hostile text."""
    contents = draw(st.lists(odd_text(max_pieces=25), max_size=4))
    passage = draw(odd_text(max_pieces=10)) + "shared passage words " * 6
    items = []
    for n, text in enumerate(contents):
        if draw(st.booleans()):
            text = passage + text
        items.append(
            make_context_item(
                id=draw(odd_text(max_pieces=2)) + str(n),
                kind=draw(odd_text(max_pieces=2)),
                content=text,
                attributes=draw(
                    st.dictionaries(odd_text(max_pieces=2), st.sampled_from(["v", " "]), max_size=2)
                ),
                tags=draw(st.lists(st.sampled_from(["t", "\n", "<|endoftext|>"]), max_size=2)),
            )
        )
    if draw(st.booleans()):
        segments = render_naive(items)
    else:
        segments = render_lean(items, plan_texts([item.content for item in items]))
    return [text for _, text in segments]


@_encodings
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rendered_segments())
def test_context_count_is_sum_of_rendered_segment_counts(name: str, texts: list[str]) -> None:
    tokenizer = get_tokenizer(name)
    assert tokenizer.count("".join(texts)) == sum(tokenizer.count(t) for t in texts)


# The rendering contract: a segment starts with a non-whitespace character and ends with "\n",
# except an entry, cut into its number ("[3]") and the rest, which starts " ".
_ODD_CHAR = st.text(st.characters(exclude_categories=["Cs"]), max_size=4)
_body = st.lists(st.sampled_from(ODD_FRAGMENTS) | _ODD_CHAR, max_size=15).map("".join)
_end = st.sampled_from(["", " ", "\r", "\t", "  ", "\n", "\u2028", "\u3000", "\r\n", "```", "'"])
_line = st.tuples(
    st.sampled_from(
        ["`", "[", "#", "=", "(", "C", "S", "s", "a", "1", "'", "<", "\u00e9", "\u0301"]
    ),
    _body,
    _end,
).map(lambda parts: ["".join(parts) + "\n"])
_header = st.tuples(
    st.sampled_from(["[", "§"]),
    st.integers(1, 120),
    st.sampled_from([" ", " '", ' "', " 1", " \u0301", " [", " (", " ~", " «", ' "…"']),
    _body,
    _end,
).map(lambda p: [f"{p[0]}{p[1]}" + ("]" if p[0] == "[" else ""), "".join(p[2:]) + "\n"])


@_encodings
@settings(max_examples=300, deadline=None)
@given(st.lists(_line | _header, max_size=8))
def test_count_is_additive_over_any_segments_of_the_render_shape(
    name: str, groups: list[list[str]]
) -> None:
    tokenizer = get_tokenizer(name)
    texts = [text for group in groups for text in group]
    assert tokenizer.count("".join(texts)) == sum(tokenizer.count(t) for t in texts)


@pytest.mark.parametrize(
    "texts",
    [
        ["§1", " a (chunk)\n  leading spaces\n", "§2", " b (chunk)\n\ttab\n"],
        ["§1", " a (chunk)\ntrailing spaces   \n", "§22", ' ~b ^1\n[§1 "trailing"…"spaces"]\n'],
        ["§1", " a (chunk)\nx\n", "§2", " b ^1\n[§1 with changes:]\n@@\n-x\n+y\n"],
        ["[1]", " a (chunk)\n\n\n\n", "[2]", " b (chunk)\r\n\r\n"],
        ["[1]", " a (x)\n\u00a0\u3000\u2028\n", "[2]", " <|endoftext|> (x)\n\n"],
        ["[1]", " a (chunk)\nends with a CR\r\n", "[12]", " \\[3] (chunk)\n\n"],
    ],
)
@_encodings
def test_count_is_additive_on_hand_picked_joints(name: str, texts: list[str]) -> None:
    tokenizer = get_tokenizer(name)
    assert tokenizer.count("".join(texts)) == sum(tokenizer.count(t) for t in texts)


def test_bundle_reports_tokenizer_and_exact_context_count() -> None:
    processor = ContextProcessor(BundleConfig(min_salience_threshold=0.0))
    items = [
        make_item(id=f"i{n}", content=f"  text {n} <|endoftext|>\r\n\u2028", created_at=T0)
        for n in range(3)
    ]
    processor.apply(make_retrieval(items=items), position=1)
    bundle = processor.apply(make_finalize(), position=2)
    assert bundle is not None
    assert bundle.stats.tokenizer == "cl100k_base"
    assert bundle.stats.tokens_bundle == _tokenizer.count(bundle.context)


# The fast counter against the reference ----------------------------------------------------------


@cache
def _pair(name: str) -> tuple[BpeTokenizer, TiktokenTokenizer]:
    """The fast counter and the tiktoken reference for encoding `name`."""
    return BpeTokenizer(name), TiktokenTokenizer(name)


def _real_texts() -> list[str]:
    """Documentation prose and Python source as installed here."""
    prose = [doc.text for doc in documents("numpy")[:120]] + [d.text for d in documents("stdlib")]
    code = [inspect.getsource(module) for module in (json, textwrap, dataclasses)]
    return prose + code


@_encodings
def test_fast_counter_gives_tiktokens_ids_on_real_text_and_code(name: str) -> None:
    fast, reference = _pair(name)
    texts = _real_texts()
    assert sum(len(t) for t in texts) > 200_000
    for text in texts:
        _assert_counted_alike(fast, reference, text)


@pytest.mark.parametrize(
    "text",
    [" " * 4096, "\n" * 513, "\t \n\r\n  \u3000" * 200, "\ud800", "a\udfffb \ud83d x", "", "\x00"],
)
@_encodings
def test_fast_counter_gives_tiktokens_ids_on_runs_and_lone_surrogates(name: str, text: str) -> None:
    fast, reference = _pair(name)
    _assert_counted_alike(fast, reference, text)


@_encodings
@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200) | odd_text(max_pieces=30))
def test_fast_counter_gives_tiktokens_ids_on_unicode_fuzz(name: str, text: str) -> None:
    fast, reference = _pair(name)
    _assert_counted_alike(fast, reference, text)


def _assert_counted_alike(fast: BpeTokenizer, reference: TiktokenTokenizer, text: str) -> None:
    """The same ids as tiktoken, and the same count by the fast counter's own path."""
    ids = reference.encode(text)
    assert fast.encode(text) == ids
    assert fast.count(text) == len(ids)


@_encodings
def test_fast_counter_hands_what_it_refuses_to_tiktoken(name: str) -> None:
    fast, reference = _pair(name)
    text = "token " * 170_000  # over a million characters: bpe-openai refuses it
    assert len(text) > 1_000_000
    assert fast.count(text) == reference.count(text) == 170_001


# o200k_base, built offline from bpe-openai's ranks ----------------------------------------------

# The SHA-256 tiktoken checks its o200k_base.tiktoken download against
# (tiktoken_ext/openai_public.py): each rank's bytes in base64, a space, the rank, a newline.
_O200K_FILE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def test_o200k_ranks_are_the_published_file() -> None:
    ranks = ordinary_ranks("o200k_base")
    assert sorted(ranks.values()) == list(range(len(ranks)))
    lines = b"".join(
        base64.b64encode(value) + b" %d\n" % rank
        for value, rank in sorted(ranks.items(), key=lambda pair: pair[1])
    )
    assert hashlib.sha256(lines).hexdigest() == _O200K_FILE_SHA256


def test_o200k_pattern_is_bpe_openais() -> None:
    assert bpe_openai.get_encoding("o200k_base")._pat_str == O200K_PATTERN


def test_o200k_counts_known_values() -> None:
    # o200k_base encodes "hello world" as [24912, 2375], where cl100k_base gives [15339, 1917].
    assert get_tokenizer("o200k_base").encode("hello world") == [24912, 2375]
    assert _tokenizer.encode("hello world") == [15339, 1917]


def test_cut_after_the_last_letter_keeps_a_combining_mark_with_it() -> None:
    # o200k_base joins a combining mark to the letters before it, so no cut goes between them:
    # "कका\n" (its last character a vowel sign, category Mc) counts 3, but 2 + 2 cut after "कक".
    # A fresh id in every run: baseline entries are memoized, and a warm memo would hand back
    # the entry made before, never cutting it again.
    fresh = uuid.uuid4().hex
    for text in ["कका\n", "कके.\n", "cafe\u0301.\n"]:
        segments = [t for _, t in render_naive([make_context_item(id=fresh, content=text)])]
        for name in ("cl100k_base", "o200k_base"):
            tokenizer = get_tokenizer(name)
            assert tokenizer.count("".join(segments)) == sum(tokenizer.count(t) for t in segments)


def test_bundle_counted_in_o200k_names_it_and_counts_exactly() -> None:
    processor = ContextProcessor(BundleConfig(min_salience_threshold=0.0, tokenizer="o200k_base"))
    items = [
        make_item(
            id=f"i{n}", content=f"{n} こんにちは世界、お元気ですか e\u0301 \u0301", created_at=T0
        )
        for n in range(3)
    ]
    processor.apply(make_retrieval(items=items), position=1)
    bundle = processor.apply(make_finalize(), position=2)
    assert bundle is not None
    assert bundle.stats.tokenizer == "o200k_base"
    assert bundle.stats.tokens_bundle == get_tokenizer("o200k_base").count(bundle.context)
    assert bundle.stats.tokens_bundle != _tokenizer.count(bundle.context)


class _CharCounter:
    """A tokenizer of one token per character: counts no real encoding could give."""

    name = "chars"

    def count(self, text: str) -> int:
        return len(text)

    def encode(self, text: str) -> list[int]:
        return [ord(char) for char in text]

    def count_segment(self, key: object, text: str) -> int:
        return len(text)


def test_a_processor_counts_with_the_tokenizer_it_is_given() -> None:
    processor = ContextProcessor(BundleConfig(), tokenizer=_CharCounter())
    processor.apply(make_retrieval(items=[make_item(content="one two three four")]), position=1)
    bundle = processor.apply(make_finalize(max_tokens=10_000), position=2)
    assert bundle is not None
    assert bundle.stats.tokenizer == "chars"
    assert bundle.stats.tokens_bundle == len(bundle.context)


def test_get_tokenizer_makes_one_counter_per_encoding_and_hands_it_out_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A registry of its own: the process-wide one already holds what other tests asked for.
    monkeypatch.setattr(tokenizer_module, "_shared", {})
    first = get_tokenizer("o200k_base")
    assert isinstance(first, BpeTokenizer) and first.name == "o200k_base"
    assert get_tokenizer("o200k_base") is first
    assert tokenizer_module.shared_tokenizers() == {"o200k_base": first}
