"""Round trips through the three Python clients against Martlet and the reference Kafka.

Each test creates a 6-partition topic with the client's admin API, produces 20,000 records
(4,000 per codec: none, gzip, snappy, lz4, zstd; one producer per codec) with explicit
timestamps, headers on some records and null keys/values on some, then reads them back by
assignment (no consumer group) and checks count, checksum, per-partition order, dense offsets,
earliest/latest offsets and offsets for timestamps.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.clients import (
    aiokafka_consume_and_offsets,
    aiokafka_create_topic,
    aiokafka_produce,
    check_offsets,
    check_round_trip,
    confluent_consume,
    confluent_consumer,
    confluent_create_topic,
    confluent_offsets,
    confluent_produce,
    kafka_python_consume_and_offsets,
    kafka_python_create_topic,
    kafka_python_produce,
    make_records,
    partition_timestamps,
    timestamp_probes,
    unique_topic,
)

pytestmark = pytest.mark.integration

RECORDS = 20_000
ASYNC_TEST_TIMEOUT_S = 240.0


@pytest.fixture(params=["martlet", pytest.param("kafka", marks=pytest.mark.java)])
def endpoint(request: pytest.FixtureRequest) -> str:
    """The bootstrap address of Martlet or of the reference Kafka."""
    service = "martlet" if request.param == "martlet" else "reference_kafka"
    return request.getfixturevalue(service).bootstrap


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_confluent(endpoint: str, idempotent: bool) -> None:
    topic = unique_topic("confluent")
    confluent_create_topic(endpoint, topic)
    records = make_records(RECORDS)
    # Without idempotence, only one request in flight keeps produce order across retries
    # (a fresh topic's first batches may be retried while later ones succeed).
    extra = {"enable.idempotence": True} if idempotent else {"max.in.flight.requests.per.connection": 1}
    acks = confluent_produce(endpoint, topic, records, **extra)
    probes = timestamp_probes(partition_timestamps(records, acks))
    consumer = confluent_consumer(endpoint)
    try:
        got = confluent_consume(consumer, topic, len(records))
        check_round_trip(records, acks, got)
        check_offsets(records, acks, *confluent_offsets(consumer, topic, probes))
    finally:
        consumer.close()


def test_kafka_python(endpoint: str) -> None:
    topic = unique_topic("kafka-python")
    kafka_python_create_topic(endpoint, topic)
    records = make_records(RECORDS)
    acks = kafka_python_produce(endpoint, topic, records)
    probes = timestamp_probes(partition_timestamps(records, acks))
    got, *offsets = kafka_python_consume_and_offsets(endpoint, topic, len(records), probes)
    check_round_trip(records, acks, got)
    check_offsets(records, acks, *offsets)


def test_aiokafka(endpoint: str) -> None:
    topic = unique_topic("aiokafka")
    records = make_records(RECORDS)

    async def scenario() -> None:
        await aiokafka_create_topic(endpoint, topic)
        acks = await aiokafka_produce(endpoint, topic, records)
        probes = timestamp_probes(partition_timestamps(records, acks))
        got, *offsets = await aiokafka_consume_and_offsets(endpoint, topic, len(records), probes)
        check_round_trip(records, acks, got)
        check_offsets(records, acks, *offsets)

    async def bounded() -> None:
        await asyncio.wait_for(scenario(), ASYNC_TEST_TIMEOUT_S)

    asyncio.run(bounded())
