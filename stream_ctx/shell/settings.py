"""The TOML configuration file, with `STREAM_CTX_<SECTION>_<KEY>` environment overrides."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from stream_ctx.core.config import BundleConfig, bundle_config_from_table
from stream_ctx.errors import ConfigError

ENV_PREFIX = "STREAM_CTX_"


class KafkaSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where to read and write; `client` passes settings (security, SASL, TLS) to aiokafka."""

    bootstrap_servers: str | list[str] = "localhost:9092"
    group_id: str = "stream-ctx"
    input_topics: list[str] = msgspec.field(default_factory=lambda: ["ctx.retrievals"])
    output_topic: str = "ctx.bundles"
    dlq_topic: str = "ctx.retrievals.dlq"
    # Records larger than this are dead-lettered instead of decoded.
    max_event_bytes: int = 1_048_576
    session_timeout_ms: int = 10_000
    # Bundles and changelog writes are batched per produce request; 1 MiB amortises broker cost.
    max_batch_size: int = 1_048_576
    # Each write step appends all its records before waiting, so no linger is needed to batch.
    linger_ms: int = 0
    # How long a fetch may wait for data. Kafka answers as soon as a record arrives, so this only
    # bounds idle polling; some brokers (Tansu) hold every fetch this long, adding it to latency.
    fetch_max_wait_ms: int = 10
    client: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def servers(self) -> list[str]:
        """`bootstrap_servers` as a list, whether configured as a string or a list."""
        raw = self.bootstrap_servers
        items = raw.split(",") if isinstance(raw, str) else raw
        return [s.strip() for s in items if s.strip()]


class StateSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The changelog topics that make conversation windows durable."""

    # Changelog topic per input topic: "<input>.<group_id>.changelog" unless a suffix is given.
    changelog_suffix: str = "changelog"
    replication_factor: int = 1
    # A restore that cannot read its changelog to the end in this long is an error, not a hang.
    restore_timeout_s: float = 300.0
    # States, tombstones and offsets are flushed at most this often (bundles go out at once):
    # conversations touched in several batches meanwhile get one state write.
    commit_interval_ms: int = 100
    # Fetching pauses while this many events wait to be processed or acknowledged.
    max_in_flight_events: int = 5_000


class MetricsSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Prometheus metrics and health endpoints; off unless a port is given."""

    port: int | None = None
    host: str = "0.0.0.0"  # noqa: S104 - exporters listen on all interfaces in containers


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """The whole configuration file."""

    bundle: BundleConfig = msgspec.field(default_factory=BundleConfig)
    kafka: KafkaSettings = msgspec.field(default_factory=KafkaSettings)
    state: StateSettings = msgspec.field(default_factory=StateSettings)
    metrics: MetricsSettings = msgspec.field(default_factory=MetricsSettings)


_SECTIONS = ("bundle", "kafka", "state", "metrics")


def load_settings(
    path: Path | None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Settings:
    """Read the file, then apply environment variables, then `overrides` ("kafka.group_id": ...)."""
    tables: dict[str, dict[str, Any]] = {name: {} for name in _SECTIONS}
    if path is not None:
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from exc
        for name, table in document.items():
            if name not in _SECTIONS or not isinstance(table, dict):
                raise ConfigError(f"unknown config table [{name}], expected one of {_SECTIONS}")
            tables[name].update(table)
    for dotted, value in _from_environment(os.environ if environ is None else environ):
        _set(tables, dotted, value)
    for dotted, value in (overrides or {}).items():
        _set(tables, dotted, value)
    bundle = bundle_config_from_table(tables.pop("bundle"))
    try:
        return msgspec.convert({**tables, "bundle": bundle}, Settings, from_attributes=True)
    except msgspec.ValidationError as exc:
        raise ConfigError(str(exc).replace("`$.", "`")) from exc


def _from_environment(environ: Mapping[str, str]) -> list[tuple[str, object]]:
    found = []
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX) :].lower()
        section, _, key = rest.partition("_")
        if section in _SECTIONS and key:
            found.append((f"{section}.{key}", _parse_value(raw)))
    return found


def _parse_value(raw: str) -> object:
    """Environment values are TOML literals when they parse as one (20, true, ["a"]), else text."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _set(tables: dict[str, dict[str, Any]], dotted: str, value: object) -> None:
    """Set one key; `kafka.client.<key>` (env: STREAM_CTX_KAFKA_CLIENT_<KEY>) merges into the
    file's [kafka.client] table instead of replacing it."""
    section, _, key = dotted.partition(".")
    if section not in tables or not key:
        raise ConfigError(f"override {dotted!r} must be <table>.<key> with table in {_SECTIONS}")
    nested = key.removeprefix("client.").removeprefix("client_")
    if section == "kafka" and nested != key:
        client = tables["kafka"].setdefault("client", {})
        if not isinstance(client, dict):
            raise ConfigError(f"`kafka.client` must be a table, got {client!r}")
        client[nested] = value
        return
    tables[section][key] = value
