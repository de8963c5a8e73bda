"""Aborted transactions of one segment: Kafka's `.txnindex` (KIP-98).

An entry names a transaction whose ABORT marker lies in the segment: its producer, its first
offset (the producer's first batch of the transaction), its last offset (the marker's) and the
last stable offset just after the marker (the first offset of a transaction still open then,
else last offset + 1). A read-committed consumer is handed the entries that overlap what it
fetched and skips those producers' batches from first offset to marker. A COMMIT leaves no
entry: committed data needs no filtering.

File `<base offset, 20 digits>.txnindex`, integers big-endian:

    crc      u32   CRC32C of everything after it
    version  u16   0
    entries  32 bytes each, in marker (last offset) order:
             producer_id i64 | first_offset i64 | last_offset i64 | last_stable_offset i64

When it is written, and why absence means "no entries": a segment's file is written whole
(atomically) when the segment is sealed, by a roll or a clean close, before the producer
snapshot of that moment; only if it has entries (a file no longer wanted is deleted). So
every marker below a usable snapshot's offset is in its segment's file, if it aborted
something; recovery keeps a file's entries below the snapshot it starts from and rebuilds
the rest by replaying the batch headers after that snapshot (recovery.py), and the active
segment's entries live in memory until it is sealed.

Searching (`overlapping`, Kafka's collectAbortedTxns): the entries whose last offset is at or
after the fetch offset and whose first offset lies below the end of the fetched data. Entries
are in last-offset order, so the search starts by bisection and stops at the first entry whose
last stable offset reaches the end of the data: every transaction aborted later that began
below that end was still open at this marker, so its first offset would bound that last
stable offset.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Sequence
from typing import NamedTuple

import crc32c

TXN_INDEX_VERSION = 0
_CRC = struct.Struct(">I")
_VERSION = struct.Struct(">H")
_ENTRY = struct.Struct(">qqqq")
_HEAD_BYTES = _CRC.size + _VERSION.size


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # right after the marker (see the module header)


def to_bytes(entries: Sequence[AbortedTxn]) -> bytes:
    body = _VERSION.pack(TXN_INDEX_VERSION) + b"".join(_ENTRY.pack(*entry) for entry in entries)
    return _CRC.pack(crc32c.crc32c(body)) + body


def from_bytes(data: bytes) -> list[AbortedTxn]:
    """The entries of a file; ValueError if it is damaged or of an unknown version."""
    if len(data) < _HEAD_BYTES or _CRC.unpack_from(data)[0] != crc32c.crc32c(data[_CRC.size :]):
        raise ValueError("transaction index checksum mismatch")
    (version,) = _VERSION.unpack_from(data, _CRC.size)
    if version != TXN_INDEX_VERSION or (len(data) - _HEAD_BYTES) % _ENTRY.size:
        raise ValueError(f"transaction index version {version}, {len(data)} bytes: not a file this code reads")
    entries = [AbortedTxn(*fields) for fields in _ENTRY.iter_unpack(data[_HEAD_BYTES:])]
    check_order(entries)
    return entries


def check_order(entries: Sequence[AbortedTxn]) -> None:
    """Entries must be well formed and in marker order (ValueError otherwise)."""
    previous = -1
    for entry in entries:
        well_formed = entry.first_offset < entry.last_offset and entry.last_stable_offset <= entry.last_offset + 1
        if not well_formed or entry.last_offset <= previous:
            raise ValueError(f"transaction index entry {entry} is out of order")
        previous = entry.last_offset


def overlapping(entries: Sequence[AbortedTxn], fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
    """The entries a read of [fetch_offset, upper_offset) must be told of (see the header)."""
    found = []
    for at in range(bisect_left(entries, fetch_offset, key=lambda entry: entry.last_offset), len(entries)):
        entry = entries[at]
        if entry.first_offset < upper_offset:
            found.append(entry)
        if entry.last_stable_offset >= upper_offset:
            break
    return found
