"""The score table of docs/development/mutation.md, from mutmut's kept verdicts and the list of
equivalent mutants. Takes a few seconds; it measures nothing itself.

Run after `mutmut run` (it reads `mutmut results --all true`):

    .venv/bin/python benchmarks/mutation_table.py

A mutant that timed out counts as killed (it loops, which a test run notices). A mutant named in
docs/development/mutation-equivalent.txt must have survived: one that a test kills is not
equivalent, and the script stops on it.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# mutmut keeps its verdicts here; a fresh clone has none.
VERDICTS = ROOT / "mutants" / "mutmut-stats.json"
FIRST_RUN = "nice -n 19 .venv/bin/mutmut run --max-children 1"
EQUIVALENT = ROOT / "docs" / "development" / "mutation-equivalent.txt"
PREFIX = "stream_ctx.core."
KILLED = {"killed", "timeout"}
COLUMNS = ("mutants", "checked", "killed", "equivalent", "survived", "no tests", "not checked")


def results() -> dict[str, str]:
    """Mutant name -> mutmut's status, for every mutant of the core."""
    mutmut = Path(sys.executable).with_name("mutmut")
    out = subprocess.run(
        [str(mutmut), "results", "--all", "true"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = {}
    for line in out.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name.startswith(PREFIX):
            found[name] = status
    return found


def equivalent() -> set[str]:
    """The names in mutation-equivalent.txt (one a line, then the reason; # comments)."""
    names = set()
    for line in EQUIVALENT.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            names.add(line.split()[0])
    return names


def module_of(mutant: str) -> str:
    """The core module a mutant belongs to, by its path under the core: `window/accumulator`."""
    return "/".join(mutant.removeprefix(PREFIX).split(".")[:-1])


def tally(status: dict[str, str], same: set[str]) -> dict[str, Counter[str]]:
    unknown = sorted(same - status.keys())
    not_surviving = sorted(n for n in same & status.keys() if status[n] != "survived")
    if unknown or not_surviving:
        sys.exit(
            f"mutation-equivalent.txt names mutants mutmut does not have: {unknown}, "
            f"or that did not survive: {[(n, status[n]) for n in not_surviving]}"
        )
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    for name, state in status.items():
        counts = by_module[module_of(name)]
        counts["mutants"] += 1
        if state == "not checked":
            counts["not checked"] += 1
            continue
        counts["checked"] += 1
        if state in KILLED:
            counts["killed"] += 1
        elif name in same:
            counts["equivalent"] += 1
        elif state == "no tests":
            counts["no tests"] += 1
        else:
            counts["survived"] += 1  # survived, suspicious, segfault: a test gap until triaged
    return by_module


def score(counts: Counter[str]) -> str:
    relevant = counts["checked"] - counts["equivalent"]
    return f"{100 * counts['killed'] / relevant:.1f}%" if relevant else "-"


def main() -> None:
    if not VERDICTS.exists():
        sys.exit(
            f"no mutation verdicts in {VERDICTS.parent}: run `{FIRST_RUN}` first (hours of CPU on"
            " a first run; docs/development/mutation.md says how), then this script again"
        )
    by_module = tally(results(), equivalent())
    total: Counter[str] = sum(by_module.values(), Counter())
    print("| module | " + " | ".join(COLUMNS) + " | killed / non-equivalent checked |")
    print("|---|" + "---:|" * (len(COLUMNS) + 1))
    for module in sorted(by_module):
        counts = by_module[module]
        cells = " | ".join(str(counts[c]) for c in COLUMNS)
        print(f"| {module} | {cells} | {score(counts)} |")
    cells = " | ".join(str(total[c]) for c in COLUMNS)
    print(f"| **all** | {cells} | {score(total)} |")
    relevant = total["checked"] - total["equivalent"]
    print(f"\nkilled {total['killed']} of {relevant} non-equivalent checked: {score(total)}")


if __name__ == "__main__":
    main()
