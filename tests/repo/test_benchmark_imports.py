"""The benchmark scripts import each other in one direction: no import circle among them."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _graph() -> dict[str, set[str]]:
    """Each script's imports of other scripts, wherever in its body they stand."""
    scripts = {path.stem for path in BENCHMARKS.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name in scripts:
        tree = ast.parse((BENCHMARKS / f"{name}.py").read_text(encoding="utf-8"))
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
        graph[name] = found & scripts - {name}
    return graph


def test_the_benchmark_scripts_import_each_other_without_a_circle() -> None:
    graph = _graph()
    assert "suite_load" in graph["suite"]
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        raise AssertionError(" -> ".join(reversed(error.args[1]))) from None
