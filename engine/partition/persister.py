"""The persister: writes partitions' memory tails to the store in group commits.

A partition that takes a write is scheduled once: its commit starts after `commit_ms`, or at
once when `commit_bytes` are waiting or the topic flushes synchronously. A commit takes up to
commit_bytes of the oldest unpersisted batches, writes them on a worker thread with one
write and one sync per segment, and moves C. Whatever arrived meanwhile is committed right
after, so a slow store gets bigger commits, not more of them.

A failed commit (the store is down) keeps the data in memory. After a back-off that grows
to retry_ms_max the partition's log is reopened, which cuts anything half written, C moves
to what the store really holds, and committing resumes: nothing is lost while the process
lives, and nothing is written twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .partition import Partition

log = logging.getLogger(__name__)

RETRY_MS_FIRST = 50


class Persister:
    def __init__(self, commit_bytes: int, commit_ms: int, threads: int, now_ms: Callable[[], int],
                 retry_ms_max: int = 1000) -> None:
        self.commit_bytes = commit_bytes
        self.commit_ms = commit_ms
        self.retry_ms_max = retry_ms_max
        self.now_ms = now_ms
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix="martlet-persist")
        self._running: set[Partition] = set()
        self._retry_ms: dict[Partition, int] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    def schedule(self, partition: Partition) -> None:
        """Event loop, after an append: make sure a commit for `partition` is coming."""
        if partition.persisting:
            return
        partition.persisting = True
        self._idle.clear()
        loop = asyncio.get_running_loop()
        if partition.sync_flush or self.commit_ms <= 0 or partition.tail.unpersisted_bytes >= self.commit_bytes:
            loop.call_soon(self._commit, partition)
        else:
            loop.call_later(self.commit_ms / 1000, self._commit, partition)

    def _commit(self, partition: Partition) -> None:
        if partition.closed or partition.tail.unpersisted_bytes == 0:
            self._finish(partition)
            return
        batches, headers = partition.tail.unpersisted(self.commit_bytes)
        self._running.add(partition)
        future = asyncio.get_running_loop().run_in_executor(
            self.executor, partition.write_unpersisted, batches, headers)
        future.add_done_callback(lambda done: self._committed(partition, done))

    def _committed(self, partition: Partition, done: asyncio.Future[int]) -> None:
        self._running.discard(partition)
        if partition.closed:
            self._finish(partition)
            return
        error = done.exception()
        if error is not None:
            self._failed(partition, error)
            return
        if partition in self._retry_ms:
            del self._retry_ms[partition]
            log.warning("%s: persisting again (checkpoint %d)", partition.path, done.result())
        partition.persisted(done.result())
        self._commit(partition)  # what arrived meanwhile goes at once

    def _failed(self, partition: Partition, error: BaseException) -> None:
        delay = self._retry_ms.get(partition, 0)
        delay = min(max(RETRY_MS_FIRST, delay * 2), self.retry_ms_max)
        if partition not in self._retry_ms:
            log.warning("%s: persisting failed, keeping %d bytes in memory and retrying: %s",
                        partition.path, partition.tail.unpersisted_bytes, error)
        self._retry_ms[partition] = delay
        asyncio.get_running_loop().call_later(delay / 1000, self._reload, partition)

    def _reload(self, partition: Partition) -> None:
        if partition.closed:
            self._finish(partition)
            return
        self._running.add(partition)
        future = asyncio.get_running_loop().run_in_executor(self.executor, partition.reload_log, self.now_ms)
        future.add_done_callback(lambda done: self._reloaded(partition, done))

    def _reloaded(self, partition: Partition, done: asyncio.Future[int]) -> None:
        self._running.discard(partition)
        if partition.closed:
            self._finish(partition)
        elif done.exception() is not None:
            self._failed(partition, done.exception())  # type: ignore[arg-type]
        else:
            end = done.result()
            if end < partition.checkpoint:
                log.error("%s: the store lost persisted data: it ends at %d, the checkpoint was %d",
                          partition.path, end, partition.checkpoint)
            partition.persisted(end)
            self._commit(partition)

    def _finish(self, partition: Partition) -> None:
        partition.persisting = False
        self._retry_ms.pop(partition, None)
        if not self._running and not self._retry_ms:
            self._idle.set()

    async def drain(self, partitions: list[Partition], timeout_s: float) -> bool:
        """Wait until nothing is left to persist (or the timeout); True if all was written."""
        deadline = time.monotonic() + timeout_s
        for partition in partitions:
            if partition.tail.unpersisted_bytes and not partition.persisting:
                self.schedule(partition)
        while any(p.tail.unpersisted_bytes for p in partitions) or self._running:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._idle.clear()
            try:
                await asyncio.wait_for(self._idle.wait(), min(remaining, 0.1))
            except TimeoutError:
                pass
        return True

    def close(self) -> None:
        self.executor.shutdown(wait=True)
