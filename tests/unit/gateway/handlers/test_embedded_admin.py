"""The cluster admin APIs on the embedded single node: DescribeLogDirs, reassignments, ElectLeaders."""

from .harness import Broker

DESCRIBE_LOG_DIRS, ELECT_LEADERS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 35, 43, 45, 46


def test_log_dirs_list_every_partition_in_one_dir(broker: Broker) -> None:
    broker.create_topic("t", 2)
    broker.append("t", 1, [b"abc"])
    for version in (1, 4, 5):
        [result] = broker.call(DESCRIBE_LOG_DIRS, version, {"topics": None}).results
        assert result.log_dir == "memory"
        sizes = {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}
        assert sizes[("t", 0)] == 0 and sizes[("t", 1)] > 0 and set(sizes) == {("t", 0), ("t", 1)}


def test_a_reassignment_to_the_only_node_is_done_at_once(broker: Broker) -> None:
    broker.create_topic("t", 1)
    body = {"timeout": 1000, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [1]}]}]}
    answer = broker.call(ALTER_REASSIGNMENTS, 1, body | {"allow_replication_factor_change": True})
    assert answer.responses[0].partitions[0].error_code == 0
    assert broker.call(LIST_REASSIGNMENTS, 0, {"timeout": 1000, "topics": None}).topics == ()


def test_every_partition_already_has_its_preferred_leader(broker: Broker) -> None:
    broker.create_topic("t", 2)
    answer = broker.call(ELECT_LEADERS, 2, {"election_type": 0, "timeout": 1000,
                                            "topic_partitions": [{"topic": "t", "partitions": [0, 1]}]})
    assert [p.error_code for p in answer.replica_election_results[0].partition_result] == [84, 84]
