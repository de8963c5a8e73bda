"""The persister: writes partitions' memory tails to the store in group commits.

A partition that takes a write is scheduled once: its commit starts after `commit_ms`, or at
once when `commit_bytes` are waiting or the topic flushes synchronously. A commit takes up to
commit_bytes of the oldest unpersisted batches, writes them on a worker thread with one
write and one sync per segment, and moves C. Whatever arrived meanwhile is committed right
after, so a slow store gets bigger commits, not more of them.

A failed commit (the store is down) keeps the data in memory. After a back-off that grows
to retry_ms_max the partition's log is reopened, which cuts anything half written, C moves
to what the store really holds, and committing resumes: nothing is lost while the process
lives, and nothing is written twice. A commit or reopen that does not return within its
timeout (a store call that hangs) is abandoned the same way: its thread is left behind, a
fresh worker takes its place, and the reopened log no longer shares anything with it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from .partition import Partition
from .workers import Workers

log = logging.getLogger(__name__)

RETRY_MS_FIRST = 50
COMMIT_TIMEOUT_S = 30.0
RELOAD_TIMEOUT_S = 300.0  # reopening may wait for HDFS lease recovery (up to 120 s)


class Persister:
    def __init__(self, commit_bytes: int, commit_ms: int, threads: int, now_ms: Callable[[], int],
                 retry_ms_max: int = 1000, commit_timeout_s: float = COMMIT_TIMEOUT_S) -> None:
        self.commit_bytes = commit_bytes
        self.commit_ms = commit_ms
        self.retry_ms_max = retry_ms_max
        self.commit_timeout_s = commit_timeout_s
        self.now_ms = now_ms
        self.workers = Workers(threads, "martlet-persist")
        self._jobs: dict[Partition, object] = {}  # partition -> token of its job on a worker
        self._retry_ms: dict[Partition, int] = {}

    def schedule(self, partition: Partition) -> None:
        """Event loop, after an append: make sure a commit for `partition` is coming."""
        if partition.persisting:
            return
        partition.persisting = True
        loop = asyncio.get_running_loop()
        if partition.sync_flush or self.commit_ms <= 0 or partition.tail.unpersisted_bytes >= self.commit_bytes:
            loop.call_soon(self._commit, partition)
        else:
            loop.call_later(self.commit_ms / 1000, self._commit, partition)

    # -- jobs on worker threads ------------------------------------------------------------

    def _start(self, partition: Partition, what: str, timeout_s: float, call: Callable[..., Any], *args: Any,
               then: Callable[[Partition, Any], None]) -> None:
        token = object()
        self._jobs[partition] = token
        loop = asyncio.get_running_loop()
        watchdog = loop.call_later(timeout_s, self._stuck, partition, token, what, timeout_s)

        def done(future: asyncio.Future[Any]) -> None:
            watchdog.cancel()
            if self._jobs.get(partition) is not token:
                return  # abandoned as stuck; its late outcome no longer matters
            del self._jobs[partition]
            if partition.closed:
                self._finish(partition)
            elif future.exception() is not None:
                self._failed(partition, future.exception())  # type: ignore[arg-type]
            else:
                then(partition, future.result())

        loop.run_in_executor(self.workers, call, *args).add_done_callback(done)

    def _stuck(self, partition: Partition, token: object, what: str, timeout_s: float) -> None:
        if self._jobs.get(partition) is not token:
            return
        del self._jobs[partition]
        self.workers.add_worker()  # the stuck thread stays behind
        self._failed(partition, TimeoutError(f"the store did not finish a {what} in {timeout_s:.0f} s"))

    # -- the cycle ---------------------------------------------------------------------------

    def _commit(self, partition: Partition) -> None:
        if partition.closed or partition.tail.unpersisted_bytes == 0:
            self._finish(partition)
            return
        batches, headers = partition.tail.unpersisted(self.commit_bytes)
        self._start(partition, "commit", self.commit_timeout_s, partition.write_unpersisted, batches, headers,
                    then=self._committed)

    def _committed(self, partition: Partition, end: int) -> None:
        if self._retry_ms.pop(partition, None) is not None:
            log.warning("%s: persisting again (checkpoint %d)", partition.path, end)
        partition.persisted(end)
        self._commit(partition)  # what arrived meanwhile goes at once

    def _failed(self, partition: Partition, error: BaseException) -> None:
        if partition.closed:
            self._finish(partition)
            return
        delay = self._retry_ms.get(partition, 0)
        if not delay:
            log.warning("%s: persisting failed, keeping %d bytes in memory and retrying: %s",
                        partition.path, partition.tail.unpersisted_bytes, error)
        delay = min(max(RETRY_MS_FIRST, delay * 2), self.retry_ms_max)
        self._retry_ms[partition] = delay
        asyncio.get_running_loop().call_later(delay / 1000, self._reload, partition)

    def _reload(self, partition: Partition) -> None:
        if partition.closed:
            self._finish(partition)
            return
        self._start(partition, "reopen", RELOAD_TIMEOUT_S, partition.reload_log, self.now_ms, then=self._reloaded)

    def _reloaded(self, partition: Partition, end: int) -> None:
        if end < partition.checkpoint:
            log.error("%s: the store lost persisted data: it ends at %d, the checkpoint was %d",
                      partition.path, end, partition.checkpoint)
        partition.persisted(end)
        self._commit(partition)

    def _finish(self, partition: Partition) -> None:
        partition.persisting = False
        self._retry_ms.pop(partition, None)

    # -- stopping --------------------------------------------------------------------------

    async def drain(self, partitions: list[Partition], timeout_s: float) -> bool:
        """Wait until nothing is left to persist (or the timeout); True if all was written."""
        deadline = time.monotonic() + timeout_s
        for partition in partitions:
            if partition.tail.unpersisted_bytes and not partition.persisting:
                self.schedule(partition)
        while any(p.tail.unpersisted_bytes and not p.closed for p in partitions) or self._jobs:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.005)  # commits finish on worker threads; poll for them
        return True

    def close(self) -> None:
        self.workers.shutdown()
