"""The generated reference pages (docs/hooks.py) hold every setting, CLI option, schema field and
metric the code has, and the context format page shows what the core renders."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from types import ModuleType

import msgspec
import pytest
from msgspec import inspect

import stream_ctx
from stream_ctx import READING_GUIDE
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.events import Event
from stream_ctx.settings import CLIENT_KEYS, config_keys
from stream_ctx.shell.commands.cli import build_parser
from stream_ctx.shell.http.metrics import Metrics


def _docs_hooks() -> ModuleType:
    """docs/hooks.py, the generator of the reference pages (not a package: loaded by path)."""
    path = Path(__file__).resolve().parents[2] / "docs" / "hooks.py"
    spec = importlib.util.spec_from_file_location("docs_hooks", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOKS = _docs_hooks()


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_setting_has_a_row_with_its_variable_and_a_meaning() -> None:
    page = HOOKS.settings_page()
    for dotted, key in config_keys().items():
        assert f"| `{dotted}` |" in page, f"`{dotted}` is missing from the settings reference"
        assert f"`{key.env_name}`" in page, f"{key.env_name} is missing"
        assert HOOKS.SETTING_NOTES.get(dotted), f"add a line for `{dotted}` to SETTING_NOTES"
    assert not HOOKS.SETTING_NOTES.keys() - config_keys().keys(), "SETTING_NOTES names a lost key"
    for name in CLIENT_KEYS:
        assert f"`kafka.client.{name}`" in page


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_cli_option_is_in_the_reference(name: str) -> None:
    page = HOOKS.cli_page()
    section = page.split(f"## `stream-ctx {name}`\n", 1)[1].split("\n## ", 1)[0]
    for action in _subcommands()[name]._actions:
        for option in action.option_strings or [action.dest]:
            if option not in ("-h", "--help"):
                assert f"`{option}`" in section, f"`stream-ctx {name} {option}` is missing"


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_subcommand_help_opens_with_a_one_line_description(name: str) -> None:
    sub = _subcommands()[name]
    assert sub.description, f"`stream-ctx {name} --help` has no description"
    assert "\n" not in sub.description
    assert sub.format_help().startswith(sub.description + "\n\nusage: stream-ctx " + name)


def _fields(root: object) -> list[tuple[str, str]]:
    found, pending, seen = [], [inspect.type_info(root)], set()
    while pending:
        info = pending.pop()
        if isinstance(info, inspect.StructType) and info.cls not in seen:
            seen.add(info.cls)
            found += [(info.cls.__name__, f.encode_name) for f in info.fields]
            pending += [f.type for f in info.fields]
        elif isinstance(info, inspect.UnionType):
            pending += info.types
        elif isinstance(info, inspect.ListType):
            pending.append(info.item_type)
        elif isinstance(info, inspect.DictType):
            pending.append(info.value_type)
    return found


@pytest.mark.parametrize("root", [Event, Bundle], ids=["events", "bundle"])
def test_every_schema_field_is_in_the_reference(root: object) -> None:
    page = HOOKS.schemas_page()
    for struct, field in _fields(root):
        section = page.split(f"### {struct}\n", 1)
        assert len(section) == 2, f"{struct} has no section in the schema reference"
        assert f"| `{field}` |" in section[1].split("\n### ", 1)[0], f"{struct}.{field} missing"


def test_every_metric_is_in_the_reference() -> None:
    page = HOOKS.metrics_page()
    for family in Metrics().registry.collect():
        assert f"`{family.name}" in page, f"{family.name} is missing from the metrics reference"


def test_the_context_format_page_quotes_the_guide_and_renders_the_example() -> None:
    page = HOOKS.context_format_page()
    bundle = HOOKS.example_bundle()
    assert READING_GUIDE.strip() in page
    assert bundle["context"].rstrip("\n") in page
    assert msgspec.json.decode(msgspec.json.encode(bundle))["stats"]["tokens_naive"] > 0


def test_the_api_page_lists_exactly_the_package_exports() -> None:
    headings = [line for line in HOOKS.api_page().splitlines() if line.startswith("### ")]
    assert sorted(headings) == sorted(f"### `{name}`" for name in stream_ctx.__all__)


def test_the_api_page_refuses_a_section_list_that_misses_an_export(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sections = {**HOOKS.API_SECTIONS, "Errors": ("StreamCtxError", "ConfigError")}
    monkeypatch.setattr(HOOKS, "API_SECTIONS", sections)
    with pytest.raises(ValueError, match="API_SECTIONS lists"):
        HOOKS.api_page()
