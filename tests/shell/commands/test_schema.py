"""`stream-ctx schema`: the printed schemas accept real events and bundles and reject bad ones."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from stream_ctx.core.wire.codec import decode_event
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.errors import StreamCtxError

REPO = Path(__file__).resolve().parents[3]
# Each CLI call imports tiktoken and replays a small file: seconds, not minutes.
CLI_TIMEOUT_S = 120


def _cli(*args: str) -> bytes:
    """Runs the real command in a child process and returns its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "stream_ctx.shell.commands.cli", *args],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=CLI_TIMEOUT_S,
    )
    return done.stdout


@pytest.fixture(scope="module")
def printed() -> dict[str, Any]:
    """`stream-ctx schema --which all`, parsed."""
    document: dict[str, Any] = json.loads(_cli("schema", "--which", "all"))
    return document


@pytest.fixture(scope="module")
def event_validator(printed: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(printed["events"])


@pytest.fixture(scope="module")
def bundle_validator(printed: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(printed["bundle"])


@pytest.mark.parametrize("which", ["events", "bundle"])
def test_schema_which_prints_a_valid_draft_2020_12_schema(
    which: str, printed: dict[str, Any]
) -> None:
    schema = json.loads(_cli("schema", "--which", which))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema == printed[which]
    assert set(printed) == {"events", "bundle"}


def test_event_schema_accepts_every_generated_event(
    event_validator: jsonschema.Draft202012Validator,
) -> None:
    events = generate(11, WorkloadShape(conversations=4, retrievals_per_conversation=6))
    wire = [json.loads(msgspec.json.encode(event)) for event in events]
    assert {value["type"] for value in wire} == {"retrieval", "finalize", "end"}
    for value in wire:
        event_validator.validate(value)


def test_bundle_schema_accepts_every_replayed_bundle(
    bundle_validator: jsonschema.Draft202012Validator,
) -> None:
    lines = _cli("replay", "examples/events.jsonl").splitlines()
    assert lines
    for line in lines:
        bundle_validator.validate(json.loads(line))


def _reasons(validator: jsonschema.Draft202012Validator, value: object) -> list[str]:
    """Every error message, those inside `anyOf` branches included (the union hides them)."""
    pending = list(validator.iter_errors(value))
    reasons = []
    while pending:
        error = pending.pop()
        reasons.append(error.message)
        pending.extend(error.context or ())
    return reasons


def _retrieval() -> dict[str, Any]:
    value: dict[str, Any] = json.loads((REPO / "examples/readme.jsonl").read_text().splitlines()[0])
    assert value["type"] == "retrieval"
    return value


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "bad", "schema_says", "decoder_names"),
    [
        (("items", 0, "salience"), 7, "7 is greater than the maximum of 1.0", "items[0].salience"),
        (("type",), "rewind", "'rewind' is not one of ['retrieval']", "type"),
        (("conversation_id",), "", "'' should be non-empty", "conversation_id"),
        (("ts",), -1, "-1 is less than the minimum of 0", "ts"),
        (("items", 0, "content"), _DELETE, "'content' is a required property", "items[0].content"),
    ],
)
def test_event_schema_rejects_what_the_decoder_rejects(
    path: tuple[str | int, ...],
    bad: object,
    schema_says: str,
    decoder_names: str,
    event_validator: jsonschema.Draft202012Validator,
) -> None:
    value = _retrieval()
    assert _reasons(event_validator, value) == []
    decode_event(json.dumps(value).encode())
    *parents, last = path
    container: Any = value
    for step in parents:
        container = container[step]
    if bad is _DELETE:
        del container[last]
    else:
        container[last] = bad
    assert schema_says in _reasons(event_validator, value)
    with pytest.raises(StreamCtxError, match=re.escape(f"`{decoder_names}`")):
        decode_event(json.dumps(value).encode())


def test_bundle_schema_rejects_a_bundle_without_context(
    bundle_validator: jsonschema.Draft202012Validator,
) -> None:
    bundle = json.loads(_cli("replay", "examples/readme.jsonl").splitlines()[0])
    bundle_validator.validate(bundle)
    del bundle["context"]
    with pytest.raises(jsonschema.ValidationError, match="'context' is a required property"):
        bundle_validator.validate(bundle)
