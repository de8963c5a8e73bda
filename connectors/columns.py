"""One record batch's records as columns, decoded with numpy instead of record by record.

A v2 record is a chain of varints and byte strings (records/decode.py has the layout). Only
where each record starts depends on the one before (its length comes first), so that walk
is a short Python loop over the length varints; every other field is then read for all
records at once: a varint column is read byte by byte over an array of positions, and keys
and values are joined from slices of the records block (measured for 1,000 values of 1 KB:
0.24 ms, against 4.4 ms for a numpy mask and 2.8 for a numpy gather). Headers are rare: a batch whose
records carry any is decoded record by record (records/decode.py), the same result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..records.compression import decompress
from ..records.decode import decode_records
from ..records.errors import InvalidBatch, Reason
from ..records.header import HEADER_BYTES, BatchHeader

VARINT_BYTES_MAX = 10
HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
NO_HEADERS = pa.array([], HEADER)


@dataclass(frozen=True)
class Columns:
    """The records of one batch (or a slice of them), column by column."""

    keys: pa.Array  # binary, null for a null key
    values: pa.Array  # binary
    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64, milliseconds
    kind: int  # the timestamp type: 0 CreateTime, 1 LogAppendTime
    headers: pa.Array  # list<struct<key: string, value: binary>>

    def __len__(self) -> int:
        return len(self.offsets)

    def between(self, start: int, stop: int) -> Columns:
        """The records with offsets in [start, stop) (they are in order)."""
        first, last = np.searchsorted(self.offsets, [start, stop])
        if first == 0 and last == len(self):
            return self
        return Columns(self.keys.slice(first, last - first), self.values.slice(first, last - first),
                       self.offsets[first:last], self.timestamps[first:last], self.kind,
                       self.headers.slice(first, last - first))


def columns(batch: bytes | memoryview, header: BatchHeader) -> Columns:
    """The records of `batch` (whole, its header parsed) as columns."""
    body = decompress(header.compression, bytes(batch[HEADER_BYTES:header.size]))
    count = header.record_count
    data = np.frombuffer(body, np.uint8)
    starts = _record_starts(body, count)
    at = starts + 1  # past the attributes byte
    timestamp_delta, at = _varints(data, at)
    offset_delta, at = _varints(data, at)
    key_length, at = _varints(data, at)
    key_start = at
    at = at + np.maximum(key_length, 0)
    value_length, at = _varints(data, at)
    value_start = at
    at = at + np.maximum(value_length, 0)
    header_count, _ = _varints(data, at)
    kind = 1 if header.is_log_append_time else 0
    timestamps = (np.full(count, header.max_timestamp, np.int64) if kind
                  else header.base_timestamp + timestamp_delta)
    if header_count.any():
        headers = pa.array([[{"key": k, "value": v} for k, v in record.headers] for record in decode_records(batch)],
                           pa.list_(HEADER))
    else:
        headers = pa.ListArray.from_arrays(pa.array(np.zeros(count + 1, np.int32)), NO_HEADERS)
    return Columns(_binary(body, key_start, key_length), _binary(body, value_start, value_length),
                   header.base_offset + offset_delta, timestamps, kind, headers)


def _record_starts(body: bytes, count: int) -> np.ndarray:
    """Where each record's fields begin (past its length varint)."""
    starts = np.empty(count, np.int64)
    pos, size = 0, len(body)
    for index in range(count):
        if pos >= size:
            raise InvalidBatch(Reason.MALFORMED_RECORDS, f"record {index} of {count} starts past the records")
        byte = body[pos]
        if byte < 0x80:  # a length under 64: one byte
            length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            length, shift, pos = byte & 0x7F, 7, pos + 1
            while True:
                if pos >= size or shift > 7 * VARINT_BYTES_MAX:
                    raise InvalidBatch(Reason.MALFORMED_RECORDS, f"record {index}'s length runs past the records")
                byte = body[pos]
                length |= (byte & 0x7F) << shift
                pos += 1
                if byte < 0x80:
                    break
                shift += 7
            length = (length >> 1) ^ -(length & 1)
        if length < 0 or pos + length > size:
            raise InvalidBatch(Reason.MALFORMED_RECORDS, f"record {index} of {length} bytes overruns the records")
        starts[index] = pos
        pos += length
    return starts


def _varints(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zig-zag varint at each position of `at`, and the positions after them."""
    if not len(at):
        return np.zeros(0, np.int64), at
    if at.max() >= len(data):
        raise InvalidBatch(Reason.MALFORMED_RECORDS, "a varint runs past the end of the records")
    byte = data[at].astype(np.uint64)
    value = byte & 0x7F
    more = byte >= 0x80
    size = np.ones(len(at), np.int64)
    shift = 7
    while more.any():
        if shift >= 7 * VARINT_BYTES_MAX:
            raise InvalidBatch(Reason.MALFORMED_RECORDS, f"a varint longer than {VARINT_BYTES_MAX} bytes")
        reading = at + size
        if reading[more].max() >= len(data):
            raise InvalidBatch(Reason.MALFORMED_RECORDS, "a varint runs past the end of the records")
        byte = np.where(more, data[np.minimum(reading, len(data) - 1)], 0).astype(np.uint64)
        value |= (byte & np.uint64(0x7F)) << np.uint64(shift)
        size += more
        more &= byte >= 0x80
        shift += 7
    signed = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
    return signed, at + size


def _binary(body: bytes, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary column of the byte strings at `starts` (a length of -1: null)."""
    present = lengths >= 0
    sizes = np.where(present, lengths, 0)
    view = memoryview(body)
    joined = b"".join([view[start:end] for start, end in zip(starts.tolist(), (starts + sizes).tolist(), strict=True)])
    offsets = np.zeros(len(starts) + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    validity = None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little").tobytes())
    return pa.Array.from_buffers(pa.binary(), len(starts), [validity, pa.py_buffer(offsets.tobytes()),
                                                            pa.py_buffer(joined)],
                                 null_count=int((~present).sum()))
