"""The persister: writes partitions' memory tails to the store in flushes (a flush is a group
commit: one write carries every batch a partition took since the last one).

A partition that takes a write becomes due; due partitions are flushed together
`flush_ms` after the first of them (at once when one has `flush_bytes` waiting or its topic
flushes synchronously). Each flush takes up to flush_bytes of a partition's oldest
unpersisted batches and writes them with one write (and one sync, see Partition) per segment.
The due partitions are split over the worker threads in one job per thread, so ten
thousand partitions cost a few thread hand-offs, not ten thousand. On a store whose writes
only hand bytes to the operating system (the local disk, `inline`), flushes that need no
sync run on the event loop itself: a hand-off to a thread costs more than such a write
(measured: 33 MB/s acks=all through workers, see the commit adding `inline`). C moves when a job
returns; whatever arrived meanwhile is flushed right after, so a slow store gets bigger
flushes, not more of them.

A failed flush (the store is down) keeps the data in memory. After a back-off that grows
to retry_ms_max the partition's log is reopened, which cuts anything half written, C moves
to what the store really holds, and flushing resumes: nothing is lost while the process
lives, and nothing is written twice. A flush or reopen that does not return within its
timeout (a store call that hangs) is abandoned the same way: its thread is left behind, a
fresh worker takes its place, and the reopened log no longer shares anything with it.

C (with the LSO as of C, which moves only with it) is also published for readers in other
processes (engine/log/reader.py): when C moves, the partition joins a set of unpublished
ones, and `publish_ms` after the first of them (a setting, `checkpoint_publish_ms`) one
sweep renames each one's checkpoint file to its new C on PUBLISH_THREADS threads of their
own (engine/log/files.py). With a thousand partitions
taking writes a sweep is a thousand NameNode renames, each an edit the NameNode logs and
syncs like the length update of every hsync: on the flush workers, flushes queued behind
them waited up to a quarter of a second on the reference HDFS, and with as many threads as
flushes the NameNode did as many renames as hsyncs. Two threads bound what publishing asks
of the NameNode, and a sweep of many partitions then takes longer, which spaces the sweeps
out. Sweeps run one at a time, so a partition's file is rewritten at most
every publish_ms, and a published C lags the real one by at most publish_ms plus two sweeps.
A failed write is retried by the next sweep; Partition.close publishes the final C.

Every timer comes from the injected clock (engine/clock.py), so tests drive them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ...records.header import BatchHeader
from ..clock import Clock, Timer
from ..errors import Fenced
from ..store.workers import Workers
from .partition import Partition

logger = logging.getLogger(__name__)

RETRY_MS_FIRST = 50
FLUSH_TIMEOUT_S = 30.0
RELOAD_TIMEOUT_S = 300.0  # reopening may wait for HDFS lease recovery (up to 120 s)
Unpersisted = tuple[Partition, list[bytearray], list[BatchHeader]]  # a partition and what a flush writes of it
INLINE_SLOW_S = 0.02  # an inline flush slower than this sends flushes to the workers ...
INLINE_PAUSE_S = 10.0  # ... for this long, so a slow local disk stalls the loop once, not on every write
PUBLISH_MS = 1000  # how often a partition's C is published at most (EngineSettings.checkpoint_publish_ms)
PUBLISH_JOB = "checkpoint publish"  # the job that runs on the publishers, not the flush workers
PUBLISH_THREADS = 2  # checkpoint publishes running at once (NameNode renames)


@dataclass(frozen=True, slots=True)
class FlushLimits:
    flush_bytes: int = 1 << 20  # the most one partition's flush writes
    flush_ms: int = 0  # how long a flush waits to gather more (0: the next loop turn)
    threads: int = 4  # flushes running at once
    retry_ms_max: int = 1000  # the longest back-off after a failed flush
    flush_timeout_s: float = FLUSH_TIMEOUT_S  # a flush running longer is abandoned
    publish_ms: int = PUBLISH_MS  # C is published at most this often


class Persister:
    def __init__(self, limits: FlushLimits, clock: Clock, inline: bool = False) -> None:
        self.flush_bytes = limits.flush_bytes
        self.inline = inline  # flushes without a sync run on the event loop (a fast local store)
        self.flush_ms = limits.flush_ms
        self.threads = limits.threads
        self.retry_ms_max = limits.retry_ms_max
        self.flush_timeout_s = limits.flush_timeout_s
        self.publish_ms = limits.publish_ms
        self.clock = clock
        self.workers = Workers(limits.threads, "martlet-persist")
        self.publishers = Workers(PUBLISH_THREADS, "martlet-publish")
        self._due: dict[Partition, None] = {}  # an ordered set
        self._timer: Timer | None = None
        self._timer_urgent = False
        self._jobs: dict[object, list[Partition]] = {}  # token -> partitions in that job
        self._running: dict[object, Future[Any]] = {}  # token -> that job on its pool
        self._retry_ms: dict[Partition, int] = {}
        self._unpublished: dict[Partition, None] = {}  # C moved since the last publish
        self._publish_failing: set[Partition] = set()  # whose latest publish failed (logged once)
        self._publish_timer: Timer | None = None
        self._publishing = 0  # publish jobs of the running sweep
        self._progress: list[asyncio.Future[None]] = []  # drain waits for the next job to end
        self._inline_paused_until = 0.0  # clock.monotonic(): inline flushes resume then (0: not paused)

    def schedule(self, partition: Partition) -> None:
        """Event loop, after an append: make sure a flush for `partition` is coming."""
        if partition.persisting:
            return
        partition.persisting = True
        if self.flush_ms <= 0 and not partition.sync_flush and self._inline_now():
            self._flush_inline([(partition, *partition.tail.unpersisted(self.flush_bytes))])
            return  # C covers the batch before append returns
        self._due[partition] = None
        urgent = partition.sync_flush or self.flush_ms <= 0 or partition.tail.unpersisted_bytes >= self.flush_bytes
        self._arm(urgent)

    def _arm(self, urgent: bool) -> None:
        loop = asyncio.get_running_loop()
        if self._timer is not None and (self._timer_urgent or not urgent):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_urgent = urgent
        if urgent:
            self._timer = loop.call_soon(self._start_due)
        else:
            self._timer = self.clock.call_later(self.flush_ms / 1000, self._start_due)

    # -- flushes -----------------------------------------------------------------------------

    def _start_due(self) -> None:
        self._timer = None
        due, self._due = list(self._due), {}
        items = []
        for partition in due:
            if partition.closed or partition.tail.unpersisted_bytes == 0:
                self._finish(partition)
            else:
                items.append((partition, *partition.tail.unpersisted(self.flush_bytes)))
        if self._inline_now():
            here = [item for item in items if not item[0].sync_flush]
            items = [item for item in items if item[0].sync_flush]
            if here:
                self._flush_inline(here)
        jobs = min(self.threads, len(items))
        for number in range(jobs):
            chunk = items[number::jobs]
            self._start([p for p, _, _ in chunk], "flush", self.flush_timeout_s, _write_all, chunk,
                        then=self._flushed)

    def _inline_now(self) -> bool:
        """Flushes that need no sync run on the loop on a local store, unless one lately took
        longer than INLINE_SLOW_S (a disk under pressure): then the workers take them."""
        if not self._inline_paused_until:
            return self.inline
        if self.clock.monotonic() < self._inline_paused_until:
            return False
        self._inline_paused_until = 0.0
        return self.inline

    def _flush_inline(self, items: list[Unpersisted]) -> None:
        started = self.clock.monotonic()
        results = _write_all(items)
        took_s = self.clock.monotonic() - started
        if took_s > INLINE_SLOW_S:
            self._inline_paused_until = started + took_s + INLINE_PAUSE_S
            logger.warning("a flush on the event loop took %.0f ms: flushing on worker threads for %.0f s",
                        took_s * 1000, INLINE_PAUSE_S)
        self._flushed([p for p, _, _ in items], results)

    def _flushed(self, partitions: list[Partition], results: list[int | BaseException]) -> None:
        for partition, result in zip(partitions, results, strict=True):
            if isinstance(result, BaseException):
                self._failed(partition, result)
                continue
            if self._retry_ms.pop(partition, None) is not None:
                logger.warning("%s: persisting again (checkpoint %d)", partition.path, result)
            partition.persisted(result)
            self._to_publish(partition)
            self._continue(partition)
        self._wake_drain()

    def _continue(self, partition: Partition) -> None:
        """After a flush: what arrived meanwhile goes at once."""
        if partition.closed or partition.tail.unpersisted_bytes == 0:
            self._finish(partition)
        else:
            self._due[partition] = None
            self._arm(urgent=True)

    # -- jobs on worker threads ------------------------------------------------------------

    def _start(self, partitions: list[Partition], what: str, timeout_s: float, call: Callable[..., Any],
               *args: Any, then: Callable[[list[Partition], Any], None],
               failed: Callable[[Partition, BaseException], None] | None = None,
               ended: Callable[[], None] = lambda: None) -> None:
        """Run `call` on a worker (a publisher for a publish job, else a flush worker); `then`
        gets its result, `failed` (default: the flush failure path) each partition when it
        raises or outlives its watchdog, and `ended` runs once either way."""
        pool = self.publishers if what == PUBLISH_JOB else self.workers
        token = object()
        self._jobs[token] = partitions
        on_failure = failed or self._failed
        watchdog = self.clock.call_later(timeout_s, lambda: self._stuck(token, what, timeout_s, on_failure, ended,
                                                                         pool))

        def done(future: asyncio.Future[Any]) -> None:
            watchdog.cancel()
            self._running.pop(token, None)
            error = future.exception()
            if self._jobs.pop(token, None) is None:
                return  # abandoned as stuck; its late outcome no longer matters
            if error is not None:
                for partition in partitions:
                    on_failure(partition, error)
            else:
                then([p for p in partitions], future.result())
            ended()
            self._wake_drain()

        job = pool.call(functools.partial(call, *args), what, None)  # the watchdog above is its deadline
        self._running[token] = job
        asyncio.wrap_future(job).add_done_callback(done)

    def _stuck(self, token: object, what: str, timeout_s: float,
               failed: Callable[[Partition, BaseException], None], ended: Callable[[], None],
               pool: Workers) -> None:
        partitions = self._jobs.pop(token, None)
        if partitions is None:
            return
        pool.abandon(self._running.pop(token))  # counted stuck; a fresh worker takes its thread's place
        for partition in partitions:
            failed(partition, TimeoutError(f"the store did not finish a {what} in {timeout_s:.0f} s"))
        ended()
        self._wake_drain()

    # -- failures ------------------------------------------------------------------------------

    def _failed(self, partition: Partition, error: BaseException) -> None:
        if isinstance(error, Fenced) and not partition.closed:
            logger.error("%s: dropping %d bytes never persisted: %s", partition.path,
                         partition.tail.unpersisted_bytes, error)
            partition.close()  # its writers are told NOT_LEADER and find the new owner
        if partition.closed:
            self._finish(partition)
            return
        delay = self._retry_ms.get(partition, 0)
        if not delay:
            logger.warning("%s: persisting failed, keeping %d bytes in memory and retrying: %s",
                        partition.path, partition.tail.unpersisted_bytes, error)
        delay = min(max(RETRY_MS_FIRST, delay * 2), self.retry_ms_max)
        self._retry_ms[partition] = delay
        self.clock.call_later(delay / 1000, lambda: self._reload(partition))

    def _reload(self, partition: Partition) -> None:
        if partition.closed:
            self._finish(partition)
            return
        self._start([partition], "reopen", RELOAD_TIMEOUT_S, partition.reload_log, self.clock.now_ms,
                    then=self._reloaded)

    def _reloaded(self, partitions: list[Partition], end: int) -> None:
        [partition] = partitions
        if end < partition.checkpoint:
            logger.error("%s: the store lost persisted data: it ends at %d, the checkpoint was %d",
                      partition.path, end, partition.checkpoint)
        partition.persisted(end)
        self._to_publish(partition)
        self._continue(partition)

    def _finish(self, partition: Partition) -> None:
        partition.persisting = False
        self._retry_ms.pop(partition, None)
        self._wake_drain()  # e.g. a partition closed while its retry was pending

    # -- publishing C ----------------------------------------------------------------------

    def _to_publish(self, partition: Partition) -> None:
        """Event loop, after C moved: publish it with the next sweep."""
        if partition in self._unpublished or partition.checkpoint == partition.published_checkpoint:
            return
        self._unpublished[partition] = None
        self._arm_publish()

    def _arm_publish(self) -> None:
        if self._publish_timer is None and not self._publishing and self._unpublished:
            self._publish_timer = self.clock.call_later(self.publish_ms / 1000, self._publish)

    def _publish(self) -> None:
        """One sweep: each unpublished partition's C, written on the worker threads."""
        self._publish_timer = None
        items = [(p, p.to_publish()) for p in self._unpublished if not p.closed]
        self._unpublished = {}
        jobs = min(PUBLISH_THREADS, len(items))
        self._publishing = jobs
        for number in range(jobs):
            chunk = items[number::jobs]
            self._start([p for p, _ in chunk], PUBLISH_JOB, self.flush_timeout_s, _publish_all, chunk,
                        then=self._published, failed=self._publish_failed, ended=self._sweep_job_ended)

    def _published(self, partitions: list[Partition], results: list[BaseException | None]) -> None:
        for partition, error in zip(partitions, results, strict=True):
            if error is not None:
                self._publish_failed(partition, error)
            elif partition in self._publish_failing:
                self._publish_failing.discard(partition)
                logger.warning("%s: publishing the checkpoint again", partition.path)

    def _publish_failed(self, partition: Partition, error: BaseException) -> None:
        """C stays unpublished (readers see an older one) until the next sweep; said once
        until a publish succeeds again (an outage fails every sweep)."""
        if not partition.closed:
            if partition not in self._publish_failing:
                self._publish_failing.add(partition)
                logger.warning("%s: publishing the checkpoint failed, retrying with every sweep: %s",
                               partition.path, error)
            self._unpublished[partition] = None

    def _sweep_job_ended(self) -> None:
        self._publishing -= 1
        self._arm_publish()

    # -- stopping --------------------------------------------------------------------------

    async def drain(self, partitions: list[Partition], timeout_s: float) -> bool:
        """Wait until nothing is left to persist (or the timeout); True if all was written."""
        deadline = self.clock.monotonic() + timeout_s
        for partition in partitions:
            if partition.tail.unpersisted_bytes and not partition.persisting:
                self.schedule(partition)
        while any(p.tail.unpersisted_bytes and not p.closed for p in partitions) or self._jobs:
            remaining = deadline - self.clock.monotonic()
            if remaining < 0:
                return False
            await self._next_progress(remaining)
        return True

    async def _next_progress(self, timeout_s: float) -> None:
        """Wait until a flush or job ends, or timeout_s passes."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._progress.append(future)
        def end_wait() -> None:
            if not future.done():
                future.set_result(None)

        timer = self.clock.call_later(timeout_s, end_wait)
        try:
            await future
        finally:
            timer.cancel()

    def _wake_drain(self) -> None:
        if not self._progress:
            return
        waiting, self._progress = self._progress, []
        for future in waiting:
            if not future.done():
                future.set_result(None)

    def close(self) -> None:
        if self._publish_timer is not None:
            self._publish_timer.cancel()
            self._publish_timer = None
        self.workers.shutdown()
        self.publishers.shutdown()


def _write_all(items: list[Unpersisted]) -> list[int | BaseException]:
    """A worker thread (the loop, for inline flushes): flush each partition's batches; one
    failure does not stop the rest."""
    results: list[int | BaseException] = []
    for partition, batches, headers in items:
        try:
            results.append(partition.write_unpersisted(batches, headers))
        except Exception as error:  # noqa: BLE001 - handed back per partition
            results.append(error)
    return results


def _publish_all(items: list[tuple[Partition, tuple[int, int]]]) -> list[BaseException | None]:
    """Worker thread: publish each partition's C and LSO; one failure does not stop the rest."""
    results: list[BaseException | None] = []
    for partition, (checkpoint, last_stable) in items:
        try:
            partition.publish_checkpoint(checkpoint, last_stable)
            results.append(None)
        except Exception as error:  # noqa: BLE001 - handed back per partition
            results.append(error)
    return results
