"""The one reader of msgspec's error text: the field's path, the problem and the value."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import pytest

from stream_ctx.validation import Invalid, byte_offset, invalid, is_truncated, path_steps


class Item(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    salience: Annotated[float, msgspec.Meta(ge=0, le=1)]
    kind: Literal["chunk", "memory"] = "chunk"


class Document(msgspec.Struct, forbid_unknown_fields=True):
    items: list[Item]


def refused(document: object) -> Invalid:
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.convert(document, Document)
    return invalid(info.value, document)


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            {"items": [{"id": "a", "salience": 0.5}, {"id": "b", "salience": 7}]},
            Invalid("items[1].salience", "Expected `float` <= 1.0", 7),
        ),
        (
            {"items": [{"id": "a", "salience": "high"}]},
            Invalid("items[0].salience", "Expected `float`", "high"),
        ),
        (
            {"items": [{"id": "a", "salience": 0.5, "kind": "poem"}]},
            Invalid("items[0].kind", "Invalid enum value 'poem'", "poem", "choice"),
        ),
        (
            {"items": [{"salience": 0.5}]},
            Invalid("items[0].id", "Object missing required field `id`", kind="missing"),
        ),
        (
            {"items": [], "colour": "red"},
            Invalid("colour", "Object contains unknown field `colour`", kind="unknown"),
        ),
        ([1, 2], Invalid("", "Expected `object`", [1, 2])),
    ],
)
def test_a_refusal_names_the_field_the_problem_and_the_value(
    document: object, expected: Invalid
) -> None:
    assert refused(document) == expected


def test_described_in_one_line_naming_field_and_value() -> None:
    bad = {"items": [{"id": "a", "salience": 7}]}
    assert (
        refused(bad).describe("the body") == "`items[0].salience`: Expected `float` <= 1.0, got 7"
    )
    assert refused([1]).describe("the body") == "the body expected `object`, got [1]"
    assert refused({}).describe("the body") == "`items` is required"
    assert refused({"items": [], "x": 1}).describe("the body") == "`x` is not a field of the body"


def test_a_long_value_is_cut_in_the_message() -> None:
    text = refused({"items": [{"id": "a", "salience": "x" * 500}]}).describe("the body")
    assert text.endswith("...") and len(text) < 200


def test_paths_read_as_steps() -> None:
    assert path_steps('$.items[0].attributes["size"]') == ["items", 0, "attributes", "size"]
    assert path_steps("items[2].salience") == ["items", 2, "salience"]
    assert path_steps("$.attributes[...]") == ["attributes", "..."]
    assert path_steps("$") == []


def test_decode_errors_give_where_the_input_broke() -> None:
    with pytest.raises(msgspec.DecodeError) as malformed:
        msgspec.json.decode(b'{"a": x}')
    with pytest.raises(msgspec.DecodeError) as cut:
        msgspec.json.decode(b'{"a": ')
    assert byte_offset(str(malformed.value)) == 6
    assert byte_offset(str(cut.value)) is None
    assert is_truncated(str(cut.value)) and not is_truncated(str(malformed.value))
