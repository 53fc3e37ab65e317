"""Bundle configuration: the seed's BundleConfig, its presets, and validation naming TOML keys."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from stream_ctx.core.counting.tokenizer import EncodingName
from stream_ctx.core.wire.events import BundleMode, ContextFormat, RenderOrder
from stream_ctx.errors import ConfigError

__all__ = ("PRESETS", "BundleConfig", "CoreChoice", "bundle_config_from_table")

CoreChoice = Literal["auto", "python", "compiled"]
# The seed allows the two weights to drift this far from summing to 1.0.
_WEIGHT_SUM_TOLERANCE = 0.2


class BundleConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How a conversation's window is kept and how its bundles are rendered."""

    max_items: int = 20
    recency_weight: float = 0.4
    salience_weight: float = 0.4
    min_salience_threshold: float = 0.2
    recency_half_life_days: float = 30.0
    max_tokens: int | None = None
    format: ContextFormat = "lean"
    order: RenderOrder = "priority"
    mode: BundleMode = "full"
    tokenizer: EncodingName = "cl100k_base"
    # A conversation whose next event comes more than this after its previous one starts afresh.
    conversation_ttl_hours: float | None = 24.0
    # Which core plans contexts: the compiled one where it was built (auto), or the Python
    # reference; both write the same bytes.
    core: CoreChoice = "auto"

    def __post_init__(self) -> None:
        _check(self.max_items >= 1, "max_items", self.max_items, "an integer >= 1")
        for key in ("recency_weight", "salience_weight"):
            value = getattr(self, key)
            _check(0.0 <= value <= 1.0, key, value, "a number in [0, 1]")
        total = self.recency_weight + self.salience_weight
        _check(
            abs(total - 1.0) <= _WEIGHT_SUM_TOLERANCE,
            "recency_weight + salience_weight",
            total,
            f"a sum within {_WEIGHT_SUM_TOLERANCE} of 1.0",
        )
        threshold = self.min_salience_threshold
        _check(0.0 <= threshold <= 1.0, "min_salience_threshold", threshold, "a number in [0, 1]")
        half_life = self.recency_half_life_days
        _check(half_life > 0, "recency_half_life_days", half_life, "a number > 0")
        if self.max_tokens is not None:
            _check(self.max_tokens >= 1, "max_tokens", self.max_tokens, "an integer >= 1")
        ttl = self.conversation_ttl_hours
        if ttl is not None:
            _check(ttl > 0, "conversation_ttl_hours", ttl, "a number > 0")

    @property
    def conversation_ttl_ms(self) -> int | None:
        """The idle gap, in event-time milliseconds, after which a conversation restarts."""
        if self.conversation_ttl_hours is None:
            return None
        return round(self.conversation_ttl_hours * 3_600_000)


def _check(ok: bool, key: str, value: object, expected: str) -> None:
    if not ok:
        raise ConfigError(f"`bundle.{key}` must be {expected}, got {value!r}")


PRESETS: dict[str, BundleConfig] = {
    "default": BundleConfig(),
    "token_efficient": BundleConfig(
        max_items=10,
        recency_weight=0.3,
        salience_weight=0.5,
        min_salience_threshold=0.5,
        recency_half_life_days=14.0,
    ),
    "comprehensive": BundleConfig(
        max_items=50,
        recency_weight=0.3,
        salience_weight=0.5,
        min_salience_threshold=0.1,
        recency_half_life_days=60.0,
    ),
}


def bundle_config_from_table(table: dict[str, Any]) -> BundleConfig:
    """Build a BundleConfig from a `[bundle]` TOML table: a `preset` plus keys overriding it."""
    overrides = dict(table)
    preset_name = overrides.pop("preset", "default")
    base = PRESETS.get(preset_name) if isinstance(preset_name, str) else None
    if base is None:
        raise ConfigError(f"`bundle.preset` must be one of {sorted(PRESETS)}, got {preset_name!r}")
    merged = msgspec.structs.asdict(base) | overrides
    try:
        return msgspec.convert(merged, BundleConfig)
    except msgspec.ValidationError as exc:
        raise ConfigError(_describe(str(exc), merged)) from exc


def _describe(message: str, table: dict[str, Any]) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.max_items`" as a message naming the TOML key
    and showing the value."""
    reason, _, where = message.partition(" - at `$.")
    key = where.rstrip("`")
    if key in table:
        return f"`bundle.{key}`: {reason}, got {table[key]!r}"
    unknown = reason.removeprefix("Object contains unknown field ")
    if unknown != reason:
        return f"unknown key `bundle.{unknown.strip('`')}` in [bundle]"
    return f"[bundle]: {message}"
