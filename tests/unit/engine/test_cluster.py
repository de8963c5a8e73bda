"""The embedded cluster view: one node that serves everything and knows its address once bound."""

from martlet.engine.cluster import EMBEDDED_NODE_ID, ClusterChange, EmbeddedCluster, NodeIdentity


def test_the_embedded_node_serves_every_partition_and_shard() -> None:
    cluster = EmbeddedCluster()
    node = cluster.local()
    assert node.node_id == EMBEDDED_NODE_ID
    assert cluster.alive() == (node,)
    assert cluster.owns("t", 7) and cluster.leader_of("t", 7) == node
    assert cluster.owns_shard(49) and cluster.shard_owner(49) == node


def test_advertising_sets_the_address_and_tells_listeners() -> None:
    cluster = EmbeddedCluster(NodeIdentity(3, "", 0))
    changes: list[ClusterChange] = []
    unsubscribe = cluster.subscribe(changes.append)
    node = cluster.advertise("broker.example", 9092, "rack-a")
    assert node == NodeIdentity(3, "broker.example", 9092, "rack-a") == cluster.local()
    assert changes == [ClusterChange((node,), ownership_changed=False)]
    unsubscribe()
    cluster.advertise("other", 1)
    assert len(changes) == 1


def test_the_embedded_node_knows_no_leader_epoch_but_its_own_partitions() -> None:
    cluster = EmbeddedCluster()
    assert cluster.leader_epoch_of("t", 0) == -1  # the node serving it reads S from the partition
