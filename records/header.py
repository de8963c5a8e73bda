"""The header of a v2 record batch, read and patched at fixed byte positions (KIP-98).

Layout, all integers big-endian:

    pos  size  field
      0     8  base_offset          offset of the first record (assigned by the log)
      8     4  batch_length         bytes that follow this field, so size = batch_length + 12
     12     4  leader_epoch         (Kafka: partition_leader_epoch)
     16     1  magic                2 for this layout
     17     4  crc                  CRC32C (Castagnoli) of bytes 21..end, unsigned
     21     2  attributes           bits 0-2 compression, 3 timestamp type (1 = LogAppendTime),
                                    4 transactional, 5 control
     23     4  last_offset_delta    last record's offset minus base_offset
     27     8  base_timestamp
     35     8  max_timestamp
     43     8  producer_id          -1 when the writer is not an idempotent producer
     51     2  producer_epoch
     53     4  base_sequence        -1 when the writer is not an idempotent producer
     57     4  record_count
     61     -  records              (decode.py), possibly compressed as a whole

Base offset and leader epoch lie before the checksummed span, so a broker patches them in
place and the producer's CRC stays valid: stored bytes are the bytes a client sent, and a
consumer checks the same CRC. Only LogAppendTime (attributes and max_timestamp, inside the
span) needs the CRC written again.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from .errors import InvalidBatch, Reason

Buffer = bytes | bytearray | memoryview

HEADER_BYTES = 61
MAGIC = 2
LENGTH_FIELD_END = 12  # batch_length counts the bytes after base_offset and itself
MIN_BATCH_LENGTH = HEADER_BYTES - LENGTH_FIELD_END
CRC_AT = 17
CRC_START = 21  # the checksum covers attributes .. end of batch
ATTRIBUTES_AT = 21
MAX_TIMESTAMP_AT = 35
RECORD_COUNT_AT = 57

COMPRESSION_MASK = 0x07
LOG_APPEND_TIME_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40  # KIP-534: base_timestamp holds when a cleaner may drop the batch's tombstones

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_LEADER_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_COUNT = struct.Struct(">i")
assert _HEADER.size == HEADER_BYTES


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LENGTH_FIELD_END

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (compression.py)."""
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & LOG_APPEND_TIME_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def delete_horizon(self) -> int | None:
        """When a log cleaner may drop this batch's tombstones (KIP-534), if one cleaned it."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_BIT else None


# -- reading ---------------------------------------------------------------------------------


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    if len(buf) - pos < HEADER_BYTES:
        raise InvalidBatch(Reason.SHORT, f"batch header needs {HEADER_BYTES} bytes, {len(buf) - pos} left")
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def header_fields(buf: Buffer, pos: int = 0) -> tuple[int, ...]:
    """The header's fields in BatchHeader's order as a plain tuple, for a comparison that needs
    no BatchHeader (the caller knows 61 bytes are there)."""
    return _HEADER.unpack_from(buf, pos)


def peek_size(buf: Buffer, pos: int = 0) -> int:
    """Total bytes of the batch at `pos`, from its length field alone (needs 12 bytes)."""
    if len(buf) - pos < LENGTH_FIELD_END:
        raise InvalidBatch(Reason.SHORT, f"batch length needs {LENGTH_FIELD_END} bytes, {len(buf) - pos} left")
    batch_length: int = _LENGTH.unpack_from(buf, pos + 8)[0]
    return batch_length + LENGTH_FIELD_END


def record_count(data: Buffer) -> int:
    """Records in the whole batches of `data`, from their headers' length and record_count
    fields alone (no decoding; about 0.5 us a batch, so a fetch's answer can be counted)."""
    count, pos, end = 0, 0, len(data) - HEADER_BYTES
    length, records = _LENGTH.unpack_from, _COUNT.unpack_from
    while pos <= end:
        count += records(data, pos + RECORD_COUNT_AT)[0]
        pos += length(data, pos + 8)[0] + LENGTH_FIELD_END
    return count


def iter_batches(data: Buffer, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch from `start`; stops quietly at a torn tail
    or at a length that cannot be a batch, so callers decide whether that is an error."""
    pos = start
    while len(data) - pos >= HEADER_BYTES:
        header = parse_header(data, pos)
        if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > len(data):
            return
        yield pos, header
        pos += header.size


# -- checksum --------------------------------------------------------------------------------


def batch_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC32C over the checksummed span of the batch of `size` bytes at `pos`."""
    return crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def crc_ok(buf: Buffer, pos: int = 0, header: BatchHeader | None = None) -> bool:
    header = header if header is not None else parse_header(buf, pos)
    if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > len(buf):
        return False
    return batch_crc(buf, pos, header.size) == header.crc


def set_crc(buf: bytearray, pos: int = 0) -> None:
    """Write the checksum of the batch at `pos` (for writers that build or stamp batches)."""
    _CRC.pack_into(buf, pos + CRC_AT, batch_crc(buf, pos, peek_size(buf, pos)))


# -- patching in place -----------------------------------------------------------------------


def pack_header(header: BatchHeader) -> bytes:
    """The 61 header bytes for `header` (the inverse of parse_header)."""
    return _HEADER.pack(*header)


def set_base_offset(buf: bytearray, offset: int) -> None:
    _BASE_OFFSET.pack_into(buf, 0, offset)


def set_leader_epoch(buf: bytearray, epoch: int) -> None:
    _LEADER_EPOCH.pack_into(buf, 12, epoch)


def stamp_log_append_time(batch: bytearray, now_ms: int) -> BatchHeader:
    """Mark the batch LogAppendTime with max timestamp `now_ms` and write its CRC again
    (both fields lie inside the checksummed span); returns the new header."""
    (attributes,) = _ATTRIBUTES.unpack_from(batch, ATTRIBUTES_AT)
    _ATTRIBUTES.pack_into(batch, ATTRIBUTES_AT, attributes | LOG_APPEND_TIME_BIT)
    _TIMESTAMP.pack_into(batch, MAX_TIMESTAMP_AT, now_ms)
    set_crc(batch)
    return parse_header(batch)
