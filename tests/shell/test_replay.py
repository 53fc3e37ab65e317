"""`replay` applies the checks and the size limit `run` applies, reading no line whole past it."""

from __future__ import annotations

import io

import msgspec

from stream_ctx.core.config import BundleConfig
from stream_ctx.core.events import Finalize
from stream_ctx.shell.replay import replay
from stream_ctx.workload import WorkloadShape, generate

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
    assert "line 1: record value is not valid UTF-8: byte" in err, err
    assert (
        f"line 4: record value is {len(huge)} bytes, over kafka.max_event_bytes = {MAX_EVENT_BYTES}"
        in err
    )
