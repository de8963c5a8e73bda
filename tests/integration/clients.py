"""Shared helpers for the client integration tests: record sets, round-trip checks, and thin
adapters over confluent-kafka, kafka-python and aiokafka (admin, produce, consume by
assignment, list offsets). Every wait here is bounded by a deadline.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
import uuid
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import groupby

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as ConfluentNewTopic

# kafka-python 3.0.12 loads its protocol schemas with importlib.resources.read_text/open_text,
# deprecated since Python 3.11; it warns at import time only. Ignore exactly that, here.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated",
                            category=DeprecationWarning)
    import kafka
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KafkaPythonNewTopic
    from kafka.structs import TopicPartition as KafkaPythonTopicPartition

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.structs import TopicPartition as AioTopicPartition

from tests.fixtures.martlet import wait_until

PARTITIONS = 6
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
BATCH_BYTES = 64 * 1024
LINGER_MS = 20
ADMIN_TIMEOUT_S = 60.0
FLUSH_TIMEOUT_S = 60.0
CONSUME_TIMEOUT_S = 90.0
OFFSETS_TIMEOUT_S = 30.0
TIMESTAMP_STEP_MS = 2  # records are TIMESTAMP_STEP_MS apart, so ts + 1 falls between two

Headers = tuple[tuple[str, bytes], ...]


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    @property
    def passed(self) -> bool:
        return time.monotonic() >= self.end


# -- records -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rec:
    """A record to produce; `seq` is its place in produce order (one topic, all producers)."""

    seq: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int
    codec: str


@dataclass(frozen=True)
class Got:
    """A record as a consumer returned it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


def make_records(count: int, codecs: Sequence[str] = CODECS, base_ts_ms: int | None = None) -> list[Rec]:
    """`count` records split evenly over `codecs` in that order, with strictly increasing
    explicit timestamps (a little in the past), headers on some, null keys and values on some."""
    if base_ts_ms is None:
        base_ts_ms = int(time.time() * 1000) - 15 * 60 * 1000
    per_codec = -(-count // len(codecs))
    records = []
    for seq in range(count):
        key = None if seq % 11 == 3 else b"key-%03d" % (seq % 397)
        if seq % 13 == 5 and key is not None:  # kafka-python refuses a record with neither
            value = None
        else:
            filler = b"abcdefghij" * (seq % 23) + bytes((seq * 31 + j) % 256 for j in range(seq % 17))
            value = b"value-%06d|" % seq + filler
        headers: Headers = ()
        if seq % 5 == 0:
            headers = (("seq", str(seq).encode()), ("empty", b""))
        if seq % 7 == 0:
            headers += (("dup", b"first"), ("dup", b"second\x00\xff"))
        records.append(Rec(seq, key, value, headers, base_ts_ms + TIMESTAMP_STEP_MS * seq,
                           codecs[seq // per_codec]))
    return records


def by_codec(records: Sequence[Rec]) -> list[tuple[str, list[Rec]]]:
    return [(codec, list(group)) for codec, group in groupby(records, key=lambda r: r.codec)]


def _row(partition: int, key: bytes | None, value: bytes | None, headers: Headers, ts: int) -> bytes:
    def field_bytes(b: bytes | None) -> bytes:
        return b"N" if b is None else b"B%d:" % len(b) + b

    parts = [b"P%d" % partition, field_bytes(key), field_bytes(value), b"T%d" % ts, b"H%d" % len(headers)]
    for name, hvalue in headers:
        parts += [field_bytes(name.encode()), field_bytes(hvalue)]
    return b"|".join(parts)


def checksum(rows: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for row in rows:
        digest.update(hashlib.sha256(row).digest())
    return digest.hexdigest()


def check_round_trip(records: Sequence[Rec], acks: dict[int, tuple[int, int]], got: Sequence[Got]) -> None:
    """`acks`: seq -> (partition, offset) as the producer reported. Asserts the exact count,
    dense offsets per partition, produce order per partition, equal checksums over
    (partition, key, value, headers, timestamp), and that reported offsets match."""
    assert len(acks) == len(records), f"{len(records) - len(acks)} records were never acknowledged"
    assert len(got) == len(records), f"consumed {len(got)} records, produced {len(records)}"
    expected: dict[int, list[Rec]] = {}
    for rec in records:  # produce order
        expected.setdefault(acks[rec.seq][0], []).append(rec)
    consumed: dict[int, list[Got]] = {}
    for g in got:
        consumed.setdefault(g.partition, []).append(g)
    assert sorted(consumed) == sorted(expected), (
        f"partitions consumed {sorted(consumed)} != partitions produced to {sorted(expected)}")
    assert len(expected) >= PARTITIONS - 1, f"records not spread: partitions {sorted(expected)}"
    for partition, gots in consumed.items():
        gots.sort(key=lambda g: g.offset)
        offsets = [g.offset for g in gots]
        assert offsets == list(range(len(gots))), (
            f"partition {partition}: offsets not dense 0..{len(gots) - 1}: {_first_gap(offsets)}")
    produced_rows = [_row(p, r.key, r.value, r.headers, r.timestamp_ms)
                     for p in sorted(expected) for r in expected[p]]
    consumed_rows = [_row(p, g.key, g.value, g.headers, g.timestamp_ms)
                     for p in sorted(consumed) for g in consumed[p]]
    if checksum(produced_rows) != checksum(consumed_rows):
        for p in sorted(expected):
            for index, (rec, g) in enumerate(zip(expected[p], consumed[p])):
                if _row(p, rec.key, rec.value, rec.headers, rec.timestamp_ms) != _row(
                        p, g.key, g.value, g.headers, g.timestamp_ms):
                    raise AssertionError(
                        f"checksum differs; first difference in partition {p} at offset {index}:\n"
                        f"  produced {rec}\n  consumed {g}")
        raise AssertionError("checksum differs but no per-record difference found")
    for p, recs in expected.items():
        for index, rec in enumerate(recs):
            assert acks[rec.seq] == (p, index), (
                f"seq {rec.seq}: producer reported {acks[rec.seq]}, consumer saw it at {(p, index)}")


def _first_gap(offsets: Sequence[int]) -> str:
    for index, offset in enumerate(offsets):
        if offset != index:
            return f"expected {index}, got {offset} (around {list(offsets[max(0, index - 2):index + 3])})"
    return "no gap found"


def partition_timestamps(records: Sequence[Rec], acks: dict[int, tuple[int, int]]) -> dict[int, list[int]]:
    """partition -> timestamps of its records in offset order."""
    out: dict[int, list[int]] = {}
    for rec in records:
        out.setdefault(acks[rec.seq][0], []).append(rec.timestamp_ms)
    return out


def timestamp_probes(ts_by_partition: dict[int, list[int]]) -> list[tuple[int, int, int | None]]:
    """(partition, timestamp, expected offset or None) for: before the first record, between two
    known records (a third of the way in and near the end), and after the last record."""
    probes = []
    for partition, stamps in sorted(ts_by_partition.items()):
        n = len(stamps)
        assert n >= 4 and all(a < b for a, b in zip(stamps, stamps[1:]))
        probes.append((partition, stamps[0] - 1, 0))
        for j in (n // 3, n - 1):
            assert stamps[j - 1] + 1 < stamps[j]
            probes.append((partition, stamps[j - 1] + 1, j))
        probes.append((partition, stamps[-1] + 1, None))
    return probes


def check_offsets(
    records: Sequence[Rec], acks: dict[int, tuple[int, int]],
    earliest: dict[int, int], latest: dict[int, int],
    by_time: dict[tuple[int, int], int | None],
) -> None:
    stamps = partition_timestamps(records, acks)
    counts = {p: len(s) for p, s in stamps.items()}
    assert earliest == {p: 0 for p in range(PARTITIONS)}, f"earliest offsets {earliest}"
    assert latest == {p: counts.get(p, 0) for p in range(PARTITIONS)}, f"latest {latest} != counts {counts}"
    for partition, ts, offset in timestamp_probes(stamps):
        assert by_time[(partition, ts)] == offset, (
            f"offset for time {ts} in partition {partition}: got {by_time[(partition, ts)]}, want {offset}")


# -- confluent-kafka -----------------------------------------------------------------------

def confluent_create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS,
                           config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([ConfluentNewTopic(topic, partitions, 1, config=config or {})],
                                  operation_timeout=ADMIN_TIMEOUT_S, request_timeout=ADMIN_TIMEOUT_S)
    futures[topic].result(timeout=ADMIN_TIMEOUT_S)
    assert confluent_wait_partitions(admin, topic, partitions) == partitions


def confluent_wait_partitions(client: AdminClient | Producer | Consumer, topic: str, partitions: int,
                              timeout_s: float = ADMIN_TIMEOUT_S) -> int:
    """Wait until metadata shows `topic` with `partitions` partitions, each with a leader;
    return the partition count last seen (-1 if the topic never showed up)."""
    seen = [-1]

    def ready() -> bool:
        info = client.list_topics(topic, timeout=10).topics.get(topic)
        if info is None or info.error is not None:
            return False
        seen[0] = len(info.partitions)
        return seen[0] == partitions and all(p.error is None and p.leader >= 0
                                             for p in info.partitions.values())

    wait_until(ready, timeout_s, interval_s=0.1)
    return seen[0]


def confluent_producer_conf(bootstrap: str, **extra: object) -> dict[str, object]:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": LINGER_MS,
        "batch.size": BATCH_BYTES,
        "message.timeout.ms": int(FLUSH_TIMEOUT_S * 1000),
    }
    conf.update(extra)
    return conf


def confluent_produce(bootstrap: str, topic: str, records: Sequence[Rec],
                      **extra: object) -> dict[int, tuple[int, int]]:
    """One producer per codec, in order; returns seq -> (partition, offset)."""
    acks: dict[int, tuple[int, int]] = {}
    for codec, group in by_codec(records):
        errors: list[str] = []
        producer = Producer(confluent_producer_conf(bootstrap, **{"compression.type": codec, **extra}))

        def on_delivery(seq: int, err: KafkaError | None, msg: object) -> None:
            if err is not None:  # runs inside this codec's flush, so `errors` is this codec's list
                errors.append(f"seq {seq}: {err}")  # noqa: B023
            else:
                acks[seq] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

        deadline = Deadline(FLUSH_TIMEOUT_S)
        for rec in group:
            while True:
                try:
                    producer.produce(topic, key=rec.key, value=rec.value, headers=list(rec.headers) or None,
                                     timestamp=rec.timestamp_ms, on_delivery=partial(on_delivery, rec.seq))
                    break
                except BufferError:
                    assert not deadline.passed, f"{codec}: local queue stayed full"
                    producer.poll(0.05)
            producer.poll(0)
        left = producer.flush(deadline.left())
        producer.close()
        assert left == 0, f"{codec}: {left} records still undelivered after flush"
        assert not errors, f"{codec}: delivery failed: {errors[:5]} ({len(errors)} in all)"
    return acks


def confluent_consumer(bootstrap: str, **extra: object) -> Consumer:
    # librdkafka insists on a group.id; it is never joined (assign, no subscribe, no commits).
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"assign-only-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
    }
    conf.update(extra)
    return Consumer(conf)


def confluent_consume(consumer: Consumer, topic: str, count: int, partitions: int = PARTITIONS,
                      timeout_s: float = CONSUME_TIMEOUT_S) -> list[Got]:
    """Assign every partition from offset 0 and read until `count` records or the deadline."""
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[Got] = []
    deadline = Deadline(timeout_s)
    while len(got) < count and not deadline.passed:
        for msg in consumer.consume(num_messages=5000, timeout=min(1.0, deadline.left())):
            if msg.error() is not None:
                raise KafkaException(msg.error())
            got.append(Got(msg.partition(), msg.offset(), msg.key(), msg.value(),
                           tuple(msg.headers() or ()), msg.timestamp()[1]))
    # Stop fetching: a long-poll Fetch in flight delays later requests on the same connection
    # (ListOffsets for watermarks and timestamps) by up to fetch.wait.max.ms each.
    consumer.unassign()
    return got


def confluent_offsets(consumer: Consumer, topic: str, probes: Sequence[tuple[int, int, int | None]],
                      partitions: int = PARTITIONS) -> tuple[dict[int, int], dict[int, int],
                                                             dict[tuple[int, int], int | None]]:
    earliest, latest = {}, {}
    for p in range(partitions):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=OFFSETS_TIMEOUT_S,
                                                   cached=False)
        earliest[p], latest[p] = low, high
    by_time: dict[tuple[int, int], int | None] = {}
    for p, ts, _ in probes:  # one query per probe: a request may name a partition only once
        [answer] = consumer.offsets_for_times([TopicPartition(topic, p, ts)], timeout=OFFSETS_TIMEOUT_S)
        assert answer.partition == p and answer.error is None, f"offsets_for_times: {answer}"
        by_time[(p, ts)] = None if answer.offset < 0 else answer.offset
    return earliest, latest, by_time


def confluent_high_watermarks(consumer: Consumer, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=OFFSETS_TIMEOUT_S,
                                              cached=False)[1] for p in range(partitions)}


@dataclass
class ContinuousProducer:
    """A confluent-kafka producer on its own thread, producing unique values b"<run>-<seq>"
    until stopped (at most `max_outstanding` unacknowledged at a time, at most `max_records`
    in all), recording each acknowledged (partition, offset, seq) and each failure."""

    bootstrap: str
    topic: str
    conf: dict[str, object]
    max_outstanding: int = 2000
    max_records: int = 300_000
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    acked: list[tuple[int, int, int]] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)
    client_errors: list[str] = field(default_factory=list)
    sent: int = 0
    unflushed: int = -1
    crashed: BaseException | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.run_id}", daemon=True)

    def value(self, seq: int) -> bytes:
        return f"{self.run_id}-{seq:09d}".encode()

    def seq_of(self, value: bytes) -> int:
        run, seq = value.decode().rsplit("-", 1)
        assert run == self.run_id, f"foreign value {value!r}"
        return int(seq)

    def start(self) -> None:
        self._thread.start()

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_acked(self, count: int, timeout_s: float) -> bool:
        wait_until(lambda: self.acked_count() >= count or self.crashed is not None, timeout_s)
        return self.acked_count() >= count

    def stop(self, timeout_s: float = FLUSH_TIMEOUT_S + 15) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "producer thread did not finish"
        if self.crashed is not None:
            raise AssertionError(f"producer thread failed: {self.crashed!r}")

    def _on_delivery(self, seq: int, err: KafkaError | None, msg: object) -> None:
        with self._lock:
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), seq))  # type: ignore[attr-defined]
            else:
                self.failed.append((seq, str(err)))

    def _on_error(self, err: KafkaError) -> None:
        with self._lock:
            self.client_errors.append(f"{'FATAL ' if err.fatal() else ''}{err}")

    def _run(self) -> None:
        try:
            conf = {**self.conf, "bootstrap.servers": self.bootstrap, "error_cb": self._on_error}
            producer = Producer(conf)
            try:
                while not self._stop.is_set() and self.sent < self.max_records:
                    with self._lock:
                        outstanding = self.sent - len(self.acked) - len(self.failed)
                    if outstanding >= self.max_outstanding:
                        producer.poll(0.05)
                        continue
                    seq = self.sent
                    try:
                        producer.produce(self.topic, key=b"k%02d" % (seq % 64), value=self.value(seq),
                                         on_delivery=partial(self._on_delivery, seq))
                    except BufferError:
                        producer.poll(0.05)
                        continue
                    self.sent += 1
                    producer.poll(0)
                self.unflushed = producer.flush(FLUSH_TIMEOUT_S)
            finally:
                producer.close()
        except BaseException as exc:  # surfaced by stop()
            self.crashed = exc


# -- kafka-python --------------------------------------------------------------------------

def kafka_python_create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
    try:
        admin.create_topics([KafkaPythonNewTopic(topic, num_partitions=partitions, replication_factor=1)],
                            timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
    finally:
        admin.close()


def kafka_python_produce(bootstrap: str, topic: str, records: Sequence[Rec]) -> dict[int, tuple[int, int]]:
    """One producer per codec (defaults otherwise: idempotent, acks=all)."""
    acks: dict[int, tuple[int, int]] = {}
    for codec, group in by_codec(records):
        producer = kafka.KafkaProducer(
            bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
            linger_ms=LINGER_MS, batch_size=BATCH_BYTES, max_block_ms=int(FLUSH_TIMEOUT_S * 1000))
        try:
            assert producer.config["enable_idempotence"] and producer.config["acks"] == -1
            futures = [(rec.seq, producer.send(topic, key=rec.key, value=rec.value,
                                               headers=list(rec.headers), timestamp_ms=rec.timestamp_ms))
                       for rec in group]
            producer.flush(timeout=FLUSH_TIMEOUT_S)
            deadline = Deadline(FLUSH_TIMEOUT_S)
            for seq, future in futures:
                meta = future.get(timeout=max(0.1, deadline.left()))
                acks[seq] = (meta.partition, meta.offset)
        finally:
            producer.close(timeout=30)
    return acks


def kafka_python_consume_and_offsets(
    bootstrap: str, topic: str, count: int, probes: Sequence[tuple[int, int, int | None]],
) -> tuple[list[Got], dict[int, int], dict[int, int], dict[tuple[int, int], int | None]]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                   auto_offset_reset="earliest", request_timeout_ms=30_000)
    try:
        tps = [KafkaPythonTopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got: list[Got] = []
        deadline = Deadline(CONSUME_TIMEOUT_S)
        while len(got) < count and not deadline.passed:
            for tp, batch in consumer.poll(timeout_ms=1000, max_records=5000).items():
                for r in batch:
                    got.append(Got(tp.partition, r.offset, r.key, r.value,
                                   tuple((k, v) for k, v in (r.headers or ())), r.timestamp))
        timeout_ms = int(OFFSETS_TIMEOUT_S * 1000)
        firsts = consumer.beginning_offsets(tps, timeout_ms=timeout_ms)
        ends = consumer.end_offsets(tps, timeout_ms=timeout_ms)
        earliest = {tp.partition: offset for tp, offset in firsts.items()}
        latest = {tp.partition: offset for tp, offset in ends.items()}
        by_time: dict[tuple[int, int], int | None] = {}
        for p, ts, _ in probes:  # one query per probe: the API takes one timestamp per partition
            tp = KafkaPythonTopicPartition(topic, p)
            found = consumer.offsets_for_times({tp: ts}, timeout_ms=timeout_ms)[tp]
            by_time[(p, ts)] = None if found is None else found.offset
        return got, earliest, latest, by_time
    finally:
        consumer.close()


# -- aiokafka ------------------------------------------------------------------------------

async def aiokafka_create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
    await admin.start()
    try:
        response = await admin.create_topics([AioNewTopic(topic, partitions, 1)],
                                             timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
        for topic_error in response.topic_errors:
            assert topic_error[1] == 0, f"CreateTopics failed: {topic_error}"
    finally:
        await admin.close()


async def aiokafka_produce(bootstrap: str, topic: str, records: Sequence[Rec]) -> dict[int, tuple[int, int]]:
    acks: dict[int, tuple[int, int]] = {}
    for codec, group in by_codec(records):
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec, acks="all",
            linger_ms=LINGER_MS, max_batch_size=BATCH_BYTES, request_timeout_ms=30_000)
        await producer.start()
        try:
            futures = []
            for rec in group:  # send() waits while the accumulator is full, then returns a future
                futures.append((rec.seq, await producer.send(
                    topic, value=rec.value, key=rec.key, headers=list(rec.headers),
                    timestamp_ms=rec.timestamp_ms)))
            await asyncio.wait_for(producer.flush(), FLUSH_TIMEOUT_S)
            metas = await asyncio.wait_for(asyncio.gather(*(f for _, f in futures)), FLUSH_TIMEOUT_S)
            for (seq, _), meta in zip(futures, metas):
                acks[seq] = (meta.partition, meta.offset)
        finally:
            await producer.stop()
    return acks


async def aiokafka_consume_and_offsets(
    bootstrap: str, topic: str, count: int, probes: Sequence[tuple[int, int, int | None]],
) -> tuple[list[Got], dict[int, int], dict[int, int], dict[tuple[int, int], int | None]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", request_timeout_ms=30_000)
    await consumer.start()
    try:
        tps = [AioTopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got: list[Got] = []
        deadline = Deadline(CONSUME_TIMEOUT_S)
        while len(got) < count and not deadline.passed:
            batches = await consumer.getmany(timeout_ms=1000, max_records=5000)
            for tp, batch in batches.items():
                for r in batch:
                    got.append(Got(tp.partition, r.offset, r.key, r.value,
                                   tuple((k, v) for k, v in (r.headers or ())), r.timestamp))
        consumer.pause(*tps)  # no long-poll fetches ahead of the ListOffsets requests below
        earliest = {tp.partition: o for tp, o in
                    (await asyncio.wait_for(consumer.beginning_offsets(tps), OFFSETS_TIMEOUT_S)).items()}
        latest = {tp.partition: o for tp, o in
                  (await asyncio.wait_for(consumer.end_offsets(tps), OFFSETS_TIMEOUT_S)).items()}
        by_time: dict[tuple[int, int], int | None] = {}
        for p, ts, _ in probes:
            tp = AioTopicPartition(topic, p)
            answer = await asyncio.wait_for(consumer.offsets_for_times({tp: ts}), OFFSETS_TIMEOUT_S)
            by_time[(p, ts)] = None if answer[tp] is None else answer[tp].offset
        return got, earliest, latest, by_time
    finally:
        await consumer.stop()
