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
