"""The config file's tables as typed structs: each field's type, range and default, and why."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from stream_ctx.core.window.config import BundleConfig

__all__ = (
    "CLIENT_KEYS",
    "TLS_KEYS",
    "KafkaSettings",
    "MetricsSettings",
    "ServeSettings",
    "Settings",
    "StateSettings",
)

_Count = Annotated[int, Meta(ge=1)]
_Millis = Annotated[int, Meta(ge=0)]

TLS_KEYS = ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password")
"""Keys of [kafka.client] that name TLS files (and the key's password)."""
CLIENT_KEYS = frozenset(
    {
        *TLS_KEYS,
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
)
"""The keys [kafka.client] accepts: aiokafka settings passed through, and the TLS files."""


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
