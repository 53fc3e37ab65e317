"""serve's Kafka-free parts: the bounded store, tenants and tokens, request-body errors."""

from __future__ import annotations

import msgspec
import pytest

from stream_ctx.errors import ConfigError
from stream_ctx.settings import load_settings
from stream_ctx.shell.http.inspector.routes import is_local
from stream_ctx.shell.serve.store import BundleHead, BundleStore, Kept
from stream_ctx.shell.serve.tenant import Tenants
from stream_ctx.shell.serve.wire import FinalizeRequest, describe_error

SECRET = "a-secret-token-never-shown"  # noqa: S105 - a test token


def kept(cid: str, seq: int, request_id: str | None = None) -> Kept:
    head = BundleHead(f"{cid}:{seq}", cid, seq, request_id)
    return Kept(head, msgspec.json.encode(head))


def test_store_keeps_the_newest_bundles_and_forgets_the_least_recently_used_conversation() -> None:
    store = BundleStore(max_conversations=2, max_bundles=2)
    for seq in (1, 2, 3):
        assert store.add(kept("a", seq))
    assert store.add(kept("b", 1))
    assert store.latest("a") == kept("a", 3)  # reading "a" makes "b" the least recently used
    assert store.by_seq("a", 1) is None and store.by_seq("a", 2) == kept("a", 2)
    assert store.add(kept("c", 1))
    assert (store.latest("a"), store.latest("b"), len(store)) == (kept("a", 3), None, 2)


def test_store_ignores_a_repeated_bundle_and_takes_a_restarted_seq_as_newest() -> None:
    store = BundleStore(max_conversations=4, max_bundles=4)
    assert store.add(kept("a", 1)) and store.add(kept("a", 2))
    assert not store.add(kept("a", 1))  # at-least-once publishing repeats it byte for byte
    assert store.latest("a") == kept("a", 2)
    # The conversation ended and its id came back: bundle "a:1" again, with other bytes.
    again = kept("a", 1, request_id="after-the-end")
    assert store.add(again)
    assert store.latest("a") == again
    assert store.by_seq("a", 1) == again


def test_kept_decodes_a_bundle_head_and_refuses_what_is_not_one() -> None:
    assert Kept.from_record(kept("a", 4).raw).head.seq == 4
    with pytest.raises(msgspec.DecodeError):
        Kept.from_record(b'{"type": "retrieval"}')


def _tenants(**entry: object) -> Tenants:
    return Tenants.from_table({"acme": entry}, environ={"ACME_TOKEN": SECRET})


def test_tenant_token_reads_only_ids_under_its_prefixes() -> None:
    tenants = _tenants(token=SECRET, prefixes=["acme:", "shared:acme:"])
    assert tenants.may_read(f"Bearer {SECRET}", "acme:1")
    assert tenants.may_read(f"bearer {SECRET}", "shared:acme:2")
    assert not tenants.may_read(f"Bearer {SECRET}", "globex:1")
    assert not tenants.may_read(None, "acme:1")
    assert not tenants.may_read(f"Basic {SECRET}", "acme:1")
    assert not tenants.may_read("Bearer " + SECRET[:-1], "acme:1")
    assert SECRET not in repr(tenants.tenants)


def test_no_tenants_means_open_on_loopback_only() -> None:
    tenants = Tenants()
    assert tenants.may_read(None, "anything")
    tenants.check_host("127.0.0.1")
    tenants.check_host("::1")
    with pytest.raises(ConfigError, match=r"`serve.host` is '0.0.0.0'.*\[serve.tenants.<name>\]"):
        tenants.check_host("0.0.0.0")  # noqa: S104 - the binding under test
    assert is_local("localhost") and not is_local("example.org")


def test_token_from_the_environment() -> None:
    tenants = _tenants(token_env="ACME_TOKEN", prefixes=["acme:"])  # noqa: S106 - a name
    assert tenants.may_read(f"Bearer {SECRET}", "acme:1")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"token": SECRET}, r"`serve.tenants.acme.prefixes` must be a non-empty list .*got None"),
        ({"token": SECRET, "prefixes": [""]}, r"`serve.tenants.acme.prefixes` .*got \[''\]"),
        ({"prefixes": ["a"]}, r"`serve.tenants.acme` needs exactly one of `token` and `token_env`"),
        ({"token_env": "NOPE", "prefixes": ["a"]}, r"`serve.tenants.acme.token_env` names 'NOPE'"),
        ({"token": "short", "prefixes": ["a"]}, r"`serve.tenants.acme.token` must be .*16"),
        ({"token": SECRET, "prefixes": ["a"], "role": 1}, r"unknown key\(s\) \['role'\]"),
    ],
)
def test_tenant_config_errors_name_the_key_and_never_the_token(
    entry: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        _tenants(**entry)
    assert SECRET not in str(raised.value)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"max_tokens": 0}', "`max_tokens`: Expected `int` >= 1, got 0"),
        (b'{"mode": "diff"}', "`mode`: expected one of 'delta', 'full', got 'diff'"),
        (b'{"request_id": 7}', "`request_id`: Expected `str | null`, got 7"),
        (b'{"colour": "red"}', "`colour` is not a field of the request body"),
        (b"[1, 2]", "the request body expected `object`, got [1, 2]"),
        (b'{"max_tokens": ', "the request body is not valid JSON: Input data was truncated"),
    ],
)
def test_body_errors_name_the_field_and_the_value(body: bytes, message: str) -> None:
    with pytest.raises((msgspec.ValidationError, msgspec.DecodeError)) as raised:
        msgspec.json.decode(body, type=FinalizeRequest)
    assert isinstance(raised.value, msgspec.DecodeError)
    assert describe_error(raised.value, body) == message


def test_tenants_come_from_the_environment_as_an_inline_table() -> None:
    environ = {
        "STREAM_CTX_SERVE_TENANTS": '{acme = {token_env = "ACME_TOKEN", prefixes = ["acme:"]}}',
        "STREAM_CTX_SERVE_HOST": "0.0.0.0",  # noqa: S104 - allowed once tenants exist
    }
    settings = load_settings(None, environ=environ)
    tenants = Tenants.from_table(settings.serve.tenants, environ={"ACME_TOKEN": SECRET})
    tenants.check_host(settings.serve.host)
    assert tenants.may_read(f"Bearer {SECRET}", "acme:7")
