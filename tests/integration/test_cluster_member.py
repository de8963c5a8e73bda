"""A broker's view of the cluster (engine/zookeeper/member.py) against the reference
ZooKeeper: a partition has a leader in Metadata only while the broker it is assigned to
leads it (serves it, or opens it and holds its produce requests meanwhile). Naming the
assigned broker before it knew, when it still refused them, once sent librdkafka's pipelined
requests there: the first refused (not served yet), the next accepted (opened meanwhile)
read as a sequence gap, and the producer's epoch bump that followed stored a record of
another partition twice."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from martlet.compat.reference.zookeeper import ReferenceZooKeeper
from martlet.engine.zookeeper.layout import ASSIGNMENTS, Assignment
from martlet.engine.zookeeper.member import ZooKeeperCluster

pytestmark = pytest.mark.integration

WAIT_S = 10.0
SESSION_MS = 4000


async def eventually(condition: Callable[[], bool], what: str) -> None:
    """Poll on the event loop (the views apply ZooKeeper's news there), bounded."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not condition():
        assert loop.time() < deadline, f"timed out after {WAIT_S:.0f} s waiting for {what}"
        await asyncio.sleep(0.02)


def test_a_partition_has_a_leader_only_while_its_assigned_broker_leads_it(
    reference_zookeeper: ReferenceZooKeeper,
) -> None:
    root = f"/member-{uuid.uuid4().hex[:8]}"
    address = f"{reference_zookeeper.address}{root}"
    admin = KazooClient(hosts=reference_zookeeper.address, timeout=10)
    admin.start(timeout=15)
    broker, peer = ZooKeeperCluster(address, SESSION_MS), ZooKeeperCluster(address, SESSION_MS)

    async def scenario() -> None:
        for member in (broker, peer):
            member.connect()
        node = broker.advertise("127.0.0.1", 19001)
        peer.advertise("127.0.0.1", 19002)
        assigned: list[Assignment] = []
        broker.on_assignment = assigned.append
        admin.create(f"{root}{ASSIGNMENTS}/127.0.0.1:19001", Assignment(1, frozenset({"t/0"})).to_json())
        await eventually(lambda: bool(assigned), "the broker to read its assignment")
        # The snapshot that brought the assignment names no leader: the broker has not taken it up.
        assert broker.leader_of("t", 0) is None

        broker.set_held(frozenset(), frozenset({"t/0"}), frozenset(), 0)  # opening it
        await eventually(lambda: broker.leader_of("t", 0) == node == peer.leader_of("t", 0),
                         "both views to name the broker opening it")
        assert not broker.owns("t", 0)
        broker.set_held(frozenset({"t/0"}), frozenset(), frozenset(), 1)  # open
        assert broker.owns("t", 0) and not peer.owns("t", 0)

        broker.set_held(frozenset(), frozenset(), frozenset({"t/0"}), 1)  # releasing it: no longer led
        await eventually(lambda: peer.leader_of("t", 0) is None, "the peer to see it released")

    try:
        asyncio.run(scenario())
    finally:
        for member in (broker, peer):
            member.close()
        admin.delete(root, recursive=True)
        admin.stop()
        admin.close()
