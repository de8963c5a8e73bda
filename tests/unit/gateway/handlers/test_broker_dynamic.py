"""Dynamic broker configs: set for the cluster ("") or one node, they change the defaults of
every topic that does not override them, the node's value wins, DELETE goes back, and they
survive a restart (the catalog keeps them)."""

from typing import Any

from martlet.engine.api import TopicPartition
from martlet.engine.store.memory import MemoryStore

from .harness import DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, Broker

BROKER, TOPIC = 4, 2
SET, DELETE, APPEND = 0, 1, 2
INVALID_REQUEST = 42


def alter(broker: Broker, name: str, *ops: tuple[str, int, str | None]) -> tuple[int, str | None]:
    body = {"resources": [{"resource_type": BROKER, "resource_name": name, "configs": [
        {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}], "validate_only": False}
    answer = broker.call(INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]
    return answer.error_code, answer.error_message


def describe(broker: Broker, resource_type: int, name: str, *keys: str) -> dict[str, Any]:
    body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": list(keys)}],
            "include_synonyms": True, "include_documentation": False}
    return {c.name: c for c in broker.call(DESCRIBE_CONFIGS, 4, body).results[0].configs}


def retention_ms(broker: Broker, topic: str) -> int:
    return broker.engine.topics.get(topic).config.retention_ms


def test_cluster_and_node_values_change_topics_without_their_own(broker: Broker) -> None:
    broker.create_topic("plain")
    broker.create_topic("own", configs={"retention.ms": "5000"})
    assert alter(broker, "", ("log.retention.ms", SET, "86400000")) == (0, None)
    assert (retention_ms(broker, "plain"), retention_ms(broker, "own")) == (86_400_000, 5000)
    partition = broker.engine.partitions.get_open(TopicPartition("plain", 0))
    assert partition is not None and partition.log.config.retention_ms == 86_400_000  # the open log follows
    shown = describe(broker, TOPIC, "plain", "retention.ms")["retention.ms"]
    assert (shown.value, shown.config_source) == ("86400000", 3)
    assert alter(broker, "1", ("log.retention.ms", SET, "3600000")) == (0, None)
    shown = describe(broker, TOPIC, "plain", "retention.ms")["retention.ms"]
    assert (shown.value, shown.config_source) == ("3600000", 2)
    assert [(s.value, s.source) for s in shown.synonyms][:2] == [("3600000", 2), ("86400000", 3)]
    node = describe(broker, BROKER, "1", "log.retention.ms")["log.retention.ms"]
    assert (node.value, node.config_source, node.read_only) == ("3600000", 2, False)
    assert alter(broker, "1", ("log.retention.ms", DELETE, None)) == (0, None)
    assert alter(broker, "", ("log.retention.ms", DELETE, None)) == (0, None)
    assert retention_ms(broker, "plain") == 604_800_000
    assert describe(broker, BROKER, "") == {}


def test_refusals_are_invalid_request_with_kafkas_messages(broker: Broker) -> None:
    assert alter(broker, "1", ("broker.id", SET, "5"), ("num.partitions", SET, "3")) == (
        INVALID_REQUEST, "Cannot update these configs dynamically: [broker.id, num.partitions]")
    assert alter(broker, "", ("log.retention.ms", SET, "abc")) == (
        INVALID_REQUEST, "Invalid value abc for configuration log.retention.ms: Not a number of type LONG")
    assert alter(broker, "7", ("log.retention.ms", SET, "1")) == (
        INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 7")
    assert alter(broker, "", ("log.cleanup.policy", APPEND, "compact")) == (0, None)
    broker.create_topic("later")
    assert broker.engine.topics.get("later").config.cleanup_policy == "delete,compact"
    assert alter(broker, "", ("log.cleanup.policy", DELETE, None)) == (0, None)
    assert broker.engine.topics.dynamic == {}
    assert alter(broker, "", ("some.plugin.setting", SET, "x")) == (0, None)  # kept, as Kafka keeps unknown names
    kept = describe(broker, BROKER, "")["some.plugin.setting"]
    assert (kept.value, kept.read_only, kept.config_source, kept.config_type) == (None, True, 3, 0)  # hidden
    assert broker.engine.topics.dynamic == {"": {"some.plugin.setting": "x"}}


def test_dynamic_configs_survive_a_restart() -> None:
    store = MemoryStore()
    first = Broker(store=store)
    try:
        first.create_topic("plain")
        assert alter(first, "", ("message.max.bytes", SET, "2000000")) == (0, None)
    finally:
        first.close()
    second = Broker(store=store)
    try:
        assert second.engine.topics.get("plain").config.max_batch_bytes == 2_000_000
        assert describe(second, BROKER, "", "message.max.bytes")["message.max.bytes"].value == "2000000"
    finally:
        second.close()
