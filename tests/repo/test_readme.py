"""README.md against the code: its settings table and its before/after example.

The README lists only the essential settings; each row it has must be a real key with the code's
default and every value the key allows. Its example shows the naive baseline and the context the
core renders for examples/readme.jsonl, and must be what the core renders today.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
from msgspec import inspect

from stream_ctx.settings import config_keys
from stream_ctx.settings.keys import Key, expected

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_EXAMPLE = re.compile(r"<!-- example: (\w+) -->\n```text\n(.*?)\n```", re.DOTALL)


def docs_hooks() -> ModuleType:
    """docs/hooks.py, the generator of the reference pages (not a package: loaded by path)."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config_rows() -> dict[str, tuple[str, str]]:
    """`key -> (default cell, whole row)` from the table under "## Essential settings"."""
    section = README.read_text(encoding="utf-8").split("\n## Essential settings\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = (cells[1], line)
    return rows


def _keys() -> dict[str, Key]:
    return dict(config_keys())


def test_readme_settings_are_real_keys() -> None:
    documented = set(_config_rows())
    assert len(documented) >= 5
    assert not documented - set(_keys()), f"not in code: {sorted(documented - set(_keys()))}"


def _matches(cell: str, default: object) -> bool:
    bare = cell.strip("`").strip('"')
    if default is None:
        return cell == "none"
    if isinstance(default, list):
        return bool(json.loads(bare) == default)
    if isinstance(default, bool):
        return bare == str(default).lower()
    if isinstance(default, int | float):
        # An integer reads as one and a float keeps its point, so the type shows too.
        return float(bare) == default and ("." in bare) == isinstance(default, float)
    return bare == default


@pytest.mark.parametrize("dotted", sorted(_config_rows()))
def test_readme_default_is_the_codes(dotted: str) -> None:
    cell, _ = _config_rows()[dotted]
    default = _keys()[dotted].default
    assert _matches(cell, default), f"README.md says {cell!r} for `{dotted}`, code {default!r}"


@pytest.mark.parametrize("dotted", sorted(_config_rows()))
def test_readme_states_what_the_type_allows(dotted: str) -> None:
    _, row = _config_rows()[dotted]
    info = _keys()[dotted].info
    kinds = info.types if isinstance(info, inspect.UnionType) else (info,)
    for kind in kinds:
        if isinstance(kind, inspect.LiteralType):
            missing = [v for v in kind.values if f"`{v}`" not in row and str(v) not in row]
            assert not missing, f"README.md's `{dotted}` row lacks {missing}"
        if isinstance(kind, inspect.IntType | inspect.FloatType):
            rule = expected(kind).removeprefix("an integer").removeprefix("a number").strip()
            assert rule in row, f"README.md's `{dotted}` row does not say {rule!r}"


def test_readme_example_is_what_the_core_renders() -> None:
    hooks = docs_hooks()
    bundle = hooks.example_bundle()
    text = README.read_text(encoding="utf-8")
    shown = dict(_EXAMPLE.findall(text))
    expected_blocks = {
        "naive": hooks.naive_text(bundle).rstrip("\n"),
        "context": bundle["context"].rstrip("\n"),
    }
    for name, rendered in expected_blocks.items():
        assert shown.get(name) == rendered, (
            f"README.md's `{name}` example is not what the core renders for"
            f" examples/readme.jsonl; paste this instead:\n{rendered}"
        )
    stats = bundle["stats"]
    assert f"({stats['tokens_naive']} tokens" in text, "README.md's naive token count is stale"
    assert f"({stats['tokens_bundle']} tokens" in text, "README.md's context token count is stale"
