"""Tenants: bearer tokens, each allowed the conversation ids under its prefixes.

Tokens come from `[serve.tenants.<name>]` (`token`, or `token_env` naming a variable) and are
never logged or shown in an error. A request that may not see a conversation is answered
exactly as one for an unknown conversation, so ids do not leak.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stream_ctx.errors import ConfigError
from stream_ctx.shell.http.inspector.routes import is_local

__all__ = ("Tenant", "Tenants")

_KEYS = ("token", "token_env", "prefixes")


@dataclass(frozen=True, slots=True)
class Tenant:
    """One tenant: its name (for logs), its token and the id prefixes it may read."""

    name: str
    token: str
    prefixes: tuple[str, ...]

    def __repr__(self) -> str:  # the token stays out of every log line and traceback
        return f"Tenant(name={self.name!r}, prefixes={self.prefixes!r})"


class Tenants:
    """Who may read what; with no tenants configured everyone may read everything."""

    def __init__(self, tenants: tuple[Tenant, ...] = ()) -> None:
        self.tenants = tenants

    @classmethod
    def from_table(cls, table: Mapping[str, Any], *, environ: Mapping[str, str]) -> Tenants:
        """Parse `[serve.tenants]`; errors name the key and value, never a token."""
        return cls(tuple(_tenant(name, entry, environ) for name, entry in table.items()))

    @property
    def is_open(self) -> bool:
        """No tenants: every conversation to anyone (allowed on loopback only)."""
        return not self.tenants

    def check_host(self, host: str) -> None:
        """Refuse to serve beyond this machine with no tokens to check."""
        if self.is_open and not is_local(host):
            raise ConfigError(
                f"`serve.host` is {host!r}, reachable beyond this machine, but no"
                " `[serve.tenants.<name>]` with a token and prefixes is configured; add one, or"
                " bind 127.0.0.1"
            )

    def tenant_of(self, authorization: str | None) -> Tenant | None:
        """The tenant whose token an `Authorization: Bearer ...` header carries, if any."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        found = None
        for tenant in self.tenants:  # every token compared, in constant time each
            if hmac.compare_digest(tenant.token.encode(), token.strip().encode()):
                found = tenant
        return found

    def may_read(self, authorization: str | None, conversation_id: str) -> bool:
        """Whether the bearer of `authorization` may see `conversation_id`."""
        if self.is_open:
            return True
        tenant = self.tenant_of(authorization)
        return tenant is not None and conversation_id.startswith(tenant.prefixes)


def _tenant(name: str, entry: object, environ: Mapping[str, str]) -> Tenant:
    where = f"serve.tenants.{name}"
    if not isinstance(entry, Mapping):
        raise ConfigError(f"`{where}` must be a table with `token` or `token_env` and `prefixes`")
    unknown = sorted(set(entry) - set(_KEYS))
    if unknown:
        raise ConfigError(f"`{where}` has unknown key(s) {unknown}; expected {list(_KEYS)}")
    prefixes = entry.get("prefixes")
    if (
        not isinstance(prefixes, list)
        or not prefixes
        or not all(isinstance(p, str) and p for p in prefixes)
    ):
        raise ConfigError(
            f"`{where}.prefixes` must be a non-empty list of non-empty strings, got {prefixes!r}"
        )
    token = entry.get("token")
    variable = entry.get("token_env")
    if (token is None) == (variable is None):
        raise ConfigError(f"`{where}` needs exactly one of `token` and `token_env`")
    if variable is not None:
        if not isinstance(variable, str) or not environ.get(variable):
            raise ConfigError(
                f"`{where}.token_env` names {variable!r}, which is not set in the environment"
            )
        token = environ[variable]
    if not isinstance(token, str) or len(token) < 16:
        raise ConfigError(f"`{where}.token` must be a string of 16 characters or more (not shown)")
    return Tenant(name, token, tuple(prefixes))
