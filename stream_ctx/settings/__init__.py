"""The configuration: one TOML file, environment overrides, and the aiokafka settings it makes.

Neutral ground: the shell and the public client both read it; it imports neither.
"""

from stream_ctx.settings.connection import client_kwargs
from stream_ctx.settings.loading import ENV_PREFIX, config_keys, env_names, load_settings
from stream_ctx.settings.tables import (
    CLIENT_KEYS,
    KafkaSettings,
    MetricsSettings,
    ServeSettings,
    Settings,
    StateSettings,
)

__all__ = (
    "CLIENT_KEYS",
    "ENV_PREFIX",
    "KafkaSettings",
    "MetricsSettings",
    "ServeSettings",
    "Settings",
    "StateSettings",
    "client_kwargs",
    "config_keys",
    "env_names",
    "load_settings",
)
