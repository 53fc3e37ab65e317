"""The inspector in a real headless Chromium, against `stream-ctx run` on the embedded broker.

One run serves every test here (a group join costs seconds): it binds 0.0.0.0, so the inspector
demands the token it reads from the environment; the browser only ever talks to 127.0.0.1.
Screenshots go to a temporary folder, or to $INSPECTOR_SCREENSHOTS when `docs/screenshots.py`
runs these tests to refresh the docs' images on purpose.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from playwright.async_api import BrowserContext, ConsoleMessage, Page, async_playwright

from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.entries.reader import read_references
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.events import Event, Finalize
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.shell.http.inspector.views import split_entries
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from tests.integration.kafka_io import (
    cli_command,
    cli_environment,
    collect,
    create_input,
    event_records,
    produce,
    settings_for,
    write_config,
)

# A group join takes ~3 s on this broker; the rest is local and quick.
_RUN_TIMEOUT_S = 60.0
# How long a page may take to show what the stream just did (live updates tick every second).
_LIVE_TIMEOUT_MS = 20_000
_TOKEN = uuid.uuid4().hex
_MAX_ITEMS = 4  # small windows, so the sample workload evicts
# Set by docs/screenshots.py; the tests never write into the checkout otherwise.
_SCREENSHOTS_VARIABLE = "INSPECTOR_SCREENSHOTS"
_CHROMIUM = "/usr/bin/chromium"
_CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
_SHAPE = WorkloadShape(conversations=4, retrievals_per_conversation=8, is_ending=False)


@dataclass(frozen=True, slots=True)
class Live:
    """The running processor: where it serves, what it was fed, and what that must show."""

    base: str
    client: dict[str, str]
    input_topic: str
    finalizes: int
    evicted: tuple[str, str, str]  # conversation, evicted item, the newcomer that evicted it
    shared: tuple[str, int]  # conversation and seq of a bundle where items share a block


def _expected(events: list[Event]) -> tuple[tuple[str, str, str], tuple[str, int]]:
    """The first eviction, and the first bundle sharing a block, that the (deterministic) core
    makes of these events: the run must show the same."""
    processor = ContextProcessor(BundleConfig(max_items=_MAX_ITEMS), is_recording_items=True)
    evictions: list[tuple[str, str, str]] = []
    shared: list[tuple[str, int]] = []
    for position, event in enumerate(events):
        bundle = processor.apply(event, position=position)
        for item_event in processor.take_item_events():
            evicted = item_event.result.evicted
            if evicted is not None:
                evictions.append(
                    (item_event.conversation_id, evicted.id, item_event.result.item_id)
                )
        uses = [block for item in bundle.items for block in item.blocks] if bundle else []
        if bundle is not None and len(uses) > len(set(uses)):
            shared.append((bundle.conversation_id, bundle.seq))
    assert evictions, "the workload evicts nothing"
    assert shared, "no bundle shares a block"
    return evictions[0], shared[-1]


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - our own URL
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


@pytest.fixture(scope="module")
async def run(
    broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Live]:
    """`stream-ctx run` bound to 0.0.0.0 with the inspector on and its token in the env."""
    name = f"inspector.{uuid.uuid4().hex[:8]}"
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=f"{name}.in",
        output_topic=f"{name}.out",
        dlq_topic=f"{name}.dlq",
        group_id=f"{name}.group",
    )
    workdir = tmp_path_factory.mktemp("inspector")
    config = write_config(workdir / "run.toml", settings)
    port = _free_port()
    config.write_text(
        config.read_text(encoding="utf-8")
        + f'[bundle]\nmax_items = {_MAX_ITEMS}\n[metrics]\nport = {port}\nhost = "0.0.0.0"\n'
        "inspector = true\n",
        encoding="utf-8",
    )
    env = {**cli_environment(), "STREAM_CTX_METRICS_INSPECTOR_TOKEN": _TOKEN}
    client = {"bootstrap_servers": broker.bootstrap_servers}
    events = generate(7, _SHAPE)
    with (workdir / "run.log").open("wb") as log:
        process = await anyio.open_process(cli_command(config), env=env, stdout=log, stderr=log)
    try:
        topic = settings.kafka.input_topics[0]
        await create_input(client, topic, 2)
        await produce(client, topic, event_records(events))
        finalizes = sum(isinstance(e, Finalize) for e in events)
        await collect(client, settings.kafka.output_topic, finalizes, timeout_s=_RUN_TIMEOUT_S)
        evicted, shared = _expected(events)
        yield Live(f"http://127.0.0.1:{port}", client, topic, finalizes, evicted, shared)
    finally:
        process.send_signal(signal.SIGTERM)
        with anyio.move_on_after(_RUN_TIMEOUT_S):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
        assert process.returncode == 0, (workdir / "run.log").read_text(encoding="utf-8")


def _free_port() -> int:
    """A port nothing listens on now (the run binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture(scope="module")
async def browser(
    run: Live, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[BrowserContext]:
    """Debian's chromium, headless, in a new empty profile, holding the inspector's cookie."""
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            tmp_path_factory.mktemp("chromium-profile"),
            executable_path=_CHROMIUM,
            args=_CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 860},
        )
        try:
            page = await context.new_page()
            response = await page.goto(f"{run.base}/inspect/?token={_TOKEN}")
            assert response is not None and response.status == 200
            await page.close()
            yield context
        finally:
            await context.close()


@pytest.fixture
async def page(browser: BrowserContext) -> AsyncIterator[Page]:
    """A tab that fails the test on any console error or uncaught exception."""
    tab = await browser.new_page()
    errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)

    tab.on("console", on_console)
    tab.on("pageerror", lambda error: errors.append(str(error)))
    yield tab
    await tab.close()
    assert errors == []


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """Where a test saves its page's picture: a temporary folder unless docs/screenshots.py asks."""
    chosen = os.environ.get(_SCREENSHOTS_VARIABLE)
    return Path(chosen) if chosen else tmp_path


async def _open(page: Page, url: str) -> None:
    response = await page.goto(url)
    assert response is not None and response.status == 200, url
    await page.wait_for_selector("#live-status.on", timeout=_LIVE_TIMEOUT_MS)


async def test_overview_numbers_and_plots_move_as_events_arrive(
    run: Live, page: Page, screenshots: Path
) -> None:
    await _open(page, f"{run.base}/inspect/")
    before = int(await page.inner_text("td[data-live=events]"))
    assert before > 0
    later = WorkloadShape(conversations=2, is_ending=False, start_ms=_SHAPE.start_ms + 3_600_000)
    more = generate(8, later)
    await produce(run.client, run.input_topic, event_records(more))
    await page.wait_for_function(
        "want => Number(document.querySelector('td[data-live=events]').textContent) >= want",
        arg=before + len(more),
        timeout=_LIVE_TIMEOUT_MS,
    )
    await page.wait_for_function(
        "want => Number(document.querySelector('td[data-live=bundles]').textContent) > want",
        arg=run.finalizes,
        timeout=_LIVE_TIMEOUT_MS,
    )
    points = await page.get_attribute("svg[data-plot=events_per_s] polyline", "points")
    assert points and len(points.split()) >= 2
    await page.screenshot(path=screenshots / "inspector-overview.png")


async def test_conversation_page_shows_an_eviction_with_its_reason(
    run: Live, page: Page, screenshots: Path
) -> None:
    cid, evicted, newcomer = run.evicted
    await _open(page, f"{run.base}/inspect/c/{cid}")
    row = page.locator("#timeline tr.what-evicted", has_text=evicted).filter(has_text=newcomer)
    text = await row.first.inner_text()
    assert f"evicted by {newcomer}" in text
    assert "ranked lowest in the full window" in text
    assert await page.locator("#window tbody tr").count() == _MAX_ITEMS
    assert re.search(r"\d\.\d{4}", await page.inner_text("#window tbody tr >> nth=0"))
    await page.screenshot(path=screenshots / "inspector-conversation.png", full_page=False)


async def test_conversations_list_searches_by_id(run: Live, page: Page, screenshots: Path) -> None:
    await _open(page, f"{run.base}/inspect/conversations")
    assert await page.locator("#conversations tbody tr").count() >= _SHAPE.conversations
    await page.screenshot(path=screenshots / "inspector-conversations.png")
    await page.fill("#search", "c-00002")
    visible = page.locator("#conversations tbody tr:visible")
    assert await visible.count() == 1
    assert await visible.first.get_attribute("data-id") == "c-00002"


async def test_bundle_page_shows_what_a_reference_stands_for(
    run: Live, page: Page, screenshots: Path
) -> None:
    cid, seq = run.shared
    await _open(page, f"{run.base}/inspect/c/{cid}")
    await page.click(f"#bundles a[href$='/b/{seq}']")
    await page.wait_for_selector("#context")
    context = await page.locator("#context").text_content()
    assert context is not None
    references = read_references(context)
    assert references, "this bundle's items share a passage"
    marks = page.locator("#context mark.ref")
    assert await marks.count() == len(references)
    box = page.locator("#stands-for")
    for n in (0, len(references) - 1):
        assert await marks.nth(n).text_content() == context[references[n].start : references[n].end]
        await marks.nth(n).hover()
        await box.wait_for(state="visible")
        assert await box.locator("pre").text_content() == references[n].text
        assert f"§{references[n].number}" in await box.locator(".stands-for-head").inner_text()
        await page.mouse.move(0, 0)
        await box.wait_for(state="hidden")
    assert await page.locator("#costs tbody tr").count() == len(split_entries(context))
    assert int(await page.inner_text("#tokens-bundle")) <= int(
        await page.inner_text("#tokens-naive")
    )
    await page.evaluate("window.scrollTo(0, 0)")
    await marks.first.hover()  # the shot shows a reference and the text it stands for
    await box.wait_for(state="visible")
    await page.screenshot(path=screenshots / "inspector-bundle.png")


async def test_token_is_enforced_off_loopback_and_probes_stay_open(
    run: Live, browser: BrowserContext
) -> None:
    await browser.clear_cookies()
    tab = await browser.new_page()
    try:
        for path in ("/inspect/", "/inspect/conversations", "/inspect/stream"):
            response = await tab.goto(f"{run.base}{path}")
            assert response is not None and response.status == 401, path
        wrong = await tab.goto(f"{run.base}/inspect/?token=not-{_TOKEN}")
        assert wrong is not None and wrong.status == 401
        right = await tab.goto(f"{run.base}/inspect/?token={_TOKEN}")
        assert right is not None and right.status == 200
        assert tab.url == f"{run.base}/inspect/"  # the token left the address bar
    finally:
        await tab.close()
    assert await anyio.to_thread.run_sync(_status, f"{run.base}/metrics") == 200
    assert await anyio.to_thread.run_sync(_status, f"{run.base}/readyz") == 200
    assert await anyio.to_thread.run_sync(_status, f"{run.base}/inspect/") == 401
