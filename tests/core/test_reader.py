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


def test_an_entry_not_numbered_next_names_the_number_expected_and_where() -> None:
    _refused("§2 a (chunk)\nx\n", "expected item §1 at character 0")
    _refused("hello\n", "expected item §1 at character 0")
    (held,) = read_context("§1 a (chunk)\nx\n")
    with pytest.raises(ContextSyntaxError, match=r"^expected item §2 at character 6$"):
        read_context("kept\n\n§3 b (chunk)\ny\n", held=[held], start=6)


def test_references_that_cannot_be_resolved_say_why() -> None:
    _refused(
        "§1 a (chunk)\nsome text\n§2 b (chunk)\n«2»\n",
        "item §2: a reference to itself needs a length",
    )
    _refused("§1 a (chunk)\n«2+5»\n", "item §1: a reference to a later item, «2+5»")


def test_an_entry_without_its_closing_newline_is_named() -> None:
    _refused("§1 a (chunk)\ntext", "item §1 does not end with a newline")
