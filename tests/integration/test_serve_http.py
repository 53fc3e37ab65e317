"""`stream-ctx serve`'s HTTP API with an HTTP client, against a processor on the real broker."""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import anyio
import httpx
import msgspec
import pytest

from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.errors import ConfigError
from stream_ctx.shell.commands.cli import main
from stream_ctx.shell.commands.tail import tail_bundles
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.serve.service import serving
from tests.integration.serve_stack import Stack, start_stack

# A finalize is answered in milliseconds once the processor joined; its first join takes ~6 s.
REQUEST_TIMEOUT_S = 30.0
# Starting serve (rebuilding a small topic) and a few requests.
TEST_TIMEOUT_S = 90.0
TOKEN_A, TOKEN_B = "token-of-tenant-a-0001", "token-of-tenant-b-0002"


@pytest.fixture(scope="module")
async def stack(broker: EmbeddedBroker, request: pytest.FixtureRequest) -> AsyncIterator[Stack]:
    names = iter(range(1000))

    def unique(role: str) -> str:
        return f"serve-http.{role}.{next(names)}.{id(request)}"

    running = await start_stack(broker, unique)
    yield running
    await running.stop()


def _client(base_url: str, token: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(base_url=base_url, headers=headers, timeout=REQUEST_TIMEOUT_S)


async def test_finalize_answers_with_its_bundle_and_get_serves_it_with_etag(stack: Stack) -> None:
    cid = "http-conv-1"
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve(cid)
        async with serving(stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S)) as running:
            async with _client(running.base_url) as http:
                posted = await http.post(
                    f"/v1/conversations/{cid}/finalize",
                    json={"request_id": "r-1", "max_tokens": 500},
                )
                assert posted.status_code == 200, posted.text
                bundle = msgspec.json.decode(posted.content, type=Bundle)
                assert (bundle.conversation_id, bundle.request_id) == (cid, "r-1")
                assert "passage 1 of turn 0" in bundle.context
                etag = f'"{bundle.bundle_id}"'
                assert posted.headers["etag"] == etag

                latest = await http.get(f"/v1/conversations/{cid}/bundle")
                assert (latest.status_code, latest.content) == (200, posted.content)
                assert latest.headers["etag"] == etag
                unchanged = await http.get(
                    f"/v1/conversations/{cid}/bundle", headers={"If-None-Match": etag}
                )
                assert (unchanged.status_code, unchanged.content) == (304, b"")
                text = await http.get(f"/v1/conversations/{cid}/bundle?format=context")
                assert text.text == bundle.context
                assert text.headers["content-type"].startswith("text/plain")
                point = bundle.cache_breakpoint
                breakpoint_header = f"chars={point.chars}, tokens={point.tokens}"
                assert text.headers["x-cache-breakpoint"] == breakpoint_header
                kept = await http.get(f"/v1/conversations/{cid}/bundles/{bundle.seq}")
                assert kept.content == posted.content


async def test_bad_requests_answer_4xx_naming_the_field_and_value(stack: Stack) -> None:
    cid = "http-conv-2"
    with anyio.fail_after(TEST_TIMEOUT_S):
        settings = stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S, max_body_bytes=200)
        async with serving(settings) as running, _client(running.base_url) as http:
            base = f"/v1/conversations/{cid}"
            cases = [
                (
                    await http.post(f"{base}/finalize", json={"max_tokens": 0}),
                    400,
                    "`max_tokens`",
                    "got 0",
                ),
                (
                    await http.post(f"{base}/finalize", json={"order": "random"}),
                    400,
                    "`order`",
                    "'random'",
                ),
                (
                    await http.post(f"{base}/finalize", json={"colour": 1}),
                    400,
                    "`colour`",
                    "not a field",
                ),
                (await http.post(f"{base}/finalize", content=b"{"), 400, "not valid JSON", ""),
                (await http.post(f"{base}/finalize", content=b"[1]"), 400, "body", "[1]"),
                (
                    await http.post(f"{base}/finalize", content=b" " * 201),
                    413,
                    "`serve.max_body_bytes`",
                    "200",
                ),
                (await http.get(f"{base}/bundle?format=xml"), 400, "`format`", "'xml'"),
                (await http.get(f"{base}/bundles/latest"), 400, "`seq`", "'latest'"),
                (await http.get(f"{base}/bundle"), 404, repr(cid), "held here"),
                (await http.get(f"{base}/bundles/7"), 404, repr(cid), "held here"),
            ]
            for response, status, *parts in cases:
                assert response.status_code == status, response.text
                message = response.json()["error"]
                assert all(part in message for part in parts), message


async def test_openapi_document_is_generated_from_the_wire_types(stack: Stack) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serving(stack.serve_settings()) as running, _client(running.base_url) as http:
            document = (await http.get("/v1/openapi.json")).json()
            probes = [(await http.get(path)).text for path in ("/healthz", "/readyz")]
            missing = await http.get("/v2/anything")
    assert probes == ["ok\n", "ready\n"]
    assert missing.status_code == 404 and "/v1/openapi.json" in missing.json()["error"]
    schemas = document["components"]["schemas"]
    assert {"Bundle", "BundleStats", "FinalizeRequest", "ErrorBody"} <= set(schemas)
    assert set(schemas["FinalizeRequest"]["properties"]) == {
        "max_tokens",
        "order",
        "mode",
        "history",
        "request_id",
    }
    assert "/v1/conversations/{conversation_id}/finalize" in document["paths"]


async def test_event_stream_sends_each_new_bundle(stack: Stack) -> None:
    cid = "http-conv-3"
    received: list[Bundle] = []
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve(cid)
        async with (
            serving(stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S)) as running,
            _client(running.base_url) as http,
            http.stream("GET", f"/v1/conversations/{cid}/bundles/stream") as events,
        ):
            assert events.headers["content-type"].startswith("text/event-stream")
            lines = events.aiter_lines()
            assert (await anext(lines)).startswith(":")  # the stream is open: subscribed
            for n in range(2):
                posted = await http.post(
                    f"/v1/conversations/{cid}/finalize", json={"request_id": f"s-{n}"}
                )
                assert posted.status_code == 200, posted.text
            for _ in range(40):  # bounded: two events of four lines each, and comments
                line = await anext(lines)
                if line.startswith("data: "):
                    received.append(msgspec.json.decode(line[6:], type=Bundle))
                if len(received) == 2:
                    break
    assert [b.request_id for b in received] == ["s-0", "s-1"]


async def test_a_restarted_serve_rebuilds_its_view_and_answers_the_same(stack: Stack) -> None:
    cid = "http-conv-4"
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve(cid)
        settings = stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S)
        async with serving(settings) as first, _client(first.base_url) as http:
            posted = await http.post(f"/v1/conversations/{cid}/finalize")
            assert posted.status_code == 200, posted.text
        async with serving(settings) as second, _client(second.base_url) as http:
            assert second.view.progress.records_total >= 1
            again = await http.get(f"/v1/conversations/{cid}/bundle")
    assert (again.status_code, again.content) == (200, posted.content)


async def test_tenant_token_reads_only_its_prefixes_and_others_look_unknown(stack: Stack) -> None:
    tenants = {
        "a": {"token": TOKEN_A, "prefixes": ["a:"]},
        "b": {"token_env": "SERVE_TEST_TOKEN_B", "prefixes": ["b:"]},
    }
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve("b:conv")
        settings = stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S, tenants=tenants)
        environ = {"SERVE_TEST_TOKEN_B": TOKEN_B}
        async with serving(settings, environ=environ) as running:
            async with _client(running.base_url, TOKEN_B) as b:
                assert (await b.post("/v1/conversations/b:conv/finalize")).status_code == 200
                assert (await b.get("/v1/conversations/b:conv/bundle")).status_code == 200
            denied = []
            for token in (TOKEN_A, None, "not-a-token-of-anyone"):
                async with _client(running.base_url, token) as other:
                    denied.append(await other.get("/v1/conversations/b:conv/bundle"))
                    denied.append(await other.get("/v1/conversations/b:conv/bundles/1"))
                    denied.append(await other.get("/v1/conversations/b:conv/bundles/stream"))
                    denied.append(await other.post("/v1/conversations/b:conv/finalize"))
            async with _client(running.base_url, TOKEN_B) as b:
                unknown = await b.get("/v1/conversations/b:nobody/bundle")
    assert unknown.status_code == 404
    for response in denied:
        assert response.status_code == 404
        assert response.content == unknown.content.replace(b"b:nobody", b"b:conv")


async def test_bound_beyond_loopback_without_tenants_refuses_to_start(stack: Stack) -> None:
    settings = stack.serve_settings(host="0.0.0.0")  # noqa: S104 - the binding under test
    with (
        anyio.fail_after(TEST_TIMEOUT_S),
        pytest.raises(ConfigError, match=r"`serve.host` is '0.0.0.0'"),
    ):
        async with serving(settings):
            pass


def test_serve_before_the_output_topic_exists_exits_2_saying_so(
    broker: EmbeddedBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[kafka]\nbootstrap_servers = "{broker.bootstrap_servers}"\n'
        'output_topic = "serve-http.no-such-topic"\n[serve]\nport = 0\n',
        encoding="utf-8",
    )
    assert main(["serve", "--config", str(config)]) == 2
    assert (
        "stream-ctx: MissingTopicError: output topic 'serve-http.no-such-topic' does not exist"
        in capsys.readouterr().err
    )


async def test_conversation_ids_with_slashes_are_served_as_they_are(stack: Stack) -> None:
    cid = "team/alpha/conv-5"
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve(cid)
        settings = stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S)
        async with serving(settings) as running, _client(running.base_url) as http:
            posted = await http.post(f"/v1/conversations/{cid}/finalize")
            latest = await http.get(f"/v1/conversations/{cid}/bundle")
            kept = await http.get(f"/v1/conversations/{cid}/bundles/1")
    assert posted.status_code == 200, posted.text
    assert msgspec.json.decode(posted.content, type=Bundle).conversation_id == cid
    assert latest.content == kept.content == posted.content


async def test_finalize_of_an_unknown_ended_or_expired_conversation_is_refused_saying_why(
    stack: Stack,
) -> None:
    ended, expired = "http-ended", "http-expired"
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve(ended)
        await stack.retrieve(expired, ts=1_735_689_600_000)  # 2025-01-01, long past the TTL
        settings = stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S)
        async with serving(settings) as running, _client(running.base_url) as http:
            good = await http.post(f"/v1/conversations/{ended}/finalize")
            assert good.status_code == 200, good.text
            await stack.end(ended)
            refused = {
                cid: await http.post(f"/v1/conversations/{cid}/finalize")
                for cid in ("http-nope", ended, expired)
            }
            latest = await http.get(f"/v1/conversations/{ended}/bundle")
            nothing = [
                await http.get(f"/v1/conversations/{c}/bundle") for c in ("http-nope", expired)
            ]
            await stack.retrieve(ended, turn=1)
            again = await http.post(f"/v1/conversations/{ended}/finalize")
        # The operator's view of the same: `tail --topic` on the dead-letter topic.
        lines = io.StringIO()
        dlq = stack.settings.kafka.dlq_topic
        await tail_bundles(
            stack.settings,
            out=lines,
            err=io.StringIO(),
            topic=dlq,
            from_beginning=True,
            max_bundles=3,
        )
    assert refused["http-nope"].status_code == 404
    assert refused["http-nope"].json()["error"] == (
        "finalize refused: conversation 'http-nope' has no events; send a retrieval to start it"
    )
    assert refused[ended].status_code == 409
    assert "conversation 'http-ended' has ended" in refused[ended].json()["error"]
    assert refused[expired].status_code == 409
    assert "conversation 'http-expired' expired" in refused[expired].json()["error"]
    # The last good bundle is still the latest; nothing was made for the others.
    assert (latest.status_code, latest.content) == (200, good.content)
    assert [r.status_code for r in nothing] == [404, 404]
    # The conversation's next incarnation numbers on: no bundle id repeats.
    assert again.status_code == 200, again.text
    first, second = (msgspec.json.decode(r.content, type=Bundle) for r in (good, again))
    assert (first.bundle_id, second.bundle_id) == (f"{ended}:1", f"{ended}:2")
    assert "turn 1" in second.context and "turn 0" not in second.context
    shown = lines.getvalue()
    source = re.escape(stack.settings.kafka.input_topics[0])
    assert re.search(
        rf"^{re.escape(dlq)}/\d@\d+ dead letter from {source}/\d@\d+: FinalizeRefusedError:"
        r" finalize refused: conversation 'http-nope' has no events",
        shown,
        re.MULTILINE,
    ), shown
    assert shown.count(" dead letter from ") == 3


async def test_any_unicode_conversation_id_is_served_with_an_encoded_etag(stack: Stack) -> None:
    cid = 'Gespräch "λ/ж" 会話 💬 100%'
    path = f"/v1/conversations/{quote(cid, safe='')}"
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve(cid)
        settings = stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S)
        async with serving(settings) as running, _client(running.base_url) as http:
            posted = await http.post(f"{path}/finalize")
            assert posted.status_code == 200, posted.text
            etag = posted.headers["etag"]
            latest = await http.get(f"{path}/bundle")
            unchanged = await http.get(f"{path}/bundle", headers={"If-None-Match": etag})
            kept = await http.get(f"{path}/bundles/1")
    assert msgspec.json.decode(posted.content, type=Bundle).conversation_id == cid
    assert (
        etag
        == '"Gespr%C3%A4ch%20%22%CE%BB/%D0%B6%22%20%E4%BC%9A%E8%A9%B1%20%F0%9F%92%AC%20100%25:1"'
    )
    assert latest.content == kept.content == posted.content
    assert (unchanged.status_code, unchanged.headers["etag"]) == (304, etag)
