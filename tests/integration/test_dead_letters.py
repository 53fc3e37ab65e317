"""Bad input against the real broker: dead-lettered with its original bytes, the stream goes on."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import msgspec
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import ConsumerRecord, RecordMetadata, TopicPartition

from stream_ctx.core.wire.events import Event, Finalize, Retrieval, RetrievedItem
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.errors import MissingTopicError
from stream_ctx.shell.kafka.admin import ClientKwargs, partition_counts
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.processing.runner import Runner
from stream_ctx.shell.processing.stats import RunnerStats
from tests.integration.kafka_io import (
    bundles_by_id,
    cli_command,
    cli_environment,
    collect,
    committed_offsets,
    create_input,
    event_records,
    high_watermarks,
    settings_for,
    write_config,
)
from tests.integration.test_runner import replay_bundles

# Group join on this broker takes ~3 s; the few dozen events here take well under a second.
RUN_TIMEOUT_S = 30.0
# A process start (imports, tokenizer) plus one metadata round trip.
CLI_TIMEOUT_S = 30.0
# Small enough that a test can exceed it cheaply, large enough for every event of SHAPE.
MAX_EVENT_BYTES = 4096
# Every conversation's last event is a finalize, so its bundle arriving means all was read.
SHAPE = WorkloadShape(
    conversations=4,
    retrievals_per_conversation=4,
    finalize_every=4,
    items_per_retrieval=(1, 3),
    chunk_chars=(40, 120),
    is_ending=False,
)
ORIGINAL_HEADERS = [("trace-id", b"t-42"), ("origin", b"\x00\xffraw")]
ERROR_HEADER_PREFIXES = ("__streams.errors.", "stream-ctx.errors.")
# Producer batches this small, so a record outgrows them cheaply.
MAX_BATCH_BYTES = 16_384
MEBIBYTE = 1_048_576

Headers = Sequence[tuple[str, bytes]]
InputRecord = tuple[bytes | None, bytes | None, Headers]


@dataclass(frozen=True, slots=True)
class BadInput:
    """A record the processor must dead-letter, and what its error message must say."""

    key: bytes | None
    value: bytes | None
    message: str


def foreign_retrieval() -> Retrieval:
    """A well-formed retrieval for conversation c-00000 that the valid stream does not contain.

    Applying it would change c-00000's window and counters, so a bad record that is wrongly
    applied instead of dead-lettered shows up as a bundle that differs from replay.
    """
    first = next(e for e in generate(99, SHAPE) if isinstance(e, Retrieval))
    assert first.conversation_id == "c-00000"
    return first


def oversized(size: int) -> bytes:
    """The foreign retrieval grown past `size` bytes by one long item; valid in every other way."""
    event = foreign_retrieval()
    big = RetrievedItem(id="c-00000/huge", kind="chunk", salience=0.9, content="x" * size)
    return msgspec.json.encode(msgspec.structs.replace(event, items=[*event.items, big]))


def bad_input(kind: str) -> BadInput:
    encoded = msgspec.json.encode(foreign_retrieval())
    if kind == "invalid_json":
        return BadInput(b"c-00000", encoded[:-7], r"(?i)invalid JSON")
    if kind == "schema_violation":
        document = msgspec.json.decode(encoded)
        document["items"][0]["salience"] = 7
        return BadInput(b"c-00000", msgspec.json.encode(document), r"`items\[0\]\.salience`.*\b7\b")
    if kind == "key_disagrees_with_conversation_id":
        return BadInput(b"c-00001", encoded, r"conversation_id.*'c-00001'|'c-00001'.*c-00000")
    if kind == "non_utf8_key":
        return BadInput(b"\xff\xfe", encoded, r"(?i)utf-?8")
    if kind == "invalid_utf8_in_ignored_field":
        return BadInput(b"c-00000", encoded[:-1] + b',"x":"\xff\xfe"}', r"not valid UTF-8: byte")
    if kind == "over_max_event_bytes":
        return BadInput(
            b"c-00000", oversized(MAX_EVENT_BYTES), rf"{MAX_EVENT_BYTES}|max_event_bytes"
        )
    if kind == "missing_key":
        return BadInput(None, encoded, r"(?i)key")
    if kind == "null_key_and_value":
        return BadInput(None, None, r"(?i)null|missing")
    raise AssertionError(kind)


BAD_KINDS = (
    "invalid_json",
    "schema_violation",
    "key_disagrees_with_conversation_id",
    "non_utf8_key",
    "invalid_utf8_in_ignored_field",
    "over_max_event_bytes",
    "missing_key",
    "null_key_and_value",
)


async def send_each(
    client_kwargs: ClientKwargs, topic: str, records: Sequence[InputRecord]
) -> list[RecordMetadata]:
    """Send (key, value, headers) records in order; return where each one landed."""
    producer = AIOKafkaProducer(
        **client_kwargs, acks="all", enable_idempotence=False, max_request_size=16 * MEBIBYTE
    )
    await producer.start()
    try:
        futures = []
        for key, value, headers in records:
            if key is None and value is None:
                # aiokafka's send() refuses this record; Kafka and other clients accept it.
                batch = producer.create_batch()
                batch.append(key=None, value=None, timestamp=None, headers=list(headers))
                futures.append(await producer.send_batch(batch, topic, partition=0))
            else:
                futures.append(await producer.send(topic, value, key=key, headers=list(headers)))
        return [await future for future in futures]
    finally:
        await producer.stop()


def split_headers(headers: Headers) -> tuple[list[tuple[str, bytes]], dict[str, bytes]]:
    """The record's own headers (in order), and the error headers by name."""
    own = [(k, v) for k, v in headers if not k.startswith(ERROR_HEADER_PREFIXES)]
    errors = {k: v for k, v in headers if k.startswith(ERROR_HEADER_PREFIXES)}
    return own, errors


@dataclass(slots=True)
class Outcome:
    """What a run over valid events with one bad record in the middle left behind."""

    events: list[Event]
    landed: RecordMetadata
    letters: list[ConsumerRecord[bytes, bytes]]
    bundles: list[ConsumerRecord[bytes, bytes]]
    stats: RunnerStats
    marks: dict[TopicPartition, int]
    committed: dict[TopicPartition, int | None]
    source: str


async def run_with_bad_record(
    bootstrap: str,
    client_kwargs: ClientKwargs,
    unique_topic: Callable[[str], str],
    bad: BadInput,
    **kafka: object,
) -> Outcome:
    """Produce valid events with `bad` in the middle, run to the last bundle, read the results."""
    events: list[Event] = generate(5, SHAPE)
    finalizes = sum(isinstance(e, Finalize) for e in events)
    valid = event_records(events)
    assert max(len(value or b"") for _, value in valid) <= MAX_EVENT_BYTES
    middle = len(valid) // 2
    stream: list[InputRecord] = [(k, v, ()) for k, v in valid[:middle]]
    stream += [(bad.key, bad.value, ORIGINAL_HEADERS)]
    stream += [(k, v, ()) for k, v in valid[middle:]]
    source, sink, dlq = unique_topic("in"), unique_topic("out"), unique_topic("dlq")
    group = unique_topic("group")
    await create_input(client_kwargs, source, partitions=2)
    landed = (await send_each(client_kwargs, source, stream))[middle]
    settings = settings_for(
        bootstrap, input_topic=source, output_topic=sink, dlq_topic=dlq, group_id=group
    )
    settings = msgspec.structs.replace(
        settings,
        kafka=msgspec.structs.replace(
            settings.kafka, **{"max_event_bytes": MAX_EVENT_BYTES, **kafka}
        ),
    )
    runner = Runner(settings)
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with anyio.create_task_group() as tasks:
            await tasks.start(runner.run)
            bundles = await collect(client_kwargs, sink, finalizes, timeout_s=RUN_TIMEOUT_S)
            letters = await collect(client_kwargs, dlq, 1, timeout_s=RUN_TIMEOUT_S)
            runner.stop.set()
        marks = await high_watermarks(client_kwargs, source, timeout_s=RUN_TIMEOUT_S)
        committed = await committed_offsets(client_kwargs, group, list(marks))
    assert sum(marks.values()) == len(stream)
    # The bad record is not the last of its partition, so "past it" means "everything".
    assert marks[landed.topic_partition] > landed.offset + 1
    return Outcome(events, landed, letters, bundles, runner.stats, marks, committed, source)


def assert_stream_went_on(outcome: Outcome) -> None:
    """Every valid event's bundle as replay gives it, one dead letter, every offset committed."""
    finalizes = sum(isinstance(e, Finalize) for e in outcome.events)
    assert len(outcome.bundles) == finalizes
    assert bundles_by_id(outcome.bundles) == replay_bundles(outcome.events)
    assert outcome.stats.bundles == finalizes
    assert outcome.stats.dead_letters == 1
    assert {tp: offset or 0 for tp, offset in outcome.committed.items()} == outcome.marks


def assert_error_headers(outcome: Outcome, message: str) -> None:
    """The KIP-1034 headers: exception class, message, and the record's source coordinates."""
    [letter] = outcome.letters
    own, errors = split_headers(letter.headers)
    assert own == ORIGINAL_HEADERS
    assert errors["__streams.errors.exception"].decode().rsplit(".", 1)[-1] == "InvalidEventError"
    text = errors["__streams.errors.message"].decode()
    assert re.search(message, text), text
    assert errors["__streams.errors.topic"] == outcome.source.encode()
    assert errors["__streams.errors.partition"] == str(outcome.landed.partition).encode()
    assert errors["__streams.errors.offset"] == str(outcome.landed.offset).encode()


@pytest.mark.parametrize("kind", BAD_KINDS)
async def test_bad_record_is_dead_lettered_with_original_bytes_and_stream_goes_on(
    kind: str,
    broker: EmbeddedBroker,
    client_kwargs: ClientKwargs,
    unique_topic: Callable[[str], str],
) -> None:
    bad = bad_input(kind)
    outcome = await run_with_bad_record(broker.bootstrap_servers, client_kwargs, unique_topic, bad)
    [letter] = outcome.letters
    assert letter.key == bad.key
    assert letter.value == bad.value
    assert_error_headers(outcome, bad.message)
    assert_stream_went_on(outcome)


async def test_record_over_a_mebibyte_is_dead_lettered_whole_and_stream_goes_on(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    """Larger than the default max_event_bytes and than any produce batch of ours: the dead
    letter still carries every byte (the topic is created to accept it), not a truncated head."""
    bad = BadInput(b"c-00000", oversized(3 * MEBIBYTE), r"over kafka.max_event_bytes = 1048576")
    outcome = await run_with_bad_record(
        broker.bootstrap_servers,
        client_kwargs,
        unique_topic,
        bad,
        max_event_bytes=MEBIBYTE,
        max_batch_size=MAX_BATCH_BYTES,
    )
    [letter] = outcome.letters
    assert len(bad.value or b"") > 3 * MEBIBYTE
    assert letter.key == bad.key
    assert letter.value == bad.value
    assert_error_headers(outcome, bad.message)
    assert "stream-ctx.errors.value-truncated-to" not in dict(letter.headers)
    assert_stream_went_on(outcome)


async def test_missing_input_topic_raises_naming_the_topic(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    missing = unique_topic("absent")
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=missing,
        output_topic=unique_topic("out"),
        dlq_topic=unique_topic("dlq"),
        group_id=unique_topic("group"),
    )
    with anyio.fail_after(RUN_TIMEOUT_S):
        with pytest.raises(MissingTopicError, match=re.escape(repr(missing))):
            await Runner(settings).run()
        # Asking about it did not auto-create it (brokers do for a metadata request naming it).
        with pytest.raises(MissingTopicError):
            await partition_counts(client_kwargs, [missing])


async def test_run_command_with_missing_input_topic_exits_nonzero_with_one_clear_line(
    broker: EmbeddedBroker, unique_topic: Callable[[str], str], tmp_path: Path
) -> None:
    missing = unique_topic("absent")
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=missing,
        output_topic=unique_topic("out"),
        dlq_topic=unique_topic("dlq"),
        group_id=unique_topic("group"),
    )
    config = write_config(tmp_path / "run.toml", settings)
    with anyio.fail_after(CLI_TIMEOUT_S):
        done = await anyio.run_process(cli_command(config), check=False, env=cli_environment())
    stderr = done.stderr.decode()
    assert done.returncode != 0
    assert re.search(
        rf"^stream-ctx: MissingTopicError: .*{re.escape(repr(missing))}", stderr, re.MULTILINE
    ), stderr
    assert "Traceback" not in stderr, stderr
