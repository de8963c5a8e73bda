"""The failover measurement of `martlet bench --cluster`: how long a partition goes without an
acknowledged produce after its broker is killed (issue 11, points 5 and 6).

A `SteadyLoad` is one idempotent acks=all librdkafka producer on a thread of the bench,
sending at a fixed rate and naming each record's partition itself. Record values are

    "<partition>:<sequence>"       the sequence counts per partition from 0

so a reader can place every record in its partition's produce order. The producer keeps
going through broker deaths (librdkafka retries until `message.timeout.ms`) and records the
monotonic time of every acknowledgement. A `Mark` taken just before a kill holds the moment
and each partition's next sequence: the unavailability of a partition is the time from the
mark to the first acknowledgement of a record produced after it. (The first acknowledgement
of any record would count answers the dead broker wrote before it died and the client read
a few milliseconds later.) `check_stored` then reads
every partition back and requires each acknowledged record exactly once, in produce order.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

METADATA_TIMEOUT_S = 10.0
FLUSH_TIMEOUT_S = 90.0
READ_IDLE_S = 30.0  # a read-back that receives nothing for this long is over
POLL_S = 0.1
# librdkafka logs every refused connection to a killed broker on stderr; the kills are the
# point here, so only its errors that are not about the kill (none expected) would matter.
QUIET = {"log_level": 0}

T = TypeVar("T")


def wait_for(condition: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll `condition` until it returns something true; RuntimeError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(POLL_S)  # polling the cluster's state, bounded by the deadline above


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> leader node id (-1 while none), from a fresh Metadata request."""
    metadata = AdminClient({"bootstrap.servers": bootstrap, **QUIET}).list_topics(topic, timeout=METADATA_TIMEOUT_S)
    return {index: part.leader for index, part in metadata.topics[topic].partitions.items()}


def all_led(bootstrap: str, topic: str, excluded: int | None = None) -> dict[int, int] | None:
    """The leaders if every partition has one (and none is `excluded`), else None."""
    current = leaders(bootstrap, topic)
    ok = current and all(leader >= 0 and leader != excluded for leader in current.values())
    return current if ok else None


def node_ids(bootstrap: str) -> dict[int, int]:
    """port -> node id of every live broker, from Metadata."""
    brokers = AdminClient({"bootstrap.servers": bootstrap, **QUIET}).list_topics(timeout=METADATA_TIMEOUT_S).brokers
    return {broker.port: node_id for node_id, broker in brokers.items()}


@dataclass(frozen=True, slots=True)
class Mark:
    at: float  # time.monotonic()
    next_sequences: tuple[int, ...]  # per partition: the first sequence produced after `at`


@dataclass
class SteadyLoad:
    bootstrap: str
    topic: str
    partitions: int
    rate_per_s: float
    acked: dict[int, list[tuple[int, float]]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="bench-failover-load", daemon=True)
        self._next = [0] * self.partitions  # per partition: the sequence its next record gets

    def start(self) -> SteadyLoad:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(FLUSH_TIMEOUT_S + 10)
        if self._thread.is_alive():
            raise RuntimeError("the failover producer did not finish flushing")

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 120_000, "retry.backoff.ms": 50,
                             "topic.metadata.refresh.interval.ms": 1000, **QUIET})
        sequences = self._next
        sent = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            partition = sent % self.partitions
            with self._lock:
                value = f"{partition}:{sequences[partition]}".encode()
                sequences[partition] += 1
            sent += 1
            producer.produce(self.topic, value=value, partition=partition, on_delivery=self._delivered)
            producer.poll(0)
            next_at += 1.0 / self.rate_per_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))  # paces the load
        left = producer.flush(FLUSH_TIMEOUT_S)
        if left:
            self.errors.append(f"{left} records never answered")

    def _delivered(self, error: Any, message: Any) -> None:
        with self._lock:
            if error is not None:
                self.errors.append(str(error))
                return
            partition, sequence = message.value().decode().split(":")
            self.acked[int(partition)].append((int(sequence), time.monotonic()))

    def acked_count(self) -> int:
        with self._lock:
            return sum(len(acks) for acks in self.acked.values())

    def mark(self) -> Mark:
        with self._lock:
            return Mark(time.monotonic(), tuple(self._next))

    def first_ack_after(self, partition: int, mark: Mark) -> float | None:
        """When the first record produced after `mark` on `partition` was acknowledged."""
        since = mark.next_sequences[partition]
        with self._lock:
            return next((at for sequence, at in self.acked.get(partition, ()) if sequence >= since), None)

    def wait_acks_after(self, mark: Mark, partitions: list[int], timeout_s: float) -> dict[int, float]:
        """Seconds from `mark` to the first acknowledgement of a later record on each of `partitions`."""
        def found() -> dict[int, float] | None:
            firsts = {p: self.first_ack_after(p, mark) for p in partitions}
            return {p: at - mark.at for p, at in firsts.items() if at is not None} if all(firsts.values()) else None
        return wait_for(found, timeout_s, f"an acknowledged produce on partitions {partitions}") if partitions else {}


Stored = dict[int, list[tuple[int, int]]]  # partition -> (sequence, offset) in log order


def read_all(bootstrap: str, topic: str, partitions: int) -> Stored:
    """Every record of `topic`, read from the start until each partition reached its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-check-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": True, **QUIET})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: Stored = defaultdict(list)
    ended: set[int] = set()
    last = time.monotonic()
    try:
        while len(ended) < partitions:
            message = consumer.poll(1.0)
            if message is None:
                if time.monotonic() - last > READ_IDLE_S:
                    raise RuntimeError(f"read-back stalled: partitions {sorted(ended)} of {partitions} ended")
                continue
            last = time.monotonic()
            error, partition, value = message.error(), message.partition(), message.value()
            assert partition is not None, "a consumed message names its partition"
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"read-back failed: {error}")
                ended.add(partition)
                continue
            ended.discard(partition)
            assert value is not None, "every failover record has a value"
            _, sequence = value.decode().split(":")
            seen[partition].append((int(sequence), message.offset() or 0))
    finally:
        consumer.close()
    return seen


def check_stored(load: SteadyLoad, seen: Stored) -> list[str]:
    """What breaks "every acknowledged record stored exactly once, in produce order"."""
    problems = []
    for partition, acks in sorted(load.acked.items()):
        acked = {sequence for sequence, _ in acks}
        offsets: dict[int, list[int]] = defaultdict(list)
        for sequence, offset in seen.get(partition, []):
            offsets[sequence].append(offset)
        stored = [sequence for sequence, _ in seen.get(partition, [])]
        duplicates = {sequence: at for sequence, at in offsets.items() if len(at) > 1}
        missing = sorted(acked - set(stored))
        if duplicates or missing:
            shown = ", ".join(f"{sequence} at offsets {at}" for sequence, at in list(duplicates.items())[:5])
            problems.append(f"partition {partition}: {len(missing)} acknowledged records missing "
                            f"(first {missing[:5]}), {len(duplicates)} stored more than once ({shown})")
        in_log = [sequence for sequence in stored if sequence in acked]
        if in_log != sorted(in_log):
            problems.append(f"partition {partition}: acknowledged records out of produce order")
    return problems
