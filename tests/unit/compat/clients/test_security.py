"""compat/clients/security.py and registry.check_security: a Kafka client properties file
(--security-config) as kafka-python's and aiokafka's keyword arguments, its TLS context tried
in memory against a server context (no sockets), and what a client cannot use refused with a
message that never holds a secret."""

from __future__ import annotations

import asyncio
import ssl
import tempfile
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from cryptography.hazmat.primitives import serialization
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from martlet.compat.clients import registry
from martlet.compat.clients.security import (
    ConfigError,
    check_readable,
    keyword_arguments,
    python_settings,
    ssl_context,
)
from martlet.tools import certs
from tests.support.tls import pem_one_line

SECRET = "s3cret-Pa55"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
HANDSHAKE_ROUNDS_MAX = 10  # a TLS handshake in memory takes two or three


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A development CA, broker (localhost) and client certificates: ca.pem, broker.pem, client.key, ..."""
    found = tmp_path_factory.mktemp("certs")
    certs.create(found, ["localhost"], 1)
    return found


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    found = tmp_path_factory.mktemp("other-certs")
    certs.create(found, ["localhost"], 1)
    return found / "ca.pem"


def properties(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def handshake(client: ssl.SSLContext, folder: Path, server_name: str = "localhost",
              client_certificate: bool = False) -> ssl.SSLObject:
    """A TLS handshake between `client` and the broker's certificate, through memory; the
    server's side (whose peer certificate is the client's, when asked for one)."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "broker.pem", folder / "broker.key")
    if client_certificate:
        server.verify_mode = ssl.CERT_REQUIRED
        server.load_verify_locations(folder / "ca.pem")
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(to_client, to_server, server_hostname=server_name)
    server_out, server_in = ssl.MemoryBIO(), ssl.MemoryBIO()
    server_side = server.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(HANDSHAKE_ROUNDS_MAX):
        done = [_step(side) for side in (client_side, server_side)]
        server_in.write(to_server.read())
        to_client.write(server_out.read())
        if all(done):
            return server_side
    raise AssertionError("the handshake did not end")


def _step(side: ssl.SSLObject) -> bool:
    try:
        side.do_handshake()
    except ssl.SSLWantReadError:
        return False
    return True


def peer_name(server_side: ssl.SSLObject) -> str:
    peer = server_side.getpeercert()
    assert peer, "no client certificate"
    return dict(pair[0] for pair in peer["subject"])["commonName"]


# -- SASL -------------------------------------------------------------------------------------

def test_sasl_ssl_with_scram_gives_the_python_clients_their_arguments(folder: Path, tmp_path: Path) -> None:
    path = properties(tmp_path, "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
                      f'sasl.jaas.config={SCRAM} required username="alice" password="{SECRET}";',
                      "ssl.truststore.type=PEM", f"ssl.truststore.location={folder / 'ca.pem'}")
    found = python_settings(path)
    context = found.pop("ssl_context")
    assert found == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                     "sasl_plain_username": "alice", "sasl_plain_password": SECRET}
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    handshake(context, folder)
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        handshake(context, folder, server_name="elsewhere")


def test_sasl_plaintext_has_no_tls(tmp_path: Path) -> None:
    path = properties(tmp_path, "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
                      f'sasl.jaas.config={PLAIN} required username="bob" password="{SECRET}";')
    assert python_settings(path) == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                                     "sasl_plain_username": "bob", "sasl_plain_password": SECRET}


def test_plaintext_is_only_the_protocol(tmp_path: Path) -> None:
    assert python_settings(properties(tmp_path, "security.protocol=PLAINTEXT")) == {"security_protocol": "PLAINTEXT"}
    assert keyword_arguments({}) == {"security_protocol": "PLAINTEXT"}


def test_the_arguments_are_the_clients_own(folder: Path) -> None:
    """kafka-python's three clients know every name; aiokafka's take them (its clients check
    their SASL and TLS arguments when made, before any connection)."""
    found = keyword_arguments({"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-256",
                               "sasl.username": "alice", "sasl.password": SECRET,
                               "ssl.ca.location": str(folder / "ca.pem")})
    for client in (KafkaProducer, KafkaConsumer, KafkaAdminClient):
        assert set(found) <= set(client.DEFAULT_CONFIG), client

    async def make_and_close() -> None:
        producer, consumer, admin = AIOKafkaProducer(**found), AIOKafkaConsumer(**found), AIOKafkaAdminClient(**found)
        await producer.stop()
        await consumer.stop()
        await admin.close()

    asyncio.run(make_and_close())


# -- TLS --------------------------------------------------------------------------------------

def test_an_empty_endpoint_identification_algorithm_skips_the_name_check_not_the_chain(
        folder: Path, other_ca: Path) -> None:
    context = ssl_context({"ssl.ca.location": str(folder / "ca.pem"), "ssl.endpoint.identification.algorithm": "none"})
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_REQUIRED, False)
    handshake(context, folder, server_name="elsewhere")
    untrusted = ssl_context({"ssl.ca.location": str(other_ca), "ssl.endpoint.identification.algorithm": "none"})
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        handshake(untrusted, folder)


def test_without_a_truststore_the_systems_cas_are_trusted(folder: Path) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(ssl_context({}), folder)  # a development CA is none of them


def test_truststore_certificates_in_the_file_itself(folder: Path, tmp_path: Path) -> None:
    path = properties(tmp_path, "security.protocol=SSL", "ssl.truststore.type=PEM",
                      f"ssl.truststore.certificates={pem_one_line(folder / 'ca.pem')}")
    handshake(python_settings(path)["ssl_context"], folder)


def keystore_lines(folder: Path, tmp_path: Path, form: str) -> list[str]:
    """The client's certificate and key as a properties file may give them."""
    if form == "pem keystore file":
        store = tmp_path / "client-keystore.pem"
        store.write_text((folder / "client.key").read_text() + (folder / "client.pem").read_text())
        return ["ssl.keystore.type=PEM", f"ssl.keystore.location={store}"]
    if form == "pem in the file":
        return ["ssl.keystore.type=PEM", f"ssl.keystore.certificate.chain={pem_one_line(folder / 'client.pem')}",
                f"ssl.keystore.key={pem_one_line(folder / 'client.key')}"]
    if form == "librdkafka's locations":
        return [f"ssl.certificate.location={folder / 'client.pem'}", f"ssl.key.location={folder / 'client.key'}"]
    key = serialization.load_pem_private_key((folder / "client.key").read_bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(SECRET.encode())).decode()
    return ["ssl.keystore.type=PEM", f"ssl.keystore.certificate.chain={pem_one_line(folder / 'client.pem')}",
            "ssl.keystore.key=" + encrypted.strip().replace("\n", "\\n"), f"ssl.key.password={SECRET}"]


@pytest.mark.parametrize("form", ["pem keystore file", "pem in the file", "librdkafka's locations", "encrypted key"])
def test_the_client_certificate_is_presented(folder: Path, tmp_path: Path, form: str) -> None:
    path = properties(tmp_path, "security.protocol=SSL", f"ssl.truststore.location={folder / 'ca.pem'}",
                      *keystore_lines(folder, tmp_path, form))
    server_side = handshake(python_settings(path)["ssl_context"], folder, client_certificate=True)
    assert peer_name(server_side) == "client"


def test_pem_text_is_on_disk_only_while_it_is_loaded(folder: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    ssl_context({"ssl.ca.location": str(folder / "ca.pem"), "ssl.certificate.pem": (folder / "client.pem").read_text(),
                 "ssl.key.pem": (folder / "client.key").read_text()})
    assert list(scratch.iterdir()) == []


# -- refusals ---------------------------------------------------------------------------------

def test_a_pkcs12_keystore_is_refused_without_its_password(tmp_path: Path) -> None:
    store = tmp_path / "client.p12"
    store.write_bytes(b"\x30\x82")
    path = properties(tmp_path, "security.protocol=SSL", "ssl.keystore.type=PKCS12", f"ssl.keystore.location={store}",
                      f"ssl.keystore.password={SECRET}")
    with pytest.raises(ConfigError, match="read no PKCS12 keystore") as refused:
        python_settings(path)
    assert str(refused.value).startswith(f"{path}: ") and SECRET not in str(refused.value)


def test_a_wrong_key_password_is_refused_without_showing_either(folder: Path, tmp_path: Path) -> None:
    lines = keystore_lines(folder, tmp_path, "encrypted key")
    wrong = "not-" + SECRET
    path = properties(tmp_path, "security.protocol=SSL", *lines[:-1], f"ssl.key.password={wrong}")
    with pytest.raises(ConfigError, match="ssl.keystore: the client certificate and key could not be loaded") as refused:
        python_settings(path)
    assert SECRET not in str(refused.value) and wrong not in str(refused.value)


def test_a_truststore_that_is_not_a_certificate_is_refused(tmp_path: Path) -> None:
    bad = "-----BEGIN CERTIFICATE-----\\nbm90IGEgY2VydGlmaWNhdGU=\\n-----END CERTIFICATE-----"
    path = properties(tmp_path, "security.protocol=SSL", f"ssl.truststore.certificates={bad}")
    with pytest.raises(ConfigError, match="ssl.truststore.certificates: the certificates could not be loaded"):
        python_settings(path)


def test_a_file_that_cannot_be_used_is_refused_by_name(tmp_path: Path) -> None:
    path = properties(tmp_path, "security.protocol=SASL_SSL", f'sasl.jaas.config={SCRAM} required username="a" '
                      f'password="{SECRET}";')
    with pytest.raises(ConfigError, match="needs sasl.mechanism") as refused:
        python_settings(path)
    assert str(refused.value).startswith(f"{path}: ") and SECRET not in str(refused.value)


def test_each_client_checks_the_file_its_own_way(tmp_path: Path) -> None:
    """librdkafka reads a PKCS12 keystore, the Python clients do not; the JVM reads the file
    itself, so it need only be readable."""
    store = tmp_path / "client.p12"
    store.write_bytes(b"\x30\x82")
    path = properties(tmp_path, "security.protocol=SSL", "ssl.keystore.type=PKCS12", f"ssl.keystore.location={store}")
    registry.check_security("confluent", path)
    registry.check_security("java", path)
    for client in ("kafka-python", "aiokafka"):
        with pytest.raises(ConfigError, match="PKCS12"):
            registry.check_security(client, path)
    with pytest.raises(ConfigError, match="cannot read it"):
        registry.check_security("java", str(tmp_path / "missing.properties"))
    with pytest.raises(ConfigError, match="cannot read it"):
        check_readable(str(tmp_path))
