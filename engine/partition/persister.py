"""The persister: writes partitions' memory tails to the store in group commits.

A partition that takes a write becomes due; due partitions are committed together
`commit_ms` after the first of them (at once when one has `commit_bytes` waiting or its topic
flushes synchronously). Each commit takes up to commit_bytes of a partition's oldest
unpersisted batches and writes them with one write (and one sync, see Partition) per segment.
The due partitions are split over the worker threads in one job per thread, so ten
thousand partitions cost a few thread hand-offs, not ten thousand. On a store whose writes
only hand bytes to the operating system (the local disk, `inline`), commits that need no
sync run on the event loop itself: a hand-off to a thread costs more than such a write
(measured: 33 MB/s acks=all through workers, see the commit adding `inline`). C moves when a job
returns; whatever arrived meanwhile is committed right after, so a slow store gets bigger
commits, not more of them.

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
                 retry_ms_max: int = 1000, commit_timeout_s: float = COMMIT_TIMEOUT_S, inline: bool = False) -> None:
        self.commit_bytes = commit_bytes
        self.inline = inline  # commits without a sync run on the event loop (a fast local store)
        self.commit_ms = commit_ms
        self.threads = threads
        self.retry_ms_max = retry_ms_max
        self.commit_timeout_s = commit_timeout_s
        self.now_ms = now_ms
        self.workers = Workers(threads, "martlet-persist")
        self._due: dict[Partition, None] = {}  # an ordered set
        self._timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self._timer_urgent = False
        self._jobs: dict[object, list[Partition]] = {}  # token -> partitions in that job
        self._retry_ms: dict[Partition, int] = {}

    def schedule(self, partition: Partition) -> None:
        """Event loop, after an append: make sure a commit for `partition` is coming."""
        if partition.persisting:
            return
        partition.persisting = True
        if self.inline and self.commit_ms <= 0 and not partition.sync_flush:
            here = [(partition, *partition.tail.unpersisted(self.commit_bytes))]
            self._committed([partition], _write_all(here))  # C covers the batch before append returns
            return
        self._due[partition] = None
        urgent = partition.sync_flush or self.commit_ms <= 0 or partition.tail.unpersisted_bytes >= self.commit_bytes
        self._arm(urgent)

    def _arm(self, urgent: bool) -> None:
        loop = asyncio.get_running_loop()
        if self._timer is not None and (self._timer_urgent or not urgent):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_urgent = urgent
        self._timer = loop.call_soon(self._flush) if urgent else loop.call_later(self.commit_ms / 1000, self._flush)

    # -- commits -----------------------------------------------------------------------------

    def _flush(self) -> None:
        self._timer = None
        due, self._due = list(self._due), {}
        items = []
        for partition in due:
            if partition.closed or partition.tail.unpersisted_bytes == 0:
                self._finish(partition)
            else:
                items.append((partition, *partition.tail.unpersisted(self.commit_bytes)))
        if self.inline:
            here = [item for item in items if not item[0].sync_flush]
            items = [item for item in items if item[0].sync_flush]
            if here:
                self._committed([p for p, _, _ in here], _write_all(here))
        jobs = min(self.threads, len(items))
        for number in range(jobs):
            chunk = items[number::jobs]
            self._start([p for p, _, _ in chunk], "commit", self.commit_timeout_s, _write_all, chunk,
                        then=self._committed)

    def _committed(self, partitions: list[Partition], results: list[int | BaseException]) -> None:
        for partition, result in zip(partitions, results, strict=True):
            if isinstance(result, BaseException):
                self._failed(partition, result)
                continue
            if self._retry_ms.pop(partition, None) is not None:
                log.warning("%s: persisting again (checkpoint %d)", partition.path, result)
            partition.persisted(result)
            self._continue(partition)

    def _continue(self, partition: Partition) -> None:
        """After a commit: what arrived meanwhile goes at once."""
        if partition.closed or partition.tail.unpersisted_bytes == 0:
            self._finish(partition)
        else:
            self._due[partition] = None
            self._arm(urgent=True)

    # -- jobs on worker threads ------------------------------------------------------------

    def _start(self, partitions: list[Partition], what: str, timeout_s: float, call: Callable[..., Any],
               *args: Any, then: Callable[[list[Partition], Any], None]) -> None:
        token = object()
        self._jobs[token] = partitions
        loop = asyncio.get_running_loop()
        watchdog = loop.call_later(timeout_s, self._stuck, token, what, timeout_s)

        def done(future: asyncio.Future[Any]) -> None:
            watchdog.cancel()
            if self._jobs.pop(token, None) is None:
                return  # abandoned as stuck; its late outcome no longer matters
            error = future.exception()
            if error is not None:
                for partition in partitions:
                    self._failed(partition, error)
                return
            then([p for p in partitions], future.result())

        loop.run_in_executor(self.workers, call, *args).add_done_callback(done)

    def _stuck(self, token: object, what: str, timeout_s: float) -> None:
        partitions = self._jobs.pop(token, None)
        if partitions is None:
            return
        self.workers.add_worker()  # the stuck thread stays behind
        for partition in partitions:
            self._failed(partition, TimeoutError(f"the store did not finish a {what} in {timeout_s:.0f} s"))

    # -- failures ------------------------------------------------------------------------------

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
        self._start([partition], "reopen", RELOAD_TIMEOUT_S, partition.reload_log, self.now_ms,
                    then=self._reloaded)

    def _reloaded(self, partitions: list[Partition], end: int) -> None:
        [partition] = partitions
        if end < partition.checkpoint:
            log.error("%s: the store lost persisted data: it ends at %d, the checkpoint was %d",
                      partition.path, end, partition.checkpoint)
        partition.persisted(end)
        self._continue(partition)

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


def _write_all(items: list[tuple[Partition, list[Any], list[Any]]]) -> list[int | BaseException]:
    """Worker thread: commit each partition's batches; one failure does not stop the rest."""
    results: list[int | BaseException] = []
    for partition, batches, headers in items:
        try:
            results.append(partition.write_unpersisted(batches, headers))
        except Exception as error:  # noqa: BLE001 - handed back per partition
            results.append(error)
    return results
