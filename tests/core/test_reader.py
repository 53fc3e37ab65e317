"""read_context on contexts the renderer does not write: each refusal names the item and place.

That every rendered context reads back exactly is test_render.py's (property tests)."""

from __future__ import annotations

import re

import pytest

from stream_ctx.core.reader import ContextSyntaxError, read_context


def _refused(context: str, message: str) -> None:
    with pytest.raises(ContextSyntaxError, match=f"^{re.escape(message)}$"):
        read_context(context)


def test_a_header_term_without_its_value_names_item_and_character() -> None:
    _refused("§1 a (chunk) name\ntext\n", "item §1: expected '=' at character 17")
