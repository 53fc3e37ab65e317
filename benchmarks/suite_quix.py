"""The peer row of benchmarks/suite.py: a Quix Streams app doing the top-N part of the job.

Per conversation (the record key) it keeps the window in Quix's state: items at or above the
salience threshold, a repeated id merged to its highest salience, at most `max_items`, the
lowest-priority one evicted (stream-ctx's scoring functions). Each
finalize publishes the window's items in priority order, ids and contents as JSON: no dedup, no
rendering, no token counts. `end` drops the state. Run as its own process, like suite_child.py:

    python benchmarks/suite_quix.py '<json spec>'   # prints one line: RESULT {...}

Quix Streams is in the `bench` extra; `is_available()` tells the suite whether to run the row.
A run lasts as long as its workload takes to drain (seconds in the suite).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.window.scoring import lowest_ranked, priority, rank_key

sys.path.insert(0, str(Path(__file__).resolve().parent))
from suite_child import RESULT_PREFIX, rss_kib

Window = dict[str, list[Any]]
"""Item id -> [salience, created_at, content]: what the state holds per conversation."""


def is_available() -> bool:
    """Whether Quix Streams is installed (`pip install -e '.[bench]'`)."""
    return importlib.util.find_spec("quixstreams") is not None


def add_items(window: Window, items: list[dict[str, Any]], *, ts: int, cfg: BundleConfig) -> None:
    """Admit a retrieval's items into the window, evicting the lowest-ranked past max_items."""
    for item in items:
        salience = float(item["salience"])
        if salience < cfg.min_salience_threshold:
            continue
        created_at = item.get("created_at") or ts
        held = window.get(item["id"])
        if held is not None:  # a re-retrieval: newest content and time, the higher salience
            window[item["id"]] = [max(held[0], salience), created_at, item["content"]]
            continue
        window[item["id"]] = [salience, created_at, item["content"]]
        if len(window) > cfg.max_items:
            entries = [(key, value[0], value[1]) for key, value in window.items()]
            del window[entries[lowest_ranked(entries, now_ms=ts, cfg=cfg)][0]]


def ranked(window: Window, *, ts: int, cfg: BundleConfig) -> list[dict[str, Any]]:
    """The window's items in priority order at `ts`."""
    keyed = sorted(
        window.items(),
        key=lambda kv: rank_key(
            priority(kv[1][0], kv[1][1], now_ms=ts, cfg=cfg), kv[1][0], kv[1][1], kv[0]
        ),
    )
    return [{"id": key, "content": value[2]} for key, value in keyed]


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the app until `expect_events` are processed and committed; times like suite_child's."""
    from quixstreams import Application, State

    cfg = BundleConfig()
    expect = int(spec["expect_events"])
    points: dict[str, dict[str, float]] = {}
    processed = 0

    def note(name: str) -> None:
        if name not in points:
            points[name] = {"t": time.perf_counter(), "cpu_s": time.process_time()}

    class _Timed(Application):
        # Quix's own rebalance callback and run loop (3.28.1), wrapped only to take the times.
        def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
            if partitions:
                note("assigned")
            super()._on_assign(consumer, partitions)

        def _run_dataframe(self, sink: Any = None) -> None:
            super()._run_dataframe(sink)
            note("done")  # after the loop's last forced checkpoint: produced and committed

    def on_processed(topic: str, partition: int, offset: int) -> None:
        nonlocal processed
        processed += 1
        if processed >= expect:
            app.stop()

    app = _Timed(
        broker_address=spec["bootstrap"],
        consumer_group=spec["group_id"],
        auto_offset_reset="earliest",
        state_dir=tempfile.mkdtemp(prefix="quix-state-"),
        # Tansu has no idempotent producer; stream-ctx runs without it too.
        producer_extra_config={"enable.idempotence": False},
        # librdkafka's default session is 45 s: Tansu's first join would take half of it.
        consumer_extra_config={
            "session.timeout.ms": spec["session_timeout_ms"],
            "heartbeat.interval.ms": spec["session_timeout_ms"] // 3,
        },
        on_message_processed=on_processed,
        loglevel="WARNING",
    )
    source = app.topic(spec["input_topic"], key_deserializer="str", value_deserializer="json")
    sink = app.topic(spec["output_topic"], key_serializer="str", value_serializer="json")

    def step(event: dict[str, Any], state: State[str, Any]) -> dict[str, Any] | None:
        kind = event["type"]
        if kind == "end":
            state.delete("window")
            return None
        window: Window = state.get("window", {})
        if kind == "retrieval":
            add_items(window, event["items"], ts=event["ts"], cfg=cfg)
            state.set("window", window)
            return None
        return {
            "conversation_id": event["conversation_id"],
            "event_id": event["event_id"],
            "items": ranked(window, ts=event["ts"], cfg=cfg),
        }

    frame = app.dataframe(source).apply(step, stateful=True).filter(lambda out: out is not None)
    frame.to_topic(sink)
    started = time.perf_counter()
    app.run()
    return {
        "points": points,
        "started_t": started,
        "events": processed,
        "peak_rss_kib": rss_kib("VmHWM"),
    }


def main() -> None:
    print(RESULT_PREFIX + json.dumps(run(json.loads(sys.argv[1]))), flush=True)


if __name__ == "__main__":
    main()
