"""The reading rules page: every context on it reads as the items it states, and the contexts it
says stream-ctx writes are the ones the core writes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from stream_ctx.core.assembly.assembler import DagContextAssembler
from stream_ctx.core.assembly.delta import read_delta
from stream_ctx.core.counting.tokenizer import get_tokenizer
from stream_ctx.core.entries.reader import ReadItem, read_context
from stream_ctx.core.window.accumulator import RankedItem
from tests.factories import make_context_item

_PAGE = Path(__file__).parents[3] / "docs" / "reference" / "reading-rules.md"
_CASE = re.compile(r"^## (.+?)\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)
_BLOCK = re.compile(r"^```(text|json)\n(.*?)\n```$", re.MULTILINE | re.DOTALL)
_WRITTEN = "*Written so by stream-ctx.*"


def _cases() -> list[Any]:
    cases = []
    for title, body in _CASE.findall(_PAGE.read_text()):
        blocks = _BLOCK.findall(body)
        contexts = [text + "\n" for kind, text in blocks if kind == "text"]
        (items,) = [text for kind, text in blocks if kind == "json"]
        expected = [json.loads(line) for line in items.splitlines()]
        cases.append(pytest.param(contexts, expected, _WRITTEN in body, id=title.split(".")[0]))
    return cases


def test_the_page_has_a_case_for_each_rule() -> None:
    assert len(_cases()) == 15


def _stated(read: list[ReadItem]) -> list[dict[str, Any]]:
    """Items as the page states them: attributes and tags only when there are some."""
    stated = []
    for item in read:
        fields: dict[str, Any] = {"id": item.id, "kind": item.kind}
        fields |= {"attributes": item.attributes} if item.attributes else {}
        fields |= {"tags": item.tags} if item.tags else {}
        stated.append(fields | {"content": item.content})
    return stated


@pytest.mark.parametrize(("contexts", "expected", "is_written"), _cases())
def test_each_context_reads_as_the_items_the_page_states(
    contexts: list[str], expected: list[dict[str, Any]], is_written: bool
) -> None:
    if len(contexts) == 2:  # an earlier context, then a delta against it
        applying, _ = read_delta(contexts[1], read_context(contexts[0]))
        assert _stated(applying) == expected
        return
    (context,) = contexts
    assert _stated(read_context(context)) == expected
    if is_written:
        items = [
            make_context_item(
                id=item["id"],
                kind=item["kind"],
                attributes=item.get("attributes", {}),
                tags=item.get("tags", []),
                content=item["content"],
                entered=n,
            )
            for n, item in enumerate(expected)
        ]
        ranked = [RankedItem(item, 0.5) for item in items]
        assembler = DagContextAssembler(get_tokenizer())
        assert assembler.assemble(ranked, max_tokens=None, order="stable").context == context
