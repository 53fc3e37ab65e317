"""README.md's config table against the settings types: every key, its default, what it allows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from msgspec import inspect

from stream_ctx.shell.config_keys import Key, expected
from stream_ctx.shell.settings import config_keys

README = Path(__file__).resolve().parents[2] / "README.md"
# The table's name for [kafka.client], whose keys connection.py lists.
_CLIENT_ROW = "kafka.client.*"


def _config_rows() -> dict[str, tuple[str, str]]:
    """`key -> (default cell, whole row)` from the table under "## Configuration"."""
    section = README.read_text(encoding="utf-8").split("\n## Configuration\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = (cells[1], line)
    return rows


def _keys() -> dict[str, Key]:
    keys = dict(config_keys())
    keys[_CLIENT_ROW] = keys.pop("kafka.client")
    return keys


def test_readme_config_table_lists_exactly_the_settings_keys() -> None:
    documented, defined = set(_config_rows()), set(_keys())
    assert not defined - documented, f"keys missing from README.md: {sorted(defined - documented)}"
    assert not documented - defined, f"README.md keys not in code: {sorted(documented - defined)}"


def _matches(cell: str, default: object) -> bool:
    bare = cell.strip("`").strip('"')
    if default is None:
        return cell == "none"
    if isinstance(default, dict):
        return cell == "" and not default
    if isinstance(default, list):
        return bool(json.loads(bare) == default)
    if isinstance(default, bool):
        return bare == str(default).lower()
    if isinstance(default, int | float):
        # An integer reads as one and a float keeps its point, so the type shows too.
        return float(bare) == default and ("." in bare) == isinstance(default, float)
    return bare == default


@pytest.mark.parametrize("dotted", sorted(_keys()))
def test_readme_default_is_the_codes(dotted: str) -> None:
    row = _config_rows().get(dotted)
    assert row is not None, f"`{dotted}` has no row in README.md's config table"
    cell, _ = row
    default = _keys()[dotted].default
    assert _matches(cell, default), f"README.md says {cell!r} for `{dotted}`, code {default!r}"


@pytest.mark.parametrize("dotted", sorted(_keys()))
def test_readme_states_what_the_type_allows(dotted: str) -> None:
    found = _config_rows().get(dotted)
    assert found is not None, f"`{dotted}` has no row in README.md's config table"
    _, row = found
    info = _keys()[dotted].info
    kinds = info.types if isinstance(info, inspect.UnionType) else (info,)
    for kind in kinds:
        if isinstance(kind, inspect.LiteralType):
            missing = [v for v in kind.values if f"`{v}`" not in row and str(v) not in row]
            assert not missing, f"README.md's `{dotted}` row lacks {missing}"
        if isinstance(kind, inspect.IntType | inspect.FloatType):
            rule = expected(kind).removeprefix("an integer").removeprefix("a number").strip()
            assert rule in row, f"README.md's `{dotted}` row does not say {rule!r}"
