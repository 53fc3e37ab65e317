"""`stream-ctx healthcheck`: the container's liveness probe, on the port the config serves.

It reads the same config and STREAM_CTX_ variables as `run`, so the image's HEALTHCHECK follows
`metrics.port` wherever it is set.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request

from stream_ctx.errors import ConfigError
from stream_ctx.shell.settings import MetricsSettings

__all__ = ("PROBE_TIMEOUT_S", "healthz_url", "probe")

# Under the image's HEALTHCHECK --timeout (5 s), so a slow answer is ours to report.
PROBE_TIMEOUT_S = 4.0
# A server on every interface is probed from inside the container, over loopback.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}  # noqa: S104


def healthz_url(metrics: MetricsSettings) -> str:
    """Where the running processor answers its liveness probe."""
    if metrics.port is None:
        raise ConfigError(
            "`metrics.port` is not set, so there is no /healthz to probe; set it (the image's"
            " config sets 9464)"
        )
    host = _WILDCARDS.get(metrics.host, metrics.host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{metrics.port}/healthz"


def probe(metrics: MetricsSettings, *, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when /healthz answers 200, else one line saying what went wrong."""
    url = healthz_url(metrics)
    try:
        # The URL is ours: http, the configured host and port.
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310
            status: int = response.status
    except urllib.error.HTTPError as exc:
        return f"{url} answered {exc.code} {exc.reason}"
    except (OSError, http.client.HTTPException) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        return f"{url} did not answer: {reason}"
    return None if status == 200 else f"{url} answered {status}"
