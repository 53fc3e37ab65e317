"""`stream-ctx healthcheck --workers N`: every worker's port is probed, each failure named."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from stream_ctx.errors import ConfigError
from stream_ctx.settings import MetricsSettings
from stream_ctx.shell.commands.healthcheck import probe

# Tries at a run of consecutive ports all free; another process may take one between tries.
_PORT_TRIES = 50
# The OS hands out ephemeral ports from here up; a run of N must fit below 65,536.
_HIGHEST_BASE = 65_535 - 8


def _handler(status: int, body: bytes = b"") -> type[http.server.BaseHTTPRequestHandler]:
    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status if self.path == "/healthz" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # the probes' request lines would clutter the test output

    return Answer


@contextmanager
def workers_answering(*statuses: int) -> Iterator[int]:
    """A server per status on consecutive 127.0.0.1 ports, answering /healthz with it, as the
    workers of `run --workers N` serve on metrics.port + i; yields the first port."""
    for _ in range(_PORT_TRIES):
        with ExitStack() as stack:
            first = stack.enter_context(_serve(0, statuses[0]))
            if first > _HIGHEST_BASE:
                continue
            try:
                for n, status in enumerate(statuses[1:], start=1):
                    stack.enter_context(_serve(first + n, status))
            except OSError:
                continue  # a port of the run is taken: another run
            yield first
            return
    raise AssertionError(f"no {len(statuses)} consecutive free ports in {_PORT_TRIES} tries")


@contextmanager
def _serve(port: int, status: int, body: bytes = b"") -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _handler(status, body))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_every_worker_healthy_is_healthy() -> None:
    with workers_answering(200, 200, 200) as port:
        assert probe(MetricsSettings(port=port), workers=3) == []


def test_an_unhealthy_worker_past_the_first_is_named_with_its_port() -> None:
    with workers_answering(200, 503, 200) as port:
        metrics = MetricsSettings(port=port)
        assert probe(metrics, workers=1) == []  # worker 0 alone: what the probe saw before
        assert probe(metrics, workers=3) == [
            f"worker 1: http://127.0.0.1:{port + 1}/healthz answered 503 Service Unavailable"
        ]


def test_one_worker_keeps_the_message_without_a_worker_number() -> None:
    with workers_answering(500) as port:
        assert probe(MetricsSettings(port=port)) == [
            f"http://127.0.0.1:{port}/healthz answered 500 Internal Server Error"
        ]


def test_a_red_healthz_reason_is_in_the_message() -> None:
    reason = b"stalled: no progress for 301 s with records waiting: in/0 lag 7\n"
    with _serve(0, 503, reason) as port:
        assert probe(MetricsSettings(port=port)) == [
            f"http://127.0.0.1:{port}/healthz answered 503 Service Unavailable: "
            "stalled: no progress for 301 s with records waiting: in/0 lag 7"
        ]


def test_a_port_every_run_picks_for_itself_or_past_the_last_cannot_be_probed() -> None:
    with pytest.raises(ConfigError, match=r"^`metrics.port` is 0, so each `run` serves"):
        probe(MetricsSettings(port=0))
    with pytest.raises(
        ConfigError,
        match=r"^worker 1 would serve on port 65536 \(`metrics.port` 65535 \+ 1\), past 65535$",
    ):
        probe(MetricsSettings(port=65_535), workers=2)
