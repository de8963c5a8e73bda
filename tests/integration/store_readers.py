"""Helpers for the tests of readers of the store (export, format("martlet"), examples): a
topic made and filled through the gateway, and a bounded wait until its broker has published
how far readers may go."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from martlet.connectors.arrow import open_store, span_end
from martlet.engine.api import stored_topics
from tests.fixtures.martlet import wait_until

PUBLISHED_S = 15.0  # the broker publishes C and the LSO every second (checkpoint_publish_ms)


def new_topic(bootstrap: str, partitions: int, configs: dict[str, str] | None = None, prefix: str = "reader") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(30)
    return name


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]], transactional: str | None = None,
            commit: bool = True) -> None:
    """`records` (Producer.produce keyword arguments), acks=all; in one transaction if
    `transactional` names an id, committed or aborted."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    if transactional:
        config["transactional.id"] = transactional
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    for record in records:
        producer.produce(topic, **record)
    assert producer.flush(30) == 0
    if transactional:
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def published(data_dir: Path, topic: str, ends: dict[int, int]) -> None:
    """Wait until the broker published an LSO of at least `ends[p]` for each partition."""
    store = open_store(str(data_dir))

    def caught_up() -> bool:
        found = stored_topics(store).get(topic)
        return found is not None and all(span_end(store, found, p)[1] >= end for p, end in ends.items())
    assert wait_until(caught_up, PUBLISHED_S, 0.1)

