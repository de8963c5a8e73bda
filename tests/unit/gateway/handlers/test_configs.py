"""DescribeConfigs, AlterConfigs (replaces overrides) and IncrementalAlterConfigs for topics."""

from martlet.gateway.topic_configs import CONFIGS

from .harness import ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, Broker

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def describe(broker: Broker, name: str, keys: list[str] | None = None, resource_type: int = TOPIC) -> object:
    body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}]}
    return broker.call(DESCRIBE_CONFIGS, 4, body).results[0]


def sources(broker: Broker, name: str) -> dict[str, tuple[str, int]]:
    return {c.name: (c.value, c.config_source) for c in describe(broker, name).configs}


def test_overrides_have_source_1_and_defaults_source_5(broker: Broker) -> None:
    broker.create_topic("t", configs={"retention.ms": "1000", "max.message.bytes": "2000"})
    result = describe(broker, "t")
    assert (result.error_code, result.resource_name) == (0, "t")
    configs = {c.name: c for c in result.configs}
    assert set(configs) == {config.name for config in CONFIGS}
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("1000", 1)
    assert (configs["max.message.bytes"].value, configs["max.message.bytes"].config_source) == ("2000", 1)
    assert (configs["segment.ms"].value, configs["segment.ms"].config_source) == ("604800000", 5)
    assert (configs["message.timestamp.type"].value, configs["message.timestamp.type"].config_source) == (
        "CreateTime", 5)
    assert all(c.config_source == 5 for n, c in configs.items() if n not in ("retention.ms", "max.message.bytes"))


def test_configuration_keys_select_entries(broker: Broker) -> None:
    broker.create_topic("t", configs={"retention.ms": "1000"})
    result = describe(broker, "t", ["retention.ms", "cleanup.policy", "no.such.key"])
    assert sorted((c.name, c.value) for c in result.configs) == [("cleanup.policy", "delete"),
                                                                  ("retention.ms", "1000")]
    assert len(describe(broker, "t", []).configs) == len(CONFIGS)


def test_unknown_topic_and_broker_resources(broker: Broker) -> None:
    assert describe(broker, "ghost").error_code == 3
    broker_result = describe(broker, "1", resource_type=BROKER)
    assert broker_result.error_code == 0
    assert {c.name: c.value for c in broker_result.configs}["broker.id"] == "1"  # more in test_broker_configs.py


def alter(broker: Broker, name: str, configs: dict[str, str], validate_only: bool = False) -> int:
    body = {"resources": [{"resource_type": TOPIC, "resource_name": name,
                           "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "validate_only": validate_only}
    return broker.call(ALTER_CONFIGS, 2, body).responses[0].error_code


def test_alter_configs_replaces_all_overrides(broker: Broker) -> None:
    broker.create_topic("t", configs={"retention.ms": "1000"})
    assert alter(broker, "t", {"segment.ms": "5000"}, validate_only=True) == 0
    assert sources(broker, "t")["segment.ms"] == ("604800000", 5)
    assert alter(broker, "t", {"segment.ms": "5000"}) == 0
    after = sources(broker, "t")
    assert after["segment.ms"] == ("5000", 1)
    assert after["retention.ms"] == ("604800000", 5)  # not named: back to the default


def test_alter_configs_errors(broker: Broker) -> None:
    broker.create_topic("t", configs={"retention.ms": "1000"})
    assert alter(broker, "t", {"no.such.config": "1"}) == 40
    assert alter(broker, "t", {"segment.ms": "0"}) == 40
    assert alter(broker, "ghost", {"retention.ms": "1"}) == 3
    assert sources(broker, "t")["retention.ms"] == ("1000", 1)
    body = {"resources": [{"resource_type": BROKER, "resource_name": "1",
                           "configs": [{"name": "broker.id", "value": "2"}]}], "validate_only": False}
    assert broker.call(ALTER_CONFIGS, 2, body).responses[0].error_code == 42  # not dynamic in Kafka either
    body["resources"][0]["configs"] = [{"name": "log.retention.ms", "value": "1000"}]  # type: ignore[index]
    assert broker.call(ALTER_CONFIGS, 2, body).responses[0].error_code == 0  # the node's dynamic configs now
    broker.create_topic("u")
    assert broker.engine.topics.get("u").config.retention_ms == 1000


def incremental(broker: Broker, name: str, ops: list[tuple[str, int, str | None]]) -> int:
    body = {"resources": [{"resource_type": TOPIC, "resource_name": name, "configs": [
        {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}], "validate_only": False}
    return broker.call(INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0].error_code


def test_incremental_set_and_delete_keep_other_overrides(broker: Broker) -> None:
    broker.create_topic("t", configs={"retention.ms": "1000", "segment.ms": "5000"})
    assert incremental(broker, "t", [("retention.bytes", SET, "4096"), ("segment.ms", DELETE, None)]) == 0
    after = sources(broker, "t")
    assert after["retention.bytes"] == ("4096", 1)
    assert after["retention.ms"] == ("1000", 1)
    assert after["segment.ms"] == ("604800000", 5)


def test_incremental_append_to_a_non_list_config_is_invalid_config(broker: Broker) -> None:
    broker.create_topic("t", configs={"retention.ms": "1000"})
    assert incremental(broker, "t", [("retention.ms", APPEND, "2000")]) == 40
    assert incremental(broker, "t", [("retention.ms", SUBTRACT, "1000")]) == 40
    assert incremental(broker, "t", [("retention.ms", SET, "2000"), ("segment.ms", APPEND, "1")]) == 40
    assert sources(broker, "t")["retention.ms"] == ("1000", 1)  # nothing of a refused request applies


def test_removing_a_broker_config_finds_nothing_set_and_setting_one_is_refused(broker: Broker) -> None:
    def on_broker(name: str, operation: int) -> tuple[int, str | None]:
        body = {"resources": [{"resource_type": BROKER, "resource_name": name, "configs": [
            {"name": "leader.replication.throttled.rate", "config_operation": operation, "value": None}]}],
            "validate_only": False}
        response = broker.call(INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]
        return response.error_code, response.error_message

    assert on_broker("1", DELETE) == (0, None)  # kafka-reassign-partitions --verify clears throttles so
    assert on_broker("", DELETE) == (0, None)
    assert on_broker("1", SET)[0] == 42
    assert on_broker("7", DELETE) == (42, "Unexpected broker id, expected 1 or empty string, but received 7")
