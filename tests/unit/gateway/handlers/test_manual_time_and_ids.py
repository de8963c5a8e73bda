"""A whole broker (gateway and engine, tests/unit/gateway/handlers/harness.py) runs on a manual
clock and counted ids (engine/clock.py, engine/ids.py): the same requests get the same answers,
topic ids and member ids included, and time-driven behaviour moves only when the test moves it."""

import uuid
from typing import Any

from martlet.engine.clock import ManualClock

from .harness import CREATE_TOPICS, METADATA, Broker

CONSUMER_GROUP_HEARTBEAT = 68
UNKNOWN_MEMBER_ID = 25
SESSION_TIMEOUT_MS = 45_000  # Kafka's group.consumer.session.timeout.ms, the default


def session(broker: Broker) -> tuple[Any, ...]:
    """Create a topic, read its id, and join a consumer group (KIP-848) with no member id;
    what the broker chose."""
    created = broker.call(CREATE_TOPICS, 7, {"topics": [{"name": "t", "num_partitions": 2, "replication_factor": 1,
                                                          "configs": []}], "timeout": 1000})
    [topic] = broker.call(METADATA, 12, {"topics": [{"name": "t", "topic_id": None}]}).topics
    joined = heartbeat(broker, "", 0)
    assert joined.error_code == 0 and joined.member_id
    return created.topics[0].topic_id, topic.topic_id, joined.member_id, joined.member_epoch, broker.ctx.cluster_id


def heartbeat(broker: Broker, member_id: str, epoch: int) -> Any:
    return broker.call(CONSUMER_GROUP_HEARTBEAT, 0, {
        "group_id": "g", "member_id": member_id, "member_epoch": epoch, "instance_id": None, "rack_id": None,
        "rebalance_timeout": 10_000, "subscribed_topic_names": ["t"], "server_assignor": None,
        "topic_partitions": []})


def test_two_brokers_given_the_same_requests_choose_the_same_ids() -> None:
    chosen = []
    for _ in range(2):
        broker = Broker()
        try:
            chosen.append(session(broker))
        finally:
            broker.close()
    assert chosen[0] == chosen[1]
    created_id, listed_id, member_id, _, _ = chosen[0]
    assert created_id == listed_id and created_id.int < 100  # counted, not drawn
    assert uuid.UUID(member_id).int < 100


def test_a_member_expires_only_when_the_manual_clock_passes_its_session_timeout() -> None:
    broker = Broker()
    try:
        _, _, member_id, epoch, _ = session(broker)
        clock = broker.engine.clock
        assert isinstance(clock, ManualClock)
        clock.advance(SESSION_TIMEOUT_MS - 1_000)
        again = heartbeat(broker, member_id, epoch)
        assert again.error_code == 0
        clock.advance(SESSION_TIMEOUT_MS + 1)
        broker.loop.run_until_complete(broker.engine.groups.tick())
        assert heartbeat(broker, member_id, again.member_epoch).error_code == UNKNOWN_MEMBER_ID
    finally:
        broker.close()
