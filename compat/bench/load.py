"""Load generator processes for `martlet bench`: `python -m martlet.compat.bench.load JSON`.

The JSON object names the role and its settings; the process prints one JSON line with its
result and exits 0, or prints {"error": ...} and exits 1. Roles:

- produce: `records` keyless records of `record_bytes` random (incompressible) bytes to
  `topic`, spread over its partitions by librdkafka's partitioner (how, `config` says:
  sticky.partitioning.linger.ms), with the producer settings in `config`. With `keys` K,
  record i has key i mod K (a compacted topic's workload: K live keys). Every record has the
  same value, so a batch compresses well, unless `distinct` N asks for N different values in
  turn (4,096 of 1 KB lie beyond every codec's window: the data stays incompressible).
  Timed from the first produce call until every delivery report arrived; `started` and
  `ended` give those two moments on the wall clock, so several producers make one
  aggregate span.
- txn-produce: as produce (no `keys`, `distinct`), through a transactional producer
  (`config` names the transactional.id): begin a transaction, produce for `period_ms`,
  commit, repeat until `records` are sent. Timed from the first begin to the last commit's
  return; each commit_transaction call's duration is in `commit_us` (it includes
  librdkafka's flush of the transaction's outstanding records, then EndTxn).
- consume: reads `records` records from the start of every partition of `topic` (assigned,
  no group, so no rebalance time is measured). Timed from the assignment to the last record.
- sync-produce: `records` records of `record_bytes` to `topic`, one at a time: each is
  produced and flushed (its acknowledgement awaited) before the next, so one request is in
  flight and each carries one record (a synchronous send, a request-reply pattern). Each
  acknowledgement's time from produce to its return is in `acked_us`.
- latency-produce: `rate` records per second for `seconds` seconds, each value starting with
  its sequence number and the wall clock in nanoseconds at the produce call.
- latency-consume: reads from the start of `topic` until `records` records arrived and prints
  the end-to-end latencies (receive clock minus the stamped clock) of those past `warmup`.
- partitions: creates `topics` topics of `partitions` partitions each, then times `rounds`
  metadata requests for all topics.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

STAMP = struct.Struct(">qq")  # sequence number, wall clock in ns at produce
FLUSH_TIMEOUT_S = 300.0
IDLE_TIMEOUT_S = 60.0  # a consumer that receives nothing for this long gives up
CREATE_TIMEOUT_S = 600.0
CREATE_TOPICS_PER_REQUEST = 10  # KRaft refuses one request that makes 10,000 partitions
TXN_TIMEOUT_S = 60.0  # for init_transactions and each commit_transaction


def produce(spec: dict[str, Any]) -> dict[str, Any]:
    failed = [0]

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failed[0] += 1

    # Reports for failures only: a callback per record would cost the client more than the
    # broker spends on the record.
    producer = Producer({"bootstrap.servers": spec["bootstrap"], "delivery.report.only.error": True,
                         "on_delivery": delivered, **spec["config"]})
    values = [os.urandom(spec["record_bytes"]) for _ in range(spec.get("distinct", 1))]
    topic, records = spec["topic"], spec["records"]
    _warm_up(producer, topic)
    keys = [b"key-%d" % i for i in range(spec["keys"])] if spec.get("keys") else None
    started, start = time.time(), time.perf_counter()
    for i in range(records):
        _produce_one(producer, topic, values[i % len(values)], keys[i % len(keys)] if keys else None)
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    seconds = time.perf_counter() - start
    return {"records": records, "bytes": records * spec["record_bytes"], "seconds": seconds,
            "started": started, "ended": started + seconds, "failed": failed[0] + remaining}


def _produce_one(producer: Producer, topic: str, value: bytes, key: bytes | None = None) -> None:
    while True:
        try:
            producer.produce(topic, value, key)
            return
        except BufferError:  # the local queue is full: serve delivery reports, then retry
            producer.poll(0.05)


def _warm_up(producer: Producer, topic: str) -> None:
    """Fetch metadata and connect before the clock starts."""
    producer.list_topics(topic, timeout=30)


def txn_produce(spec: dict[str, Any]) -> dict[str, Any]:
    # No report per record (see produce): a failed record fails its commit instead.
    producer = Producer({"bootstrap.servers": spec["bootstrap"], "delivery.report.only.error": True,
                         **spec["config"]})
    value, topic, records = os.urandom(spec["record_bytes"]), spec["topic"], spec["records"]
    _warm_up(producer, topic)
    producer.init_transactions(TXN_TIMEOUT_S)  # unmeasured, as the connections are
    started, start = time.time(), time.perf_counter()
    commit_us = transactions(producer, lambda: _produce_one(producer, topic, value), records,
                             spec["period_ms"] / 1000, time.perf_counter)
    seconds = time.perf_counter() - start
    return {"records": records, "bytes": records * spec["record_bytes"], "seconds": seconds,
            "started": started, "ended": started + seconds, "transactions": len(commit_us),
            "commit_us": commit_us}


class Transactional(Protocol):
    def begin_transaction(self) -> None: ...
    def commit_transaction(self, timeout: float) -> None: ...


def transactions(producer: Transactional, send: Callable[[], None], records: int, period_s: float,
                 clock: Callable[[], float]) -> list[float]:
    """Send `records` records in transactions of `period_s` each (by `clock`; the last may
    be shorter): begin, send until the period is over, commit. Returns each commit's
    duration in microseconds. A failed commit raises: the workload fails, it does not
    abort and go on."""
    commit_us: list[float] = []
    sent = 0
    while sent < records:
        producer.begin_transaction()
        ends = clock() + period_s
        while sent < records and clock() < ends:
            send()
            sent += 1
        before = clock()
        producer.commit_transaction(TXN_TIMEOUT_S)
        commit_us.append((clock() - before) * 1e6)
    return commit_us


def consume(spec: dict[str, Any]) -> dict[str, Any]:
    consumer = _assigned_consumer(spec)
    wanted, count, size = spec["records"], 0, 0
    start = last = time.perf_counter()
    try:
        while count < wanted:
            messages = consumer.consume(10_000, 1.0)
            now = time.perf_counter()
            if not messages:
                if now - last > IDLE_TIMEOUT_S:
                    raise RuntimeError(f"no record for {IDLE_TIMEOUT_S:.0f} s after {count} of {wanted}")
                continue
            last = now
            for message in messages:
                if message.error() is not None:
                    raise KafkaException(message.error())
                size += len(message)
            count += len(messages)
    finally:
        consumer.close()
    return {"records": count, "bytes": size, "seconds": last - start}


def _assigned_consumer(spec: dict[str, Any]) -> Consumer:
    consumer = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": "martlet-bench",
                        "enable.auto.commit": False, **spec.get("config", {})})
    topic = spec["topic"]
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(partitions)])
    return consumer


def sync_produce(spec: dict[str, Any]) -> dict[str, Any]:
    failed = [0]

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failed[0] += 1

    producer = Producer({"bootstrap.servers": spec["bootstrap"], "on_delivery": delivered, **spec["config"]})
    topic, records, value = spec["topic"], spec["records"], os.urandom(spec["record_bytes"])
    _warm_up(producer, topic)
    acked_us = []
    start = time.perf_counter()
    for _ in range(records):
        sent = time.perf_counter_ns()
        producer.produce(topic, value)
        failed[0] += producer.flush(FLUSH_TIMEOUT_S)  # what is still queued after the timeout failed
        acked_us.append((time.perf_counter_ns() - sent) / 1000)
    return {"records": records, "bytes": records * spec["record_bytes"], "seconds": time.perf_counter() - start,
            "failed": failed[0], "acked_us": acked_us}


def latency_produce(spec: dict[str, Any]) -> dict[str, Any]:
    producer = Producer({"bootstrap.servers": spec["bootstrap"], **spec["config"]})
    topic, rate, total = spec["topic"], spec["rate"], spec["rate"] * spec["seconds"]
    padding = bytes(max(0, spec["record_bytes"] - STAMP.size))
    _warm_up(producer, topic)
    start = time.perf_counter()
    for seq in range(total):
        due = start + seq / rate
        while (pause := due - time.perf_counter()) > 0:
            producer.poll(min(pause, 0.01))  # paced: wait for the slot, serving reports
        producer.produce(topic, STAMP.pack(seq, time.time_ns()) + padding)
        producer.poll(0)
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    return {"records": total, "failed": remaining, "seconds": time.perf_counter() - start}


def spread_produce(spec: dict[str, Any]) -> dict[str, Any]:
    """A little traffic to every partition of a topic: `rate` records a second for `seconds`,
    record i to partition i mod the partition count; each delivery's time from produce to
    acknowledgement, and the records refused."""
    producer = Producer({"bootstrap.servers": spec["bootstrap"], **spec["config"]})
    topic, rate, total, partitions = spec["topic"], spec["rate"], spec["rate"] * spec["seconds"], spec["partitions"]
    value = bytes(spec["record_bytes"])
    acked_us: list[float] = []
    failed: list[str] = []

    def reporter(sent_ns: int) -> Callable[[Any, Any], None]:
        def report(error: Any, _message: Any) -> None:
            if error is not None:
                failed.append(str(error))
            else:
                acked_us.append((time.perf_counter_ns() - sent_ns) / 1000)
        return report

    _led(producer, topic, partitions)
    for partition in range(partitions):  # unmeasured: every partition's files exist before the clock starts
        producer.produce(topic, value, partition=partition)
    if producer.flush(FLUSH_TIMEOUT_S):
        raise RuntimeError("the warm-up records were not all delivered")
    start = time.perf_counter()
    for seq in range(total):
        due = start + seq / rate
        while (pause := due - time.perf_counter()) > 0:
            producer.poll(min(pause, 0.01))  # paced: wait for the slot, serving reports
        producer.produce(topic, value, partition=seq % partitions, on_delivery=reporter(time.perf_counter_ns()))
        producer.poll(0)
    unsent = producer.flush(FLUSH_TIMEOUT_S)
    return {"records": total, "failed": len(failed) + unsent, "errors": sorted(set(failed))[:5],
            "acked_us": acked_us, "seconds": time.perf_counter() - start}


def _led(producer: Producer, topic: str, partitions: int) -> None:
    """Wait until Metadata shows every partition of `topic` with a leader (Kafka elects them
    a little after it answers CreateTopics)."""
    deadline = time.perf_counter() + CREATE_TIMEOUT_S
    while True:
        listed = producer.list_topics(topic, timeout=30).topics[topic].partitions
        if len(listed) == partitions and all(p.leader >= 0 for p in listed.values()):
            return
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{topic} has no leader for some of its {partitions} partitions")
        time.sleep(0.1)  # polling the broker's metadata, bounded above


def latency_consume(spec: dict[str, Any]) -> dict[str, Any]:
    consumer = _assigned_consumer(spec)
    print(json.dumps({"ready": True}), flush=True)
    wanted, warmup = spec["records"], spec["warmup"]
    seen: set[int] = set()
    latencies_us: list[float] = []
    last = time.perf_counter()
    try:
        while len(seen) < wanted:
            message = consumer.poll(1.0)
            if message is None:
                if time.perf_counter() - last > IDLE_TIMEOUT_S:
                    raise RuntimeError(f"no record for {IDLE_TIMEOUT_S:.0f} s after {len(seen)} of {wanted}")
                continue
            received = time.time_ns()
            last = time.perf_counter()
            if message.error() is not None:
                raise KafkaException(message.error())
            value = message.value()
            assert value is not None, "every bench record carries a stamp"
            seq, sent = STAMP.unpack_from(value)
            if seq not in seen:
                seen.add(seq)
                if seq >= warmup:
                    latencies_us.append((received - sent) / 1000)
    finally:
        consumer.close()
    return {"records": len(seen), "latencies_us": latencies_us}


def partitions(spec: dict[str, Any]) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": spec["bootstrap"]})
    names = [f"{spec['prefix']}-{i}" for i in range(spec["topics"])]
    start = time.perf_counter()
    for first in range(0, len(names), CREATE_TOPICS_PER_REQUEST):
        chunk = names[first:first + CREATE_TOPICS_PER_REQUEST]
        futures = admin.create_topics([NewTopic(n, spec["partitions"], 1) for n in chunk],
                                      request_timeout=CREATE_TIMEOUT_S)
        for future in futures.values():
            future.result(timeout=CREATE_TIMEOUT_S)
    wanted = spec["topics"] * spec["partitions"]
    while (listed := _listed(admin, names)) < wanted:  # Kafka's metadata catches up a little later
        if time.perf_counter() - start > CREATE_TIMEOUT_S:
            raise RuntimeError(f"metadata lists {listed} of {wanted} partitions after {CREATE_TIMEOUT_S:.0f} s")
        time.sleep(0.1)  # polling the broker's metadata, bounded above
    created = time.perf_counter() - start
    times = []
    for _ in range(spec["rounds"]):
        start = time.perf_counter()
        listed = _listed(admin, names)
        times.append(time.perf_counter() - start)
        if listed != wanted:
            raise RuntimeError(f"metadata lists {listed} of {wanted} partitions")
    return {"create_seconds": created, "metadata_seconds": times}


def _listed(admin: AdminClient, names: list[str]) -> int:
    metadata = admin.list_topics(timeout=120)
    return sum(len(metadata.topics[n].partitions) for n in names if n in metadata.topics)


ROLES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "produce": produce, "txn-produce": txn_produce, "consume": consume, "latency-produce": latency_produce,
    "latency-consume": latency_consume, "partitions": partitions, "spread-produce": spread_produce,
    "sync-produce": sync_produce,
}


def main(argv: list[str], roles: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = ROLES) -> int:
    """Run the role argv[0] (a JSON spec) names; print its result (or error) as one JSON line."""
    spec = json.loads(argv[0])
    try:
        result = roles[spec["role"]](spec)
    except Exception as exc:  # reported to the orchestrator, which names the workload
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
