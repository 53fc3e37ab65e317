"""The public surface: every core module says what it exports, and the package's exports change
only on purpose (this list is the place to change them)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import stream_ctx
import stream_ctx.core

PACKAGE_EXPORTS = (
    "PRESETS",
    "READING_GUIDE",
    "AddResult",
    "Assembly",
    "Bundle",
    "BundleAccumulator",
    "BundleConfig",
    "BundleItem",
    "BundleStats",
    "ConfigError",
    "ContextItem",
    "ContextProcessor",
    "ContextSyntaxError",
    "DagContextAssembler",
    "DeltaBaseError",
    "End",
    "Event",
    "Finalize",
    "InvalidEventError",
    "RankedItem",
    "ReadItem",
    "Retrieval",
    "RetrievedItem",
    "SharedAttribute",
    "StateDag",
    "StreamCtxError",
    "TiktokenTokenizer",
    "Tokenizer",
    "block_id",
    "bundle_config_from_table",
    "decode_event",
    "encode_bundle",
    "get_tokenizer",
    "priority",
    "rank_key",
    "read_context",
    "rebuild_full",
    "recency",
)
CORE_MODULES = sorted(m.name for m in pkgutil.iter_modules(stream_ctx.core.__path__))


def test_the_package_exports_exactly_its_public_names() -> None:
    assert stream_ctx.__all__ == PACKAGE_EXPORTS
    assert all(hasattr(stream_ctx, name) for name in stream_ctx.__all__)


@pytest.mark.parametrize("name", CORE_MODULES)
def test_every_core_module_exports_names_it_defines(name: str) -> None:
    module = importlib.import_module(f"stream_ctx.core.{name}")
    exported = module.__all__
    assert exported, name
    missing = [export for export in exported if not hasattr(module, export)]
    assert missing == [], name
    assert len(set(exported)) == len(exported), name
