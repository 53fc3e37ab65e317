"""Config errors name the TOML key, the value and what is allowed; environment overrides are typed
by the key they set, and an unknown STREAM_CTX_ name is refused with the nearest valid one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stream_ctx.errors import ConfigError
from stream_ctx.settings import config_keys, env_names, load_settings


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "stream-ctx.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[kafka]\nsession_timeout_ms = -5",
            "`kafka.session_timeout_ms` must be an integer >= 1000, got -5",
        ),
        ("[kafka]\nmax_event_bytes = 0", "`kafka.max_event_bytes` must be an integer >= 1, got 0"),
        ("[kafka]\ngroup_id = 2024", "`kafka.group_id` must be a string, got 2024"),
        ("[kafka]\ninput_topics = 'a'", "`kafka.input_topics` must be a list of strings, got 'a'"),
        ("[kafka]\nlinger_ms = -1", "`kafka.linger_ms` must be an integer >= 0, got -1"),
        (
            "[state]\nreplication_factor = 0",
            "`state.replication_factor` must be an integer in [1, 32767]",
        ),
        ("[state]\nrestore_timeout_s = 0", "`state.restore_timeout_s` must be a number > 0, got 0"),
        ("[metrics]\nport = 99999", "`metrics.port` must be an integer in [0, 65535], got 99999"),
        ("[metrics]\nport = '9464'", "`metrics.port` must be an integer in [0, 65535], got '9464'"),
        ("[bundle]\nmax_items = '50'", "`bundle.max_items` must be an integer, got '50'"),
        (
            "[bundle]\ntokenizer = 'o2'",
            "`bundle.tokenizer` must be one of 'cl100k_base', 'o200k_base', got 'o2'",
        ),
        ("[kafka]\ngroupid = 'x'", "unknown key `kafka.groupid`; did you mean kafka.group_id?"),
        ("[kafak]\ngroup_id = 'x'", "unknown config table [kafak]; did you mean kafka?"),
    ],
)
def test_file_error_names_key_value_and_rule(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(_toml(tmp_path, text), environ={})


def test_enum_error_lists_the_allowed_values_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(_toml(tmp_path, "[bundle]\norder = 'stabel'"), environ={})
    message = str(info.value)
    assert message == "`bundle.order` must be one of 'edges', 'priority', 'stable', got 'stabel'"


@pytest.mark.parametrize(
    ("variable", "value", "dotted", "expected"),
    [
        ("STREAM_CTX_KAFKA_GROUP_ID", "2024", "kafka.group_id", "2024"),
        ("STREAM_CTX_KAFKA_INPUT_TOPICS", "a, b", "kafka.input_topics", ["a", "b"]),
        ("STREAM_CTX_KAFKA_BOOTSTRAP_SERVERS", "a:1,b:2", "kafka.bootstrap_servers", "a:1,b:2"),
        ("STREAM_CTX_KAFKA_SESSION_TIMEOUT_MS", "6000", "kafka.session_timeout_ms", 6000),
        ("STREAM_CTX_STATE_RESTORE_TIMEOUT_S", "2.5", "state.restore_timeout_s", 2.5),
        ("STREAM_CTX_METRICS_PORT", "9464", "metrics.port", 9464),
        ("STREAM_CTX_BUNDLE_MAX_ITEMS", "50", "bundle.max_items", 50),
        ("STREAM_CTX_KAFKA_CLIENT_ID", "ctx-7", "kafka.client.client_id", "ctx-7"),
        ("STREAM_CTX_KAFKA_SECURITY_PROTOCOL", "SSL", "kafka.client.security_protocol", "SSL"),
        ("STREAM_CTX_KAFKA_CLIENT_RETRY_BACKOFF_MS", "50", "kafka.client.retry_backoff_ms", 50),
    ],
)
def test_environment_value_is_typed_by_its_key(
    variable: str, value: str, dotted: str, expected: object
) -> None:
    settings = load_settings(None, environ={variable: value})
    section, _, rest = dotted.partition(".")
    found: object = getattr(settings, section)
    for part in rest.split("."):
        found = found[part] if isinstance(found, dict) else getattr(found, part)
    assert found == expected
    assert type(found) is type(expected)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "STREAM_CTX_KAFKKA_GROUP_ID",
            "x",
            "variable STREAM_CTX_KAFKKA_GROUP_ID; did you mean STREAM_CTX_KAFKA_GROUP_ID?",
        ),
        ("STREAM_CTX_KAFKA_GROUPID", "x", "did you mean STREAM_CTX_KAFKA_GROUP_ID?"),
        (
            "STREAM_CTX_KAFKA_SESSION_TIMEOUT_MS",
            "soon",
            "(from STREAM_CTX_KAFKA_SESSION_TIMEOUT_MS) must be an integer >= 1000, got 'soon'",
        ),
        (
            "STREAM_CTX_METRICS_PORT",
            "99999",
            "`metrics.port` (from STREAM_CTX_METRICS_PORT) must be an integer in [0, 65535]",
        ),
    ],
)
def test_bad_environment_variable_is_refused_by_name(
    variable: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(None, environ={variable: value})


def test_every_key_has_an_environment_name() -> None:
    names = env_names()
    for dotted, key in config_keys().items():
        assert names[key.env_name] == dotted
