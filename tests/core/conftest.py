"""Under mutation testing, processors built with `core="auto"` run the Python core: it is the
reference that mutmut mutates, and the compiled twin would otherwise hide its mutants."""

from __future__ import annotations

import pytest

from stream_ctx.core.conversation import processor
from stream_ctx.core.text.engine import PYTHON_CORE, Core, load_core
from stream_ctx.core.window.config import CoreChoice


def _reference_when_auto(choice: CoreChoice = "auto") -> Core:
    return PYTHON_CORE if choice == "auto" else load_core(choice)


@pytest.fixture(autouse=True)
def _python_core_under_mutation(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mutmut run` selects the `mutation` hypothesis profile (pyproject.toml's [tool.mutmut])."""
    if request.config.getoption("hypothesis_profile", None) == "mutation":
        monkeypatch.setattr(processor, "load_core", _reference_when_auto)
