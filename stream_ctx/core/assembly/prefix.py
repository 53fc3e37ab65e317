"""Prefix reuse: how many leading tokens of a context equal the start of the previous one, and
the cache breakpoint a host places where the whole entries they share end.

LLM prompt caches bill a byte-identical prefix at a fraction of the price. The previous context
is kept compressed in the conversation state; the count walks this context's segments (each
with its count) up to the first differing character, and tokenizes only the stretch around that
character in both texts, between joints where the pre-tokenizer always splits.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

from stream_ctx.core.counting.segment import Counted
from stream_ctx.core.counting.tokenizer import FORCED_JOINT, Tokenizer
from stream_ctx.core.text.textmatch import common_run
from stream_ctx.core.wire.bundle import CacheBreakpoint

__all__ = (
    "CACHE_MINIMUMS",
    "NO_BREAKPOINT",
    "cache_breakpoint",
    "pack_context",
    "tokens_prefix_reused",
    "unpack_context",
)

CACHE_MINIMUMS = (1_024, 2_048, 4_096)
"""The shortest prefixes common providers cache, in tokens: OpenAI and most Anthropic models
1,024, some 2,048 or 4,096 (docs/guides/prompt-caching.md names them)."""
NO_BREAKPOINT = CacheBreakpoint(chars=0, tokens=0, meets=[])
"""A context that shares no entry with the one before it (or a delta, which the history holds)."""
# A segment that is an entry's lead `§n` (at the context's start or a line's): entries start there.
_LEAD = re.compile(r"§\d+")

# Fast and still ~3x on prose: the kept context costs about a third of its size.
_ZLIB_LEVEL = 1


def pack_context(context: str) -> bytes:
    """The form a context is kept in between finalizes (and in the changelog)."""
    return zlib.compress(context.encode("utf-8", "surrogatepass"), _ZLIB_LEVEL)


def unpack_context(packed: bytes) -> str:
    return zlib.decompress(packed).decode("utf-8", "surrogatepass")


def tokens_prefix_reused(
    before: str | None, context: str, segments: Sequence[Counted], tokenizer: Tokenizer
) -> int:
    """Leading tokens of `context` identical to the start of the previous context, `before`
    (0 if none)."""
    if before is None:
        return 0
    same = common_run(before, 0, context, 0)
    start = counted = 0
    for text, tokens in segments:
        end = start + len(text)
        if end >= same:
            break  # this segment holds the first difference (or the end of one context)
        counted += tokens
        start = end
    # `start` is a joint of this context that lies before the first difference, so it is a joint
    # of the previous context too; tokenize both only up to their next forced joint after it.
    old = tokenizer.encode(before[start : _next_joint(before, same)])
    new = tokenizer.encode(context[start : _next_joint(context, same)])
    return counted + common_run(old, 0, new, 0)


def _next_joint(text: str, after: int) -> int:
    found = FORCED_JOINT.search(text, after + 1)
    return found.start() if found else len(text)


def cache_breakpoint(
    before: str | None, context: str, segments: Sequence[Counted]
) -> CacheBreakpoint:
    """Where the whole entries `context` starts with, as the previous context `before` did, end:
    characters and exact tokens (entries start where the pre-tokenizer must split, so the tokens
    of that stretch sent alone are the sum of its segments' counts)."""
    if before is None:
        return NO_BREAKPOINT
    same = common_run(before, 0, context, 0)
    chars = tokens = start = counted = 0
    for text, count in segments:
        if start > same:
            break
        if _LEAD.fullmatch(text) and (start == 0 or context[start - 1] == "\n"):
            chars, tokens = start, counted  # every entry before this one is shared whole
        start += len(text)
        counted += count
    if same == len(context):  # all of it: the previous context went on, or was the same
        chars, tokens = len(context), counted
    if chars == 0:
        return NO_BREAKPOINT
    return CacheBreakpoint(
        chars=chars, tokens=tokens, meets=[m for m in CACHE_MINIMUMS if tokens >= m]
    )
