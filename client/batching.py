"""The producer's batches, encoded in one pass: the bytes records/build.py's `build_batch` makes
for the same records (the v2 layout of records/header.py), at a fraction of its cost.

`build_batch` is the generic writer (any codec, control and transactional bits) and pays for
it per record: a NewRecord, seven small byte strings joined, a varint each built a byte at a
time. The producer's batches are always uncompressed, idempotent and neither transactional nor
control, so here a record is a handful of pieces appended to one list that is joined once:
varints of small numbers (offset deltas, lengths, timestamp deltas) come from a table, headers
are encoded only for the records that have them. tests/unit/client/test_batching.py checks the
bytes against build_batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..records.build import Producer
from ..records.header import HEADER_BYTES, LENGTH_FIELD_END, MAGIC, BatchHeader, pack_header, set_crc
from ..records.varint import write_unsigned_varint, write_varint

TABLE_SIZE = 1 << 14  # zig-zagged values below this are looked up (2 bytes at most)
_TABLE = tuple(write_varint(z >> 1) if z % 2 == 0 else write_varint(-(z >> 1) - 1) for z in range(TABLE_SIZE))
_NULL = _TABLE[1]  # -1 zig-zagged: a null key or value
_NO_HEADERS = _TABLE[0]
_ATTRIBUTES = b"\x00"  # a record's attributes byte (unused by the format: always 0)
_BATCH_BYTES_MAX = 2**31 - 1  # batch_length is an i32


class Record(Protocol):
    """What a batch needs of a record (client.message.Message and records.build.NewRecord have it)."""

    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]: ...


def build_producer_batch(records: Sequence[Record], producer: Producer) -> bytearray:
    """An uncompressed v2 batch of `records` (at least one) from an idempotent `producer`, its CRC
    written: byte for byte `build_batch([NewRecord(...)...], producer=producer)`."""
    if not records:
        raise ValueError("a batch holds at least one record")
    base_time = records[0].timestamp
    parts: list[bytes] = [b""]  # the header goes first, once the records' length is known
    max_time = _encode(records, base_time, parts)
    body_bytes = sum(map(len, parts))
    header = BatchHeader(
        base_offset=0, batch_length=HEADER_BYTES - LENGTH_FIELD_END + body_bytes, leader_epoch=-1, magic=MAGIC,
        crc=0, attributes=0, last_offset_delta=len(records) - 1, base_timestamp=base_time, max_timestamp=max_time,
        producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
        base_sequence=producer.base_sequence, record_count=len(records))
    if header.batch_length + LENGTH_FIELD_END > _BATCH_BYTES_MAX:
        raise ValueError(f"a batch of {header.batch_length} bytes does not fit the i32 batch_length")
    parts[0] = pack_header(header)
    batch = bytearray().join(parts)
    set_crc(batch)
    return batch


def _encode(records: Sequence[Record], base_time: int, parts: list[bytes]) -> int:
    """Append every record's pieces to `parts`; the largest timestamp."""
    table, size, add = _TABLE, TABLE_SIZE, parts.extend
    max_time = base_time
    for delta, record in enumerate(records):
        timestamp, key, value = record.timestamp, record.key, record.value
        if timestamp > max_time:
            max_time = timestamp
        zigzag = ((timestamp - base_time) << 1) ^ ((timestamp - base_time) >> 63)
        head = _ATTRIBUTES + (table[zigzag] if zigzag < size else write_unsigned_varint(zigzag)) + (
            table[delta << 1] if delta < size >> 1 else write_unsigned_varint(delta << 1))
        if key is not None:
            head += (table[len(key) << 1] if len(key) < size >> 1 else write_unsigned_varint(len(key) << 1)) + key
        else:
            head += _NULL
        if value is None:
            head += _NULL
            value = b""
        else:
            head += table[len(value) << 1] if len(value) < size >> 1 else write_unsigned_varint(len(value) << 1)
        tail = _headers(record.headers) if record.headers else _NO_HEADERS
        length = (len(head) + len(value) + len(tail)) << 1
        add((table[length] if length < size else write_unsigned_varint(length), head, value, tail))
    return max_time


def _headers(headers: tuple[tuple[str, bytes | None], ...]) -> bytes:
    """A record's header count and headers, as build.py writes them."""
    out = [write_varint(len(headers))]
    for name, value in headers:
        raw = name.encode()
        out += (write_varint(len(raw)), raw, write_varint(-1) if value is None else write_varint(len(value)) + value)
    return b"".join(out)
