"""Whole answers compared with the reference Apache Kafka: every field, not only error codes.

The same raw requests go to Martlet (one embedded node) and to the reference broker, each
after the same topics were made on both. Every field of the two decoded answers must be
equal, except what cannot be: values each broker picks for itself (ids, ports, hosts,
times) are compared only for being null or not, and free-text messages only for being null
or not (a client shows Kafka's own text for an error whose message is null, so a message
where Kafka sends none is a difference a user sees). Where Martlet answers otherwise on
purpose (reading __consumer_offsets; API versions, in test_api_versions_reference.py) the
test says so.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from martlet.protocol.codec import build, request_type
from tests.fixtures.reference_pair import Both
from tests.integration.raw_client import record_batch
from tests.support.answers import differences, shape
from tests.support.fetching import fetch_body
from tests.support.kafka_admin import create

pytestmark = [pytest.mark.integration, pytest.mark.java]

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_FETCH, FIND_COORDINATOR = 0, 1, 2, 3, 9, 10
DESCRIBE_GROUPS, LIST_GROUPS, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 15, 16, 19, 20, 21
OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 23, 32, 37, 44
TIMESTAMP = 1_700_000_000_000
OFFSETS, TRANSACTIONS = "__consumer_offsets", "__transaction_state"
TOPIC_CONFIG, TOPIC_AUTHORIZATION_FAILED = 1, 29


def _same(both: Both, api_key: int, version: int, body: dict[str, Any]) -> None:
    ours, theirs = (shape(answer) for answer in both.ask(api_key, version, body))
    found = differences(ours, theirs)
    assert not found, f"api {api_key} v{version}:\n" + "\n".join(sorted(found))


@pytest.fixture(scope="module")
def topic(both_module: Both) -> str:
    name = f"answers-{uuid.uuid4().hex[:8]}"
    create(both_module, name, 2)
    body = {"transactional_id": None, "acks": -1, "timeout": 30_000, "topic_data": [
        {"name": name, "partition_data": [{"index": 0, "records": record_batch([b"a", b"b"], TIMESTAMP)}]}]}
    for answer in both_module.ask(PRODUCE, 9, body):
        assert answer.responses[0].partition_responses[0].error_code == 0
    return name


@pytest.fixture(scope="module")
def both_module(martlet: Any, reference_kafka: Any) -> Any:
    pair = Both(martlet.bootstrap, reference_kafka.bootstrap)
    try:
        yield pair
    finally:
        pair.close()


def _produce(name: str, partition: int) -> dict[str, Any]:
    return {"transactional_id": None, "acks": -1, "timeout": 30_000, "topic_data": [
        {"name": name, "partition_data": [{"index": partition, "records": record_batch([b"x"], TIMESTAMP)}]}]}


@pytest.mark.parametrize("version", [9, 11])
def test_produce(both_module: Both, topic: str, version: int) -> None:
    _same(both_module, PRODUCE, version, _produce(topic, 5))
    _same(both_module, PRODUCE, version, _produce(f"{topic}-none", 0))


@pytest.mark.parametrize("version", [12, 13])
def test_metadata(both_module: Both, topic: str, version: int) -> None:
    _same(both_module, METADATA, version, {"topics": [{"name": topic}, {"name": f"{topic}-none"}],
                                           "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})


def test_fetch(both_module: Both, topic: str) -> None:
    for offset in (0, 2, 100):
        _same(both_module, FETCH, 12, fetch_body([(topic, 0, offset, 1 << 20)]))
        _same(both_module, FETCH, 12, fetch_body([(topic, 0, offset, 1 << 20)]) | {"isolation_level": 1})
    _same(both_module, FETCH, 12, fetch_body([(topic, 1, 0, 1 << 20), (topic, 7, 0, 1 << 20)]))
    _same(both_module, FETCH, 12, fetch_body([(f"{topic}-none", 0, 0, 1 << 20)]))


def test_list_offsets_and_leader_epochs(both_module: Both, topic: str) -> None:
    for timestamp in (-2, -1, -3, TIMESTAMP, TIMESTAMP + 1):
        wanted = [{"partition_index": index, "timestamp": timestamp, "current_leader_epoch": -1} for index in (0, 1, 9)]
        for version in (7, 9):
            _same(both_module, LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": wanted}, {"name": f"{topic}-none", "partitions": wanted[:1]}]})
    twice = [{"partition_index": index, "timestamp": -1, "current_leader_epoch": -1} for index in (1, 0, 0, 1)]
    ours, theirs = both_module.ask(LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": twice}]})
    assert shape(ours) == shape(theirs)
    _same(both_module, OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": index, "current_leader_epoch": -1, "leader_epoch": epoch}
        for index, epoch in ((0, 0), (0, 5), (1, 0), (9, 0))]}]})


def test_topic_changes_that_fail(both_module: Both, topic: str) -> None:
    creatable = {"num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    _same(both_module, CREATE_TOPICS, 7, {"topics": [
        {"name": topic} | creatable, {"name": "bad name!"} | creatable,
        {"name": f"{topic}-zero"} | creatable | {"num_partitions": 0},
        {"name": f"{topic}-cfg"} | creatable | {"configs": [{"name": "retention.ms", "value": "soon"}]}],
        "timeout": 30_000, "validate_only": True})
    _same(both_module, CREATE_PARTITIONS, 3, {"topics": [{"name": topic, "count": 1, "assignments": None},
                                                         {"name": f"{topic}-none", "count": 3, "assignments": None}],
                                              "timeout": 30_000, "validate_only": True})
    _same(both_module, DELETE_TOPICS, 6, {"topics": [{"name": f"{topic}-none", "topic_id": None}], "timeout": 30_000})
    _same(both_module, DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "offset": 100}, {"partition_index": 9, "offset": 0}]}], "timeout": 30_000})


def test_configs(both_module: Both, topic: str) -> None:
    _same(both_module, DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configuration_keys": ["cleanup.policy", "retention.ms"]},
        {"resource_type": 2, "resource_name": f"{topic}-none", "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False})
    _same(both_module, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "soon"}]},
        {"resource_type": 2, "resource_name": f"{topic}-none", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": True})


def test_unknown_groups(both_module: Both, topic: str) -> None:
    group = f"{topic}-group"
    both_module.each(lambda client: client.request(build(request_type(FIND_COORDINATOR, 4), {
        "key_type": 0, "coordinator_keys": [group]})).coordinators[0].error_code == 0)
    both_module.each(lambda client: client.request(build(request_type(DESCRIBE_GROUPS, 5), {  # loaded
        "groups": [group], "include_authorized_operations": False})).groups[0].error_code == 0)
    _same(both_module, DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False})
    _same(both_module, OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0, 1]}]}], "require_stable": False})


@pytest.mark.parametrize(("internal", "key_type"), [(OFFSETS, 0), (TRANSACTIONS, 1)])
def test_the_internal_topics_show_as_kafkas(both_module: Both, topic: str, internal: str, key_type: int) -> None:
    """__consumer_offsets and __transaction_state (gateway/internal_topics.py): listed and
    described as Kafka lists and describes them, and refused where Kafka refuses; reads are
    refused where Kafka serves its own records (docs/api-versions.md)."""
    key = f"{topic}-{key_type}"  # a group, or a transactional id
    both_module.each(lambda client: client.request(build(request_type(FIND_COORDINATOR, 4), {
        "key_type": key_type, "coordinator_keys": [key]})).coordinators[0].error_code == 0)  # Kafka makes the topic
    answers = both_module.ask(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})
    listed = [next(shape(t) for t in answer.topics if t.name == internal) for answer in answers]
    for entry in listed:  # Martlet has a partition per coordinator shard (50), the reference fixture sets 1
        assert entry["partitions"][0] == {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                                          "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}
        entry["partitions"] = entry["partitions"][:1]
    assert listed[0] == listed[1] and listed[0]["is_internal"] is True
    creatable = {"name": internal, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    _same(both_module, CREATE_TOPICS, 7, {"topics": [creatable], "timeout": 30_000, "validate_only": False})
    _same(both_module, PRODUCE, 9, _produce(internal, 0))
    _same(both_module, DELETE_RECORDS, 2, {"topics": [{"name": internal, "partitions": [
        {"partition_index": 0, "offset": 0}]}], "timeout": 30_000})
    described = both_module.ask(DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": internal, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    ours, theirs = ({c.name: (c.value, c.config_source) for c in answer.results[0].configs} for answer in described)
    for name in ("cleanup.policy", "compression.type"):
        assert ours[name] == theirs[name], name
    assert ours["segment.bytes"][1] == theirs["segment.bytes"][1] == TOPIC_CONFIG
    fetched, _ = both_module.ask(FETCH, 12, fetch_body([(internal, 0, 0, 1 << 20)]))
    assert fetched.responses[0].partitions[0].error_code == TOPIC_AUTHORIZATION_FAILED
