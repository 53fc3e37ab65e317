"""The public surface: every module says what it exports, and the package's exports change only
on purpose (this list is the place to change them)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from types import ModuleType

import pytest

import stream_ctx
import stream_ctx.core

# The API: what a user needs, and nothing the core or the shell uses only inside.
PACKAGE_EXPORTS = (
    "PRESETS",
    "READING_GUIDE",
    "Bundle",
    "BundleConfig",
    "ConfigError",
    "ContextClient",
    "ContextProcessor",
    "End",
    "Event",
    "Finalize",
    "InvalidEventError",
    "Retrieval",
    "RetrievedItem",
    "StreamCtxError",
    "decode_event",
    "read_context",
    "rebuild_full",
)
MODULES = sorted(
    m.name for m in pkgutil.walk_packages(stream_ctx.__path__, "stream_ctx.") if not m.ispkg
)
# Packages whose __init__ gathers the names of its modules; the others hold a docstring only.
REEXPORTING_PACKAGES = ("stream_ctx", "stream_ctx.settings")


def test_the_package_exports_exactly_its_public_names() -> None:
    assert stream_ctx.__all__ == PACKAGE_EXPORTS
    assert all(hasattr(stream_ctx, name) for name in stream_ctx.__all__)


def test_importing_the_package_loads_no_kafka_client_until_the_client_is_used() -> None:
    script = (
        "import sys, stream_ctx\n"
        "print('aiokafka' in sys.modules)\n"
        "from stream_ctx import ContextClient\n"
        "print('aiokafka' in sys.modules, ContextClient.__module__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["False", "True", "stream_ctx.client"]


def test_a_name_outside_the_api_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'StateDag'"):
        _ = stream_ctx.StateDag  # type: ignore[attr-defined]


def test_every_core_and_shell_module_is_checked() -> None:
    assert {"stream_ctx.core.wire.codec", "stream_ctx.shell.processing.runner"} <= set(MODULES)
    assert "stream_ctx.settings.loading" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_every_module_exports_the_public_names_it_defines(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported, name
    missing = [export for export in exported if not hasattr(module, export)]
    assert missing == [], name
    assert len(set(exported)) == len(exported), name
    # A function or class is exported where it is defined, and one defined without a leading
    # underscore is exported: the underscore is what says "this module only".
    borrowed = [export for export in exported if _defined_in(module, export) not in (name, None)]
    assert borrowed == [], name
    unexported = [
        attr
        for attr in vars(module)
        if not attr.startswith("_") and _defined_in(module, attr) == name and attr not in exported
    ]
    assert unexported == [], name


@pytest.mark.parametrize("name", REEXPORTING_PACKAGES)
def test_a_reexporting_package_exports_only_names_it_has(name: str) -> None:
    module = importlib.import_module(name)
    assert [export for export in module.__all__ if not hasattr(module, export)] == []


def _defined_in(module: ModuleType, attr: str) -> str | None:
    """The module a function or class was defined in; None for any other value."""
    value = getattr(module, attr)
    if inspect.isfunction(value) or inspect.isclass(value):
        defined: str = value.__module__
        return defined
    return None
