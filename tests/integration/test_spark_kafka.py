"""Spark's stock Kafka connector (spark-sql-kafka-0-10 4.2.0, kafka-clients 3.9) through
Martlet's gateway (issue 15, point 1), on the one local Spark session of tests.fixtures.spark:

- batch reads bounded by JSON offsets per partition, by earliest/latest and by timestamps,
  with the same reads on the reference Kafka giving the same rows (a timestamp with no later
  record is Kafka's -1: an ending bound falls back to the latest offset, a starting bound
  fails the query or, by option, starts at the latest offset);
- the rows carry Spark's Kafka columns equal to what confluent-kafka produced;
- a Structured Streaming query into a Parquet file sink, its driver process killed with
  SIGKILL mid-stream and started again from the checkpoint: each record once in the output;
- batch and streaming writes with format("kafka"), read back by a plain consumer;
- read_committed over committed and aborted transactions: the committed records only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import KafkaError, Message, Producer

from martlet.compat.reference.kafka import ReferenceKafka
from tests.fixtures.martlet import MartletProcess, wait_until
from tests.integration.clients import confluent_consume, confluent_consumer, confluent_create_topic
from tests.support.transactions import producer as transactional_producer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 30.0
STREAM_PROGRESS_S = 120  # a driver process must start its JVM and commit batches within this
PARTITIONS = 2
STEP_MS = 1000  # records are a second apart, so a timestamp between two falls on neither

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Produced:
    """A record as produced and acknowledged, in the terms of Spark's Kafka columns."""

    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    headers: Headers


def new_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    topic = f"spark-{uuid.uuid4().hex[:10]}"
    confluent_create_topic(bootstrap, topic, partitions)
    return topic


def record_headers(seq: int) -> Headers:
    if seq % 3 == 0:
        return ()
    if seq % 3 == 1:
        return (("seq", b"%d" % seq),)
    return (("dup", b"first"), ("dup", b"second\x00\xff"), ("empty", b""))


def produce(bootstrap: str, topic: str, count: int, base_ts_ms: int, partitions: int = PARTITIONS) -> list[Produced]:
    """`count` records round-robin over the partitions, seq n stamped base_ts_ms + n * STEP_MS,
    with keys (one null), headers (none, one, or repeated names) and one null value."""
    acks: dict[int, tuple[int, int]] = {}
    errors: list[str] = []
    made = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})

    def delivered(seq: int) -> Callable[[KafkaError | None, Message], None]:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(f"seq {seq}: {err}")
            else:
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                acks[seq] = (partition, offset)
        return report

    wanted = []
    for seq in range(count):
        key = None if seq == 5 else b"key-%d" % seq
        value = None if seq == 7 else b"value-%d" % seq
        wanted.append((seq, key, value))
        made.produce(topic, key=key, value=value, partition=seq % partitions, timestamp=base_ts_ms + seq * STEP_MS,
                     headers=list(record_headers(seq)) or None, on_delivery=delivered(seq))
    assert made.flush(TIMEOUT_S) == 0 and not errors, errors
    return sorted((Produced(key, value, topic, *acks[seq], base_ts_ms + seq * STEP_MS, record_headers(seq))
                   for seq, key, value in wanted), key=lambda r: (r.partition, r.offset))


def recent_ms() -> int:
    """A base timestamp a little in the past, inside every broker's accepted window."""
    return int(time.time() * 1000) - 10 * 60 * 1000


def kafka_reader(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> DataFrame:
    reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("includeHeaders", "true"))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def rows(frame: DataFrame) -> list[Produced]:
    """Spark's Kafka rows as Produced, ordered by partition and offset (timestampType checked:
    CreateTime, 0, for every row)."""
    got = frame.selectExpr("key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS ts",
                           "timestampType", "headers").collect()
    assert {row.timestampType for row in got} <= {0}, "not every row is CreateTime"
    return sorted((Produced(none_or_bytes(row.key), none_or_bytes(row.value), row.topic, row.partition, row.offset,
                            row.ts, tuple((h.key, bytes(h.value)) for h in row.headers or ()))
                   for row in got), key=lambda r: (r.partition, r.offset))


def none_or_bytes(value: bytearray | None) -> bytes | None:
    return None if value is None else bytes(value)


def offsets(found: list[Produced]) -> list[tuple[int, int]]:
    return [(r.partition, r.offset) for r in found]


# -- batch reads -----------------------------------------------------------------------------

def test_batch_rows_carry_the_kafka_columns_as_produced(spark: SparkSession, martlet: MartletProcess) -> None:
    topic = new_topic(martlet.bootstrap)
    produced = produce(martlet.bootstrap, topic, 40, recent_ms())
    assert {r.partition for r in produced} == {0, 1}
    assert rows(kafka_reader(spark, martlet.bootstrap, topic)) == produced
    explicit = kafka_reader(spark, martlet.bootstrap, topic, startingOffsets="earliest", endingOffsets="latest")
    assert rows(explicit) == produced


def test_batch_bounded_by_json_offsets_per_partition(spark: SparkSession, martlet: MartletProcess) -> None:
    topic = new_topic(martlet.bootstrap)
    produced = produce(martlet.bootstrap, topic, 40, recent_ms())
    # -2 is earliest and -1 latest, as in Kafka's ListOffsets
    start = json.dumps({topic: {"0": 3, "1": -2}})
    end = json.dumps({topic: {"0": 12, "1": -1}})
    got = rows(kafka_reader(spark, martlet.bootstrap, topic, startingOffsets=start, endingOffsets=end))
    assert got == [r for r in produced if (r.partition == 0 and 3 <= r.offset < 12) or r.partition == 1]


def timestamp_reads(spark: SparkSession, bootstrap: str, topic: str, base: int) -> dict[str, Any]:
    """The timestamp-bounded reads compared between Martlet and the reference Kafka. Record
    seq n is in partition n % 2 at offset n // 2, stamped base + n s; `after` is later than
    every record, so it finds no offset (Kafka's -1)."""
    after = base + 1000 * STEP_MS

    def read(**options: str) -> list[tuple[int, int]]:
        return offsets(rows(kafka_reader(spark, bootstrap, topic, **options)))

    def by_partition(first: int, second: int) -> str:
        return json.dumps({topic: {"0": first, "1": second}})

    from pyspark.errors import IllegalArgumentException

    with pytest.raises(IllegalArgumentException, match="No offset matched") as failed:
        read(startingOffsetsByTimestamp=by_partition(after, base), **{"fetchOffset.numRetries": "1"})
    return {
        "startingTimestamp": read(startingTimestamp=str(base + 10 * STEP_MS + 1)),
        "startingTimestamp+endingTimestamp": read(startingTimestamp=str(base + 10 * STEP_MS),
                                                  endingTimestamp=str(base + 20 * STEP_MS)),
        "byTimestamp per partition": read(startingOffsetsByTimestamp=by_partition(base + 4 * STEP_MS, base),
                                          endingOffsetsByTimestamp=by_partition(base + 9 * STEP_MS, base + 6 * STEP_MS)),
        "ending after the last record": read(endingOffsetsByTimestamp=by_partition(after, base + 3 * STEP_MS)),
        "starting after the last record, latest": read(startingOffsetsByTimestamp=by_partition(after, base),
                                                       startingOffsetsByTimestampStrategy="latest"),
        "starting after the last record, error": str(failed.value).replace(topic, "TOPIC").splitlines()[0],
    }


def test_batch_bounded_by_timestamps_as_on_the_reference_kafka(spark: SparkSession, martlet: MartletProcess,
                                                               reference_kafka: ReferenceKafka) -> None:
    base = recent_ms()
    answers: dict[str, dict[str, Any]] = {}
    for name, bootstrap in (("martlet", martlet.bootstrap), ("reference", reference_kafka.bootstrap)):
        topic = "spark-timestamps-" + uuid.uuid4().hex[:6]
        confluent_create_topic(bootstrap, topic, PARTITIONS)
        produce(bootstrap, topic, 40, base)
        answers[name] = timestamp_reads(spark, bootstrap, topic, base)
    at = [(n % 2, n // 2) for n in range(40)]  # seq n -> (partition, offset)
    assert answers["martlet"] == {
        "startingTimestamp": sorted(at[11:]),
        "startingTimestamp+endingTimestamp": sorted(at[10:20]),
        "byTimestamp per partition": sorted(at[4:9:2] + at[1:6:2]),
        "ending after the last record": sorted(at[0::2] + at[1:3:2]),
        "starting after the last record, latest": sorted(at[1::2]),
        "starting after the last record, error":
            f"No offset matched from request of topic-partition TOPIC-0 and timestamp {base + 1000 * STEP_MS}.",
    }
    assert answers["martlet"] == answers["reference"]


# -- streaming into Parquet, the driver killed -----------------------------------------------

class StreamDriver:
    """tests/integration/spark_stream_driver.py as a process group of its own (Python and the
    JVM it starts), so SIGKILL takes the whole driver down at once, as a crash would."""

    def __init__(self, args: list[str], log: Path) -> None:
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.integration.spark_stream_driver", *args],
                                         cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.log = log

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(TIMEOUT_S)


def committed_batches(checkpoint: Path) -> list[int]:
    commits = checkpoint / "commits"
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else []


def committed_offsets(checkpoint: Path, topic: str) -> dict[int, int]:
    """The end offsets of the last committed micro-batch (offsets/N holds them as its last line)."""
    done = committed_batches(checkpoint)
    if not done:
        return {}
    last_line = (checkpoint / "offsets" / str(done[-1])).read_text().splitlines()[-1]
    return {int(p): offset for p, offset in json.loads(last_line)[topic].items()}


def wait_stream(driver: StreamDriver, condition: Callable[[], bool], what: str) -> None:
    assert wait_until(lambda: condition() or not driver.alive(), STREAM_PROGRESS_S, interval_s=0.2), (
        f"{what}: not within {STREAM_PROGRESS_S} s; driver log:\n{driver.log.read_text(errors='replace')[-4000:]}")
    assert driver.alive(), f"{what}: the driver died:\n{driver.log.read_text(errors='replace')[-4000:]}"


def test_streaming_to_parquet_survives_a_killed_driver_exactly_once(spark: SparkSession, spark_jars: list[str],
                                                                    martlet: MartletProcess, tmp_path: Path) -> None:
    topic = new_topic(martlet.bootstrap, partitions=3)
    first = produce(martlet.bootstrap, topic, 600, recent_ms(), partitions=3)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    args = [martlet.bootstrap, topic, str(output), str(checkpoint), str(tmp_path / "work"), ",".join(spark_jars),
            "--per-trigger", "60"]
    driver = StreamDriver(args, tmp_path / "driver.log")
    try:
        wait_stream(driver, lambda: len(committed_batches(checkpoint)) >= 2, "two micro-batches committed")
    finally:
        driver.kill()
    assert sum(committed_offsets(checkpoint, topic).values()) < len(first), "killed after the end: not mid-stream"
    second = produce(martlet.bootstrap, topic, 300, recent_ms() + 1000 * STEP_MS, partitions=3)
    ends = {p: 1 + max(r.offset for r in first + second if r.partition == p) for p in range(3)}
    driver = StreamDriver(args, tmp_path / "driver.log")
    try:
        wait_stream(driver, lambda: committed_offsets(checkpoint, topic) == ends, "every record committed")
    finally:
        driver.kill()
    # Spark reads a file sink's folder through its _spark_metadata log: the files of committed
    # batches only, not those a killed batch left behind.
    written = spark.read.parquet(str(output)).collect()
    got = sorted((row.partition, row.offset, none_or_bytes(row.value), row.timestamp_ms) for row in written)
    assert got == sorted((r.partition, r.offset, r.value, r.timestamp_ms) for r in first + second)


# -- writes ----------------------------------------------------------------------------------

def consume_all(bootstrap: str, topic: str, count: int, partitions: int = PARTITIONS) -> list[Produced]:
    consumer = confluent_consumer(bootstrap)
    try:
        got = confluent_consume(consumer, topic, count, partitions=partitions, timeout_s=TIMEOUT_S)
    finally:
        consumer.close()
    return sorted((Produced(g.key, g.value, topic, g.partition, g.offset, g.timestamp_ms, g.headers) for g in got),
                  key=lambda r: (r.partition, r.offset))


def test_batch_write_with_format_kafka_reads_back_with_a_plain_consumer(spark: SparkSession,
                                                                        martlet: MartletProcess) -> None:
    topic = new_topic(martlet.bootstrap)
    wanted = [(b"k%d" % n, b"v%d" % n, n % PARTITIONS, [("n", b"%d" % n)]) for n in range(50)]
    schema = "key binary, value binary, partition int, headers array<struct<key:string,value:binary>>"
    frame = spark.createDataFrame(wanted, schema)
    frame.write.format("kafka").option("kafka.bootstrap.servers", martlet.bootstrap).option("topic", topic).save()
    got = consume_all(martlet.bootstrap, topic, len(wanted))
    assert sorted((r.key, r.value, r.partition, r.headers) for r in got) == sorted(
        (k, v, p, tuple(h)) for k, v, p, h in wanted)
    for p in range(PARTITIONS):  # each partition in the order Spark wrote it
        assert [r.offset for r in got if r.partition == p] == list(range(len(wanted) // PARTITIONS))


def test_streaming_write_from_one_topic_to_another(spark: SparkSession, martlet: MartletProcess,
                                                   tmp_path: Path) -> None:
    source, sink = new_topic(martlet.bootstrap), new_topic(martlet.bootstrap)
    produced = produce(martlet.bootstrap, source, 60, recent_ms())
    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", martlet.bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest").load()
             .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "partition")
             .writeStream.format("kafka").option("kafka.bootstrap.servers", martlet.bootstrap)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(STREAM_PROGRESS_S), "the availableNow query did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    got = consume_all(martlet.bootstrap, sink, len(produced))
    assert sorted(((r.partition, r.key, r.value) for r in got), key=repr) == sorted(
        ((r.partition, r.key, None if r.value is None else r.value.upper()) for r in produced), key=repr)


# -- read_committed --------------------------------------------------------------------------

def test_read_committed_returns_committed_transactions_only(spark: SparkSession, martlet: MartletProcess) -> None:
    topic = new_topic(martlet.bootstrap)
    made = transactional_producer(martlet.bootstrap, f"spark-{topic}")
    written: dict[str, list[str]] = {"commit": [], "abort": []}
    for n, outcome in enumerate(["commit", "abort", "commit", "abort", "commit"]):
        values = [f"{outcome}-{n}-{i}" for i in range(6)]
        made.begin_transaction()
        for i, value in enumerate(values):
            made.produce(topic, value=value.encode(), partition=i % PARTITIONS)
        made.flush(TIMEOUT_S)  # sent before an abort, so readers have aborted records to skip
        made.commit_transaction(TIMEOUT_S) if outcome == "commit" else made.abort_transaction(TIMEOUT_S)
        written[outcome] += values

    def read_values(isolation: str) -> list[str]:
        frame = kafka_reader(spark, martlet.bootstrap, topic, **{"kafka.isolation.level": isolation})
        return sorted(row.value.decode() for row in frame.select("value").collect())

    assert read_values("read_committed") == sorted(written["commit"])
    assert read_values("read_uncommitted") == sorted(written["commit"] + written["abort"])


# -- security ------------------------------------------------------------------------------------

def test_read_and_write_over_sasl_ssl_with_scram(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Spark's connector (kafka-clients 3.9) on a SASL_SSL listener with SCRAM-SHA-512 and a
    PEM truststore: a batch write, then a batch read of what it wrote (issue 39)."""
    from tests.support.sasl import PASSWORD, add_user, start_secured

    secured = start_secured(tmp_path_factory.mktemp("spark-sasl"))
    try:
        add_user(secured.local, "alice", PASSWORD)
        topic = new_topic(secured.local)
        options = {"kafka.bootstrap.servers": secured.addresses["SASL_SSL"], "kafka.security.protocol": "SASL_SSL",
                   "kafka.sasl.mechanism": "SCRAM-SHA-512",
                   "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                             f'username="alice" password="{PASSWORD}";',
                   "kafka.ssl.truststore.type": "PEM",
                   "kafka.ssl.truststore.location": str(secured.certs / "ca.pem")}
        wanted = [(b"k%d" % n, b"v%d" % n) for n in range(20)]
        spark.createDataFrame(wanted, "key binary, value binary").write.format("kafka").options(**options) \
            .option("topic", topic).save()
        rows = (spark.read.format("kafka").options(**options).option("subscribe", topic)
                .option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
                .select("key", "value").collect())
        assert sorted((bytes(row.key), bytes(row.value)) for row in rows) == sorted(wanted)
    finally:
        secured.broker.kill()
