"""Checks a produced record batch (magic v2) the way Kafka's LogValidator does, without
decoding records: header fields, CRC32C, one batch per partition, size limit.

The engine stores the batch bytes as they arrived; only the base offset and the
partition leader epoch are rewritten, and both lie outside the CRC (KIP-98 layout), so
the client's checksum stays valid. LogAppendTime topics also rewrite the timestamp type
and max timestamp, which the CRC covers, so that path recomputes it.
"""

from __future__ import annotations

import struct

import crc32c
from kio.schema.errors import ErrorCode

from ...engine.errors import CorruptBatch
from ...engine.log.batch import HEADER_BYTES, BatchHeader, crc_ok, parse_header

MAGIC_V2 = 2
CONTROL_BIT = 0x20
LOG_APPEND_TIME_BIT = 0x08
ATTRIBUTES_AT = 21
MAX_TIMESTAMP_AT = 35
CRC_AT = 17


class BatchRejected(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_batch(records: bytes | None, max_batch_bytes: int) -> tuple[bytearray, BatchHeader]:
    """A patchable copy of the one batch in `records`, and its parsed header."""
    if not records or len(records) < HEADER_BYTES:
        raise BatchRejected(ErrorCode.invalid_record, "record set shorter than a batch header")
    try:
        header = parse_header(records)
    except CorruptBatch as error:
        raise BatchRejected(ErrorCode.corrupt_message, str(error)) from None
    _check_shape(header, len(records), max_batch_bytes)
    if not crc_ok(records, 0, header):
        raise BatchRejected(ErrorCode.corrupt_message, "record batch CRC32C does not match")
    _check_fields(header)
    return bytearray(records), header


def _check_shape(header: BatchHeader, size: int, max_batch_bytes: int) -> None:
    # Kafka finds no whole v2 batch in either case and answers INVALID_RECORD (checked
    # against the reference broker), not CORRUPT_MESSAGE.
    if header.magic != MAGIC_V2:
        raise BatchRejected(ErrorCode.invalid_record, f"magic {header.magic} is not 2")
    if header.size > size:
        raise BatchRejected(ErrorCode.invalid_record, "record batch is truncated")
    if header.size < size:
        raise BatchRejected(ErrorCode.invalid_record, "a partition's record set must hold exactly one batch")
    if size > max_batch_bytes:
        raise BatchRejected(ErrorCode.message_too_large,
                            f"batch of {size} bytes exceeds max.message.bytes {max_batch_bytes}")


def _check_fields(header: BatchHeader) -> None:
    if header.record_count <= 0 or header.last_offset_delta + 1 != header.record_count:
        raise BatchRejected(ErrorCode.invalid_record, "record count does not match the last offset delta")
    if header.attributes & CONTROL_BIT:
        raise BatchRejected(ErrorCode.invalid_record, "clients may not write control batches")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise BatchRejected(ErrorCode.invalid_record, "an idempotent batch needs a base sequence")


def stamp_log_append_time(batch: bytearray, now_ms: int) -> BatchHeader:
    """Mark the batch LogAppendTime with max timestamp `now_ms`, and fix its CRC."""
    (attributes,) = struct.unpack_from(">h", batch, ATTRIBUTES_AT)
    struct.pack_into(">h", batch, ATTRIBUTES_AT, attributes | LOG_APPEND_TIME_BIT)
    struct.pack_into(">q", batch, MAX_TIMESTAMP_AT, now_ms)
    struct.pack_into(">I", batch, CRC_AT, crc32c.crc32c(memoryview(batch)[ATTRIBUTES_AT:]))
    return parse_header(batch)
