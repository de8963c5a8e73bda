"""The native producer through a partition move (issue 16, point 3): two brokers on the
session's ZooKeeper and HDFS; one is killed with kill -9 while 200,000 keyed messages are
written, its partitions reload on the other with a new S, and the producer, refused or cut
off, finds the new leader (LAYOUT), learns the new (V, S, C) and resends what the dead
broker never persisted. The history check of test_client_producer.py then finds every
message the client saw persisted exactly once, each key in order.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from martlet.client.admin import Admin
from martlet.client.producer import Producer
from martlet.compat.bench.failover import all_led, leaders, node_ids, wait_for
from tests.integration.test_client_producer import KEYS, check_history, read_all

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
    written = threading.Semaphore(0)
    persisted: set[int] = set()
    failed: list[Exception] = []
    producer = Producer(cluster.bootstrap, "native-move", on_written=lambda m: written.release(),
                        on_persisted=lambda m: persisted.add(m.sequence), on_failed=lambda m, e: failed.append(e))
    killed = threading.Event()

    def kill_midway() -> None:
        for _ in range(COUNT // 3):
            assert written.acquire(timeout=60), "the writes stalled before the kill"
        cluster.kill(victim)
        killed.set()

    killer = threading.Thread(target=kill_midway, daemon=True)
    killer.start()
    try:
        for seq in range(COUNT):
            producer.send(str(seq).encode(), b"k%d" % (seq % KEYS))
        killer.join(120)
        assert killed.is_set()
        producer.wait_persisted(180)
    finally:
        producer.close()
    assert not failed, failed[:3]
    assert persisted == set(range(COUNT))
    survivor = by_port[cluster.brokers[1 - victim].port]
    assert set(leaders(cluster.bootstrap, "native-move").values()) == {survivor}
    check_history(read_all(cluster.bootstrap, "native-move", PARTITIONS), persisted, COUNT)
