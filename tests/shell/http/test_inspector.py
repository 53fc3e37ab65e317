"""The inspector over real HTTP: pages from a real processor's outcomes, the token gate, bounds."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from html import unescape

import anyio
import pytest
from markupsafe import escape

from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.entries.reader import Reference, read_context, read_references
from stream_ctx.core.window.accumulator import RankedItem
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.events import Event
from stream_ctx.errors import ConfigError
from stream_ctx.shell.http.inspector.history import InspectorHistory
from stream_ctx.shell.http.inspector.overview import Series, Totals
from stream_ctx.shell.http.inspector.routes import Inspector, required_token
from stream_ctx.shell.http.inspector.views import (
    bundle_page,
    context_pieces,
    live_figures,
    split_entries,
)
from stream_ctx.shell.http.metrics import Health, Metrics
from stream_ctx.shell.http.server import http_app, run_http_server
from tests.factories import make_finalize, make_item, make_retrieval

# Generous: every step is local and takes milliseconds.
_TEST_TIMEOUT_S = 10.0
_SOURCE = "ctx.retrievals/0"
_TOKEN = "s3cret"  # noqa: S105 - the test's own token
# A passage two items share, long enough for any context format to store it once.
_SHARED = (
    "The refund policy allows returns within 30 days of delivery for unused items in their "
    "original packaging. Customers must include the order number and a short description of "
    "the problem; refunds are issued to the original payment method within five business days "
    "of the return being received and inspected by the warehouse team. "
)


def _events() -> list[Event]:
    """A two-item window: it-1 and it-2 are accepted, it-4 evicts it-1, it-3 is rejected; a
    bundle of both, then one whose budget fits only one."""
    return [
        make_retrieval(items=[make_item(id="it-1", salience=0.5, content=_SHARED + "One.")]),
        make_retrieval(
            items=[
                make_item(id="it-2", salience=0.9, content=_SHARED + "Two."),
                make_item(id="it-4", salience=0.8, content=_SHARED + "Four."),
                make_item(id="it-3", salience=0.3),
            ]
        ),
        make_finalize(),
        make_finalize(max_tokens=30),
    ]


class _Run:
    """A real processor fed the events, its outcomes recorded the way the runner records them."""

    def __init__(self, history: InspectorHistory) -> None:
        self.processor = ContextProcessor(BundleConfig(max_items=2), is_recording_items=True)
        for position, event in enumerate(_events()):
            bundle = self.processor.apply(event, position=position)
            history.record_items(_SOURCE, self.processor.take_item_events())
            if bundle is not None:
                ranked = self.processor.window_of(bundle.conversation_id, now_ms=bundle.ts) or []
                history.record_bundle(_SOURCE, bundle, [r.item.id for r in ranked])

    def window_of(self, cid: str) -> tuple[list[RankedItem], int] | None:
        now_ms = self.processor.stream_time_ms
        ranked = self.processor.window_of(cid, now_ms=now_ms)
        return None if ranked is None else (ranked, now_ms)


@asynccontextmanager
async def inspecting(*, token: str | None = None) -> AsyncIterator[tuple[int, InspectorHistory]]:
    history = InspectorHistory(max_events=50, max_bundles=3)
    run = _Run(history)
    metrics = Metrics()
    inspector = Inspector(metrics, history, run.window_of, run.processor.config)
    app = http_app(metrics, Health(), inspector=inspector, token=token)
    async with anyio.create_task_group() as tasks:
        port = await tasks.start(partial(run_http_server, app, host="127.0.0.1", port=0))
        try:
            yield port, history
        finally:
            tasks.cancel_scope.cancel()


async def get(port: int, path: str, **headers: str) -> tuple[int, dict[str, str], str]:
    def fetch() -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=_TEST_TIMEOUT_S)
        try:
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            body = response.read().decode()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, body
        finally:
            connection.close()

    return await anyio.to_thread.run_sync(fetch)


async def test_conversation_page_shows_the_eviction_by_whom_and_the_rejection_reason() -> None:
    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with inspecting() as (port, _):
            status, _, page = await get(port, "/inspect/c/c-1")
    assert status == 200
    assert "evicted by <code>it-4</code>" in page
    assert "salience 0.3 is below min_salience_threshold" not in page  # 0.3 passes the default
    assert "window is full (2 items) and this item ranks lowest" in page
    assert '<tr data-item="it-2">' in page
    assert '<tr data-item="it-4">' in page


async def test_bundle_page_opens_with_the_context_each_reference_marked_then_the_costs() -> None:
    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with inspecting() as (port, history):
            conv = history.get("c-1")
            assert conv is not None
            bundle = conv.bundles[0]
            status, _, page = await get(port, f"/inspect/c/c-1/b/{bundle.seq}")
    assert status == 200
    references = read_references(bundle.context)
    assert references, "the workload shares a passage between items"
    for ref in references:
        written = escape(bundle.context[ref.start : ref.end])
        assert f'data-names="{ref.number}" title="{escape(ref.text)}">{written}</mark>' in page
    shown = re.search(r'<pre class="context" id="context">(.*?)</pre>', page, re.DOTALL)
    assert shown is not None
    assert unescape(re.sub(r"<[^>]*>", "", shown.group(1))) == bundle.context
    assert page.index('id="context"') < page.index('id="costs"') < page.index('id="tokens-naive"')
    rows = re.findall(r'<tr data-entry="(\d+)"><td><a href="#entry-\d+">§\d+</a></td>', page)
    assert rows == [str(n) for n in range(1, len(bundle.items) + 1)]
    assert "block-" not in page and "Shared blocks" not in page


def test_split_entries_cuts_at_leads_and_not_at_escaped_look_alikes() -> None:
    context = 'Still applies: §1 (bundle 1)\n§2 a (doc)\n\\§9 x\n§3 b ^2\n[§2 "x"…"x"] y\n'
    entries = split_entries(context)
    assert [(e.number, context[e.start : e.end]) for e in entries] == [
        (2, "§2 a (doc)\n\\§9 x\n"),
        (3, '§3 b ^2\n[§2 "x"…"x"] y\n'),
    ]
    reference = Reference(context.index("[§2"), context.index("] y") + 1, 2, "x")
    pieces = context_pieces(context, [reference], entries)
    assert "".join(piece.text for piece in pieces) == context
    assert [(p.text, p.stands_for, p.names) for p in pieces if p.stands_for] == [
        ('[§2 "x"…"x"]', "x", 2)
    ]
    assert [p.entry for p in pieces if p.entry is not None] == [2, 3]
    assert split_entries("") == []


def test_bundle_view_costs_add_up_to_the_bundles_naive_and_sent_tokens() -> None:
    history = InspectorHistory(max_events=50, max_bundles=3)
    _Run(history)
    conv = history.get("c-1")
    assert conv is not None
    bundle = conv.bundles[0]
    view = bundle_page(bundle)
    assert view.note is None
    read = read_context(bundle.context)
    assert [cost.item_id for cost in view.costs] == [item.id for item in read]
    assert sum(cost.tokens_naive or 0 for cost in view.costs) == bundle.stats.tokens_naive
    assert sum(cost.tokens_here for cost in view.costs) == bundle.stats.tokens_bundle
    assert [(p.names, p.stands_for) for p in view.pieces if p.stands_for is not None] == [
        (ref.number, ref.text) for ref in read_references(bundle.context)
    ]


def test_a_delta_bundle_is_shown_as_written_with_a_note() -> None:
    processor = ContextProcessor(BundleConfig(mode="delta"))
    events: list[Event] = [
        make_retrieval(items=[make_item(id="doc:chapter-1:1", content=_SHARED + "One.")]),
        make_finalize(),
        make_retrieval(items=[make_item(id="doc:chapter-1:2", content=_SHARED + "Two.")]),
        make_finalize(),
    ]
    bundles = [processor.apply(event, position=n) for n, event in enumerate(events)]
    delta = bundles[-1]
    assert delta is not None and delta.mode == "delta"
    view = bundle_page(delta)
    assert view.note is not None and "earlier bundles" in view.note
    assert all(piece.stands_for is None for piece in view.pieces)
    assert "".join(piece.text for piece in view.pieces) == delta.context
    assert [(cost.number, cost.item_id) for cost in view.costs] == [(2, "doc:chapter-1:2")]
    assert view.costs[0].tokens_naive is not None


async def test_skipped_for_budget_items_enter_the_timeline() -> None:
    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with inspecting() as (_, history):
            conv = history.get("c-1")
    assert conv is not None
    bundle = conv.bundles[-1]
    skipped = [e.item_id for e in conv.timeline if e.what == "skipped for budget"]
    assert bundle.stats.skipped_for_budget >= 1  # the 30-token budget holds at most one item
    assert len(skipped) == bundle.stats.skipped_for_budget
    assert set(skipped) == {"it-2", "it-4"} - {item.id for item in bundle.items}


async def test_stream_sends_live_figures_as_server_sent_events() -> None:
    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with inspecting() as (port, _):
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                await stream.send(b"GET /inspect/stream?c=c-1 HTTP/1.1\r\nHost: x\r\n\r\n")
                received = b""
                for _ in range(1000):  # one event is a few hundred bytes
                    received += await stream.receive()
                    if b"\n\n" in received.partition(b"\r\n\r\n")[2]:
                        break
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"text/event-stream" in head
    data = body.split(b"data: ", 1)[1].split(b"\n\n", 1)[0]
    figures = json.loads(data)
    assert figures["conversation_version"] > 0
    assert set(figures["plots"]) == {"events_per_s", "bundles_per_s", "saved_per_s"}


async def test_token_gate_demands_the_token_and_a_token_visit_sets_a_cookie() -> None:
    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with inspecting(token=_TOKEN) as (port, _):
            assert (await get(port, "/inspect/"))[0] == 401
            assert (await get(port, "/inspect/", authorization="Bearer wrong"))[0] == 401
            assert (await get(port, "/inspect/", authorization=f"Bearer {_TOKEN}"))[0] == 200
            status, headers, _ = await get(port, f"/inspect/conversations?token={_TOKEN}")
            assert (status, headers["location"]) == (
                303,
                f"http://127.0.0.1:{port}/inspect/conversations",
            )
            cookie = headers["set-cookie"].split(";", 1)[0]
            assert (await get(port, "/inspect/conversations", cookie=cookie))[0] == 200
            assert (await get(port, "/metrics"))[0] == 200  # probes and metrics stay open
            assert (await get(port, "/healthz"))[0] == 200


def test_a_non_loopback_bind_needs_a_token_and_loopback_does_not() -> None:
    assert required_token("127.0.0.1", None) is None
    assert required_token("::1", None) is None
    assert required_token("localhost", "") is None
    assert required_token("0.0.0.0", "t") == "t"  # noqa: S104 - the address under test
    with pytest.raises(ConfigError, match=r"`metrics.inspector_token` must be set .* '0.0.0.0'"):
        required_token("0.0.0.0", None)  # noqa: S104
    with pytest.raises(ConfigError, match=r"'10.1.2.3'"):
        required_token("10.1.2.3", "")


def test_history_keeps_only_the_last_events_bundles_and_conversations() -> None:
    history = InspectorHistory(max_events=3, max_bundles=1, max_conversations=2)
    for n in range(3):
        processor = ContextProcessor(BundleConfig(max_items=2), is_recording_items=True)
        cid = f"conv-{n}"
        for position in range(4):
            event = make_retrieval(conversation_id=cid, items=[make_item(id=f"it-{position}")])
            processor.apply(event, position=position)
            history.record_items(_SOURCE, processor.take_item_events())
    assert len(history) == 2
    assert history.get("conv-0") is None  # the least recently active went first
    kept = history.get("conv-2")
    assert kept is not None
    assert len(kept.timeline) == 3
    assert [c.conversation_id for c in history.recent(limit=10)] == ["conv-2", "conv-1"]
    assert [c.conversation_id for c in history.recent(containing="1", limit=10)] == ["conv-1"]


def test_tokens_saved_per_second_is_the_rate_since_the_last_sample_not_the_total() -> None:
    series = Series()
    series.sample(Totals(tokens_naive=10_000, tokens_bundle=4_000), now_s=100.0)
    series.sample(Totals(tokens_naive=10_600, tokens_bundle=4_200), now_s=102.0)
    figures = live_figures(Totals(tokens_naive=10_600, tokens_bundle=4_200), series)
    assert figures["saved_per_s"] == 200.0  # (6,400 - 6,000) saved over 2 s
    assert figures["tokens_saved"] == 6_400
