"""The docs' generated reference pages, made from the code at build time (an mkdocs hook).

`mkdocs build` calls `on_files`, which adds the pages below to the site without writing them
into the checkout: settings (from the settings types), the CLI (from the argparse parser), the
wire schemas (from the msgspec types), the context format (`READING_GUIDE` and a context the
core renders from `examples/readme.jsonl`) and the Python API (`stream_ctx.__all__`).
`python docs/hooks.py PAGE` prints one of them.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from inspect import getdoc, isclass, isfunction, signature
from pathlib import Path
from types import UnionType
from typing import Any

import msgspec
from msgspec import inspect

import stream_ctx
from stream_ctx import READING_GUIDE
from stream_ctx.core.window.config import PRESETS, bundle_config_from_table
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.events import Event
from stream_ctx.errors import ConfigError
from stream_ctx.settings import CLIENT_KEYS, ENV_PREFIX, config_keys, load_settings
from stream_ctx.settings.keys import Key, expected
from stream_ctx.shell.commands import cli
from stream_ctx.shell.commands.replay import replay

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "readme.jsonl"

# What each key is for. Name, type, range, default and variable come from the code; a key
# added to the settings without a line here fails tests/repo/test_docs_reference.py.
SETTING_NOTES: dict[str, str] = {
    "bundle.preset": "a named set of the window keys below; keys given beside it override it",
    "bundle.max_items": "window size: items held per conversation",
    "bundle.recency_weight": "weight of recency in an item's priority",
    "bundle.salience_weight": "weight of salience; the two weights must sum to 1.0 +/- 0.2",
    "bundle.min_salience_threshold": "items below it are rejected",
    "bundle.recency_half_life_days": "recency halves every this many days",
    "bundle.max_tokens": "token budget of a bundle's context; a finalize's `max_tokens` wins",
    "bundle.format": "the context format (see [the context format](context-format.md))",
    "bundle.order": "where items sit in the context; a finalize's `order` wins",
    "bundle.mode": "send the whole context, or only what changed since the previous bundle;"
    " a finalize's `mode` wins",
    "bundle.tokenizer": "the encoding every count is in (each bundle's `stats.tokenizer`)",
    "bundle.conversation_ttl_hours": "an event this long after its conversation's previous"
    " one starts the conversation afresh",
    "bundle.core": "the compiled core where it was built (`auto`), or the Python reference;"
    " both write the same bytes (`stream-ctx --version` says which runs)",
    "kafka.bootstrap_servers": 'a string (`"a:9092,b:9092"`) or a list',
    "kafka.group_id": "consumer group; instances with the same id share the partitions",
    "kafka.input_topics": "topics to read; each must exist when `run` starts",
    "kafka.output_topic": "where bundles go; created if missing",
    "kafka.dlq_topic": "where bad records go; created if missing",
    "kafka.max_event_bytes": "larger records are dead-lettered unread",
    "kafka.session_timeout_ms": "group session timeout; heartbeats every third of it",
    "kafka.max_batch_size": "producer batch size in bytes",
    "kafka.linger_ms": "producer linger; each write step sends its records before waiting",
    "kafka.compression_type": "codec of what stream-ctx produces; input in any codec is read",
    "kafka.fetch_max_wait_ms": "how long a fetch may wait for data",
    "kafka.max_poll_records": "records one fetch hands to processing (`max.poll.records`)",
    "kafka.client": "passed to aiokafka: security, SASL and TLS (keys below)",
    "state.changelog_suffix": "changelog topic = `<input>.<group_id>.<suffix>`",
    "state.replication_factor": "replication of the topics stream-ctx creates",
    "state.restore_timeout_s": "a restore that cannot finish in this long is an error",
    "state.commit_interval_ms": "states, tombstones and offsets are flushed at most this often",
    "metrics.port": "HTTP port of metrics, probes and inspector; off unless set, 0 picks one",
    "metrics.host": "interface the HTTP server listens on; containers set `0.0.0.0`",
    "metrics.inspector": "serve the live inspector under `/inspect` (it shows content)",
    "metrics.inspector_token": "bearer token the inspector demands off loopback",
    "metrics.history_events": "item outcomes kept per conversation for the inspector",
    "metrics.history_bundles": "bundles kept per conversation for the inspector",
    "metrics.history_conversations": "conversations the inspector keeps history for",
    "metrics.stall_after_s": "the progress watchdog: partitions with records waiting that none"
    " moved for this long turn `/healthz` red (see [health](../operations/health.md))",
    "serve.host": "the interface `stream-ctx serve` listens on; anything but loopback needs"
    " `[serve.tenants]`",
    "serve.port": "the HTTP API and MCP port (0 picks a free port)",
    "serve.max_conversations": "conversations serve holds, least recently used out first",
    "serve.max_bundles": "bundles serve keeps per conversation",
    "serve.finalize_timeout_s": "a finalize unanswered this long is a 504",
    "serve.max_body_bytes": "larger request bodies get a 413",
    "serve.tenants": "`[serve.tenants.<name>]` tables with `token` or `token_env`, and `prefixes`"
    " (see [serve](../guides/serve.md))",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _default(value: object) -> str:
    if value is None:
        return "none"
    if value == {}:
        return "empty"
    return f"`{json.dumps(msgspec.to_builtins(value))}`"


def _accepts(dotted: str, key: Key) -> str:
    """What a key accepts: its type's rule, or for a [bundle] number the rule BundleConfig
    enforces (read from the error it raises for -1, so the page says what the error says)."""
    rule = expected(key.info)
    section, _, name = dotted.partition(".")
    if dotted == "bundle.preset":
        return "one of " + ", ".join(repr(p) for p in PRESETS)
    if section != "bundle" or not rule.startswith(("an integer", "a number")) or name == "preset":
        return rule
    try:
        bundle_config_from_table({name: -1})
    except ConfigError as exc:
        found = re.search(r"must be (.*), got ", str(exc))
        if found:
            return found.group(1) + (" or omitted" if key.default is None else "")
    return rule


def settings_page() -> str:
    """Every config key with its default, what it accepts and its environment variable."""
    keys = config_keys()
    rows = [
        (
            f"`{dotted}`",
            _default(key.default),
            _accepts(dotted, key),
            f"`{key.env_name}`",
            SETTING_NOTES.get(dotted, ""),
        )
        for dotted, key in keys.items()
    ]
    client = [
        (f"`kafka.client.{name}`", f"`{ENV_PREFIX}KAFKA_CLIENT_{name.upper()}`")
        for name in sorted(CLIENT_KEYS)
    ]
    preset_keys = ("max_items", "recency_weight", "salience_weight", "min_salience_threshold")
    presets = [
        (f"`{name}`", *(str(getattr(config, k)) for k in preset_keys))
        for name, config in PRESETS.items()
    ]
    return "\n".join(
        [
            "# Settings",
            "",
            "One TOML file (`--config PATH`); every key can be overridden by the environment"
            " variable beside it, and `stream-ctx run` flags override both. A variable's value is"
            " read as its key's type: text for a string, a comma list for a list, a number or"
            " `true`/`false`. An unknown table, key or `STREAM_CTX_` variable is an error naming"
            " the nearest valid one. This page is generated from the settings types.",
            "",
            _table(("key", "default", "accepts", "environment variable", "meaning"), rows),
            "## `[kafka.client]`",
            "",
            "Passed to aiokafka. Each key is also read from `STREAM_CTX_KAFKA_<KEY>` where no"
            " `[kafka]` key is spelt alike.",
            "",
            _table(("key", "environment variable"), client),
            "## Presets",
            "",
            "`bundle.preset` sets these keys at once; keys given beside it win.",
            "",
            _table(("preset", *preset_keys), presets),
        ]
    )


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _options(parser: argparse.ArgumentParser) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
        if action.choices:
            names += " {" + ", ".join(str(c) for c in action.choices) + "}"
        default = action.default
        shown = "" if default in (None, False, argparse.SUPPRESS) else f"`{default}`"
        rows.append((names, shown, action.help or ""))
    return rows


def cli_page() -> str:
    """Every subcommand with its description, usage and options, from the argparse parser."""
    parser = cli.build_parser()
    parts = [
        "# Command line",
        "",
        f"`stream-ctx`: {parser.description} Generated from the argument parser.",
        "",
        _table(("option", "default", "meaning"), _options(parser)),
    ]
    for name, sub in _subcommands(parser):
        parts += [
            f"## `stream-ctx {name}`",
            "",
            sub.description or "",
            "",
            "```text",
            sub.format_usage().strip(),
            "```",
            "",
            _table(("option", "default", "meaning"), _options(sub)),
        ]
    return "\n".join(parts)


def metrics_page() -> str:
    """Every Prometheus metric a `run` serves on `/metrics`, from its registry."""
    from stream_ctx.shell.http.metrics import Metrics

    registry = Metrics().registry
    declared = {  # prometheus_client keeps a metric's label names on the metric object only
        name: tuple(getattr(collector, "_labelnames", ()))
        for collector, names in registry._collector_to_names.items()
        for name in names
    }
    rows = []
    for family in registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        seen = {k for s in family.samples for k in s.labels if k != "le"}
        labels = sorted(seen | set(declared.get(family.name, ())))
        row = (f"`{name}`", family.type, ", ".join(f"`{x}`" for x in labels), family.documentation)
        rows.append(row)
    return "\n".join(
        [
            "# Metrics",
            "",
            "With `metrics.port` set, `run` serves these on `/metrics` in the Prometheus text"
            " format, beside `/healthz` and `/readyz`. Generated from the processor's registry."
            " [Monitoring](../operations/monitoring.md)"
            " has the alerts worth setting.",
            "",
            _table(("metric", "type", "labels", "meaning"), rows),
        ]
    )


def _type_name(info: inspect.Type) -> str:
    match info:
        case inspect.StructType(cls=cls):
            return f"[{cls.__name__}](#{cls.__name__.lower()})"
        case inspect.ListType(item_type=item):
            return f"list of {_type_name(item)}"
        case inspect.DictType(key_type=key, value_type=value):
            return f"object of {_type_name(key)} to {_type_name(value)}"
        case inspect.UnionType(types=types):
            return " or ".join(_type_name(t) for t in types)
        case inspect.NoneType():
            return "null"
    return expected(info).removeprefix("a ").removeprefix("an ")


def _structs(root: object) -> Iterator[inspect.StructType]:
    """Every struct reachable from `root`, each once, in the order first met."""
    seen: set[type] = set()
    pending: list[inspect.Type] = [inspect.type_info(root)]
    while pending:
        info = pending.pop(0)
        match info:
            case inspect.StructType(cls=cls) if cls not in seen:
                seen.add(cls)
                yield info
                pending += [f.type for f in info.fields]
            case inspect.UnionType(types=types):
                pending += types
            case inspect.ListType(item_type=item):
                pending.append(item)
            case inspect.DictType(value_type=value):
                pending.append(value)


def _struct_section(info: inspect.StructType) -> str:
    cls: Any = info.cls
    doc = (cls.__doc__ or "").strip()
    rows = []
    if info.tag_field is not None:
        rows.append((f"`{info.tag_field}`", f'`"{info.tag}"`', "yes", ""))
    for field in info.fields:
        default = (
            ""
            if field.required
            else _default(
                field.default_factory() if field.default is msgspec.NODEFAULT else field.default
            )
        )
        rows.append(
            (
                f"`{field.encode_name}`",
                _type_name(field.type),
                "yes" if field.required else "no",
                default,
            )
        )
    return "\n".join(
        [f"### {cls.__name__}", "", doc, "", _table(("field", "type", "required", "default"), rows)]
    )


def schemas_page() -> str:
    """The input events and the bundle, field by field, from the msgspec wire types."""
    return "\n".join(
        [
            "# Events and bundles",
            "",
            "Generated from the msgspec types the processor decodes and encodes with."
            " `stream-ctx schema` prints the same as JSON Schema (draft 2020-12). Times are epoch"
            " milliseconds; unknown fields are ignored. Two rules sit outside the schema: a"
            " record's key must equal its `conversation_id`, and a record may be at most"
            " `kafka.max_event_bytes`.",
            "",
            "## Input events",
            "",
            "One JSON object per record, keyed by conversation id, tagged by `type`.",
            "",
            *(_struct_section(s) for s in _structs(Event)),
            "## Bundle",
            "",
            "One per `finalize`, on the output topic, keyed by conversation id.",
            "",
            *(_struct_section(s) for s in _structs(Bundle)),
        ]
    )


def example_bundle() -> dict[str, Any]:
    """The bundle the core gives for examples/readme.jsonl (its one finalize)."""
    out = io.BytesIO()
    with EXAMPLE.open("rb") as events:
        bad = replay(load_settings(None, environ={}).bundle, events, out, sys.stderr)
    assert not bad, f"{EXAMPLE} has {bad} bad line(s)"  # noqa: S101 - our own sample
    (line,) = out.getvalue().splitlines()
    bundle: dict[str, Any] = json.loads(line)
    return bundle


def naive_text(bundle: dict[str, Any]) -> str:
    """The items as pasted one after another (the `tokens_naive` baseline), from the bundle."""
    entries = []
    for n, item in enumerate(bundle["items"], start=1):
        head = [f"[{n}] {item['id']} ({item['kind']})"]
        head += [f"{k}={v}" for k, v in item["attributes"].items()]
        head += [f"#{t}" for t in item["tags"]]
        content = "".join(bundle["blocks"][b] for b in item["blocks"])
        entries.append(" ".join(head) + "\n" + content + "\n\n")
    return "".join(entries)


def context_format_page() -> str:
    """The reading guide, and a context rendered by the core next to its input."""
    bundle = example_bundle()
    stats = bundle["stats"]
    return "\n".join(
        [
            "# The context format",
            "",
            "A bundle's `context` is the prompt text: every item's content, kind, attributes and"
            " tags can be read back from it alone (`stream_ctx.read_context` does). Repeated text"
            " is written once and referred to; an item's header may name an earlier item whose"
            " metadata it shares. This page is generated: the guide is"
            " `stream_ctx.READING_GUIDE`, the example is what the core renders today.",
            "",
            "## The reading guide",
            "",
            "`stream_ctx.READING_GUIDE` is a paragraph to put in a system prompt so a model"
            " resolves the references:",
            "",
            "```text",
            READING_GUIDE.rstrip("\n"),
            "```",
            "",
            "[Reading rules, by example](reading-rules.md) shows one small context per rule"
            " of the guide and the items it stands for; a test reads each of them.",
            "",
            "## An example",
            "",
            "Input, `examples/readme.jsonl`: two neighbouring chunks that overlap by a sentence, an"
            " episode, then a `finalize`. Replayed with"
            " `stream-ctx replay examples/readme.jsonl`:",
            "",
            "The items pasted one after another (the `tokens_naive` baseline,"
            f" {stats['tokens_naive']} tokens):",
            "",
            "```text",
            naive_text(bundle).rstrip("\n"),
            "```",
            "",
            f"The bundle's `context` ({stats['tokens_bundle']} tokens in {stats['tokenizer']}):",
            "",
            "```text",
            bundle["context"].rstrip("\n"),
            "```",
            "",
            "## The naive baseline",
            "",
            "`stats.tokens_naive` is the exact token count of the included items in bundle"
            " order, each written as `[n] id (kind)`, then ` name=value` per attribute and"
            " ` #tag` per tag, a newline, the content and a blank line, as above. It is measured,"
            " never sent, and means the same in every version.",
            "",
        ]
    )


# The API page's sections, each name with what it is for. Every name of `stream_ctx.__all__` sits
# in exactly one section, or the build fails: the page lists the API, nothing less or more.
API_SECTIONS: dict[str, tuple[str, ...]] = {
    "The processor": ("ContextProcessor", "BundleConfig", "PRESETS"),
    "Events": ("Event", "Retrieval", "RetrievedItem", "Finalize", "End", "decode_event"),
    "Bundles": ("Bundle", "rebuild_full"),
    "Reading a context": ("READING_GUIDE", "read_context"),
    "The client": ("ContextClient",),
    "Errors": ("StreamCtxError", "ConfigError", "InvalidEventError"),
}
# What the names without a docstring of their own are.
API_NOTES: dict[str, str] = {
    "PRESETS": "The named `BundleConfig`s a `bundle.preset` key picks: "
    + ", ".join(f"`{name}`" for name in PRESETS)
    + ".",
    "READING_GUIDE": "The paragraph to put in a system prompt so a model resolves a context's"
    " references ([the context format](context-format.md) quotes it).",
    "Event": "`Retrieval | Finalize | End`: what `decode_event` returns and"
    " `ContextProcessor.apply` takes.",
}


class _Annotation(str):
    """An annotation written as it reads in the source (a plain str would print quoted)."""

    def __repr__(self) -> str:
        return str(self)


def _signature(value: Callable[..., object]) -> str:
    """`value`'s signature with its annotations as the source spells them."""
    found = signature(value)
    parameters = [
        p.replace(annotation=_Annotation(p.annotation)) if isinstance(p.annotation, str) else p
        for p in found.parameters.values()
    ]
    back = found.return_annotation
    return str(
        found.replace(
            parameters=parameters,
            return_annotation=_Annotation(back) if isinstance(back, str) else back,
        )
    )


def _api_entry(name: str) -> str:
    """One name of the API: what kind of thing it is, its signature if called, what it is for."""
    value = getattr(stream_ctx, name)
    if isclass(value) and issubclass(value, msgspec.Struct):
        fields = "the `[bundle]` keys of [the settings](settings.md)"
        if name != "BundleConfig":
            fields = "[events and bundles](schemas.md)"
        head = f"class (a msgspec Struct); its fields are {fields}"
    elif isclass(value) and issubclass(value, Exception):
        head = f"exception, a subclass of `{value.__mro__[1].__name__}`"
    elif isclass(value) or isfunction(value):
        kind = "class" if isclass(value) else "function"
        head = f"{kind} `{name}{_signature(value)}`"
    else:
        head = "type" if isinstance(value, UnionType) else "constant"
    about = API_NOTES.get(name) or (getdoc(value) or "").split("\n\n")[0].replace("\n", " ")
    return f"### `{name}`\n\n{head}\n\n{about}\n"


def api_page() -> str:
    """The names `stream_ctx` exports, by what they are for; every other module is internal."""
    listed = [name for names in API_SECTIONS.values() for name in names]
    if sorted(listed) != sorted(stream_ctx.__all__):
        raise ValueError(f"API_SECTIONS lists {sorted(listed)}, not {sorted(stream_ctx.__all__)}")
    sections = [
        f"## {title}\n\n" + "\n".join(_api_entry(name) for name in names)
        for title, names in API_SECTIONS.items()
    ]
    return "\n".join(
        [
            "# Python API",
            "",
            f"`from stream_ctx import ...`: these {len(listed)} names are the API, and"
            " `stream_ctx.__all__` is exactly them. `stream_ctx.settings` (the config file, whose"
            " `kafka` table `ContextClient.from_settings` takes) is public too. Every other module"
            " (`stream_ctx.core`, `stream_ctx.shell`, `stream_ctx.corpora`) is internal:"
            " importable, but free to change in any release. Every error derives from"
            " `StreamCtxError`; the finer ones are caught as it or imported from the module that"
            " raises them (`stream_ctx.client.BundleTimeoutError`). `import stream_ctx` loads no"
            " Kafka client; `ContextClient` is imported on first use. This page is generated"
            " from the code.",
            "",
            *sections,
        ]
    )


PAGES: dict[str, Callable[[], str]] = {
    "reference/settings.md": settings_page,
    "reference/cli.md": cli_page,
    "reference/schemas.md": schemas_page,
    "reference/context-format.md": context_format_page,
    "reference/metrics.md": metrics_page,
    "reference/api.md": api_page,
}


def on_files(files: Any, config: Any) -> Any:
    """mkdocs: add the generated pages to the site (nothing is written into docs/)."""
    from mkdocs.structure.files import File

    for path, make in PAGES.items():
        files.append(File.generated(config, path, content=make()))
    return files


if __name__ == "__main__":
    names = {Path(p).stem: make for p, make in PAGES.items()}
    if len(sys.argv) != 2 or sys.argv[1] not in names:
        sys.exit(f"usage: python docs/hooks.py {{{','.join(names)}}}")
    print(names[sys.argv[1]]())
