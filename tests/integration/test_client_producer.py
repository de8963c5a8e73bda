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
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from martlet.client.admin import Admin
from martlet.client.message import Message
from martlet.client.producer import Producer, SimpleProducer
from martlet.client.routing import Router
from martlet.protocol.native import TopicLayout, Write, decode_write_answer, write_request
from martlet.records.build import NewRecord, build_batch
from tests.fixtures.martlet import wait_until

pytestmark = pytest.mark.integration

KEYS = 50
FENCED_LEADER_EPOCH = 74


def read_all(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> list[tuple[int, int, bytes, int]]:
    """(partition, offset, key, sequence) of every record, read up to each partition's end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False,
                         "fetch.max.bytes": 50 << 20})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions) if ends[p] > 0])
        got: list[tuple[int, int, bytes, int]] = []
        left = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout_s
        while left and time.monotonic() < deadline:
            for record in consumer.consume(10_000, 0.5):
                assert record.error() is None, record.error()
                got.append((record.partition(), record.offset(), record.key(), int(record.value())))
                if record.offset() + 1 >= ends[record.partition()]:
                    left.discard(record.partition())
        assert not left, f"partitions {sorted(left)} not read to their end in {timeout_s} s"
        return got
    finally:
        consumer.close()


def check_history(records: list[tuple[int, int, bytes, int]], must_have: set[int], may_have: int,
                  split: dict[int, int] | None = None) -> None:
    """Every sequence in `must_have` stored once, nothing stored twice, nothing outside
    range(may_have), and each key's records in sequence order: in one partition, or with
    `split` (partition -> the partition it split off from) first those in the parent, then
    those in the child."""
    counts = Counter(seq for _, _, _, seq in records)
    twice = [seq for seq, n in counts.items() if n > 1]
    assert not twice, f"{len(twice)} messages stored twice, e.g. {twice[:5]}"
    missing = must_have - counts.keys()
    assert not missing, f"{len(missing)} persisted messages missing, e.g. {sorted(missing)[:5]}"
    assert all(0 <= seq < may_have for seq in counts)
    by_key: dict[bytes, list[tuple[int, int, int]]] = {}
    for partition, offset, key, seq in records:
        by_key.setdefault(key, []).append((partition, offset, seq))
    for key, placed in by_key.items():
        partitions = {p for p, _, _ in placed}
        assert len(partitions) == 1 or (split and len(partitions) == 2 and split.get(max(partitions)) == min(partitions)), \
            f"key {key!r} in partitions {sorted(partitions)}"
        in_log_order = [seq for _, _, seq in sorted(placed, key=lambda r: (r[0] in (split or {}), r[1]))]
        assert in_log_order == sorted(in_log_order), f"key {key!r} out of order"


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


def write_through(bootstrap: str, topic: str, count: int, fault: Callable[[], object], keys: int = KEYS,
                  timeout_s: float = 120.0) -> set[int]:
    """Write `count` messages (value: the sequence number, key: k<seq % keys>) with a native
    Producer, run `fault` on another thread once a third of them are written (the last third is
    sent only after it: on an idle machine the writes could otherwise all be done before a slow
    fault), and return the sequences the producer saw persisted (none failed, the fault ran)."""
    written = threading.Semaphore(0)
    persisted: set[int] = set()
    failed: list[Exception] = []
    producer = Producer(bootstrap, topic, on_written=lambda m: written.release(),
                        on_persisted=lambda m: persisted.add(m.sequence), on_failed=lambda m, e: failed.append(e))
    done = threading.Event()

    def midway() -> None:
        for _ in range(count // 3):
            assert written.acquire(timeout=60), "the writes stalled before the fault"
        fault()
        done.set()

    thread = threading.Thread(target=midway, daemon=True)
    thread.start()
    try:
        for seq in range(count):
            if seq == 2 * count // 3:
                assert done.wait(timeout_s), "the fault did not happen"
            producer.send(str(seq).encode(), b"k%d" % (seq % keys))
        thread.join(timeout_s)
        assert done.is_set()
        producer.wait_persisted(timeout_s)
    finally:
        producer.close()
    assert not failed, failed[:3]
    return persisted


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


def check_split(records: list[tuple[int, int, bytes, int]], layout: TopicLayout, persisted: set[int], count: int) -> None:
    """The history check across a split (`layout`: the grown topic with its split points): a
    key's records written before the split are in its old partition below the split point,
    those after it in the partition the new ranges name, and every message is stored once."""
    splits = {p.index: (p.parent, p.split_offset) for p in layout.partitions if p.parent >= 0}
    assert all(offset >= 0 for _, offset in splits.values()), splits
    check_history(records, persisted, count, {child: parent for child, (parent, _) in splits.items()})
    router = Router([(p.slot_start, p.slot_end) for p in layout.partitions])
    split_at = {parent: offset for parent, offset in splits.values()}
    moved = [(p, o, key) for p, o, key, _ in records if p != router.partition(key)]
    assert moved, "no message was written before the split"
    assert all(o < split_at[p] for p, o, _ in moved), "a record of the old ranges above the split point"
    assert any(p in splits for p, _, _, _ in records), "nothing reached the new partitions"
