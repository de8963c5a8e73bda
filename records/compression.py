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


GZIP_LEVEL, ZSTD_LEVEL = 6, 3  # Kafka's defaults (compression.gzip.level -1 is zlib's 6)


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """`level` for gzip and zstd (Kafka's default for None); lz4 and snappy take none here."""
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=GZIP_LEVEL if level is None or level == -1 else level))
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:  # independent blocks: Kafka's reader refuses linked ones (UNKNOWN_SERVER_ERROR, measured)
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL if level is None else level))
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
