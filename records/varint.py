"""Zig-zag varints, the integer encoding of v2 record fields (Kafka's ByteUtils varint and
varlong): 7 bits a byte, least significant group first, high bit set on all but the last;
the value zig-zagged first so that small negative numbers (-1 for "null") stay short."""

from __future__ import annotations

from .errors import InvalidBatch, Reason

VARLONG_BYTES_MAX = 10  # 64 bits in 7-bit groups


def read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The zig-zag varint at `pos` and the position after it."""
    value = 0
    for shift in range(0, 7 * VARLONG_BYTES_MAX, 7):
        if pos >= len(data):
            raise InvalidBatch(Reason.MALFORMED_RECORDS, "a varint runs past the end of the records")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos
    raise InvalidBatch(Reason.MALFORMED_RECORDS, f"a varint longer than {VARLONG_BYTES_MAX} bytes")


def write_varint(value: int) -> bytes:
    """The zig-zag varint of a signed 64-bit `value`."""
    assert -(2**63) <= value < 2**63, value
    return write_unsigned_varint((value << 1) ^ (value >> 63))


def write_unsigned_varint(unsigned: int) -> bytes:
    """The varint of a value already zig-zagged (or unsigned)."""
    out = bytearray()
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)
