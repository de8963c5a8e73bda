"""One record batch's records as columns, decoded with numpy instead of record by record.

A v2 record is a chain of varints and byte strings (records/decode.py has the layout). Only
where each record starts depends on the one before (its length comes first). That walk is
guessed and checked: after a record of n bytes, the next ones are taken to be n bytes each as
well, and their length varints are compared with its own, byte for byte, all at once; the
guess holds up to the first record of another size, where the walk goes on the same way.
Records of one size are the common case (the offset and timestamp deltas grow a byte now and
then); once a guess holds for fewer than GUESS_RECORDS_MIN records, the rest of the batch is
walked record by record in Python. Every other field is then read for all records at once: a
varint column is read byte by byte over an array of positions.

Keys and values stay where they are (`Binary`: the records block and where each string starts)
until an Arrow batch is cut (`binary_array`), which copies them once into one buffer: runs of
strings of one length at one stride are copied by numpy as a strided 2-D block, a batch of
strings of many sizes is joined from slices. Headers are rare: a batch whose records carry any
is decoded record by record (records/decode.py), the same result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..records.compression import NONE, decompress
from ..records.decode import decode_records
from ..records.errors import InvalidBatch, Reason
from ..records.header import HEADER_BYTES, BatchHeader

VARINT_BYTES_MAX = 10
GUESS_RECORDS_MIN = 8  # a guess that held for fewer records than this ends the guessing in a batch
RUNS_PER_STRING_MAX = 0.25  # more runs per string than this: joined from slices instead
HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])


@dataclass(frozen=True)
class Binary:
    """Byte strings inside one buffer: string i is data[starts[i]:starts[i] + lengths[i]],
    null where lengths[i] is -1."""

    data: np.ndarray  # uint8
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.starts)

    def slice(self, first: int, last: int) -> Binary:
        return Binary(self.data, self.starts[first:last], self.lengths[first:last])


@dataclass(frozen=True)
class Columns:
    """The records of one batch (or a slice of them), column by column."""

    keys: Binary
    values: Binary
    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64, milliseconds
    kind: int  # the timestamp type: 0 CreateTime, 1 LogAppendTime
    headers: pa.Array | None  # list<struct<key: string, value: binary>>; None: no record has any

    def __len__(self) -> int:
        return len(self.offsets)

    def between(self, start: int, stop: int) -> Columns:
        """The records with offsets in [start, stop) (they are in order)."""
        first, last = (int(i) for i in np.searchsorted(self.offsets, [start, stop]))
        if first == 0 and last == len(self):
            return self
        headers = None if self.headers is None else self.headers.slice(first, last - first)
        return Columns(self.keys.slice(first, last), self.values.slice(first, last), self.offsets[first:last],
                       self.timestamps[first:last], self.kind, headers)


def columns(batch: bytes | memoryview, header: BatchHeader) -> Columns:
    """The records of `batch` (whole, its header parsed) as columns."""
    records = memoryview(batch)[HEADER_BYTES:header.size]
    body = records if header.compression == NONE else decompress(header.compression, bytes(records))
    count = header.record_count
    data = np.frombuffer(body, np.uint8)
    starts, ends = _record_spans(body, data, count)
    at = starts + 1  # past the attributes byte
    timestamp_delta, at = _varints(data, at)
    offset_delta, at = _varints(data, at)
    keys, at = _strings(data, at)
    values, at = _strings(data, at)
    header_count, at = _varints(data, at)
    if (at > ends).any():
        raise InvalidBatch(Reason.MALFORMED_RECORDS, "a record's fields run past its length")
    kind = 1 if header.is_log_append_time else 0
    timestamps = (np.full(count, header.max_timestamp, np.int64) if kind
                  else header.base_timestamp + timestamp_delta)
    headers = None
    if header_count.any():
        headers = pa.array([[{"key": k, "value": v} for k, v in record.headers] for record in decode_records(batch)],
                           pa.list_(HEADER))
    return Columns(keys, values, header.base_offset + offset_delta, timestamps, kind, headers)


def _strings(data: np.ndarray, at: np.ndarray) -> tuple[Binary, np.ndarray]:
    """The length-prefixed byte strings at each position of `at`, and the positions after them."""
    lengths, start = _varints(data, at)
    return Binary(data, start, lengths), start + np.maximum(lengths, 0)


# -- the walk over record lengths --------------------------------------------------------------


def _record_spans(body: bytes | memoryview, data: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each record's fields begin (past its length varint) and where it ends."""
    starts = np.empty(count, np.int64)
    ends = np.empty(count, np.int64)
    index = pos = 0
    guessing = True
    while index < count:
        start, length = _record_at(body, pos, index, count)
        starts[index], ends[index] = start, start + length
        step, prefix, pos, index = start + length - pos, data[pos:start], start + length, index + 1
        if guessing and index < count:
            found = _same_size(data, pos, step, prefix, count - index)
            starts[index:index + found] = pos + len(prefix) + step * np.arange(found)
            ends[index:index + found] = starts[index:index + found] + (step - len(prefix))
            index, pos = index + found, pos + step * found
            guessing = found >= GUESS_RECORDS_MIN
    return starts, ends


def _same_size(data: np.ndarray, pos: int, step: int, prefix: np.ndarray, most: int) -> int:
    """How many records from `pos` on (at most `most`) are `step` bytes long, each taken to
    follow the one before: those whose length varint is `prefix`, byte for byte, up to the
    first that is not (the guess fails there: that record is another size)."""
    fit = min(most, (len(data) - pos) // step)
    at = pos + step * np.arange(fit, dtype=np.int64)
    same = np.ones(fit, bool)
    for i, byte in enumerate(prefix.tolist()):  # at + i stays inside: the prefix is part of the step
        same &= data[at + i] == byte
    return fit if same.all() else int(np.argmin(same))


def _record_at(body: bytes | memoryview, pos: int, index: int, count: int) -> tuple[int, int]:
    """Where record `index` (its length varint at `pos`) begins past that varint, and its length."""
    size = len(body)
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
    return pos, length


# -- varint columns --------------------------------------------------------------------------------


def _varints(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zig-zag varint at each position of `at`, and the positions after them."""
    value, after, ok = _read_varints(data, at)
    if not ok.all():
        raise InvalidBatch(Reason.MALFORMED_RECORDS, f"a varint runs past the records or is longer than "
                                                     f"{VARINT_BYTES_MAX} bytes")
    return value, after


def _read_varints(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The zig-zag varint at each position of `at`, the positions after them, and whether each
    is whole (inside `data`, at most VARINT_BYTES_MAX bytes): a guess may point anywhere.
    Arithmetic is on int64 as on the varint's 64 bits (a 10th byte's bit lands in the sign)."""
    last = len(data) - 1
    if not len(at) or last < 0:
        return np.zeros(len(at), np.int64), at, np.zeros(len(at), bool)
    ok = at <= last
    byte = data[at if ok.all() else np.minimum(at, last)].astype(np.int64)
    more = byte >= 0x80
    if not more.any():  # one byte each, the common case for all fields but lengths
        return (byte >> 1) ^ -(byte & 1), at + 1, ok
    more &= ok
    value = byte & 0x7F
    size = np.ones(len(at), np.int64)
    if int(at.max()) + VARINT_BYTES_MAX <= len(data):  # no byte read can lie past the end
        for shift in range(7, 7 * VARINT_BYTES_MAX, 7):
            byte = data[at + size].astype(np.int64)
            value |= np.where(more, byte & 0x7F, 0) << shift
            size += more
            more &= byte >= 0x80
            if not more.any():
                break
        return ((value >> 1) & np.int64(2**63 - 1)) ^ -(value & 1), at + size, ok & ~more
    for shift in range(7, 7 * VARINT_BYTES_MAX, 7):
        reading = at + size
        ok &= ~(more & (reading > last))
        more &= reading <= last
        byte = np.where(more, data[np.minimum(reading, last)], 0).astype(np.int64)
        value |= (byte & 0x7F) << shift
        size += more
        more &= byte >= 0x80
        if not more.any():
            break
    ok &= ~more
    return ((value >> 1) & np.int64(2**63 - 1)) ^ -(value & 1), at + size, ok


# -- Arrow columns ---------------------------------------------------------------------------------


def binary_array(parts: list[Binary]) -> pa.Array:
    """One Arrow binary column of the strings of `parts`, in order, copied once into one buffer."""
    lengths = np.concatenate([part.lengths for part in parts]) if parts else np.zeros(0, np.int64)
    present = lengths >= 0
    sizes = np.where(present, lengths, 0)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError(f"{offsets[-1]} bytes of strings do not fit one Arrow binary column")
    out = np.empty(int(offsets[-1]), np.uint8)
    done = 0
    for part in parts:
        _copy(part, out[offsets[done]:offsets[done + len(part)]])
        done += len(part)
    validity = None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), len(lengths), [validity, pa.py_buffer(offsets.astype(np.int32)),
                                                             pa.py_buffer(out)],
                                 null_count=int((~present).sum()))


def headers_array(pieces: list[Columns]) -> pa.Array:
    """One Arrow headers column of the records of `pieces`, in order."""
    if all(piece.headers is None for piece in pieces):
        return _no_headers(sum(len(piece) for piece in pieces))
    return pa.concat_arrays([_no_headers(len(piece)) if piece.headers is None else piece.headers for piece in pieces])


def _no_headers(count: int) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(np.zeros(count + 1, np.int32)), pa.array([], HEADER))


def _copy(part: Binary, out: np.ndarray) -> None:
    """The strings of `part`, one after the other, into `out` (exactly their size)."""
    if not len(out):
        return
    sizes = np.maximum(part.lengths, 0)
    runs = _runs(part.starts, sizes)
    if len(runs) > RUNS_PER_STRING_MAX * len(sizes) + 1:
        view = part.data.data
        ends = part.starts + sizes
        out[:] = np.frombuffer(b"".join([view[a:b] for a, b in zip(part.starts.tolist(), ends.tolist(), strict=True)]),
                               np.uint8)
        return
    written = 0
    for first, last in zip(runs.tolist(), [*runs[1:].tolist(), len(sizes)], strict=True):
        written += _copy_run(part.data, part.starts[first:last], int(sizes[first]), out[written:])


def _runs(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Where each run of strings of one size, one stride apart, begins."""
    stride = np.diff(starts)
    breaks = np.zeros(len(starts), bool)
    breaks[0] = True
    breaks[1:] = sizes[1:] != sizes[:-1]
    breaks[2:] |= stride[1:] != stride[:-1]
    return np.flatnonzero(breaks)


def _copy_run(data: np.ndarray, starts: np.ndarray, size: int, out: np.ndarray) -> int:
    """Strings of `size` bytes at `starts` (one stride apart) into the front of `out`: bytes written."""
    count, first = len(starts), int(starts[0])
    stride = int(starts[1] - starts[0]) if count > 1 else size
    block = np.lib.stride_tricks.as_strided(data[first:], shape=(count, size), strides=(stride, 1), writeable=False)
    out[:count * size].reshape(count, size)[:] = block
    return count * size
