"""The record codecs named by a batch's attributes bits 0-2, via cramjam.

The records after the 61-byte header are compressed as one block. Codec framing is Kafka's:
gzip is a gzip stream, lz4 the LZ4 frame format, zstd a zstd frame, and snappy raw snappy
(librdkafka, and what build.py writes) or the xerial framing Java clients write:
magic (8) + version (4) + compatible version (4), then chunks of int32 length + raw snappy.
"""

from __future__ import annotations

import struct

import cramjam

from .errors import InvalidBatch, Reason

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_BYTES = 16


def decompress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    try:
        return _decompress(codec, data)
    except (cramjam.DecompressionError, struct.error) as error:
        raise InvalidBatch(Reason.MALFORMED_RECORDS, f"records do not decompress: {error}") from None


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def _decompress(codec: int, data: bytes) -> bytes:
    if codec == GZIP:
        return bytes(cramjam.gzip.decompress(data))
    if codec == SNAPPY:
        return _snappy(data)
    if codec == LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise InvalidBatch(Reason.MALFORMED_RECORDS, f"unknown compression codec {codec}")


def _snappy(data: bytes) -> bytes:
    """Java clients frame snappy the xerial way; librdkafka sends raw snappy."""
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = XERIAL_HEADER_BYTES
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        out += cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return bytes(out)
