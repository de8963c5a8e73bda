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

import numpy as np
import pyarrow as pa

from ..engine.api import LocalStore, Store, Topic, hdfs_store, partition_reader, stored_topic
from ..records.control import ControlType
from ..records.decode import control_marker
from ..records.header import BatchHeader, iter_batches
from .columns import HEADER, Columns, binary_array, columns, headers_array

READ_BYTES = 8 << 20  # one read of the store
ROWS_PER_BATCH = 8_192  # Arrow record batches are cut at about this many rows
SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                    ("partition", pa.int32()), ("offset", pa.int64()),
                    ("timestamp", pa.timestamp("ms", tz="UTC")), ("timestampType", pa.int32()),
                    ("headers", pa.list_(HEADER))])


def open_store(url: str, read_only: bool = True) -> Store:
    """A store by URL: `hdfs://host:port/root` (read-only by default: it never takes a
    lease), or a folder (a broker's --data-dir, or where an export writes)."""
    if url.startswith("hdfs://"):
        address, _, root = url[len("hdfs://"):].partition("/")
        return hdfs_store(f"hdfs://{address}", "/" + root, read_only=read_only)
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


def arrow_batches(read: Committed, unit: str = "ms") -> Iterator[pa.RecordBatch]:
    """What `read` gives, as Arrow record batches of about ROWS_PER_BATCH rows (timestamps in `unit`)."""
    rows = Rows(read.topic.name, read.span.partition, unit)
    for piece in read:
        rows.add(piece)
        if len(rows) >= ROWS_PER_BATCH:
            yield rows.take()
    if len(rows):
        yield rows.take()


def span_end(store: Store, topic: Topic, partition: int) -> tuple[int, int]:
    """(first offset, last stable offset) of a partition as its broker published them."""
    reader = partition_reader(store, topic, partition)
    return reader.start_offset, reader.last_stable


class Committed:
    """The committed records of one partition in a span, in offset order, as column pieces
    (a batch's, or the part of it in the span); `reached` then tells how far they go: every committed record
    below it was given. That is the span's end, unless the store did not show that much
    yet (on HDFS the block a broker is writing stays unseen until it is finished)."""

    def __init__(self, store: Store, topic: Topic, span: Span) -> None:
        self.topic, self.span = topic, span
        self._reader = partition_reader(store, topic, span.partition)
        self.stable = self._reader.last_stable if span.end is None else min(span.end, self._reader.last_stable)
        self.reached = max(span.start, self._reader.start_offset)

    def __iter__(self) -> Iterator[Columns]:
        reader, stable, start = self._reader, self.stable, self.span.start
        held: dict[int, list[Columns]] = {}  # producer id -> its open transaction's records, read so far
        held_from: dict[int, int] = {}  # producer id -> the first offset of its held records
        offset = self.reached
        while offset < reader.checkpoint and (offset < stable or held):
            data = reader.read(offset, READ_BYTES)
            if not data:
                break  # the store shows no more yet
            view = memoryview(data)
            for at, header in iter_batches(data):
                offset = header.next_offset
                if header.base_offset >= stable and not header.is_control:
                    continue  # past the stable offset: only markers of held transactions matter
                batch = view[at:at + header.size]
                if header.is_control:
                    held_from.pop(header.producer_id, None)
                    for piece in _ended(header, batch, held):
                        yield piece.between(start, stable)
                elif header.is_transactional:
                    held_from.setdefault(header.producer_id, header.base_offset)
                    # a copy: a held piece would otherwise keep the whole read it came from alive
                    held.setdefault(header.producer_id, []).append(columns(bytes(batch), header))
                elif header.record_count:
                    yield columns(batch, header).between(start, stable)
                self.reached = min([min(offset, stable), *held_from.values()])


def _ended(header: BatchHeader, batch: memoryview, held: dict[int, list[Columns]]) -> list[Columns]:
    """A marker: the records of the transaction it commits, none for an abort."""
    pieces = held.pop(header.producer_id, [])
    if not header.record_count or control_marker(batch).control_type != ControlType.COMMIT:
        return []
    return pieces


class Rows:
    """Records of one partition gathered into Arrow columns, timestamps in `unit` ("ms" as
    SCHEMA has them, or "us", what Spark takes)."""

    def __init__(self, topic: str, partition: int, unit: str = "ms") -> None:
        self.topic, self.partition = topic, partition
        self.schema = SCHEMA if unit == "ms" else with_timestamps(unit)
        self._scale = {"ms": 1, "us": 1_000}[unit]
        self._pieces: list[Columns] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, piece: Columns) -> None:
        if len(piece):
            self._pieces.append(piece)
            self._count += len(piece)

    def take(self) -> pa.RecordBatch:
        pieces, self._pieces, count, self._count = self._pieces, [], self._count, 0
        timestamps = np.concatenate([p.timestamps for p in pieces]) * self._scale
        arrays = [
            binary_array([p.keys for p in pieces]),
            binary_array([p.values for p in pieces]),
            pa.repeat(pa.scalar(self.topic, pa.string()), count),
            pa.repeat(pa.scalar(self.partition, pa.int32()), count),
            pa.array(np.concatenate([p.offsets for p in pieces])),
            pa.array(timestamps, self.schema.field("timestamp").type),
            pa.array(np.concatenate([np.full(len(p), p.kind, np.int32) for p in pieces])),
            headers_array(pieces),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def with_timestamps(unit: str) -> pa.Schema:
    """SCHEMA with timestamps in `unit`."""
    at = SCHEMA.get_field_index("timestamp")
    return SCHEMA.set(at, pa.field("timestamp", pa.timestamp(unit, tz="UTC")))
