"""Per-stage CPU attribution of a cProfile run of the runner (used by benchmarks/suite.py).

cProfile keeps caller -> callee edges, not whole stacks. Each function is classified by the stage
it belongs to (decode_event is decode, anything in dag.py is dedup, aiokafka is Kafka I/O, ...);
an unclassified function (a builtin, msgspec, asyncio, the standard library) takes the stage of
whoever called it, weighted by the time each caller spent in it, so a builtin called from both
encode_bundle and the changelog writer is split between the two. Self time is then summed per
stage. What nothing claims (the event loop polling sockets) is "event loop and sockets".
Attribution of a finished profile takes a second or two.
"""

from __future__ import annotations

import pstats
from collections import defaultdict
from collections.abc import Mapping

Func = tuple[str, int, str]

# Stage of a function, by (path fragment, function name or "*" for the whole module); first match.
_RULES: tuple[tuple[str, str, str], ...] = (
    ("stream_ctx/shell/processing/intake.py", "*", "decode"),
    ("stream_ctx/core/wire/codec.py", "decode_event", "decode"),
    ("stream_ctx/core/wire/codec.py", "encode_bundle", "encode"),
    ("stream_ctx/core/window/accumulator.py", "add", "accumulate"),
    ("stream_ctx/core/assembly/dag.py", "*", "dedup"),
    ("stream_ctx/core/text/repeats.py", "*", "dedup"),
    ("stream_ctx/core/text/textindex.py", "*", "dedup"),
    ("stream_ctx/core/counting/tokenizer.py", "*", "tokenize"),
    ("/tiktoken/", "*", "tokenize"),
    ("stream_ctx/core/entries/render.py", "*", "render"),
    ("stream_ctx/core/entries/entry.py", "*", "render"),
    ("stream_ctx/core/counting/segment.py", "*", "render"),
    ("stream_ctx/core/assembly/prefix.py", "*", "prefix reuse"),
    ("stream_ctx/shell/state/changelog.py", "*", "changelog records"),
    ("stream_ctx/core/conversation/processor.py", "take_changes", "changelog records"),
    ("stream_ctx/shell/http/metrics.py", "*", "metrics"),
    ("/prometheus_client/", "*", "metrics"),
    ("/aiokafka/", "*", "Kafka I/O (aiokafka)"),
    ("stream_ctx/core/", "*", "core, other (ranking, bundle assembly)"),
    ("stream_ctx/shell/", "*", "runner, other"),
)
# Shared helpers take the stage of their caller.
_INHERITING = ("stream_ctx/core/text/textmatch.py",)
ROOT = "event loop and sockets"
# The stages the targets name, in their order; the others follow.
STAGES = (
    "decode",
    "accumulate",
    "dedup",
    "tokenize",
    "render",
    "encode",
    "Kafka I/O (aiokafka)",
    ROOT,
    "changelog records",
    "prefix reuse",
    "metrics",
    "core, other (ranking, bundle assembly)",
    "runner, other",
)
# Enough rounds for the weights of a call chain 30 unclassified frames deep to settle.
_ROUNDS = 30


def _classify(func: Func) -> str | None:
    path, _, name = func
    path = path.replace("\\", "/")
    if any(fragment in path for fragment in _INHERITING):
        return None
    for fragment, wanted, stage in _RULES:
        if fragment in path and wanted in ("*", name):
            return stage
    return None


def attribute(stats: pstats.Stats) -> dict[str, float]:
    """CPU seconds per stage (self time, unclassified callees charged to their callers' stage)."""
    table: Mapping[
        Func, tuple[int, int, float, float, Mapping[Func, tuple[int, int, float, float]]]
    ]
    table = stats.stats  # type: ignore[attr-defined]
    stage_of = {func: _classify(func) for func in table}
    context: dict[Func, dict[str, float]] = {
        func: {stage: 1.0} if stage is not None else {ROOT: 1.0} for func, stage in stage_of.items()
    }
    for _ in range(_ROUNDS):
        for func, (_, _, _, _, callers) in table.items():
            if stage_of[func] is not None or not callers:
                continue
            mixed: dict[str, float] = defaultdict(float)
            total = sum(edge[3] for edge in callers.values())
            for caller, edge in callers.items():
                weight = edge[3] / total if total > 0 else 1.0 / len(callers)
                for stage, share in context.get(caller, {ROOT: 1.0}).items():
                    mixed[stage] += weight * share
            context[func] = dict(mixed)
    seconds: dict[str, float] = defaultdict(float)
    for func, (_, _, self_time, _, callers) in table.items():
        own = stage_of[func]
        if own is not None:
            seconds[own] += self_time
        elif not callers:
            seconds[ROOT] += self_time
        else:
            for caller, edge in callers.items():
                for caller_stage, share in context.get(caller, {ROOT: 1.0}).items():
                    seconds[caller_stage] += edge[2] * share
    return {stage: round(seconds.get(stage, 0.0), 4) for stage in STAGES}


def top_functions(stats: pstats.Stats, *, count: int = 15) -> list[dict[str, object]]:
    """The functions with the most self time, with their cumulative time."""
    table = stats.stats  # type: ignore[attr-defined]
    rows = sorted(table.items(), key=lambda kv: kv[1][2], reverse=True)[:count]
    return [
        {
            "function": _name(func),
            "self_s": round(entry[2], 4),
            "cumulative_s": round(entry[3], 4),
            "calls": entry[1],
        }
        for func, entry in rows
    ]


def cumulative(stats: pstats.Stats, names: Mapping[str, tuple[str, str]]) -> dict[str, float]:
    """Cumulative seconds of named functions: {label: (path fragment, function name)}."""
    table = stats.stats  # type: ignore[attr-defined]
    found: dict[str, float] = {}
    for label, (fragment, wanted) in names.items():
        found[label] = round(
            sum(
                entry[3]
                for func, entry in table.items()
                if fragment in func[0].replace("\\", "/") and func[2] == wanted
            ),
            4,
        )
    return found


def _name(func: Func) -> str:
    path, line, name = func
    if path == "~":
        return name
    for marker in ("/stream_ctx/", "/site-packages/", "/lib/python"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{line}({name})"
