"""The native producer through a partition move (issue 16, point 3): two brokers on the
session's ZooKeeper and HDFS; one is killed with kill -9 while 200,000 keyed messages are
written, its partitions reload on the other with a new S, and the producer, refused or cut
off, finds the new leader (LAYOUT), learns the new (V, S, C) and resends what the dead
broker never persisted. The history check of test_client_producer.py then finds every
message the client saw persisted exactly once, each key in order.
"""

from __future__ import annotations

from typing import Any

import pytest

from martlet.client.admin import Admin
from martlet.compat.bench.failover import all_led, leaders, node_ids, wait_for
from tests.integration.test_client_producer import check_history, read_all, write_through

pytestmark = pytest.mark.integration

PARTITIONS = 4
COUNT = 200_000


def test_a_partition_moved_by_a_broker_kill_during_a_native_write_loses_nothing(local_cluster: Any) -> None:
    cluster = local_cluster(brokers=2, admins=1)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic("native-move", PARTITIONS)
    wait_for(lambda: all_led(cluster.bootstrap, "native-move"), 60, "every partition to have a leader")
    by_port = node_ids(cluster.bootstrap)
    led = leaders(cluster.bootstrap, "native-move")
    victim = next(index for index, process in enumerate(cluster.brokers)
                  if by_port.get(process.port) in led.values())
    persisted = write_through(cluster.bootstrap, "native-move", COUNT, lambda: cluster.kill(victim), timeout_s=180)
    assert persisted == set(range(COUNT))
    survivor = by_port[cluster.brokers[1 - victim].port]
    assert set(leaders(cluster.bootstrap, "native-move").values()) == {survivor}
    check_history(read_all(cluster.bootstrap, "native-move", PARTITIONS), persisted, COUNT)
