"""The reference ZooKeeper behaves as the cluster tests need: kazoo reads back what it wrote,
a short outage (stop + restart on the same port and data) keeps sessions and their ephemeral
nodes, and a paused server answers nothing until it is resumed."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient, KazooState

from martlet.compat.reference.zookeeper import ReferenceZooKeeper, four_letter_word
from tests.fixtures.martlet import wait_until

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_S = 10.0  # long enough to outlast a restart of the JVM (about a second)
CONNECT_TIMEOUT_S = 15.0
SILENT_S = 1.0  # how long a paused server is given to (not) answer


def connect(address: str, chroot: str = "", timeout_s: float = SESSION_TIMEOUT_S) -> KazooClient:
    # Reconnect attempts at most 0.5 s apart: kazoo's default backoff grows to minutes.
    retry = {"max_tries": -1, "delay": 0.1, "backoff": 1.5, "max_delay": 0.5}
    client = KazooClient(hosts=address + chroot, timeout=timeout_s, connection_retry=retry)
    client.start(timeout=CONNECT_TIMEOUT_S)
    return client


@pytest.fixture
def chroot(reference_zookeeper: ReferenceZooKeeper) -> Iterator[str]:
    """A path of this test's own on the shared server, removed afterwards. It exists before
    the test connects under it (kazoo warns about a chroot that does not exist)."""
    path = f"/test-{uuid.uuid4().hex[:8]}"
    client = connect(reference_zookeeper.address)
    try:
        client.create(path)
    finally:
        client.stop()
        client.close()
    yield path
    client = connect(reference_zookeeper.address)
    try:
        client.delete(path, recursive=True)
    finally:
        client.stop()
        client.close()


def test_started_server_serves_kazoo_and_four_letter_words(reference_zookeeper, chroot) -> None:
    assert reference_zookeeper.alive and reference_zookeeper.pid
    assert reference_zookeeper.address == f"127.0.0.1:{reference_zookeeper.port}"
    client = connect(reference_zookeeper.address)
    try:
        client.create(f"{chroot}/brokers/0", b"127.0.0.1:9092", makepath=True)
        data, stat = client.get(f"{chroot}/brokers/0")
        assert data == b"127.0.0.1:9092" and stat.version == 0
        assert client.get_children(f"{chroot}/brokers") == ["0"]
    finally:
        client.stop()
        client.close()
    assert four_letter_word(reference_zookeeper.address, "ruok") == "imok"
    assert "Mode: standalone" in (four_letter_word(reference_zookeeper.address, "srvr") or "")


def test_session_and_ephemeral_node_survive_a_restart_within_the_session_timeout(
    reference_zookeeper, chroot
) -> None:
    owner = connect(reference_zookeeper.address, chroot)
    reconnected = threading.Event()
    try:
        owner.create("/members/a", b"alive", ephemeral=True, makepath=True)
        session_id = owner.client_id[0]
        owner.add_listener(lambda state: reconnected.set() if state == KazooState.CONNECTED else None)
        port = reference_zookeeper.port

        reference_zookeeper.stop_process()
        assert four_letter_word(f"127.0.0.1:{port}", "ruok") is None  # really gone
        reference_zookeeper.restart()

        assert reference_zookeeper.port == port
        assert reconnected.wait(CONNECT_TIMEOUT_S), reference_zookeeper.log_tail()
        assert owner.client_id[0] == session_id
        assert _visible_to_another_client(reference_zookeeper, f"{chroot}/members/a")
    finally:
        owner.stop()
        owner.close()
    # The node was the session's: closing the session removes it, so the check above could fail.
    assert not _visible_to_another_client(reference_zookeeper, f"{chroot}/members/a")


def test_paused_server_answers_nothing_until_resumed(reference_zookeeper, chroot) -> None:
    client = connect(reference_zookeeper.address, chroot)
    try:
        client.create("/during-pause", b"before", makepath=True)
        reference_zookeeper.pause()
        try:
            assert four_letter_word(reference_zookeeper.address, "ruok", timeout_s=SILENT_S) is None
        finally:
            reference_zookeeper.resume()
        assert wait_until(lambda: four_letter_word(reference_zookeeper.address, "ruok") == "imok", CONNECT_TIMEOUT_S)
        client.set("/during-pause", b"after")
        assert client.get("/during-pause")[0] == b"after"
        assert client.state == KazooState.CONNECTED
    finally:
        client.stop()
        client.close()


def _visible_to_another_client(zookeeper: ReferenceZooKeeper, path: str) -> bool:
    observer = connect(zookeeper.address)
    try:
        return observer.exists(path) is not None
    finally:
        observer.stop()
        observer.close()
