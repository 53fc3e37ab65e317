"""docs/benchmarks/suite.md's settings table against the code: a moved default means a stale page.

The benchmark report writes the table from the settings types and the core's limits; this test
reads it back, so a default changed in code without regenerating the page (or a value typed into
the page by hand) fails here. README.md's config table has its own test (test_readme.py).
"""

from __future__ import annotations

import json
from importlib import import_module
from pathlib import Path

import pytest

from stream_ctx.settings import config_keys

BENCHMARKS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks" / "suite.md"
_HEADING = "### Settings behind these figures"


def _documented() -> dict[str, object]:
    """`name -> code default` as the page's table states it."""
    _, _, section = BENCHMARKS.read_text(encoding="utf-8").partition(_HEADING)
    rows: dict[str, object] = {}
    for line in section.split("\n## ", 1)[0].splitlines():
        if line.startswith("| `"):
            name, _, default = (cell.strip() for cell in line.strip("|").split("|"))
            rows[name.strip("`")] = json.loads(default)
    return rows


def _code_default(name: str) -> object:
    """A config key's default, or the value of a module attribute named by its dotted path."""
    keys = config_keys()
    if name in keys:
        return keys[name].default
    module, _, attribute = name.rpartition(".")
    return getattr(import_module(module), attribute)


def test_benchmarks_page_has_a_settings_table() -> None:
    assert _HEADING in BENCHMARKS.read_text(encoding="utf-8")
    assert len(_documented()) >= 5


@pytest.mark.parametrize("name", sorted(_documented()))
def test_benchmarks_page_default_is_the_codes(name: str) -> None:
    documented = _documented()[name]
    assert documented == _code_default(name), (
        f"docs/benchmarks/suite.md says {documented!r} for `{name}`,"
        f" the code {_code_default(name)!r}:"
        " regenerate it with `python benchmarks/suite.py`"
    )


def test_benchmarks_page_prose_quotes_the_codes_linger_and_cache_bound() -> None:
    # The report once typed a 1,048,576-entry token cache and a 2 ms linger by hand.
    page = BENCHMARKS.read_text(encoding="utf-8")
    linger = config_keys()["kafka.linger_ms"].default
    bound = _code_default("stream_ctx.core.counting.tokenizer._CACHE_LIMIT")
    assert f"linger {linger} ms" in page, "the method section's linger is not the code's"
    assert f"bounded at {bound:,} entries" in page, "the memory section's cache bound is stale"
