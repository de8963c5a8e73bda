"""LocalCluster handles the processes of a loopback cluster: each admin and broker gets its
ZooKeeper chroot, store path, port and data dir; kill, stop, restart, pause, add and stop-all
do what they say; a process that fails to start fails start() with its log and leaves nothing
running.

Most tests drive a stand-in for `martlet admin`/`martlet serve` (tests/fixtures/fake_martlet.py)
on the real reference ZooKeeper: they test the process handling, not the cluster. The last
test runs the real commands with a Kafka client, once this tree has them.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from martlet.compat.reference.cluster import (
    ClusterOptions,
    LocalCluster,
    LocalClusterError,
)
from martlet.compat.reference.kafka import port_open
from tests.fixtures.martlet import wait_until

pytestmark = pytest.mark.integration

FAKE_MARTLET = (sys.executable, str(Path(__file__).resolve().parents[1] / "fixtures" / "fake_martlet.py"))
UNUSED_HDFS = "hdfs://127.0.0.1:9"  # the stand-in never connects to its store
EXIT_TIMEOUT_S = 10.0


@pytest.fixture
def fake_cluster(reference_zookeeper, tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    made: list[LocalCluster] = []

    def make(brokers: int = 3, admins: int = 1, **options: object) -> LocalCluster:
        cluster = LocalCluster(brokers=brokers, admins=admins, zookeeper=reference_zookeeper.address,
                               hdfs_url=UNUSED_HDFS, workdir=tmp_path / f"cluster-{len(made)}",
                               options=ClusterOptions(martlet_command=FAKE_MARTLET, **options))
        made.append(cluster)
        return cluster.start()

    try:
        yield make
    finally:
        for cluster in made:
            cluster.stop()


def test_each_process_gets_the_cluster_chroot_store_and_its_own_port_and_data_dir(
    fake_cluster, reference_zookeeper
) -> None:
    cluster = fake_cluster(brokers=3, admins=2)
    other = fake_cluster(brokers=1, admins=0)

    assert cluster.chroot != other.chroot and cluster.store_url != other.store_url
    assert cluster.store_url == f"{UNUSED_HDFS}/{cluster.name}"
    ports = [broker.port for broker in cluster.brokers]
    assert len(set(ports)) == 3 and other.brokers[0].port not in ports
    assert cluster.bootstrap == ",".join(f"127.0.0.1:{port}" for port in ports)
    assert all(port_open("127.0.0.1", port) for port in ports), cluster.log_report()
    for broker in cluster.brokers:
        args = _args_line(broker.log_path)
        assert f"--zookeeper {reference_zookeeper.address}{cluster.chroot} " in args
        assert f"--store {cluster.store_url} " in args
        assert f"--listen 127.0.0.1:{broker.port} " in args
        assert f"--data-dir {cluster.workdir / 'data' / f'broker-{broker.index}'}" in args
    assert [admin.alive for admin in cluster.admins] == [True, True]
    assert _chroot_exists(reference_zookeeper.address, cluster.chroot)


def test_kill_and_start_brings_a_broker_back_on_its_port_and_data_dir(fake_cluster) -> None:
    cluster = fake_cluster(brokers=2, admins=0)
    broker = cluster.broker(1)
    port, pid = broker.port, broker.pid

    cluster.kill(1)
    assert not broker.alive and broker.returncode == -signal.SIGKILL
    assert not port_open("127.0.0.1", port)
    assert cluster.broker(0).alive

    cluster.start_broker(1)
    assert broker.alive and broker.pid != pid and broker.port == port
    assert port_open("127.0.0.1", port)
    assert (cluster.workdir / "data" / "broker-1" / "starts").read_text() == "started\n" * 2


def test_stop_broker_is_graceful_and_a_running_broker_cannot_be_started_twice(fake_cluster) -> None:
    cluster = fake_cluster(brokers=1, admins=0)
    with pytest.raises(LocalClusterError, match="is running"):
        cluster.start_broker(0)
    assert cluster.stop_broker(0) == 0  # the stand-in exits 0 on SIGTERM, not killed
    assert "stopping" in cluster.broker(0).log_tail()


def test_paused_broker_is_stopped_until_resumed(fake_cluster) -> None:
    cluster = fake_cluster(brokers=1, admins=0)
    pid = cluster.broker(0).pid
    cluster.pause_broker(0)
    assert wait_until(lambda: _state(pid) == "T", EXIT_TIMEOUT_S)
    cluster.resume_broker(0)
    assert wait_until(lambda: _state(pid) in ("S", "R"), EXIT_TIMEOUT_S)


def test_add_broker_and_admin_restarts(fake_cluster) -> None:
    cluster = fake_cluster(brokers=1, admins=1)
    added = cluster.add_broker()
    assert added.index == 1 and added.alive and port_open("127.0.0.1", added.port)
    assert cluster.bootstrap.split(",")[1] == f"127.0.0.1:{added.port}"

    first_id = cluster.admins[0].ready_match.group(1)
    cluster.kill_admin(0)
    assert not cluster.admins[0].alive
    cluster.start_admin(0)
    assert cluster.admins[0].alive and cluster.admins[0].ready_match.group(1) != first_id
    assert cluster.add_admin().index == 1


def test_stop_ends_every_process_even_paused_ones_and_is_idempotent(fake_cluster) -> None:
    cluster = fake_cluster(brokers=2, admins=1)
    processes = [*cluster.brokers, *cluster.admins]
    cluster.pause_broker(0)
    cluster.stop()
    assert not any(process.alive for process in processes)
    assert [process.returncode for process in processes] == [0, 0, 0]  # all by SIGTERM
    cluster.stop()


def test_stop_not_graceful_kills_every_process(fake_cluster) -> None:
    cluster = fake_cluster(brokers=2, admins=1)
    processes = [*cluster.brokers, *cluster.admins]
    cluster.stop(graceful=False)
    assert [process.returncode for process in processes] == [-signal.SIGKILL] * 3


def test_a_process_that_fails_to_start_fails_start_and_leaves_nothing_running(
    reference_zookeeper, tmp_path: Path
) -> None:
    options = ClusterOptions(martlet_command=FAKE_MARTLET, serve_args=("--fail-start",), start_timeout_s=20)
    cluster = LocalCluster(brokers=2, admins=1, zookeeper=reference_zookeeper.address, hdfs_url=UNUSED_HDFS,
                           workdir=tmp_path, options=options)
    with pytest.raises(LocalClusterError, match="fake start failure"):
        cluster.start()
    assert not any(process.alive for process in [*cluster.admins, *cluster.brokers])


def test_a_martlet_without_the_cluster_commands_is_refused_before_anything_starts(tmp_path: Path) -> None:
    options = ClusterOptions(martlet_command=(sys.executable, "-c", "import sys; sys.exit(2)"))
    cluster = LocalCluster(brokers=1, admins=1, zookeeper="127.0.0.1:9", hdfs_url=UNUSED_HDFS, workdir=tmp_path,
                           options=options)
    with pytest.raises(LocalClusterError, match="cluster commands of issue 11 are missing"):
        cluster.start()
    assert cluster.brokers == [] and cluster.admins == []


def test_real_cluster_serves_a_kafka_client_through_its_bootstrap(request: pytest.FixtureRequest) -> None:
    local_cluster = request.getfixturevalue("local_cluster")
    from tests.integration.clients import (
        check_round_trip,
        confluent_consume,
        confluent_consumer,
        confluent_create_topic,
        confluent_produce,
        make_records,
        unique_topic,
    )

    cluster = local_cluster(brokers=3, admins=1)
    topic = unique_topic("cluster")
    confluent_create_topic(cluster.bootstrap, topic)
    records = make_records(300)
    acks = confluent_produce(cluster.bootstrap, topic, records)
    consumer = confluent_consumer(cluster.bootstrap)
    try:
        check_round_trip(records, acks, confluent_consume(consumer, topic, len(records)))
    finally:
        consumer.close()


def _args_line(log_path: Path) -> str:
    first = log_path.read_text().splitlines()[0]
    assert first.startswith("args: "), first
    return first + " "


def _chroot_exists(address: str, chroot: str) -> bool:
    client = KazooClient(hosts=address, timeout=10.0)
    client.start(timeout=EXIT_TIMEOUT_S)
    try:
        return client.exists(chroot) is not None
    finally:
        client.stop()
        client.close()


def _state(pid: int | None) -> str:
    """The one-letter state of a process (T: stopped by a signal) from /proc."""
    assert pid is not None
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]

