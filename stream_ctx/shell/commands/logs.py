"""Logging: readable lines on a terminal, or one JSON object per line for log pipelines."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

__all__ = ("RATE_BURST", "RATE_WINDOW_S", "JsonFormatter", "RateLimit", "configure_logging")

# Repeats of one warning or error (same logger, level and format string) past RATE_BURST within
# RATE_WINDOW_S are counted, not printed: a broker outage or a flood of bad records would
# otherwise bury every other line. The first line after the window says how many were held.
RATE_WINDOW_S = 10.0
RATE_BURST = 3
# Distinct messages tracked; more (a library formatting values into its messages) resets them.
_MAX_TRACKED = 1_000
_HANDLER_NAME = "stream-ctx"
# A library's `extra` value of a type JSON lacks is written as its repr, not a logging error.
_encoder = msgspec.json.Encoder(enc_hook=repr)
# Record attributes that are logging's own; anything else passed via `extra=` is a field.
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and any `extra` fields."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, object] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        return _encoder.encode(fields).decode()


@dataclass(slots=True)
class _Window:
    start: float
    passed: int = 1
    held: int = 0


class RateLimit(logging.Filter):
    """Lets `burst` records of each warning or error through per window and counts the rest;
    the next one let through carries the count (`suppressed`, and a note in its message)."""

    def __init__(
        self,
        *,
        window_s: float = RATE_WINDOW_S,
        burst: int = RATE_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._window_s, self._burst, self._clock = window_s, burst, clock
        self._windows: dict[tuple[str, int, str], _Window] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, str(record.msg))
        now, window = self._clock(), self._windows.get(key)
        if window is not None and now - window.start < self._window_s:
            if window.passed < self._burst:
                window.passed += 1
                return True
            window.held += 1
            return False
        if len(self._windows) >= _MAX_TRACKED:
            self._windows.clear()
        self._windows[key] = _Window(now)
        if window is not None and window.held:
            record.suppressed = window.held
            note = f" [{window.held} more like this not shown in the last {self._window_s:g} s]"
            record.msg = str(record.msg) + note.replace("%", "%%")
        return True


def configure_logging(*, json_format: bool = False, level: int = logging.INFO) -> None:
    """Send every log line to stderr through one formatter, JSON or plain text, rate-limited:
    stream_ctx's at `level`, the libraries' (aiokafka, hypercorn) at WARNING and above."""
    handler = logging.StreamHandler(sys.stderr)
    handler.name = _HANDLER_NAME
    if json_format:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RateLimit())
    root = logging.getLogger()
    # Handlers others installed (pytest's capture) stay; only a previous one of ours is replaced.
    root.handlers[:] = [h for h in root.handlers if h.name != _HANDLER_NAME] + [handler]
    root.setLevel(max(level, logging.WARNING))
    ours = logging.getLogger("stream_ctx")
    ours.handlers.clear()
    ours.propagate = True
    ours.setLevel(level)
