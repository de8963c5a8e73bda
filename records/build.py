"""Batches out of records: the writing side of decode.py, in the same layout (header.py).

Offsets inside a batch are dense: record i gets offset delta i. The base timestamp is the
first record's and max_timestamp the largest (Kafka's MemoryRecordsBuilder does the same;
deltas may be negative). The CRC is written last, over the finished bytes. A broker patches
base offset and leader epoch in place later, outside the CRC.

A batch is recompressed here too (`recompress`): its records block, as one piece, under
another codec; the records and every header field but the codec bits stay as they were.

And a log cleaner rebuilds a batch with some of its records (`retained`), as Kafka's cleaner
does: the same base offset and last offset delta (so the batch still covers its offsets and
its producer's sequence range: surviving records keep their offsets, and the gaps are where
records were), the same producer fields, codec and flags; the base timestamp may become a
delete horizon (KIP-534), with the records' timestamp deltas taken from it so every record
keeps its timestamp.

Control batches (transaction markers) are built here because only a broker writes them: a
produced batch with the control bit is refused by validate.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .compression import NONE, compress, decompress
from .control import ControlType, marker_key, marker_value
from .decode import Header, Record
from .header import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    HEADER_BYTES,
    LENGTH_FIELD_END,
    MAGIC,
    TRANSACTIONAL_BIT,
    BatchHeader,
    Buffer,
    pack_header,
    parse_header,
    set_crc,
)
from .varint import write_varint

BATCH_BYTES_MAX = 2**31 - 1  # batch_length is an i32


class NewRecord(NamedTuple):
    """A record to write; its offset is its place in the batch."""

    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[Header, ...] = ()


class Producer(NamedTuple):
    """Who writes a batch; NO_PRODUCER for a writer that is not idempotent."""

    producer_id: int
    producer_epoch: int
    base_sequence: int


NO_PRODUCER = Producer(-1, -1, -1)


def build_batch(records: Sequence[NewRecord], *, producer: Producer = NO_PRODUCER, transactional: bool = False,
                control: bool = False, compression: int = NONE, base_offset: int = 0,
                leader_epoch: int = -1) -> bytearray:
    """A v2 batch holding `records` (at least one), its CRC written."""
    if not records:
        raise ValueError("a batch holds at least one record")
    base_time = records[0].timestamp
    body = compress(compression, b"".join(_record(i, r, base_time) for i, r in enumerate(records)))
    attributes = compression | (TRANSACTIONAL_BIT if transactional else 0) | (CONTROL_BIT if control else 0)
    header = BatchHeader(
        base_offset=base_offset, batch_length=HEADER_BYTES - LENGTH_FIELD_END + len(body),
        leader_epoch=leader_epoch, magic=MAGIC, crc=0, attributes=attributes,
        last_offset_delta=len(records) - 1, base_timestamp=base_time,
        max_timestamp=max(r.timestamp for r in records), producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch, base_sequence=producer.base_sequence, record_count=len(records))
    if header.size > BATCH_BYTES_MAX:
        raise ValueError(f"a batch of {header.size} bytes does not fit the i32 batch_length")
    batch = bytearray(pack_header(header)) + body
    set_crc(batch)
    return batch


def recompress(batch: Buffer, codec: int, level: int | None = None) -> bytearray:
    """The batch with its records compressed by `codec` (at `level`, see compress) instead of
    its own; InvalidBatch if its records do not decompress."""
    header = parse_header(batch)
    body = compress(codec, decompress(header.compression, bytes(batch[HEADER_BYTES:header.size])), level)
    attributes = header.attributes & ~COMPRESSION_MASK | codec
    new = header._replace(attributes=attributes, batch_length=HEADER_BYTES - LENGTH_FIELD_END + len(body), crc=0)
    out = bytearray(pack_header(new)) + body
    set_crc(out)
    return out


def retained(header: BatchHeader, records: Sequence[Record], delete_horizon: int | None = None) -> bytearray:
    """The batch `header` describes rebuilt with `records` (some of its own, in order; none
    gives an empty batch, which a cleaner keeps for its producer's sequence), its delete
    horizon set if given, its CRC written."""
    codec = header.compression if records else NONE
    base_time = delete_horizon if delete_horizon is not None else (
        records[0].timestamp if records else header.base_timestamp)
    body = compress(codec, b"".join(_record(r.offset - header.base_offset, NewRecord(r.key, r.value, r.timestamp,
                                                                                       r.headers), base_time)
                                    for r in records))
    attributes = header.attributes & ~COMPRESSION_MASK | codec
    if delete_horizon is not None:
        attributes |= DELETE_HORIZON_BIT
    max_timestamp = header.max_timestamp if header.is_log_append_time or not records else max(
        r.timestamp for r in records)
    new = header._replace(batch_length=HEADER_BYTES - LENGTH_FIELD_END + len(body), crc=0, attributes=attributes,
                          base_timestamp=base_time, max_timestamp=max_timestamp, record_count=len(records))
    batch = bytearray(pack_header(new)) + body
    set_crc(batch)
    return batch


def build_control_batch(producer_id: int, producer_epoch: int, control_type: ControlType, coordinator_epoch: int,
                        timestamp_ms: int, base_offset: int = 0, leader_epoch: int = -1) -> bytearray:
    """A transaction marker (control.py) for the producer's open transaction: transactional
    and control bits set, no sequence (markers are not part of the producer's sequence)."""
    marker = NewRecord(marker_key(control_type), marker_value(coordinator_epoch), timestamp_ms)
    return build_batch([marker], producer=Producer(producer_id, producer_epoch, -1), transactional=True,
                       control=True, base_offset=base_offset, leader_epoch=leader_epoch)


def _record(offset_delta: int, record: NewRecord, base_time: int) -> bytes:
    fields = b"".join((
        b"\x00",  # attributes
        write_varint(record.timestamp - base_time),
        write_varint(offset_delta),
        _bytes(record.key),
        _bytes(record.value),
        write_varint(len(record.headers)),
        *(_bytes(key.encode()) + _bytes(value) for key, value in record.headers),
    ))
    return write_varint(len(fields)) + fields


def _bytes(data: bytes | None) -> bytes:
    return write_varint(-1) if data is None else write_varint(len(data)) + data
