"""Classic consumer groups with real clients: assignment, commits, restarts, the Java tools."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.fixtures.martlet import wait_until
from tests.integration.clients import confluent_create_topic, confluent_produce, make_records, unique_topic

pytestmark = pytest.mark.integration

GROUP_CONFIG = b"[groups]\ninitial_rebalance_delay_ms = 0\n"
WAIT_S = 60.0


@pytest.fixture
def broker(martlet_process, tmp_path):
    config = tmp_path / "martlet.toml"
    config.write_bytes(GROUP_CONFIG)
    return martlet_process(extra_args=["--config", str(config)])


def group_consumer(bootstrap: str, group: str, **extra: object) -> Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    conf.update(extra)
    return Consumer(conf)


def poll_until(consumers: list[Consumer], done, timeout_s: float = WAIT_S) -> dict[int, list]:
    """Poll every consumer round-robin until `done(seen)` or the deadline; seen maps the
    consumer's index to the messages it received."""
    seen: dict[int, list] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + timeout_s
    while not done(seen) and time.monotonic() < deadline:
        for i, consumer in enumerate(consumers):
            for message in consumer.consume(500, 0.2):
                assert message.error() is None, message.error()
                seen[i].append(message)
    return seen


def test_two_members_split_partitions_and_commits_survive_restart(broker):
    topic, group = unique_topic("grp"), unique_topic("g")
    confluent_create_topic(broker.bootstrap, topic, 6)
    confluent_produce(broker.bootstrap, topic, make_records(600, codecs=["none"]))
    members = [group_consumer(broker.bootstrap, group) for _ in range(2)]
    try:
        for consumer in members:
            consumer.subscribe([topic])
        def distinct(seen):  # the first member may read some partitions again after the rebalance
            return {(m.partition(), m.offset()) for messages in seen.values() for m in messages}

        def positioned(seen):  # each member's position is at the end of each partition it owns
            return all(len(c.assignment()) == 3 for c in members) and sum(
                max(tp.offset, 0) for c in members for tp in c.position(c.assignment())) == 600

        # Commit only then: a member given partitions in the last rebalance has no position
        # on them until it reads again (nothing would be committed for them: a race seen in CI).
        seen = poll_until(members, lambda s: len(distinct(s)) >= 600 and positioned(s))
        owned = [{tp.partition for tp in c.assignment()} for c in members]
        assert owned[0].isdisjoint(owned[1]) and owned[0] | owned[1] == set(range(6))
        assert len(distinct(seen)) == 600
        for consumer in members:
            consumer.commit(asynchronous=False)
    finally:
        for consumer in members:
            consumer.close()
    broker.restart()
    resumed = group_consumer(broker.bootstrap, group)
    try:
        committed = resumed.committed([TopicPartition(topic, p) for p in range(6)], timeout=10)
        assert sum(tp.offset for tp in committed) == 600
    finally:
        resumed.close()


def test_a_leaving_member_hands_its_partitions_to_the_survivor(broker):
    topic, group = unique_topic("grp"), unique_topic("g")
    confluent_create_topic(broker.bootstrap, topic, 4)
    first, second = group_consumer(broker.bootstrap, group), group_consumer(broker.bootstrap, group)
    try:
        first.subscribe([topic])
        second.subscribe([topic])
        poll_until([first, second], lambda _s: len(first.assignment()) == 2 and len(second.assignment()) == 2)
        assert len(first.assignment()) == 2 and len(second.assignment()) == 2
        second.close()  # sends LeaveGroup
        assert wait_until(lambda: (first.consume(10, 0.2) or True) and len(first.assignment()) == 4, WAIT_S)
    finally:
        first.close()


def test_java_consumer_perf_test_and_consumer_groups_describe(broker, kafka_tool):
    topic, group = unique_topic("grp"), unique_topic("g")
    confluent_create_topic(broker.bootstrap, topic, 3)
    confluent_produce(broker.bootstrap, topic, make_records(3000, codecs=["lz4"]))
    result = kafka_tool("consumer-perf-test", ["--bootstrap-server", broker.bootstrap, "--topic", topic,
                                               "--num-records", "3000", "--group", group, "--timeout", "30000"], 120)
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().strip().splitlines()
    assert lines[-1].split(", ")[4] == "3000"  # data.consumed.in.nMsg
    described = kafka_tool("consumer-groups", ["--bootstrap-server", broker.bootstrap, "--describe",
                                               "--group", group], 120)
    assert described.returncode == 0, described.stderr.decode()
    rows = [line.split() for line in described.stdout.decode().splitlines() if line.startswith(group)]
    assert len(rows) == 3 and all(row[1] == topic for row in rows)
    listed = kafka_tool("consumer-groups", ["--bootstrap-server", broker.bootstrap, "--list"], 120)
    assert group in listed.stdout.decode().split()
