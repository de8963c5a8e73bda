"""Who serves what: node identity and the membership/ownership view.

A Martlet broker is one node. Today one node serves every partition and coordinates every
group (the embedded view below); a later cluster view answers the same questions from a
coordination service, so the code that asks ("is this partition mine?", "who coordinates
this group?") does not change when ownership starts to move.

The view names two kinds of thing a node can own:
    (topic, partition)      a data partition: its node appends to the log and serves reads
    coordinator shard n     one internal partition of committed offsets, group records and
                            transactional ids (engine/coordinator/runtime.py maps a key to
                            its shard)
A group's coordinator is the owner of the group's coordinator shard, as in Kafka, where the
coordinator of a group is the leader of its `__consumer_offsets` partition:
`Engine.coordinator_of(group_id)` asks the view for the owner of `Groups.shard_of(group_id)`.

Listeners get a ClusterChange whenever the view changes (a node comes or goes, ownership
moves, the local node's advertised address is set); they run on the caller's thread and
must not block.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from .ids import Ids
from .types import TopicPartition

EMBEDDED_NODE_ID = 1  # the node id a single broker advertises (Kafka's broker.id)


def new_cluster_id(ids: Ids) -> str:
    """A new cluster id as Kafka makes them: a random UUID in URL-safe base64."""
    cluster_id = "-"
    while cluster_id.startswith("-"):  # as Kafka's ids: a leading '-' reads as a CLI option
        cluster_id = base64.urlsafe_b64encode(ids.uuid().bytes).decode().rstrip("=")
    return cluster_id


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    """A node as clients and other nodes see it: Metadata's broker entry."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    http: str | None = None  # opaque to the engine: the gateway's HTTP address, null where none is published
    # Opaque to the engine too: the gateway's listeners as "NAME://host:port", as clients on
    # each reach this node; none where a node has one listener (host and port say it).
    endpoints: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterChange:
    """What moved: the nodes now alive, and whether ownership may have changed."""

    alive: tuple[NodeIdentity, ...]
    ownership_changed: bool


ClusterListener = Callable[[ClusterChange], None]


class Listeners:
    """The listeners of a ClusterView: `add` returns the function that removes one again."""

    def __init__(self) -> None:
        self._listeners: list[ClusterListener] = []

    def add(self, listener: ClusterListener) -> Callable[[], None]:
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def tell(self, change: ClusterChange) -> None:
        for listener in list(self._listeners):
            listener(change)


class ClusterView(Protocol):
    """Membership and ownership as one node sees them."""

    def local(self) -> NodeIdentity:
        """This node."""
        ...

    def alive(self) -> tuple[NodeIdentity, ...]:
        """Nodes currently alive, by node id."""
        ...

    def leader_of(self, topic: str, partition: int) -> NodeIdentity | None:
        """The node serving (topic, partition); None while nobody does."""
        ...

    def owns(self, topic: str, partition: int) -> bool:
        """True if this node serves (topic, partition): appends and reads happen here."""
        ...

    def leader_epoch_of(self, topic: str, partition: int) -> int:
        """The session S (Kafka's leader epoch) of (topic, partition) at the node serving it,
        as far as this view knows it; -1 when unknown. A node serving the partition itself
        answers from the partition instead."""
        ...

    def shard_owner(self, shard: int) -> NodeIdentity | None:
        """The node owning coordinator shard `shard`, i.e. coordinating its groups."""
        ...

    def owns_shard(self, shard: int) -> bool:
        ...

    def advertise(self, host: str, port: int, rack: str | None = None, http: str | None = None,
                  endpoints: tuple[str, ...] = ()) -> NodeIdentity:
        """Announce the address clients reach this node at, once its listener is bound, and
        `http` and `endpoints`, which other nodes pass on untouched (the gateway's HTTP port,
        its listeners); returns the node's identity with them."""
        ...

    def subscribe(self, listener: ClusterListener) -> Callable[[], None]:
        """Call `listener` on every change; returns the function that unsubscribes."""
        ...

    def cluster_id(self) -> str | None:
        """The cluster's id (Kafka's) when the coordination service keeps it; None: the
        store keeps it (one node, nobody to race with)."""
        ...

    def controller(self) -> NodeIdentity:
        """The node clients send controller-bound admin requests to (Metadata's controller_id).
        Martlet's controller, the admin leader, speaks no Kafka, so this is a live broker that
        passes such requests on to it: the one with the lowest node id."""
        ...

    def reassignments(self) -> Mapping[TopicPartition, int]:
        """Moves an operator asked for (AlterPartitionReassignments) and the admin has not
        finished: partition -> target node id."""
        ...

    async def reassign(self, moves: Mapping[TopicPartition, int | None]) -> None:
        """Ask the admin to move partitions to nodes (None cancels a pending request). The
        caller has checked that each target node is alive."""
        ...


class EmbeddedCluster:
    """One node that serves every partition and every coordinator shard (`martlet serve`).

    The advertised address is known only once the listener is bound, so it starts as given
    and `advertise` replaces it (listeners are told)."""

    def __init__(self, node: NodeIdentity | None = None) -> None:
        self._node = node or NodeIdentity(EMBEDDED_NODE_ID, "", 0)
        self._listeners = Listeners()

    def local(self) -> NodeIdentity:
        return self._node

    def alive(self) -> tuple[NodeIdentity, ...]:
        return (self._node,)

    def leader_of(self, topic: str, partition: int) -> NodeIdentity | None:
        return self._node

    def owns(self, topic: str, partition: int) -> bool:
        return True

    def leader_epoch_of(self, topic: str, partition: int) -> int:
        return -1  # this node serves every partition: its own session is the answer

    def shard_owner(self, shard: int) -> NodeIdentity | None:
        return self._node

    def owns_shard(self, shard: int) -> bool:
        return True

    def advertise(self, host: str, port: int, rack: str | None = None, http: str | None = None,
                  endpoints: tuple[str, ...] = ()) -> NodeIdentity:
        """Set the address clients are told to use for this node (its HTTP address, its listeners)."""
        self._node = replace(self._node, host=host, port=port, rack=rack, http=http, endpoints=endpoints)
        self._listeners.tell(ClusterChange(self.alive(), ownership_changed=False))
        return self._node

    def cluster_id(self) -> str | None:
        return None

    def controller(self) -> NodeIdentity:
        return self._node

    def reassignments(self) -> Mapping[TopicPartition, int]:
        return {}  # every partition is here already: a move to this node is done at once

    async def reassign(self, moves: Mapping[TopicPartition, int | None]) -> None:
        return None

    def subscribe(self, listener: ClusterListener) -> Callable[[], None]:
        return self._listeners.add(listener)
