"""Config keys as data: each key's type and range, read from the settings types, so errors,
environment overrides and the README's table all say the same thing."""

from __future__ import annotations

import difflib
import tomllib
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import inspect

from stream_ctx.errors import ConfigError

__all__ = ("Key", "check_value", "expected", "keys_of", "nearest", "parse_env")

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


@dataclass(frozen=True, slots=True)
class Key:
    """One config key: `section.name`, its type (with range) and its default."""

    section: str
    name: str
    annotation: Any
    info: inspect.Type
    default: object

    @property
    def dotted(self) -> str:
        """The TOML key, as errors and the README name it."""
        return f"{self.section}.{self.name}"

    @property
    def env_name(self) -> str:
        """The environment variable overriding it."""
        return f"STREAM_CTX_{self.section}_{self.name}".upper()


def keys_of(section: str, struct: type[msgspec.Struct]) -> Iterator[Key]:
    """The keys of one settings table, in declaration order."""
    hints = typing.get_type_hints(struct, include_extras=True)
    info = inspect.type_info(struct)
    assert isinstance(info, inspect.StructType)  # noqa: S101 - a Struct's info is a StructType
    for field in info.fields:
        default = field.default_factory() if field.default is msgspec.NODEFAULT else field.default
        yield Key(section, field.name, hints[field.name], field.type, default)


def expected(info: inspect.Type) -> str:
    """What a value of this type must be, in words: "an integer in [1, 65535]"."""
    match info:
        case inspect.BoolType():
            return "true or false"
        case inspect.IntType() | inspect.FloatType():
            noun = "an integer" if isinstance(info, inspect.IntType) else "a number"
            return noun + _bounds(info)
        case inspect.StrType():
            return "a string"
        case inspect.LiteralType(values=values):
            return "one of " + ", ".join(repr(v) for v in values)
        case inspect.ListType(item_type=item) if isinstance(item, inspect.StrType):
            return "a list of strings"
        case inspect.DictType() | inspect.StructType():
            return "a table"
        case inspect.UnionType(types=types):
            return " or ".join(expected(t) for t in types if not isinstance(t, inspect.NoneType))
    return str(info)


def _bounds(info: inspect.IntType | inspect.FloatType) -> str:
    low = f"[{info.ge}" if info.ge is not None else f"({info.gt}" if info.gt is not None else None
    high = f"{info.le}]" if info.le is not None else f"{info.lt})" if info.lt is not None else None
    if low and high:
        return f" in {low}, {high}"
    if low:
        return f" >= {info.ge}" if info.ge is not None else f" > {info.gt}"
    if high:
        return f" <= {info.le}" if info.le is not None else f" < {info.lt}"
    return ""


def check_value(key: Key, value: object, *, source: str | None = None) -> None:
    """Raise ConfigError naming the key, the value and what is allowed, if `value` does not fit."""
    try:
        msgspec.convert(value, key.annotation)
    except msgspec.ValidationError as exc:
        origin = f" (from {source})" if source else ""
        raise ConfigError(
            f"`{key.dotted}`{origin} must be {expected(key.info)}, got {value!r}"
        ) from exc


def parse_env(key: Key, raw: str) -> object:
    """An environment value typed by its key: text for strings, a comma list for lists,
    numbers and booleans parsed; a value that does not parse is returned as is, to be refused."""
    kinds = key.info.types if isinstance(key.info, inspect.UnionType) else (key.info,)
    if any(isinstance(k, inspect.StrType | inspect.LiteralType) for k in kinds):
        return raw
    for kind in kinds:
        match kind:
            case inspect.ListType():
                return [part.strip() for part in raw.split(",") if part.strip()]
            case inspect.DictType():
                try:
                    return tomllib.loads(f"v = {raw}")["v"]  # an inline table: {a = "b"}
                except tomllib.TOMLDecodeError:
                    return raw
            case inspect.BoolType() if raw.strip().lower() in (*_TRUE, *_FALSE):
                return raw.strip().lower() in _TRUE
            case inspect.IntType():
                try:
                    return int(raw)
                except ValueError:
                    continue
            case inspect.FloatType():
                try:
                    return float(raw)
                except ValueError:
                    continue
    return raw


def nearest(name: str, valid: Mapping[str, object] | list[str]) -> str:
    """The "; did you mean X?" suffix for the closest valid name, or "" when none is close."""
    matches = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return f"; did you mean {matches[0]}?" if matches else ""
