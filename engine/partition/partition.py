"""A physical partition: memory tail, session S, checkpoint C, and the log on the store.

Writes go to the memory tail and get their offsets there; the persister (persister.py)
writes them to the log in flushes (group commits) on a worker thread and moves C up. Readers see
offsets below the high watermark, from memory when it still holds them and from the store
otherwise. The high watermark is C, or on a topic with `visibility = "memory"` the end of the
memory tail (Swift's real-time delivery: a slow or absent store does not delay readers, and a
crash may take back what they read). S is new on every load, so a writer that saw an earlier
load learns that what it sent above C may be gone, and a reader that saw records above C learns
it through the session history (OffsetForLeaderEpoch).

C is also published in the partition's `checkpoint-<C>-<LSO>` file name for readers in other
processes (engine/log/files.py, engine/log/reader.py): by the persister's sweeps while the
partition is open, on open when the file is behind the recovered log, and on close. LSO is
the last stable offset as of C (transactions.py): read-committed readers stop there.

Threads: the event loop owns the tail, C and the waiters; the log is used under `lock`,
from the loop (cheap calls) and from worker threads (persisting, store reads, retention);
the checkpoint file is renamed under a lock of its own, so that two publishes never race.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import wait

from ...records.build import build_control_batch
from ...records.control import ControlType
from ...records.header import BatchHeader, Buffer, iter_batches, parse_header, set_base_offset, set_leader_epoch
from ..errors import Fenced, OffsetOutOfRange, PartitionClosed, StaleSession
from ..log.compaction import discard, rewrite
from ..log.config import LogConfig
from ..log.files import read_published, write_published
from ..log.log import PartitionLog, check_handed
from ..log.producers import ProducerState, end_marker
from ..log.recovery import recover
from ..store.atomic import write_atomically
from ..store.base import Store
from ..store.workers import Workers
from .memory import MemoryPool
from .sessions import SessionHistory, claim, claimed_after
from .tail import Tail
from .transactions import PartitionTransactions

logger = logging.getLogger(__name__)
CLOSE_WAIT_S = 10.0  # how long close waits for a store call in progress
CLOSING_THREADS = 64  # partitions whose files close at once (each mostly waits for the store)
CLOSE_S = 300.0  # deadline of one close, from when they are all queued (1,000 closed in about 8 s on HDFS)


class Partition:
    def __init__(self, store: Store, path: str, log: PartitionLog, history: SessionHistory, pool: MemoryPool,
                 sync_flush: bool = False, visibility: str = "persisted") -> None:
        self.store = store
        self.path = path
        self._log_state = (log, threading.Lock())
        self.history = history
        self.session = history.latest
        self.pool = pool
        self.sync_flush = sync_flush  # flush mode "sync": acks=1 waits for C as well
        self.visibility = visibility  # "memory": readers see the whole tail, not only below C
        self.tail = Tail(log.end_offset)
        self.producers = _copy(log.producer_state)  # the log's, plus the batches in memory
        self.transactions = PartitionTransactions(self.producers, log.aborted_transactions())
        self.closed = False
        self.persisting = False  # the persister's flag: a flush is scheduled or running
        self.on_checkpoint: Callable[[Partition], None] = lambda partition: None
        self._checkpoint_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.published_checkpoint = 0  # the C last written to (or found in) the checkpoint file
        self._published_file: tuple[int, int] | None = None  # its (C, LSO) if known: no listing needed
        self._publish_lock = threading.Lock()

    @classmethod
    def open(cls, store: Store, path: str, config: LogConfig, now_ms: Callable[[], int], pool: MemoryPool,
             sync_flush: bool = False, own_segment: bool = False) -> Partition:
        """Open (recover) the partition at `path`; `own_segment`: start writing in a segment of
        its own (PartitionLog.start_own_segment), as a node taking over in a cluster does."""
        store.mkdir(path)
        if own_segment:
            log, history = cls._take_over(store, path, config, now_ms)
        else:
            log = PartitionLog.open(store, path, config, now_ms)
            history = SessionHistory.load(store, path)
            history.begin(log.end_offset)
            history.save(store, path)
        partition = cls(store, path, log, history, pool, sync_flush)
        partition._publish_recovered()
        return partition

    @staticmethod
    def _take_over(store: Store, path: str, config: LogConfig,
                   now_ms: Callable[[], int]) -> tuple[PartitionLog, SessionHistory]:
        """A node taking the partition over: claim its session, fence the last owner (HDFS
        lease recovery), recover the log, then write the indexes recovery rebuilt and the new session S side by
        side (each write ends in closing a small file, about half a second on HDFS, so a move
        waits for one instead of two), and start a segment of its own."""
        history = SessionHistory.load(store, path)
        claim(store, path, history.latest + 1)  # from here the last owner leaves the files alone
        store.take_over(path)  # the last owner's writes end here, before anything is read
        files: list[tuple[str, bytes]] = []  # the index files recovery rebuilt
        recovered = recover(store, path, config, files)
        history.begin(recovered.segments[-1].next_offset)
        writers = Workers(len(files) + 1, "martlet-take-over")
        try:
            done = [writers.submit(history.save, store, path)]
            done += [writers.submit(write_atomically, store, file, data) for file, data in files]
            for future in done:
                future.result()
        finally:
            writers.shutdown()
        log = PartitionLog(store, path, config, now_ms, recovered)
        try:
            log.start_own_segment()
        except BaseException:
            log.abandon()  # not a clean close: the next opening must check what the store kept
            raise
        return log, history

    def _publish_recovered(self) -> None:
        """Bring the published C in line with the recovered log: behind it after a crash
        (publishing lags), ahead of it only if the store lost persisted data. A new, empty
        partition has no file and needs none (readers take a missing file as C = 0)."""
        published = read_published(self.store, self.path)
        self._published_file = published
        self.published_checkpoint = published[0] if published is not None else 0
        if (published or (0, 0)) != self.to_publish():
            self.publish_checkpoint(*self.to_publish())

    # -- state -----------------------------------------------------------------------------

    @property
    def log(self) -> PartitionLog:
        return self._log_state[0]

    @property
    def lock(self) -> threading.Lock:
        """Held around every use of the log (see the module header)."""
        return self._log_state[1]

    @property
    def start_offset(self) -> int:
        return self.log.start_offset

    @property
    def end_offset(self) -> int:
        """Next offset to assign (Kafka's log end offset)."""
        return self.tail.end

    @property
    def checkpoint(self) -> int:
        """C: every offset below it is persisted."""
        return self.tail.checkpoint

    @property
    def high_watermark(self) -> int:
        """Readers see the offsets below it: C, or with visibility "memory" the tail's end."""
        return self.tail.end if self.visibility == "memory" else self.tail.checkpoint

    @property
    def last_stable(self) -> int:
        """Read-committed readers see the offsets below it (LSO <= high watermark)."""
        return self.transactions.last_stable(self.high_watermark)

    def to_publish(self) -> tuple[int, int]:
        """(C, LSO as of C): what readers in other processes may read (files.write_published)."""
        checkpoint = self.checkpoint
        return checkpoint, self.transactions.last_stable(checkpoint)

    # -- writing ---------------------------------------------------------------------------

    def append(self, batch: bytearray, header: BatchHeader, version: int | None = None,
               session: int | None = None, current_version: int = 0) -> int:
        """Take a batch into memory at offset end_offset and return that offset. A writer
        that names a (version, session) refers to what it last saw; a stale one is refused
        with the current (V, S, C)."""
        if self.closed:
            raise PartitionClosed(f"{self.path} is closed")
        if (session is not None and session != self.session) or (version is not None and version != current_version):
            raise StaleSession(current_version, self.session, self.checkpoint)
        check_handed(batch, header)
        marker = end_marker(batch, header)
        self.producers.check(header, marker)
        header = BatchHeader(self.tail.end, header[1], self.session, *header[3:])  # _replace's kwargs cost 2 µs
        set_base_offset(batch, header.base_offset)
        set_leader_epoch(batch, self.session)
        completed = self.producers.update(header, marker)
        self.transactions.completed(completed, self.checkpoint)
        self.tail.append(batch, header)
        self.pool.added(header.size)
        return header.base_offset

    def append_control(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                       timestamp_ms: int) -> int:
        """Append a transaction marker (a control batch, martlet.records.control) for the
        producer's transaction through `append`, as any batch (offset, session as leader
        epoch, memory tail); returns its offset. Markers carry no sequence, so producer
        state lets them pass. Only the engine writes these: the gateway refuses produced
        control batches. The marker closes the producer's open transaction here, if it has
        one; an ABORT joins the aborted transactions readers are told of."""
        control_type = ControlType.COMMIT if commit else ControlType.ABORT
        batch = build_control_batch(producer_id, producer_epoch, control_type, coordinator_epoch, timestamp_ms)
        return self.append(batch, parse_header(batch))

    async def wait_persisted(self, offset: int) -> None:
        """Return once C > offset."""
        if self.checkpoint > offset:
            return
        if self.closed:
            raise PartitionClosed(f"{self.path} is closed")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._checkpoint_waiters.append((offset, future))
        await future

    # -- the persister's side --------------------------------------------------------------

    def write_unpersisted(self, batches: list[bytearray], headers: list[BatchHeader]) -> int:
        """Worker thread: persist these batches (the next ones above C); returns the log end.
        Persisted means written to the store; only flush mode "sync" also syncs each flush
        (on HDFS every write is synced anyway; see docs/decisions.md, "Durability")."""
        log, lock = self._log_state
        with lock:
            log.append_stored(batches, headers, sync=self.sync_flush)
            return log.end_offset

    def reload_log(self, now_ms: Callable[[], int]) -> int:
        """Worker thread, after a failed or stuck write: open the log again, which cuts what
        the failure left half written, and use it from now on with a lock of its own (a
        stuck write may hold the old one forever); returns the log end (what is persisted).
        The old log is abandoned, not closed: closing could hang as its write did, and on
        HDFS would cut the file to what the broken writer saw. Fenced if another node took
        the partition over meanwhile (its write failed because that node fenced it)."""
        self.log.abandon()  # no lock: a stuck write may hold it; this only drops references
        if claimed_after(self.store, self.path, self.session):
            raise Fenced(f"{self.path}: another node took it over after session {self.session}")
        log = PartitionLog.open(self.store, self.path, self.log.config, now_ms)
        self._log_state = (log, threading.Lock())
        return log.end_offset

    def persisted(self, offset: int) -> None:
        """Event loop: the log now ends at `offset`; move C and wake whoever waits for it."""
        moved = self.tail.mark_persisted(offset)
        self.transactions.persisted(self.tail.checkpoint)
        self.pool.persisted(self.tail, moved)
        if self._checkpoint_waiters:
            self._wake_persisted(offset)
        self.on_checkpoint(self)

    def _wake_persisted(self, offset: int) -> None:
        still = []
        for wanted, future in self._checkpoint_waiters:
            if wanted < offset:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((wanted, future))
        self._checkpoint_waiters = still

    def publish_checkpoint(self, checkpoint: int, last_stable: int) -> None:
        """Worker thread (or close): write C and the LSO (as `to_publish` gave them on the
        loop) where outside readers find them. Skipped once closed, except by close itself;
        a publish still running (a stuck store call) makes this one give way."""
        if not self._publish_lock.acquire(blocking=False):
            raise TimeoutError(f"{self.path}: an earlier checkpoint publish is still running")
        try:
            if not self.closed:
                self._write_published(checkpoint, last_stable)
        finally:
            self._publish_lock.release()

    def _write_published(self, checkpoint: int, last_stable: int) -> None:
        previous, self._published_file = self._published_file, None  # unknown if this fails
        write_published(self.store, self.path, checkpoint, last_stable, previous)
        self._published_file = (checkpoint, last_stable)
        self.published_checkpoint = checkpoint

    # -- reading ---------------------------------------------------------------------------

    def read_memory(self, offset: int, max_bytes: int, limit: int | None = None) -> bytes | bytearray | None:
        """Whole batches below `limit` (default: the high watermark) from `offset` if memory
        holds them; None if the store must be read (read_stored). Raises OffsetOutOfRange
        outside [start, end]."""
        if not self.start_offset <= offset <= self.end_offset:
            raise OffsetOutOfRange(f"offset {offset} outside [{self.start_offset}, {self.end_offset}]")
        data = self.tail.read(offset, max_bytes, self.high_watermark if limit is None else limit)
        if data is not None:
            self.pool.read(self.tail)
        return data

    def read_stored(self, offset: int, max_bytes: int, limit: int) -> Buffer:
        """Worker thread: whole batches from the store, none reaching past `limit` (C when
        the read was asked for; a flush may have written more since)."""
        log, lock = self._log_state
        with lock:
            data = log.read(offset, max_bytes)
            if log.end_offset <= limit:
                return data
        end = 0
        for position, header in iter_batches(data):
            if header.next_offset > limit:
                break
            end = position + header.size
        return memoryview(data)[:end]

    def batch_at_time(self, timestamp_ms: int) -> bytes | None:
        """The first persisted batch whose max_timestamp >= timestamp_ms."""
        log, lock = self._log_state
        with lock:
            return log.batch_at_time(timestamp_ms)

    def max_timestamp_batch(self) -> tuple[int, bytes | None]:
        """The largest persisted timestamp and the first batch that carries it."""
        log, lock = self._log_state
        with lock:
            if log.max_timestamp_offset < 0:
                return -1, None
            return log.max_timestamp, log.batch_at(log.max_timestamp_offset)

    def delete_records(self, before_offset: int) -> int:
        """Make offsets below before_offset (at most C) unreadable; returns the new start."""
        if before_offset > self.checkpoint:
            raise OffsetOutOfRange(f"cannot delete up to {before_offset}, the high watermark is {self.checkpoint}")
        log, lock = self._log_state
        with lock:
            return log.delete_records(before_offset)

    def apply_retention(self) -> int:
        """Worker thread: delete the segments retention condemns; returns how many."""
        log, lock = self._log_state
        with lock:
            return 0 if self.closed else log.apply_retention()

    def compact(self, map_bytes: int) -> int:
        """Worker thread: one compaction pass if the log is due one (engine/log/compaction.py),
        its key map at most `map_bytes`; the lock is held to plan and to swap, not while
        segments are rewritten. Returns the segments swapped in."""
        log, lock = self._log_state
        with lock:
            work = None if self.closed else log.compaction_plan()
            if work is None:
                return 0
            producers = log.producers_last()
        try:
            done, reached = rewrite(work, producers, log.config, log.now_ms(), map_bytes)
        except FileNotFoundError:
            return 0  # retention deleted a segment meanwhile: the next round plans again
        with lock:
            if self.closed or self._log_state[0] is not log:
                for rewritten in done:
                    discard(log.store, rewritten)
                return 0
            self.transactions.forget(entry for rewritten in done if rewritten.new is not None
                                     for entry in set(rewritten.old.aborted) - set(rewritten.new.aborted))
            return log.swap_cleaned(done, reached)

    def end_offset_for(self, session: int) -> tuple[int, int]:
        return self.history.end_offset_for(session, self.end_offset)

    def close(self) -> None:
        """Event loop: stop taking writes and fail whoever waits for C; what is not persisted
        is dropped (the persister drains first on a graceful stop). `close_log` then closes
        the files, off the loop."""
        if self.closed:
            return
        self.closed = True
        self.pool.forget(self.tail, self.tail.unpersisted_bytes)
        for _, future in self._checkpoint_waiters:
            if not future.done():
                future.set_exception(PartitionClosed(f"{self.path} closed before the write was persisted"))
        self._checkpoint_waiters.clear()

    def close_log(self) -> None:
        """Worker thread, after `close`: close the log's files (store calls), unless another
        node took the partition over meanwhile: its files are that node's now."""
        log, lock = self._log_state
        if lock.acquire(timeout=CLOSE_WAIT_S):
            try:
                if claimed_after(self.store, self.path, self.session):
                    log.abandon()
                    logger.warning("%s: taken over by another node; its files are left to it", self.path)
                    return
                log.close()
            finally:
                lock.release()
            self._publish_final()
        else:
            logger.warning("%s: a store call never returned; closing without a clean shutdown", self.path)

    def discard_log(self) -> None:
        """Worker thread, after `close`, when the partition's topic is being deleted: close
        the log's open file only (Log.discard); the files go with the topic. A file another
        node took over meanwhile may refuse the close, which no longer matters."""
        log, lock = self._log_state
        if not lock.acquire(timeout=CLOSE_WAIT_S):
            logger.warning("%s: a store call never returned; leaving its files to the topic's deletion", self.path)
            return
        try:
            log.discard()
        except OSError as error:
            logger.info("closing %s of a deleted topic: %s", self.path, error)
        finally:
            lock.release()

    def _publish_final(self) -> None:
        """On close: publish the last C unless it is published already (or the store hangs)."""
        final = self.to_publish()  # closed: only a late flush result may still move C, on the loop
        if final == (self._published_file or (0, 0)) or not self._publish_lock.acquire(timeout=CLOSE_WAIT_S):
            return
        try:
            self._write_published(*final)
        except OSError as error:
            logger.warning("%s: could not publish the final checkpoint %d: %s", self.path, self.checkpoint, error)
        finally:
            self._publish_lock.release()


def _copy(state: ProducerState) -> ProducerState:
    return ProducerState.from_bytes(state.to_bytes(0))[1]


def close_logs(partitions: Sequence[Partition], discard: bool = False) -> list[BaseException | None]:
    """Worker thread, after each one's `close`: close the partitions' files CLOSING_THREADS at
    once, and return each one's error (None once closed). On HDFS a partition's close seals
    its segment (two index files written and closed, then the log closed) and mostly waits
    for the NameNode (about half a second): one after another, a thousand partitions took
    about 25 minutes to stop, and deleting a bench's 60 partitions outlasted DeleteTopics'
    two-minute timeout. With `discard` (their topic is being deleted) only each log's open
    file is closed (discard_log): 5,000 partitions on HDFS took 1.7 s instead of about two
    minutes."""
    if not partitions:
        return []
    closers = Workers(min(CLOSING_THREADS, len(partitions)), "martlet-close")
    try:
        futures = [closers.call(partition.discard_log if discard else partition.close_log, f"closing {partition.path}",
                                CLOSE_S, abandoned=partition.log.abandon) for partition in partitions]
        wait(futures)  # each has a deadline: a close stuck in the store leaves its files to the next open
    finally:
        closers.shutdown()
    return [future.exception() for future in futures]
