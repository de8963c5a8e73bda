"""`format("martlet")` (connectors/spark): Spark reads a topic straight from the store, batch
and streaming, and gets what a read_committed Kafka reader would, with the Kafka source's
columns; work is split by partition and segment; a streaming query restarted from its
checkpoint goes on exactly where it stopped."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from martlet.connectors.arrow import open_store, span_end
from martlet.connectors.spark import register
from martlet.connectors.spark.source import BatchReader, Options
from martlet.engine.api import stored_topic
from tests.fixtures.martlet import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PUBLISHED_S = 15.0  # the broker publishes C and the LSO every second
STREAM_S = 120.0
T0 = 1_795_824_000_000  # 2026-11-28 00:00 UTC


@pytest.fixture(scope="module")
def martlet_spark(spark: Any) -> Any:
    register(spark)
    return spark


def _topic(bootstrap: str, partitions: int, configs: dict[str, str] | None = None) -> str:
    name = f"source-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(30)
    return name


def _produce(bootstrap: str, topic: str, records: list[dict[str, Any]], transactional: str | None = None,
             commit: bool = True) -> None:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    if transactional:
        config["transactional.id"] = transactional
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    for record in records:
        producer.produce(topic, **record)
    producer.flush(30)
    if transactional:
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def _published(data_dir: Path, topic: str, ends: dict[int, int]) -> None:
    store = open_store(str(data_dir))

    def caught_up() -> bool:
        found = stored_topic(store, topic)
        return all(span_end(store, found, p)[1] >= end for p, end in ends.items())
    assert wait_until(caught_up, PUBLISHED_S, 0.1)


def _load(spark: Any, martlet: Any, topic: str, **options: str) -> Any:
    reader = spark.read.format("martlet").option("store", str(martlet.data_dir)).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_a_batch_read_gives_committed_records_with_the_kafka_sources_columns(martlet_spark: Any,
                                                                            martlet: Any) -> None:
    topic = _topic(martlet.bootstrap, 2)
    _produce(martlet.bootstrap, topic, [{"partition": i % 2, "key": b"k%d" % i, "value": b"v%d" % i,
                                         "timestamp": T0 + i, "headers": [("h", b"%d" % i)]} for i in range(20)])
    _produce(martlet.bootstrap, topic, [{"partition": 0, "value": b"aborted"}], f"tx-{topic}", commit=False)
    _produce(martlet.bootstrap, topic, [{"partition": 0, "value": b"committed"}], f"tx-{topic}")
    _published(martlet.data_dir, topic, {0: 14, 1: 10})
    frame = _load(martlet_spark, martlet, topic)
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int"), ("headers", "array<struct<key:string,value:binary>>")]
    rows = frame.collect()
    assert sorted(bytes(r.value) for r in rows) == sorted([b"v%d" % i for i in range(20)] + [b"committed"])
    first = next(r for r in rows if bytes(r.value) == b"v3")
    assert (bytes(first.key), first.topic, first.partition, first.offset, first.timestampType) == (
        b"k3", topic, 1, 1, 0)
    assert first.timestamp.timestamp() * 1000 == T0 + 3
    assert [(h.key, bytes(h.value)) for h in first.headers] == [("h", b"3")]
    bounded = _load(martlet_spark, martlet, topic, startingOffsets=json.dumps({topic: {"0": 2, "1": -2}}),
                    endingOffsets=json.dumps({topic: {"0": 4, "1": 3}}))
    assert sorted((r.partition, r.offset) for r in bounded.collect()) == [(0, 2), (0, 3), (1, 0), (1, 1), (1, 2)]


def test_work_is_split_by_partition_and_segment(martlet_spark: Any, martlet: Any) -> None:
    topic = _topic(martlet.bootstrap, 2, {"segment.bytes": "1048576"})  # Kafka's smallest: 1 MiB
    _produce(martlet.bootstrap, topic, [{"partition": i % 2, "value": b"x" * 120_000} for i in range(60)])
    _published(martlet.data_dir, topic, {0: 30, 1: 30})
    options = Options({"store": str(martlet.data_dir), "topic": topic})
    pieces = BatchReader(options).partitions()
    assert len(pieces) > 2 * 3  # several segments per partition
    for partition in (0, 1):
        mine = sorted((s.start, s.end) for s in pieces if s.partition == partition)
        assert mine[0][0] == 0 and mine[-1][1] == 30
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:], strict=False))  # they meet end to end
    frame = _load(martlet_spark, martlet, topic)
    assert frame.rdd.getNumPartitions() == len(pieces)
    assert sorted((r.partition, r.offset) for r in frame.select("partition", "offset").collect()) == sorted(
        (p, o) for p in (0, 1) for o in range(30))


def test_a_streaming_query_restarted_from_its_checkpoint_goes_on_where_it_stopped(
        martlet_spark: Any, martlet: Any, tmp_path: Path) -> None:
    topic = _topic(martlet.bootstrap, 2)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run_once() -> None:
        stream = (martlet_spark.readStream.format("martlet").option("store", str(martlet.data_dir))
                  .option("topic", topic).load())
        query = (stream.select("partition", "offset", "value").writeStream.format("parquet")
                 .option("path", str(output)).option("checkpointLocation", str(checkpoint)).start())
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        assert query.exception() is None

    _produce(martlet.bootstrap, topic, [{"partition": i % 2, "value": b"first %d" % i} for i in range(20)])
    _published(martlet.data_dir, topic, {0: 10, 1: 10})
    run_once()
    _produce(martlet.bootstrap, topic, [{"partition": i % 2, "value": b"second %d" % i} for i in range(10)])
    _published(martlet.data_dir, topic, {0: 15, 1: 15})
    run_once()  # the same checkpoint: only what came since
    got = martlet_spark.read.parquet(str(output)).collect()
    assert sorted((r.partition, r.offset) for r in got) == sorted((p, o) for p in (0, 1) for o in range(15))
    assert len({bytes(r.value) for r in got}) == 30
