"""The native SDK's consumer tests: records written by confluent-kafka (value b"v<i>"), the
values expected back, and polling group members until a condition holds."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from confluent_kafka import Producer

from martlet.client.consumer import Consumer
from martlet.client.message import Message

WAIT_S = 30.0  # a rebalance takes up to two heartbeat intervals (5 s each) of the broker's
FLUSH_S = 30.0
POLL_S = 0.2


def produce(bootstrap: str, topic: str, partitions: int, count: int, first: int = 0) -> None:
    """`count` records, value b"v<i>" for i from `first`, round-robin over the partitions."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(first, first + count):
        producer.produce(topic, value=b"v%d" % i, key=b"k%d" % i, partition=i % partitions)
    assert producer.flush(FLUSH_S) == 0


def read_until(consumers: Iterable[Consumer], seen: list[list[Message]], done: Callable[[], bool],
               timeout_s: float = WAIT_S) -> None:
    """Poll every consumer in turn, appending what each returns to its list, until `done`."""
    members = list(consumers)
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"not done after {timeout_s} s: {[len(s) for s in seen]} read"
        for member, got in zip(members, seen):
            got += member.poll(POLL_S)


def values(messages: Iterable[Message]) -> list[bytes | None]:
    return [m.value for m in messages]


def expected(first: int, count: int) -> set[bytes]:
    return {b"v%d" % i for i in range(first, first + count)}
