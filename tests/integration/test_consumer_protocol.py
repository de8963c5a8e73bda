"""KIP-848 consumer groups (group.protocol=consumer) with real clients: librdkafka against
Martlet and, to prove the test itself, against the reference Kafka; the Java console consumer
and kafka-consumer-groups against Martlet."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.clients import confluent_create_topic, confluent_produce, make_records, unique_topic

pytestmark = pytest.mark.integration

GROUP_CONFIG = b"[groups]\ninitial_rebalance_delay_ms = 0\n"
WAIT_S = 60.0
PARTITIONS = 6
RECORDS = 600


@pytest.fixture(params=["martlet", "kafka"])
def bootstrap(request, martlet_process, tmp_path) -> str:
    if request.param == "kafka":
        return request.getfixturevalue("reference_kafka").bootstrap
    config = tmp_path / "martlet.toml"
    config.write_bytes(GROUP_CONFIG)
    return martlet_process(extra_args=["--config", str(config)]).bootstrap


@pytest.fixture
def martlet_broker(martlet_process, tmp_path):
    config = tmp_path / "martlet.toml"
    config.write_bytes(GROUP_CONFIG)
    return martlet_process(extra_args=["--config", str(config)])


def consumer_member(bootstrap: str, group: str) -> Consumer:
    # session.timeout.ms and heartbeat.interval.ms are the broker's business under KIP-848.
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})


def owned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


class Watch:
    """Polls members round-robin, recording messages, and checks after every poll that no
    partition is owned by two members at once."""

    def __init__(self, members: list[Consumer]) -> None:
        self.members = members
        self.seen: set[tuple[int, int]] = set()
        self.observations = 0

    def until(self, done, timeout_s: float = WAIT_S) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for member in self.members:
                for message in member.consume(500, 0.1):
                    assert message.error() is None, message.error()
                    self.seen.add((message.partition(), message.offset()))
                self.check_disjoint()
            if done():
                return True
        return done()

    def check_disjoint(self) -> None:
        self.observations += 1
        sets = [owned(m) for m in self.members]
        for i, first in enumerate(sets):
            for second in sets[i + 1:]:
                assert first.isdisjoint(second), sets


def test_librdkafka_members_split_commit_and_hand_over(bootstrap):
    topic, group = unique_topic("kip848"), unique_topic("g848")
    confluent_create_topic(bootstrap, topic, PARTITIONS)
    confluent_produce(bootstrap, topic, make_records(RECORDS, codecs=["none"]))
    first, second = consumer_member(bootstrap, group), consumer_member(bootstrap, group)
    closed: list[Consumer] = []
    try:
        first.subscribe([topic])
        alone = Watch([first])
        assert alone.until(lambda: owned(first) == set(range(PARTITIONS))), owned(first)
        second.subscribe([topic])
        both = Watch([first, second])
        split = both.until(lambda: len(owned(first)) == 3 and len(owned(second)) == 3
                           and len(alone.seen | both.seen) == RECORDS)
        assert split, (owned(first), owned(second), len(alone.seen | both.seen))
        assert owned(first) | owned(second) == set(range(PARTITIONS))
        assert both.observations > 2
        for member in (first, second):  # each commits the ends of its own partitions, at its epoch
            ends = [TopicPartition(topic, p, member.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
                    for p in sorted(owned(member))]
            member.commit(offsets=ends, asynchronous=False)
        committed = first.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        assert sum(tp.offset for tp in committed) == RECORDS
        second.close()  # leaves with member epoch -1
        closed.append(second)
        assert Watch([first]).until(lambda: owned(first) == set(range(PARTITIONS))), owned(first)
    finally:
        for member in (first, second):
            if member not in closed:
                member.close()


@pytest.mark.java
def test_java_console_consumer_and_consumer_groups_describe(martlet_broker, kafka_tool):
    bootstrap = martlet_broker.bootstrap
    topic, group = unique_topic("kip848j"), unique_topic("g848j")
    confluent_create_topic(bootstrap, topic, 3)
    confluent_produce(bootstrap, topic, make_records(300, codecs=["none"]))
    member = consumer_member(bootstrap, group)  # an active librdkafka member for --describe
    try:
        member.subscribe([topic])
        assert Watch([member]).until(lambda: len(owned(member)) == 3)
        described = kafka_tool("consumer-groups", ["--bootstrap-server", bootstrap, "--describe",
                                                   "--group", group], 120)
        assert described.returncode == 0, described.stderr.decode()
        rows = [line.split() for line in described.stdout.decode().splitlines() if line.startswith(group)]
        assert sorted(int(row[2]) for row in rows) == [0, 1, 2] and all(row[1] == topic for row in rows), rows
        assert all(row[6] != "-" for row in rows), rows  # CONSUMER-ID: every partition has its owner
        listed = kafka_tool("consumer-groups", ["--bootstrap-server", bootstrap, "--list"], 120)
        assert group in listed.stdout.decode().split()
    finally:
        member.close()
    java_group = unique_topic("g848java")
    result = kafka_tool("console-consumer", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--group", java_group,
        "--consumer-property", "group.protocol=consumer", "--from-beginning",
        "--max-messages", "300", "--timeout-ms", "60000"], 120)
    assert result.returncode == 0, result.stderr.decode()
    assert "Processed a total of 300 messages" in result.stderr.decode(errors="replace")
    described = kafka_tool("consumer-groups", ["--bootstrap-server", bootstrap, "--describe",
                                               "--group", java_group], 120)
    assert described.returncode == 0, described.stderr.decode()
    rows = [line.split() for line in described.stdout.decode().splitlines() if line.startswith(java_group)]
    assert sorted(int(row[2]) for row in rows) == [0, 1, 2], described.stdout.decode()
    assert sum(int(row[3]) for row in rows) == 300  # CURRENT-OFFSET: the console consumer committed
