"""TLS on a listener (issue 39): Kafka clients produce and consume over SSL with a CA made by
`martlet certs create`; a listener that requires client certificates refuses a client without
one; a certificate replaced on disk serves new connections without a restart; a plaintext
client on the TLS port, and a TLS client on the plaintext one, each fail at once with a log
line while the broker goes on serving."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from tests.integration.raw_client import RawClient, encode_request, is_closed
from tests.support.tls import listener_addresses, make_certs, pem_one_line, ssl_config

pytestmark = pytest.mark.integration

WAIT_S = 30.0


def _start(martlet_process: Any, tmp_path: Path, certs: Path, client_auth: str = "none",
           more: str = "") -> tuple[Any, str, str]:
    """A broker with an SSL listener (first) and a PLAINTEXT one; (broker, ssl address, plain address)."""
    config = tmp_path / "tls.toml"
    config.write_text(ssl_config(certs, client_auth, more))
    broker = martlet_process(extra_args=["--config", str(config)], http="off", listen=False)
    addresses = listener_addresses(broker)
    return broker, addresses["SSL"], addresses["PLAINTEXT"]


def _tls_client(address: str, ca: Path, certificate: tuple[Path, Path] | None = None) -> RawClient:
    context = ssl.create_default_context(cafile=str(ca))
    if certificate is not None:
        context.load_cert_chain(*certificate)
    client = RawClient(address)
    client.sock = context.wrap_socket(client.sock, server_hostname="localhost")
    return client


def test_kafka_clients_produce_and_consume_over_tls(martlet_process: Any, tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    broker, secured, _ = _start(martlet_process, tmp_path, certs)
    settings = {"bootstrap.servers": secured, "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}
    admin = AdminClient(settings)
    brokers = admin.list_topics(timeout=WAIT_S).brokers
    port = secured.rsplit(":", 1)[1]
    assert [f"{node.host}:{node.port}" for node in brokers.values()] == [f"localhost:{port}"]  # the SSL listener's
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1)])[topic].result(WAIT_S)
    producer = Producer(settings)
    for index in range(100):
        producer.produce(topic, f"r{index}".encode())
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer(settings | {"group.id": topic, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < 100 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values == [f"r{index}".encode() for index in range(100)]
    finally:
        consumer.close()


def test_the_wrong_protocol_on_either_port_fails_at_once_and_the_broker_goes_on(martlet_process: Any,
                                                                               tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    broker, secured, plain = _start(martlet_process, tmp_path, certs)
    host, port = secured.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:  # a plaintext Kafka request
        sock.sendall(encode_request(ApiVersionsRequest(client_software_name="raw", client_software_version="1"), 1))
        assert is_closed(sock, WAIT_S)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):  # a TLS client on the plaintext listener
        _tls_client(plain, certs / "ca.pem").request(ApiVersionsRequest(client_software_name="raw",
                                                                        client_software_version="1"))
    with _tls_client(secured, certs / "ca.pem") as client:  # unharmed
        assert client.request(ApiVersionsRequest(client_software_name="raw", client_software_version="1")).error_code == 0
    deadline = time.monotonic() + WAIT_S
    expected = ("TLS handshake with /127.0.0.1 on listener SSL failed: WRONG_VERSION_NUMBER (no TLS client",
                "it began a TLS handshake: a TLS client on a plaintext listener")
    while not all(line in broker.log_tail(200) for line in expected):
        assert time.monotonic() < deadline, broker.log_tail()
        time.sleep(0.05)


def test_a_listener_that_requires_client_certificates_refuses_a_client_without_one(martlet_process: Any,
                                                                                   tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    broker, secured, _ = _start(martlet_process, tmp_path, certs, client_auth="required")
    request = ApiVersionsRequest(client_software_name="raw", client_software_version="1")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        with _tls_client(secured, certs / "ca.pem") as client:
            client.request(request)  # TLS 1.3: the refusal arrives after the handshake, at the first read
    with _tls_client(secured, certs / "ca.pem", (certs / "client.pem", certs / "client.key")) as client:
        assert client.request(request).error_code == 0
    consumer = AdminClient({"bootstrap.servers": secured, "security.protocol": "SSL",
                            "ssl.ca.location": str(certs / "ca.pem"),
                            "ssl.certificate.location": str(certs / "client.pem"),
                            "ssl.key.location": str(certs / "client.key")})
    assert consumer.list_topics(timeout=WAIT_S).brokers


def test_a_certificate_replaced_on_disk_serves_new_connections_without_a_restart(martlet_process: Any,
                                                                                tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    broker, secured, _ = _start(martlet_process, tmp_path, certs)
    request = ApiVersionsRequest(client_software_name="raw", client_software_version="1")
    with _tls_client(secured, certs / "ca.pem") as client:
        assert client.request(request).error_code == 0
    renewed = make_certs(tmp_path / "renewed")  # another CA: a client trusting only it tells the two apart
    for name in ("broker.key", "broker.pem"):
        shutil.copy(renewed / name, certs / f"{name}.new")
    for name in ("broker.key", "broker.pem"):
        (certs / f"{name}.new").replace(certs / name)
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            with _tls_client(secured, renewed / "ca.pem") as client:
                assert client.request(request).error_code == 0
            break
        except ssl.SSLCertVerificationError:
            assert time.monotonic() < deadline, "the new certificate was not used"
            time.sleep(0.1)
    with pytest.raises(ssl.SSLCertVerificationError):
        _tls_client(secured, certs / "ca.pem")
    with pytest.raises(KafkaException):  # and not a hang: librdkafka too refuses the old CA now
        AdminClient({"bootstrap.servers": secured, "security.protocol": "SSL",
                     "ssl.ca.location": str(certs / "ca.pem")}).list_topics(timeout=5)


async def _through_aiokafka(bootstrap: str, topic: str, context: ssl.SSLContext, count: int) -> list[bytes]:
    """Send five records with aiokafka, then read the topic from its start until `count` arrived."""
    sender = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context)
    await sender.start()
    try:
        for index in range(5):
            await sender.send_and_wait(topic, f"a{index}".encode())
    finally:
        await sender.stop()
    reader = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context,
                              auto_offset_reset="earliest")
    await reader.start()
    got: list[bytes] = []
    try:
        async with asyncio.timeout(WAIT_S):
            async for message in reader:
                got.append(message.value)
                if len(got) == count:
                    break
    finally:
        await reader.stop()
    return got


def test_kafka_python_and_aiokafka_produce_and_consume_over_tls(martlet_process: Any, tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    broker, secured, _ = _start(martlet_process, tmp_path, certs, client_auth="required")
    ca, certificate, key = str(certs / "ca.pem"), str(certs / "client.pem"), str(certs / "client.key")
    topic = f"tls-py-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": secured, "security.protocol": "SSL", "ssl.ca.location": ca,
                         "ssl.certificate.location": certificate, "ssl.key.location": key})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(WAIT_S)
    producer = KafkaProducer(bootstrap_servers=secured, security_protocol="SSL", ssl_cafile=ca,
                             ssl_certfile=certificate, ssl_keyfile=key)
    for index in range(5):
        producer.send(topic, f"k{index}".encode())
    producer.flush(WAIT_S)
    producer.close()
    expected = [f"k{index}".encode() for index in range(5)] + [f"a{index}".encode() for index in range(5)]
    context = create_ssl_context(cafile=ca, certfile=certificate, keyfile=key)
    assert asyncio.run(_through_aiokafka(secured, topic, context, len(expected))) == expected
    consumer = KafkaConsumer(topic, bootstrap_servers=secured, security_protocol="SSL", ssl_cafile=ca,
                             ssl_certfile=certificate, ssl_keyfile=key, auto_offset_reset="earliest",
                             consumer_timeout_ms=int(WAIT_S * 1000))
    try:
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == len(expected):
                break
        assert got == expected
    finally:
        consumer.close()


@pytest.mark.java
def test_the_java_client_produces_and_consumes_over_tls_with_a_pem_truststore(martlet_process: Any, tmp_path: Path,
                                                                               kafka_tool: Any) -> None:
    """Kafka's console tools (the Java client 4.4) with PEM files, verifying the host name."""
    certs = make_certs(tmp_path / "certs")
    broker, secured, _ = _start(martlet_process, tmp_path, certs, client_auth="required")
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                          f"ssl.truststore.location={certs / 'ca.pem'}\n"
                          "ssl.keystore.type=PEM\n"
                          f"ssl.keystore.certificate.chain={pem_one_line(certs / 'client.pem')}\n"
                          f"ssl.keystore.key={pem_one_line(certs / 'client.key')}\n")
    topic = f"tls-java-{uuid.uuid4().hex[:8]}"

    def run_ok(tool: str, args: list[str], data: bytes | None = None) -> str:
        result = kafka_tool(tool, ["--bootstrap-server", secured, *args], 120.0, input=data)
        assert result.returncode == 0, f"{tool}:\n{result.stdout.decode()}\n{result.stderr.decode()}"
        return str(result.stdout.decode())

    run_ok("topics", ["--command-config", str(properties), "--create", "--topic", topic, "--partitions", "1"])
    lines = [f"line{index}" for index in range(20)]
    run_ok("console-producer", ["--command-config", str(properties), "--topic", topic],
           "\n".join(lines).encode() + b"\n")
    out = run_ok("console-consumer", ["--command-config", str(properties), "--topic", topic, "--partition", "0",
                                      "--offset", "earliest", "--max-messages", "20", "--timeout-ms", "30000"])
    assert out.splitlines() == lines


def test_a_broker_calls_another_on_an_ssl_inter_broker_listener_with_its_own_certificate(martlet_process: Any,
                                                                                         tmp_path: Path) -> None:
    """What a broker sends another (transaction markers) goes over TLS when the inter-broker
    listener is an SSL one, showing the caller's certificate where one is required."""
    from martlet.engine.api import NodeIdentity, RemoteMarkers, TopicPartition
    from martlet.gateway.peers import send_markers
    from martlet.gateway.tls import TlsSettings, client_context

    certs = make_certs(tmp_path / "certs")
    broker, secured, _ = _start(martlet_process, tmp_path, certs, client_auth="required")
    topic = f"tls-peer-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": secured, "security.protocol": "SSL",
                         "ssl.ca.location": str(certs / "ca.pem"), "ssl.certificate.location": str(certs / "client.pem"),
                         "ssl.key.location": str(certs / "client.key")})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(WAIT_S)
    context = client_context(TlsSettings(str(certs / "broker.pem"), str(certs / "broker.key"), ca=str(certs / "ca.pem")))
    port = int(secured.rsplit(":", 1)[1])
    markers = RemoteMarkers(producer_id=4242, epoch=0, commit=False, partitions=(TopicPartition(topic, 0),), shards=())
    assert asyncio.run(send_markers(NodeIdentity(1, "localhost", port), markers, context)) == []  # marked
    with pytest.raises(ssl.SSLError):  # a caller that trusts another CA does not call it
        asyncio.run(send_markers(NodeIdentity(1, "localhost", port), markers,
                                 ssl.create_default_context(cafile=str(make_certs(tmp_path / "other") / "ca.pem"))))


def test_the_native_sdk_writes_and_reads_over_tls(martlet_process: Any, tmp_path: Path) -> None:
    from martlet.client.admin import Admin
    from martlet.client.consumer import Consumer as NativeConsumer
    from martlet.client.producer import Producer as NativeProducer
    from martlet.client.producer import ProducerConfig
    from martlet.client.simple_consumer import SimpleConsumer

    certs = make_certs(tmp_path / "certs")
    broker, secured, _ = _start(martlet_process, tmp_path, certs, client_auth="required")
    context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    context.load_cert_chain(certs / "client.pem", certs / "client.key")
    port = int(secured.rsplit(":", 1)[1])
    bootstrap = f"localhost:{port}"
    with Admin(bootstrap, tls=context) as admin:
        layout = admin.create_topic("native-tls", 2)
        assert {(p.leader_host, p.leader_port) for p in layout.partitions} == {("localhost", port)}  # the SSL one
    with NativeProducer(bootstrap, "native-tls", ProducerConfig(tls=context)) as producer:
        for index in range(50):
            producer.send(f"n{index}".encode(), f"k{index}".encode())
        producer.wait_persisted(WAIT_S)
    with SimpleConsumer(bootstrap, "native-tls", 0, tls=context) as simple:
        first = simple.fetch(0, timeout_s=5.0)
    consumer = NativeConsumer(bootstrap, "native-tls-group", ["native-tls"], tls=context)
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 50 and time.monotonic() < deadline:
            got += [message.value for message in consumer.poll(1.0)]
    finally:
        consumer.close()
    assert sorted(got) == sorted(f"n{index}".encode() for index in range(50))
    assert first and all(message.value in got for message in first)


def test_a_client_certificate_no_principal_mapping_rule_maps_is_refused(martlet_process: Any, tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    broker, secured, _ = _start(martlet_process, tmp_path, certs, client_auth="required",
                                more='principal_mapping_rules = "RULE:^CN=admin$/$0/"')
    with _tls_client(secured, certs / "ca.pem", (certs / "client.pem", certs / "client.key")) as client:
        try:  # CN=client: no rule maps it, so no principal
            closed = is_closed(client.sock, WAIT_S)
        except ssl.SSLError:  # the close seen by TLS before the socket (no close_notify: an abort)
            closed = True
        assert closed
    deadline = time.monotonic() + WAIT_S
    while "no ssl.principal.mapping.rules rule maps 'CN=client'" not in broker.log_tail(200):
        assert time.monotonic() < deadline, broker.log_tail()
        time.sleep(0.05)


def test_broken_tls_handshakes_close_their_connections_and_the_broker_serves_on(martlet_process: Any,
                                                                                tmp_path: Path) -> None:
    """A ClientHello cut short, one followed by garbage, random bytes, an empty connection: each
    ends without harm to the next client."""
    import os

    certs = make_certs(tmp_path / "certs")
    broker, secured, _ = _start(martlet_process, tmp_path, certs)
    host, port = secured.rsplit(":", 1)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    hello_maker = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        hello_maker.do_handshake()
    hello = outgoing.read()  # a real ClientHello
    request = ApiVersionsRequest(client_software_name="raw", client_software_version="1")
    for sent in (hello[:20], hello + os.urandom(3000), os.urandom(65536), b""):
        with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
            sock.sendall(sent)
            if len(sent) > len(hello):  # whole records the broker can judge: it closes at once
                assert is_closed(sock, WAIT_S)
        with _tls_client(secured, certs / "ca.pem") as client:  # unharmed
            assert client.request(request).error_code == 0
    assert broker.proc is not None and broker.proc.poll() is None
