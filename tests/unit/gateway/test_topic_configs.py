"""Topic configs under Kafka's names: checking with Kafka's messages, honoured against kept,
and what DescribeConfigs shows. The same checks against the reference broker, value by value:
tests/integration/test_topic_configs_reference.py."""

from __future__ import annotations

import pytest

from martlet.engine.api import TopicConfig, errors
from martlet.engine.catalog.names import ResourceName
from martlet.engine.catalog.topic import Topic
from martlet.gateway.topic_configs import (
    BY_NAME,
    CONFIGS,
    DEFAULT,
    STATIC,
    TOPIC,
    NullValue,
    checked,
    described,
    kafka_overrides,
    to_overrides,
)

# (name, value, Kafka 4.4's answer), as the reference broker gave them
REFUSED = [
    ("retention.ms", "-5", "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
    ("retention.ms", "1.5", "Invalid value 1.5 for configuration retention.ms: Not a number of type LONG"),
    ("retention.ms", "9223372036854775808",
     "Invalid value 9223372036854775808 for configuration retention.ms: Not a number of type LONG"),
    ("segment.bytes", "10", "Invalid value 10 for configuration segment.bytes: Value must be at least 1048576"),
    ("max.message.bytes", "2147483648",
     "Invalid value 2147483648 for configuration max.message.bytes: Not a number of type INT"),
    ("cleanup.policy", "foo", "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"),
    ("cleanup.policy", "compact,", "Configuration 'cleanup.policy' values must not be empty."),
    ("compression.type", "GZIP", "Invalid value GZIP for configuration compression.type: String must be one of: "
                                 "uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("compression.gzip.level", "20",
     "Invalid value 20 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "18", "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17"),
    ("min.cleanable.dirty.ratio", "-1",
     "Invalid value -1.0 for configuration min.cleanable.dirty.ratio: Value must be at least 0"),
    ("min.cleanable.dirty.ratio", " 5",
     "Invalid value 5.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "true",
     "Invalid value true for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
    ("preallocate", "yes", "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
    ("leader.replication.throttled.replicas", "delete, compact",
     "Invalid value [delete, compact] for configuration leader.replication.throttled.replicas: "
     "leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: "
     "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    ("remote.storage.enable", "true",
     "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."),
    ("message.timestamp.difference.max.ms", "1", "Unknown topic config name: message.timestamp.difference.max.ms"),
]
# (name, value, as stored and shown)
ACCEPTED = [("retention.ms", " +5", "5"), ("retention.bytes", "-9223372036854775808", "-9223372036854775808"),
            ("preallocate", "TRUE", "true"), ("cleanup.policy", "delete, delete", "delete,delete"),
            ("min.cleanable.dirty.ratio", "1e-3", "0.001"), ("follower.replication.throttled.replicas", "0:1,1:1", "0:1,1:1"),
            ("leader.replication.throttled.replicas", "*", "*"), ("compression.zstd.level", "-131072", "-131072"),
            ("segment.bytes", "1048576", "1048576")]


@pytest.mark.parametrize(("name", "value", "message"), REFUSED)
def test_a_bad_value_is_refused_with_kafkas_message(name: str, value: str, message: str) -> None:
    with pytest.raises(errors.InvalidConfig) as refused:
        checked(name, value)
    assert str(refused.value) == message
    assert not isinstance(refused.value, NullValue)


@pytest.mark.parametrize(("name", "value", "stored"), ACCEPTED)
def test_values_kafka_takes_are_stored_as_kafka_stores_them(name: str, value: str, stored: str) -> None:
    assert checked(name, value) == (BY_NAME[name], stored)


def test_null_is_its_own_error_and_nan_is_refused() -> None:
    with pytest.raises(NullValue, match=r"^Null value not supported for : retention\.ms$"):
        checked("retention.ms", None)
    with pytest.raises(errors.InvalidConfig, match="Not a number of type DOUBLE"):
        checked("min.cleanable.dirty.ratio", "NaN")  # Kafka takes NaN; a ratio it can never compare is refused


def test_every_default_passes_its_own_check() -> None:
    for config in CONFIGS:
        assert checked(config.name, config.default)[1] == config.default


def test_honoured_configs_become_engine_settings_and_the_rest_is_kept() -> None:
    overrides = to_overrides({"retention.ms": "1000", "flush.ms": " 10", "compression.type": "zstd",
                              "message.timestamp.type": "LogAppendTime"})
    assert overrides == {"retention_ms": 1000, "timestamp_type": "append",
                         "kept": (("compression.type", "zstd"), ("flush.ms", "10"))}
    assert to_overrides({"cleanup.policy": "compact, delete,compact", "min.cleanable.dirty.ratio": "0.25"}) == {
        "cleanup_policy": "compact,delete", "min_cleanable_ratio": 0.25}  # each policy once, as Kafka keeps it


def _topic(overrides: dict[str, str], defaults: TopicConfig) -> Topic:
    engine = to_overrides(overrides)
    return Topic(ResourceName.new("martlet", "t"), 0, ((0, 65535),), defaults.updated(engine), frozenset(engine), 0)


def test_overrides_read_back_under_kafkas_names_through_the_catalog() -> None:
    topic = _topic({"retention.ms": "1000", "flush.ms": "10", "preallocate": "true"}, TopicConfig())
    again = Topic.from_json(topic.to_json())
    assert kafka_overrides(again) == {"retention.ms": "1000", "flush.ms": "10", "preallocate": "true"}


def test_described_sources_and_synonyms_run_from_the_topic_to_kafkas_default() -> None:
    defaults = TopicConfig(segment_bytes=1 << 21)  # a broker setting that differs from Kafka's default
    topic = _topic({"retention.bytes": "4096", "flush.ms": "10"}, defaults)
    entries = {d.config.name: d for d in described(kafka_overrides(topic), defaults, None)}
    assert set(entries) == {config.name for config in CONFIGS}
    assert (entries["retention.bytes"].value, entries["retention.bytes"].source) == ("4096", TOPIC)
    assert [(s["name"], s["value"], s["source"]) for s in entries["retention.bytes"].synonyms] == [
        ("retention.bytes", "4096", TOPIC), ("log.retention.bytes", "-1", DEFAULT)]
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (str(1 << 21), STATIC)
    assert [(s["name"], s["value"], s["source"]) for s in entries["segment.bytes"].synonyms] == [
        ("log.segment.bytes", str(1 << 21), STATIC), ("log.segment.bytes", "1073741824", DEFAULT)]
    assert (entries["flush.ms"].value, entries["flush.ms"].source) == ("10", TOPIC)
    assert (entries["compression.type"].value, entries["compression.type"].source) == ("producer", DEFAULT)
    assert entries["retention.ms"].synonyms == []  # Kafka lists no default for log.retention.ms
