"""The native SDK's producer tests: writing through a fault, reading a topic back whole with
confluent-kafka, and the history check (every persisted message stored once, each key in order,
also across a split)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition

from martlet.client.producer import Producer
from martlet.client.routing import Router
from martlet.protocol.native import TopicLayout

KEYS = 50


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
