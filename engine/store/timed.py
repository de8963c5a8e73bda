"""A store that times every call into `StoreStats` (engine/stats.py), for /metrics and the
status page's store health: the calls the storage interface has, those the HDFS store adds
for the block cache (read_visible, read_blocks), and the writes and syncs of the files it
opens. Everything else (a backend's own attributes: root, url, read_only) passes through.

Missing files are the interface's answers, not failures: FileNotFoundError and the like
count as successful calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from ..stats import StoreStats
from .base import AppendFile, Store

T = TypeVar("T")
ANSWERS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError)
EXTRA_CALLS = frozenset({"read_visible", "read_blocks"})


class TimedStore:
    def __init__(self, store: Store, stats: StoreStats, clock: Callable[[], float] = time.perf_counter) -> None:
        self.inner = store
        self.stats = stats
        self.clock = clock
        self.slow_writes: bool = getattr(store, "slow_writes", True)
        self.slow_reads: bool = getattr(store, "slow_reads", True)

    def __getattr__(self, name: str) -> object:
        found = getattr(self.inner, name)
        if name in EXTRA_CALLS and callable(found):
            call = found

            def timed(*args: object) -> object:
                return self.timed(name, call, *args)
            return timed
        return found

    def timed(self, operation: str, call: Callable[..., T], *args: object) -> T:
        started = self.clock()
        try:
            result = call(*args)
        except ANSWERS:
            self.stats.succeeded(operation, self.clock() - started)
            raise
        except Exception as error:
            self.stats.failed(operation, self.clock() - started, error)
            raise
        self.stats.succeeded(operation, self.clock() - started)
        return result

    def mkdir(self, path: str) -> None:
        self.timed("mkdir", self.inner.mkdir, path)

    def list(self, path: str) -> list[str]:
        return self.timed("list", self.inner.list, path)

    def size(self, path: str) -> int:
        return self.timed("size", self.inner.size, path)

    def read(self, path: str, offset: int, length: int) -> bytes:
        return self.timed("read", self.inner.read, path, offset, length)

    def open_append(self, path: str) -> AppendFile:
        return TimedAppendFile(self.timed("open_append", self.inner.open_append, path), self)

    def truncate(self, path: str, size: int) -> None:
        self.timed("truncate", self.inner.truncate, path, size)

    def rename(self, src: str, dst: str) -> None:
        self.timed("rename", self.inner.rename, src, dst)

    def delete(self, path: str) -> None:
        self.timed("delete", self.inner.delete, path)

    def exists(self, path: str) -> bool:
        return self.timed("exists", self.inner.exists, path)

    def take_over(self, directory: str) -> None:
        self.timed("take_over", self.inner.take_over, directory)

    def create_exclusive(self, path: str) -> bool:
        return self.timed("create_exclusive", self.inner.create_exclusive, path)


class TimedAppendFile:
    def __init__(self, file: AppendFile, store: TimedStore) -> None:
        self.inner = file
        self.store = store

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    @property
    def size(self) -> int:
        return self.inner.size

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.store.timed("write", self.inner.write, data)

    def sync(self) -> None:
        self.store.timed("sync", self.inner.sync)

    def close(self) -> None:
        self.store.timed("close", self.inner.close)

    def abandon(self) -> None:
        self.inner.abandon()
