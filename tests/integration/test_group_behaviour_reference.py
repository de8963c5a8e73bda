"""Group behaviour clients notice, on Martlet and on the reference Kafka alike (librdkafka,
classic protocol): a pattern subscription picks up a topic created after it subscribed, and
a member that stops polling for longer than max.poll.interval.ms leaves, so the group
rebalances and another member takes its partitions."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.martlet import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.java]

WAIT_S = 60.0
POLL_INTERVAL_MS = 7000  # librdkafka's smallest useful value: above session.timeout.ms (6,000)


@pytest.fixture(params=["martlet", "kafka"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    fixture = "martlet" if request.param == "martlet" else "reference_kafka"
    return request.getfixturevalue(fixture).bootstrap


def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a collected client fails its futures
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, b"v%d" % i, partition=i % 2 if count > 1 else 0)
    assert producer.flush(30) == 0


def _consumer(bootstrap: str, group: str, **extra: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "topic.metadata.refresh.interval.ms": 1000, "session.timeout.ms": 6000, **extra})


def test_a_pattern_subscription_picks_up_a_topic_created_later(bootstrap: str) -> None:
    prefix = f"pattern-{uuid.uuid4().hex[:8]}"
    _create(bootstrap, f"{prefix}-first")
    _produce(bootstrap, f"{prefix}-first", 1)
    consumer = _consumer(bootstrap, f"g-{prefix}")
    seen: set[str] = set()

    def saw(topic: str) -> bool:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.add(message.topic())
        return topic in seen

    try:
        consumer.subscribe([f"^{prefix}-.*"])
        assert wait_until(lambda: saw(f"{prefix}-first"), WAIT_S)
        _create(bootstrap, f"{prefix}-later")
        _produce(bootstrap, f"{prefix}-later", 1)
        assert wait_until(lambda: saw(f"{prefix}-later"), WAIT_S)
    finally:
        consumer.close()


def test_a_member_past_max_poll_interval_leaves_and_the_other_takes_over(bootstrap: str) -> None:
    topic = f"poll-interval-{uuid.uuid4().hex[:8]}"
    _create(bootstrap, topic, 2)
    _produce(bootstrap, topic, 20)
    group = f"g-{topic}"
    stalled = _consumer(bootstrap, group, **{"max.poll.interval.ms": POLL_INTERVAL_MS})
    steady = _consumer(bootstrap, group, **{"max.poll.interval.ms": 60_000})
    try:
        stalled.subscribe([topic])
        steady.subscribe([topic])

        def both_assigned() -> bool:
            stalled.poll(0.2)
            steady.poll(0.2)
            return len(stalled.assignment()) == 1 and len(steady.assignment()) == 1

        def steady_has_both() -> bool:
            steady.poll(0.2)
            return len(steady.assignment()) == 2

        assert wait_until(both_assigned, WAIT_S)
        # `stalled` stops polling: past max.poll.interval.ms librdkafka leaves the group
        assert wait_until(steady_has_both, WAIT_S)
    finally:
        steady.close()
        stalled.close()
