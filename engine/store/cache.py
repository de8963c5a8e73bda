"""A block cache in front of a store's reads, inside the memory pool's budget.

Files are read in aligned blocks of `block_bytes`; a block is kept only when it is whole (the
file already reached its end), because the files are append-only: a whole block never changes
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
        parts = []
        for number in range(first, last + 1):
            block = self._block(path, number)
            parts.append(block)
            if len(block) < size:
                break  # end of file
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        start = offset - first * size
        return data[start : start + length]

    def _block(self, path: str, number: int) -> bytes:
        key = (path, number)
        now = self.monotonic()
        with self._lock:
            found = self._blocks.get(key)
            if found is not None:
                self._blocks[key] = (found[0], now)
                self._blocks.move_to_end(key)
                return found[0]
        data = self.store.read(path, number * self.block_bytes, self.block_bytes)
        if len(data) == self.block_bytes:
            with self._lock:
                if key not in self._blocks:
                    self._blocks[key] = (data, now)
                    self._held += len(data)
            self._on_grow()
        return data

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
