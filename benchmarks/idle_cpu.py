"""CPU of an idle `stream-ctx run` and of the broker it polls, at several fetch_max_wait_ms.

    python benchmarks/idle_cpu.py [--waits 10 5 2 1] [--seconds 10]

Each value gets a fresh group on one embedded broker with no input: the runner is started, left
to join, restore and load its tokenizer, then its and the broker's CPU are read over
`--seconds`. Tansu holds an empty fetch for the whole fetch_max_wait_ms, so a shorter wait
means more fetches per second while idle.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
from pathlib import Path

import anyio
import suite_latency

from stream_ctx.shell.admin import ClientKwargs, TopicSpec, ensure_topics
from stream_ctx.shell.broker import embedded_broker

# Start-up (imports and bpe-openai's tables, ~3-10 s here), the group join (~6 s) and the
# restore all come first; idle means after them.
SETTLE_S = 35.0
PARTITIONS = 4


async def measure(waits: list[int], seconds: float) -> list[tuple[int, float, float]]:
    """(fetch_max_wait_ms, runner's share of a core, broker's share) for each wait."""
    found = []
    out = Path(tempfile.mkdtemp(prefix="idle-cpu-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_CTX_")}
    async with embedded_broker() as broker:
        kw: ClientKwargs = {"bootstrap_servers": broker.bootstrap_servers}
        await ensure_topics(kw, [TopicSpec(name="idle.in", partitions=PARTITIONS)])
        for n, wait in enumerate(waits):
            config = suite_latency.write_config(
                out / f"run-{n}.toml",
                kw,
                source="idle.in",
                sink="idle.out",
                session_timeout_ms=10_000,
                group_id=f"idle.{n}",
                settings={"kafka.fetch_max_wait_ms": wait},
            )
            with (out / f"run-{n}.log").open("wb") as log:
                process = await suite_latency.open_run(config, log, env)
            try:
                await anyio.sleep(SETTLE_S)
                runner, tansu = (suite_latency.process_cpu(p) for p in (process.pid, broker.pid))
                await anyio.sleep(seconds)
                runner = suite_latency.process_cpu(process.pid) - runner
                tansu = suite_latency.process_cpu(broker.pid) - tansu
            finally:
                process.send_signal(signal.SIGTERM)
                with anyio.move_on_after(suite_latency.CLI_STOP_TIMEOUT_S):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            found.append((wait, runner / seconds, tansu / seconds))
            print(
                f"fetch_max_wait_ms {wait}: runner {runner / seconds:.1%} of a core, "
                f"broker {tansu / seconds:.1%}",
                flush=True,
            )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waits", type=int, nargs="+", default=[10, 5, 2, 1])
    parser.add_argument("--seconds", type=float, default=10.0, help="idle time measured")
    args = parser.parse_args()
    anyio.run(measure, args.waits, args.seconds)


if __name__ == "__main__":
    main()
