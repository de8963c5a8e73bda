"""A block cache in front of a store's reads, inside the memory pool's budget.

Files are read in aligned blocks of `block_bytes`. Each run of blocks the cache lacks is one
store read, and a read that misses up to the end of what it asked for also reads the next
READ_AHEAD_BLOCKS: a consumer reading cold data sequentially then finds its next fetches in
memory (on HDFS each read is a round trip to a DataNode). A block is kept only when it is
whole (the file already reached its end), because the files are append-only: a whole block never changes
until the file is truncated, renamed over or deleted, and those calls drop the file's blocks.
Reads come from worker threads, so the cache has its own lock; the pool decides what goes
(least recently read first, across blocks and memory tails) and calls `drop_oldest`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from .base import AppendFile, Store

BLOCK_BYTES = 256 * 1024
READ_AHEAD_BLOCKS = 28  # a read that misses at the end of what it asked for also reads this many more blocks


class CachedStore:
    def __init__(self, store: Store, on_grow: Callable[[], None] = lambda: None,
                 block_bytes: int = BLOCK_BYTES, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.monotonic = monotonic  # must be the memory pool's clock: both orders are compared
        self.slow_writes = getattr(store, "slow_writes", True)
        self.block_bytes = block_bytes
        self._on_grow = on_grow
        self._lock = threading.Lock()
        self._blocks: OrderedDict[tuple[str, int], tuple[bytes, float]] = OrderedDict()
        self._held = 0

    # -- the pool's side -------------------------------------------------------------------

    @property
    def bytes_held(self) -> int:
        return self._held

    def oldest_read(self) -> float | None:
        with self._lock:
            first = next(iter(self._blocks.values()), None)
        return first[1] if first else None

    def drop_oldest(self) -> int:
        with self._lock:
            if not self._blocks:
                return 0
            _, (data, _) = self._blocks.popitem(last=False)
            self._held -= len(data)
            return len(data)

    # -- Store -------------------------------------------------------------------------------

    def read(self, path: str, offset: int, length: int) -> bytes:
        if length <= 0:
            return b""
        size = self.block_bytes
        first, last = offset // size, (offset + length - 1) // size
        parts: list[bytes] = []
        number = first
        while number <= last:
            cached = self._cached(path, number)
            if cached is not None:
                parts.append(cached)
                number += 1
                continue
            missing = number + 1  # a run of missing blocks is read with one store call
            while missing <= last and not self._holds(path, missing):
                missing += 1
            ahead = READ_AHEAD_BLOCKS if missing > last else 0  # a sequential reader's next reads
            fetched = self._fetch(path, number, missing - number + ahead)
            wanted = fetched[: missing - number]
            parts += wanted
            if len(wanted) < missing - number or len(wanted[-1]) < size:
                break  # end of file
            number = missing
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        start = offset - first * size
        return data[start : start + length]

    def _cached(self, path: str, number: int) -> bytes | None:
        key = (path, number)
        with self._lock:
            found = self._blocks.get(key)
            if found is None:
                return None
            self._blocks[key] = (found[0], self.monotonic())
            self._blocks.move_to_end(key)
            return found[0]

    def _holds(self, path: str, number: int) -> bool:
        with self._lock:
            return (path, number) in self._blocks

    def _fetch(self, path: str, number: int, count: int) -> list[bytes]:
        """Blocks number .. number + count - 1 read with one store call (fewer at the end of
        the file, the last one then short); the whole ones are kept."""
        size = self.block_bytes
        data = self.store.read(path, number * size, count * size)
        blocks = [data[at : at + size] for at in range(0, len(data), size)] or [b""]
        now = self.monotonic()
        grew = False
        with self._lock:
            for i, block in enumerate(blocks):
                key = (path, number + i)
                if len(block) == size and key not in self._blocks:
                    self._blocks[key] = (block, now)
                    self._held += len(block)
                    grew = True
        if grew:
            self._on_grow()
        return blocks

    def _forget(self, prefix: str) -> None:
        with self._lock:
            for key in [key for key in self._blocks if key[0] == prefix or key[0].startswith(prefix + "/")]:
                self._held -= len(self._blocks.pop(key)[0])

    def mkdir(self, path: str) -> None:
        self.store.mkdir(path)

    def list(self, path: str) -> list[str]:
        return self.store.list(path)

    def size(self, path: str) -> int:
        return self.store.size(path)

    def open_append(self, path: str) -> AppendFile:
        return self.store.open_append(path)

    def truncate(self, path: str, size: int) -> None:
        self._forget(path)
        self.store.truncate(path, size)

    def rename(self, src: str, dst: str) -> None:
        self._forget(src)
        self._forget(dst)
        self.store.rename(src, dst)

    def delete(self, path: str) -> None:
        self._forget(path)
        self.store.delete(path)

    def exists(self, path: str) -> bool:
        return self.store.exists(path)

    def take_over(self, directory: str) -> None:
        self.store.take_over(directory)

    def create_exclusive(self, path: str) -> bool:
        return self.store.create_exclusive(path)
