"""The UDP listener's routing, checks and counters (gateway/udp.py) on an in-memory broker
(the handler tests' harness: Engine on MemoryStore, manual clock), datagrams handed to
`UdpListener.take` without a socket."""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import Iterator
from dataclasses import replace

from martlet.engine.api import TopicPartition
from martlet.engine.catalog.ranges import initial_ranges, partition_of_slot, slot_of
from martlet.engine.settings import EngineSettings
from martlet.gateway.udp import UdpListener
from martlet.records import compression
from martlet.records.build import NewRecord, Producer, build_batch
from martlet.records.decode import Record, decode_records
from martlet.records.header import iter_batches
from tests.support.stores import BUDGET_BYTES, StoreDown, persister_retries
from tests.unit.gateway.handlers.fake_cluster import ThreeNodes
from tests.unit.gateway.handlers.harness import CALL_S_MAX, NOW_MS, Broker

SOURCE = "10.0.0.9"


def listener_of(broker: Broker, rate: int = 0) -> UdpListener:
    return UdpListener(broker.ctx, "127.0.0.1", 0, rate, now_s=lambda: 0.0)


def take(broker: Broker, listener: UdpListener, *datagrams: bytes, source: str = SOURCE) -> None:
    """Hand the datagrams over on the broker's loop, append what they gathered, persist it."""
    async def run() -> None:
        for datagram in datagrams:
            listener.take(datagram, source)
        listener.flush()

    broker.loop.run_until_complete(asyncio.wait_for(run(), CALL_S_MAX))
    broker.loop.run_until_complete(asyncio.wait_for(broker.engine.flush(), CALL_S_MAX))


def batches(broker: Broker, topic: str, partition: int) -> list[list[Record]]:
    data = broker.loop.run_until_complete(broker.engine.partitions.read(TopicPartition(topic, partition), 0, 1 << 20))
    return [list(decode_records(bytes(data[pos:pos + header.size]))) for pos, header in iter_batches(data)]


def outcomes(listener: UdpListener) -> dict[str, object]:
    counts = listener.counters.as_json()
    return {name: value for name, value in counts.items() if value and name != "listen"}


def binary(topic: str, partition: int, batch: bytes) -> bytes:
    name = topic.encode()
    return b"\x00" + struct.pack(">h", len(name)) + name + struct.pack(">i", partition) + batch


def test_datagrams_taken_together_become_one_batch_per_partition(broker: Broker) -> None:
    broker.create_topic("t", 3)
    listener = listener_of(broker)
    keys = [b"k%d" % i for i in range(30)]
    take(broker, listener, *(b"t " + key + b"\nv-" + key for key in keys))
    expected: dict[int, list[bytes]] = {}
    for key in keys:
        expected.setdefault(partition_of_slot(initial_ranges(3), slot_of(key)), []).append(key)
    for partition, wanted in expected.items():
        found = batches(broker, "t", partition)
        assert len(found) == 1  # one batch per partition
        assert [(r.key, r.value, r.timestamp) for r in found[0]] == [(k, b"v-" + k, NOW_MS) for k in wanted]
    assert outcomes(listener) == {"received": 30, "accepted": 30, "records": 30}


def test_keyless_records_go_round_robin(broker: Broker) -> None:
    broker.create_topic("t", 3)
    listener = listener_of(broker)
    take(broker, listener, *(b"t\n%d" % i for i in range(7)))
    assert [[r.value for batch in batches(broker, "t", p) for r in batch] for p in range(3)] == [
        [b"0", b"3", b"6"], [b"1", b"4"], [b"2", b"5"]]


def test_a_partition_served_elsewhere_is_counted_not_served() -> None:
    broker = Broker(cluster=ThreeNodes())  # this node leads partition 0 of 3
    try:
        broker.create_topic("t", 3)
        listener = listener_of(broker)
        keys = [b"k%d" % i for i in range(30)]
        here = [key for key in keys if partition_of_slot(initial_ranges(3), slot_of(key)) == 0]
        take(broker, listener, *(b"t " + key + b"\nv" for key in keys), *(b"t\nkeyless" for _ in range(4)))
        assert outcomes(listener) == {"received": 34, "accepted": len(here) + 4, "records": len(here) + 4,
                                      "not_served": 30 - len(here)}
        assert sum(len(batch) for batch in batches(broker, "t", 0)) == len(here) + 4  # keyless: served ones only
    finally:
        broker.close()


def test_a_full_memory_budget_drops_and_counts() -> None:
    store = StoreDown()
    broker = Broker(store, EngineSettings(topic_partitions_max=64, memory_bytes=BUDGET_BYTES))
    try:
        broker.create_topic("t")
        store.down = True
        listener = listener_of(broker)
        big = b"t\n" + b"x" * 30_000
        broker.loop.run_until_complete(asyncio.wait_for(_take_until_full(listener, big), CALL_S_MAX))
        assert not broker.engine.partitions.has_room()
        assert listener.counters.dropped_full == 1
        store.down = False
        broker.loop.run_until_complete(asyncio.wait_for(persister_retries(broker), CALL_S_MAX))
        take(broker, listener, big)  # room again: taken
        assert listener.counters.dropped_full == 1 and listener.counters.accepted >= 2
    finally:
        store.down = False  # let close() drain
        broker.close()


async def _take_until_full(listener: UdpListener, datagram: bytes) -> None:
    while listener.counters.dropped_full == 0:
        listener.take(datagram, SOURCE)
        listener.flush()
        assert listener.counters.accepted < 10, "the budget never filled"


def test_checks_of_the_topic(broker: Broker) -> None:
    broker.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    broker.create_topic("window", 1, {"message.timestamp.after.max.ms": "1000"})
    broker.create_topic("small", 1, {"max.message.bytes": "200"})
    listener = listener_of(broker)
    future = build_batch([NewRecord(b"k", b"v", NOW_MS + 60_000)])
    keyless = build_batch([NewRecord(None, b"v", NOW_MS)])
    take(broker, listener, b"compacted\nno key", binary("compacted", 0, keyless), b"compacted k\nkeyed",
         binary("window", 0, future), binary("small", 0, build_batch([NewRecord(b"k", b"v" * 300, NOW_MS)])),
         binary("t-none", 0, keyless))
    assert outcomes(listener) == {"received": 6, "accepted": 1, "records": 1, "malformed": 4, "unknown_topic": 1}


def test_only_the_topics_named_may_be_written(broker: Broker) -> None:
    """[udp] topics (required when the listeners authenticate): any other topic is refused,
    counted not_allowed, never created."""
    broker.create_topic("metrics", 1)
    broker.create_topic("orders", 1)
    broker.ctx.settings = replace(broker.ctx.settings, auto_create_topics=True)
    listener = UdpListener(broker.ctx, "127.0.0.1", 0, 0, ["metrics"], now_s=lambda: 0.0)
    keyless = build_batch([NewRecord(None, b"v", NOW_MS)])
    take(broker, listener, b"metrics\nok", b"orders\nno", binary("orders", 0, keyless), b"fresh\nno")
    assert outcomes(listener) == {"received": 4, "accepted": 1, "records": 1, "not_allowed": 3}
    assert broker.ctx.topics.find("fresh") is None


def test_log_append_time_and_compression_type(broker: Broker) -> None:
    broker.create_topic("appended", 1, {"message.timestamp.type": "LogAppendTime", "compression.type": "zstd"})
    listener = listener_of(broker)
    take(broker, listener, b"appended\ntext", binary("appended", 0, build_batch([NewRecord(b"k", b"bin", 5)])))
    data = broker.loop.run_until_complete(broker.engine.partitions.read(TopicPartition("appended", 0), 0, 1 << 20))
    headers = [header for _, header in iter_batches(data)]
    assert [(h.compression, h.is_log_append_time, h.max_timestamp) for h in headers] == [
        (compression.ZSTD, True, NOW_MS)] * 2
    assert outcomes(listener) == {"received": 2, "accepted": 2, "records": 2}


def test_an_idempotent_batch_sent_twice_is_stored_once(broker: Broker) -> None:
    broker.create_topic("t")
    init = broker.call(22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                                "producer_epoch": -1})
    producer = Producer(init.producer_id, init.producer_epoch, 0)
    datagram = binary("t", 0, build_batch([NewRecord(b"k", b"once", NOW_MS)], producer=producer))
    listener = listener_of(broker)
    take(broker, listener, datagram, datagram)
    assert [r.value for batch in batches(broker, "t", 0) for r in batch] == [b"once"]
    assert outcomes(listener) == {"received": 2, "accepted": 2, "records": 1}


def test_the_rate_limit_counts(broker: Broker) -> None:
    broker.create_topic("t")
    listener = listener_of(broker, rate=5)
    take(broker, listener, *(b"t\nx" for _ in range(8)))
    take(broker, listener, b"t\nother source", source="10.0.0.10")
    assert outcomes(listener) == {"received": 9, "accepted": 6, "records": 6, "rate_limited": 3}


def test_auto_create_starts_the_topic_on_the_first_datagram() -> None:
    broker = Broker(auto_create_topics=True)
    try:
        listener = listener_of(broker)
        take(broker, listener, b"fresh\nfirst")
        assert listener.counters.unknown_topic == 1
        broker.loop.run_until_complete(asyncio.wait_for(listener.wait_created(), CALL_S_MAX))
        take(broker, listener, b"fresh\nsecond", b"__consumer_offsets\nnever")
        assert [r.value for batch in batches(broker, "fresh", 0) for r in batch] == [b"second"]
        assert broker.ctx.topics.find("__consumer_offsets") is None
    finally:
        broker.close()


def mutations(rng: random.Random, seeds: list[bytes], count: int) -> Iterator[bytes]:
    """Garbage, truncations and bit flips of valid datagrams."""
    for _ in range(count):
        seed = bytearray(rng.choice(seeds))
        kind = rng.randrange(4)
        if kind == 0:
            yield rng.randbytes(rng.randrange(0, 200))
        elif kind == 1:
            yield bytes(seed[:rng.randrange(0, len(seed) + 1)])
        else:
            for _ in range(rng.randrange(1, 4)):
                seed[rng.randrange(len(seed))] ^= 1 << rng.randrange(8)
            yield bytes(seed)


def test_every_datagram_ends_in_exactly_one_outcome(broker: Broker) -> None:
    """20,000 mutated datagrams: none raises, and each is counted once (accepted or dropped)."""
    broker.create_topic("t", 2)
    broker.create_topic("c", 1, {"cleanup.policy": "compact", "compression.type": "gzip"})
    seeds = [b"t k\nvalue", b"t\nvalue", b"c key\nv",
             binary("t", 1, build_batch([NewRecord(b"k", b"v", NOW_MS)] * 3)),
             binary("c", -1, build_batch([NewRecord(b"k", b"v" * 50, NOW_MS)], compression=compression.LZ4))]
    listener = listener_of(broker)
    take(broker, listener, *mutations(random.Random(16), seeds, 20_000))
    counts = listener.counters
    assert counts.received == 20_000
    assert counts.received == sum(getattr(counts, outcome) for outcome in counts.OUTCOMES)
    assert counts.accepted > 0 and counts.malformed > 0
