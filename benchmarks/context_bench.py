"""Context size on real text, side by side in one run: the naive baseline, the items pasted, and
the lean format in each order, on documentation chunks and on an agent reading code; how many
references it writes, how many cut a word (none should), and how much of each context the next
one reuses as its prefix. Asserts nothing. About 2 minutes for the four corpora.

    python benchmarks/context_bench.py [--corpus numpy|stdlib|code|stdlib-code ...]
        [--tokenizer o200k_base] [--write docs/benchmarks/context.md]

`numpy` (docstrings) and `code` (anyio and starlette's sources) are the workloads the format is
tuned on; `stdlib` and `stdlib-code`, the standard library's docstrings and sources, are the
unseen check.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from stream_ctx import BundleConfig, ContextProcessor, read_context
from stream_ctx.core.counting.tokenizer import ENCODINGS, EncodingName, get_tokenizer
from stream_ctx.core.entries.reader import read_references
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.events import Event, RenderOrder
from stream_ctx.corpora import codetext
from stream_ctx.corpora.realtext import workload

ORDERS: tuple[RenderOrder, ...] = ("priority", "stable", "edges")
CORPORA = ("numpy", "code", "stdlib", "stdlib-code")


@dataclass
class OrderResult:
    """Sums over every bundle of one run."""

    bundles: int = 0
    tokens_bundle: int = 0
    tokens_naive: int = 0
    tokens_pasted: int = 0
    over_naive: int = 0
    references: int = 0
    diffs: int = 0
    cutting_a_word: int = 0
    later_tokens: int = 0
    later_reused: int = 0
    finalize_ms: list[float] = field(default_factory=list)


def run(
    events: list[Event], order: RenderOrder, *, max_items: int, encoding: EncodingName
) -> OrderResult:
    """Replay the workload in one order and sum what its bundles cost."""
    tokenizer = get_tokenizer(encoding)
    processor = ContextProcessor(BundleConfig(max_items=max_items, order=order, tokenizer=encoding))
    result = OrderResult()
    seen: set[str] = set()
    for event in events:
        started = time.perf_counter()
        bundle = processor.apply(event)
        if bundle is None:
            continue
        result.finalize_ms.append((time.perf_counter() - started) * 1000)
        stats = bundle.stats
        result.bundles += 1
        result.tokens_bundle += stats.tokens_bundle
        result.tokens_naive += stats.tokens_naive
        result.over_naive += stats.tokens_bundle > stats.tokens_naive
        result.tokens_pasted += tokenizer.count(_pasted(bundle))
        if bundle.conversation_id in seen:
            result.later_tokens += stats.tokens_bundle
            result.later_reused += stats.tokens_prefix_reused
        seen.add(bundle.conversation_id)
        _count_references(bundle.context, result)
    return result


def _pasted(bundle: Bundle) -> str:
    """The items as an agent pastes them: `[n] id`, then the content."""
    return "".join(
        f"[{n}] {item.id}\n" + "".join(bundle.blocks[b] for b in item.blocks) + "\n\n"
        for n, item in enumerate(bundle.items, start=1)
    )


def _count_references(context: str, result: OrderResult) -> None:
    """References and diffs, and the references that start or end inside a word, in the item
    written or in the item they name."""
    contents = [item.content for item in read_context(context)]
    for ref in read_references(context):
        if context.startswith("[§", ref.start) and "with changes:]" in context[ref.start : ref.end]:
            result.diffs += 1
            continue
        result.references += 1
        before = context[ref.start - 1] if ref.start else " "
        after = context[ref.end] if ref.end < len(context) else " "
        source = contents[ref.number - 1] if ref.number <= len(contents) else ""
        at = source.find(ref.text)
        end = at + len(ref.text)
        inside = (source[at - 1] if at > 0 else " ", source[end : end + 1])
        if any(_is_word_char(c) for c in (before, after, *inside)):
            result.cutting_a_word += 1


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def table(corpus: str, conversations: int, max_items: int, encoding: EncodingName) -> list[str]:
    """The markdown lines of one corpus's run: every order side by side."""
    source = codetext.workload if corpus in codetext.CORPORA else workload
    events = source(corpus, conversations=conversations)
    lines = [
        f"corpus `{corpus}`: {conversations} conversations, {len(events)} events, "
        f"max_items {max_items}, tokenizer {encoding}",
        "",
        "| order | bundles | naive | pasted / naive | lean | lean / naive | bundles over naive "
        "| references | diffs | references cutting a word | prefix share after the 1st "
        "| finalize p50 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for order in ORDERS:
        r = run(events, order, max_items=max_items, encoding=encoding)
        share = r.later_reused / r.later_tokens if r.later_tokens else 0.0
        lines.append(
            f"| {order} | {r.bundles:,} | {r.tokens_naive:,} "
            f"| {r.tokens_pasted / r.tokens_naive:.3f} | {r.tokens_bundle:,} "
            f"| **{r.tokens_bundle / r.tokens_naive:.3f}** | {r.over_naive} | {r.references:,} "
            f"| {r.diffs:,} | {r.cutting_a_word} | {share:.1%} "
            f"| {statistics.median(r.finalize_ms):.2f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=CORPORA, action="append")
    parser.add_argument("--conversations", type=int, default=150)
    parser.add_argument("--max-items", type=int, default=10)
    parser.add_argument("--tokenizer", choices=ENCODINGS, default="cl100k_base")
    parser.add_argument("--write", metavar="PATH", help="also write the tables as markdown here")
    args = parser.parse_args()
    lines = [HEADER.format(command=_command(args), machine=_machine())]
    for corpus in args.corpus or CORPORA:
        lines += ["", *table(corpus, args.conversations, args.max_items, args.tokenizer)]
        print("\n".join(lines[-len(ORDERS) - 4 :]), flush=True)
    if args.write:
        Path(args.write).write_text("\n".join(lines) + "\n")


def _command(args: argparse.Namespace) -> str:
    corpora = "".join(f" --corpus {c}" for c in args.corpus or ())
    return f"python benchmarks/context_bench.py{corpora} --write {args.write}"


def _machine() -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{platform.machine()}, {python}, commit {commit or 'unknown'}"


HEADER = """# Context size on real text

Written by `{command}` ({machine}); every figure below comes from that one run.

- naive: the fixed baseline `tokens_naive` (each item as `[n] id (kind) name=value #tag`, its
  content and a blank line); pasted: each item as `[n] id` and its content.
- lean: `stats.tokens_bundle`, the context as sent, counted exactly.
- references: `[§k "first words"…"last words"]` and `[§k]`; diffs: `[§k with changes:]`
  entries. A reference cuts a word when a letter, digit or `_` stands right before or after it in
  the item written, or right before or after the passage in the item it names.
- prefix share: of the context tokens after each conversation's first bundle, the share that is
  the exact token prefix of its previous bundle (what a prompt cache reuses).
- Finalize times are wall-clock and move with the machine's load."""


if __name__ == "__main__":
    main()
