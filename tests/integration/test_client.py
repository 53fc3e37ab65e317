"""ContextClient against the embedded broker: many concurrent requests over one connection."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest
from aiokafka.errors import KafkaConnectionError

from stream_ctx.client import BundleTimeoutError, ClientError, ContextClient
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.codec import encode_bundle
from stream_ctx.errors import BrokerError, InvalidEventError, MissingTopicError
from stream_ctx.settings import KafkaSettings
from stream_ctx.shell.kafka.admin import ClientKwargs, TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.processing.runner import Runner
from tests.factories import T0, make_finalize, make_item, make_retrieval
from tests.integration.kafka_io import produce, settings_for

# A ~3 s group join, then a few hundred events; generous for a loaded CI runner.
RUN_TIMEOUT_S = 60.0
# Nothing answers these requests; short, since the test waits all of it out.
LOST_TIMEOUT_S = 1.0
# The client reads its own records within a fetch or two (~50 ms each here).
SETTLE_TIMEOUT_S = 10.0
SETTLE_POLL_S = 0.02
CONVERSATIONS = 20
RETRIEVALS_PER_CONVERSATION = 2
ITEMS_PER_RETRIEVAL = 3


@asynccontextmanager
async def running_processor(
    broker: EmbeddedBroker, unique_topic: Callable[[str], str]
) -> AsyncIterator[tuple[str, str]]:
    """An in-process Runner on fresh topics; yields (input topic, output topic)."""
    source, sink = unique_topic("in"), unique_topic("out")
    kwargs = {"bootstrap_servers": broker.bootstrap_servers}
    await ensure_topics(kwargs, [TopicSpec(name=source, partitions=3)])
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=source,
        output_topic=sink,
        dlq_topic=unique_topic("dlq"),
        group_id=unique_topic("group"),
    )
    runner = Runner(settings)
    async with anyio.create_task_group() as tasks:
        await tasks.start(runner.run)  # returns once the output topic exists
        try:
            yield source, sink
        finally:
            runner.stop.set()
    assert runner.stats.dead_letters == 0


async def topics_without_processor(
    client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> tuple[str, str]:
    source, sink = unique_topic("in"), unique_topic("out")
    await ensure_topics(
        client_kwargs, [TopicSpec(name=source, partitions=3), TopicSpec(name=sink, partitions=3)]
    )
    return source, sink


async def settle(condition: Callable[[], bool], what: str) -> None:
    """Wait, bounded, until `condition()` holds."""
    with anyio.fail_after(SETTLE_TIMEOUT_S):
        for _ in range(int(SETTLE_TIMEOUT_S / SETTLE_POLL_S) + 1):
            if condition():
                return
            await anyio.sleep(SETTLE_POLL_S)
    raise AssertionError(f"never happened: {what}")


def content_of(bundle: Bundle) -> dict[str, str]:
    """item id -> content, reassembled from the bundle's blocks."""
    return {item.id: "".join(bundle.blocks[b] for b in item.blocks) for item in bundle.items}


def a_bundle(conversation_id: str, request_id: str) -> Bundle:
    """A real bundle, built by the core as the processor would."""
    processor = ContextProcessor(BundleConfig())
    processor.apply(make_retrieval(conversation_id=conversation_id), position=0)
    bundle = processor.apply(
        make_finalize(conversation_id=conversation_id, request_id=request_id), position=1
    )
    assert bundle is not None
    return bundle


async def test_concurrent_requests_over_one_client_each_get_their_own_bundle(
    broker: EmbeddedBroker, unique_topic: Callable[[str], str]
) -> None:
    conversations = [f"conv-{n:02d}" for n in range(CONVERSATIONS)]
    published: dict[str, dict[str, str]] = {cid: {} for cid in conversations}
    bundles: dict[str, list[Bundle]] = {cid: [] for cid in conversations}
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with (
            running_processor(broker, unique_topic) as (source, sink),
            ContextClient(
                bootstrap_servers=broker.bootstrap_servers, input_topic=source, output_topic=sink
            ) as client,
        ):

            async def retrieve(cid: str, turn: int) -> None:
                items = [
                    make_item(
                        id=f"{cid}/doc-{turn}-{k}",
                        salience=0.5 + k / 10,
                        content=f"chunk {k} of turn {turn}, retrieved for {cid}",
                    )
                    for k in range(ITEMS_PER_RETRIEVAL)
                ]
                await client.publish_items(cid, items, ts=T0 + turn, query=f"turn {turn}")
                published[cid].update({item.id: item.content for item in items})

            async def request(cid: str) -> None:
                bundles[cid].append(await client.request_bundle(cid, ts=T0 + 1_000))

            async with anyio.create_task_group() as tasks:
                for cid in conversations:
                    for turn in range(RETRIEVALS_PER_CONVERSATION):
                        tasks.start_soon(retrieve, cid, turn)
            # Two requests per conversation at once: matching is by request id, not conversation.
            async with anyio.create_task_group() as tasks:
                for cid in conversations * 2:
                    tasks.start_soon(request, cid)
            assert client.pending == 0
            stats = client.stats

    request_ids = set()
    for cid, got in bundles.items():
        assert len(got) == 2
        assert sorted(b.seq for b in got) == [1, 2]
        for bundle in got:
            assert bundle.conversation_id == cid
            assert bundle.request_id is not None
            assert uuid.UUID(bundle.request_id).version == 4
            request_ids.add(bundle.request_id)
            assert content_of(bundle) == published[cid]
    assert len(request_ids) == 2 * CONVERSATIONS
    assert stats.requested == stats.bundles_matched == 2 * CONVERSATIONS
    assert stats.published == CONVERSATIONS * (RETRIEVALS_PER_CONVERSATION + 2)
    assert stats.timeouts == 0


async def test_end_starts_the_conversation_afresh_numbering_on(
    broker: EmbeddedBroker, unique_topic: Callable[[str], str]
) -> None:
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with (
            running_processor(broker, unique_topic) as (source, sink),
            ContextClient.from_settings(
                KafkaSettings(
                    bootstrap_servers=broker.bootstrap_servers,
                    input_topics=[source],
                    output_topic=sink,
                    client={"client_id": "agent-platform"},
                ),
                linger_ms=0,
            ) as client,
        ):
            await client.publish(make_retrieval(conversation_id="c-end"))
            before = await client.request_bundle("c-end", ts=T0 + 1, request_id="turn-1")
            delta = await client.request_bundle("c-end", ts=T0 + 1, mode="delta")
            await client.end("c-end", ts=T0 + 2)
            # A finalize now is refused (dead-lettered); a retrieval starts it again.
            await client.publish(make_retrieval(conversation_id="c-end", ts=T0 + 3))
            after = await client.request_bundle("c-end", ts=T0 + 4, max_tokens=500, mode="delta")
    assert (before.seq, before.request_id, len(before.items)) == (1, "turn-1", 1)
    # Nothing changed: the delta only says item 1 still applies, and rebuilds to the full form.
    assert (delta.mode, delta.base_bundle_id) == ("delta", "c-end:1")
    assert delta.context == "Still applies: §1 (bundle 1)\n"
    assert ContextClient.rebuild_full(delta, before).context == before.context
    # Afresh: a full bundle of the new window, numbered on from the ended one's.
    assert (after.seq, len(after.items), after.mode) == (3, 1, "full")


async def test_request_nobody_answers_times_out_naming_the_request(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    source, sink = await topics_without_processor(client_kwargs, unique_topic)
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with ContextClient(
            bootstrap_servers=broker.bootstrap_servers, input_topic=source, output_topic=sink
        ) as client:
            with pytest.raises(
                BundleTimeoutError, match=r"request 'r-lost' of conversation 'c-9' .* within 1\.0 s"
            ) as caught:
                await client.request_bundle("c-9", request_id="r-lost", timeout_s=LOST_TIMEOUT_S)
            assert client.pending == 0
            assert client.stats.timeouts == 1
    error = caught.value
    assert (error.conversation_id, error.request_id, error.timeout_s) == ("c-9", "r-lost", 1.0)
    assert error.retriable


async def test_bundle_on_the_topic_before_start_is_not_delivered(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    source, sink = await topics_without_processor(client_kwargs, unique_topic)
    stale = encode_bundle(a_bundle("c-old", "r-old"))
    fresh = a_bundle("c-old", "r-new")
    # One batch of several records: this broker's ListOffsets answers inside such a batch.
    await produce(client_kwargs, sink, [(b"c-old", stale)] * 4)
    got: list[Bundle] = []
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with ContextClient(
            bootstrap_servers=broker.bootstrap_servers, input_topic=source, output_topic=sink
        ) as client:

            async def request(request_id: str) -> None:
                got.append(await client.request_bundle("c-old", request_id=request_id))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(request, "r-old")
                tasks.start_soon(request, "r-new")
                await settle(lambda: client.pending == 2, "both requests are registered")
                # The positive control: a bundle behind the stale ones in the same partition.
                # Once it is delivered the reader has passed where they sit, however slow it is.
                await produce(client_kwargs, sink, [(b"c-old", encode_bundle(fresh))])
                # The waiter resolves before the requesting task resumes to record the bundle.
                await settle(
                    lambda: client.pending == 1 and bool(got), "the fresh bundle is delivered"
                )
                assert got == [fresh]
                assert client.stats.records_read == 1
                tasks.cancel_scope.cancel()
            assert client.pending == 0


async def test_duplicate_bundle_resolves_its_request_once(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    source, sink = await topics_without_processor(client_kwargs, unique_topic)
    bundle = a_bundle("c-dup", "r-dup")
    other = a_bundle("c-dup", "r-nobody")
    got: list[Bundle] = []
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with ContextClient(
            bootstrap_servers=broker.bootstrap_servers, input_topic=source, output_topic=sink
        ) as client:

            async def request() -> None:
                got.append(await client.request_bundle("c-dup", ts=T0, request_id="r-dup"))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(request)
                await settle(lambda: client.pending == 1, "the request is registered")
                with pytest.raises(ClientError, match=r"'r-dup' .* already waiting"):
                    await client.request_bundle("c-dup", request_id="r-dup")
                # At-least-once: the same bundle twice, plus noise nobody waits for.
                await produce(
                    client_kwargs,
                    sink,
                    [
                        (b"c-dup", encode_bundle(bundle)),
                        (b"c-dup", b"not a bundle"),
                        (b"c-dup", encode_bundle(other)),
                        (b"c-dup", encode_bundle(bundle)),
                    ],
                )
            await settle(lambda: client.stats.records_read == 4, "all four records were read")
            assert client.pending == 0
            assert client.stats.bundles_matched == 1
    assert got == [bundle]


async def test_client_refuses_missing_topics_and_use_outside_async_with(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    client = ContextClient(
        bootstrap_servers=broker.bootstrap_servers,
        input_topic=unique_topic("in"),
        output_topic=unique_topic("out"),
    )
    with pytest.raises(ClientError, match="not started; use `async with"):
        await client.request_bundle("c-1")
    with (
        anyio.fail_after(RUN_TIMEOUT_S),
        pytest.raises(MissingTopicError, match=r"\.in\..*\.out\..* do not exist"),
    ):
        async with client:
            pass
    source, sink = await topics_without_processor(client_kwargs, unique_topic)
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with ContextClient(
            bootstrap_servers=broker.bootstrap_servers, input_topic=source, output_topic=sink
        ) as used:
            pass
    with pytest.raises(ClientError, match="is closed"):
        await used.end("c-1")


async def test_reader_failure_fails_waiting_requests_at_once(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    source, sink = await topics_without_processor(client_kwargs, unique_topic)
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with ContextClient(
            bootstrap_servers=broker.bootstrap_servers, input_topic=source, output_topic=sink
        ) as client:

            async def broken(*args: object, **kwargs: object) -> None:
                raise KafkaConnectionError("the broker went away")

            # The reader looks the method up on every poll, so the next one fails.
            assert client._reader is not None
            setattr(client._reader.consumer, "getmany", broken)  # noqa: B010 - shadows the method
            with pytest.raises(ClientError, match=r"bundle reader of .* stopped: .*went away"):
                await client.request_bundle("c-1", request_id="r-1")
            assert client.pending == 0
            with pytest.raises(ClientError, match="stopped"):
                await client.end("c-1")


async def test_unreachable_broker_is_a_broker_error() -> None:
    client = ContextClient(bootstrap_servers="127.0.0.1:1")
    with (
        anyio.fail_after(RUN_TIMEOUT_S),
        pytest.raises(BrokerError, match=r"Kafka at '127\.0\.0\.1:1' refused the client"),
    ):
        async with client:
            pass


async def test_invalid_event_is_refused_before_it_is_sent(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    source, sink = await topics_without_processor(client_kwargs, unique_topic)
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with ContextClient(
            bootstrap_servers=broker.bootstrap_servers, input_topic=source, output_topic=sink
        ) as client:
            bad = [make_item(id="ok"), make_item(id="too-salient", salience=7)]
            with pytest.raises(InvalidEventError, match=r"`items\[1\]\.salience`.*got 7"):
                await client.publish_items("c-1", bad, ts=T0)
            with pytest.raises(InvalidEventError, match=r"`ts`.*got -1"):
                await client.request_bundle("c-1", ts=-1)
            assert (client.stats.published, client.pending) == (0, 0)
