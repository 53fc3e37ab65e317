"""The compiled core is the Python core's twin: the same events give the same bundles, byte for
byte, over every order, mode, budget and restore; and where it is not built, `auto` runs the
Python core."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stream_ctx.core
from stream_ctx.core import compiled, textindex
from stream_ctx.core.codec import encode_bundle
from stream_ctx.core.config import BundleConfig
from stream_ctx.core.engine import PYTHON_CORE, CoreUnavailableError, load_core
from stream_ctx.core.events import Event
from stream_ctx.core.learning import Learning
from stream_ctx.core.processor import ContextProcessor
from tests.streams import RESTORE, streams

_DIGEST = Path(__file__).parents[2] / "benchmarks" / "bundle_digest.py"
# benchmarks/bundle_digest.py's digest of the current context format (docs/benchmarks).
_EXPECTED_DIGEST = "afdef90106e4bd149d1d77abb410c04a"


def test_auto_runs_the_compiled_core_where_it_is_built() -> None:
    assert load_core().name == "compiled"
    assert load_core("python") is PYTHON_CORE


def test_auto_falls_back_to_the_python_core_where_the_compiled_one_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(stream_ctx.core, "compiled", raising=False)
    monkeypatch.setitem(sys.modules, "stream_ctx.core.compiled", None)  # an import that fails
    assert load_core("auto") is PYTHON_CORE
    with pytest.raises(CoreUnavailableError, match=r"compiled core .* is not built"):
        load_core("compiled")


@given(st.text(alphabet=st.sampled_from(list("ab .!?\"')]\t\n\u00a0\u2003xy")), max_size=40))
def test_compiled_units_are_the_reference_units(text: str) -> None:
    assert compiled.split_units(text) == textindex.split_units(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stream=streams(),
    max_items=st.sampled_from((3, 6, 12)),
    order=st.sampled_from(("priority", "stable", "edges")),
    mode=st.sampled_from(("full", "delta")),
)
def test_both_cores_make_the_same_bundles(
    stream: list[Event | str], max_items: int, order: Any, mode: Any
) -> None:
    config = BundleConfig(max_items=max_items, order=order, mode=mode, conversation_ttl_hours=None)
    learnings = Learning(), Learning()
    python, native = (
        ContextProcessor(config, learning=learning, core=core)
        for learning, core in zip(learnings, (PYTHON_CORE, load_core("compiled")), strict=True)
    )
    for position, step in enumerate(stream):
        if step == RESTORE:  # what was learned is lost: the next finalize plans from nothing
            python.drop_learning()
            native.drop_learning()
            continue
        assert not isinstance(step, str)
        expected, got = python.apply(step, position=position), native.apply(step, position=position)
        assert (expected is None) == (got is None)
        if expected is not None and got is not None:
            assert encode_bundle(got) == encode_bundle(expected)


@pytest.mark.parametrize("core", ["python", "compiled"])
def test_the_bundle_digest_is_the_same_for_each_core(core: str) -> None:
    """3,420 bundles over every order, mode and budget, as benchmarks/bundle_digest.py prints."""
    run = subprocess.run(
        [sys.executable, str(_DIGEST), "--core", core],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    last = run.stdout.strip().splitlines()[-1]
    assert last == f"3,420 bundles, digest {_EXPECTED_DIGEST} ({core} core)"
