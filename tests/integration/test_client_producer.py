"""The native SDK's producer on a real broker: routing by logical partition, answers from
memory with (V, S, C), and Swift's guarantee held by a history check (every message the
client saw persisted is stored exactly once, per-key order holds) through a graceful restart,
a kill -9 of the broker, and a kill -9 of broker and client together.

Messages carry their sequence number as value and `k<seq % KEYS>` as key; the checker reads
the whole topic back with confluent-kafka.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from martlet.client.admin import Admin
from martlet.client.message import Message
from martlet.client.producer import Producer, SimpleProducer
from martlet.client.routing import Router
from martlet.protocol.native import Write, decode_write_answer, write_request
from martlet.records.build import NewRecord, build_batch
from tests.fixtures.martlet import wait_until
from tests.support.native_producer import KEYS, check_history, check_split, read_all, write_through

pytestmark = pytest.mark.integration

FENCED_LEADER_EPOCH = 74


def test_keys_go_to_the_partition_of_their_slot_and_answers_come_from_memory(martlet: Any) -> None:
    with Admin(martlet.bootstrap) as admin:
        layout = admin.create_topic("native-routing", 4)
        assert layout.resource_name.startswith("martlet#native-routing#") and layout.version == 1
        assert [(p.slot_start, p.slot_end) for p in layout.partitions] == [
            (0, 16384), (16384, 32768), (32768, 49152), (49152, 65536)]
        assert admin.describe_topic(layout.resource_name) == admin.describe_topic("native-routing")
    written: list[Message] = []
    with Producer(martlet.bootstrap, "native-routing", on_written=written.append) as producer:
        for seq in range(2_000):
            producer.send(str(seq).encode(), b"k%d" % (seq % KEYS))
        producer.wait_persisted(30)
        assert sum(producer.checkpoint(p) for p in range(4)) == 2_000
    router = Router([(p.slot_start, p.slot_end) for p in layout.partitions])
    records = read_all(martlet.bootstrap, "native-routing", 4)
    assert all(partition == router.partition(key) for partition, _, key, _ in records)
    assert {(m.partition, m.offset, m.sequence) for m in written} == {(p, o, s) for p, o, _, s in records}
    check_history(records, set(range(2_000)), 2_000)
    assert len({p for p, _, _, _ in records}) == 4


def test_a_stale_session_is_refused_with_the_current_one_and_an_empty_write_tells_c(martlet: Any) -> None:
    with Admin(martlet.bootstrap) as admin:
        session = admin.create_topic("native-stale", 1).partitions[0].session
    with SimpleProducer(martlet.bootstrap, "native-stale", 0) as producer:
        assert [m.offset for m in producer.put([b"a", b"b", b"c"])] == [0, 1, 2]
    batch = build_batch([NewRecord(None, b"d", int(time.time() * 1000))])
    with socket.create_connection(("127.0.0.1", martlet.port), timeout=10) as sock:
        def write(version: int, session_named: int, records: bytes) -> tuple[int, int, int, int, int]:
            sock.sendall(b"".join(write_request(5000, [Write("native-stale", 0, version, session_named, records)],
                                                7, "raw")))
            (answer,) = decode_write_answer(_read(sock, int.from_bytes(_read(sock, 4), "big")))[1]
            return answer.error_code, answer.base_offset, answer.version, answer.session, answer.checkpoint

        assert wait_until(lambda: write(1, session, b"")[4] == 3, 10)  # an empty write tells C
        assert write(1, session + 1, bytes(batch)) == (FENCED_LEADER_EPOCH, -1, 1, session, 3)
        assert write(2, session, bytes(batch)) == (FENCED_LEADER_EPOCH, -1, 1, session, 3)
        assert write(1, session, bytes(batch))[:4] == (0, 3, 1, session)
        assert write(9, 9, b"")[:4] == (0, -1, 1, session)  # never refused: it names no batch


def _read(sock: Any, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


@pytest.mark.parametrize("hard", [False, True], ids=["restart", "kill-9"])
def test_a_restart_during_a_million_message_write_loses_nothing_and_duplicates_nothing(
        martlet_process: Any, hard: bool) -> None:
    broker = martlet_process(http=None)
    count = 1_000_000 if not hard else 300_000
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("native-reload", 4)
    persisted = write_through(broker.bootstrap, "native-reload", count, lambda: broker.restart(hard=hard))
    assert persisted == set(range(count))
    check_history(read_all(broker.bootstrap, "native-reload", 4), persisted, count)


CLIENT = """
import sys, time
from martlet.client.producer import Producer
persisted = []
def report(m):
    persisted.append(m.sequence)
    if len(persisted) % 500 == 0:
        print(" ".join(map(str, persisted)), flush=True); persisted.clear()
producer = Producer(sys.argv[1], "native-both", on_persisted=report)
print("started", flush=True)
for seq in range(10**7):
    producer.send(str(seq).encode(), b"k%d" % (seq % 50))
"""


def test_broker_and_client_killed_together_lose_only_what_was_above_the_last_c(martlet_process: Any,
                                                                               tmp_path: Path) -> None:
    broker = martlet_process(http=None)
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("native-both", 4)
    errors = (tmp_path / "client.err").open("wb")
    client = subprocess.Popen([sys.executable, "-c", CLIENT, broker.bootstrap], stdout=subprocess.PIPE,
                              stderr=errors, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    errors.close()
    reported: set[int] = set()
    assert client.stdout is not None
    with client.stdout:
        try:
            assert client.stdout.readline().strip() == b"started", (tmp_path / "client.err").read_text()
            while len(reported) < 100_000:
                line = client.stdout.readline()
                assert line, f"the client stopped reporting: {(tmp_path / 'client.err').read_text()}"
                reported.update(int(seq) for seq in line.split())
            os.kill(client.pid, signal.SIGKILL)  # the two die together: what neither finished is gone
            broker.kill()
        finally:
            client.kill()
            client.wait(10)
        reported.update(int(seq) for line in client.stdout.read().splitlines() for seq in line.split())
    broker.start()
    records = read_all(broker.bootstrap, "native-both", 4)
    check_history(records, reported, 10**7)
    print(f"reported persisted: {len(reported)}, stored: {len(records)}")


def test_a_native_producer_follows_an_online_split_at_once_and_keeps_each_key_in_order(martlet: Any) -> None:
    """Partitions added while 200,000 keyed messages are written: the writer follows the new V
    at once; a key's records before the split are in its old partition below the recorded split
    point, those after it in the partition the new ranges name, and every message is stored once."""
    count = 200_000
    with Admin(martlet.bootstrap) as admin:
        admin.create_topic("native-split", 2)
        grown: list[Any] = []
        persisted = write_through(martlet.bootstrap, "native-split", count,
                                  lambda: grown.append(admin.add_partitions("native-split", 5)), keys=500, timeout_s=60)
    (layout,) = grown
    assert layout.version == 2 and persisted == set(range(count))
    assert sorted(p.index for p in layout.partitions if p.parent >= 0) == [2, 3, 4]
    check_split(read_all(martlet.bootstrap, "native-split", 5), layout, persisted, count)

