"""Hypothesis strategies of event streams that exercise the whole core: overlapping chunks,
reruns, shared lines, merges, evictions, every order, budget and mode, ends and restores."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.text.engine import PYTHON_CORE, load_core
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.events import End, Event, Finalize, RetrievedItem
from stream_ctx.errors import FinalizeRefusedError
from tests.factories import HOUR_MS, T0, make_finalize, make_item, make_retrieval

WORDS = ("alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta", "lambda")
# Two documents of lines and sentences that chunks cut with overlaps; one line many chunks hold.
DOCUMENTS = tuple(
    "\n".join(
        f"{WORDS[(d + n) % 9]} {WORDS[(3 * n) % 9]} step {n} of {d}. Then {WORDS[n % 9]} runs."
        for n in range(14)
    )
    + "\n"
    for d in range(2)
)
_BOILERPLATE = "    >>> import numpy as np\n"
_IDS = (*(f"document:{n}" for n in range(10)), "tool/run:1", "tool/run:2", "x")
CORES = (PYTHON_CORE, load_core("compiled"))
"""Both cores, for tests that must hold of each (every install here builds the compiled one)."""
RESTORE = "restore"
"""A step that drops a processor's state and restores it from its changelog."""


@st.composite
def _content(draw: st.DrawFn) -> str:
    """A chunk of a document (overlapping others), maybe a rerun of it (a line changed), maybe
    with the boilerplate line many chunks share."""
    document = draw(st.sampled_from(DOCUMENTS))
    start = draw(st.integers(0, len(document) - 20))
    if draw(st.booleans()):
        start = document.rfind(" ", 0, start) + 1  # a chunk that starts at a word
    text = document[start : start + draw(st.integers(20, 400))]
    if draw(st.integers(0, 3)) == 0:
        lines = text.split("\n")
        at = draw(st.integers(0, len(lines) - 1))
        lines[at] = draw(st.sampled_from(WORDS)) + " changed " + lines[at]
        text = "\n".join(lines)
    if draw(st.booleans()):
        text = _BOILERPLATE + text if draw(st.booleans()) else text + _BOILERPLATE
    return text


@st.composite
def _item(draw: st.DrawFn, contents: list[str]) -> RetrievedItem:
    """An item of a small id pool (so merges and evictions happen) and few metadata sets."""
    reuses = bool(contents) and draw(st.booleans())
    content = draw(st.sampled_from(contents)) if reuses else None
    return make_item(
        id=draw(st.sampled_from(_IDS)),
        kind=draw(st.sampled_from(("chunk", "chunk", "tool"))),
        salience=draw(st.sampled_from((0.1, 0.3, 0.5, 0.7, 0.9, 1.0))),
        content=content if content is not None else draw(_content()),
        attributes=draw(st.sampled_from(({}, {"lang": "go"}, {"lang": "go", "team": "web"}))),
        tags=draw(st.sampled_from(([], ["a"], ["a", "b"]))),
        created_at=T0 - draw(st.integers(0, 40)) * HOUR_MS,
    )


@st.composite
def streams(draw: st.DrawFn) -> list[Event | str]:
    """Retrievals, finalizes (any order, budget, mode), ends and restores, over two
    conversations, in growing event time."""
    steps: list[Event | str] = []
    contents: list[str] = []
    ts = T0
    for _ in range(draw(st.integers(6, 40))):
        ts += draw(st.integers(0, 72)) * HOUR_MS  # priorities drift: items change places
        cid = draw(st.sampled_from(("c-1", "c-1", "c-1", "c-2")))
        kind = draw(st.sampled_from(("retrieval", "finalize", "finalize", "rare")))
        if kind == "retrieval":
            items = draw(st.lists(_item(contents), min_size=1, max_size=4))
            contents += [item.content for item in items]
            steps.append(make_retrieval(conversation_id=cid, ts=ts, items=items))
        elif kind == "finalize":
            steps.append(_finalize(draw, cid, ts))
        elif draw(st.booleans()):
            steps.append(RESTORE)
        elif draw(st.booleans()):
            steps.append(End(conversation_id=cid, event_id="e", ts=ts))
    return steps


def _finalize(draw: st.DrawFn, cid: str, ts: int) -> Finalize:
    fields: dict[str, Any] = {
        "order": draw(st.sampled_from((None, None, "priority", "stable", "edges"))),
        "max_tokens": draw(st.sampled_from((None, None, 80, 300, 900))),
        "mode": draw(st.sampled_from((None, "full", "delta"))),
        "history": draw(st.sampled_from((None, None, None, "reset"))),
    }
    return make_finalize(conversation_id=cid, ts=ts, **fields)


def applied(processor: ContextProcessor, event: Event, position: int) -> Bundle | str | None:
    """The bundle, or the reason a finalize was refused (twin processors must agree)."""
    try:
        return processor.apply(event, position=position)
    except FinalizeRefusedError as refused:
        return refused.reason
