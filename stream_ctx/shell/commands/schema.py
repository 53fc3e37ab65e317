"""`stream-ctx schema`: JSON Schema of the topics' record values, generated from the msgspec wire
types (no drift)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Literal

import msgspec

from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.events import Event
from stream_ctx.shell.commands.subcommand import Commands, add_command

__all__ = ("DIALECT", "SCHEMA_NAMES", "SchemaName", "add_to", "json_schema", "render_schema")

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SchemaName = Literal["events", "bundle"]
SCHEMA_NAMES: tuple[SchemaName, ...] = ("events", "bundle")

_WIRE_TYPES: dict[SchemaName, tuple[object, str]] = {
    "events": (Event, "stream-ctx input event (a record value of the input topics)"),
    "bundle": (Bundle, "stream-ctx bundle (a record value of the output topic)"),
}


def json_schema(name: SchemaName) -> dict[str, Any]:
    """A standalone draft 2020-12 schema of one topic's record values, its `$defs` included."""
    wire_type, title = _WIRE_TYPES[name]
    (root,), components = msgspec.json.schema_components((wire_type,))
    return {"$schema": DIALECT, "title": title, **root, "$defs": components}


def render_schema(which: SchemaName | Literal["all"]) -> bytes:
    """Indented JSON: one schema, or for "all" an object holding each schema under its name."""
    names = SCHEMA_NAMES if which == "all" else (which,)
    schemas = {name: json_schema(name) for name in names}
    document = schemas if which == "all" else schemas[which]
    return msgspec.json.format(msgspec.json.encode(document), indent=2)


def add_to(commands: Commands) -> None:
    """`stream-ctx schema [--which NAME]`."""
    command = add_command(
        commands,
        "schema",
        summary="print the JSON Schema (draft 2020-12) of input events and bundles",
    )
    command.add_argument(
        "--which", choices=(*SCHEMA_NAMES, "all"), default="all", help="which schema to print"
    )
    command.set_defaults(handler=_schema)


def _schema(args: argparse.Namespace) -> int:
    sys.stdout.buffer.write(render_schema(args.which) + b"\n")
    sys.stdout.flush()
    return 0
