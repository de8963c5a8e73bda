"""Read committed with a real client (librdkafka, through confluent_kafka) against a broker
run in this process, so the test can write transaction markers through the engine as the
coordinator does. The transactional batches go in as raw Produce requests with fixed
producer ids, each first made ongoing in the coordinator's state machine.

A read_committed consumer gets the committed records only, stops at the first transaction
still open (ListOffsets answers it that offset as the end of the partition) and goes on once
that transaction commits; a read_uncommitted consumer gets every data record."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition

from martlet.broker.app import Broker
from martlet.broker.config import ServeConfig, with_listen
from martlet.engine.api import TopicPartition
from martlet.protocol.codec import build, request_type
from martlet.records.build import NewRecord, Producer, build_batch
from tests.integration.clients import confluent_consumer
from tests.integration.raw_client import RawClient

pytestmark = pytest.mark.integration

T = TypeVar("T")
TOPIC = "read-committed"
TP = TopicPartition(TOPIC, 0)
CALL_S = 10.0  # a call into the broker's loop that takes longer fails the test
CONSUME_S = 20.0  # how long a consumer may take to deliver what it must
QUIET_POLLS = 3  # consume calls of QUIET_S each that must deliver nothing at an open transaction
QUIET_S = 0.5
NOW_MS = 1_700_000_000_000
PRODUCE = 0


class InProcessBroker:
    """`martlet serve` on an event loop of its own thread, its engine reachable from the test."""

    def __init__(self, data_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="broker-loop", daemon=True)
        self.thread.start()
        self.broker = Broker(with_listen(ServeConfig(data_dir=str(data_dir)), "127.0.0.1:0"))
        host, port = self.call(self.broker.start())
        self.bootstrap = f"{host}:{port}"

    def call(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(CALL_S)

    def marker(self, producer_id: int, commit: bool) -> int:
        async def append() -> int:
            return self.broker.engine.partitions.append_control(TP, producer_id, 0, commit, 0, NOW_MS)

        return self.call(append())

    def close(self) -> None:
        try:
            self.call(self.broker.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(CALL_S)
            self.loop.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    instance = InProcessBroker(tmp_path / "data")
    try:
        yield instance
    finally:
        instance.close()


class Writer:
    """Raw Produce requests (v9, acks=all) with fixed producer ids and their sequences; the
    coordinator is told first that each producer's transaction (id tx-<producer id>) holds
    the partition, since the produce path verifies it (KIP-890 part 1)."""

    def __init__(self, broker: InProcessBroker) -> None:
        self.broker = broker
        self.client = RawClient(broker.bootstrap)
        self.sequences: dict[int, int] = {}

    def ongoing(self, producer_id: int) -> None:
        async def add() -> None:  # on the broker's clock, an hour to run: its timer must not abort it
            engine = self.broker.broker.engine
            machine, now_ms = engine.transactions.coordinator, engine.clock.now_ms()
            if machine.get(f"tx-{producer_id}") is None:
                machine.init_producer_id(f"tx-{producer_id}", 3_600_000, now_ms, fresh_id=producer_id)
            machine.add_partitions(f"tx-{producer_id}", producer_id, 0, [TP], now_ms)

        self.broker.call(add())

    def send(self, values: list[bytes], producer_id: int = -1) -> int:
        records = [NewRecord(None, value, NOW_MS) for value in values]
        if producer_id < 0:
            batch = build_batch(records)
        else:
            self.ongoing(producer_id)
            sequence = self.sequences.get(producer_id, 0)
            self.sequences[producer_id] = sequence + len(values)
            batch = build_batch(records, producer=Producer(producer_id, 0, sequence), transactional=True)
        body = {"transactional_id": None if producer_id < 0 else f"tx-{producer_id}", "acks": -1, "timeout": 10_000,
                "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": bytes(batch)}]}]}
        answer = self.client.request(build(request_type(PRODUCE, 9), body)).responses[0].partition_responses[0]
        assert answer.error_code == 0, answer
        return int(answer.base_offset)


def consume(consumer: Consumer, count: int) -> list[bytes]:
    """Exactly `count` values, within CONSUME_S."""
    got: list[bytes] = []
    for _ in range(int(CONSUME_S / QUIET_S)):
        for message in consumer.consume(num_messages=100, timeout=QUIET_S):
            if message.error() is not None:
                raise KafkaException(message.error())
            got.append(message.value())
        if len(got) >= count:
            break
    assert len(got) == count, got
    return got


def nothing_more(consumer: Consumer) -> None:
    for _ in range(QUIET_POLLS):
        assert [message.value() for message in consumer.consume(num_messages=100, timeout=QUIET_S)] == []


def write_history(broker: InProcessBroker, writer: Writer) -> int:
    """An aborted, a committed and an open transaction between plain records; returns where
    the open one begins."""
    writer.send([b"p0"])
    writer.send([b"a0", b"a1"], producer_id=7)
    writer.send([b"b0"], producer_id=8)
    writer.send([b"a2"], producer_id=7)
    broker.marker(7, commit=False)
    broker.marker(8, commit=True)
    writer.send([b"p1"])
    open_first = writer.send([b"c0"], producer_id=9)  # stays open for now
    writer.send([b"p2"])
    writer.send([b"c1"], producer_id=9)
    return open_first


def test_read_committed_sees_committed_records_and_stops_at_an_open_transaction(broker: InProcessBroker) -> None:
    broker.call(broker.broker.engine.topics.create(TOPIC, 1, {}))
    writer = Writer(broker)
    try:
        open_first = write_history(broker, writer)
    finally:
        writer.client.close()
    committed = confluent_consumer(broker.bootstrap, **{"isolation.level": "read_committed"})
    uncommitted = confluent_consumer(broker.bootstrap, **{"isolation.level": "read_uncommitted"})
    try:
        committed.assign([KafkaPartition(TOPIC, 0, 0)])
        assert consume(committed, 3) == [b"p0", b"b0", b"p1"]
        nothing_more(committed)
        assert committed.get_watermark_offsets(KafkaPartition(TOPIC, 0), timeout=CALL_S, cached=False)[1] == open_first

        broker.marker(9, commit=True)
        assert consume(committed, 3) == [b"c0", b"p2", b"c1"]

        uncommitted.assign([KafkaPartition(TOPIC, 0, 0)])
        everything = [b"p0", b"a0", b"a1", b"b0", b"a2", b"p1", b"c0", b"p2", b"c1"]
        assert consume(uncommitted, len(everything)) == everything  # markers are never delivered
    finally:
        committed.close()
        uncommitted.close()


def test_after_a_restart_the_open_transaction_still_holds_read_committed_consumers(tmp_path: Path) -> None:
    first = InProcessBroker(tmp_path / "data")
    try:
        first.call(first.broker.engine.topics.create(TOPIC, 1, {}))
        writer = Writer(first)
        try:
            write_history(first, writer)
        finally:
            writer.client.close()
    finally:
        first.close()
    broker = InProcessBroker(tmp_path / "data")  # the log recovered: open transaction, aborted list
    committed = confluent_consumer(broker.bootstrap, **{"isolation.level": "read_committed"})
    try:
        committed.assign([KafkaPartition(TOPIC, 0, 0)])
        assert consume(committed, 3) == [b"p0", b"b0", b"p1"]  # read from the store, not memory
        nothing_more(committed)
        broker.marker(9, commit=True)
        assert consume(committed, 3) == [b"c0", b"p2", b"c1"]
    finally:
        committed.close()
        broker.close()
