"""`replay` applies the checks and the size limit `run` applies, reading no line whole past it."""

from __future__ import annotations

import io

import msgspec

from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.events import Finalize
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.shell.commands.replay import replay

MAX_EVENT_BYTES = 65_536


def run_replay(lines: list[bytes]) -> tuple[int, list[bytes], str]:
    out, err = io.BytesIO(), io.StringIO()
    source = io.BytesIO(b"\n".join(lines) + b"\n")
    bad = replay(BundleConfig(), source, out, err, max_event_bytes=MAX_EVENT_BYTES)
    return bad, out.getvalue().splitlines(), err.getvalue()


def test_invalid_utf8_anywhere_and_an_oversized_line_are_bad_lines_and_the_rest_goes_on() -> None:
    events = generate(3, WorkloadShape(conversations=2, retrievals_per_conversation=3))
    lines = [msgspec.json.encode(e) for e in events]
    good_bad, _, _ = run_replay(lines)
    assert good_bad == 0
    invalid = lines[0][:-1] + b',"x":"\xff\xfe"}'
    huge = lines[0][:-1] + b',"x":"' + b"y" * (3 * MAX_EVENT_BYTES) + b'"}'
    bad, bundles, err = run_replay([invalid, *lines[:2], huge, *lines[2:]])
    assert bad == 2
    assert len(bundles) == sum(isinstance(e, Finalize) for e in events)
    assert "<stdin>:1:1: record value is not valid UTF-8: byte" in err, err
    assert (
        f"<stdin>:4:1: record value is {len(huge)} bytes,"
        f" over kafka.max_event_bytes = {MAX_EVENT_BYTES}" in err
    )


def test_a_bad_line_is_named_file_line_column_with_the_allowed_values_of_an_enum() -> None:
    line = b'{"type":"finalize","conversation_id":"c","event_id":"e","ts":1,"order":"stabel"}'
    bad, _, err = run_replay([line])
    assert bad == 1
    column = line.index(b'"order"') + 1
    assert err.startswith(f"<stdin>:1:{column}: `order`: "), err
    assert err.rstrip().endswith("; allowed: 'edges', 'priority', 'stable'"), err


def test_an_unknown_event_type_lists_the_three() -> None:
    _, _, err = run_replay([b'{"type":"fin","conversation_id":"c"}'])
    assert "allowed: 'retrieval', 'finalize', 'end'" in err, err


def test_a_date_string_for_ts_says_it_is_epoch_milliseconds_and_what_it_would_be() -> None:
    line = b'{"type":"end","conversation_id":"c","event_id":"e","ts":"2025-01-01T00:00:00Z"}'
    _, _, err = run_replay([line])
    assert "`ts` is epoch milliseconds (an integer), e.g. 1735689600000 for" in err, err
    item = b'{"id":"a","kind":"k","salience":0.5,"content":"x","created_at":"2025-01-01"}'
    line = b'{"type":"retrieval","conversation_id":"c","event_id":"e","ts":1,"items":[%s]}' % item
    _, _, err = run_replay([line])
    assert "`created_at` is epoch milliseconds" in err and "read as UTC" in err, err
