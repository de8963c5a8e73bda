"""Records out of one v2 batch (decompressing it). Produce and Fetch never decode records;
ListOffsets by timestamp does (it must name the first record at or after a time, which can
lie inside a batch), and so do readers of control batches and tests of build.py.

A record, after the batch header and decompression (varints are zig-zag, varint.py):

    length            varint   bytes of the record after this field
    attributes        int8     unused, 0
    timestamp_delta   varlong  timestamp minus the batch's base_timestamp
    offset_delta      varint   offset minus the batch's base_offset
    key_length        varint   -1 for a null key
    key               bytes
    value_length      varint   -1 for a null value
    value             bytes
    header_count      varint
    headers           header_count times: key_length varint, key (UTF-8),
                                          value_length varint (-1 null), value bytes

With LogAppendTime every record's timestamp is the batch's max_timestamp (KIP-32).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from .compression import decompress
from .control import Marker, parse_marker
from .errors import InvalidBatch, Reason
from .header import HEADER_BYTES, BatchHeader, Buffer, parse_header
from .varint import read_varint

Header = tuple[str, bytes | None]


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def decode_records(batch: Buffer) -> Iterator[Record]:
    """Every record of the batch at the start of `batch`, with absolute offsets and times."""
    header = parse_header(batch)
    if header.size > len(batch):
        raise InvalidBatch(Reason.TRUNCATED, f"batch of {header.size} bytes, {len(batch)} given")
    body = decompress(header.compression, bytes(batch[HEADER_BYTES : header.size]))
    pos = 0
    for _ in range(header.record_count):
        record, pos = _record(header, body, pos)
        yield record


def record_keys(batch: Buffer) -> Iterator[tuple[int, bytes | None, bool]]:
    """(offset, key, whether the value is null) of every record in the batch: what log
    compaction reads, without copying values or reading headers."""
    header = parse_header(batch)
    if header.size > len(batch):
        raise InvalidBatch(Reason.TRUNCATED, f"batch of {header.size} bytes, {len(batch)} given")
    body = decompress(header.compression, bytes(batch[HEADER_BYTES : header.size]))
    base, size, pos = header.base_offset, len(body), 0
    for _ in range(header.record_count):
        length, pos = read_varint(body, pos)
        end = pos + length
        if length < 0 or end > size:
            raise InvalidBatch(Reason.MALFORMED_RECORDS, f"record of {length} bytes at {pos} overruns the batch")
        at = pos + 1  # after the attributes: the timestamp delta, skipped
        while at < end and body[at] & 0x80:
            at += 1
        delta, at = read_varint(body, at + 1)
        key, at = _bytes(body, at, end)
        value_length, at = read_varint(body, at)
        if at + max(value_length, 0) > end:
            raise InvalidBatch(Reason.MALFORMED_RECORDS, f"a value of {value_length} bytes at {at} overruns its record")
        yield base + delta, key, value_length < 0
        pos = end


def largest_record(batch: Buffer) -> int:
    """The largest length a record of the batch declares, decompressed (what Kafka's
    max.decompressed.message.bytes bounds); the walk stops at a length that overruns."""
    header = parse_header(batch)
    body = decompress(header.compression, bytes(batch[HEADER_BYTES : header.size]))
    largest, pos = 0, 0
    for _ in range(header.record_count):
        if pos >= len(body):
            break
        length, pos = read_varint(body, pos)
        largest = max(largest, length)
        pos += max(length, 0)
    return largest


def record_times(batch: Buffer) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of every record in the batch."""
    header = parse_header(batch)
    if header.is_log_append_time:  # no need to decompress: every record has max_timestamp
        for delta in range(header.last_offset_delta + 1):
            yield header.base_offset + delta, header.max_timestamp
        return
    for record in decode_records(batch):
        yield record.offset, record.timestamp


def control_marker(batch: Buffer) -> Marker:
    """The end-of-transaction marker of a control batch (InvalidBatch if it is not one)."""
    header = parse_header(batch)
    if not header.is_control or header.record_count != 1:
        raise InvalidBatch(Reason.MALFORMED_RECORDS, f"not a control batch of one record: {header}")
    record = next(decode_records(batch))
    return parse_marker(record.key, record.value)


def _record(header: BatchHeader, body: bytes, pos: int) -> tuple[Record, int]:
    length, pos = read_varint(body, pos)
    end = pos + length
    if length < 0 or end > len(body):
        raise InvalidBatch(Reason.MALFORMED_RECORDS, f"record of {length} bytes at {pos} overruns the batch")
    pos += 1  # attributes
    timestamp_delta, pos = read_varint(body, pos)
    offset_delta, pos = read_varint(body, pos)
    key, pos = _bytes(body, pos, end)
    value, pos = _bytes(body, pos, end)
    headers, pos = _headers(body, pos, end)
    if pos != end:
        raise InvalidBatch(Reason.MALFORMED_RECORDS, f"record fields end at {pos}, its length says {end}")
    timestamp = header.max_timestamp if header.is_log_append_time else header.base_timestamp + timestamp_delta
    return Record(header.base_offset + offset_delta, timestamp, key, value, headers), end


def _headers(body: bytes, pos: int, end: int) -> tuple[tuple[Header, ...], int]:
    count, pos = read_varint(body, pos)
    headers = []
    for _ in range(count):
        key, pos = _bytes(body, pos, end)
        value, pos = _bytes(body, pos, end)
        if key is None:
            raise InvalidBatch(Reason.MALFORMED_RECORDS, "a record header has a null key")
        headers.append((_text(key), value))
    return tuple(headers), pos


def _bytes(body: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    """A varint-length-prefixed field (-1: null) that must end by `end`."""
    length, pos = read_varint(body, pos)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise InvalidBatch(Reason.MALFORMED_RECORDS, f"a field of {length} bytes at {pos} overruns its record")
    return body[pos : pos + length], pos + length


def _text(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise InvalidBatch(Reason.MALFORMED_RECORDS, "a record header key is not UTF-8") from None
