"""`benchmarks/suite.py --quick` runs end to end, so the benchmark command cannot rot.

Nothing here looks at the figures: benchmarks assert nothing, and neither does this test beyond
"the command finishes and writes what it promises".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suite.py"
# --quick takes under a minute on a 2-core machine; three minutes leaves room for a loaded CI host.
SUITE_TIMEOUT_S = 180.0
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RESULT_KEYS = {
    "machine",
    "sizes",
    "texts",
    "real_text",
    "side_by_side",
    "settings",
    "latency",
    "held",
    "max_items",
    "memory",
    "core",
    "profile",
    "targets",
    "elapsed_s",
}


def test_quick_suite_writes_results_table_and_chart(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SUITE), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert RESULT_KEYS <= results.keys()
    # The side by side runs on real text first (the targets' text), then the issue's synthetic.
    assert results["texts"] == [results["real_text"], "synthetic"]
    assert results["side_by_side"].keys() == set(results["texts"])
    for row in results["side_by_side"].values():
        assert row.keys() >= {
            "workload",
            "ceiling",
            "quix",
            "runner",
            "runner_python",
            "count_bound",
            "repeat_bound",
        }
        assert row["runner"]["bundles"] == row["workload"]["finalizes"]
        assert row["runner_python"]["bundles"] == row["workload"]["finalizes"]
        # The peer's row runs wherever the bench extra is installed, as CI installs it.
        assert row["quix"]["events"] == row["workload"]["events"]
    assert len(results["targets"]) == 7
    assert all({"target", "measured", "met"} <= t.keys() for t in results["targets"])
    assert [lv["fraction_of_max"] for lv in results["latency"]["levels"]] == [0.25, 0.5, 0.75]
    assert (tmp_path / "suite.png").read_bytes().startswith(PNG_MAGIC)
    page = (tmp_path / "suite.md").read_text()
    assert "## Targets" in page
    assert "### Settings behind these figures" in page
    assert page.count("| stream-ctx Runner |") == 2
    assert page.count("| stream-ctx Runner, Python core |") == 2
    assert set(results["core"]["cpu_ms_per_event"]) == {"compiled", "python"}
    assert done.stdout.count("| stream-ctx Runner |") == 2
    assert done.stdout.count("| exact-count bound |") == 2
    assert done.stdout.count("| exact-repeat bound |") == 2
    assert done.stdout.count("| floor |") == 2
    assert all("repeat_bound" in point for point in results["max_items"]["points"])
