"""Where a bundle's latency goes inside `stream-ctx run`, from benchmarks/latency_probe's files.

    python benchmarks/latency_stages.py DIR/*.jsonl

Per run and level, the p50/p90/p99 of each stage of a finalize's way to the wire (ms):
`to_fetch` from the finalize record's create time to the fetch that returned it (the broker's
fetch hold, and waiting while earlier batches are processed), `queued` behind records ahead of
it in its batch, `finalize` in the core, `to_request` from the bundle's send() to the start of
the produce request carrying it, `request` until aiokafka has read that request's answer (which
waits for the loop, so a busy loop stretches it past the bundle's arrival); and the share of bundles
whose request started before the runner's next finalize (the rest waited one out at least).
Reads files only: a second or two.
"""

from __future__ import annotations

import bisect
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

STAGES = ("to_fetch", "queued", "finalize", "to_request", "request")


def stages(path: Path) -> tuple[str, dict[str, list[dict[str, float]]], dict[str, float]]:
    """(the run's label, each level's stage rows by the level's id prefix, on-wire share)."""
    label, fetched, finalizes, sends, requests = "", {}, {}, {}, []
    for line in path.read_text().splitlines():
        row: list[Any] = json.loads(line)
        kind = row[0]
        if kind == "label":
            label = row[1]
        elif kind == "fetched":
            for partition, offset, created_ms in row[2]:
                fetched[partition, offset] = (row[1], created_ms / 1000)
        elif kind == "finalize":
            finalizes[row[1]] = row
        elif kind == "send":
            sends[row[1]] = row[2]
        elif kind == "request" and row[3]:
            requests.append((row[1], row[2]))
    requests.sort()
    starts = [start for start, _ in requests]
    finalize_starts = sorted(row[4] for row in finalizes.values())
    levels: dict[str, list[dict[str, float]]] = {}
    on_wire: dict[str, list[bool]] = {}
    for bundle_id, (_, _, partition, offset, started, ended) in finalizes.items():
        sent, level = sends.get(bundle_id), bundle_id.split("-", 1)[0]
        n = bisect.bisect_left(starts, sent) if sent is not None else len(starts)
        if level == "warm" or n == len(starts) or sent is None:
            continue
        fetched_at, created = fetched[partition, offset]
        request_start, request_end = requests[n]
        levels.setdefault(level, []).append(
            {
                "to_fetch": fetched_at - created,
                "queued": started - fetched_at,
                "finalize": ended - started,
                "to_request": request_start - sent,
                "request": request_end - request_start,
            }
        )
        following = bisect.bisect_right(finalize_starts, sent)
        next_finalize = finalize_starts[following] if following < len(finalize_starts) else 1e18
        on_wire.setdefault(level, []).append(request_start < next_finalize)
    shares = {level: sum(hits) / len(hits) for level, hits in on_wire.items()}
    return label, levels, shares


def _spread(values: Sequence[float]) -> str:
    ordered = sorted(v * 1000 for v in values)
    p90, p99 = (ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.9, 0.99))
    return f"{statistics.median(ordered):.1f} / {p90:.1f} / {p99:.1f}"


def table(paths: Sequence[Path]) -> str:
    """A row per run and level: each stage's p50 / p90 / p99 in ms, and the on-wire share."""
    head = "| run | level | bundles | " + " | ".join(STAGES) + " | on the wire before the next |"
    rows = [head, "|" + "---|" * (len(STAGES) + 4)]
    for path in paths:
        label, levels, shares = stages(path)
        for level, found in sorted(levels.items()):
            spreads = " | ".join(_spread([r[s] for r in found]) for s in STAGES)
            rows.append(
                f"| {label or path.stem} | {level} | {len(found)} | {spreads} | "
                f"{shares[level]:.0%} |"
            )
    return "\n".join(rows)


def main() -> None:
    print(table([Path(p) for p in sys.argv[1:]]))


if __name__ == "__main__":
    main()
