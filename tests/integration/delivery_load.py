"""A paced producer and group consumers that time each record from send to delivery, for the
tests that freeze a service under them (test_frozen_store.py).

Values are b"<partition>:<sequence>:<send time in ns>", so a consumer knows each record's
end-to-end latency without asking the producer, and a final read can tell every acknowledged
record from its value.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

POLL_S = 0.2


def parse(value: bytes) -> tuple[int, int, int]:
    """(partition, sequence, send time ns) of a value."""
    partition, sequence, sent_ns = value.split(b":")
    return int(partition), int(sequence), int(sent_ns)


@dataclass
class PacedProducer:
    """acks=1, not idempotent (librdkafka's idempotence means acks=all), `rate_per_s` records a
    second round robin over the partitions, on a thread of its own."""

    bootstrap: str
    topic: str
    partitions: int
    rate_per_s: float = 200.0
    acked: set[tuple[int, int]] = field(default_factory=set)  # (partition, sequence)
    errors: list[str] = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="paced-producer", daemon=True)

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def stop(self, flush_s: float = 120.0) -> None:
        self._stop.set()
        self._thread.join(flush_s + 10)
        assert not self._thread.is_alive(), "the producer did not finish flushing"

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": 1, "enable.idempotence": False,
                             "linger.ms": 0, "message.timeout.ms": 300_000})
        sequences = [0] * self.partitions
        next_at = time.monotonic()
        while not self._stop.is_set():
            partition = self.sent % self.partitions
            value = b"%d:%d:%d" % (partition, sequences[partition], time.time_ns())
            sequences[partition] += 1
            producer.produce(self.topic, value=value, partition=partition, on_delivery=self._delivered)
            self.sent += 1
            producer.poll(0)
            next_at += 1.0 / self.rate_per_s
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)  # paces the load; not a synchronisation
        left = producer.flush(120)
        if left:
            self.errors.append(f"{left} records never answered")

    def _delivered(self, error: KafkaError | None, message: object) -> None:
        with self._lock:
            if error is not None:
                self.errors.append(str(error))
                return
            partition, sequence, _ = parse(message.value())  # type: ignore[attr-defined]
            self.acked.add((partition, sequence))


@dataclass
class GroupReader:
    """A consumer in `group` (auto commit, librdkafka's defaults otherwise) on a thread of its
    own, recording each record's latency, its assignments and revocations, and its commits."""

    bootstrap: str
    topic: str
    group: str
    reset: str = "earliest"
    delivered: list[tuple[float, float]] = field(default_factory=list)  # (send time s, latency s)
    assigned: list[float] = field(default_factory=list)  # times of assignments (with partitions)
    revoked: list[float] = field(default_factory=list)
    commits: list[tuple[float, str]] = field(default_factory=list)  # (time, error name or "NO_ERROR")
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stopped_at = float("inf")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"reader-{self.group}", daemon=True)

    def start(self) -> GroupReader:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopped_at = time.time()  # a close revokes the assignment: not a rebalance
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the consumer did not stop"

    def rebalances(self) -> int:
        """Assignments after the first, and revocations before the consumer was stopped."""
        revoked = [at for at in self.revoked if at < self.stopped_at]
        return max(len(self.assigned) - 1, 0) + len(revoked)

    def latencies(self, start_s: float, end_s: float) -> list[float]:
        """Latencies of the records sent between the two (epoch seconds)."""
        with self._lock:
            return [latency for sent, latency in self.delivered if start_s <= sent < end_s]

    def worst(self, start_s: float, end_s: float, count: int) -> list[tuple[float, float]]:
        """The `count` largest (latency, send time) of the records sent between the two."""
        with self._lock:
            return sorted(((latency, sent) for sent, latency in self.delivered if start_s <= sent < end_s),
                          reverse=True)[:count]

    def commits_between(self, start_s: float, end_s: float) -> list[str]:
        with self._lock:
            return [outcome for at, outcome in self.commits if start_s <= at < end_s]

    def _run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "auto.offset.reset": self.reset, "enable.auto.commit": True,
                             "on_commit": self._committed, "error_cb": self._error})
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        try:
            while not self._stop.is_set():
                message = consumer.poll(POLL_S)
                if message is None or message.error() is not None:
                    continue
                now = time.time()
                _, _, sent_ns = parse(message.value())
                with self._lock:
                    self.delivered.append((sent_ns / 1e9, now - sent_ns / 1e9))
        finally:
            consumer.close()

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            self.assigned.append(time.time())

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            self.revoked.append(time.time())

    def _committed(self, error: KafkaError | None, _partitions: list[TopicPartition]) -> None:
        with self._lock:
            self.commits.append((time.time(), "NO_ERROR" if error is None else error.name()))

    def _error(self, error: KafkaError) -> None:
        with self._lock:
            self.errors.append(str(error))


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def summary(latencies: list[float]) -> str:
    if not latencies:
        return "n=0"
    return (f"n={len(latencies)} p50={statistics.median(latencies) * 1000:.2f} ms "
            f"p99={p99(latencies) * 1000:.2f} ms max={max(latencies) * 1000:.1f} ms")


def stored_once(bootstrap: str, topic: str, partitions: int, acked: set[tuple[int, int]],
                timeout_s: float = 120.0) -> list[str]:
    """Read every partition from its start; the problems found: an acknowledged record missing,
    or any record stored twice."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: dict[tuple[int, int], int] = defaultdict(int)
    ended: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and (len(ended) < partitions or not acked <= set(seen)):
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition())
                continue
            partition, sequence, _ = parse(message.value())
            seen[(partition, sequence)] += 1
    finally:
        consumer.close()
    missing = sorted(acked - set(seen))
    twice = sorted(key for key, count in seen.items() if count > 1)
    problems = []
    if missing:
        problems.append(f"{len(missing)} acknowledged records missing, e.g. {missing[:5]}")
    if twice:
        problems.append(f"{len(twice)} records stored more than once, e.g. {twice[:5]}")
    return problems
