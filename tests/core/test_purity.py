"""The core is pure (STYLE.md section 1): no I/O, concurrency, randomness or clock in core/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import stream_ctx.core

CORE = Path(stream_ctx.core.__file__).resolve().parent
MODULES = sorted(CORE.rglob("*.py"))
BANNED_MODULES = frozenset(
    {
        "anyio",
        "aiokafka",
        "asyncio",
        "socket",
        "time",
        "random",
        "os",
        "subprocess",
        "threading",
        "multiprocessing",
        "selectors",
        "secrets",
        "uuid",
        "importlib",
        "io",
        "pathlib",
        "shutil",
        "tempfile",
        "glob",
    }
)
# Attribute calls that read a clock or the environment, whatever the receiver is named.
BANNED_CALLS = frozenset(
    {
        "now",
        "utcnow",
        "today",
        "time",
        "time_ns",
        "monotonic",
        "monotonic_ns",
        "perf_counter",
        "perf_counter_ns",
        "getenv",
        "open",
    }
)


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else []
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in BANNED_CALLS or name == "__import__":
                found.append(f"{path.name}:{node.lineno} calls {name}()")
            continue
        else:
            continue
        found += [
            f"{path.name}:{node.lineno} imports {name}"
            for name in names
            if name.split(".")[0] in BANNED_MODULES
        ]
    return found


def test_core_modules_are_found() -> None:
    names = {path.stem for path in MODULES}
    core = {"events", "config", "scoring", "accumulator", "dag", "render", "processor", "repeats"}
    assert core | {"reader"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(CORE)))
def test_core_module_is_pure(path: Path) -> None:
    assert _violations(path) == []


def test_purity_check_catches_banned_code(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os.path\nfrom time import monotonic\nimport asyncio as aio\n"
        "from datetime import datetime\nx = datetime.now()\nfrom . import sibling\n"
        "from pathlib import Path\nimport io\ntext = open('f').read()\n"
    )
    assert sorted(_violations(sample), key=lambda found: int(found.split(":")[1].split()[0])) == [
        "sample.py:1 imports os.path",
        "sample.py:2 imports time",
        "sample.py:3 imports asyncio",
        "sample.py:5 calls now()",
        "sample.py:7 imports pathlib",
        "sample.py:8 imports io",
        "sample.py:9 calls open()",
    ]
