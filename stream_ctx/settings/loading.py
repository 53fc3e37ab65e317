"""Reading the TOML config file, with `STREAM_CTX_<SECTION>_<KEY>` environment overrides."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from stream_ctx.core.window.config import BundleConfig, bundle_config_from_table
from stream_ctx.errors import ConfigError
from stream_ctx.settings.keys import Key, check_value, keys_of, nearest, parse_env
from stream_ctx.settings.tables import (
    CLIENT_KEYS,
    KafkaSettings,
    MetricsSettings,
    ServeSettings,
    Settings,
    StateSettings,
)
from stream_ctx.validation import invalid

__all__ = ("ENV_PREFIX", "config_keys", "env_names", "load_settings")

ENV_PREFIX = "STREAM_CTX_"
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
        raise ConfigError(invalid(exc, tables).describe("the configuration")) from exc


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
