"""A topic's committed records as Arrow, read straight from the store (no broker on the data
path): what `martlet export` writes to Parquet, what a notebook gets from `read_topic`, and
what the Spark data source yields.

Columns are those of Spark's Kafka source: key, value (binary), topic, partition, offset,
timestamp (UTC, milliseconds), timestampType (0 CreateTime, 1 LogAppendTime) and headers (a
list of key/value structs).

A partition is read with the engine's read-only reader (engine/log/reader.py) from a start
offset up to its last stable offset as the broker last published it (the LSO: below it every
transaction is decided), never from a file's size. Records come out as a read_committed
consumer sees them: control batches are skipped, and a transaction's batches are held until
the marker that ends it, then given (COMMIT) or dropped (ABORT). A marker may lie past the LSO
(a transaction decided but not yet visible as decided to every reader), so the read goes on
up to C for markers only. Compacted topics read across their gaps.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from ..engine.api import LocalStore, Store, Topic, hdfs_store, partition_reader, stored_topic
from ..records.control import ControlType
from ..records.decode import Record, control_marker, decode_records
from ..records.header import BatchHeader, iter_batches

Row = tuple[Record, int]  # a record and its timestamp type (its batch's)
READ_BYTES = 8 << 20  # one read of the store
ROWS_PER_BATCH = 65_536  # Arrow record batches are cut at about this many rows
HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                    ("partition", pa.int32()), ("offset", pa.int64()),
                    ("timestamp", pa.timestamp("ms", tz="UTC")), ("timestampType", pa.int32()),
                    ("headers", pa.list_(HEADER))])


def open_store(url: str) -> Store:
    """A store to read from: `hdfs://host:port/root` (read-only: it never takes a lease), or
    the folder a broker keeps its data in (its --data-dir)."""
    if url.startswith("hdfs://"):
        address, _, root = url[len("hdfs://"):].partition("/")
        return hdfs_store(f"hdfs://{address}", "/" + root, read_only=True)
    if "://" in url:
        raise ValueError(f"unknown store {url!r}: give hdfs://host:port/path or a folder")
    return LocalStore(url)


@dataclass(frozen=True)
class Span:
    """Offsets [start, end) of one partition; end None: as far as is committed now."""

    partition: int
    start: int = 0
    end: int | None = None


def read_topic(store: str | Store, topic: str, partitions: list[int] | None = None,
               start: int = 0, end: int | None = None) -> pa.Table:
    """The committed records of `topic` (every partition, or those given), from offset
    `start` to `end` (default: the last stable offset now), as one Arrow table."""
    opened = open_store(store) if isinstance(store, str) else store
    found = stored_topic(opened, topic)
    wanted = range(found.partition_count) if partitions is None else partitions
    batches = [batch for p in wanted for batch in record_batches(opened, found, Span(p, start, end))]
    return pa.Table.from_batches(batches, schema=SCHEMA)


def record_batches(store: Store, topic: Topic, span: Span) -> Iterator[pa.RecordBatch]:
    """The committed records of one partition in `span`, as Arrow record batches."""
    yield from arrow_batches(Committed(store, topic, span))


def arrow_batches(read: Committed) -> Iterator[pa.RecordBatch]:
    """What `read` gives, as Arrow record batches of about ROWS_PER_BATCH rows."""
    rows = Rows(read.topic.name, read.span.partition)
    for records in read:
        rows.add(records)
        if len(rows) >= ROWS_PER_BATCH:
            yield rows.take()
    if len(rows):
        yield rows.take()


def span_end(store: Store, topic: Topic, partition: int) -> tuple[int, int]:
    """(first offset, last stable offset) of a partition as its broker published them."""
    reader = partition_reader(store, topic, partition)
    return reader.start_offset, reader.last_stable


class Committed:
    """The committed records (with their timestamp type) of one partition in a span, in
    offset order, as lists; `reached` then tells how far they go: every committed record
    below it was given. That is the span's end, unless the store did not show that much
    yet (on HDFS the block a broker is writing stays unseen until it is finished)."""

    def __init__(self, store: Store, topic: Topic, span: Span) -> None:
        self.topic, self.span = topic, span
        self._reader = partition_reader(store, topic, span.partition)
        self.stable = self._reader.last_stable if span.end is None else min(span.end, self._reader.last_stable)
        self.reached = max(span.start, self._reader.start_offset)

    def __iter__(self) -> Iterator[list[Row]]:
        reader, stable, start = self._reader, self.stable, self.span.start
        held: dict[int, list[Row]] = {}  # producer id -> its open transaction's records, read so far
        held_from: dict[int, int] = {}  # producer id -> the first offset of its held records
        offset = self.reached
        while offset < reader.checkpoint and (offset < stable or held):
            data = reader.read(offset, READ_BYTES)
            if not data:
                break  # the store shows no more yet
            for at, header in iter_batches(data):
                offset = header.next_offset
                if header.base_offset >= stable and not header.is_control:
                    continue  # past the stable offset: only markers of held transactions matter
                batch = data[at:at + header.size]
                if header.is_control:
                    held_from.pop(header.producer_id, None)
                    done = _ended(header, batch, held)
                    if done:
                        yield [row for row in done if start <= row[0].offset < stable]
                elif header.is_transactional:
                    held_from.setdefault(header.producer_id, header.base_offset)
                    held.setdefault(header.producer_id, []).extend(_rows(header, batch))
                else:
                    yield [row for row in _rows(header, batch) if start <= row[0].offset < stable]
                self.reached = min([min(offset, stable), *held_from.values()])


def _rows(header: BatchHeader, batch: bytes) -> Iterator[Row]:
    kind = 1 if header.is_log_append_time else 0
    return ((record, kind) for record in decode_records(batch))


def _ended(header: BatchHeader, batch: bytes, held: dict[int, list[Row]]) -> list[Row]:
    """A marker: the records of the transaction it commits, none for an abort."""
    records = held.pop(header.producer_id, [])
    if not header.record_count or control_marker(batch).control_type != ControlType.COMMIT:
        return []
    return records


class Rows:
    """Records of one partition gathered into Arrow columns."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self._rows: list[Row] = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, rows: list[Row]) -> None:
        self._rows.extend(rows)

    def take(self) -> pa.RecordBatch:
        rows, self._rows = self._rows, []
        records = [record for record, _ in rows]
        count = len(records)
        columns = [
            pa.array([r.key for r in records], pa.binary()),
            pa.array([r.value for r in records], pa.binary()),
            pa.array([self.topic] * count, pa.string()),
            pa.array([self.partition] * count, pa.int32()),
            pa.array([r.offset for r in records], pa.int64()),
            pa.array([r.timestamp for r in records], pa.timestamp("ms", tz="UTC")),
            pa.array([kind for _, kind in rows], pa.int32()),
            pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], pa.list_(HEADER)),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)
