"""Transactions through a real client (confluent-kafka): a fresh topic, a transactional
producer, and everything a read_committed or read_uncommitted reader gets."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 30.0


def create_topic(bootstrap: str, partitions: int = 2) -> str:
    name = f"tx-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures resolve
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(TIMEOUT_S)
    return name


def producer(bootstrap: str, transactional_id: str, timeout_ms: int = 60_000) -> Producer:
    made = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                     "transaction.timeout.ms": timeout_ms, "linger.ms": 5})
    made.init_transactions(TIMEOUT_S)
    return made


def read_all(bootstrap: str, topic: str, isolation: str, partitions: int = 2,
             group: str | None = None, timeout_s: float = TIMEOUT_S) -> list[str]:
    """Every record a reader with this isolation gets up to the end of each partition (for
    read_committed, the last stable offset): bounded by `timeout_s`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"r-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "isolation.level": isolation,
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)] if group is None else [])
    if group is not None:
        consumer.subscribe([topic])
    values: list[str] = []
    ended: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(ended) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                ended.add(message.partition())
                continue
            values.append(message.value().decode())
    finally:
        consumer.close()
    assert len(ended) == partitions, f"not every partition reached its end in {timeout_s} s: {values}"
    return values


def commit_abort_commit(bootstrap: str, topic: str, partitions: int) -> int:
    """Three transactions over every partition of `topic` (commit, abort, commit), each also
    committing a group offset; the group's committed offset after them (3 when all held)."""
    made = producer(bootstrap, f"tid-{topic}")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    try:
        for round_no, commit in enumerate((True, False, True)):
            made.begin_transaction()
            for partition in range(partitions):
                made.produce(topic, value=f"{round_no}-{partition}".encode(), partition=partition)
            made.send_offsets_to_transaction([TopicPartition(topic, 0, round_no + 1)],
                                             consumer.consumer_group_metadata(), TIMEOUT_S)
            made.commit_transaction(TIMEOUT_S) if commit else made.abort_transaction(TIMEOUT_S)
        return int(consumer.committed([TopicPartition(topic, 0)], TIMEOUT_S)[0].offset)
    finally:
        consumer.close()
