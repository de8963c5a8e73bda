"""Log compaction seen by real clients: a compacted topic refuses records without a key as
the reference Kafka does, and librdkafka reading a compacted topic from the start gets every
live key once, with its latest value, at the offset it was written at, across the gaps."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from martlet.protocol.codec import build, request_type
from martlet.records.build import NewRecord, build_batch
from martlet.records.decode import decode_records
from martlet.records.header import iter_batches
from tests.fixtures.martlet import wait_until
from tests.fixtures.reference_pair import Both
from tests.integration.raw_client import RawClient
from tests.support.fetching import fetch_body
from tests.support.kafka_admin import create

pytestmark = pytest.mark.integration

PRODUCE, FETCH = 0, 1
KEYS = 40
COMPACTION_WAIT_S = 60.0


@pytest.mark.java
def test_records_without_a_key_are_refused_as_kafka_refuses_them(both: Both) -> None:
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    create(both, topic, 1, {"cleanup.policy": "compact"})
    batch = _keyed_batch([b"k1", None, b"k2", None])
    body = {"transactional_id": None, "acks": -1, "timeout": 30_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    ours, theirs = (a.responses[0].partition_responses[0] for a in both.ask(PRODUCE, 9, body))
    shown = [(int(p.error_code), p.error_message, [(e.batch_index, e.batch_index_error_message)
                                                   for e in p.record_errors]) for p in (ours, theirs)]
    assert shown[0] == shown[1]


def _keyed_batch(keys: list[bytes | None]) -> bytes:
    return bytes(build_batch([NewRecord(key, b"v", 1_700_000_000_000) for key in keys]))


def test_a_reader_from_the_start_gets_every_live_key_once(martlet_process: Any, tmp_path: Path) -> None:
    _compacts(martlet_process(extra_args=_fast_rounds(tmp_path)))


def test_compaction_on_hdfs(martlet_process: Any, reference_hdfs: Any, tmp_path: Path) -> None:
    store = ["--store", f"{reference_hdfs.url}/martlet-{uuid.uuid4().hex[:8]}"]
    _compacts(martlet_process(extra_args=_fast_rounds(tmp_path) + store))


def _fast_rounds(tmp_path: Path) -> list[str]:
    config = tmp_path / "martlet.toml"
    config.write_text("[engine]\ncompaction_check_ms = 200\n")  # a compaction pass five times a second
    return ["--config", str(config)]


def _compacts(martlet: Any) -> None:
    bootstrap = martlet.bootstrap
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
               "delete.retention.ms": "600000"}
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    written: dict[bytes, tuple[int, bytes | None]] = {}
    rounds = 0

    def write_round() -> None:
        nonlocal rounds
        rounds += 1
        for i in range(KEYS):
            key = b"key-%02d" % i
            value = None if (i % 10 == 0 and rounds > 1) else b"round-%d" % rounds  # some keys end deleted
            producer.produce(topic, key=key, value=value, on_delivery=lambda err, msg: _note(written, err, msg))
        producer.flush(30)

    def compacted() -> bool:
        write_round()  # each round rolls the segment (segment.ms) and gives the cleaner more to do
        return len(_read_all(bootstrap, topic)) < rounds * KEYS * 0.75

    assert wait_until(compacted, COMPACTION_WAIT_S, interval_s=0.3), (rounds, martlet.log_tail())
    final = dict(written)
    # one more round of other keys seals everything above into cleanable segments
    filler_rounds = 0

    def settled() -> bool:
        nonlocal filler_rounds
        filler_rounds += 1
        for i in range(5):
            producer.produce(topic, key=b"filler-%d" % i, value=b"x")
        producer.flush(30)
        got = [r for r in _read_all(bootstrap, topic) if r[1].startswith(b"key-")]
        return sorted((key, offset, value) for offset, key, value in got) == sorted(
            (key, offset, value) for key, (offset, value) in final.items())

    assert wait_until(settled, COMPACTION_WAIT_S, interval_s=0.3), martlet.log_tail()


def _note(written: dict[bytes, tuple[int, bytes | None]], err: Any, msg: Any) -> None:
    assert err is None, err
    written[msg.key()] = (msg.offset(), msg.value())


def _read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """Every record of partition 0 from the start up to its current end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[int, bytes, bytes | None]] = []
        position = 0
        for _ in range(10_000):
            if position >= high:
                break
            message = consumer.poll(5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF: what is left are gaps
                    break
                raise AssertionError(message.error())
            got.append((message.offset(), message.key(), message.value()))
            position = message.offset() + 1
        return got
    finally:
        consumer.close()


def test_transactions_on_a_compacted_topic_leave_the_committed_values_and_no_stale_markers(
        martlet_process: Any, tmp_path: Path) -> None:
    """A committed, an aborted and a committed transaction over the same keys: compaction
    removes the aborted records at once, then the first two markers once their records are
    gone and delete.retention.ms passed, as Kafka does; a read_committed reader from the
    start still gets every key's committed value once."""
    martlet = martlet_process(extra_args=_fast_rounds(tmp_path))
    bootstrap, topic = martlet.bootstrap, f"compacted-txn-{uuid.uuid4().hex[:8]}"
    configs = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
               "delete.retention.ms": "1000"}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    final: dict[bytes, tuple[int, bytes | None]] = {}
    for value, commit in ((b"first", True), (b"aborted", False), (b"last", True)):
        producer.begin_transaction()
        for i in range(KEYS):
            producer.produce(topic, key=b"key-%02d" % i, value=value,
                             on_delivery=lambda err, msg, c=commit: c and _note(final, err, msg))
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    plain = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    client = RawClient(bootstrap)

    def cleaned() -> bool:
        plain.produce(topic, key=b"filler", value=b"x")  # rolls the segment (segment.ms): more to clean
        plain.flush(30)
        kept, markers = _batches(client, topic)
        return b"aborted" not in kept and b"first" not in kept and markers == 1

    try:
        assert wait_until(cleaned, COMPACTION_WAIT_S, interval_s=0.3), (_batches(client, topic), martlet.log_tail())
    finally:
        client.close()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: dict[bytes, tuple[int, bytes | None]] = {}
        wait_until(lambda: _poll_into(consumer, got) and len(got) >= KEYS + 1, 30)
    finally:
        consumer.close()
    assert {key: entry for key, entry in got.items() if key.startswith(b"key-")} == final


def _batches(client: RawClient, topic: str) -> tuple[list[bytes | None], int]:
    """The values of partition 0 read uncommitted from the start, and how many markers it holds."""
    values, markers, offset = [], 0, 0
    while True:
        answer = client.request(build(request_type(FETCH, 12), fetch_body([(topic, 0, offset, 1 << 20)])))
        data = answer.responses[0].partitions[0].records or b""
        if not data:
            return values, markers
        for at, header in iter_batches(data):
            batch = data[at:at + header.size]
            markers += header.is_control
            values += [] if header.is_control else [record.value for record in decode_records(batch)]
            offset = header.next_offset


def _poll_into(consumer: Consumer, got: dict[bytes, tuple[int, bytes | None]]) -> bool:
    message = consumer.poll(1)
    if message is not None and message.error() is None:
        got[message.key()] = (message.offset(), message.value())
    return True
