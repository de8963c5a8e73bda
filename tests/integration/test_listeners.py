"""Several listeners on one broker, as Kafka names them (issue 39): each answers Metadata and
FindCoordinator with its own advertised address, so a client stays on the listener it came in
on; DescribeConfigs lists them; clients work through either."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.support.tls import listener_addresses

pytestmark = pytest.mark.integration

WAIT_S = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _brokers(bootstrap: str) -> dict[int, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {node.id: f"{node.host}:{node.port}" for node in admin.list_topics(timeout=WAIT_S).brokers.values()}


def test_each_listener_answers_with_its_own_address_and_clients_work_through_either(martlet_process: Any,
                                                                                     tmp_path: Any) -> None:
    client_port = _free_port()
    config = tmp_path / "listeners.toml"
    config.write_text(f"""[gateway]
listeners = ["CLIENT://127.0.0.1:{client_port}", "LOCAL://127.0.0.1:0"]
listener_security_protocol_map = "CLIENT:PLAINTEXT,LOCAL:PLAINTEXT"
advertised_listeners = ["CLIENT://localhost:{client_port}"]
inter_broker_listener_name = "LOCAL"
""")
    broker = martlet_process(extra_args=["--config", str(config)], http="off", listen=False)
    assert broker.bootstrap == f"127.0.0.1:{client_port}"  # the first listener's line
    lines = listener_addresses(broker)
    assert lines["CLIENT"] == f"127.0.0.1:{client_port}"
    local = lines["LOCAL"]

    via_client, via_local = _brokers(broker.bootstrap), _brokers(local)
    [node_id] = via_client
    assert via_client == {node_id: f"localhost:{client_port}"}  # its advertised address
    assert via_local == {node_id: local}  # where it listens: nothing advertised for LOCAL

    admin = AdminClient({"bootstrap.servers": f"localhost:{client_port}"})
    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, str(node_id))])
    [described] = [future.result(WAIT_S) for future in configs.values()]
    assert described["listeners"].value == f"CLIENT://127.0.0.1:{client_port},LOCAL://{local}"
    assert described["advertised.listeners"].value == f"CLIENT://localhost:{client_port},LOCAL://{local}"

    topic = f"listeners-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1)])[topic].result(WAIT_S)
    producer = Producer({"bootstrap.servers": local})
    for index in range(10):
        producer.produce(topic, f"r{index}".encode())
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer({"bootstrap.servers": f"localhost:{client_port}", "group.id": topic,
                         "auto.offset.reset": "earliest"})  # its coordinator is found through CLIENT
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) == 10:
                break
        assert values == [f"r{index}".encode() for index in range(10)]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
