"""SASL on Martlet's listeners (issue 39): users made with AlterUserScramCredentials (by
confluent-kafka's admin and by Kafka's own kafka-configs.sh), then Kafka clients produce and
consume on SASL_PLAINTEXT and SASL_SSL listeners with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512;
a wrong password is refused after the failed-authentication delay with nothing of it in the
log; before authentication nothing but ApiVersions and SASL is answered; KIP-368 sessions end
and are renewed on the same connection; brokers authenticate to each other as their own user."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramMechanism,
    UserScramCredentialDeletion,
)
from kafka import KafkaConsumer, KafkaProducer
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.integration.raw_client import RawClient, is_closed
from tests.support.sasl import MECHANISMS, PASSWORD, Secured, add_user, handshake, scram_login, start_secured

pytestmark = pytest.mark.integration

WAIT_S = 30.0
UNSUPPORTED_MECHANISM, ILLEGAL_STATE, AUTHENTICATION_FAILED = 33, 34, 58


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    found = start_secured(tmp_path_factory.mktemp("martlet-sasl"))
    try:
        add_user(found.local, "alice", PASSWORD)
        yield found
    finally:
        found.broker.kill()


def _topic(secured: Secured, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": secured.local})
    admin.create_topics([NewTopic(name, 1)])[name].result(WAIT_S)
    return name


def _consume(settings: dict[str, Any], topic: str, count: int) -> list[bytes]:
    consumer = Consumer(settings | {"group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_produces_and_consumes_with_each_mechanism(secured: Secured, listener: str,
                                                                   mechanism: str) -> None:
    settings = secured.settings(listener, mechanism)
    brokers = AdminClient(settings).list_topics(timeout=WAIT_S).brokers
    port = secured.addresses[listener].rsplit(":", 1)[1]
    assert [str(node.port) for node in brokers.values()] == [port]  # the listener the client came in on
    topic = _topic(secured, "sasl")
    producer = Producer(settings)
    for index in range(20):
        producer.produce(topic, f"{mechanism}-{index}".encode())
    assert producer.flush(WAIT_S) == 0
    assert _consume(settings, topic, 20) == [f"{mechanism}-{index}".encode() for index in range(20)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_is_refused_and_never_logged(secured: Secured, mechanism: str) -> None:
    errors: list[KafkaError] = []
    wrong = f"wrong-{uuid.uuid4().hex}"
    producer = Producer(secured.settings("SASL_PLAINTEXT", mechanism, password=wrong)
                        | {"error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + WAIT_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    text = str(errors[0])
    assert "Authentication failed" in text or "authentication" in text.lower(), text
    deadline = time.monotonic() + WAIT_S
    while "Failed authentication with /127.0.0.1 on listener SASL_PLAINTEXT" not in secured.broker.log_tail(400):
        assert time.monotonic() < deadline, secured.broker.log_tail()
    assert wrong not in secured.broker.log_tail(2000)


def test_before_authentication_only_api_versions_and_sasl_are_answered(secured: Secured) -> None:
    with RawClient(secured.addresses["SASL_PLAINTEXT"]) as client:
        assert client.request(ApiVersionsRequest(client_software_name="raw", client_software_version="1")).error_code == 0
        client.send(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                    include_topic_authorized_operations=False))
        assert is_closed(client.sock, WAIT_S)
    with RawClient(secured.addresses["SASL_PLAINTEXT"]) as client:
        answer = handshake(client, "GSSAPI")
        assert (answer.error_code, set(answer.mechanisms)) == (UNSUPPORTED_MECHANISM, set(MECHANISMS))
        assert is_closed(client.sock, WAIT_S)
    with RawClient(secured.local) as client:  # no SASL on a PLAINTEXT listener
        assert handshake(client, "PLAIN").error_code == ILLEGAL_STATE
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0" + PASSWORD.encode()))
        assert answer.error_code == ILLEGAL_STATE


def test_a_failed_authentication_answers_after_the_delay_then_closes(secured: Secured) -> None:
    with RawClient(secured.addresses["SASL_PLAINTEXT"]) as client:
        assert handshake(client, "PLAIN").error_code == 0
        started = time.monotonic()
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0not-the-password"))
        waited = time.monotonic() - started
        assert (answer.error_code, answer.error_message) == (
            AUTHENTICATION_FAILED, "Authentication failed: Invalid username or password")
        assert waited >= 0.1  # connection.failed.authentication.delay.ms, Kafka's default 100
        assert is_closed(client.sock, WAIT_S)
    with RawClient(secured.addresses["SASL_PLAINTEXT"]) as client:  # an unknown user gets the same answer
        assert handshake(client, "PLAIN").error_code == 0
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\0nobody\0not-the-password"))
        assert answer.error_message == "Authentication failed: Invalid username or password"
    with RawClient(secured.addresses["SASL_PLAINTEXT"]) as client:
        answer = scram_login(client, "SCRAM-SHA-256", "alice", "not-the-password")
        assert answer.error_code == AUTHENTICATION_FAILED
        assert answer.error_message == ("Authentication failed during authentication due to invalid credentials "
                                        "with SASL mechanism SCRAM-SHA-256")


def test_users_are_described_changed_and_deleted(secured: Secured) -> None:
    admin = AdminClient({"bootstrap.servers": secured.local})
    user = f"u{uuid.uuid4().hex[:8]}"
    add_user(secured.local, user, "first", (ScramMechanism.SCRAM_SHA_512,))
    described = admin.describe_user_scram_credentials([user])[user].result(WAIT_S)
    assert [(info.mechanism, info.iterations) for info in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 4096)]
    settings = secured.settings("SASL_PLAINTEXT", "SCRAM-SHA-512", user, "first")
    assert AdminClient(settings).list_topics(timeout=WAIT_S).brokers
    add_user(secured.local, user, "second", (ScramMechanism.SCRAM_SHA_512,))  # a new password
    with RawClient(secured.addresses["SASL_PLAINTEXT"]) as client:
        assert scram_login(client, "SCRAM-SHA-512", user, "first").error_code == AUTHENTICATION_FAILED
    with RawClient(secured.addresses["SASL_PLAINTEXT"]) as client:
        assert scram_login(client, "SCRAM-SHA-512", user, "second").error_code == 0
    deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([deletion])[user].result(WAIT_S)
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials([user])[user].result(WAIT_S)
    with RawClient(secured.addresses["SASL_PLAINTEXT"]) as client:
        assert scram_login(client, "SCRAM-SHA-512", user, "second").error_code == AUTHENTICATION_FAILED


def test_kafka_python_and_aiokafka_over_sasl_ssl(secured: Secured) -> None:
    address = secured.addresses["SASL_SSL"]
    ca = str(secured.certs / "ca.pem")
    for mechanism in MECHANISMS:
        topic = _topic(secured, "sasl-py")
        common = {"bootstrap_servers": address, "security_protocol": "SASL_SSL", "ssl_cafile": ca,
                  "sasl_mechanism": mechanism, "sasl_plain_username": "alice", "sasl_plain_password": PASSWORD}
        producer = KafkaProducer(**common)
        for index in range(5):
            producer.send(topic, f"kp-{index}".encode())
        producer.flush(WAIT_S)
        producer.close()
        consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=int(WAIT_S * 1000),
                                 **common)
        got = [message.value for _, message in zip(range(5), consumer, strict=False)]
        consumer.close()
        assert got == [f"kp-{index}".encode() for index in range(5)], mechanism
        assert asyncio.run(_aiokafka_round(address, ca, mechanism, topic)) == [
            f"kp-{index}".encode() for index in range(5)] + [b"aio"], mechanism


async def _aiokafka_round(address: str, ca: str, mechanism: str, topic: str) -> list[bytes]:
    common: dict[str, Any] = {"bootstrap_servers": address, "security_protocol": "SASL_SSL",
                              "ssl_context": create_ssl_context(cafile=ca), "sasl_mechanism": mechanism,
                              "sasl_plain_username": "alice", "sasl_plain_password": PASSWORD}
    producer = AIOKafkaProducer(**common)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"aio")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **common)
    await consumer.start()
    got: list[bytes] = []
    try:
        async with asyncio.timeout(WAIT_S):
            while len(got) < 6:
                message = await consumer.getone()
                got.append(message.value)
    finally:
        await consumer.stop()
    return got


@pytest.mark.java
def test_kafka_configs_makes_a_user_and_the_java_client_uses_it(secured: Secured, kafka_tool: Any,
                                                                tmp_path: Path) -> None:
    """Kafka's shipped tools: kafka-configs.sh adds a SCRAM user (the salted password only),
    then the console producer and consumer authenticate as it over SASL_SSL."""
    user = f"java{uuid.uuid4().hex[:6]}"

    def run_ok(tool: str, args: list[str], data: bytes | None = None) -> str:
        result = kafka_tool(tool, args, 120.0, input=data)
        assert result.returncode == 0, f"{tool}:\n{result.stdout.decode()}\n{result.stderr.decode()}"
        return str(result.stdout.decode())

    for credential in ("SCRAM-SHA-256=[iterations=8192,password=java-secret]", "SCRAM-SHA-512=[password=java-secret]"):
        # one mechanism a command: Kafka's controller refuses two alterations of one user in a request
        run_ok("configs", ["--bootstrap-server", secured.local, "--alter", "--entity-type", "users", "--entity-name",
                           user, "--add-config", credential])
    described = run_ok("configs", ["--bootstrap-server", secured.local, "--describe", "--entity-type", "users",
                                   "--entity-name", user])
    assert "SCRAM-SHA-256=iterations=8192" in described and "SCRAM-SHA-512=iterations=4096" in described, described
    properties = tmp_path / "client.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="java-secret";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={secured.certs / 'ca.pem'}\n")
    topic = _topic(secured, "sasl-java")
    address = secured.addresses["SASL_SSL"]
    lines = [f"line{index}" for index in range(10)]
    run_ok("console-producer", ["--bootstrap-server", address, "--producer.config", str(properties), "--topic", topic],
           "\n".join(lines).encode() + b"\n")
    out = run_ok("console-consumer", ["--bootstrap-server", address, "--command-config", str(properties),
                                      "--topic", topic, "--partition", "0", "--offset", "earliest",
                                      "--max-messages", "10", "--timeout-ms", "30000"])
    assert out.splitlines() == lines


def test_sessions_end_and_are_renewed_on_the_same_connection(tmp_path: Path) -> None:
    """KIP-368: SaslAuthenticate tells the session's length; a SaslHandshake on the
    authenticated connection renews it (the principal may not change); a connection whose
    session ended is closed at its next request."""
    lifetime_ms = 1500
    found = start_secured(tmp_path, f"connections_max_reauth_ms = {lifetime_ms}")
    try:
        add_user(found.local, "alice", PASSWORD)
        add_user(found.local, "bob", "bob-secret")
        address = found.addresses["SASL_PLAINTEXT"]
        metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False)
        with RawClient(address) as client:
            answer = scram_login(client, "SCRAM-SHA-512", "alice", PASSWORD)
            assert (answer.error_code, answer.session_lifetime) == (0, _ms(lifetime_ms))
            assert client.request(metadata).brokers
            assert scram_login(client, "SCRAM-SHA-512", "alice", PASSWORD).error_code == 0  # renewed
            assert client.request(metadata).brokers
            assert scram_login(client, "SCRAM-SHA-512", "bob", "bob-secret").error_code == AUTHENTICATION_FAILED
            assert is_closed(client.sock, WAIT_S)
        with RawClient(address) as client:
            assert scram_login(client, "SCRAM-SHA-512", "alice", PASSWORD).error_code == 0
            ended = time.monotonic() + lifetime_ms / 1000
            time.sleep(max(0.0, ended - time.monotonic()) + 0.2)  # the passage of time is what is tested here
            client.send(metadata)
            assert is_closed(client.sock, WAIT_S)
        # librdkafka re-authenticates by itself before its session ends, and keeps producing.
        topic = _topic(found, "reauth")
        producer = Producer(found.settings("SASL_PLAINTEXT", "SCRAM-SHA-256"))
        deadline = time.monotonic() + 3 * lifetime_ms / 1000
        sent = 0
        while time.monotonic() < deadline:
            producer.produce(topic, b"x")
            sent += 1
            assert producer.flush(WAIT_S) == 0
        assert len(_consume(found.settings("SASL_PLAINTEXT", "PLAIN"), topic, sent)) == sent
        assert "after the session of User:alice ended" in found.broker.log_tail(400)
    finally:
        found.broker.kill()


def _ms(value: int) -> Any:
    import datetime
    return datetime.timedelta(milliseconds=value)


def test_brokers_authenticate_to_each_other_as_their_own_user(tmp_path: Path) -> None:
    """A SASL inter-broker listener: the broker makes its own user at start, and what it sends
    another broker (transaction markers) authenticates as that user first."""
    from martlet.engine.api import NodeIdentity, RemoteMarkers, TopicPartition
    from martlet.gateway.peers import send_markers
    from martlet.protocol.sasl_client import Login

    found = start_secured(tmp_path, 'inter_broker_user = "broker"\ninter_broker_password = "broker-secret"\n'
                             'inter_broker_mechanism = "SCRAM-SHA-512"')
    try:
        topic = _topic(found, "peer")
        host, port = found.addresses["SASL_PLAINTEXT"].rsplit(":", 1)
        node = NodeIdentity(1, host, int(port))
        markers = RemoteMarkers(producer_id=1, epoch=0, commit=True, partitions=(TopicPartition(topic, 0),), shards=())
        own = Login("SCRAM-SHA-512", "broker", "broker-secret")
        assert asyncio.run(send_markers(node, markers, login=own)) == []
        with pytest.raises(ConnectionError, match="authentication failed"):
            asyncio.run(send_markers(node, markers, login=own._replace(password="wrong")))
        with pytest.raises(ConnectionError):  # no login on a SASL listener: closed before the markers
            asyncio.run(send_markers(node, markers))
    finally:
        found.broker.kill()



def _jwks_server(folder: Path, key: Any) -> tuple[Any, str]:
    """An HTTP server on 127.0.0.1 serving a JWKS with `key`'s public half as kid "k1"."""
    import functools
    import http.server
    import json
    import threading

    from jwt.algorithms import RSAAlgorithm

    (folder / "jwks.json").write_text(json.dumps({"keys": [
        json.loads(RSAAlgorithm.to_jwk(key.public_key())) | {"kid": "k1", "use": "sig"}]}))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/jwks.json"


def test_oauthbearer_tokens_signed_by_a_jwks_key_authenticate(tmp_path: Path) -> None:
    """confluent-kafka's token callback hands the broker JWTs; the broker checks them against a
    JWKS URL, the issuer and the audience; a token of another signer, an expired one and an
    unsigned one (alg none) are refused."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    signer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp_path / "web").mkdir()
    server, url = _jwks_server(tmp_path / "web", signer)
    found = start_secured(tmp_path, 'enabled_mechanisms = ["SCRAM-SHA-512", "OAUTHBEARER"]\n'
                             f'oauthbearer_jwks = "{url}"\noauthbearer_expected_issuer = "https://idp.test"\n'
                             'oauthbearer_expected_audience = ["martlet"]')
    try:
        def token(key: Any, algorithm: str = "RS256", lifetime_s: int = 300) -> tuple[str, float]:
            expiry = int(time.time()) + lifetime_s
            claims = {"sub": "svc-orders", "iss": "https://idp.test", "aud": "martlet", "exp": expiry}
            # the client is told the token lasts a minute at least: librdkafka refuses to hand on one it knows expired
            return jwt.encode(claims, key, algorithm=algorithm, headers={"kid": "k1"}), max(expiry, time.time() + 60)

        def settings(made: tuple[str, float]) -> dict[str, Any]:
            return {"bootstrap.servers": found.addresses["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda _config: made}

        topic = _topic(found, "oauth")
        producer = Producer(settings(token(signer)))
        for index in range(10):
            producer.produce(topic, f"o{index}".encode())
        assert producer.flush(WAIT_S) == 0
        assert _consume(settings(token(signer)), topic, 10) == [f"o{index}".encode() for index in range(10)]
        from martlet.client.simple_consumer import SimpleConsumer
        from martlet.protocol.sasl_client import Login

        bearer = Login("OAUTHBEARER", token=lambda: token(signer)[0])  # the native SDK, a token per connection
        with SimpleConsumer(found.addresses["SASL_PLAINTEXT"], topic, 0, sasl=bearer) as native:
            assert [message.value for message in native.fetch(0, timeout_s=5.0)][:10] == [
                f"o{index}".encode() for index in range(10)]
        stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        refused = {"another signer": token(stranger), "expired": token(signer, lifetime_s=-3600),
                   "unsigned": token(None, "none")}
        for why, made in refused.items():
            errors: list[KafkaError] = []
            client = Producer(settings(made) | {"error_cb": errors.append, "log_level": 0})
            deadline = time.monotonic() + WAIT_S
            while not errors and time.monotonic() < deadline:
                client.poll(0.2)
            assert errors and errors[0].code() == KafkaError._AUTHENTICATION, (why, errors)
        log = found.broker.log_tail(400)
        assert "Signature verification failed" in log and "expired" in log and "algorithm 'none'" in log
        assert refused["expired"][0] not in log  # tokens are never logged
    finally:
        found.broker.kill()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_the_native_sdk_authenticates_over_sasl_ssl(secured: Secured, mechanism: str) -> None:
    import ssl

    from martlet.client.admin import Admin
    from martlet.client.consumer import Consumer as NativeConsumer
    from martlet.client.errors import BrokerError
    from martlet.client.producer import Producer as NativeProducer
    from martlet.client.producer import ProducerConfig
    from martlet.client.simple_consumer import SimpleConsumer
    from martlet.protocol.sasl_client import Login

    context = ssl.create_default_context(cafile=str(secured.certs / "ca.pem"))
    bootstrap = secured.addresses["SASL_SSL"]
    login = Login(mechanism, "alice", PASSWORD)
    topic = f"native-sasl-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap, tls=context, sasl=login) as admin:
        layout = admin.create_topic(topic, 2)
        assert {p.leader_port for p in layout.partitions} == {int(bootstrap.rsplit(":", 1)[1])}
    with NativeProducer(bootstrap, topic, ProducerConfig(tls=context, sasl=login)) as producer:
        for index in range(20):
            producer.send(f"n{index}".encode(), f"k{index}".encode())
        producer.wait_persisted(WAIT_S)
    with SimpleConsumer(bootstrap, topic, 0, tls=context, sasl=login) as simple:
        first = simple.fetch(0, timeout_s=5.0)
    consumer = NativeConsumer(bootstrap, f"{topic}-group", [topic], tls=context, sasl=login)
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 20 and time.monotonic() < deadline:
            got += [message.value for message in consumer.poll(1.0)]
    finally:
        consumer.close()
    assert sorted(got) == sorted(f"n{index}".encode() for index in range(20))
    assert first and all(message.value in got for message in first)
    with pytest.raises(BrokerError, match="SASL_AUTHENTICATION_FAILED"), \
            Admin(bootstrap, tls=context, sasl=login._replace(password="wrong"), timeout_s=5.0) as refused:
        refused.create_topic(f"{topic}-no", 1)


def _refused(address: str, *frames: bytes, then_leave: bool = False) -> None:
    """Send raw bytes (then end the sending side when `then_leave`); the broker must close the
    connection (after answering or not)."""
    import socket

    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        for frame in frames:
            try:
                sock.sendall(frame)
            except OSError:
                break  # closed already
        if then_leave:
            sock.shutdown(socket.SHUT_WR)
        assert is_closed(sock, WAIT_S)


def _framed(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def _bad_frames(address: str) -> None:
    import random

    from martlet.protocol.codec import encode_request

    rng = random.Random(39)
    handshake_v1 = encode_request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1, "fuzz")
    _refused(address, (600_000).to_bytes(4, "big") + b"x" * 1000)  # above 512 KB before authentication
    _refused(address, (-5).to_bytes(4, "big", signed=True))
    _refused(address, handshake_v1[:7], then_leave=True)  # cut short, and the peer goes away
    _refused(address, encode_request(SaslHandshakeRequest(mechanism="GSSAPI"), 1, "fuzz"))
    for _ in range(40):
        garbage = rng.randbytes(rng.randrange(0, 300))
        _refused(address, _framed(garbage))
        _refused(address, handshake_v1, encode_request(SaslAuthenticateRequest(auth_bytes=garbage), 2, "fuzz"))
        _refused(address, handshake_v1, _framed(garbage))
    oauth = encode_request(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1, "fuzz")
    _refused(address, oauth, encode_request(SaslAuthenticateRequest(auth_bytes=b"n,,\x01auth=Bearer"), 2, "fuzz"))


def _replayed_scram(address: str) -> None:
    """A SCRAM final message replayed on a new connection (a new server nonce) fails."""
    from martlet.protocol.scram import ClientExchange

    with RawClient(address) as client:
        exchange = ClientExchange("SCRAM-SHA-256", "alice", PASSWORD)
        assert handshake(client, "SCRAM-SHA-256").error_code == 0
        first = client.request(SaslAuthenticateRequest(auth_bytes=exchange.first()))
        final_message = exchange.final(first.auth_bytes)
        assert client.request(SaslAuthenticateRequest(auth_bytes=final_message)).error_code == 0
    with RawClient(address) as client:
        assert handshake(client, "SCRAM-SHA-256").error_code == 0
        assert client.request(SaslAuthenticateRequest(auth_bytes=exchange.first())).error_code == 0
        assert client.request(SaslAuthenticateRequest(auth_bytes=final_message)).error_code == AUTHENTICATION_FAILED


def _bad_tokens(address: str, signer: Any) -> list[str]:
    """Malformed, unsigned, HMAC-signed and expired JWTs are refused; the tokens sent."""
    import jwt

    now = int(time.time())
    tokens = ["", "a.b.c", "x" * 5000, jwt.encode({"sub": "alice", "exp": now + 60}, None, algorithm="none"),
              jwt.encode({"sub": "alice", "exp": now + 60}, b"k" * 32, algorithm="HS256", headers={"kid": "k1"}),
              jwt.encode({"sub": "alice", "exp": now - 60}, signer, algorithm="RS256", headers={"kid": "k1"})]
    for token in tokens:
        with RawClient(address) as client:
            assert handshake(client, "OAUTHBEARER").error_code == 0
            message = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
            assert client.request(SaslAuthenticateRequest(auth_bytes=message)).error_code == AUTHENTICATION_FAILED
    return tokens


def test_bad_sasl_input_closes_the_connection_and_harms_nothing(tmp_path: Path) -> None:
    """Point 7: truncated and oversized frames, garbage at every step of the exchange, a
    mechanism not served, a replayed SCRAM final message, malformed and unsigned JWTs: each
    connection is refused or closed, the broker goes on serving, and its log holds no secret."""
    import json

    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    signer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [json.loads(RSAAlgorithm.to_jwk(signer.public_key())) | {"kid": "k1"}]}))
    found = start_secured(tmp_path, 'enabled_mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]\n'
                                    f'oauthbearer_jwks = "{jwks}"')
    try:
        add_user(found.local, "alice", PASSWORD)
        address = found.addresses["SASL_PLAINTEXT"]
        _bad_frames(address)
        _replayed_scram(address)
        tokens = _bad_tokens(address, signer)
        topic = _topic(found, "after-fuzz")  # the broker is unharmed: a client goes on
        producer = Producer(found.settings("SASL_PLAINTEXT", "SCRAM-SHA-512"))
        producer.produce(topic, b"still here")
        assert producer.flush(WAIT_S) == 0
        log = found.broker.log_tail(200_000)
        assert PASSWORD not in log and tokens[-1] not in log and "Traceback" not in log
    finally:
        found.broker.kill()


@pytest.mark.java
def test_the_java_client_logs_in_with_kafkas_unsecured_oauthbearer_tokens(kafka_tool: Any, tmp_path: Path) -> None:
    """Development mode: the Java client's default OAUTHBEARER login makes unsigned tokens
    (alg none), which a broker with oauthbearer_unsecured accepts, as Kafka's unsecured
    validator does; the console tools produce and consume as the token's subject."""
    found = start_secured(tmp_path, 'enabled_mechanisms = ["OAUTHBEARER"]\noauthbearer_unsecured = true')
    try:
        properties = tmp_path / "oauth.properties"
        properties.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
            "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="svc-java";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={found.certs / 'ca.pem'}\n")
        topic = _topic(found, "oauth-java")
        address = found.addresses["SASL_SSL"]

        def run_ok(tool: str, args: list[str], data: bytes | None = None) -> str:
            result = kafka_tool(tool, ["--bootstrap-server", address, "--command-config", str(properties), *args],
                                120.0, input=data)
            assert result.returncode == 0, f"{tool}:\n{result.stdout.decode()}\n{result.stderr.decode()}"
            return str(result.stdout.decode())

        run_ok("console-producer", ["--topic", topic], b"one\ntwo\n")
        out = run_ok("console-consumer", ["--topic", topic, "--partition", "0", "--offset", "earliest",
                                          "--max-messages", "2", "--timeout-ms", "30000"])
        assert out.splitlines() == ["one", "two"]
    finally:
        found.broker.kill()
