"""Sparse indexes of one segment: offset -> file position, and timestamp -> offset.

Both are files of fixed-size big-endian entries whose two columns strictly increase
(see segment.py for the layout). Entries live in memory as two arrays; a segment writes its
index files whole when it is sealed (atomically, so a file is never torn), and recovery
checks them against the log and rebuilds what is missing or wrong.
"""

import struct
from array import array
from bisect import bisect_left, bisect_right
from typing import Self

from ..store import Store
from ..store.atomic import write_atomically


class IndexInvalid(Exception):
    """An index file does not describe its log; the caller rebuilds it (never escapes log/)."""


class SparseIndex:
    """Entries (key, value), both strictly increasing, in memory; `save` writes them whole."""

    entry: struct.Struct
    key_code: str
    value_code: str

    def __init__(self) -> None:
        self.keys = array(self.key_code)
        self.values = array(self.value_code)
        self.saved = 0  # how many entries the store's file holds (as read, or last written)

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        if len(data) % cls.entry.size:
            raise IndexInvalid(f"index size {len(data)} is not a multiple of {cls.entry.size}")
        index = cls()
        for key, value in cls.entry.iter_unpack(data):
            index.add(key, value)
        index.saved = len(index)
        return index

    def to_bytes(self) -> bytes:
        return b"".join(self.entry.pack(k, v) for k, v in zip(self.keys, self.values))

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, key: int, value: int) -> None:
        """Add an entry in memory, refusing one that breaks the ordering."""
        if self.keys and (key <= self.keys[-1] or value <= self.values[-1]):
            raise IndexInvalid(f"entry ({key}, {value}) does not follow ({self.keys[-1]}, {self.values[-1]})")
        self.keys.append(key)
        self.values.append(value)

    def floor(self, key: int) -> tuple[int, int] | None:
        """The last entry whose key is <= `key`."""
        return self._entry(bisect_right(self.keys, key) - 1)

    def below(self, key: int) -> tuple[int, int] | None:
        """The last entry whose key is < `key`."""
        return self._entry(bisect_left(self.keys, key) - 1)

    def _entry(self, i: int) -> tuple[int, int] | None:
        return (self.keys[i], self.values[i]) if i >= 0 else None

    def last(self) -> tuple[int, int] | None:
        return self._entry(len(self.keys) - 1)

    def save(self, store: Store, path: str) -> None:
        """Write the whole index to `path` (atomically): when its segment is sealed. While a
        segment takes appends its indexes live in memory only (recovery rebuilds them for
        the last segment), so a partition holds one open file, and a commit syncs only that.
        Nothing is written when the file already holds every entry."""
        if self.saved != len(self):
            write_atomically(store, path, self.to_bytes())
            self.saved = len(self)


class OffsetIndex(SparseIndex):
    """(offset relative to the segment's base u32, file position u32) of some batches."""

    entry = struct.Struct(">II")
    key_code = "I"
    value_code = "I"


class TimeIndex(SparseIndex):
    """(max timestamp so far i64, relative base offset u32 of the batch that set it)."""

    entry = struct.Struct(">qI")
    key_code = "q"
    value_code = "I"


def check_offset_index(index: OffsetIndex, log_bytes: int, offset_span: int) -> None:
    """Raise IndexInvalid unless every entry points inside the log and its offset range."""
    last = index.last()
    if last is not None and (last[0] >= offset_span or last[1] >= log_bytes):
        raise IndexInvalid(f"last offset index entry {last} lies past the log")


def check_time_index(index: TimeIndex, offset_span: int) -> None:
    last = index.last()
    if last is not None and last[1] >= offset_span:
        raise IndexInvalid(f"last time index entry {last} lies past the log")
