"""The compiled core is the Python core's twin: the same events give the same bundles, byte for
byte, over every order, mode, budget and restore; and where it is not built, `auto` runs the
Python core."""

from __future__ import annotations

import difflib
import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stream_ctx.core.text
from stream_ctx.core.assembly.learning import Learning
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.text import compiled, quotes, textindex
from stream_ctx.core.text.engine import PYTHON_CORE, CoreUnavailableError, load_core
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.codec import encode_bundle
from stream_ctx.core.wire.events import Event
from tests.streams import RESTORE, applied, streams

_DIGEST = Path(__file__).parents[3] / "benchmarks" / "bundle_digest.py"
# benchmarks/bundle_digest.py's digest of the current context format (docs/benchmarks).
_EXPECTED_DIGEST = "afdef90106e4bd149d1d77abb410c04a"


def test_the_compiled_core_is_built_from_the_source_here() -> None:
    source = Path(compiled.__file__).with_name("compiled.pyx").read_bytes()
    digest = hashlib.blake2b(source, digest_size=16).hexdigest()
    assert compiled.SOURCE_DIGEST == digest, "compiled.pyx changed: rebuild (pip install -e .)"


def test_auto_runs_the_compiled_core_where_it_is_built() -> None:
    assert load_core().name == "compiled"
    assert load_core("python") is PYTHON_CORE


def test_auto_falls_back_to_the_python_core_where_the_compiled_one_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(stream_ctx.core.text, "compiled", raising=False)
    monkeypatch.setitem(sys.modules, "stream_ctx.core.text.compiled", None)  # an import that fails
    assert load_core("auto") is PYTHON_CORE
    with pytest.raises(CoreUnavailableError) as raised:
        load_core("compiled")
    assert str(raised.value) == (
        "the compiled core (stream_ctx.core.text.compiled) is not built in this install:"
        " import of stream_ctx.core.text.compiled halted; None in sys.modules;"
        " reinstall with a C++ compiler at hand, or choose the Python core"
    )


@given(st.text(alphabet=st.sampled_from(list("ab .!?\"')]\t\n\u00a0\u2003xy")), max_size=40))
def test_compiled_units_are_the_reference_units(text: str) -> None:
    assert compiled.split_units(text) == textindex.split_units(text)


_TEXT = st.text(
    alphabet=st.sampled_from(list("ab9_ .,!?\"')]…§\t\n\u00a0\u2003\u00bd\u0663é")), max_size=40
)


@given(_TEXT)
def test_compiled_rough_counts_are_the_reference_counts(text: str) -> None:
    assert compiled.rough_tokens(text) == quotes.rough_tokens(text)


@given(source=_TEXT, start=st.integers(0, 40), size=st.integers(0, 40), prefix=_TEXT)
def test_compiled_quotes_are_the_reference_quotes(
    source: str, start: int, size: int, prefix: str
) -> None:
    source = prefix + source + prefix
    passage = source[start : start + size]
    assert compiled.choose_quotes(source, passage) == quotes.choose_quotes(source, passage)


_LINES = st.lists(st.sampled_from(["a", "b", "c", "d", ""]), max_size=14)


@given(before=_LINES, after=_LINES)
def test_compiled_line_matcher_is_difflibs(before: list[str], after: list[str]) -> None:
    reference = difflib.SequenceMatcher(None, before, after, autojunk=False)
    matcher = compiled.LineMatcher(before, after)
    for context in (1, 2, 3):  # in turn on one matcher, as a rerun asks: difflib trims in place
        expected = [list(group) for group in reference.get_grouped_opcodes(context)]
        assert matcher.get_grouped_opcodes(context) == expected
    assert matcher.get_matching_blocks() == [tuple(m) for m in reference.get_matching_blocks()]


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
        expected, got = applied(python, step, position), applied(native, step, position)
        if not isinstance(expected, Bundle) or not isinstance(got, Bundle):
            assert expected == got
            continue
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
