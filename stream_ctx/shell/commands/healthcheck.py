"""`stream-ctx healthcheck`: the container's liveness probe, on the port the config serves.

It reads the same config and STREAM_CTX_ variables as `run`, so the image's HEALTHCHECK follows
`metrics.port` wherever it is set; `--workers N`, as given to `run`, probes every worker.
"""

from __future__ import annotations

import argparse
import http.client
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from stream_ctx.errors import ConfigError
from stream_ctx.settings import MetricsSettings, load_settings
from stream_ctx.shell.commands.subcommand import Commands, add_command, worker_count

__all__ = ("PROBE_TIMEOUT_S", "add_to", "healthz_url", "probe")

# Under the image's HEALTHCHECK --timeout (5 s), so a slow answer is ours to report.
PROBE_TIMEOUT_S = 4.0
# A server on every interface is probed from inside the container, over loopback.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}  # noqa: S104
_MAX_PORT = 65_535


def healthz_url(metrics: MetricsSettings, *, worker: int = 0) -> str:
    """Where the running processor (worker `worker` of `run --workers N`) answers its liveness
    probe: worker i serves on `metrics.port` + i."""
    if metrics.port is None:
        raise ConfigError(
            "`metrics.port` is not set, so there is no /healthz to probe; set it (the image's"
            " config sets 9464)"
        )
    if metrics.port == 0:
        raise ConfigError(
            "`metrics.port` is 0, so each `run` serves /healthz on a free port of its own and"
            " there is no fixed port to probe; set a port"
        )
    port = metrics.port + worker
    if port > _MAX_PORT:
        raise ConfigError(
            f"worker {worker} would serve on port {port} (`metrics.port` {metrics.port}"
            f" + {worker}), past {_MAX_PORT}"
        )
    host = _WILDCARDS.get(metrics.host, metrics.host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}/healthz"


def probe(
    metrics: MetricsSettings, *, workers: int = 1, timeout_s: float = PROBE_TIMEOUT_S
) -> list[str]:
    """Nothing when every worker's /healthz answers 200, else a line for each that did not.

    The workers are probed at once, so N of them take no longer than one (the image's
    HEALTHCHECK allows 5 s).
    """
    urls = [healthz_url(metrics, worker=n) for n in range(workers)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        found = list(pool.map(partial(_probe_one, timeout_s=timeout_s), urls))
    if workers == 1:
        return [p for p in found if p is not None]
    return [f"worker {n}: {p}" for n, p in enumerate(found) if p is not None]


# The reason line of a red /healthz; a longer body is not ours.
_DETAIL_BYTES = 2048


def _probe_one(url: str, *, timeout_s: float) -> str | None:
    """None when `url` answers 200, else one line saying what went wrong."""
    try:
        # The URL is ours: http, the configured host and port.
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310
            status: int = response.status
    except urllib.error.HTTPError as exc:
        # /healthz says why it is red in its first line ("stalled: no progress for ...").
        detail = exc.read(_DETAIL_BYTES).decode("utf-8", "replace").strip().partition("\n")[0]
        return f"{url} answered {exc.code} {exc.reason}" + (f": {detail}" if detail else "")
    except (OSError, http.client.HTTPException) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        return f"{url} did not answer: {reason}"
    return None if status == 200 else f"{url} answered {status}"


def add_to(commands: Commands) -> None:
    """`stream-ctx healthcheck [--config FILE] [--workers N]`."""
    command = add_command(
        commands,
        "healthcheck",
        summary="exit 0 when a local `run` answers /healthz on metrics.port",
    )
    command.add_argument("--config", type=Path, help="TOML config file (the one `run` reads)")
    command.add_argument(
        "--workers",
        type=worker_count,
        default=1,
        help="as given to `run`: probe every worker (worker i serves on metrics.port + i)",
    )
    command.set_defaults(handler=_healthcheck)


def _healthcheck(args: argparse.Namespace) -> int:
    problems = probe(load_settings(args.config).metrics, workers=args.workers)
    for problem in problems:
        print(f"stream-ctx: unhealthy: {problem}", file=sys.stderr)
    return 1 if problems else 0
