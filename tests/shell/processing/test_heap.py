import gc

import pytest

from stream_ctx.shell.processing.heap import run_heap


def test_objects_made_before_a_run_are_left_out_of_collections_until_it_ends() -> None:
    made_before: list[list[int]] = [[]]
    with run_heap():
        made_during: list[list[int]] = [[]]
        tracked = gc.get_objects()
        assert not any(o is made_before for o in tracked)
        assert any(o is made_during for o in tracked)
    assert gc.get_freeze_count() == 0
    assert any(o is made_before for o in gc.get_objects())


def test_young_collections_are_rarer_during_a_run_and_as_before_after_it() -> None:
    before = gc.get_threshold()
    with run_heap():
        during = gc.get_threshold()
    assert during[0] > 10 * before[0]
    assert during[1:] == before[1:]
    assert gc.get_threshold() == before


def test_overlapping_runs_leave_the_collector_as_it_was_once_the_last_ends() -> None:
    before = gc.get_threshold()
    first, second = run_heap(), run_heap()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold()[0] > 10 * before[0]  # the second run goes on
    assert gc.get_freeze_count() > 0
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_the_heap_is_given_back_to_the_collector_when_a_run_fails() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError, match="session failed"), run_heap():
        raise RuntimeError("session failed")
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
