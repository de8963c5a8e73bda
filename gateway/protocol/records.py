"""Reads record offsets and timestamps out of one batch (decompressing it).

Only ListOffsets by timestamp needs this: it must name the first record at or after a
time, which can lie inside a batch. Produce and Fetch never decode records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import cramjam

from ...engine.log.batch import HEADER_BYTES, BatchHeader, parse_header

XERIAL_MAGIC = b"\x82SNAPPY\x00"
LOG_APPEND_TIME_BIT = 0x08


def decompress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return bytes(cramjam.gzip.decompress(data))
    if codec == 2:
        return _snappy(data)
    if codec == 3:
        return bytes(cramjam.lz4.decompress(data))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"unknown compression codec {codec}")


def _snappy(data: bytes) -> bytes:
    """Java clients frame snappy the xerial way; librdkafka sends raw snappy."""
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = 16  # magic (8) + version (4) + compatible version (4)
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        out += cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return bytes(out)


def record_times(batch: bytes) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of every record in the batch."""
    header = parse_header(batch)
    if header.attributes & LOG_APPEND_TIME_BIT:
        for delta in range(header.last_offset_delta + 1):
            yield header.base_offset + delta, header.max_timestamp
        return
    body = decompress(header.attributes & 0x07, bytes(batch[HEADER_BYTES : header.size]))
    yield from _walk(header, body)


def _walk(header: BatchHeader, body: bytes) -> Iterator[tuple[int, int]]:
    pos = 0
    for _ in range(header.record_count):
        length, pos = _varint(body, pos)
        end = pos + length
        pos += 1  # attributes
        timestamp_delta, pos = _varint(body, pos)
        offset_delta, pos = _varint(body, pos)
        yield header.base_offset + offset_delta, header.base_timestamp + timestamp_delta
        pos = end


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (as Kafka's record fields use) and the position after it."""
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
