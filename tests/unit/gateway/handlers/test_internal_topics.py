"""__consumer_offsets and __transaction_state as Kafka shows them (gateway/internal_topics.py): listed as internal, one
partition per coordinator shard; what would need Kafka's records is refused with a clear error,
and no request creates, deletes, grows or reconfigures it."""

from __future__ import annotations

import pytest

from martlet.gateway.internal_topics import INTERNAL_CONFIGS, OFFSETS, TRANSACTIONS
from tests.integration.raw_client import record_batch
from tests.support.fetching import fetch_body

from .harness import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    FETCH,
    INCREMENTAL_ALTER_CONFIGS,
    METADATA,
    OFFSET_FOR_LEADER_EPOCH,
    Broker,
)

INVALID_TOPIC, TOPIC_AUTHORIZATION_FAILED, TOPIC_ALREADY_EXISTS = 17, 29, 36
DESCRIBE_TOPIC_PARTITIONS = 75


@pytest.fixture(params=[OFFSETS, TRANSACTIONS])
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _listed(broker: Broker, name: str) -> object:
    return next(t for t in broker.call(METADATA, 12, {"topics": None}).topics if t.name == name)


def test_listed_as_internal_with_a_partition_per_shard_by_name_and_by_id(broker: Broker, name: str) -> None:
    listed = _listed(broker, name)
    shards = broker.engine.groups.shard_count
    assert listed.is_internal and listed.error_code == 0 and listed.topic_id.int != 0
    assert [(p.partition_index, p.leader_id, p.error_code) for p in listed.partitions] == [
        (index, 1, 0) for index in range(shards)]
    by_name = broker.call(METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": True})
    by_id = broker.call(METADATA, 12, {"topics": [{"name": None, "topic_id": listed.topic_id}]})
    for answer in (by_name, by_id):
        assert [(t.name, t.topic_id, t.is_internal, len(t.partitions)) for t in answer.topics] == [
            (name, listed.topic_id, True, shards)]
    assert broker.topic_names() == set()  # asking by name did not create a topic


def test_described_by_describe_topic_partitions_in_name_order(broker: Broker) -> None:
    broker.create_topic("alpha", 2)
    answer = broker.call(DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [], "response_partition_limit": 3, "cursor": None})
    assert [(t.name, t.is_internal, len(t.partitions)) for t in answer.topics] == [(OFFSETS, True, 3)]
    assert (answer.next_cursor.topic_name, answer.next_cursor.partition_index) == (OFFSETS, 3)


def test_creating_it_answers_that_it_exists(broker: Broker, name: str) -> None:
    for validate_only in (True, False):
        answer = broker.call(CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": 1,
                                                            "replication_factor": 1, "configs": []}],
                                                "timeout": 1000, "validate_only": validate_only})
        assert answer.topics[0].error_code == TOPIC_ALREADY_EXISTS
    assert broker.topic_names() == set()


def test_writes_are_refused_as_kafka_refuses_them(broker: Broker, name: str) -> None:
    produced = broker.produce(name, 0, record_batch([b"x"])).responses[0].partition_responses[0]
    assert (produced.error_code, produced.error_message) == (INVALID_TOPIC, None)  # Kafka's answer
    deleted = broker.call(DELETE_RECORDS, 2, {"topics": [{"name": name, "partitions": [
        {"partition_index": 0, "offset": 0}]}], "timeout": 1000})
    assert deleted.topics[0].partitions[0].error_code == INVALID_TOPIC


def test_reads_are_refused_as_not_authorized(broker: Broker, name: str) -> None:
    fetched = broker.call(FETCH, 12, fetch_body([(name, 0, 0, 1 << 20)]))
    assert fetched.responses[0].partitions[0].error_code == TOPIC_AUTHORIZATION_FAILED
    assert broker.list_offset(name, 0, -1).error_code == TOPIC_AUTHORIZATION_FAILED
    epoch = broker.call(OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [{"topic": name, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
    assert epoch.topics[0].partitions[0].error_code == TOPIC_AUTHORIZATION_FAILED


def test_delete_grow_and_reconfigure_are_refused(broker: Broker, name: str) -> None:
    topic_id = _listed(broker, name).topic_id
    deleted = broker.call(DELETE_TOPICS, 6, {"topics": [{"name": name}, {"name": None, "topic_id": topic_id}],
                                             "timeout": 1000})
    assert [(r.name, r.error_code) for r in deleted.responses] == [(name, INVALID_TOPIC)] * 2
    grown = broker.call(CREATE_PARTITIONS, 3, {"topics": [{"name": name, "count": 60, "assignments": None}],
                                               "timeout": 1000, "validate_only": False})
    assert grown.results[0].error_code == INVALID_TOPIC
    altered = broker.call(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{"resource_type": 2, "resource_name": name,
                                                                        "configs": [{"name": "retention.ms",
                                                                                     "config_operation": 0,
                                                                                     "value": "1000"}]}],
                                                         "validate_only": False})
    assert altered.responses[0].error_code == INVALID_TOPIC
    assert _listed(broker, name).topic_id == topic_id


def test_its_configs_show_a_compacted_topic(broker: Broker, name: str) -> None:
    answer = broker.call(DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": 2, "resource_name": name,
                                                              "configuration_keys": None}],
                                               "include_synonyms": False, "include_documentation": False})
    result = answer.results[0]
    overridden = {c.name: c.value for c in result.configs if c.config_source == 1}
    assert result.error_code == 0
    assert overridden == INTERNAL_CONFIGS[name] and overridden["cleanup.policy"] == "compact"


def test_the_two_have_their_own_ids_and_the_same_coordinators(broker: Broker) -> None:
    offsets, transactions = _listed(broker, OFFSETS), _listed(broker, TRANSACTIONS)
    assert offsets.topic_id != transactions.topic_id
    assert [p.leader_id for p in offsets.partitions] == [p.leader_id for p in transactions.partitions]
