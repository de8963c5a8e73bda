"""The write path of the offsets shards: no store call on the event loop, log before memory.

    event loop      make the change from the state (OffsetStore.*_change), encode it, queue it
    worker thread   OffsetStore.append: the only store calls, one at a time, in queue order
    event loop      OffsetStore.apply, then the writer's awaitable resolves

One thread serves every shard of a Groups ("martlet-groups"), so each log receives its
changes in the order they were queued, and the loop takes the results in that same order
(`_settle` only ever pops the head of one queue): memory never holds a change its log lacks,
and a reader on the loop sees each change whole or not at all. Nothing is locked; the state
belongs to the loop, the logs to the thread.

A change is made from the applied state, which lags the changes still queued. The makers are
given the group's pending changes (`pending`), so a decision that reads the state (is this
offset there? does the log already end with this record?) sees it as it will be.

A failed append (an OSError from the store, say) is not applied; only its own waiter gets
the error. The changes queued after it go on: each is a whole batch and none depends on the
bytes of another. A waiter that stops waiting (its task cancelled) does not cancel its write,
which is applied when it returns like any other.

Compaction runs on the same thread, queued like a write. Its snapshot is taken on the loop
when it is queued: a copy of the applied state, plus the shard's writes queued ahead of it.
By the time the thread reaches the compaction those writes have run; it applies the ones that
succeeded to the copy, which is then exactly what the old log holds, and rewrites the log
from it. Writes queued after the compaction land in the new log; nothing written before the
snapshot is lost when the old log is swapped out. One compaction per shard is queued at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ...records.header import BatchHeader
from ..partition.workers import Workers
from .offsets import LiveState, OffsetStore
from .records import Change, owner_of

T = TypeVar("T")
CLOSERS = 8  # shards' logs closed at once when the node stops

logger = logging.getLogger(__name__)


class _Job:
    """A call queued for the worker thread. The thread sets `log_bytes` or `error`, then
    `ran`; `settled` resolves on the loop once the result is taken in."""

    def __init__(self, shard: OffsetStore, settled: asyncio.Future[None]) -> None:
        self.shard = shard
        self.settled = settled
        self.log_bytes = 0  # the log's size after the job
        self.error: BaseException | None = None
        self.ran = False


class _Write(_Job):
    def __init__(self, shard: OffsetStore, change: Change, batch: bytearray, header: BatchHeader,
                 settled: asyncio.Future[None]) -> None:
        super().__init__(shard, settled)
        self.change = change
        self.batch = batch
        self.header = header


class _Compaction(_Job):
    def __init__(self, shard: OffsetStore, state: LiveState, ahead: list[_Write],
                 settled: asyncio.Future[None]) -> None:
        super().__init__(shard, settled)
        self.state = state  # the applied state when queued (a copy)
        self.ahead = ahead  # the shard's writes queued before the compaction


class OffsetWriter:
    def __init__(self) -> None:
        self._thread = Workers(1, "martlet-groups")
        self._queue: deque[_Job] = deque()  # queued and not yet settled, in queue order
        self._pending: dict[tuple[str, str], deque[_Write]] = {}  # the same writes, by owner (records.owner_of)
        self._compacting: set[OffsetStore] = set()
        self._closed = False

    # -- event loop

    def submit(self, shard: OffsetStore, change: Change) -> Awaitable[None]:
        """Queue `change` for `shard`'s log. The awaitable resolves once it is applied, or
        raises the append's error. A change that cannot be encoded raises here, unqueued."""
        assert not self._closed, "the offsets writer is closed"
        loop = asyncio.get_running_loop()
        batch, header = shard.encode(change)
        write = _Write(shard, change, batch, header, loop.create_future())
        self._queue.append(write)
        self._pending.setdefault(owner_of(change), deque()).append(write)
        self._thread.submit(self._append, write, loop)
        return asyncio.shield(write.settled)

    def pending(self, group_id: str) -> list[Change]:
        """The group's changes queued and not yet applied, oldest first."""
        return [write.change for write in self._pending.get(("group", group_id), ())]

    async def wait_written(self) -> None:
        """Until every job queued so far has settled, whatever its outcome."""
        if self._queue:
            await asyncio.wait([self._queue[-1].settled])

    async def wait_idle(self, shard: OffsetStore) -> None:
        """Until no queued job names `shard` (a settling write may queue its compaction)."""
        while any(job.shard is shard for job in self._queue):
            await self.wait_written()

    async def run(self, call: Callable[..., T], *args: object) -> T:
        """Run a store call on the writer's thread, after everything queued before it."""
        await self.wait_written()
        return await asyncio.get_running_loop().run_in_executor(self._thread, call, *args)

    async def close(self, shards: list[OffsetStore]) -> None:
        """Let the queued jobs finish, then close the logs on the thread and stop it. Once:
        a stopped thread would never run a second close."""
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._thread, _close_all, shards)
        finally:
            self._thread.shutdown()

    def _settle(self) -> None:
        """Take in the results at the head of the queue, in queue order."""
        while self._queue and self._queue[0].ran:
            job = self._queue.popleft()
            if isinstance(job, _Write):
                self._settle_write(job)
            else:
                assert isinstance(job, _Compaction)
                self._settle_compaction(job)

    def _settle_write(self, write: _Write) -> None:
        owner = owner_of(write.change)
        by_owner = self._pending[owner]
        assert by_owner.popleft() is write, "writes settle in queue order"
        if not by_owner:
            del self._pending[owner]
        if write.error is not None:
            _resolve(write.settled, write.error)
            return
        write.shard.apply(write.change)
        _resolve(write.settled, None)
        if write.shard not in self._compacting and write.shard.should_compact(write.log_bytes):
            self._queue_compaction(write.shard)

    def _queue_compaction(self, shard: OffsetStore) -> None:
        loop = asyncio.get_running_loop()
        ahead = [job for job in self._queue if isinstance(job, _Write) and job.shard is shard]
        compaction = _Compaction(shard, shard.snapshot(), ahead, loop.create_future())
        self._compacting.add(shard)
        self._queue.append(compaction)
        self._thread.submit(self._compact, compaction, loop)

    def _settle_compaction(self, compaction: _Compaction) -> None:
        self._compacting.discard(compaction.shard)
        if compaction.error is None:
            compaction.shard.compacted(compaction.log_bytes)
        else:  # the old log stays (or is settled back by the next append); retried on a later write
            logger.warning("compaction of an offsets shard failed: %r", compaction.error)
        _resolve(compaction.settled, None)

    # -- worker thread

    def _append(self, write: _Write, loop: asyncio.AbstractEventLoop) -> None:
        try:
            write.log_bytes = write.shard.append(write.batch, write.header)
        except BaseException as error:  # noqa: BLE001 - handed to the waiter
            write.error = error
        write.ran = True
        loop.call_soon_threadsafe(self._settle)

    def _compact(self, compaction: _Compaction, loop: asyncio.AbstractEventLoop) -> None:
        try:
            state = compaction.state
            for write in compaction.ahead:
                assert write.ran, "a write queued before the compaction has run before it"
                if write.error is None:
                    state.apply(write.change)
            compaction.log_bytes = compaction.shard.rewrite(state)
        except BaseException as error:  # noqa: BLE001 - logged on the loop
            compaction.error = error
        compaction.ran = True
        loop.call_soon_threadsafe(self._settle)


def _close_all(shards: list[OffsetStore]) -> None:
    """Close the shards' logs side by side (each close on HDFS waits about 0.4 s for the
    NameNode): the writer's thread has run every queued job, and nothing writes them now."""
    with ThreadPoolExecutor(CLOSERS, "martlet-offsets-close") as closers:
        for closed in [closers.submit(shard.close) for shard in shards]:
            closed.result()


def _resolve(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():  # waiters hold shields, so nothing should cancel it; the queue must move on regardless
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
