"""TLS on Martlet and on the reference Apache Kafka configured the same way (issue 39): an SSL
listener with the certificates `martlet certs create` makes, client certificates required.
The same clients meet both: librdkafka with and without a client certificate, a plaintext
client on the TLS port, and Metadata naming the SSL listener's address."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from martlet.compat.reference.kafka import ReferenceKafka
from martlet.compat.reference.process import free_ports
from tests.integration.raw_client import encode_request, is_closed
from tests.support.tls import listener_addresses, make_certs, pem_one_line, ssl_config

pytestmark = [pytest.mark.integration, pytest.mark.java]

WAIT_S = 30.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(tmp_path_factory.mktemp("certs"))


class SslReferenceKafka(ReferenceKafka):
    """The reference Kafka with an SSL listener (client certificates required) beside its PLAINTEXT one."""

    def __init__(self, certs: Path, ssl_port: int) -> None:
        super().__init__()
        self.certs, self.ssl_port = certs, ssl_port

    def server_properties(self) -> dict[str, str]:
        props = super().server_properties()
        broker, controller = f"127.0.0.1:{self.port}", f"127.0.0.1:{self.controller_port}"
        props.update({
            "listeners": f"PLAINTEXT://{broker},CONTROLLER://{controller},SSL://localhost:{self.ssl_port}",
            "advertised.listeners": f"PLAINTEXT://{broker},SSL://localhost:{self.ssl_port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": pem_one_line(self.certs / "broker.pem"),
            "ssl.keystore.key": pem_one_line(self.certs / "broker.key"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.certs / "ca.pem"),
            "ssl.client.auth": "required",
        })
        return props


@pytest.fixture(scope="module")
def kafka_ssl(certs: Path) -> Iterator[str]:
    """The reference Kafka's SSL listener, "localhost:port"."""
    (port,) = free_ports(1)
    kafka = SslReferenceKafka(certs, port)
    kafka.start()
    try:
        yield f"localhost:{port}"
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def martlet_ssl(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.fixtures.martlet import MartletProcess

    folder = tmp_path_factory.mktemp("martlet-ssl")
    config = folder / "tls.toml"
    config.write_text(ssl_config(certs, "required"))
    broker = MartletProcess(folder / "data", ["--config", str(config)], "off", listen=False)
    broker.start()
    try:
        yield f"localhost:{listener_addresses(broker)['SSL'].rsplit(':', 1)[1]}"
    finally:
        broker.kill()


def _brokers(bootstrap: str, certs: Path, with_certificate: bool) -> list[str] | str:
    settings = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}
    if with_certificate:
        settings |= {"ssl.certificate.location": str(certs / "client.pem"), "ssl.key.location": str(certs / "client.key")}
    try:
        brokers = AdminClient(settings).list_topics(timeout=5).brokers
    except Exception as error:  # noqa: BLE001 - what each broker makes the client say is compared
        return type(error).__name__
    return [f"{node.host}:{node.port}" for node in brokers.values()]


@pytest.mark.parametrize("side", ["kafka", "martlet"])
def test_the_same_clients_meet_the_same_tls_on_both(side: str, request: pytest.FixtureRequest, certs: Path) -> None:
    bootstrap = request.getfixturevalue(f"{side}_ssl")
    assert _brokers(bootstrap, certs, with_certificate=True) == [bootstrap]  # the SSL listener's own address
    assert _brokers(bootstrap, certs, with_certificate=False) == "KafkaException"  # refused: no certificate
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:  # a plaintext Kafka client
        sock.sendall(encode_request(ApiVersionsRequest(client_software_name="raw", client_software_version="1"), 1))
        assert is_closed(sock, WAIT_S)
