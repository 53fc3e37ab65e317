"""The progress watchdog's judgement, fed positions and high watermarks by hand."""

from __future__ import annotations

from aiokafka.structs import TopicPartition

from stream_ctx.shell.processing.watchdog import ProgressWatch

P0, P1 = TopicPartition("in", 0), TopicPartition("in", 1)


def test_records_waiting_and_nothing_moving_is_a_stall_told_once() -> None:
    progress = ProgressWatch(stall_after_s=10.0)
    assert progress.observe({P0: 5, P1: 9}, {P0: 12, P1: 9}, now=0.0) == ({P0: 7, P1: 0}, False)
    assert progress.observe({P0: 5, P1: 9}, {P0: 12, P1: 9}, now=9.9)[1] is False
    assert progress.observe({P0: 5, P1: 9}, {P0: 13, P1: 9}, now=10.0) == ({P0: 8, P1: 0}, True)
    assert progress.observe({P0: 5, P1: 9}, {P0: 13, P1: 9}, now=50.0)[1] is False  # told once
    assert progress.is_stalled
    assert progress.seconds_since(50.0) == 50.0
    stall = progress.stall({P0: 8, P1: 0}, now=50.0, why=lambda tp: "a fetch response")
    assert stall.describe() == (
        "no progress for 50 s with records waiting: in/0 lag 8 (waiting on a fetch response)"
    )


def test_any_partition_moving_is_progress() -> None:
    progress = ProgressWatch(stall_after_s=10.0)
    progress.observe({P0: 5, P1: 1}, {P0: 12, P1: 9}, now=0.0)
    progress.observe({P0: 5, P1: 2}, {P0: 12, P1: 9}, now=9.0)
    assert progress.observe({P0: 5, P1: 2}, {P0: 12, P1: 9}, now=18.0)[1] is False
    assert progress.seconds_since(18.0) == 9.0


def test_an_idle_member_never_stalls_and_a_moving_one_recovers() -> None:
    progress = ProgressWatch(stall_after_s=10.0)
    for now in range(0, 100, 5):
        assert progress.observe({P0: 12}, {P0: 12}, now=float(now))[1] is False
    assert progress.seconds_since(95.0) == 0.0
    progress.observe({P0: 12}, {P0: 20}, now=100.0)
    assert progress.observe({P0: 12}, {P0: 20}, now=110.0)[1] is True
    progress.observe({P0: 13}, {P0: 20}, now=111.0)
    assert not progress.is_stalled
