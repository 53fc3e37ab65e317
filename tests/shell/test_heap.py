import gc

import pytest

from stream_ctx.shell.heap import startup_heap_frozen


def test_objects_made_before_a_run_are_left_out_of_collections_until_it_ends() -> None:
    made_before = [[]]
    with startup_heap_frozen():
        made_during = [[]]
        tracked = gc.get_objects()
        assert not any(o is made_before for o in tracked)
        assert any(o is made_during for o in tracked)
    assert gc.get_freeze_count() == 0
    assert any(o is made_before for o in gc.get_objects())


def test_the_heap_is_given_back_to_the_collector_when_a_run_fails() -> None:
    with pytest.raises(RuntimeError, match="session failed"), startup_heap_frozen():
        raise RuntimeError("session failed")
    assert gc.get_freeze_count() == 0
