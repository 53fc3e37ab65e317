"""[kafka.client] to aiokafka: SASL passes through, TLS files become one verified SSLContext.

The embedded broker's SASL mode cannot be exercised (creating a user needs an authenticated
client first), so SASL is covered here, by configuration, up to aiokafka's constructors.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from stream_ctx.errors import ConfigError
from stream_ctx.settings import KafkaSettings, client_kwargs, load_settings
from stream_ctx.shell.kafka.clients import group_consumer, reader

HOST = "127.0.0.1"
KEY_PASSWORD = "throwaway-key-password"  # noqa: S105 - protects a test key made for this module
# Key generation and signing take milliseconds; longer means openssl is stuck.
OPENSSL_TIMEOUT_S = 30.0
# A TLS 1.3 handshake is two flights each way; this many pumps of the memory BIOs is plenty.
MAX_HANDSHAKE_ROUNDS = 20
# Nothing listens here: constructing clients must not need a broker.
UNREACHABLE = "127.0.0.1:1"

SASL_CASES = [
    ("SASL_SSL", "PLAIN"),
    ("SASL_SSL", "SCRAM-SHA-256"),
    ("SASL_SSL", "SCRAM-SHA-512"),
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
]


def kafka(
    client: dict[str, Any], *, bootstrap_servers: str | list[str] = UNREACHABLE
) -> KafkaSettings:
    return KafkaSettings(bootstrap_servers=bootstrap_servers, client=client)


def sasl_client(protocol: str, mechanism: str) -> dict[str, Any]:
    return {
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "svc-stream-ctx",
        "sasl_plain_password": "not-a-real-secret",
    }


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1, its key encrypted: (cert, key)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("openssl is not installed; these tests need it: apt-get install -y openssl")
    directory = tmp_path_factory.mktemp("certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    command = [
        openssl, "req", "-x509", "-days", "1", "-passout", f"pass:{KEY_PASSWORD}",
        "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
        "-addext", f"subjectAltName=IP:{HOST},DNS:localhost",
        # It signs itself, so it is its own CA; strict verifiers want both said explicitly.
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,digitalSignature,keyCertSign",
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=OPENSSL_TIMEOUT_S)
    return cert, key


def handshake(client: ssl.SSLContext, server: ssl.SSLContext, *, hostname: str) -> None:
    """A TLS handshake between two contexts in memory; raises what the client's checks raise."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls_client = client.wrap_bio(to_client, to_server, server_hostname=hostname)
    tls_server = server.wrap_bio(server_in, server_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(MAX_HANDSHAKE_ROUNDS):
        for name, side in (("client", tls_client), ("server", tls_server)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        server_in.write(to_server.read())
        to_client.write(server_out.read())
        if all(done.values()):
            return
    raise AssertionError(f"no handshake after {MAX_HANDSHAKE_ROUNDS} rounds")


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key, password=KEY_PASSWORD)
    return context


@pytest.mark.parametrize(("protocol", "mechanism"), SASL_CASES)
def test_sasl_settings_pass_through_unchanged(protocol: str, mechanism: str) -> None:
    client = sasl_client(protocol, mechanism)
    kwargs = client_kwargs(kafka({**client, "client_id": "ctx-1", "request_timeout_ms": 5_000}))
    assert {k: kwargs[k] for k in client} == client
    assert kwargs["client_id"] == "ctx-1"
    assert kwargs["request_timeout_ms"] == 5_000
    assert kwargs["bootstrap_servers"] == [UNREACHABLE]


def test_sasl_ssl_gets_a_verifying_context_from_the_system_cas() -> None:
    kwargs = client_kwargs(kafka(sasl_client("SASL_SSL", "PLAIN")))
    context = kwargs["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


def test_sasl_plaintext_gets_no_tls_context() -> None:
    assert "ssl_context" not in client_kwargs(kafka(sasl_client("SASL_PLAINTEXT", "PLAIN")))


@pytest.mark.parametrize("client_class", [AIOKafkaProducer, AIOKafkaConsumer])
@pytest.mark.parametrize(("protocol", "mechanism"), SASL_CASES)
async def test_sasl_settings_are_accepted_by_aiokafka_clients(
    client_class: type[AIOKafkaProducer] | type[AIOKafkaConsumer], protocol: str, mechanism: str
) -> None:
    # Constructing validates the protocol/mechanism pairing and PLAIN's credentials; no I/O.
    client = client_class(**client_kwargs(kafka(sasl_client(protocol, mechanism))))
    await client.stop()


async def test_sasl_settings_are_accepted_by_the_admin_client() -> None:
    admin = AIOKafkaAdminClient(**client_kwargs(kafka(sasl_client("SASL_SSL", "SCRAM-SHA-512"))))
    await admin.close()


def test_ssl_cafile_becomes_a_context_trusting_only_that_ca(
    certificate: tuple[Path, Path],
) -> None:
    cert, _ = certificate
    kwargs = client_kwargs(kafka({"ssl_cafile": str(cert)}))
    context = kwargs["ssl_context"]
    assert kwargs["security_protocol"] == "SSL"
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.cert_store_stats() == {"x509": 1, "crl": 0, "x509_ca": 1}


def test_ssl_context_completes_a_handshake_with_the_cas_server(
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    context = client_kwargs(kafka({"security_protocol": "SSL", "ssl_cafile": str(cert)}))
    handshake(context["ssl_context"], server_context(cert, key), hostname=HOST)


def test_ssl_context_refuses_a_server_under_another_name(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    context = client_kwargs(kafka({"security_protocol": "SSL", "ssl_cafile": str(cert)}))
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        handshake(context["ssl_context"], server_context(cert, key), hostname="kafka.example")


def test_client_certificate_with_encrypted_key_loads_with_its_password(
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    client = {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
        "ssl_cafile": str(cert),
        "ssl_certfile": str(cert),
        "ssl_keyfile": str(key),
        "ssl_password": KEY_PASSWORD,
    }
    kwargs = client_kwargs(kafka(client))
    assert kwargs["security_protocol"] == "SASL_SSL"
    assert not any(k.startswith("ssl_") and k != "ssl_context" for k in kwargs)
    # The server asks for a client certificate and checks it against the same throwaway CA.
    server = server_context(cert, key)
    server.verify_mode = ssl.CERT_REQUIRED
    server.load_verify_locations(cert)
    handshake(kwargs["ssl_context"], server, hostname=HOST)


def test_unreadable_tls_file_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    missing = tmp_path / "missing-ca.pem"
    with pytest.raises(ConfigError, match=r"`kafka\.client\.ssl_cafile`"):
        client_kwargs(kafka({"ssl_cafile": str(missing)}))


@pytest.mark.parametrize("key", ["sasl_username", "ssl_ca_location", "bootstrap_servers"])
def test_unknown_client_key_is_a_config_error_naming_it(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"`kafka\.client\.{key}` is not a supported setting"):
        client_kwargs(kafka({key: "x"}))


@pytest.mark.parametrize("servers", ["a:1, b:2", "a:1,b:2,", ["a:1", "b:2"], [" a:1 ", "b:2", ""]])
def test_bootstrap_servers_string_or_list_become_a_list(servers: str | list[str]) -> None:
    assert client_kwargs(kafka({}, bootstrap_servers=servers))["bootstrap_servers"] == [
        "a:1",
        "b:2",
    ]


def test_client_table_is_read_from_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "stream-ctx.toml"
    path.write_text(
        '[kafka]\nbootstrap_servers = "a:1, b:2"\n\n'
        '[kafka.client]\nsecurity_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "SCRAM-SHA-256"\n'
        'sasl_plain_username = "u"\nsasl_plain_password = "p"\n',
        encoding="utf-8",
    )
    kwargs = client_kwargs(load_settings(path, environ={}).kafka)
    assert kwargs == {
        "bootstrap_servers": ["a:1", "b:2"],
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
    }


def test_environment_inline_table_replaces_the_whole_client_table(tmp_path: Path) -> None:
    # STREAM_CTX_KAFKA_CLIENT is one value, a TOML inline table: it is not merged key by key.
    path = tmp_path / "stream-ctx.toml"
    path.write_text(
        '[kafka.client]\nssl_cafile = "/etc/ca.pem"\nclient_id = "file"\n', encoding="utf-8"
    )
    environ = {"STREAM_CTX_KAFKA_CLIENT": '{security_protocol = "SASL_SSL", client_id = "env"}'}
    settings = load_settings(path, environ=environ)
    assert settings.kafka.client == {"security_protocol": "SASL_SSL", "client_id": "env"}


def test_environment_sets_a_single_client_key_merged_into_the_file_table(tmp_path: Path) -> None:
    path = tmp_path / "stream-ctx.toml"
    path.write_text('[kafka.client]\nssl_cafile = "/etc/ca.pem"\n', encoding="utf-8")
    environ = {"STREAM_CTX_KAFKA_CLIENT_SECURITY_PROTOCOL": "SASL_SSL"}
    settings = load_settings(path, environ=environ)
    assert settings.kafka.client == {"ssl_cafile": "/etc/ca.pem", "security_protocol": "SASL_SSL"}


def test_dotted_override_reaches_into_the_client_table() -> None:
    settings = load_settings(None, environ={}, overrides={"kafka.client.security_protocol": "SSL"})
    assert settings.kafka.client == {"security_protocol": "SSL"}


@pytest.mark.parametrize(
    ("key", "value"), [("security_protocol", "ssl"), ("sasl_mechanism", "SCRAM-SHA-1")]
)
def test_unknown_protocol_or_mechanism_is_a_config_error(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"`kafka\.client\.{key}` must be one of .*{value!r}"):
        client_kwargs(kafka({key: value}))


def test_plaintext_with_tls_files_is_a_config_error(certificate: tuple[Path, Path]) -> None:
    cert, _ = certificate
    with pytest.raises(ConfigError, match=r"'PLAINTEXT' but TLS files are set \(ssl_cafile\)"):
        client_kwargs(kafka({"security_protocol": "PLAINTEXT", "ssl_cafile": str(cert)}))


def test_client_table_override_as_a_mapping() -> None:
    settings = load_settings(
        None, environ={}, overrides={"kafka.client": {"security_protocol": "SSL"}}
    )
    assert client_kwargs(settings.kafka)["security_protocol"] == "SSL"


@pytest.mark.parametrize("build", [group_consumer, reader])
async def test_fetch_wait_reaches_every_consumer(build: Any) -> None:
    consumer = build(KafkaSettings(bootstrap_servers=UNREACHABLE, fetch_max_wait_ms=250))
    assert consumer._fetch_max_wait_ms == 250
    await consumer.stop()
