"""`spark.read.format("martlet")` and `spark.readStream.format("martlet")`: a topic's committed
records read straight from Martlet's store by Spark's Python workers, with no broker on the
data path (Spark 4's Python Data Source API).

    from martlet.connectors.spark import register
    register(spark)
    df = (spark.read.format("martlet").option("store", "hdfs://namenode:8020/martlet")
          .option("topic", "events").load())

Options:
- `store` (required): where the brokers keep their data, `hdfs://host:port/path` (read
  without a lease) or a broker's data folder;
- `topic` (required);
- `startingOffsets`: `earliest` (default), `latest`, or Spark's Kafka JSON
  (`{"events": {"0": 23, "1": -2}}`, -2 earliest, -1 latest); `endingOffsets` (batch only):
  `latest` (default) or the same JSON.

Rows have the columns of Spark's Kafka source (connectors/arrow.py). Each range ends at a
partition's last stable offset as its broker published it, never at a file's size; work is
split by physical partition and segment, one Spark task per piece. A streaming query's
offsets are per partition ({"0": next offset, ...}), so one restarted from its checkpoint
goes on exactly where it stopped; partitions added to the topic are picked up from offset 0.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

from ...engine.api import Store, Topic, partition_reader, stored_topic
from ..arrow import Committed, Span, arrow_batches, open_store, span_end

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int, headers array<struct<key:string,value:binary>>")
EARLIEST, LATEST = -2, -1  # as in Spark's Kafka offsets JSON
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
TRIM_THRESHOLD_BYTES, MMAP_THRESHOLD_BYTES = 64 << 20, 32 << 20  # what a Spark worker sets: keep_freed_memory
Offsets = dict[str, int]  # partition (as text, for JSON) -> offset


def register(spark: Any) -> None:
    """Make `format("martlet")` known to a SparkSession."""
    spark.dataSource.register(MartletDataSource)


@dataclass(frozen=True)
class Split(InputPartition):
    """Offsets [start, end) of one partition, within one segment."""

    partition: int
    start: int
    end: int


class MartletDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "martlet"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return BatchReader(Options(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802  # Spark's name
        return StreamReader(Options(self.options))


class Options:
    def __init__(self, options: Any) -> None:
        given = {str(k).lower(): str(v) for k, v in dict(options).items()}
        missing = [name for name in ("store", "topic") if name not in given]
        if missing:
            raise ValueError(f"format('martlet') needs the option(s) {', '.join(missing)}")
        self.store_url, self.topic = given["store"], given["topic"]
        self.starting = given.get("startingoffsets", "earliest")
        self.ending = given.get("endingoffsets", "latest")

    def open(self) -> tuple[Store, Topic]:
        store = open_store(self.store_url)
        return store, stored_topic(store, self.topic)

    def offsets(self, spec: str, store: Store, topic: Topic) -> Offsets:
        """Per-partition offsets from `earliest`, `latest` or Spark's Kafka JSON."""
        bounds = {p: span_end(store, topic, p) for p in range(topic.partition_count)}
        if spec in ("earliest", "latest"):
            return {str(p): bound[0 if spec == "earliest" else 1] for p, bound in bounds.items()}
        try:
            given = json.loads(spec)[self.topic]
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"offsets {spec!r} are not earliest, latest or JSON naming topic {self.topic!r}") from None
        found = {}
        for p, (first, stable) in bounds.items():
            wanted = int(given.get(str(p), EARLIEST))
            found[str(p)] = first if wanted == EARLIEST else stable if wanted == LATEST else wanted
        return found


def splits(store: Store, topic: Topic, start: Offsets, end: Offsets) -> list[Split]:
    """The pieces of [start, end) of every partition, cut where segments begin."""
    found = []
    for key, stop in sorted(end.items(), key=lambda item: int(item[0])):
        partition, first = int(key), start.get(key, 0)
        if first >= stop:
            continue
        cuts = [base for base in partition_reader(store, topic, partition).segments() if first < base < stop]
        edges = [first, *cuts, stop]
        found += [Split(partition, a, b) for a, b in zip(edges, edges[1:], strict=False)]
    return found


def read_split(options: Options, split: InputPartition) -> Iterator[pa.RecordBatch]:
    """The rows of one split; an error (Spark retries the task) when the store does not show
    the whole split yet: on HDFS a broker's unfinished block shows once it is finished."""
    assert isinstance(split, Split)
    keep_freed_memory()
    freeze_loaded_objects()
    store, topic = options.open()
    read = Committed(store, topic, Span(split.partition, split.start, split.end))
    yield from arrow_batches(read, "us")
    if read.reached < split.end:
        raise RuntimeError(f"{topic.name} partition {split.partition}: the store shows offsets up to {read.reached}, "
                           f"not yet to {split.end} (on HDFS a segment's unfinished block shows once its broker "
                           f"finishes or rolls it); try again")


@functools.cache
def keep_freed_memory() -> None:
    """Have glibc keep freed memory in this Python worker instead of handing it back.

    A read allocates and frees buffers of about 8 MB all the time (each store read, each Arrow
    batch's values). By default glibc maps such a buffer afresh or trims the heap after it, so
    every page of the next one faults in zeroed again: on 200 MB of 1 KB records, 38,000 page
    faults and 0.20 CPU-s for the whole read, against 0 faults and 0.13 CPU-s with these
    thresholds. A Spark Python worker lives on for more tasks; what it keeps is at most
    TRIM_THRESHOLD_BYTES above what it uses. Without glibc (no mallopt) nothing changes."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # the C library this interpreter runs on
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)


@functools.cache
def freeze_loaded_objects() -> None:
    """Leave the objects this Python worker holds at its first read out of every garbage
    collection from then on (gc.freeze): modules, classes, functions, most of them pyspark's,
    pyarrow's and numpy's, which live as long as the worker anyway.

    A Spark Python worker runs a full gc.collect() after every task (pyspark/daemon.py), which
    walks them all: 7% of a worker's CPU samples (py-spy) over reads of 500 MB splits, none
    with them frozen. What is frozen is never collected: garbage in it stays (it is the
    worker's start-up, read once)."""
    gc.freeze()


class BatchReader(DataSourceReader):
    def __init__(self, options: Options) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        store, topic = self.options.open()
        start = self.options.offsets(self.options.starting, store, topic)
        end = self.options.offsets(self.options.ending, store, topic)
        return splits(store, topic, start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_split(self.options, partition)


class StreamReader(DataSourceStreamReader):
    def __init__(self, options: Options) -> None:
        self.options = options

    def initialOffset(self) -> Offsets:  # noqa: N802  # Spark's names
        store, topic = self.options.open()
        return self.options.offsets(self.options.starting, store, topic)

    def latestOffset(self, start: Offsets | None = None, limit: Any = None) -> Offsets:  # noqa: N802
        store, topic = self.options.open()
        return {str(p): span_end(store, topic, p)[1] for p in range(topic.partition_count)}

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        store, topic = self.options.open()
        return splits(store, topic, start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_split(self.options, partition)

    def commit(self, end: Offsets) -> None:
        """Nothing to do: the store keeps the data whatever Spark has processed."""
