"""The TOML configuration file, with `STREAM_CTX_<SECTION>_<KEY>` environment overrides."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from stream_ctx.core.config import BundleConfig, bundle_config_from_table
from stream_ctx.errors import ConfigError
from stream_ctx.shell.config_keys import Key, check_value, keys_of, nearest, parse_env
from stream_ctx.shell.connection import CLIENT_KEYS

ENV_PREFIX = "STREAM_CTX_"
_Count = Annotated[int, Meta(ge=1)]
_Millis = Annotated[int, Meta(ge=0)]


class KafkaSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where to read and write; `client` passes settings (security, SASL, TLS) to aiokafka."""

    bootstrap_servers: str | list[str] = "localhost:9092"
    group_id: str = "stream-ctx"
    input_topics: list[str] = msgspec.field(default_factory=lambda: ["ctx.retrievals"])
    output_topic: str = "ctx.bundles"
    dlq_topic: str = "ctx.retrievals.dlq"
    # Records larger than this are dead-lettered instead of decoded.
    max_event_bytes: _Count = 1_048_576
    # Heartbeats go every third of it; below a second a busy event loop misses them.
    session_timeout_ms: Annotated[int, Meta(ge=1_000)] = 10_000
    # Bundles and changelog writes are batched per produce request; 1 MiB amortises broker cost.
    max_batch_size: _Count = 1_048_576
    # Each write step appends all its records before waiting, so no linger is needed to batch.
    linger_ms: _Millis = 0
    # Codec of what we produce (bundles, changelog, dead letters). Bundles are repetitive text:
    # benchmarks/compression.py measured zstd 6.7x smaller than none at about the same rate.
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "zstd"
    # How long a fetch may wait for data. Kafka answers as soon as a record arrives, so this only
    # bounds idle polling; some brokers (Tansu) hold every fetch this long, adding it to latency.
    fetch_max_wait_ms: _Millis = 10
    # Records one fetch hands to processing (Kafka's max.poll.records); the next fetch waits until
    # they are processed, so this bounds the events held between fetch and acknowledgement.
    max_poll_records: _Count = 5_000
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
    # CreateTopics carries it as an int16.
    replication_factor: Annotated[int, Meta(ge=1, le=32_767)] = 1
    # A restore that cannot read its changelog to the end in this long is an error, not a hang.
    restore_timeout_s: Annotated[float, Meta(gt=0)] = 300.0
    # States, tombstones and offsets are flushed at most this often (bundles go out at once):
    # conversations touched in several batches meanwhile get one state write.
    commit_interval_ms: _Millis = 100


class MetricsSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The HTTP server: Prometheus metrics, health probes and the inspector; off unless a port
    is given."""

    # 0 picks a free port (tests); omit the key to turn metrics off.
    port: Annotated[int, Meta(ge=0, le=65_535)] | None = None
    # Loopback unless configured: containers set 0.0.0.0 to be scraped.
    host: str = "127.0.0.1"
    # The live inspector (pages under /inspect) shows conversation content: bound anywhere but
    # loopback it demands `inspector_token` as a bearer token (probes and metrics stay open).
    inspector: bool = False
    inspector_token: str | None = None
    # Kept per conversation for the inspector: the last item outcomes and bundles.
    history_events: Annotated[int, Meta(ge=1)] = 200
    history_bundles: Annotated[int, Meta(ge=1)] = 10
    history_conversations: Annotated[int, Meta(ge=1)] = 1000
    # The progress watchdog: partitions with records waiting and none of them moved for this long
    # turn /healthz red. Well above a normal pause (a rebalance, a broker paused for a minute, a
    # restore of a large changelog).
    stall_after_s: Annotated[float, Meta(gt=0)] = 300.0


class ServeSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`stream-ctx serve`: the HTTP API and MCP server over the latest bundles."""

    # Loopback unless configured; bound anywhere else serve refuses to start without tenants.
    host: str = "127.0.0.1"
    # 0 picks a free port (tests).
    port: Annotated[int, Meta(ge=0, le=65_535)] = 8780
    # Conversations held in memory, least recently used out first. Each costs about its kept
    # bundles' JSON (~25 KiB a full bundle in benchmarks/serve_bench.py): ~250 MiB at most here.
    max_conversations: _Count = 5_000
    # Bundles kept per conversation, for GET .../bundles/{seq}; the oldest goes first.
    max_bundles: _Count = 2
    # A finalize answered later than this is a 504: the processor is down or rebalancing.
    finalize_timeout_s: Annotated[float, Meta(gt=0)] = 10.0
    # A finalize body is a few short fields; anything larger is refused with a 413.
    max_body_bytes: _Count = 16_384
    # name -> {token or token_env, prefixes}; checked by stream_ctx.shell.serve.tenant.
    tenants: dict[str, Any] = msgspec.field(default_factory=dict)


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """The whole configuration file."""

    bundle: BundleConfig = msgspec.field(default_factory=BundleConfig)
    kafka: KafkaSettings = msgspec.field(default_factory=KafkaSettings)
    state: StateSettings = msgspec.field(default_factory=StateSettings)
    metrics: MetricsSettings = msgspec.field(default_factory=MetricsSettings)
    serve: ServeSettings = msgspec.field(default_factory=ServeSettings)


_SECTIONS = ("bundle", "kafka", "state", "metrics", "serve")
_TABLES: dict[str, type[msgspec.Struct]] = {
    "bundle": BundleConfig,
    "kafka": KafkaSettings,
    "state": StateSettings,
    "metrics": MetricsSettings,
    "serve": ServeSettings,
}


@cache
def config_keys() -> dict[str, Key]:
    """Every key of the config file by its TOML name, with the type the shell accepts for it."""
    keys = {key.dotted: key for name, table in _TABLES.items() for key in keys_of(name, table)}
    preset = Key("bundle", "preset", str, msgspec.inspect.type_info(str), "default")
    return {"bundle.preset": preset, **keys}


def load_settings(
    path: Path | None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Settings:
    """Read the file, then apply environment variables, then `overrides` ("kafka.group_id": ...)."""
    tables: dict[str, dict[str, Any]] = {name: {} for name in _SECTIONS}
    sources: dict[str, str] = {}
    if path is not None:
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from exc
        for name, table in document.items():
            if name not in _SECTIONS or not isinstance(table, dict):
                raise ConfigError(
                    f"unknown config table [{name}]{nearest(name, list(_SECTIONS))}"
                    f" (tables: {', '.join(_SECTIONS)})"
                )
            tables[name].update(table)
    for variable, dotted, value in _from_environment(os.environ if environ is None else environ):
        _set(tables, dotted, value)
        sources[dotted] = variable
    for dotted, value in (overrides or {}).items():
        _set(tables, dotted, value)
    _check_tables(tables, sources)
    bundle = bundle_config_from_table(tables.pop("bundle"))
    try:
        return msgspec.convert({**tables, "bundle": bundle}, Settings, from_attributes=True)
    except msgspec.ValidationError as exc:
        raise ConfigError(str(exc).replace("`$.", "`")) from exc


def _check_tables(tables: dict[str, dict[str, Any]], sources: Mapping[str, str]) -> None:
    """Each key known and of its type and range; the message names the key, value and rule."""
    keys = config_keys()
    for section, table in tables.items():
        for name, value in table.items():
            dotted = f"{section}.{name}"
            if dotted not in keys:
                raise ConfigError(f"unknown key `{dotted}`{nearest(dotted, keys)}")
            check_value(keys[dotted], value, source=sources.get(dotted))


@cache
def env_names() -> dict[str, str]:
    """Every accepted STREAM_CTX_ variable and the key it sets; [kafka.client] keys are taken
    as STREAM_CTX_KAFKA_CLIENT_<KEY> and, where no [kafka] key is spelt alike, _KAFKA_<KEY>."""
    names = {key.env_name: dotted for dotted, key in config_keys().items()}
    for client_key in sorted(CLIENT_KEYS):
        dotted = f"kafka.client.{client_key}"
        names[f"{ENV_PREFIX}KAFKA_CLIENT_{client_key.upper()}"] = dotted
        names.setdefault(f"{ENV_PREFIX}KAFKA_{client_key.upper()}", dotted)
    return names


def _from_environment(environ: Mapping[str, str]) -> list[tuple[str, str, object]]:
    """(variable, key, value) for each STREAM_CTX_ variable; an unknown one is an error."""
    found: list[tuple[str, str, object]] = []
    names, keys = env_names(), config_keys()
    for variable, raw in sorted(environ.items()):
        if not variable.startswith(ENV_PREFIX):
            continue
        dotted = names.get(variable)
        if dotted is None:
            raise ConfigError(
                f"unknown environment variable {variable}{nearest(variable, names)}"
                " (the docs' settings reference lists every one)"
            )
        key = keys.get(dotted)
        if key is not None:
            found.append((variable, dotted, parse_env(key, raw)))
        else:  # a [kafka.client] key: aiokafka's *_ms settings are integers, the rest text
            is_number = dotted.endswith("_ms") and raw.strip().isdigit()
            found.append((variable, dotted, int(raw) if is_number else raw))
    return found


def _set(tables: dict[str, dict[str, Any]], dotted: str, value: object) -> None:
    """Set one key; `kafka.client.<key>` merges into the file's [kafka.client] table instead
    of replacing it."""
    section, _, key = dotted.partition(".")
    if section not in tables or not key:
        raise ConfigError(f"override {dotted!r} must be <table>.<key> with table in {_SECTIONS}")
    nested = key.removeprefix("client.")
    if section == "kafka" and nested != key:
        client = tables["kafka"].setdefault("client", {})
        if not isinstance(client, dict):
            raise ConfigError(f"`kafka.client` must be a table, got {client!r}")
        client[nested] = value
        return
    tables[section][key] = value
