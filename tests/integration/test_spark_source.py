"""`format("martlet")` (connectors/spark): Spark reads a topic straight from the store, batch
and streaming, and gets what a read_committed Kafka reader would, with the Kafka source's
columns; work is split by partition and segment; a streaming query restarted from its
checkpoint goes on exactly where it stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from martlet.connectors.spark import register
from martlet.connectors.spark.source import BatchReader, Options
from tests.integration.store_readers import new_topic, produce, published

pytestmark = [pytest.mark.integration, pytest.mark.spark]

STREAM_S = 120.0
T0 = 1_795_824_000_000  # 2026-11-28 00:00 UTC


@pytest.fixture(scope="module")
def martlet_spark(spark: Any) -> Any:
    register(spark)
    return spark





def _load(spark: Any, martlet: Any, topic: str, **options: str) -> Any:
    reader = spark.read.format("martlet").option("store", str(martlet.data_dir)).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_a_batch_read_gives_committed_records_with_the_kafka_sources_columns(martlet_spark: Any,
                                                                            martlet: Any) -> None:
    topic = new_topic(martlet.bootstrap, 2)
    produce(martlet.bootstrap, topic, [{"partition": i % 2, "key": b"k%d" % i, "value": b"v%d" % i,
                                         "timestamp": T0 + i, "headers": [("h", b"%d" % i)]} for i in range(20)])
    produce(martlet.bootstrap, topic, [{"partition": 0, "value": b"aborted"}], f"tx-{topic}", commit=False)
    produce(martlet.bootstrap, topic, [{"partition": 0, "value": b"committed"}], f"tx-{topic}")
    published(martlet.data_dir, topic, {0: 14, 1: 10})
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
    topic = new_topic(martlet.bootstrap, 2, {"segment.bytes": "1048576"})  # Kafka's smallest: 1 MiB
    produce(martlet.bootstrap, topic, [{"partition": i % 2, "value": b"x" * 120_000} for i in range(60)])
    published(martlet.data_dir, topic, {0: 30, 1: 30})
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
    topic = new_topic(martlet.bootstrap, 2)
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

    produce(martlet.bootstrap, topic, [{"partition": i % 2, "value": b"first %d" % i} for i in range(20)])
    published(martlet.data_dir, topic, {0: 10, 1: 10})
    run_once()
    produce(martlet.bootstrap, topic, [{"partition": i % 2, "value": b"second %d" % i} for i in range(10)])
    published(martlet.data_dir, topic, {0: 15, 1: 15})
    run_once()  # the same checkpoint: only what came since
    got = martlet_spark.read.parquet(str(output)).collect()
    assert sorted((r.partition, r.offset) for r in got) == sorted((p, o) for p in (0, 1) for o in range(15))
    assert len({bytes(r.value) for r in got}) == 30
