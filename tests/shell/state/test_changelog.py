"""RestoredPartition: folding changelog records and resolving them into conversations."""

from __future__ import annotations

import msgspec

from stream_ctx.core.conversation.changes import ConversationState
from stream_ctx.core.window.accumulator import WindowCounters
from stream_ctx.shell.state.changelog import RestoredPartition, context_key, item_key, state_key
from tests.factories import T0, Written, make_context_item

# Conversation ids whose msgpack encodings differ in header and length, one the start of another.
IDS = ("c", "c-1", "c-10", "é" * 20, "x" * 40)


def _state(
    cid: str,
    window: list[tuple[str, int]],
    *,
    seq: int = 2,
    is_ended: bool = False,
    position: int = 5,
) -> Written:
    state = ConversationState(
        counters=WindowCounters(seq=seq),
        last_ts=T0,
        position=position,
        window=window,
        is_ended=is_ended,
    )
    return Written(state_key(cid), msgspec.msgpack.encode(state))


def _item(cid: str, item: str, revision: int) -> Written:
    record = make_context_item(id=item, content=f"{cid}/{item}@{revision}")
    return Written(item_key(cid, (item, revision)), msgspec.msgpack.encode(record))


def test_fold_keeps_the_latest_value_and_a_tombstone_deletes_until_written_again() -> None:
    restored = RestoredPartition()
    restored.fold([_item("c", "a", 1), _state("c", [("a", 1)]), _item("c", "b", 1)])
    restored.fold([Written(item_key("c", ("b", 1)), None), _item("c", "a", 1)])
    restored.fold([Written(item_key("c", ("a", 1)), None), _item("c", "a", 1)])
    state, items, context = restored.load("c")
    assert [item.content for item in items] == ["c/a@1"]
    assert (state.window, context) == ([("a", 1)], None)
    assert restored.orphans("c") == []
    assert restored.records == 7


def test_each_conversation_loads_its_own_records_whatever_its_id_shares_with_others() -> None:
    restored = RestoredPartition()
    for cid in IDS:
        restored.fold([_item(cid, "a", 1), _item(cid, "a", 2), _state(cid, [("a", 2)])])
        restored.fold([Written(context_key(cid, 2), cid.encode())])
    assert sorted(restored.conversation_ids()) == sorted(IDS)
    for cid in IDS:
        _, items, context = restored.load(cid)
        assert [item.content for item in items] == [f"{cid}/a@2"]
        assert context == cid.encode()
        assert restored.orphans(cid) == [(item_key(cid, ("a", 1)), None)]


def test_orphans_are_what_a_state_does_not_point_at_and_a_stateless_conversation_is_none() -> None:
    restored = RestoredPartition()
    restored.fold(
        [
            _item("c-1", "kept", 1),
            _item("c-1", "left", 1),
            Written(context_key("c-1", 1), b"old"),
            Written(context_key("c-1", 2), b"now"),
            _state("c-1", [("kept", 1)]),
            _item("c-10", "a", 1),
            _state("ended", [], is_ended=True),
            Written(context_key("ended", 2), b"last"),
        ]
    )
    assert sorted(restored.conversation_ids()) == ["c-1", "ended"]
    assert set(restored.orphans("c-1")) == {
        (item_key("c-1", ("left", 1)), None),
        (context_key("c-1", 1), None),
    }
    assert restored.orphans("ended") == [(context_key("ended", 2), None)]


def test_a_reload_keeps_only_the_conversation_asked_for_and_counts_every_record() -> None:
    restored = RestoredPartition(only="c-1")
    restored.fold([_item(cid, "a", 1) for cid in IDS] + [_state(cid, [("a", 1)]) for cid in IDS])
    assert restored.conversation_ids() == ["c-1"]
    assert restored.records == 2 * len(IDS)
    assert [cid for cid, *_ in restored.conversations()] == ["c-1"]


def test_end_offset_is_one_past_the_highest_position_of_the_latest_states() -> None:
    restored = RestoredPartition()
    assert restored.end_offset() is None
    restored.fold([_item("c", "a", 1), _state("c", [("a", 1)], position=40)])
    restored.fold([_state("c-1", [], position=7), _state("c", [("a", 1)], position=12)])
    assert restored.end_offset() == 13
    restored.fold([Written(state_key("c"), None)])
    assert restored.end_offset() == 8
