"""aiokafka connection settings from `[kafka]`: servers, security protocol, SASL and TLS files."""

from __future__ import annotations

import ssl
from typing import Any

from aiokafka.helpers import create_ssl_context

from stream_ctx.errors import ConfigError
from stream_ctx.settings.tables import CLIENT_KEYS, TLS_KEYS, KafkaSettings

__all__ = ("client_kwargs",)

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")


def client_kwargs(kafka: KafkaSettings) -> dict[str, Any]:
    """Keyword arguments every aiokafka client of ours shares."""
    kwargs: dict[str, Any] = {"bootstrap_servers": kafka.servers}
    tls: dict[str, Any] = {}
    for key, value in kafka.client.items():
        if key in TLS_KEYS:
            tls[key.removeprefix("ssl_")] = value  # create_ssl_context's argument names
        elif key in CLIENT_KEYS:
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
            f"({', '.join(sorted(k for k in kafka.client if k in TLS_KEYS))}); use 'SSL' or "
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
