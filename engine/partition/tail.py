"""A partition's memory tail: its newest batches, the persisted ones first.

Batches sit in offset order; those below `checkpoint` (C) are on the store too and may be
dropped at any time to give memory back; those at or above it exist only here until the
persister writes them. Offsets are dense from `first_offset` to `end`. Not thread-safe: the
event loop owns it.
"""

from __future__ import annotations

from bisect import bisect_right

from ...records.header import BatchHeader

COMPACT_AFTER = 1024  # dropped slots at the front of the lists before they are cut off


class Tail:
    def __init__(self, end: int) -> None:
        self.end = end  # next offset to assign
        self.checkpoint = end  # C: everything below it is persisted
        self._bases: list[int] = []
        self._batches: list[bytearray] = []
        self._headers: list[BatchHeader] = []
        self._first = 0  # index of the oldest batch still held
        self._unpersisted_at = 0  # index of the first batch above C
        self.persisted_bytes = 0
        self.unpersisted_bytes = 0

    @property
    def first_offset(self) -> int:
        """The lowest offset held in memory (== checkpoint when nothing persisted is held)."""
        return self._bases[self._first] if self._first < len(self._bases) else self.checkpoint

    def append(self, batch: bytearray, header: BatchHeader) -> None:
        assert header.base_offset == self.end
        self._bases.append(header.base_offset)
        self._batches.append(batch)
        self._headers.append(header)
        self.end = header.next_offset
        self.unpersisted_bytes += len(batch)

    def unpersisted(self, max_bytes: int) -> tuple[list[bytearray], list[BatchHeader]]:
        """The oldest unpersisted batches, about max_bytes of them but at least one."""
        start = stop = self._unpersisted_at
        size = 0
        while stop < len(self._batches) and (stop == start or size + len(self._batches[stop]) <= max_bytes):
            size += len(self._batches[stop])
            stop += 1
        return self._batches[start:stop], self._headers[start:stop]

    def mark_persisted(self, offset: int) -> int:
        """Move C up to `offset` (a batch boundary); returns the bytes that became persisted."""
        moved = 0
        at = self._unpersisted_at
        while at < len(self._bases) and self._headers[at].next_offset <= offset:
            moved += len(self._batches[at])
            at += 1
        self._unpersisted_at = at
        self.checkpoint = max(self.checkpoint, offset)
        self.unpersisted_bytes -= moved
        self.persisted_bytes += moved
        return moved

    def drop_persisted(self) -> int:
        """Forget every persisted batch; returns the bytes freed."""
        freed = self.persisted_bytes
        for at in range(self._first, self._unpersisted_at):
            self._batches[at] = bytearray()  # let the memory go before the slot is cut off
        self._first = self._unpersisted_at
        self.persisted_bytes = 0
        if self._first >= COMPACT_AFTER or self._first == len(self._bases):
            del self._bases[: self._first], self._batches[: self._first], self._headers[: self._first]
            self._unpersisted_at -= self._first
            self._first = 0
        return freed

    def read(self, offset: int, max_bytes: int, limit: int) -> bytes | bytearray | None:
        """Whole batches from the one holding `offset` and ending at or below `limit`, up to
        max_bytes but at least one; b"" at `limit`; None when `offset` is older than memory."""
        if offset < self.first_offset:
            return None
        if offset >= limit:
            return b""
        at = bisect_right(self._bases, offset, lo=self._first) - 1
        stop, size = at, 0
        while stop < len(self._bases) and self._headers[stop].next_offset <= limit:
            length = len(self._batches[stop])
            if stop > at and size + length > max_bytes:
                break
            size += length
            stop += 1
        if stop == at:
            return b""
        return self._batches[at] if stop == at + 1 else b"".join(self._batches[at:stop])
