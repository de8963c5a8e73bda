"""Load for cluster fault tests: an idempotent acks=all producer in a thread, and the check
that what it was told is stored really is, once, in produce order.

Each record's value is "<tag>:<partition>:<sequence>", the sequence counting per partition (the
tag tells two producers on one topic apart), and the
producer names the partition itself, so a reader can tell every record's place in its
partition's produce order. The producer keeps going through broker deaths (librdkafka retries
until `message.timeout.ms`); every acknowledgement is recorded with its time, so a test can
measure how long each partition went without one.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from martlet.compat.bench.failover import wait_for

ADMIN_TIMEOUT_S = 30.0


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor)],
                                  operation_timeout=ADMIN_TIMEOUT_S, request_timeout=ADMIN_TIMEOUT_S)
    futures[topic].result(timeout=ADMIN_TIMEOUT_S)


@dataclass
class Load:
    bootstrap: str
    topic: str
    partitions: int
    rate_per_s: float = 400.0
    acks: str = "all"
    idempotent: bool = True
    tag: str = "a"
    acked: dict[int, list[tuple[int, float]]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="cluster-load", daemon=True)

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self, flush_s: float = 90.0) -> None:
        self._stop.set()
        self._thread.join(flush_s + 10)
        assert not self._thread.is_alive(), "the producer did not finish flushing"

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": self.acks,
                             "enable.idempotence": self.idempotent, "linger.ms": 5,
                             "message.timeout.ms": 120_000, "retry.backoff.ms": 50,
                             "topic.metadata.refresh.interval.ms": 1000})
        sequences = [0] * self.partitions
        interval = 1.0 / self.rate_per_s
        next_at = time.monotonic()
        while not self._stop.is_set():
            partition = self.sent % self.partitions
            value = f"{self.tag}:{partition}:{sequences[partition]}".encode()
            sequences[partition] += 1
            producer.produce(self.topic, value=value, partition=partition, on_delivery=self._delivered)
            self.sent += 1
            producer.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)  # paces the load; not a synchronisation
        left = producer.flush(90)
        if left:
            self.errors.append(f"{left} records never answered")

    def _delivered(self, error, message) -> None:  # type: ignore[no-untyped-def]
        with self._lock:
            if error is not None:
                self.errors.append(str(error))
                return
            _, partition, sequence = message.value().decode().split(":")
            self.acked[int(partition)].append((int(sequence), time.monotonic()))

    def acked_count(self) -> int:
        with self._lock:
            return sum(len(acks) for acks in self.acked.values())

    def last_ack(self, partition: int) -> float:
        with self._lock:
            acks = self.acked.get(partition)
            return acks[-1][1] if acks else 0.0

    def first_ack_after(self, partition: int, moment: float) -> float | None:
        with self._lock:
            return next((at for _, at in self.acked.get(partition, ()) if at > moment), None)

    def wait_acks_after(self, moment: float, partitions: list[int], timeout_s: float) -> dict[int, float]:
        """Seconds from `moment` to the first acknowledgement on each of `partitions`."""
        if not partitions:
            return {}
        found = wait_for(lambda: (all(self.first_ack_after(p, moment) for p in partitions) and
                                  {p: self.first_ack_after(p, moment) for p in partitions}),
                         timeout_s, f"an acknowledged produce on partitions {partitions}")
        return {p: at - moment for p, at in found.items()}


Stored = dict[tuple[str, int], list[int]]


def read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 90.0) -> Stored:
    """Every record's sequence, by (tag, partition), in log order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: Stored = defaultdict(list)
    ended: set[int] = set()
    count = 0
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and (count < expected or len(ended) < partitions):
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF
                    ended.add(message.partition())
                continue
            ended.discard(message.partition())
            tag, _, sequence = message.value().decode().split(":")
            seen[tag, message.partition()].append(int(sequence))
            count += 1
    finally:
        consumer.close()
    return seen


def check_stored(load: Load, seen: Stored, exactly_once: bool = True,
                 except_acked_between: tuple[float, float] | None = None) -> None:
    """Every acknowledged record is stored, in produce order (for an idempotent producer),
    and (`exactly_once`) once.
    `except_acked_between`: records acknowledged in that span (monotonic times) may be
    missing: acks=1 answers a broker gave just before it was frozen or killed."""
    problems = []
    start, end = except_acked_between or (0.0, 0.0)
    for partition, acks in load.acked.items():
        acked = [sequence for sequence, at in acks if not start <= at <= end]
        stored = seen.get((load.tag, partition), [])
        duplicates = len(stored) - len(set(stored)) if exactly_once else 0
        missing = sorted(set(acked) - set(stored))
        if duplicates or missing:
            problems.append(f"partition {partition}: {len(missing)} acknowledged records missing "
                            f"(first {missing[:5]}), {duplicates} duplicates")
        acked_set = set(acked)
        in_log = list(dict.fromkeys(sequence for sequence in stored if sequence in acked_set))
        if load.idempotent and in_log != sorted(in_log):  # a plain producer's retry may reorder
            problems.append(f"partition {partition}: acknowledged records out of produce order")
    assert not problems, "; ".join(problems)
