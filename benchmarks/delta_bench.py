"""Delta bundles on real text: tokens sent per conversation in `delta` mode against `full`, by
conversation length; every delta rebuilt and its history read back; replay time in each mode.
Asserts nothing.

    python benchmarks/delta_bench.py [--corpus numpy|stdlib ...] [--write PATH]
    python benchmarks/delta_bench.py --instructions [--corpus numpy] [--conversations 40]

About a minute per corpus on a 2-core machine (both by default: ~2.5 minutes); `--instructions`
runs under valgrind and takes far longer.
"""

from __future__ import annotations

import argparse
import copy
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import suite_report

from stream_ctx import BundleConfig, ContextProcessor, read_context, rebuild_full
from stream_ctx.core.assembly.delta import read_delta
from stream_ctx.core.counting.tokenizer import get_tokenizer
from stream_ctx.core.entries.reader import ReadItem
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.codec import encode_bundle
from stream_ctx.core.wire.events import BundleMode, Event, Finalize, RenderOrder
from stream_ctx.corpora.realtext import workload

TARGET = 0.35
ORDERS: tuple[RenderOrder, ...] = ("priority", "stable")


@dataclass
class Checked:
    """One delta-mode replay, each bundle checked against a full-mode twin of its finalize."""

    sent: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    full: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    turns: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    first: dict[str, int] = field(default_factory=dict)
    deltas: int = 0
    fallbacks: int = 0
    rebuilt_equal: int = 0
    read_equal: int = 0


def _stated(items: list[ReadItem]) -> list[tuple[str, str, str]]:
    return sorted((it.id, repr((it.kind, it.attributes, it.tags)), it.content) for it in items)


def checked_run(events: list[Event], config: BundleConfig) -> Checked:
    """Replay in delta mode; before each finalize a copy of the processor answers it in full mode,
    and the delta, rebuilt from the previous full bundle, must encode exactly as that answer."""
    processor = ContextProcessor(config)
    result = Checked()
    entries: dict[str, list[ReadItem]] = {}
    last_full: dict[str, Bundle] = {}
    for position, event in enumerate(events):
        twin = None
        if isinstance(event, Finalize):
            twin = copy.deepcopy(processor, {id(processor.tokenizer): processor.tokenizer})
        bundle = processor.apply(event, position=position)
        if bundle is None or twin is None:
            continue
        expected = twin.apply(msgspec.structs.replace(event, mode="full"), position=position)
        if expected is None:
            raise RuntimeError(f"the full-mode twin of {event.event_id!r} gave no bundle")
        cid = bundle.conversation_id
        if bundle.mode == "full":
            full, current = bundle, read_context(bundle.context)
            entries[cid] = current
            result.fallbacks += cid in last_full
        else:
            full = rebuild_full(bundle, last_full[cid])
            current, new = read_delta(bundle.context, entries[cid])
            entries[cid] += new
            result.deltas += 1
        last_full[cid] = full
        result.rebuilt_equal += encode_bundle(full) == encode_bundle(expected)
        result.read_equal += _stated(current) == _stated(read_context(expected.context))
        result.sent[cid] += bundle.stats.tokens_bundle
        result.full[cid] += expected.stats.tokens_bundle
        result.turns[cid] += 1
        result.first.setdefault(cid, bundle.stats.tokens_bundle)
    return result


def replay_seconds(events: list[Event], config: BundleConfig) -> float:
    """CPU seconds to apply every event with a fresh processor and tokenizer cache."""
    processor = ContextProcessor(config, tokenizer=type(get_tokenizer())())
    started = time.process_time()
    for position, event in enumerate(events):
        processor.apply(event, position=position)
    return time.process_time() - started


def replay_instructions(corpus: str, conversations: int, max_items: int) -> dict[str, int]:
    """Instructions (callgrind) of replaying the workload in each mode: each child replays it
    once after a warm-up, less a child that only does the warm-up; the load does not move them."""
    counts = {}
    for what in ("none", "full", "delta"):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "callgrind.out"
            child = [sys.executable, __file__, "--child", what, "--corpus", corpus]
            child += ["--conversations", str(conversations), "--max-items", str(max_items)]
            subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *child],
                check=True,
                capture_output=True,
            )
            total = re.search(r"^totals: (\d+)", out.read_text(), re.MULTILINE)
            if total is None:
                raise RuntimeError(f"callgrind wrote no totals line for the {what!r} child")
            counts[what] = int(total.group(1))
    return {mode: counts[mode] - counts["none"] for mode in ("full", "delta")}


def child(mode: str, corpus: str, conversations: int, max_items: int) -> None:
    """The replay callgrind counts: workload and tokenizer built, one bundle as a warm-up."""
    events = workload(corpus, conversations=conversations)
    warm = ContextProcessor(BundleConfig(max_items=max_items))
    for event in workload(corpus, conversations=1, seed=1)[:2]:
        warm.apply(event)
    if mode != "none":
        config = msgspec.convert({"max_items": max_items, "mode": mode}, BundleConfig)
        replay_seconds(events, config)


def distribution(result: Checked) -> list[str]:
    """Markdown rows: per conversation length, the delta/full ratio of tokens sent, and the
    share of the full total that the first (always full) bundle takes, a floor for the ratio."""
    by_turns: dict[str, list[str]] = defaultdict(list)
    for cid, count in result.turns.items():
        by_turns[str(count)].append(cid)
    rows = []
    for turns, cids in [
        *sorted(by_turns.items(), key=lambda kv: int(kv[0])),
        ("all", [*result.turns]),
    ]:
        ratios = sorted(result.sent[c] / result.full[c] for c in cids)
        floors = sorted(result.first[c] / result.full[c] for c in cids)
        full, sent = sum(result.full[c] for c in cids), sum(result.sent[c] for c in cids)
        within = sum(r <= TARGET for r in ratios)
        rows.append(
            f"| {turns} | {len(cids)} | {full:,} | {sent:,} | **{sent / full:.3f}** "
            f"| {ratios[0]:.3f} | {statistics.median(ratios):.3f} | {ratios[-1]:.3f} "
            f"| {within}/{len(cids)} | {statistics.median(floors):.3f} / {floors[-1]:.3f} |"
        )
    return rows


def corpus_report(corpus: str, conversations: int, max_items: int, rounds: int) -> list[str]:
    events = workload(corpus, conversations=conversations)
    bundles = sum(isinstance(e, Finalize) for e in events)
    lines = [
        f"## corpus `{corpus}`",
        "",
        f"{conversations} conversations, {len(events)} events, {bundles} bundles, "
        f"max_items {max_items}, cl100k_base.",
    ]
    for order in ORDERS:
        result = checked_run(events, BundleConfig(max_items=max_items, order=order, mode="delta"))
        lines += [
            "",
            f"order `{order}`: {result.deltas} deltas, {result.fallbacks} fallbacks to full after"
            f" the first bundle; rebuilt byte for byte {result.rebuilt_equal}/{bundles}; history"
            f" read back as the full context's items {result.read_equal}/{bundles}.",
            "",
            "| turns | conversations | tokens full | tokens delta | delta / full | min "
            "| median | max | conversations <= 0.35 | 1st bundle / full: median / max |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *distribution(result),
        ]
    full_s: list[float] = []
    delta_s: list[float] = []
    for round_ in range(rounds):
        modes: tuple[BundleMode, ...] = ("full", "delta") if round_ % 2 == 0 else ("delta", "full")
        for mode in modes:
            seconds = replay_seconds(events, BundleConfig(max_items=max_items, mode=mode))
            (full_s if mode == "full" else delta_s).append(seconds)
    paired = sorted(d / f for d, f in zip(delta_s, full_s, strict=True))
    lines += [
        "",
        f"Replay CPU time, `priority` order, {rounds} paired runs (alternating which goes first;"
        f" fresh processor and token-count cache each): full median {statistics.median(full_s):.2f}"
        f" s, delta median {statistics.median(delta_s):.2f} s; delta / full per pair: median"
        f" {statistics.median(paired):.3f}, range {paired[0]:.3f}-{paired[-1]:.3f}.",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=["numpy", "stdlib"], action="append")
    parser.add_argument("--conversations", type=int, default=150)
    parser.add_argument("--max-items", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=6, help="paired timing runs per corpus")
    parser.add_argument("--write", metavar="PATH", help="also write the report as markdown here")
    parser.add_argument("--instructions", action="store_true", help="count replays in callgrind")
    parser.add_argument("--child", choices=["none", "full", "delta"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    corpora = args.corpus or ["numpy", "stdlib"]
    if args.child:
        child(args.child, corpora[0], args.conversations, args.max_items)
        return
    if args.instructions:
        for corpus in corpora:
            counts = replay_instructions(corpus, args.conversations, args.max_items)
            print(
                f"corpus `{corpus}`, {args.conversations} conversations, `priority` order:"
                f" replay {counts['full']:,} instructions in full mode, {counts['delta']:,} in"
                f" delta mode ({counts['delta'] / counts['full']:.3f}x)",
                flush=True,
            )
        return
    m = suite_report.machine()
    lines = [
        HEADER,
        "",
        f"Measured {m['date']} on {m['nproc']} CPUs ({m['cpu_model']}), {m['python']},"
        f" stream-ctx {m['stream_ctx']} at {m['commit']}.",
    ]
    for corpus in corpora:
        section = corpus_report(corpus, args.conversations, args.max_items, args.rounds)
        print("\n".join(section), flush=True)
        lines += ["", *section]
    if args.write:
        Path(args.write).write_text("\n".join(lines) + "\n")


HEADER = """# Delta bundles on real text

Written by `python benchmarks/delta_bench.py --write docs/benchmarks/delta.md`; every figure below
comes from that one run. The workload is `stream_ctx.corpora.realtext` (the one
`benchmarks/context_bench.py` uses): 4-10 turns per conversation, each retrieving 2-5 chunks
near what it saw before, then a finalize. Tokens are everything in the contexts
(`stats.tokens_bundle`, exact), summed per conversation: `full` is what full mode sends, `delta`
what delta mode sends (its first bundle is full). The ratio columns are over conversations of
that length. Every bundle is also checked: a copy of the processor answers the same finalize in
full mode, and `rebuild_full(delta, previous full)` must encode to the same bytes; reading the
contexts as a history (`read_context`, then `read_delta`) must give the items the full context
states. Replay times are CPU seconds and move with the machine's load."""


if __name__ == "__main__":
    main()
