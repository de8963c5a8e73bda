"""The header of a stored batch, read and patched at fixed byte positions.

The engine stores batches as opaque bytes. It only needs a few metadata fields from each
batch's header, and it keeps those at exactly the positions a Kafka client puts them in a
"record batch v2" (KIP-98). Using that same layout means the bytes a client sends can be stored
and later handed back to consumers untouched: the engine rewrites the base offset (and may set
the leader epoch), both of which lie outside the checksummed span, and never decodes records.

Layout, all integers big-endian:

    pos  size  field
      0     8  base_offset          offset of the first record (assigned by the log)
      8     4  batch_length         bytes that follow this field, so size = batch_length + 12
     12     4  leader_epoch
     16     1  magic                2 for this layout
     17     4  crc                  CRC32C (Castagnoli) of bytes 21..end, unsigned
     21     2  attributes           bits 0-2 compression, 3 timestamp type, 4 transactional,
                                    5 control
     23     4  last_offset_delta    last record's offset minus base_offset
     27     8  base_timestamp
     35     8  max_timestamp
     43     8  producer_id          -1 when the writer is not an idempotent producer
     51     2  producer_epoch
     53     4  base_sequence
     57     4  record_count
     61     -  records              opaque to the engine
"""

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from ..errors import CorruptBatch

HEADER_BYTES = 61
MAGIC = 2
CRC_START = 21  # the checksum covers attributes .. end of batch
LENGTH_FIELD_END = 12  # batch_length counts the bytes after base_offset and itself
MIN_BATCH_LENGTH = HEADER_BYTES - LENGTH_FIELD_END

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
assert _HEADER.size == HEADER_BYTES

_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20


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
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    if len(buf) - pos < HEADER_BYTES:
        raise CorruptBatch(f"batch header needs {HEADER_BYTES} bytes, {len(buf) - pos} left")
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def pack_header(header: BatchHeader) -> bytes:
    """The 61 header bytes for `header` (the inverse of parse_header)."""
    return _HEADER.pack(*header)


def batch_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC32C over the checksummed span of the batch of `size` bytes at `pos`."""
    return crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def crc_ok(buf: bytes | bytearray | memoryview, pos: int = 0, header: BatchHeader | None = None) -> bool:
    header = header if header is not None else parse_header(buf, pos)
    if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > len(buf):
        return False
    return batch_crc(buf, pos, header.size) == header.crc


def set_base_offset(buf: bytearray, offset: int) -> None:
    _BASE_OFFSET.pack_into(buf, 0, offset)


def set_leader_epoch(buf: bytearray, epoch: int) -> None:
    _LEADER_EPOCH.pack_into(buf, 12, epoch)


def set_crc(buf: bytearray, pos: int = 0) -> None:
    """Write the checksum of the batch at `pos` (for writers that build batches)."""
    size = parse_header(buf, pos).size
    _CRC.pack_into(buf, pos + 17, batch_crc(buf, pos, size))


def iter_batches(data: bytes | bytearray | memoryview, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch from `start`; stops quietly at a torn tail
    or at a length that cannot be a batch, so callers decide whether that is an error."""
    pos = start
    while len(data) - pos >= HEADER_BYTES:
        header = parse_header(data, pos)
        if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > len(data):
            return
        yield pos, header
        pos += header.size
