"""The Rust tokenizers load without bpe-openai's Python wrapper, and share one module with it."""

from __future__ import annotations

import subprocess
import sys

_TIMEOUT_S = 60.0


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_counting_does_not_import_the_wrapper() -> None:
    # The wrapper builds every encoding's rank table in Python at import (~1.2 s a process).
    code = (
        "import sys\n"
        "from stream_ctx.core.counting.tokenizer import get_tokenizer\n"
        "print(get_tokenizer('o200k_base').count('hello world'), get_tokenizer().count('hi'))\n"
        "print(sorted(m for m in sys.modules if m.startswith('bpe_openai')))\n"
    )
    assert _run(code).splitlines() == ["2 1", "['bpe_openai._bindings']"]


def test_the_wrapper_imported_later_or_first_uses_the_same_module() -> None:
    later = (
        "from stream_ctx.bpe_bindings import bindings\n"
        "import importlib, bpe_openai\n"
        "print(importlib.import_module('bpe_openai._bindings') is bindings,"
        " bpe_openai.get_encoding('cl100k_base').encode('hello world'))\n"
    )
    assert _run(later) == "True [15339, 1917]"
    first = (
        "import bpe_openai._bindings\n"
        "from stream_ctx.bpe_bindings import bindings\n"
        "print(bpe_openai._bindings is bindings)\n"
    )
    assert _run(first) == "True"
