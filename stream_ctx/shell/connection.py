"""aiokafka connection settings from `[kafka]`: servers, security protocol, SASL and TLS files."""

from __future__ import annotations

from typing import Any

from aiokafka.helpers import create_ssl_context

from stream_ctx.errors import ConfigError
from stream_ctx.shell.settings import KafkaSettings

# Keys of [kafka.client] that name TLS files; they become one ssl.SSLContext for aiokafka.
_TLS_KEYS = {
    "ssl_cafile": "cafile",
    "ssl_certfile": "certfile",
    "ssl_keyfile": "keyfile",
    "ssl_password": "password",
}
_PASSED_THROUGH = {
    "security_protocol",
    "sasl_mechanism",
    "sasl_plain_username",
    "sasl_plain_password",
    "sasl_kerberos_service_name",
    "sasl_kerberos_domain_name",
    "client_id",
    "request_timeout_ms",
    "retry_backoff_ms",
    "metadata_max_age_ms",
    "connections_max_idle_ms",
}


def client_kwargs(kafka: KafkaSettings) -> dict[str, Any]:
    """Keyword arguments every aiokafka client of ours shares."""
    kwargs: dict[str, Any] = {"bootstrap_servers": kafka.servers}
    tls: dict[str, Any] = {}
    for key, value in kafka.client.items():
        if key in _TLS_KEYS:
            tls[_TLS_KEYS[key]] = value
        elif key in _PASSED_THROUGH:
            kwargs[key] = value
        else:
            allowed = sorted(_PASSED_THROUGH | _TLS_KEYS.keys())
            raise ConfigError(
                f"`kafka.client.{key}` is not a supported setting; use one of {allowed}"
            )
    if tls or str(kwargs.get("security_protocol", "")).endswith("SSL"):
        kwargs["ssl_context"] = create_ssl_context(**tls)
        kwargs.setdefault("security_protocol", "SSL")
    return kwargs
