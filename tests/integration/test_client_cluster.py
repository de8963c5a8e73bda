"""The native SDK on a cluster: two brokers on the session's ZooKeeper and HDFS, shared by
the tests here in file order (the last one kills a broker).

- An online split (issue 16, point 4): the topic is grown through the broker that does not
  serve partition 0, so partition 0's owner records that split point a moment later; a
  native producer writes 200,000 keyed messages through the split and a native broadcast
  reader, reading all along, gets each key's messages in send order.
- A group of native consumers (point 1) with its coordinator and the partitions' leaders on
  both brokers: shared, handed over, resumed from its commits.
- A partition move (point 3): the leader of every partition is killed with kill -9 during a
  write; the partitions reload on the other broker with a new S, and the producer, refused
  or cut off, finds the new leader (LAYOUT), learns the new (V, S, C) and resends what the
  dead broker never persisted. The history check (tests/support/native_producer.py) then
  finds every message the client saw persisted exactly once, each key in order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from martlet.client.admin import Admin
from martlet.client.consumer import Consumer
from martlet.client.message import Message
from martlet.compat.bench.failover import all_led, leaders, node_ids, wait_for
from martlet.compat.reference.cluster import ClusterOptions, LocalCluster
from tests.support.native_consumer import expected, produce, read_until, values
from tests.support.native_producer import check_history, check_split, read_all, write_through

pytestmark = pytest.mark.integration

PARTITIONS = 4
COUNT = 200_000
SPLIT_COUNT = 100_000
READ_S = 120.0


@pytest.fixture(scope="module")
def two_brokers(reference_zookeeper: Any, reference_hdfs: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    workdir: Path = tmp_path_factory.mktemp("native-cluster")
    cluster = LocalCluster(brokers=2, admins=1, zookeeper=reference_zookeeper.address, hdfs_url=reference_hdfs.url,
                           workdir=workdir, options=ClusterOptions())
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def test_an_online_split_in_a_cluster_keeps_each_key_in_order_for_native_readers(two_brokers: LocalCluster) -> None:
    bootstrap, topic = two_brokers.bootstrap, "native-split-cluster"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, 2)
    wait_for(lambda: all_led(bootstrap, topic), 60, "every partition to have a leader")
    by_port = node_ids(bootstrap)
    grower = next(process.port for process in two_brokers.brokers  # not partition 0's node: its split point is pending
                  if by_port.get(process.port) != leaders(bootstrap, topic)[0])
    with Admin(f"127.0.0.1:{grower}") as admin:
        seen: list[Message] = []
        reading = threading.Event()
        reader = threading.Thread(target=read_along, args=(bootstrap, topic, seen, reading), daemon=True)
        reader.start()
        persisted = write_through(bootstrap, topic, SPLIT_COUNT, lambda: admin.add_partitions(topic, 4), keys=500,
                                  timeout_s=120)
        assert persisted == set(range(SPLIT_COUNT))
        wait_for(lambda: all(p.split_offset >= 0 for p in admin.describe_topic(topic).partitions if p.parent >= 0),
                 30, "the parents' owners to record the split points")
        layout = admin.describe_topic(topic)
    assert by_port[grower] != leaders(bootstrap, topic)[0], "partition 0 moved to the growing node"
    reader.join(READ_S)
    assert not reader.is_alive() and reading.is_set(), f"the reader got {len(seen)} of {SPLIT_COUNT}"
    check_split(read_all(bootstrap, topic, 4), layout, persisted, SPLIT_COUNT)
    assert sorted(int(m.value or b"") for m in seen) == list(range(SPLIT_COUNT))
    by_key: dict[bytes | None, list[int]] = {}
    for message in seen:
        by_key.setdefault(message.key, []).append(int(message.value or b""))
    assert all(values == sorted(values) for values in by_key.values()), "a key delivered out of order"


def read_along(bootstrap: str, topic: str, seen: list[Message], done: threading.Event) -> None:
    """A native broadcast reader from the start of `topic`, until it has SPLIT_COUNT messages."""
    deadline = time.monotonic() + READ_S
    with Consumer(bootstrap, "native-split-reader", [topic], broadcast=True) as consumer:
        while len(seen) < SPLIT_COUNT and time.monotonic() < deadline:
            seen += consumer.poll(0.5)
    if len(seen) >= SPLIT_COUNT:
        done.set()


def test_a_native_group_on_a_cluster_splits_hands_over_and_resumes(two_brokers: LocalCluster) -> None:
    """Group members on two brokers (the coordinator, a coordinator shard's owner, on either;
    the admin places the 50 shards on both): they share the topic, one hands its partitions over by
    closing (committing), and a later member resumes from the commits: nothing twice, nothing lost."""
    bootstrap, topic, group = two_brokers.bootstrap, "native-group-cluster", "native-cluster-group"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, 4)
    wait_for(lambda: all_led(bootstrap, topic), 60, "every partition to have a leader")
    produce(bootstrap, topic, 4, 40)
    first = Consumer(bootstrap, group, [topic], commit_interval_s=1.0)
    second = Consumer(bootstrap, group, [topic], commit_interval_s=1.0)
    seen: list[list[Message]] = [[], []]
    try:
        read_until([first, second], seen, lambda: len(first.assignment()) == 2 == len(second.assignment())
                   and len(seen[0]) + len(seen[1]) == 40)
        second.close()  # commits its positions, then leaves
        read_until([first], seen, lambda: len(first.assignment()) == 4)
        produce(bootstrap, topic, 4, 40, first=40)
        read_until([first], seen, lambda: len(seen[0]) + len(seen[1]) == 80)
    finally:
        first.close()
        second.close()
    every = seen[0] + seen[1]
    assert len({(m.partition, m.offset) for m in every}) == 80 and set(values(every)) == expected(0, 80)
    produce(bootstrap, topic, 4, 20, first=80)
    later: list[list[Message]] = [[]]
    with Consumer(bootstrap, group, [topic]) as third:
        read_until([third], later, lambda: len(later[0]) >= 20)
    assert set(values(later[0])) == expected(80, 20)


def test_a_partition_moved_by_a_broker_kill_during_a_native_write_loses_nothing(two_brokers: LocalCluster) -> None:
    cluster = two_brokers
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
