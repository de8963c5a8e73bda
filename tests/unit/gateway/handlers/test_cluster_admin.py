"""Metadata, CreateTopics, DescribeCluster, DescribeConfigs (BROKER), DescribeLogDirs,
reassignments and ElectLeaders against a three-node cluster view (fake_cluster.py), where the
answers depend on nodes other than this one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from martlet.engine.api import TopicPartition

from .fake_cluster import NODE_2, REMOTE_EPOCH, ThreeNodes
from .harness import CREATE_TOPICS, DESCRIBE_CONFIGS, METADATA, Broker

DESCRIBE_LOG_DIRS, ELECT_LEADERS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS, DESCRIBE_CLUSTER = 35, 43, 45, 46, 60
BROKER = 4
LEADER_NOT_AVAILABLE, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT = 5, 38, 39
INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION = 42, 3
PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, ELECTION_NOT_NEEDED = 80, 83, 84
NO_REASSIGNMENT_IN_PROGRESS = 85


@pytest.fixture
def cluster() -> ThreeNodes:
    return ThreeNodes()


@pytest.fixture
def node(cluster: ThreeNodes) -> Iterator[Broker]:
    instance = Broker(cluster=cluster, advertised_host="10.0.0.1", advertised_port=9092)
    try:
        yield instance
    finally:
        instance.close()


def create(node: Broker, name: str, partitions: int = -1, factor: int = -1,
           assignments: list[list[int]] | None = None) -> object:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": factor, "configs": [],
             "assignments": [{"partition_index": i, "broker_ids": ids} for i, ids in enumerate(assignments or [])]}
    return node.call(CREATE_TOPICS, 7, {"topics": [topic], "timeout": 1000}).topics[0]


def partitions_of(node: Broker, topic: str) -> list[tuple[int, int, int, int, tuple[int, ...], tuple[int, ...]]]:
    answer = node.call(METADATA, 12, {"topics": [{"name": topic}]})
    return [(p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
            for p in answer.topics[0].partitions]


# -- Metadata and DescribeCluster

def test_metadata_lists_every_live_node_and_the_controller(node: Broker) -> None:
    answer = node.call(METADATA, 12, {"topics": None})
    assert [(b.node_id, b.host, b.port, b.rack) for b in answer.brokers] == [
        (1, "10.0.0.1", 9092, None), (2, "10.0.0.2", 9093, "r2"), (3, "10.0.0.3", 9094, None)]
    assert answer.controller_id == NODE_2.node_id


def test_each_partition_names_its_leader_and_epoch(node: Broker) -> None:
    create(node, "t", 4, 1)
    assert partitions_of(node, "t") == [
        (0, 0, 1, 0, (1,), (1,)),  # served here: the partition's own session S
        (1, 0, 2, REMOTE_EPOCH, (2,), (2,)),  # served elsewhere: what the view knows
        (2, 0, 3, REMOTE_EPOCH, (3,), (3,)),
        (3, 0, 1, 0, (1,), (1,))]


def test_replicas_are_the_leader_then_the_next_live_nodes_by_id(node: Broker, cluster: ThreeNodes) -> None:
    create(node, "three", 3, 3)
    create(node, "two", 3, 2)
    assert [p[4] for p in partitions_of(node, "three")] == [(1, 2, 3), (2, 3, 1), (3, 1, 2)]
    assert [p[4] for p in partitions_of(node, "two")] == [(1, 2), (2, 3), (3, 1)]
    assert all(p[4] == p[5] for p in partitions_of(node, "three"))  # all in sync
    cluster.dead.add(2)  # fewer live nodes than the factor: those alive
    assert [p[4] for p in partitions_of(node, "three")] == [(1, 3), (2, 3, 1), (3, 1)]


def test_a_partition_nobody_serves_is_leader_not_available(node: Broker, cluster: ThreeNodes) -> None:
    create(node, "t", 2, 1)
    cluster.unplaced.add(TopicPartition("t", 1))
    assert partitions_of(node, "t")[1] == (1, LEADER_NOT_AVAILABLE, -1, -1, (), ())


def test_describe_cluster_lists_the_live_nodes_and_the_controller(node: Broker, cluster: ThreeNodes) -> None:
    cluster.dead.add(3)
    answer = node.call(DESCRIBE_CLUSTER, 1, {})
    assert answer.controller_id == 2
    assert [(b.broker_id, b.host, b.port) for b in answer.brokers] == [(1, "10.0.0.1", 9092), (2, "10.0.0.2", 9093)]


# -- CreateTopics: replication factor and assignments

def test_replication_factor_up_to_the_live_nodes(node: Broker, cluster: ThreeNodes) -> None:
    assert (create(node, "three", 1, 3).error_code, create(node, "default", 1, -1).replication_factor) == (0, 1)
    too_many = create(node, "four", 1, 4)
    assert (too_many.error_code, too_many.error_message) == (INVALID_REPLICATION_FACTOR, (
        "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached"
        " because only 3 broker(s) are registered or some brokers have all their log directories cordoned."))
    assert create(node, "zero", 1, 0).error_code == INVALID_REPLICATION_FACTOR
    cluster.dead.add(3)
    assert create(node, "three-again", 1, 3).error_code == INVALID_REPLICATION_FACTOR
    assert node.topic_names() == {"three", "default"}


def test_the_factor_is_stored_with_the_topic(node: Broker) -> None:
    create(node, "t", 1, 2)
    assert node.engine.topics.get("t").replication_factor == 2


def test_assignments_set_the_factor_and_ask_for_the_first_replica_as_leader(node: Broker, cluster: ThreeNodes) -> None:
    created = create(node, "t", assignments=[[3, 1], [2, 3]])
    assert (created.error_code, created.num_partitions, created.replication_factor) == (0, 2, 2)
    assert cluster.reassign_calls == [{TopicPartition("t", 0): 3, TopicPartition("t", 1): 2}]


@pytest.mark.parametrize(("assignments", "message"), [
    ([[1], [9]], "The manual partition assignment includes broker 9, but no such broker is registered."),
    ([[1, 1]], "The manual partition assignment includes the broker 1 more than once."),
    ([[1], []], "The manual partition assignment includes an empty replica list."),
    ([[1, 2], [3]], "The manual partition assignment includes a partition with 1 replica(s), but this is not"
                    " consistent with previous partitions, which have 2 replica(s)."),
])
def test_bad_assignments_are_refused_as_kafka_refuses_them(node: Broker, assignments: list[list[int]],
                                                           message: str) -> None:
    refused = create(node, "t", assignments=assignments)
    assert (refused.error_code, refused.error_message) == (INVALID_REPLICA_ASSIGNMENT, message)
    assert node.topic_names() == set()


def test_assignments_need_factor_and_count_unset(node: Broker) -> None:
    assert create(node, "a", 1, -1, [[1]]).error_code == INVALID_REQUEST
    assert create(node, "b", -1, 1, [[1]]).error_code == INVALID_REQUEST


# -- DescribeConfigs for BROKER resources

def broker_configs(node: Broker, name: str, keys: list[str] | None = None, synonyms: bool = False) -> object:
    body = {"resources": [{"resource_type": BROKER, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": synonyms}
    return node.call(DESCRIBE_CONFIGS, 4, body).results[0]


def test_a_live_node_is_described_with_its_own_identity_and_listener(node: Broker) -> None:
    here = {c.name: c.value for c in broker_configs(node, "1").configs}
    there = {c.name: c.value for c in broker_configs(node, "2").configs}
    assert (here["broker.id"], here["advertised.listeners"]) == ("1", "PLAINTEXT://10.0.0.1:9092")
    assert (there["node.id"], there["advertised.listeners"], there["broker.rack"]) == (
        "2", "PLAINTEXT://10.0.0.2:9093", "r2")
    assert here["log.dirs"] == "memory" and here["process.roles"] == "broker"


def test_a_node_that_is_not_alive_gets_kafkas_error(node: Broker, cluster: ThreeNodes) -> None:
    cluster.dead.add(3)
    gone, word = broker_configs(node, "3"), broker_configs(node, "x")
    assert (gone.error_code, gone.error_message) == (
        INVALID_REQUEST, "Unexpected broker id, expected 1, 2 or empty string, but received 3")
    assert (word.error_code, word.error_message) == (INVALID_REQUEST, "Broker id must be an integer, but it is: x")
    assert broker_configs(node, "").configs == ()  # no cluster-wide dynamic defaults


def test_broker_config_values_sources_and_synonyms(node: Broker) -> None:
    result = broker_configs(node, "1", ["num.partitions", "broker.id", "log.segment.bytes",
                                        "auto.create.topics.enable", "offsets.topic.num.partitions"], True)
    entries = {c.name: c for c in result.configs}
    assert set(entries) == {"num.partitions", "broker.id", "log.segment.bytes", "auto.create.topics.enable",
                            "offsets.topic.num.partitions"}
    # Kafka's own default: DEFAULT_CONFIG (5); a value a broker must be given or one that
    # differs from Kafka's default: STATIC_BROKER_CONFIG (4), Kafka's default as a synonym
    assert [(s.value, s.source) for s in entries["log.segment.bytes"].synonyms] == [("1073741824", 5)]
    assert (entries["auto.create.topics.enable"].value, entries["auto.create.topics.enable"].config_source) == (
        "false", 4)
    assert [(s.value, s.source) for s in entries["broker.id"].synonyms] == [("1", 4), ("-1", 5)]
    assert entries["offsets.topic.num.partitions"].value == "50"  # the shard count
    assert entries["num.partitions"].read_only and not entries["log.segment.bytes"].read_only


# -- DescribeLogDirs

def test_log_dirs_list_only_the_partitions_served_here_with_their_sizes(node: Broker) -> None:
    create(node, "t", 4, 1)
    node.append("t", 0, [b"x" * 100])
    answer = node.call(DESCRIBE_LOG_DIRS, 4, {"topics": None})
    [result] = answer.results
    assert (result.error_code, result.log_dir) == (0, "memory")
    [topic] = result.topics
    sizes = {p.partition_index: p.partition_size for p in topic.partitions}
    assert set(sizes) == {0, 3} and sizes[0] > 100 and sizes[3] == 0
    assert all(p.offset_lag == 0 and not p.is_future_key for p in topic.partitions)
    named = node.call(DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": "t", "partitions": [1, 3]},
                                                         {"topic": "ghost", "partitions": [0]}]})
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in named.results[0].topics] == [("t", [3])]


# -- reassignments

def alter(node: Broker, moves: dict[str, list[tuple[int, list[int] | None]]], version: int = 0) -> dict:
    body = {"timeout": 1000, "topics": [
        {"name": name, "partitions": [{"partition_index": i, "replicas": r} for i, r in partitions]}
        for name, partitions in moves.items()]}
    answer = node.call(ALTER_REASSIGNMENTS, version, body)
    assert answer.error_code == 0
    return {(t.name, p.partition_index): (p.error_code, p.error_message) for t in answer.responses
            for p in t.partitions}


def test_alter_checks_each_partition_then_asks_the_cluster_once(node: Broker, cluster: ThreeNodes) -> None:
    create(node, "t", 3, 1)
    cluster.dead.add(3)
    results = alter(node, {"t": [(0, [2, 1]), (1, [3]), (2, None), (9, [1])], "ghost": [(0, [1])]})
    assert results == {
        ("t", 0): (0, None),
        ("t", 1): (INVALID_REPLICA_ASSIGNMENT,
                   "The manual partition assignment includes broker 3, but no such broker is registered."),
        ("t", 2): (NO_REASSIGNMENT_IN_PROGRESS, None),
        ("t", 9): (UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:9."),
        ("ghost", 0): (UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named ghost.")}
    assert cluster.reassign_calls == [{TopicPartition("t", 0): 2}]


def test_a_change_of_factor_is_refused_only_when_the_request_forbids_it(node: Broker) -> None:
    create(node, "t", 1, 2)
    body = {"timeout": 1000, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [3]}]}]}
    forbidden = node.call(ALTER_REASSIGNMENTS, 1, body | {"allow_replication_factor_change": False})
    assert forbidden.allow_replication_factor_change is False
    assert [(p.error_code, p.error_message) for p in forbidden.responses[0].partitions] == [
        (INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 1")]
    assert alter(node, {"t": [(0, [3])]}, version=1) == {("t", 0): (0, None)}  # allowed by default


def test_a_pending_move_is_listed_then_cancelled(node: Broker, cluster: ThreeNodes) -> None:
    create(node, "t", 3, 1)
    assert alter(node, {"t": [(1, [3])]}, version=1) == {("t", 1): (0, None)}
    listed = node.call(LIST_REASSIGNMENTS, 0, {"timeout": 1000, "topics": None})
    assert [(t.name, [(p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas) for p in t.partitions])
            for t in listed.topics] == [("t", [(1, (3, 2), (3,), (2,))])]  # led by 2 today
    some = node.call(LIST_REASSIGNMENTS, 0, {"timeout": 1000, "topics": [{"name": "t", "partition_indexes": [0]}]})
    assert some.topics == ()
    assert alter(node, {"t": [(1, None)]}) == {("t", 1): (0, None)}
    assert cluster.reassign_calls[-1] == {TopicPartition("t", 1): None}
    assert node.call(LIST_REASSIGNMENTS, 0, {"timeout": 1000, "topics": None}).topics == ()


# -- ElectLeaders

def elect(node: Broker, topics: list[tuple[str, list[int]]] | None, election: int = 0, version: int = 2) -> dict:
    body = {"election_type": election, "timeout": 1000,
            "topic_partitions": None if topics is None else [{"topic": t, "partitions": p} for t, p in topics]}
    if version == 0:
        del body["election_type"]
    answer = node.call(ELECT_LEADERS, version, body)
    return {(r.topic, p.partition_id): (p.error_code, p.error_message) for r in answer.replica_election_results
            for p in r.partition_result}


@pytest.mark.parametrize("election", [0, 1])
def test_a_placed_partition_needs_no_election(node: Broker, election: int) -> None:
    create(node, "t", 2, 1)
    assert elect(node, [("t", [0, 1, 5]), ("ghost", [0])], election) == {
        ("t", 0): (ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
        ("t", 1): (ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
        ("t", 5): (UNKNOWN_TOPIC_OR_PARTITION, "No such partition as t-5"),
        ("ghost", 0): (UNKNOWN_TOPIC_OR_PARTITION, "No such topic as ghost")}
    assert elect(node, [("t", [0])], version=0)[("t", 0)][0] == ELECTION_NOT_NEEDED


def test_every_partition_reports_only_those_an_election_could_change(node: Broker, cluster: ThreeNodes) -> None:
    create(node, "a", 2, 1)
    create(node, "b", 1, 1)
    answer = node.call(ELECT_LEADERS, 2, {"election_type": 0, "timeout": 1000, "topic_partitions": None})
    assert [(r.topic, r.partition_result) for r in answer.replica_election_results] == [("a", ()), ("b", ())]
    cluster.unplaced.add(TopicPartition("a", 1))
    assert set(elect(node, None)) == {("a", 1)}
    assert elect(node, None)[("a", 1)][0] == PREFERRED_LEADER_NOT_AVAILABLE
    assert elect(node, None, election=1)[("a", 1)][0] == ELIGIBLE_LEADERS_NOT_AVAILABLE


# -- Produce to a partition another node leads (KIP-951)

def test_produce_elsewhere_names_the_current_leader_and_its_address(node: Broker) -> None:
    from tests.integration.raw_client import record_batch

    assert create(node, "k", 3, 1).error_code == 0
    answer = node.produce("k", 1, record_batch([b"x"]), version=11)  # partition 1 is node 2's
    partition = answer.responses[0].partition_responses[0]
    assert partition.error_code == 6  # NOT_LEADER_OR_FOLLOWER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (2, REMOTE_EPOCH)
    assert [(e.node_id, e.host, e.port, e.rack) for e in answer.node_endpoints] == [(2, "10.0.0.2", 9093, "r2")]
    older = node.produce("k", 1, record_batch([b"x"]), version=9)  # no such fields before v10
    assert older.responses[0].partition_responses[0].error_code == 6
    here = node.produce("k", 0, record_batch([b"x"]), version=11).responses[0].partition_responses[0]
    assert here.error_code == 0 and here.current_leader.leader_id == -1  # nothing to point at
