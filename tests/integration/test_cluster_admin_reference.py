"""The cluster admin APIs answer as the reference Apache Kafka does, where one node can compare.

The same raw requests go to Martlet (one embedded node, id 1) and to the reference broker
(one KRaft node, id 1); the tests compare what a single node can have in common: error codes
and messages per partition, which entries a broker's configuration has and how Kafka flags
them. Values differ (ports, paths, defaults the reference fixture sets).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.fixtures.reference_pair import Both
from tests.support.kafka_admin import CREATE_TOPICS, DESCRIBE_CONFIGS, create

pytestmark = [pytest.mark.integration, pytest.mark.java]

LIST_OFFSETS, METADATA, DESCRIBE_LOG_DIRS = 2, 3, 35
ELECT_LEADERS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS, DESCRIBE_CLUSTER = 43, 45, 46, 60
BROKER = 4
STATIC = 4
# Names whose source both brokers must agree on: what a broker is always given (static) and
# Kafka defaults neither side changes. The rest depend on each side's configuration (the
# reference fixture sets num.partitions, group.initial.rebalance.delay.ms, a dynamic
# min.insync.replicas, ...).
SAME_SOURCE = ("broker.id", "node.id", "process.roles", "listeners", "advertised.listeners", "log.dirs",
               "auto.create.topics.enable", "log.retention.bytes", "log.segment.bytes", "message.max.bytes",
               "socket.request.max.bytes", "group.min.session.timeout.ms", "group.max.session.timeout.ms",
               "group.max.size", "offsets.retention.minutes", "log.cleanup.policy", "log.message.timestamp.type",
               "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides")


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _errors(answer: Any, topics: str, partitions: str, index: str) -> dict[tuple[str, int], tuple[int, str | None]]:
    return {(t.name if hasattr(t, "name") else t.topic, getattr(p, index)): (p.error_code, p.error_message)
            for t in getattr(answer, topics) for p in getattr(t, partitions)}


def test_replication_factor_and_assignment_errors_match(both: Both) -> None:
    cases = [{"num_partitions": 1, "replication_factor": 3},
             {"num_partitions": 1, "replication_factor": 0},
             {"num_partitions": -1, "replication_factor": -1, "assignments": [{"partition_index": 0, "broker_ids": [2]}]},
             {"num_partitions": -1, "replication_factor": -1,
              "assignments": [{"partition_index": 0, "broker_ids": [1, 1]}]},
             {"num_partitions": -1, "replication_factor": -1, "assignments": [{"partition_index": 0, "broker_ids": []}]},
             {"num_partitions": -1, "replication_factor": -1, "assignments": [{"partition_index": 1, "broker_ids": [1]}]},
             {"num_partitions": 1, "replication_factor": 1, "assignments": [{"partition_index": 0, "broker_ids": [1]}]},
             {"num_partitions": 2, "replication_factor": -1, "assignments": [{"partition_index": 0, "broker_ids": [1]}]}]
    for case in cases:
        body = {"topics": [{"name": _topic("refused"), "configs": []} | case], "timeout": 30_000}
        ours, theirs = both.ask(CREATE_TOPICS, 7, body)
        assert ours.topics[0].error_code != 0, case
        assert (ours.topics[0].error_code, ours.topics[0].error_message) == (
            theirs.topics[0].error_code, theirs.topics[0].error_message), case


def test_an_assignment_creates_the_topic_on_both(both: Both) -> None:
    name = _topic("assigned")
    body = {"topics": [{"name": name, "num_partitions": -1, "replication_factor": -1, "configs": [],
                        "assignments": [{"partition_index": i, "broker_ids": [1]} for i in range(2)]}],
            "timeout": 30_000}
    for answer in both.ask(CREATE_TOPICS, 7, body):
        assert [(t.error_code, t.num_partitions, t.replication_factor) for t in answer.topics] == [(0, 2, 1)]


def test_metadata_and_describe_cluster_agree_on_one_node(both: Both) -> None:
    name = _topic("meta")
    create(both, name, 2)
    ours, theirs = both.ask(METADATA, 12, {"topics": [{"name": name}]})
    shape = [[(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes, p.offline_replicas)
              for p in answer.topics[0].partitions] for answer in (ours, theirs)]
    assert shape[0] == shape[1]
    assert [b.node_id for b in ours.brokers] == [b.node_id for b in theirs.brokers] == [1]
    ours, theirs = both.ask(DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False})
    assert (ours.error_code, ours.controller_id, [b.broker_id for b in ours.brokers]) == (
        theirs.error_code, theirs.controller_id, [b.broker_id for b in theirs.brokers])


def test_broker_configs_have_kafkas_names_flags_and_sources(both: Both) -> None:
    body = {"resources": [{"resource_type": BROKER, "resource_name": "1", "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False}
    ours, theirs = (answer.results[0] for answer in both.ask(DESCRIBE_CONFIGS, 4, body))
    assert ours.error_code == theirs.error_code == 0
    kafka = {entry.name: entry for entry in theirs.configs}
    for entry in ours.configs:
        assert entry.name in kafka, f"{entry.name} is no Kafka broker config"
        reference = kafka[entry.name]
        assert (entry.read_only, entry.config_type, entry.is_sensitive) == (
            reference.read_only, reference.config_type, reference.is_sensitive), entry.name
        if entry.name in SAME_SOURCE:
            assert entry.config_source == reference.config_source, entry.name
        if entry.config_source == STATIC:  # Kafka lists the default after a static value
            assert [s.source for s in entry.synonyms][:1] == [STATIC], entry.name
    names = {entry.name for entry in ours.configs}
    assert {"broker.id", "node.id", "advertised.listeners", "listeners", "num.partitions", "log.dirs",
            "auto.create.topics.enable", "log.retention.ms", "log.retention.bytes", "log.segment.bytes",
            "offsets.topic.num.partitions", "default.replication.factor", "min.insync.replicas",
            "message.max.bytes", "group.initial.rebalance.delay.ms", "group.min.session.timeout.ms",
            "group.max.session.timeout.ms", "process.roles"} <= names


def test_broker_resources_that_name_no_live_broker_get_kafkas_error(both: Both) -> None:
    for name in ("2", "x"):
        body = {"resources": [{"resource_type": BROKER, "resource_name": name, "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}
        ours, theirs = (answer.results[0] for answer in both.ask(DESCRIBE_CONFIGS, 4, body))
        assert (ours.error_code, ours.error_message) == (theirs.error_code, theirs.error_message)
        assert ours.error_code == 42


def test_log_dirs_list_the_partitions_with_no_lag(both: Both) -> None:
    name = _topic("logdirs")
    create(both, name, 2)
    body = {"topics": [{"topic": name, "partitions": [0, 1, 7]}, {"topic": _topic("ghost"), "partitions": [0]}]}
    answers = both.ask(DESCRIBE_LOG_DIRS, 4, body)
    shapes = []
    for answer in answers:
        assert answer.error_code == 0 and len(answer.results) == 1 and answer.results[0].error_code == 0
        shapes.append(sorted((t.name, p.partition_index, p.offset_lag, p.is_future_key)
                             for t in answer.results[0].topics for p in t.partitions))
    assert shapes[0] == shapes[1] == [(name, 0, 0, False), (name, 1, 0, False)]


def test_reassignment_errors_match_per_partition(both: Both) -> None:
    name = _topic("reassign")
    create(both, name, 2)
    ghost = _topic("ghost")
    partitions = [{"partition_index": 0, "replicas": [1]}, {"partition_index": 1, "replicas": [2]},
                  {"partition_index": 9, "replicas": [1]}, {"partition_index": 1, "replicas": None},
                  {"partition_index": 1, "replicas": []}, {"partition_index": 1, "replicas": [1, 1]}]
    body = {"timeout": 30_000, "topics": [{"name": name, "partitions": partitions},
                                          {"name": ghost, "partitions": [{"partition_index": 0, "replicas": [1]}]}]}
    for version in (0, 1):
        ours, theirs = both.ask(ALTER_REASSIGNMENTS, version, body)
        assert ours.error_code == theirs.error_code == 0
        assert [(t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
                for t in ours.responses] == [
            (t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
            for t in theirs.responses]
    ours, theirs = both.ask(LIST_REASSIGNMENTS, 0, {"timeout": 30_000, "topics": [
        {"name": name, "partition_indexes": [0, 1]}, {"name": ghost, "partition_indexes": [0]}]})
    assert (ours.error_code, ours.topics) == (theirs.error_code, theirs.topics) == (0, ())


@pytest.mark.parametrize("election", [0, 1], ids=["preferred", "unclean"])
def test_elect_leaders_match_per_partition(both: Both, election: int) -> None:
    name = _topic("elect")
    create(both, name, 2)
    ghost = _topic("ghost")
    body = {"election_type": election, "timeout": 30_000,
            "topic_partitions": [{"topic": name, "partitions": [0, 1, 9]}, {"topic": ghost, "partitions": [0]}]}
    ours, theirs = both.ask(ELECT_LEADERS, 2, body)
    assert ours.error_code == theirs.error_code == 0
    assert _errors(ours, "replica_election_results", "partition_result", "partition_id") == _errors(
        theirs, "replica_election_results", "partition_result", "partition_id")
    every = both.ask(ELECT_LEADERS, 2, {"election_type": election, "timeout": 30_000, "topic_partitions": None})
    for answer in every:  # every partition: those that need no election are left out
        assert [r.partition_result for r in answer.replica_election_results if r.topic == name] == [()]
