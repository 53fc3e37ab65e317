"""What prompt caching saves a host, turn by turn, on the real-text workloads: the items pasted,
the lean context with a cache breakpoint only at its end, and the lean context split at its
`cache_breakpoint`. Asserts nothing. About a minute per corpus.

    python benchmarks/cache_bench.py [--corpus numpy|code ...] [--write docs/benchmarks/cache.md]

The host model (Anthropic's prompt caching): each request is the system prompt (the reading guide,
for the lean context) and the context's text blocks, each block ending with a `cache_control`
breakpoint. A breakpoint writes the prefix up to it when that prefix is at least the minimum
(1,024 tokens); a request reads the longest prefix an earlier request of the conversation wrote
that ends at one of its own block ends. Read tokens cost 0.1x the input price, written ones
1.25x, the rest 1x. OpenAI caches any prefix of 1,024 tokens or more, in steps of 128, by
itself: its column is the share of input tokens that are the previous request's token prefix.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from provenance import machine

from stream_ctx import READING_GUIDE, BundleConfig, ContextProcessor
from stream_ctx.core.counting.tokenizer import get_tokenizer
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.events import Event
from stream_ctx.corpora import codetext
from stream_ctx.corpora.realtext import workload

CORPORA = ("numpy", "code")
MIN_CACHED = 1_024
READ_PRICE, WRITE_PRICE = 0.1, 1.25
OPENAI_STEP = 128
# Claude Sonnet's input price per million tokens, for the dollar column.
DOLLARS_PER_MTOK = 3.0
_TOKENIZER = get_tokenizer()


@dataclass
class Host:
    """One way of sending the context, and what its requests cost summed over the turns."""

    name: str
    blocks: Callable[[Bundle], list[str]]
    system: str = ""
    turns: int = 0
    tokens: int = 0
    read: int = 0
    written: int = 0
    openai_cached: int = 0
    _written: dict[str, set[str]] = field(default_factory=dict)
    _last: dict[str, list[int]] = field(default_factory=dict)

    def send(self, bundle: Bundle) -> None:
        """Price one turn's request: what it reads from the cache, writes to it, and sends."""
        blocks = [self.system, *self.blocks(bundle)] if self.system else self.blocks(bundle)
        ends, counts, text = [], [], ""
        for block in blocks:
            text += block
            ends.append(text)
            counts.append(_TOKENIZER.count(block))
        prefix_tokens = [sum(counts[: n + 1]) for n in range(len(blocks))]
        written = self._written.setdefault(bundle.conversation_id, set())
        prefixes = list(zip(ends, prefix_tokens, strict=True))
        read = max((t for end, t in prefixes if end in written), default=0)
        new = [(end, t) for end, t in prefixes if t >= MIN_CACHED and end not in written]
        written.update(end for end, _ in new)
        self.turns += 1
        self.tokens += prefix_tokens[-1]
        self.read += read
        self.written += max((t for _, t in new), default=read) - read
        self._openai(bundle.conversation_id, text)

    def _openai(self, conversation: str, text: str) -> None:
        tokens = _TOKENIZER.encode(text)
        before = self._last.get(conversation, [])
        same = 0
        while same < min(len(tokens), len(before)) and tokens[same] == before[same]:
            same += 1
        if same >= MIN_CACHED:
            self.openai_cached += MIN_CACHED + (same - MIN_CACHED) // OPENAI_STEP * OPENAI_STEP
        self._last[conversation] = tokens

    def row(self, pasted_tokens: int) -> str:
        cost = self.read * READ_PRICE + self.written * WRITE_PRICE
        cost += self.tokens - self.read - self.written
        dollars = cost * DOLLARS_PER_MTOK / 1e6
        return (
            f"| {self.name} | {self.tokens:,} | {self.tokens / pasted_tokens:.3f} "
            f"| {self.read / self.tokens:.1%} | {self.written / self.tokens:.1%} "
            f"| {cost:,.0f} | **{cost / pasted_tokens:.3f}** | ${dollars:.2f} "
            f"| {self.openai_cached / self.tokens:.1%} |"
        )


def _pasted(bundle: Bundle) -> list[str]:
    """The items as an agent pastes them, in the context's order: `[n] id`, then the content."""
    items = [bundle.items[n] for n in _order(bundle)]
    return [
        "".join(
            f"[{n}] {item.id}\n" + "".join(bundle.blocks[b] for b in item.blocks) + "\n\n"
            for n, item in enumerate(items, start=1)
        )
    ]


def _order(bundle: Bundle) -> list[int]:
    """The bundle's items in context order (stable: by when each entered the window)."""
    ids = [line.split(" ", 2)[1] for line in bundle.context.split("\n") if line.startswith("§")]
    index = {item.id: n for n, item in enumerate(bundle.items)}
    found = [index[i] for i in ids if i in index]
    return found if len(found) == len(bundle.items) else list(range(len(bundle.items)))


def table(corpus: str, conversations: int) -> list[str]:
    source = codetext.workload if corpus in codetext.CORPORA else workload
    events: list[Event] = source(corpus, conversations=conversations)
    hosts = [
        Host("items pasted, breakpoint at the end", _pasted),
        Host("lean, breakpoint at the end", lambda b: [b.context], READING_GUIDE),
        Host("lean, split at `cache_breakpoint`", Bundle.cache_blocks, READING_GUIDE),
    ]
    processor = ContextProcessor(BundleConfig(max_items=10, order="stable"))
    for event in events:
        bundle = processor.apply(event)
        if bundle is not None:
            for host in hosts:
                host.send(bundle)
    pasted = hosts[0].tokens
    return [
        f"corpus `{corpus}`: {conversations} conversations, {hosts[0].turns:,} turns, order"
        " `stable`, max_items 10",
        "",
        "| host sends | input tokens | / pasted | read from cache | written to cache "
        "| cost (input-price tokens) | cost / pasted uncached | at $3/MTok | OpenAI cached |",
        "|---|---|---|---|---|---|---|---|---|",
        *(host.row(pasted) for host in hosts),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=CORPORA, action="append")
    parser.add_argument("--conversations", type=int, default=150)
    parser.add_argument("--write", metavar="PATH", help="also write the tables as markdown here")
    args = parser.parse_args()
    lines = [HEADER.format(machine=machine())]
    for corpus in args.corpus or CORPORA:
        lines += ["", *table(corpus, args.conversations)]
        print("\n".join(lines[-7:]), flush=True)
    if args.write:
        Path(args.write).write_text("\n".join(lines) + "\n")


HEADER = """# Prompt caching on real text

Written by `python benchmarks/cache_bench.py --write docs/benchmarks/cache.md` ({machine}).

Each turn is one bundle of a conversation, sent whole (no chat history around it). A host
caches with Anthropic's `cache_control`: a breakpoint after each block of the context (after
the whole context when it is one block), prefixes under 1,024 tokens not cached, reads at 0.1x
the input price, writes at 1.25x. The lean contexts go after the reading guide in the system
prompt (counted in their input). *OpenAI cached*: the share of input tokens OpenAI's automatic
prefix cache would serve (the previous request's token prefix, from 1,024 tokens in steps of
128). Token counts in cl100k_base."""


if __name__ == "__main__":
    main()
