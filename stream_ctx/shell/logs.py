"""Logging: readable lines on a terminal, or one JSON object per line for log pipelines."""

from __future__ import annotations

import logging
import sys

import msgspec

_encoder = msgspec.json.Encoder()
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


def configure_logging(*, json_format: bool = False, level: int = logging.INFO) -> None:
    """Send stream_ctx's logs to stderr, as JSON or as plain text."""
    handler = logging.StreamHandler(sys.stderr)
    if json_format:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("stream_ctx")
    root.handlers[:] = [handler]
    root.setLevel(level)
