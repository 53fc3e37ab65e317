"""Builders with keyword defaults for events and window items, plus shared hypothesis strategies."""

from __future__ import annotations

from typing import Any, NamedTuple

from hypothesis import strategies as st

from stream_ctx.core.window.accumulator import ContextItem
from stream_ctx.core.wire.events import End, Finalize, Retrieval, RetrievedItem
from stream_ctx.shell.state.changelog import ChangelogWrites

T0 = 1_764_480_000_000
"""A fixed event time (2025-11-30T05:20:00Z) so no test depends on the clock."""
DAY_MS = 86_400_000
HOUR_MS = 3_600_000


def make_item(**kw: Any) -> RetrievedItem:
    """A retrieved item; `created_at` stays unset (it defaults to the event's `ts`) unless given."""
    fields: dict[str, Any] = {
        "id": "it-1",
        "kind": "chunk",
        "salience": 0.5,
        "content": "some retrieved text",
        "created_at": None,
        "attributes": {},
        "tags": [],
    }
    fields.update(kw)
    return RetrievedItem(**fields)


def make_retrieval(**kw: Any) -> Retrieval:
    """A retrieval event for conversation `c-1` at `T0` holding one default item."""
    fields: dict[str, Any] = {
        "conversation_id": "c-1",
        "event_id": "e-r",
        "ts": T0,
        "items": [make_item()],
        "query": None,
    }
    fields.update(kw)
    return Retrieval(**fields)


def make_finalize(**kw: Any) -> Finalize:
    """A finalize event for conversation `c-1` at `T0`, no request id, no budget."""
    fields: dict[str, Any] = {
        "conversation_id": "c-1",
        "event_id": "e-f",
        "ts": T0,
        "request_id": None,
        "max_tokens": None,
    }
    fields.update(kw)
    return Finalize(**fields)


def make_end(**kw: Any) -> End:
    """An end event for conversation `c-1` at `T0`."""
    fields: dict[str, Any] = {"conversation_id": "c-1", "event_id": "e-e", "ts": T0}
    fields.update(kw)
    return End(**fields)


def make_context_item(**kw: Any) -> ContextItem:
    """An item as a window holds it, for DAG and rendering tests."""
    fields: dict[str, Any] = {
        "id": "it-1",
        "kind": "chunk",
        "salience": 0.5,
        "created_at": T0,
        "content": "some retrieved text",
        "attributes": {},
        "tags": [],
        "entered": 0,
    }
    fields.update(kw)
    return ContextItem(**fields)


# Hypothesis strategies -------------------------------------------------------------------------

# Text that has broken fenced and line-based formats before: line and paragraph separators, lone
# carriage returns, tabs, unicode spaces, backtick runs, and special-token text.
ODD_FRAGMENTS = (
    "\n",
    "\r",
    "\r\n",
    "\t",
    " ",
    "  ",
    "\u2028",
    "\u2029",
    "\x85",
    "\x0b",
    "\x0c",
    "\u00a0",
    "\u3000",
    "\ufeff",
    "`",
    "``",
    "```",
    "````",
    "\n```\n",
    "<|endoftext|>",
    "<|fim_prefix|>",
    "'s",
    '"',
    "\\",
    "@",
    "#",
    "=",
    ";",
    ",",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    "1234567",
    "## [1] x\n",
    "[same as b0]\n",
    "Shared: a=b @all\n",
    "«",
    "»",
    "«1:0+3»",
    '[§1 "a b"…"c d"]',
    "[§2]",
    "[\\§1]",
    '"…"',
    '…"',
    '"]',
    "[§1 with changes:]\n@@\n-x\n+y\n",
    "\n@@\n",
    "\n[2] x (chunk)\n",
    "\n\\[1]",
    "[3]",
    "\n§2 x (chunk)\n",
    "\n\\§1",
    "§3",
    "^1",
    "-#",
)


def odd_text(*, max_pieces: int = 40) -> st.SearchStrategy[str]:
    """Random unicode text (no surrogates) rich in whitespace, backticks and markup look-alikes."""
    piece = st.one_of(
        st.sampled_from(ODD_FRAGMENTS),
        st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=8),
        st.text("abcdefgh ijkl.\n", min_size=1, max_size=12),
    )
    return st.lists(piece, max_size=max_pieces).map("".join)


def offered_items(
    *, ids: tuple[str, ...] = ("a", "b", "c", "d", "e", "f", "g", "h")
) -> st.SearchStrategy[RetrievedItem]:
    """Items varying every field the window rules read or keep: ids from a small pool (so ids
    repeat within and across events), kind, salience (thresholds and ties), created_at (missing,
    past, future), content, attributes and tags (empty, shared, or distinct)."""
    names = st.sampled_from(["language", "source", "path"])
    values = st.sampled_from(["go", "rust", "docs/a.md", ""])
    return st.builds(
        make_item,
        id=st.sampled_from(ids),
        kind=st.sampled_from(["chunk", "memory", "pattern", "tool_result"]),
        salience=st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.5, 0.75, 1.0]) | st.floats(0.0, 1.0),
        created_at=st.none() | st.integers(T0 - 120 * DAY_MS, T0 + DAY_MS),
        content=st.sampled_from(["one", "two", "three"]),
        attributes=st.dictionaries(names, values, max_size=3),
        tags=st.lists(st.sampled_from(["x", "y", "z"]), max_size=3),
    )


def retrieved_from(item: ContextItem) -> RetrievedItem:
    """The retrieved item that a held item came from (a window item offered again)."""
    return make_item(
        id=item.id,
        kind=item.kind,
        salience=item.salience,
        created_at=item.created_at,
        content=item.content,
        attributes=item.attributes,
        tags=item.tags,
    )


class Written(NamedTuple):
    """A changelog record as a restore reads it back: key, and value (None for a tombstone)."""

    key: bytes
    value: bytes | None


def written(writes: ChangelogWrites) -> list[Written]:
    """A batch's changelog records in the runner's write order: items, states, tombstones."""
    return [Written(key, value) for key, value in writes.items + writes.states + writes.tombstones]


def plain_pair(second_content: str = "Short text.1") -> list[ContextItem]:
    """Two items a lean context writes plain: naming the first in the second's header and
    dropping its three tags costs a token more than writing the header out."""
    attributes = {"source": "en-US", "lang": "numpy", "section": "en-US"}
    first = make_context_item(
        id="doc-0",
        attributes=attributes,
        tags=["needs-review", "api-v2", "é-t"],
        content="Short text.0",
        entered=0,
    )
    second = make_context_item(id="doc-1", attributes=attributes, content=second_content, entered=1)
    return [first, second]
