"""The write path of the coordinator shards: no store call on the event loop, log before memory.

    event loop      a machine makes the record from its state, the shard encodes it, queue it
    worker thread   Shard.append: the only store calls, one at a time, in queue order
    event loop      Shard.apply, then the writer's awaitable resolves

One thread serves every shard of a runtime ("martlet-coordinator"), so each log receives its
records in the order they were queued, and the loop takes the results in that same order
(`_settle` only ever pops the head of one queue): memory never holds a record its log lacks,
and a reader on the loop sees each record whole or not at all. Nothing is locked; the state
belongs to the loop, the logs to the thread.

A record is made from the applied state, which lags the records still queued. The machines'
makers are given the owner's pending records (`pending`: those of one machine and one key),
so a decision that reads the state (is this offset there? does the log already end with this
record?) sees it as it will be.

A failed append (an OSError from the store, say) is not applied; only its own waiter gets
the error. The records queued after it go on: each is a whole batch and none depends on the
bytes of another. A waiter that stops waiting (its task cancelled) does not cancel its write,
which is applied when it returns like any other.

Every job has a deadline (engine/store/workers.py): WRITE_S for an append to an open log,
OPEN_S when the job must open the log first (on HDFS that may wait for lease recovery). A job
past it fails like a failed append (its waiter gets StoreTimeout, an OSError), the shard's log
is abandoned before anything else runs (`Shard.abandon_log`: the next job reopens it,
and lease recovery fences the stuck writer, so a late write can never land after a later
one), and a fresh thread takes the queue on. While the store does not answer, the queue is
*stalled* (its head has waited more than STALLED_S): new records are then refused at once
(their awaitables raise StoreTimeout) instead of piling up behind it, and the groups service
does not wait for membership records (engine/groups/service.py). QUEUED_MAX bounds the queue
all the same.

Compaction runs on the same thread, queued like a write. Its snapshot is taken on the loop
when it is queued: a copy of the applied state, plus the shard's writes queued ahead of it.
By the time the thread reaches the compaction those writes have run; it applies the ones that
succeeded to the copy, which is then exactly what the old log holds, and rewrites the log
from it. Writes queued after the compaction land in the new log; nothing written before the
snapshot is lost when the old log is swapped out. One compaction per shard is queued at a time.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TypeVar

from ...records.header import BatchHeader
from ..store.workers import StoreTimeout, Workers
from .shard import Shard, States

T = TypeVar("T")
CLOSERS = 8  # shards' logs closed at once when the node stops
WRITE_S = 10.0  # deadline of an append to an open log (an hsync takes milliseconds)
OPEN_S = 150.0  # deadline of a job that opens the log first (HDFS lease recovery takes up to 120 s)
CLOSE_S = 30.0  # deadline of closing the logs at a stop or a shard's hand-over
STALLED_S = 5.0  # the queue's head waiting this long: the store is not answering (Kafka's offsets.commit.timeout.ms)
QUEUED_MAX = 10_000  # records queued at most

logger = logging.getLogger(__name__)


class _Job:
    """A call queued for the worker thread. The thread sets `log_bytes` or `error`, then
    `ran`; `settled` resolves on the loop once the result is taken in."""

    def __init__(self, shard: Shard, settled: asyncio.Future[None]) -> None:
        self.shard = shard
        self.settled = settled
        self.queued_at = settled.get_loop().time()
        self.log_bytes = 0  # the log's size after the job
        self.error: BaseException | None = None
        self.ran = False

    def take(self, outcome: Future[int]) -> None:
        """The job's outcome (on whichever thread ended it: its worker or the watchdog)."""
        error = outcome.exception()
        if error is None:
            self.log_bytes = outcome.result()
        else:
            self.error = error
        self.ran = True


class _Write(_Job):
    def __init__(self, shard: Shard, record: object, batch: bytearray, header: BatchHeader,
                 settled: asyncio.Future[None]) -> None:
        super().__init__(shard, settled)
        self.record = record
        self.batch = batch
        self.header = header


class _Compaction(_Job):
    def __init__(self, shard: Shard, state: States, ahead: list[_Write],
                 settled: asyncio.Future[None]) -> None:
        super().__init__(shard, settled)
        self.state = state  # the applied state when queued (a copy)
        self.ahead = ahead  # the shard's writes queued before the compaction


class ShardWriter:
    def __init__(self) -> None:
        self._thread = Workers(1, "martlet-coordinator")
        self._closers = Workers(CLOSERS, "martlet-coordinator-close")
        self._queue: deque[_Job] = deque()  # queued and not yet settled, in queue order
        self._pending: dict[tuple[str, str], deque[_Write]] = {}  # the same writes, by owner (Registry.owner)
        self._compacting: set[Shard] = set()
        self._closed = False

    # -- event loop

    def submit(self, shard: Shard, record: object) -> Awaitable[None]:
        """Queue `record` for `shard`'s log. The awaitable resolves once it is applied, or
        raises the append's error. A record that cannot be encoded raises here, unqueued."""
        assert not self._closed, "the coordinator's writer is closed"
        loop = asyncio.get_running_loop()
        batch, header = shard.encode(record)
        refused = self._refusal()
        if refused is not None:
            failed = loop.create_future()
            failed.set_exception(refused)
            return failed
        write = _Write(shard, record, batch, header, loop.create_future())
        self._queue.append(write)
        self._pending.setdefault(shard.registry.owner(record), deque()).append(write)
        self._on_thread(write, functools.partial(_append, write), loop)
        return asyncio.shield(write.settled)

    @property
    def stalled(self) -> bool:
        """The store has not answered the head of the queue for STALLED_S."""
        return bool(self._queue) and asyncio.get_running_loop().time() - self._queue[0].queued_at > STALLED_S

    def _refusal(self) -> StoreTimeout | None:
        if self.stalled:
            waited = asyncio.get_running_loop().time() - self._queue[0].queued_at
            return StoreTimeout(f"the store has not taken a coordinator record for {waited:.0f} s")
        if len(self._queue) >= QUEUED_MAX:
            return StoreTimeout(f"{len(self._queue)} coordinator records wait for the store")
        return None

    def _on_thread(self, job: _Job, call: Callable[[], int], loop: asyncio.AbstractEventLoop) -> None:
        """Queue `call` for the thread with the job's deadline; its outcome settles the job."""
        deadline_s = WRITE_S if job.shard.log_open else OPEN_S
        outcome = self._thread.call(call, "a coordinator shard's write", deadline_s, abandoned=job.shard.abandon_log)

        def ended(_: Future[int]) -> None:
            job.take(outcome)
            loop.call_soon_threadsafe(self._settle)

        outcome.add_done_callback(ended)

    def pending(self, machine: str, key: str) -> list[object]:
        """The owner's records queued and not yet applied, oldest first."""
        return [write.record for write in self._pending.get((machine, key), ())]

    async def wait_written(self, timeout_s: float | None = None) -> bool:
        """Until every job queued so far has settled, whatever its outcome, or `timeout_s`
        passed (None: no bound; each job has a deadline); True if all had settled."""
        if not self._queue:
            return True
        done, _ = await asyncio.wait([self._queue[-1].settled], timeout=timeout_s)
        return bool(done)

    async def wait_idle(self, shard: Shard) -> None:
        """Until no queued job names `shard` (a settling write may queue its compaction)."""
        while any(job.shard is shard for job in self._queue):
            await self.wait_written()

    async def run(self, call: Callable[..., T], *args: object) -> T:
        """Run a store call on the writer's thread, after everything queued before it."""
        await self.wait_written()
        return await asyncio.wrap_future(self._thread.call(functools.partial(call, *args), "a coordinator shard's open",
                                                           OPEN_S))

    async def close_log(self, shard: Shard) -> None:
        """Close one shard's log beside the writer's thread (a close on HDFS takes about 0.4 s);
        past CLOSE_S the log is abandoned instead, and its next owner recovers it."""
        closing = self._closers.call(shard.close, "a coordinator shard's close", CLOSE_S, abandoned=shard.abandon_log)
        try:
            await asyncio.wrap_future(closing)
        except OSError as error:  # the next owner recovers the log as the store kept it
            shard.abandon_log()
            logger.warning("closing a coordinator shard failed, its log is left to its next owner: %s", error)

    async def close(self, shards: list[Shard]) -> None:
        """Let the queued jobs finish, then close the logs on the thread and stop it. Once:
        a stopped thread would never run a second close."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.wait_written()
            closing = [self._closers.call(shard.close, "a coordinator shard's close", CLOSE_S,
                                          abandoned=shard.abandon_log) for shard in shards]
            await asyncio.gather(*(asyncio.wrap_future(closed) for closed in closing))
        finally:
            self._thread.shutdown()
            self._closers.shutdown()

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
        owner = write.shard.registry.owner(write.record)
        by_owner = self._pending[owner]
        assert by_owner.popleft() is write, "writes settle in queue order"
        if not by_owner:
            del self._pending[owner]
        if write.error is not None:
            _resolve(write.settled, write.error)
            return
        write.shard.apply(write.record)
        _resolve(write.settled, None)
        if write.shard not in self._compacting and write.shard.should_compact(write.log_bytes):
            self._queue_compaction(write.shard)

    def _queue_compaction(self, shard: Shard) -> None:
        loop = asyncio.get_running_loop()
        ahead = [job for job in self._queue if isinstance(job, _Write) and job.shard is shard]
        compaction = _Compaction(shard, shard.snapshot(), ahead, loop.create_future())
        self._compacting.add(shard)
        self._queue.append(compaction)
        self._on_thread(compaction, functools.partial(_compact, compaction), loop)

    def _settle_compaction(self, compaction: _Compaction) -> None:
        self._compacting.discard(compaction.shard)
        if compaction.error is None:
            compaction.shard.compacted(compaction.log_bytes)
        else:  # the old log stays (or is settled back by the next append); retried on a later write
            logger.warning("compaction of a coordinator shard failed: %r", compaction.error)
        _resolve(compaction.settled, None)



def _append(write: _Write) -> int:
    """Worker thread: the log's size after the append."""
    return write.shard.append(write.batch, write.header)


def _compact(compaction: _Compaction) -> int:
    """Worker thread: rewrite the shard's log from the snapshot; the new log's size."""
    state = compaction.state
    for write in compaction.ahead:
        assert write.ran, "a write queued before the compaction has run before it"
        if write.error is None:
            state.apply(write.record)
    return compaction.shard.rewrite(state)


def _resolve(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():  # waiters hold shields, so nothing should cancel it; the queue must move on regardless
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
