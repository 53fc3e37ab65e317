"""BundleConfig: the seed's presets and validation, errors naming `bundle.<key>`."""

from __future__ import annotations

import re
from typing import Any

import pytest

from stream_ctx.core.window.config import PRESETS, BundleConfig, bundle_config_from_table
from stream_ctx.errors import ConfigError, StreamCtxError


def _fields(cfg: BundleConfig) -> tuple[int, float, float, float, float]:
    return (
        cfg.max_items,
        cfg.recency_weight,
        cfg.salience_weight,
        cfg.min_salience_threshold,
        cfg.recency_half_life_days,
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("default", (20, 0.4, 0.4, 0.2, 30)),
        ("token_efficient", (10, 0.3, 0.5, 0.5, 14)),
        ("comprehensive", (50, 0.3, 0.5, 0.1, 60)),
    ],
)
def test_presets_match_the_issue(
    name: str, expected: tuple[int, float, float, float, float]
) -> None:
    assert _fields(PRESETS[name]) == expected
    assert _fields(bundle_config_from_table({"preset": name})) == expected
    assert PRESETS[name].max_tokens is None


def test_presets_are_exactly_the_seeds_three() -> None:
    assert set(PRESETS) == {"default", "token_efficient", "comprehensive"}


def test_default_config_is_the_default_preset() -> None:
    assert _fields(BundleConfig()) == _fields(PRESETS["default"])
    assert bundle_config_from_table({}) == PRESETS["default"]
    assert BundleConfig().tokenizer == "cl100k_base"


def test_half_life_is_a_float() -> None:
    cfg = bundle_config_from_table({"recency_half_life_days": 0.5})
    assert cfg.recency_half_life_days == 0.5


@pytest.mark.parametrize(
    ("table", "key", "value"),
    [
        ({"max_items": 0}, "max_items", "0"),
        ({"max_items": -3}, "max_items", "-3"),
        ({"recency_weight": 0.9, "salience_weight": 0.9}, "recency_weight", "1.8"),
        ({"recency_weight": 0.1, "salience_weight": 0.2}, "recency_weight", "0.3"),
        ({"min_salience_threshold": 1.5}, "min_salience_threshold", "1.5"),
        ({"recency_half_life_days": 0}, "recency_half_life_days", "0"),
        ({"recency_half_life_days": -2.5}, "recency_half_life_days", "-2.5"),
        ({"max_tokens": 0}, "max_tokens", "0"),
    ],
)
def test_validation_error_names_key_and_value(table: dict[str, Any], key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"bundle.{key}")) as info:
        bundle_config_from_table(table)
    assert value in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"max_items": 0}, "max_items"),
        ({"min_salience_threshold": 1.01}, "min_salience_threshold"),
        ({"recency_half_life_days": 0.0}, "recency_half_life_days"),
        ({"recency_weight": 1.0, "salience_weight": 0.5}, "recency_weight"),
    ],
)
def test_direct_construction_is_validated_too(kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"`bundle.{key}")):
        BundleConfig(**kwargs)


@pytest.mark.parametrize(
    ("rw", "sw"), [(0.4, 0.4), (0.6, 0.6), (0.5, 0.5), (0.3, 0.5), (1.0, 0.0), (0.45, 0.45)]
)
def test_weights_within_tolerance_are_accepted(rw: float, sw: float) -> None:
    cfg = bundle_config_from_table({"recency_weight": rw, "salience_weight": sw})
    assert (cfg.recency_weight, cfg.salience_weight) == (rw, sw)


@pytest.mark.parametrize("threshold", [0.0, 0.5, 1.0])
def test_threshold_up_to_one_is_accepted(threshold: float) -> None:
    assert bundle_config_from_table(
        {"min_salience_threshold": threshold}
    ).min_salience_threshold == (threshold)


def test_max_items_one_is_accepted() -> None:
    assert bundle_config_from_table({"max_items": 1}).max_items == 1


def test_unknown_key_is_rejected_by_name() -> None:
    with pytest.raises(ConfigError, match="max_itemz"):
        bundle_config_from_table({"max_itemz": 5})


@pytest.mark.parametrize("key", ["max_itemz", "Xmax_itemsX", "`odd`"])
def test_unknown_key_message_is_exact(key: str) -> None:
    with pytest.raises(ConfigError) as info:
        bundle_config_from_table({key: 5})
    assert str(info.value) == f"unknown key `bundle.{key.strip('`')}` in [bundle]"


def test_a_preset_that_is_not_a_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"`bundle\.preset` must be one of .*, got \['default'\]"):
        bundle_config_from_table({"preset": ["default"]})


def test_wrong_type_names_key_and_value() -> None:
    with pytest.raises(ConfigError, match=re.escape("bundle.max_items")) as info:
        bundle_config_from_table({"max_items": "many"})
    assert "'many'" in str(info.value)


def test_unknown_preset_is_rejected_with_its_name() -> None:
    with pytest.raises(ConfigError, match=r"`bundle\.preset`.*'huge'"):
        bundle_config_from_table({"preset": "huge"})


def test_preset_with_override_keeps_the_rest_of_the_preset() -> None:
    cfg = bundle_config_from_table({"preset": "token_efficient", "max_items": 7, "max_tokens": 900})
    assert _fields(cfg) == (7, 0.3, 0.5, 0.5, 14)
    assert cfg.max_tokens == 900


def test_override_is_validated_against_the_preset() -> None:
    # comprehensive has salience_weight 0.5: 0.9 + 0.5 leaves the tolerance.
    with pytest.raises(ConfigError, match=re.escape("bundle.recency_weight")):
        bundle_config_from_table({"preset": "comprehensive", "recency_weight": 0.9})


def test_table_is_not_mutated() -> None:
    table = {"preset": "comprehensive", "max_items": 3}
    bundle_config_from_table(table)
    assert table == {"preset": "comprehensive", "max_items": 3}


def test_config_error_is_a_stream_ctx_error() -> None:
    assert issubclass(ConfigError, StreamCtxError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_items": 0}, "`bundle.max_items` must be an integer >= 1, got 0"),
        (
            {"recency_weight": 1.1, "salience_weight": 0.0},
            "`bundle.recency_weight` must be a number in [0, 1], got 1.1",
        ),
        (
            {"recency_weight": 1.0, "salience_weight": -0.1},
            "`bundle.salience_weight` must be a number in [0, 1], got -0.1",
        ),
        (
            {"recency_weight": 0.9, "salience_weight": 0.9},
            "`bundle.recency_weight + salience_weight` must be a sum within 0.2 of 1.0, got 1.8",
        ),
        (
            {"min_salience_threshold": 1.5},
            "`bundle.min_salience_threshold` must be a number in [0, 1], got 1.5",
        ),
        (
            {"recency_half_life_days": 0.0},
            "`bundle.recency_half_life_days` must be a number > 0, got 0.0",
        ),
        ({"max_tokens": 0}, "`bundle.max_tokens` must be an integer >= 1, got 0"),
        (
            {"conversation_ttl_hours": 0.0},
            "`bundle.conversation_ttl_hours` must be a number > 0, got 0.0",
        ),
    ],
)
def test_each_refusal_says_which_key_what_it_must_be_and_the_value(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        BundleConfig(**kwargs)


def test_a_budget_of_one_token_is_accepted() -> None:
    assert BundleConfig(max_tokens=1).max_tokens == 1
