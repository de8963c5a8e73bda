"""Metadata: all topics, named topics, unknown topics (no auto-create by default)."""

from .harness import METADATA, Broker


def test_null_topics_lists_every_topic_with_its_partitions(broker: Broker) -> None:
    broker.create_topic("alpha", 3)
    broker.create_topic("beta", 1)
    answer = broker.call(METADATA, 12, {"topics": None})
    shards = broker.engine.groups.shard_count
    assert sorted((t.name, len(t.partitions), t.is_internal) for t in answer.topics) == [
        ("__consumer_offsets", shards, True), ("__transaction_state", shards, True), ("alpha", 3, False),
        ("beta", 1, False)]
    assert [(b.node_id, b.host) for b in answer.brokers] == [(1, "127.0.0.1")]
    assert answer.cluster_id == "unit-cluster" and answer.controller_id == 1
    alpha = next(t for t in answer.topics if t.name == "alpha")
    assert alpha.error_code == 0 and alpha.topic_id.int != 0
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
            for p in alpha.partitions] == [(i, 1, 0, (1,), (1,)) for i in range(3)]


def test_v0_empty_topic_list_means_all_topics(broker: Broker) -> None:
    broker.create_topic("alpha")
    answer = broker.call(METADATA, 0, {"topics": []})
    assert [t.name for t in answer.topics] == ["alpha", "__consumer_offsets", "__transaction_state"]


def test_named_topics_only(broker: Broker) -> None:
    broker.create_topic("alpha", 2)
    broker.create_topic("beta")
    answer = broker.call(METADATA, 12, {"topics": [{"name": "beta"}], "allow_auto_topic_creation": True})
    assert [(t.name, t.error_code, len(t.partitions)) for t in answer.topics] == [("beta", 0, 1)]


def test_unknown_topic_is_reported_and_not_created(broker: Broker) -> None:
    broker.create_topic("alpha")
    answer = broker.call(METADATA, 12, {"topics": [{"name": "ghost"}, {"name": "alpha"}],
                                        "allow_auto_topic_creation": True})
    assert [(t.name, t.error_code) for t in answer.topics] == [("ghost", 3), ("alpha", 0)]
    assert answer.topics[0].partitions == ()
    assert broker.topic_names() == {"alpha"}


def test_empty_named_list_lists_no_topics_from_v1(broker: Broker) -> None:
    broker.create_topic("alpha")
    assert broker.call(METADATA, 12, {"topics": []}).topics == ()


def test_auto_create_when_enabled() -> None:
    broker = Broker(auto_create_topics=True, default_partitions=2)
    try:
        answer = broker.call(METADATA, 12, {"topics": [{"name": "fresh"}], "allow_auto_topic_creation": True})
        assert [(t.name, t.error_code, len(t.partitions)) for t in answer.topics] == [("fresh", 0, 2)]
        refused = broker.call(METADATA, 12, {"topics": [{"name": "other"}], "allow_auto_topic_creation": False})
        assert refused.topics[0].error_code == 3
        assert broker.topic_names() == {"fresh"}
    finally:
        broker.close()


def test_describe_cluster(broker: Broker) -> None:
    answer = broker.call(60, 1, {})
    assert answer.error_code == 0 and answer.cluster_id == "unit-cluster"
    assert [b.broker_id for b in answer.brokers] == [1]


def test_the_embedded_node_is_the_only_broker_leader_and_controller(broker: Broker) -> None:
    broker.create_topic("t", 2)
    answer = broker.call(METADATA, 12, {"topics": None})
    assert [b.node_id for b in answer.brokers] == [1] and answer.controller_id == 1
    assert {(p.leader_id, p.replica_nodes, p.isr_nodes) for p in answer.topics[0].partitions} == {(1, (1,), (1,))}


def test_describe_cluster_lists_the_embedded_node(broker: Broker) -> None:
    answer = broker.call(60, 1, {})
    assert (answer.controller_id, [(b.broker_id, b.host, b.port) for b in answer.brokers]) == (
        1, [(1, "127.0.0.1", 9092)])
