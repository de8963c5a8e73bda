"""Services frozen, not stopped (issue 48): SIGSTOP of the reference HDFS (one broker on it)
or of the reference ZooKeeper (a cluster of one broker and an admin) for two minutes, under a
producer (acks=1, 200 records/s) and a consumer group with auto commit, on a topic with
`martlet.visibility=memory`. A frozen service keeps its connections open and answers
nothing: every store call hangs until its deadline (engine/store/workers.py), every ZooKeeper
call until kazoo's own timeouts.

What must hold: delivery goes on from memory with its latency (p99 within 2x of before), the
group is not rebalanced, a new group joins during the freeze and reads, commits succeed once
the service is back (during an HDFS freeze they are answered retriably), every acknowledged
record is persisted once (read back after a kill -9), and nothing in Martlet still waits on a
stuck store call (the threads hdfs-native never lets go of are counted). Run with -s to see
the figures.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from martlet.compat.bench.failover import all_led, wait_for
from tests.fixtures.martlet import wait_until
from tests.integration.clients import unique_topic
from tests.integration.delivery_load import GroupReader, PacedProducer, p99, stored_once, summary
from tests.support.durability import store_args

pytestmark = pytest.mark.integration

PARTITIONS = 2
BEFORE_S = 15.0  # the load runs this long before the freeze
# how long the service stays frozen: the scenario under test, not a wait for anything (MARTLET_FREEZE_S=600
# for the bench run issue 48 asks for)
FREEZE_S = float(os.environ.get("MARTLET_FREEZE_S", "120"))
AFTER_S = 20.0  # the load goes on this long after it
RATE_PER_S = 200.0
# A delivery that waited on the frozen service would take seconds (a session timeout, a
# retried call); below this, a p99 over twice the one before the freeze is the shared
# machine's noise (one run: 6.4 ms during against 3.1 before; alone right after: 2.4 and 2.4).
NOT_A_STALL_S = 0.05
PERSISTED_S = 240.0  # after the thaw, until every record is in the store (a reopen may wait for lease recovery)


@dataclass
class Frozen:
    """What a freeze left: the load's two readers and the moments that frame it."""

    producer: PacedProducer
    reader: GroupReader
    late: GroupReader
    measured_from: float
    frozen_at: float
    thawed_at: float
    joined_s: float | None
    committed_after: bool


def _http(address: str, path: str) -> dict:  # type: ignore[type-arg]
    with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as answer:
        return json.loads(answer.read())  # type: ignore[no-any-return]


def _all_persisted(address: str, topic: str) -> bool:
    partitions = _http(address, f"/api/v1/topics/{topic}")["partitions"]
    return all(p["checkpoint"] == p["end_offset"] for p in partitions)


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"martlet.visibility": "memory"})],
                                  operation_timeout=30, request_timeout=30)
    created[topic].result(timeout=60)


def _freeze_under_load(bootstrap: str, topic: str, pause: Callable[[], None], resume: Callable[[], None]) -> Frozen:
    _create(bootstrap, topic)
    producer = PacedProducer(bootstrap, topic, PARTITIONS, RATE_PER_S).start()
    reader = GroupReader(bootstrap, topic, f"g-{uuid.uuid4().hex[:8]}").start()
    late = GroupReader(bootstrap, topic, f"late-{uuid.uuid4().hex[:8]}", reset="latest")
    joined_s = None
    try:
        assert wait_until(lambda: bool(reader.assigned) and len(reader.delivered) > 100, 60), "no delivery"
        measured_from = time.time()
        threading.Event().wait(BEFORE_S)  # the load runs before the freeze
        frozen_at = time.time()
        pause()
        try:
            threading.Event().wait(FREEZE_S / 4)  # calls in flight are stuck by now
            late.start()
            if wait_until(lambda: bool(late.assigned), 60):
                joined_s = late.assigned[0] - frozen_at
            threading.Event().wait(max(frozen_at + FREEZE_S - time.time(), 0))  # the service stays frozen
        finally:
            resume()
        thawed_at = time.time()
        threading.Event().wait(AFTER_S)  # the load goes on after the thaw
        producer.stop()
        committed_after = wait_until(lambda: "NO_ERROR" in late.commits_between(thawed_at, float("inf"))
                                     and "NO_ERROR" in reader.commits_between(thawed_at, float("inf")), 60)
    finally:
        reader.stop()
        if late.assigned or late.delivered:
            late.stop()
    return Frozen(producer, reader, late, measured_from, frozen_at, thawed_at, joined_s, committed_after)


def _check(frozen: Frozen, http: str, topic: str) -> None:
    """Everything the issue asks of a freeze, but the read back after a kill -9."""
    reader, late = frozen.reader, frozen.late
    before = reader.latencies(frozen.measured_from, frozen.frozen_at)
    during = reader.latencies(frozen.frozen_at, frozen.thawed_at)
    after = reader.latencies(frozen.thawed_at, float("inf"))
    print(f"\ndelivery before the freeze: {summary(before)}\nduring it: {summary(during)}\nafter it: {summary(after)}"
          f"\nnew group: assigned {frozen.joined_s} s into the freeze, "
          f"{len(late.latencies(frozen.frozen_at, frozen.thawed_at))} records delivered during it; "
          f"its commits during the freeze: {sorted(set(late.commits_between(frozen.frozen_at, frozen.thawed_at)))}")
    worst = [(latency, sent - frozen.frozen_at)
             for latency, sent in reader.worst(frozen.frozen_at, frozen.thawed_at, 30)]
    commit_times = [round(at - frozen.frozen_at, 2) for at, _ in reader.commits
                    if frozen.frozen_at <= at < frozen.thawed_at]
    print("worst during (latency ms @ s into the freeze):",
          " ".join(f"{lat * 1000:.0f}@{at:.2f}" for lat, at in worst))
    print("commits at:", commit_times)
    assert not frozen.producer.errors, frozen.producer.errors[:5]
    assert len(during) >= FREEZE_S * RATE_PER_S * 0.9, f"only {len(during)} records delivered during the freeze"
    assert p99(during) <= max(2 * p99(before), NOT_A_STALL_S), (summary(before), summary(during))
    assert reader.rebalances() == 0, ("rebalanced", reader.assigned, reader.revoked)
    assert frozen.joined_s is not None, "a new group got no assignment during the freeze"
    assert late.latencies(frozen.frozen_at, frozen.thawed_at), "the new group read nothing during the freeze"
    assert frozen.committed_after, ("commits did not succeed after the thaw", late.commits[-5:], reader.commits[-5:])
    assert wait_until(lambda: _all_persisted(http, topic), PERSISTED_S), _http(http, f"/api/v1/topics/{topic}")
    persisted_s = time.time() - frozen.thawed_at
    # Nothing waits on a call stuck in the HDFS client any more; hdfs-native never returns from
    # an hsync a frozen DataNode held, so those threads stay blocked, counted in stuck_calls.
    store = _http(http, "/api/v1/status")["store"]
    print(f"persisted {persisted_s:.1f} s after the thaw; store: {store}")
    assert store["healthy"] and store["unpersisted_bytes"] == 0, store


def test_hdfs_frozen_for_two_minutes_stops_no_delivery_and_no_group(martlet_process, reference_hdfs,
                                                                     tmp_path) -> None:
    config = tmp_path / "martlet.toml"
    config.write_text("[groups]\ninitial_rebalance_delay_ms = 0\n")
    broker = martlet_process(extra_args=[*store_args(reference_hdfs), "--config", str(config)])
    topic = unique_topic("frozen-hdfs")
    frozen = _freeze_under_load(broker.bootstrap, topic, reference_hdfs.pause, reference_hdfs.resume)
    _check(frozen, broker.http, topic)
    broker.restart(hard=True)  # kill -9: what is read back was persisted
    assert stored_once(broker.bootstrap, topic, PARTITIONS, frozen.producer.acked) == []


def test_zookeeper_frozen_for_two_minutes_stops_no_delivery_and_no_group(local_cluster, reference_zookeeper) -> None:
    cluster = local_cluster(brokers=1, admins=1)
    topic = unique_topic("frozen-zk")
    frozen = _freeze_under_load(cluster.bootstrap, topic, reference_zookeeper.pause, reference_zookeeper.resume)
    _check(frozen, f"127.0.0.1:{cluster.broker(0).http_port}", topic)
    cluster.kill(0)  # kill -9: what is read back was persisted
    cluster.start_broker(0)
    wait_for(lambda: all_led(cluster.bootstrap, topic), 60, "the partitions to be served again")
    assert stored_once(cluster.bootstrap, topic, PARTITIONS, frozen.producer.acked) == []
