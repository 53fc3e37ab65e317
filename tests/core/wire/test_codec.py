"""Wire codec: strict events with errors naming path and value, canonical bundles."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import pytest

from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.codec import decode_event, encode_bundle
from stream_ctx.core.wire.events import End, Finalize, Retrieval
from stream_ctx.errors import InvalidEventError, StreamCtxError
from tests.factories import T0


def _retrieval(**item: Any) -> dict[str, Any]:
    fields = {"id": "ep-7", "kind": "episode", "salience": 0.83, "content": "text"} | item
    return {
        "type": "retrieval",
        "conversation_id": "c-42",
        "event_id": "e-1",
        "ts": T0,
        "items": [fields],
    }


def _encode(document: object) -> bytes:
    return json.dumps(document).encode()


def test_decode_issue_examples() -> None:
    retrieval = decode_event(
        b'{"type":"retrieval","conversation_id":"c-42","event_id":"e-1001","ts":1764480000000,'
        b'"query":"optional","items":[{"id":"ep-7","kind":"episode","salience":0.83,'
        b'"created_at":1764400000000,"content":"text placed in the prompt","attributes":'
        b'{"language":"rust","domain":"web-api","task_type":"debugging"},"tags":["async","auth"]}]}'
    )
    assert isinstance(retrieval, Retrieval)
    assert retrieval.items[0].attributes["task_type"] == "debugging"
    assert retrieval.items[0].tags == ["async", "auth"]
    finalize = decode_event(
        b'{"type":"finalize","conversation_id":"c-42","event_id":"e-1002","ts":1764480005000,'
        b'"request_id":"turn-5","max_tokens":4000}'
    )
    assert isinstance(finalize, Finalize)
    assert (finalize.request_id, finalize.max_tokens) == ("turn-5", 4000)
    end = decode_event(
        b'{"type":"end","conversation_id":"c-42","event_id":"e-1003","ts":1764480009000}'
    )
    assert isinstance(end, End)


def test_decode_optional_fields_default() -> None:
    event = decode_event(_encode(_retrieval()))
    assert isinstance(event, Retrieval)
    assert event.query is None
    item = event.items[0]
    assert (item.created_at, item.attributes, item.tags) == (None, {}, [])
    finalize = decode_event(b'{"type":"finalize","conversation_id":"c","event_id":"e","ts":1}')
    assert isinstance(finalize, Finalize)
    assert (finalize.request_id, finalize.max_tokens) == (None, None)


def test_unknown_fields_are_ignored() -> None:
    document = _retrieval(score=3, embedding=[0.1, 0.2])
    document["partition_hint"] = {"any": "thing"}
    event = decode_event(_encode(document))
    assert isinstance(event, Retrieval)
    assert event.items[0].id == "ep-7"


def test_created_at_defaults_to_event_ts_in_the_bundle() -> None:
    processor = ContextProcessor(BundleConfig())
    processor.apply(decode_event(_encode(_retrieval())), position=1)
    finalize = {"type": "finalize", "conversation_id": "c-42", "event_id": "e-2", "ts": T0 + 5}
    bundle = processor.apply(decode_event(_encode(finalize)), position=2)
    assert bundle is not None
    assert bundle.items[0].created_at == T0


@pytest.mark.parametrize(
    ("item", "path", "value"),
    [
        ({"salience": 7}, "items[0].salience", "7"),
        ({"salience": -0.5}, "items[0].salience", "-0.5"),
        ({"salience": "high"}, "items[0].salience", "'high'"),
        ({"id": ""}, "items[0].id", "''"),
        ({"content": 12}, "items[0].content", "12"),
        ({"created_at": "yesterday"}, "items[0].created_at", "'yesterday'"),
        ({"tags": ["ok", 5]}, "items[0].tags[1]", "5"),
    ],
)
def test_invalid_item_field_names_path_and_value(
    item: dict[str, Any], path: str, value: str
) -> None:
    with pytest.raises(InvalidEventError, match=re.escape(f"`{path}`")) as info:
        decode_event(_encode(_retrieval(**item)))
    assert f"got {value}" in str(info.value)
    assert info.value.path == f"$.{path}"


def test_invalid_salience_message_reads_like_the_style_guide() -> None:
    with pytest.raises(InvalidEventError, match=r"`items\[0\]\.salience`.*got 7$"):
        decode_event(_encode(_retrieval(salience=7)))


def test_invalid_attribute_value_names_path_and_value() -> None:
    with pytest.raises(InvalidEventError, match=r"items\[0\]\.attributes") as info:
        decode_event(_encode(_retrieval(attributes={"language": 5})))
    assert "got 5" in str(info.value)


@pytest.mark.parametrize(
    ("document", "path", "value"),
    [
        ({"ts": -1}, "ts", "-1"),
        ({"ts": "now"}, "ts", "'now'"),
        ({"conversation_id": ""}, "conversation_id", "''"),
        ({"items": "none"}, "items", "'none'"),
    ],
)
def test_invalid_event_field_names_path_and_value(
    document: dict[str, Any], path: str, value: str
) -> None:
    with pytest.raises(InvalidEventError, match=re.escape(f"`{path}`")) as info:
        decode_event(_encode(_retrieval() | document))
    assert f"got {value}" in str(info.value)


def test_invalid_max_tokens_names_path_and_value() -> None:
    finalize = {
        "type": "finalize",
        "conversation_id": "c",
        "event_id": "e",
        "ts": 1,
        "max_tokens": 0,
    }
    with pytest.raises(InvalidEventError, match=r"`max_tokens`.*got 0"):
        decode_event(_encode(finalize))


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"type": "end", "conversation_id": "c", "event_id": "e"}, "ts"),
        ({"type": "finalize", "event_id": "e", "ts": 1}, "conversation_id"),
        ({"conversation_id": "c", "event_id": "e", "ts": 1}, "type"),
    ],
)
def test_missing_field_is_named(document: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidEventError, match=rf"`{re.escape(path)}`.*missing"):
        decode_event(_encode(document))


def test_missing_item_field_is_named_with_its_index() -> None:
    document = _retrieval()
    del document["items"][0]["salience"]
    with pytest.raises(InvalidEventError, match=r"`items\[0\]\.salience`.*missing"):
        decode_event(_encode(document))


def test_bad_type_tag_names_type_and_value() -> None:
    document = {"type": "retreival", "conversation_id": "c", "event_id": "e", "ts": 1}
    with pytest.raises(InvalidEventError, match=r"`type`.*'retreival'"):
        decode_event(_encode(document))


@pytest.mark.parametrize("data", [b'{"type":"retrieval",', b"not json", b"", b"{]"])
def test_invalid_json_is_reported(data: bytes) -> None:
    with pytest.raises(InvalidEventError, match="invalid JSON") as info:
        decode_event(data)
    assert info.value.path == "$"


@pytest.mark.parametrize(
    "data",
    [
        b"[1, 2",
        b'{"type":"finalize","conversation_id":"c","event_id":"e","ts":"now",',
        b'{"type":"nope",',
    ],
)
def test_truncated_json_after_a_wrong_type_is_an_invalid_event(data: bytes) -> None:
    # msgspec reports the type mismatch before it reaches the truncation.
    with pytest.raises(
        InvalidEventError, match=r"^invalid JSON: Input data was truncated$"
    ) as info:
        decode_event(data)
    assert info.value.path == "$"
    assert isinstance(info.value.__cause__, msgspec.ValidationError)


def test_non_object_event_is_reported_at_the_root() -> None:
    with pytest.raises(InvalidEventError) as info:
        decode_event(b"[1, 2]")
    assert str(info.value) == "`$`: Expected `object`, got [1, 2]"
    assert info.value.path == "$"


def test_missing_field_message_and_path_are_exact() -> None:
    no_items = _retrieval()
    del no_items["items"]
    no_kind = _retrieval()
    del no_kind["items"][0]["kind"]
    for document, path in [(no_items, "items"), (no_kind, "items[0].kind")]:
        with pytest.raises(InvalidEventError) as info:
            decode_event(_encode(document))
        assert str(info.value) == f"`{path}` is required but missing"
        assert info.value.path == f"$.{path}"


def test_bad_value_in_a_mapping_names_its_key_and_reads_exactly() -> None:
    bad = _retrieval(attributes={"language": "go", "size": 5, "n": 6})
    with pytest.raises(InvalidEventError) as info:
        decode_event(_encode(bad))
    assert str(info.value) == '`items[0].attributes["size"]`: Expected `str`, got 5'
    assert info.value.path == '$.items[0].attributes["size"]'


@pytest.mark.parametrize(("length", "is_cut"), [(118, False), (119, True)])
def test_a_long_value_is_cut_past_120_characters(length: int, is_cut: bool) -> None:
    text = "x" * length
    with pytest.raises(InvalidEventError) as info:
        decode_event(_encode(_retrieval(salience=text)))
    shown = repr(text)[:120] + "..." if is_cut else repr(text)
    assert len(repr(text)) == length + 2
    assert str(info.value) == f"`items[0].salience`: Expected `float`, got {shown}"


def test_invalid_event_error_is_a_stream_ctx_error() -> None:
    assert issubclass(InvalidEventError, StreamCtxError)


def test_encode_bundle_round_trips_and_is_canonical() -> None:
    processor = ContextProcessor(BundleConfig())
    processor.apply(decode_event(_encode(_retrieval(attributes={"language": "rust"}))), position=1)
    finalize = {
        "type": "finalize",
        "conversation_id": "c-42",
        "event_id": "e-2",
        "ts": T0 + 5,
        "request_id": "turn-5",
    }
    bundle = processor.apply(decode_event(_encode(finalize)), position=2)
    assert bundle is not None
    data = encode_bundle(bundle)
    assert msgspec.json.decode(data, type=Bundle) == bundle
    assert encode_bundle(msgspec.json.decode(data, type=Bundle)) == data
    wire = json.loads(data)
    assert wire["type"] == "bundle"
    assert list(wire)[:2] == ["type", "bundle_id"]
    assert wire["items"][0]["blocks"]
    assert "".join(wire["blocks"][b] for b in wire["items"][0]["blocks"]) == "text"
