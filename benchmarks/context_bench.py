"""Context size on real text, side by side in one run: the naive baseline, the items pasted, and
the lean format in each order, on documentation chunks and on an agent reading code; how many
references it writes, how many cut a word (none should), and how much of each context the next
one reuses as its prefix, how deep references chain, and the whole-line repeat bound. Asserts
nothing. About 2 minutes for the four corpora.

    python benchmarks/context_bench.py [--corpus numpy|stdlib|code|stdlib-code ...]
        [--tokenizer o200k_base] [--write docs/benchmarks/context.md]

`numpy` (docstrings) and `code` (anyio and starlette's sources) are the workloads the format is
tuned on; `stdlib` and `stdlib-code`, the standard library's docstrings and sources, are the
unseen check.
"""

from __future__ import annotations

import argparse
import bisect
import functools
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from provenance import machine

from stream_ctx import BundleConfig, ContextProcessor, read_context
from stream_ctx.core.counting.tokenizer import ENCODINGS, EncodingName, get_tokenizer
from stream_ctx.core.entries.reader import Reference, read_references
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.events import Event, RenderOrder
from stream_ctx.corpora import codetext
from stream_ctx.corpora.realtext import workload

ORDERS: tuple[RenderOrder, ...] = ("priority", "stable", "edges")
CORPORA = ("numpy", "code", "stdlib", "stdlib-code")
TARGETS = {"numpy": 0.85, "stdlib": 0.85, "code": 0.65, "stdlib-code": 0.65}
"""The lean / naive ratio aimed at: documentation, then code."""


@dataclass
class OrderResult:
    """Sums over every bundle of one run."""

    bundles: int = 0
    tokens_bundle: int = 0
    tokens_naive: int = 0
    tokens_pasted: int = 0
    over_naive: int = 0
    worst: float = 0.0
    references: int = 0
    diffs: int = 0
    cutting_a_word: int = 0
    depths: list[int] = field(default_factory=list)
    tokens_unrepeated: int = 0
    tokens_lean_unrepeated: int = 0
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
        result.worst = max(result.worst, stats.tokens_bundle / stats.tokens_naive)
        result.tokens_pasted += tokenizer.count(_pasted(bundle))
        if bundle.conversation_id in seen:
            result.later_tokens += stats.tokens_bundle
            result.later_reused += stats.tokens_prefix_reused
        seen.add(bundle.conversation_id)
        result.tokens_unrepeated += tokenizer.count(_unrepeated(bundle))
        result.tokens_lean_unrepeated += tokenizer.count(_lean_unrepeated(bundle.context))
        _count_references(bundle.context, result)
        result.depths += chain_depths(bundle.context)
    return result


def _pasted(bundle: Bundle) -> str:
    """The items as an agent pastes them: `[n] id`, then the content."""
    return "".join(
        f"[{n}] {item.id}\n" + "".join(bundle.blocks[b] for b in item.blocks) + "\n\n"
        for n, item in enumerate(bundle.items, start=1)
    )


def _unrepeated(bundle: Bundle) -> str:
    """The naive baseline's text (what `tokens_naive` counts) without the content lines that
    repeat an earlier one (_kept_lines)."""
    seen: set[str] = set()
    entries = []
    for n, item in enumerate(bundle.items, start=1):
        terms = [f" {name}={value}" for name, value in item.attributes.items()]
        terms += [f" #{tag}" for tag in item.tags]
        content = "".join(bundle.blocks[b] for b in item.blocks)
        entries.append(f"[{n}] {item.id} ({item.kind}){''.join(terms)}\n")
        entries.append(_kept_lines(content, seen) + "\n")
    return "".join(entries)


def _lean_unrepeated(context: str) -> str:
    """The context with its headers as written, every reference and diff written out, and
    without the content lines that repeat an earlier one (_kept_lines)."""
    items = read_context(context)
    seen: set[str] = set()
    return "".join(
        context[start:body] + _kept_lines(item.content, seen)
        for (start, body), item in zip(_entries(context, len(items)), items, strict=True)
    )


def _kept_lines(content: str, seen: set[str]) -> str:
    """The lines of `content`, each with its newline, but those in `seen` (the contents' lines
    before it in the bundle) or earlier in it; adds them to `seen`."""
    kept = ""
    for line in content.split("\n"):
        kept += "" if line in seen else line + "\n"
        seen.add(line)
    return kept


def _entries(context: str, count: int) -> list[tuple[int, int]]:
    """Where each of a full context's `count` entries starts, and where its text starts."""
    starts = [0] + [context.index(f"\n§{n} ") + 1 for n in range(2, count + 1)]
    return [(start, context.index("\n", start) + 1) for start in starts]


# The reading guide's escapes: one `\` is dropped from each.
_ESCAPE = re.compile(r"(?m)^\\(?=\\*§\d)|\[\\(?=\\*§)")


def chain_depths(context: str) -> list[int]:
    """The chain depth of each reference of a full context, diffs apart, in order: 1 where the
    passage it names is written out in the item it names, else 1 + the greatest depth among the
    references there that the passage overlaps (a diff there covers its whole text)."""
    contents = [item.content for item in read_context(context)]
    refs = read_references(context)
    # Where each item's references stand in its text: (start, end, index in refs).
    spans: list[list[tuple[int, int, int]]] = [[] for _ in contents]
    entries = _entries(context, len(contents))
    starts = [start for start, _ in entries]
    # The item being read, and where its text read so far ends in the context and in the text.
    written, read_to, at = -1, 0, 0
    for i, ref in enumerate(refs):
        item = bisect.bisect(starts, ref.start) - 1
        if item != written:
            written, read_to, at = item, entries[item][1], 0
        at += ref.start - read_to - len(_ESCAPE.findall(context, read_to, ref.start))
        spans[item].append((at, at + len(ref.text), i))
        read_to, at = ref.end, at + len(ref.text)

    @functools.cache
    def depth(i: int) -> int:
        ref = refs[i]
        source = contents[ref.number - 1]
        if _is_diff(context, ref):
            start, end = 0, len(source)
        else:
            start = source.find(ref.text)  # where the reader's search for its quotes lands
            end = start + len(ref.text)
        inner = [depth(j) for a, b, j in spans[ref.number - 1] if a < end and start < b and j != i]
        return 1 + max(inner, default=0)

    return [depth(i) for i, ref in enumerate(refs) if not _is_diff(context, ref)]


def _is_diff(context: str, ref: Reference) -> bool:
    return context.startswith(f"[§{ref.number} with changes:]", ref.start)


def _count_references(context: str, result: OrderResult) -> None:
    """References and diffs, and the references that start or end inside a word, in the item
    written or in the item they name."""
    contents = [item.content for item in read_context(context)]
    for ref in read_references(context):
        if _is_diff(context, ref):
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


def table(
    corpus: str, conversations: int, max_items: int, encoding: EncodingName
) -> tuple[list[str], RepeatBound]:
    """The markdown lines of one corpus's run, every order side by side, and its repeat
    bounds."""
    source = codetext.workload if corpus in codetext.CORPORA else workload
    events = source(corpus, conversations=conversations)
    lines = [
        f"corpus `{corpus}`: {conversations} conversations, {len(events)} events, "
        f"max_items {max_items}, tokenizer {encoding}",
        "",
        "| order | bundles | naive | pasted / naive | lean | lean / naive | bundles over naive "
        "| worst bundle lean / naive | references | diffs | references cutting a word "
        "| chain depth 1 / 2 / 3+ | max depth "
        "| prefix share after the 1st | finalize p50 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    results = [run(events, order, max_items=max_items, encoding=encoding) for order in ORDERS]
    for order, r in zip(ORDERS, results, strict=True):
        share = r.later_reused / r.later_tokens if r.later_tokens else 0.0
        depths = (r.depths.count(1), r.depths.count(2), sum(d >= 3 for d in r.depths))
        lines.append(
            f"| {order} | {r.bundles:,} | {r.tokens_naive:,} "
            f"| {r.tokens_pasted / r.tokens_naive:.3f} | {r.tokens_bundle:,} "
            f"| **{r.tokens_bundle / r.tokens_naive:.3f}** | {r.over_naive} | {r.worst:.3f} "
            f"| {r.references:,} "
            f"| {r.diffs:,} | {r.cutting_a_word} | {' / '.join(f'{d:,}' for d in depths)} "
            f"| {max(r.depths, default=0)} | {share:.1%} "
            f"| {statistics.median(r.finalize_ms):.2f} |"
        )
    # Every order holds the same items in each bundle, so the naive bound is the same for all.
    bound = RepeatBound(
        corpus,
        naive=results[0].tokens_naive,
        unrepeated=results[0].tokens_unrepeated,
        lean_unrepeated=min(r.tokens_lean_unrepeated for r in results),
        best_lean=min(r.tokens_bundle for r in results),
    )
    return lines, bound


@dataclass(frozen=True)
class RepeatBound:
    """One corpus's repeat bounds (BOUND_HEADER), in tokens summed over its bundles."""

    corpus: str
    naive: int
    unrepeated: int
    lean_unrepeated: int
    best_lean: int

    @property
    def target(self) -> float:
        return TARGETS[self.corpus]

    def row(self) -> str:
        return (
            f"| {self.corpus} | {self.naive:,} | {self.naive - self.unrepeated:,} "
            f"| **{self.unrepeated / self.naive:.3f}** | {self.lean_unrepeated / self.naive:.3f} "
            f"| {self.target:.2f} | {self.best_lean / self.naive:.3f} |"
        )


def reach(bounds: list[RepeatBound]) -> str:
    """Where whole-line references could reach the target: where a bound is at or below it."""

    def on(is_within: Callable[[RepeatBound], bool]) -> str:
        return ", ".join(f"`{b.corpus}`" for b in bounds if is_within(b)) or "none"

    return (
        "Whole-line references can reach the target only where a bound is at or below it: with "
        f"naive's headers on {on(lambda b: b.unrepeated <= b.target * b.naive)}, with lean's "
        f"headers on {on(lambda b: b.lean_unrepeated <= b.target * b.naive)}; out of reach on "
        f"{on(lambda b: b.lean_unrepeated > b.target * b.naive)}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=CORPORA, action="append")
    parser.add_argument("--conversations", type=int, default=150)
    parser.add_argument("--max-items", type=int, default=10)
    parser.add_argument("--tokenizer", choices=ENCODINGS, default="cl100k_base")
    parser.add_argument("--write", metavar="PATH", help="also write the tables as markdown here")
    args = parser.parse_args()
    lines = [HEADER.format(command=_command(args), machine=machine())]
    bounds: list[RepeatBound] = []
    for corpus in args.corpus or CORPORA:
        corpus_lines, bound = table(corpus, args.conversations, args.max_items, args.tokenizer)
        lines += ["", *corpus_lines]
        bounds.append(bound)
        print("\n".join(corpus_lines), flush=True)
    summary = [*BOUND_HEADER, *(b.row() for b in bounds), "", reach(bounds)]
    lines += ["", *summary]
    print("\n".join(summary))
    if args.write:
        Path(args.write).write_text("\n".join(lines) + "\n")


def _command(args: argparse.Namespace) -> str:
    corpora = "".join(f" --corpus {c}" for c in args.corpus or ())
    return f"python benchmarks/context_bench.py{corpora} --write {args.write}"


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
- chain depth: 1 when the passage a reference names is written out in the item it names; one
  more than the deepest reference (or diff) there that the passage overlaps otherwise. Diffs are
  not counted, but a chain may pass through one.
- Finalize times are wall-clock and move with the machine's load."""

BOUND_HEADER = (
    "Repeat bound: the lean / naive ratio if every content line that repeats a line of an item's "
    "content earlier in the same bundle (so also every repeated item's content) cost nothing: "
    "naive's text with those lines deleted, counted exactly, over naive; headers and the blank "
    "line after each item stay, blank and short lines inside contents count. With lean's "
    "headers: the same deletion from the context as sent, its references and diffs written out "
    "(in the order where that is lowest). References that are whole lines stay above the bound "
    "with the same headers, as each costs tokens; what can go below it is references to "
    "sentences within a line (the documentation contexts use them) and, for the first, lean's "
    "shorter headers.",
    "",
    "| corpus | naive | repeated lines' tokens | repeat bound | with lean's headers | target "
    "| best lean / naive |",
    "|---|---|---|---|---|---|---|",
)


if __name__ == "__main__":
    main()
