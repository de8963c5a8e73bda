"""What operators and Kafka clients do to a Martlet cluster (issue 11, point 4): topic changes
sent to any broker take effect on all of them, Kafka's own tools work against it, and a
consumer group outlives its coordinator. One three-broker cluster serves the whole module.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from martlet.compat.bench.failover import leaders, wait_for
from martlet.compat.reference.cluster import LocalCluster
from martlet.compat.reference.kafka import run_tool
from martlet.protocol.codec import build
from tests.integration.raw_client import RawClient

pytestmark = [pytest.mark.integration, pytest.mark.java]
TOOL_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def cluster(reference_zookeeper, reference_hdfs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    started = LocalCluster(brokers=3, admins=1, zookeeper=reference_zookeeper.address, hdfs_url=reference_hdfs.url,
                           workdir=tmp_path_factory.mktemp("cluster-operations")).start()
    try:
        yield started
    finally:
        started.stop(graceful=False)


def one(cluster: LocalCluster, index: int) -> str:
    """The bootstrap address of one broker only."""
    return f"127.0.0.1:{cluster.brokers[index].port}"


def partition_count(bootstrap: str, topic: str) -> int:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    found = metadata.topics.get(topic)
    return 0 if found is None or found.error is not None else len(found.partitions)


def test_topic_changes_through_any_broker_reach_every_broker(cluster: LocalCluster) -> None:
    topic = f"ddl-{uuid.uuid4().hex[:8]}"
    outcomes: list[str] = []

    def create(index: int) -> None:
        admin = AdminClient({"bootstrap.servers": one(cluster, index)})
        try:
            admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(60)
            outcomes.append("created")
        except KafkaException as error:
            outcomes.append(error.args[0].name())

    threads = [threading.Thread(target=create, args=(index,)) for index in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["TOPIC_ALREADY_EXISTS", "TOPIC_ALREADY_EXISTS", "created"], outcomes
    for index in range(3):
        wait_for(lambda: partition_count(one(cluster, index), topic) == 2, 30, f"broker {index} to see the topic")  # noqa: B023

    grower = AdminClient({"bootstrap.servers": one(cluster, 1)})
    grower.create_partitions([NewPartitions(topic, 5)])[topic].result(30)
    for index in range(3):
        wait_for(lambda: partition_count(one(cluster, index), topic) == 5, 30, f"broker {index} to see 5 partitions")  # noqa: B023
    wait_for(lambda: all(leader >= 0 for leader in leaders(cluster.bootstrap, topic).values()), 60,
             "the new partitions to be placed")

    retention = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[retention])
    alterer = AdminClient({"bootstrap.servers": one(cluster, 0)})  # held: a dropped client cancels its futures
    alterer.incremental_alter_configs([resource])[resource].result(30)

    def retention_seen_on_2() -> bool:
        describer = AdminClient({"bootstrap.servers": one(cluster, 2)})
        described = describer.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        entries = next(iter(described.values())).result(30)
        return entries["retention.ms"].value == "3600000"

    wait_for(retention_seen_on_2, 30, "broker 2 to see the new retention")

    deleter = AdminClient({"bootstrap.servers": one(cluster, 2)})
    deleter.delete_topics([topic])[topic].result(30)
    for index in range(3):
        wait_for(lambda: partition_count(one(cluster, index), topic) == 0, 30, f"broker {index} to forget the topic")  # noqa: B023


def test_kafka_tools_describe_and_reassign_across_the_cluster(cluster: LocalCluster, tmp_path: Path) -> None:
    topic = f"tools-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    for index in range(3):  # each broker learns the placement from ZooKeeper on its own
        wait_for(lambda: (led := leaders(one(cluster, index), topic)) and all(leader >= 0 for leader in led.values()),  # noqa: B023
                 60, f"broker {index} to know every leader")

    described = _tool("topics", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", topic)
    assert "ReplicationFactor: 3" in described, described
    assert described.count("Isr:") == 3, described

    versions = _tool("broker-api-versions", "--bootstrap-server", cluster.bootstrap)
    assert versions.count("(id:") == 3, versions  # every live broker answers for itself

    moving = f"{topic}-moving"  # one replica listed, as the plan names it
    admin.create_topics([NewTopic(moving, 1, 1)])[moving].result(30)
    wait_for(lambda: leaders(cluster.bootstrap, moving).get(0, -1) >= 0, 60, "a leader")
    before = leaders(cluster.bootstrap, moving)
    target = next(node for node in sorted(set(_node_ids(cluster))) if node != before[0])
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": moving, "partition": 0, "replicas": [target]}]}))
    _tool("reassign-partitions", "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan),
          "--execute")
    wait_for(lambda: leaders(cluster.bootstrap, moving).get(0) == target, 60, "the reassignment to move the partition")
    verified = _tool("reassign-partitions", "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file",
                     str(plan), "--verify")
    assert "is completed" in verified, verified


def test_a_group_survives_its_coordinators_death(cluster: LocalCluster) -> None:
    """The coordinator and committed offsets are read with FindCoordinator on a raw socket and
    with the consumer's own OffsetFetch: confluent-kafka's AdminClient can crash the process
    (a segfault, seen in CI) when DescribeGroups or ListConsumerGroupOffsets fail because the
    coordinator just died (confluent-kafka-python issue 1982, librdkafka issue 4605)."""
    topic = f"group-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    wait_for(lambda: all(leader >= 0 for leader in leaders(cluster.bootstrap, topic).values()), 60, "leaders")
    _produce(cluster.bootstrap, topic, 0, 300)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 10000})
    try:
        consumer.subscribe([topic])
        assert len(_consume(consumer, 300)) == 300
        consumer.commit(asynchronous=False)
        committed = _committed(consumer, topic)
        assert sum(committed.values()) == 300

        coordinator = _coordinator(cluster, group)
        index = _node_ids(cluster).index(coordinator)
        cluster.kill(index)
        survivor = next(i for i in range(len(cluster.brokers)) if i != index)
        wait_for(lambda: _coordinator(cluster, group, survivor) not in (coordinator, None),
                 60, "another broker to coordinate the group")
        assert _committed(consumer, topic) == committed  # committed offsets intact after the move

        _produce(cluster.bootstrap, topic, 300, 200)
        values = _consume(consumer, 200)
        assert sorted(values) == list(range(300, 500))  # the member resumes where it committed
        consumer.commit(asynchronous=False)
        assert sum(_committed(consumer, topic).values()) == 500
    finally:
        consumer.close()
        for process in cluster.brokers:  # leave the module's cluster whole
            if not process.alive:
                cluster.start_broker(process.index)


def _coordinator(cluster: LocalCluster, group: str, index: int = 0) -> int | None:
    """The group's coordinator as broker `index` names it (FindCoordinator v4), None while
    it names none."""
    body = {"key_type": 0, "coordinator_keys": [group]}
    with RawClient(one(cluster, index)) as client:
        [found] = client.request(build(load_request_schema(10, 4), body)).coordinators
    return int(found.node_id) if found.error_code == ErrorCode.none else None


def _tool(name: str, *args: str) -> str:
    done = run_tool(name, list(args), TOOL_TIMEOUT_S)
    output = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, output
    return output


def _node_ids(cluster: LocalCluster) -> list[int]:
    """Node ids by broker index."""
    brokers = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10).brokers
    by_port = {broker.port: node_id for node_id, broker in brokers.items()}
    return [by_port.get(process.port, -1) for process in cluster.brokers]


def _produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for value in range(first, first + count):
        producer.produce(topic, value=str(value).encode())
    assert producer.flush(60) == 0


def _consume(consumer: Consumer, count: int, timeout_s: float = 90.0) -> list[int]:
    values: list[int] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            values.append(int(message.value()))
    return values


def _committed(consumer: Consumer, topic: str) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch through the consumer's coordinator; asked
    again while the consumer still has the old coordinator and gets NOT_COORDINATOR)."""
    def fetch() -> dict[int, int] | None:
        try:
            found = consumer.committed([ConfluentPartition(topic, p) for p in range(3)], timeout=30)
        except KafkaException as error:
            if error.args[0].retriable() or error.args[0].code() == KafkaError.NOT_COORDINATOR:
                return None
            raise
        return {tp.partition: max(tp.offset, 0) for tp in found}  # -1001: nothing committed

    return wait_for(fetch, 60, "the committed offsets")


def test_the_java_client_rides_through_a_broker_death(cluster: LocalCluster) -> None:
    from martlet.compat.clients.java_driver import JavaDriver

    topic = f"java-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    wait_for(lambda: (led := leaders(cluster.bootstrap, topic)) and all(leader >= 0 for leader in led.values()),
             60, "leaders")
    now_ms = int(time.time() * 1000)

    def records(first: int) -> list[dict[str, object]]:
        return [{"key": f"k{i}", "value": f"v{i}", "headers": [], "timestamp": now_ms + i, "partition": i % 3}
                for i in range(first, first + 150)]

    victim = _node_ids(cluster).index(leaders(cluster.bootstrap, topic)[0])
    try:
        with JavaDriver(cluster.bootstrap) as java:
            assert {r["error"] for r in java.produce(topic, records(0), acks="all", idempotent=True)} == {"NONE"}
            cluster.kill(victim)  # the Java producer retries until partition 0 has moved
            assert {r["error"] for r in java.produce(topic, records(150), acks="all", idempotent=True)} == {"NONE"}
            consumed = java.consume(topic, None, "earliest", 300, 60.0)
        values = sorted(int(record["value"][1:]) for record in consumed)
        assert values == list(range(300))  # every record once
    finally:
        if not cluster.brokers[victim].alive:
            cluster.start_broker(victim)
