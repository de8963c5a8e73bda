"""The one check a produced batch passes, as Kafka's LogValidator does, without decoding
records: shape (magic 2, one whole batch, size limit), CRC32C, then header fields.

This is the only place the produce path computes a CRC32C (once per batch). The engine
trusts the header it is handed with the bytes (it checks only that the two agree) and checks
CRCs again where bytes come back from the store: recovery, and every consumer.
"""

from __future__ import annotations

from .errors import InvalidBatch, Reason
from .header import HEADER_BYTES, MAGIC, BatchHeader, crc_ok, parse_header


def validate_produced(records: bytes | memoryview | None, max_batch_bytes: int) -> tuple[bytearray, BatchHeader]:
    """A patchable copy of the one batch in a partition's `records`, and its parsed header;
    InvalidBatch if a broker must refuse it."""
    if not records or len(records) < HEADER_BYTES:
        raise InvalidBatch(Reason.SHORT, "record set shorter than a batch header")
    header = parse_header(records)
    _check_shape(header, len(records), max_batch_bytes)
    if not crc_ok(records, 0, header):
        raise InvalidBatch(Reason.CHECKSUM, "record batch CRC32C does not match")
    _check_fields(header)
    return bytearray(records), header


def _check_shape(header: BatchHeader, size: int, max_batch_bytes: int) -> None:
    if header.magic != MAGIC:
        raise InvalidBatch(Reason.NOT_V2, f"magic {header.magic} is not 2")
    stated = header.size
    if stated > size:
        raise InvalidBatch(Reason.TRUNCATED, "record batch is truncated")
    if stated < size:
        raise InvalidBatch(Reason.NOT_ONE_BATCH, "a partition's record set must hold exactly one batch")
    if size > max_batch_bytes:
        raise InvalidBatch(Reason.TOO_LARGE, f"batch of {size} bytes exceeds max.message.bytes {max_batch_bytes}")


def _check_fields(header: BatchHeader) -> None:
    if header.record_count <= 0 or header.last_offset_delta + 1 != header.record_count:
        raise InvalidBatch(Reason.RECORD_COUNT, "record count does not match the last offset delta")
    if header.is_control:
        raise InvalidBatch(Reason.CONTROL_FROM_CLIENT, "clients may not write control batches")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidBatch(Reason.NO_SEQUENCE, "an idempotent batch needs a base sequence")
