"""`benchmarks/serve_bench.py` runs end to end on a tiny load, so the benchmark cannot rot.

Nothing here looks at the figures beyond "each one is printed".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "serve_bench.py"
# A broker, a processor's group join (~6 s), serve's start and a few seconds of requests.
BENCH_TIMEOUT_S = 180.0
LINES = (
    "cached GET .../bundle, one at a time:",
    "cached GET .../bundle:",
    "POST .../finalize (end to end):",
    "serve memory per held conversation (RSS):",
    "store memory per held conversation (tracemalloc):",
)


def test_serve_benchmark_prints_every_figure() -> None:
    tiny = ["--conversations", "8", "--seconds", "1", "--get-rate", "20", "--finalize-rate", "4"]
    done = subprocess.run(
        [sys.executable, str(BENCH), *tiny],
        capture_output=True,
        text=True,
        timeout=BENCH_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for line in LINES:
        assert line in done.stdout, done.stdout
