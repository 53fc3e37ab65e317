"""Stage timestamps inside a `stream-ctx run` started by benchmarks/latency_pairs.py --stages.

Python imports this at start-up when its folder is on PYTHONPATH; it does nothing unless
LATENCY_PROBE_DIR names a folder, where it writes `<pid>.jsonl` (first line: LATENCY_PROBE_LABEL):
when each input record was
fetched (with the record's create time), each finalize's start and end, each bundle's send(),
and each produce request's start and end (and whether it carried bundles). It wraps private
methods of the Runner and of aiokafka's Sender, so it follows those names, not a contract.
benchmarks/latency_stages.py reads the files. It measures nothing itself and costs the run a
few microseconds per record.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

_DIR = os.environ.get("LATENCY_PROBE_DIR")


def _install(folder: str) -> None:
    import msgspec
    from aiokafka.producer import sender

    from stream_ctx.shell.kafka import clients
    from stream_ctx.shell.processing import runner

    # Open for the process's life; line-buffered, so a killed run keeps what it wrote.
    out = open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a", buffering=1)
    outputs: set[str] = set()

    def write(*row: Any) -> None:
        out.write(json.dumps(row) + "\n")

    write("label", os.environ.get("LATENCY_PROBE_LABEL", ""))
    fetch, apply, send_request = (
        runner.Runner._fetch,
        runner.Runner._apply,
        sender.Sender._send_produce_req,
    )
    make_producer = clients.producer

    class _Id(msgspec.Struct):
        bundle_id: str

    bundle_id = msgspec.json.Decoder(_Id)

    async def timed_fetch(self: Any) -> Any:
        batch = await fetch(self)
        records = [[tp.partition, r.offset, r.timestamp] for tp, rs in batch.items() for r in rs]
        if records:
            write("fetched", time.time(), records)
        return batch

    async def timed_apply(self: Any, tp: Any, processor: Any, event: Any, offset: int) -> Any:
        started = time.time()
        bundle = await apply(self, tp, processor, event, offset)
        if bundle is not None:
            write("finalize", bundle.bundle_id, tp.partition, offset, started, time.time())
        return bundle

    async def timed_request(self: Any, node_id: int, batches: Any) -> Any:
        started = time.time()
        has_bundles = any(tp.topic in outputs for tp in batches)
        try:
            return await send_request(self, node_id, batches)
        finally:
            write("request", started, time.time(), has_bundles)

    def producer(kafka: Any, **overrides: Any) -> Any:
        made = make_producer(kafka, **overrides)
        outputs.add(kafka.output_topic)
        send = made.send

        async def timed_send(topic: str, value: Any = None, key: Any = None, **kw: Any) -> Any:
            sent = await send(topic, value, key=key, **kw)
            if topic == kafka.output_topic:
                write("send", bundle_id.decode(value).bundle_id, time.time())
            return sent

        made.send = timed_send
        return made

    # The probe's whole job: the runner's own methods, wrapped to take the times.
    runner.Runner._fetch = timed_fetch  # type: ignore[method-assign]
    runner.Runner._apply = timed_apply  # type: ignore[method-assign]
    sender.Sender._send_produce_req = timed_request
    clients.producer = producer


if _DIR:
    _install(_DIR)
