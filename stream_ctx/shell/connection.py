"""aiokafka connection settings from `[kafka]`: servers, security protocol, SASL and TLS files."""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

from aiokafka.helpers import create_ssl_context

from stream_ctx.errors import ConfigError

if TYPE_CHECKING:  # settings imports CLIENT_KEYS from here
    from stream_ctx.shell.settings import KafkaSettings

# Keys of [kafka.client] that name TLS files; they become one ssl.SSLContext for aiokafka.
_TLS_KEYS = {
    "ssl_cafile": "cafile",
    "ssl_certfile": "certfile",
    "ssl_keyfile": "keyfile",
    "ssl_password": "password",
}
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")
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
CLIENT_KEYS = frozenset(_PASSED_THROUGH | _TLS_KEYS.keys())
"""The keys [kafka.client] accepts."""


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
            allowed = sorted(CLIENT_KEYS)
            raise ConfigError(
                f"`kafka.client.{key}` is not a supported setting; use one of {allowed}"
            )
    _check_choice(kwargs, "security_protocol", _PROTOCOLS)
    _check_choice(kwargs, "sasl_mechanism", _MECHANISMS)
    protocol = kwargs.setdefault("security_protocol", "SSL" if tls else "PLAINTEXT")
    if tls and not protocol.endswith("SSL"):
        raise ConfigError(
            f"`kafka.client.security_protocol` is {protocol!r} but TLS files are set "
            f"({', '.join(sorted(k for k in kafka.client if k in _TLS_KEYS))}); use 'SSL' or "
            "'SASL_SSL', or remove them"
        )
    if protocol.endswith("SSL"):
        kwargs["ssl_context"] = _tls_context(tls)
    return kwargs


def _check_choice(kwargs: dict[str, Any], key: str, allowed: tuple[str, ...]) -> None:
    if key in kwargs and kwargs[key] not in allowed:
        raise ConfigError(f"`kafka.client.{key}` must be one of {allowed}, got {kwargs[key]!r}")


def _tls_context(tls: dict[str, Any]) -> ssl.SSLContext:
    """One verifying TLS context; a file that cannot be used is a config error naming its key."""
    try:
        context: ssl.SSLContext = create_ssl_context(**tls)
    except (OSError, ssl.SSLError) as exc:
        keys = ", ".join(f"`kafka.client.ssl_{name}`" for name in sorted(tls))
        raise ConfigError(f"cannot load the TLS files of {keys}: {exc}") from exc
    return context
