"""A cluster view of three nodes for handler tests: this node is 1, nodes 2 and 3 are elsewhere.

Partition p of every topic is led by node (p % 3) + 1, unless a test sets `unplaced` or
changes `alive`. Nodes other than this one report leader epoch `REMOTE_EPOCH`. Moves asked
through `reassign` are recorded and become pending reassignments, as an admin that has not
finished them yet would list them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from martlet.engine.api import NodeIdentity, TopicPartition
from martlet.engine.cluster import ClusterListener

LOCAL = NodeIdentity(1, "", 0)
NODE_2 = NodeIdentity(2, "10.0.0.2", 9093, rack="r2")
NODE_3 = NodeIdentity(3, "10.0.0.3", 9094)
REMOTE_EPOCH = 7


class ThreeNodes:
    def __init__(self, controller: NodeIdentity = NODE_2) -> None:
        self.nodes = {node.node_id: node for node in (LOCAL, NODE_2, NODE_3)}
        self.dead: set[int] = set()
        self.unplaced: set[TopicPartition] = set()
        self.pending: dict[TopicPartition, int] = {}
        self.reassign_calls: list[dict[TopicPartition, int | None]] = []
        self._controller = controller

    def local(self) -> NodeIdentity:
        return LOCAL

    def alive(self) -> tuple[NodeIdentity, ...]:
        return tuple(node for node_id, node in sorted(self.nodes.items()) if node_id not in self.dead)

    def leader_of(self, topic: str, partition: int) -> NodeIdentity | None:
        if TopicPartition(topic, partition) in self.unplaced:
            return None
        return self.nodes[partition % 3 + 1]

    def owns(self, topic: str, partition: int) -> bool:
        leader = self.leader_of(topic, partition)
        return leader is not None and leader.node_id == LOCAL.node_id

    def leader_epoch_of(self, topic: str, partition: int) -> int:
        return -1 if self.owns(topic, partition) else REMOTE_EPOCH

    def shard_owner(self, shard: int) -> NodeIdentity | None:
        return LOCAL

    def owns_shard(self, shard: int) -> bool:
        return True

    def advertise(self, host: str, port: int, rack: str | None = None) -> NodeIdentity:
        return LOCAL

    def subscribe(self, listener: ClusterListener) -> Callable[[], None]:
        return lambda: None

    def cluster_id(self) -> str | None:
        return None

    def controller(self) -> NodeIdentity:
        return self._controller

    def reassignments(self) -> Mapping[TopicPartition, int]:
        return dict(self.pending)

    async def reassign(self, moves: Mapping[TopicPartition, int | None]) -> None:
        self.reassign_calls.append(dict(moves))
        for tp, target in moves.items():
            if target is None:
                self.pending.pop(tp, None)
            else:
                self.pending[tp] = target
