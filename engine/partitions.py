"""The partitions service: every read and write of a partition goes through here.

Callers name a partition by (topic, index) and never hold a `Partition`. That keeps three
rules in one place:
- ownership: a partition this node does not serve is refused with NotServedHere (in a
  cluster another broker holds it; the embedded node serves every partition it has open);
- threads: cheap memory work runs on the event loop, anything that may touch the store
  (reads below the memory tail, lookups by time, DeleteRecords, retention) on worker threads;
- durability: which writes are answered only once the checkpoint C covers them.

Durability rule: `Durability.PERSISTED` writes wait for C; `Durability.MEMORY` writes are
answered once in memory, except on a topic whose flush mode is "sync", where they wait for C
too (RocketMQ's sync flush). The gateway maps Kafka's acks onto these two words.
"""

from __future__ import annotations

import asyncio
import enum
import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from ..records.decode import record_times
from ..records.header import BatchHeader, Buffer, record_count
from .errors import DuplicateBatch, NewerSession, NotServedHere, OlderSession, PartitionClosed, UnknownPartition
from .log.producers import ActiveProducer
from .partition.memory import MemoryPool
from .partition.partition import Partition
from .partition.persister import Persister
from .store.workers import Workers
from .types import TopicPartition

T = TypeVar("T")
# Deadlines of the store calls made on the reader threads (engine/store/workers.py).
READ_S = 30.0  # a read of stored batches, a lookup by time (a few store reads)
RETENTION_S = 300.0  # one retention pass over every partition here (deletes of whole segments)
COMPACTION_S = 3600.0  # one compaction pass (rewrites segments of every compacted log here)


class Durability(enum.Enum):
    MEMORY = "memory"  # answered once in memory (unless the topic flushes synchronously)
    PERSISTED = "persisted"  # answered once the checkpoint C covers the write


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """A snapshot of one partition's offsets, taken on the event loop."""

    session: int  # S; Kafka's leader epoch
    start_offset: int
    checkpoint: int  # C: every offset below it is persisted
    end_offset: int  # the next offset to assign
    high_watermark: int  # consumers read below it: C, or end_offset on a topic with visibility "memory"
    last_stable: int  # read-committed consumers read below it: the first offset of an undecided transaction, or the high watermark
    unpersisted_bytes: int = 0  # taken in, not yet on the store (memory only)


class Fetched(NamedTuple):  # a tuple, as Appended
    """One partition's part of a fetch: the records and the offsets they were read under."""

    records: Buffer
    high_watermark: int
    last_stable: int
    start_offset: int
    aborted: list[tuple[int, int]]  # read-committed: (producer id, first offset) to skip; else empty


class Appended(NamedTuple):  # a tuple: a frozen dataclass sets each field through object.__setattr__
    base_offset: int
    start_offset: int
    must_persist: bool  # the answer waits until C covers base_offset (see the module header)
    duplicate: bool = False  # an idempotent producer's resend: the batch was stored before, here


Owns = Callable[[TopicPartition], bool]


class Partitions:
    def __init__(self, persister: Persister, pool: MemoryPool, read_threads: int,
                 owns: Owns = lambda _tp: True) -> None:
        self.persister = persister
        self.pool = pool
        self.owns = owns
        # False while this node may have been fenced without knowing (a cluster member frozen
        # past its session): appends are then refused as NotServedHere.
        self.may_append: Callable[[], bool] = lambda: True
        self._readers = Workers(read_threads, "martlet-read")
        # Keyed by TopicPartition; a plain (topic, index) tuple finds the same entry.
        self._open: dict[tuple[str, int], Partition] = {}
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        # Partitions this node is opening (a cluster moved them here): set once each is open or given up.
        self._expected: dict[TopicPartition, asyncio.Event] = {}
        # Bytes taken in and handed out per partition since start (a cluster reports load from
        # them), and records (the metrics): plain dict updates on the hot path.
        self.bytes_in: dict[TopicPartition, int] = {}
        self.bytes_out: dict[TopicPartition, int] = {}
        self.records_in: dict[TopicPartition, int] = {}
        self.records_out: dict[TopicPartition, int] = {}

    # -- reading state

    def info(self, tp: TopicPartition) -> PartitionInfo:
        partition = self._get(tp)
        return _info(partition)

    def infos(self) -> dict[TopicPartition, PartitionInfo]:
        """A snapshot of every partition served here (the HTTP API and metrics; event loop)."""
        return {TopicPartition(*key): _info(partition) for key, partition in list(self._open.items())}

    def session_if_open(self, topic: str, index: int) -> int | None:
        """S of a partition this node has open, else None (Metadata: held elsewhere or not
        loaded yet). A plain tuple finds the partition without building a key."""
        partition = self._open.get((topic, index))
        return None if partition is None else partition.session

    def sizes(self) -> dict[TopicPartition, int]:
        """Bytes stored in the log of every open partition (DescribeLogDirs). Memory only:
        the segments' sizes as this node tracks them, the unpersisted tail not included."""
        return {TopicPartition(*key): partition.log.size_bytes() for key, partition in list(self._open.items())}

    def producers(self, tp: TopicPartition) -> list[ActiveProducer]:
        """The producers the partition knows of, memory tail included (DescribeProducers)."""
        return self._get(tp).producers.active()

    def in_transaction(self, tp: TopicPartition, producer_id: int) -> bool:
        """The producer has a transaction open in the partition (a batch of it, no marker yet)."""
        return producer_id in self._get(tp).producers.open

    def end_offset_for(self, tp: TopicPartition, session: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest session <= `session`, the offset it ended at)."""
        return self._get(tp).end_offset_for(session)

    # -- writing

    def append(self, tp: TopicPartition, batch: bytearray, header: BatchHeader, durability: Durability,
               version: int | None = None, session: int | None = None, current_version: int = 0) -> Appended:
        """Take a batch into memory at the partition's end; see the module header for when
        its answer must wait (`wait_persisted`)."""
        partition = self._get(tp)
        if not self.may_append():
            raise NotServedHere(f"partition {tp.partition} of {tp.topic!r}: this node may have lost it")
        try:
            offset = partition.append(batch, header, version, session, current_version)
        except DuplicateBatch as duplicate:
            return self._appended(partition, duplicate.base_offset, durability, duplicate=True)
        self.persister.schedule(partition)
        self.bytes_in[tp] = self.bytes_in.get(tp, 0) + header.size
        self.records_in[tp] = self.records_in.get(tp, 0) + header.record_count
        if partition.visibility == "memory":
            self._wake(tp)  # readers may have it now, before it is persisted
        return self._appended(partition, offset, durability)

    @staticmethod
    def _appended(partition: Partition, offset: int, durability: Durability, duplicate: bool = False) -> Appended:
        must_persist = durability is Durability.PERSISTED or partition.sync_flush
        return Appended(offset, partition.start_offset, must_persist and partition.checkpoint <= offset, duplicate)

    def append_control(self, tp: TopicPartition, producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int, timestamp_ms: int) -> int:
        """Append a commit or abort marker of a producer's transaction; returns its offset.
        Readers see it once persisted, as any batch."""
        partition = self._get(tp)
        offset = partition.append_control(producer_id, producer_epoch, commit, coordinator_epoch, timestamp_ms)
        self.persister.schedule(partition)
        if partition.visibility == "memory":
            self._wake(tp)
        return offset

    async def wait_persisted(self, tp: TopicPartition, offset: int) -> None:
        """Return once C > offset; PartitionClosed if the partition closes first."""
        await self._get(tp).wait_persisted(offset)

    def has_room(self) -> bool:
        """False while unpersisted data fills the memory budget (producers must wait)."""
        return self.pool.has_room()

    async def wait_for_room(self) -> None:
        await self.pool.wait_for_room()

    # -- reading data

    async def read(self, tp: TopicPartition, offset: int, max_bytes: int, committed: bool = False) -> Buffer:
        """Whole batches below the high watermark from `offset` (below the last stable offset
        if `committed`): memory, else the store (which holds what is below C; above C
        everything is still in memory)."""
        partition = self._get(tp)
        data = self._from_memory(tp, partition, offset, max_bytes, committed)
        if data is None:
            data = await self._from_store(tp, partition, offset, max_bytes, committed)
        return data

    def _from_memory(self, tp: TopicPartition, partition: Partition, offset: int, max_bytes: int,
                     committed: bool) -> Buffer | None:
        """`read` when memory holds the batches (no coroutine: most reads); None when it does not."""
        data = partition.read_memory(offset, max_bytes, partition.last_stable if committed else partition.high_watermark)
        if data:
            self._read_out(tp, data)
        return data

    async def _from_store(self, tp: TopicPartition, partition: Partition, offset: int, max_bytes: int,
                          committed: bool) -> Buffer:
        limit = partition.last_stable if committed else partition.high_watermark
        data = await self._off_loop(partition.read_stored, offset, max_bytes, min(limit, partition.checkpoint))
        self._read_out(tp, data)
        return data

    def _read_out(self, tp: TopicPartition, data: Buffer) -> None:
        if data:
            self.bytes_out[tp] = self.bytes_out.get(tp, 0) + len(data)
            self.records_out[tp] = self.records_out.get(tp, 0) + record_count(data)

    async def fetch(self, tp: TopicPartition, offset: int, session: int, max_bytes: int, *,
                    first: bool, committed: bool) -> Fetched:
        """A consumer's read of one partition, in one call: whole batches from `offset` up to
        `max_bytes` (read below the last stable offset if `committed`, with the aborted
        transactions they overlap), and the offsets they were read under. `session` is the S
        the reader names (-1: any), refused with OlderSession or NewerSession when it is not
        the current one. The `first` partition of an answer gets its first batch whole even
        past `max_bytes`; any other gets nothing rather than more than `max_bytes`."""
        partition = self._get(tp)
        if session >= 0 and session != partition.session:
            raise OlderSession(tp) if session < partition.session else NewerSession(tp)
        records: Buffer = b""
        if max_bytes > 0 or first:
            found = self._from_memory(tp, partition, offset, max(max_bytes, 1), committed)
            if found is None:
                found = await self._from_store(tp, partition, offset, max(max_bytes, 1), committed)
                partition = self._get(tp)  # after the read: the high watermark covers what it returned
            records = found
            if len(records) > max_bytes and not first:
                records = b""
        aborted = self.aborted_transactions(tp, offset, records) if committed else []
        return Fetched(records, partition.high_watermark, partition.last_stable, partition.start_offset, aborted)

    def aborted_transactions(self, tp: TopicPartition, offset: int, data: Buffer) -> list[tuple[int, int]]:
        """(producer id, first offset) of each aborted transaction a read-committed reader of
        `data` (what `read` returned from `offset`) must skip: those ending at or after
        `offset` that begin below the end of `data`. Memory only: the partition keeps them
        all (engine/partition/transactions.py)."""
        partition = self._get(tp)
        found = partition.transactions.overlapping(offset, data, partition.start_offset)
        return [(entry.producer_id, entry.first_offset) for entry in found]

    async def wait_for_data(self, watched: Iterable[tuple[TopicPartition, int]], timeout_ms: int,
                            committed: bool = False) -> None:
        """Return once any watched partition's high watermark (last stable offset if
        `committed`) passes its offset, or on timeout."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = []
        for tp, offset in watched:
            partition = self._open.get(tp)
            if partition is None or (partition.last_stable if committed else partition.high_watermark) > offset:
                return
            keys.append(tp)
            self._waiters.setdefault(tp, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout_ms / 1000)
        except TimeoutError:
            pass
        finally:
            for tp in keys:
                self._waiters.get(tp, set()).discard(future)

    async def offset_at_time(self, tp: TopicPartition, timestamp_ms: int) -> tuple[int, int]:
        """(timestamp, offset) of the first record at or after `timestamp_ms` (>= 0) from the log
        start, (-1, -1) if none: ListOffsets' rule, which the HTTP message browser follows too."""
        batch = await self.batch_at_time(tp, timestamp_ms)
        if batch is None:
            return -1, -1
        start = self._get(tp).start_offset
        for offset, record_time in record_times(batch):
            if record_time >= timestamp_ms and offset >= start:
                return record_time, offset
        return -1, -1

    async def batch_at_time(self, tp: TopicPartition, timestamp_ms: int) -> bytes | None:
        """The first persisted batch whose max timestamp is >= timestamp_ms (a store read)."""
        return await self._off_loop(self._get(tp).batch_at_time, timestamp_ms)

    async def max_timestamp_batch(self, tp: TopicPartition) -> tuple[int, bytes | None]:
        """The largest persisted timestamp and the first batch that carries it."""
        return await self._off_loop(self._get(tp).max_timestamp_batch)

    async def delete_records(self, tp: TopicPartition, before_offset: int) -> int:
        """Make offsets below `before_offset` (-1: the checkpoint C) unreadable; the new
        start offset. OffsetOutOfRange past C."""
        partition = self._get(tp)
        before = partition.checkpoint if before_offset == -1 else before_offset
        return await self._off_loop(partition.delete_records, before)

    # -- the engine's side: opening, closing, retention

    def add(self, tp: TopicPartition, partition: Partition) -> None:
        """Event loop: serve a partition opened (on a worker thread) by the topics service."""
        partition.on_checkpoint = lambda _partition: self._wake(tp)
        self._open[tp] = partition
        self.stop_expecting(tp)

    def expect(self, tp: TopicPartition) -> None:
        """Event loop: `tp` is being opened here; `wait_opened` waits for it."""
        if tp not in self._open:
            self._expected.setdefault(tp, asyncio.Event())

    def stop_expecting(self, tp: TopicPartition) -> None:
        event = self._expected.pop(tp, None)
        if event is not None:
            event.set()

    def opening(self) -> bool:
        """True while any partition is being opened here (the hot path checks this first)."""
        return bool(self._expected)

    async def wait_opened(self, tps: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return once none of `tps` is still being opened here, or after `timeout_s`. A
        producer's requests for a partition moving here wait rather than being refused: on one
        connection a refused request followed by an accepted one (the open finished in
        between) would read as a gap in the producer's sequence numbers."""
        events = [event for tp in tps if (event := self._expected.get(tp)) is not None]
        if events:
            try:
                await asyncio.wait_for(asyncio.gather(*(event.wait() for event in events)), timeout_s)
            except TimeoutError:
                pass

    def remove(self, tp: TopicPartition) -> Partition:
        """Event loop: stop serving a partition; the caller closes it off the loop."""
        partition = self._open.pop(tp)
        self._wake(tp)
        return partition

    async def persist_now(self, partition: Partition, timeout_s: float) -> bool:
        """Persist everything `partition` took in (it no longer takes writes); False if the
        store did not take it within `timeout_s`."""
        last = partition.end_offset - 1
        if partition.checkpoint > last:
            return True
        self.persister.schedule(partition)
        try:
            await asyncio.wait_for(partition.wait_persisted(last), timeout_s)
        except (TimeoutError, PartitionClosed):
            return False
        return True

    def served(self) -> list[tuple[tuple[str, int], Partition]]:
        """Every partition served here, with its key (a snapshot, safe from another thread)."""
        return list(self._open.items())

    def opened(self) -> Iterator[Partition]:
        return iter(list(self._open.values()))

    def get_open(self, tp: TopicPartition) -> Partition | None:
        """The engine's own access (reconfiguring a topic); never handed to the gateway."""
        return self._open.get(tp)

    async def apply_retention(self) -> int:
        """Delete the segments retention condemns, on a reader thread; returns how many."""
        return await self._off_loop(self._apply_retention_now, deadline_s=RETENTION_S)

    def _apply_retention_now(self) -> int:
        """Reader thread."""
        return sum(partition.apply_retention() for partition in self.opened())

    async def compact(self, map_bytes: int) -> int:
        """One compaction pass over every compacted log that is due one, on a reader thread,
        each mapping keys in at most `map_bytes`; returns how many segments were rewritten. A
        partition whose log changed forgets the persisted batches it held in memory, so reads
        go to the compacted segments."""
        cleaned = await self._off_loop(self._compact_now, map_bytes, deadline_s=COMPACTION_S)
        for partition in cleaned:
            self.pool.drop(partition.tail)
        return sum(cleaned.values())

    def _compact_now(self, map_bytes: int) -> dict[Partition, int]:
        """Reader thread."""
        swapped = {partition: partition.compact(map_bytes) for partition in self.opened()}
        return {partition: count for partition, count in swapped.items() if count}

    def shutdown(self) -> None:
        self._readers.shutdown()

    async def _off_loop(self, call: Callable[..., T], *args: object, deadline_s: float = READ_S) -> T:
        """Run a store call on a reader thread; StoreTimeout past `deadline_s` (engine/store/workers.py)."""
        return await asyncio.wrap_future(self._readers.call(functools.partial(call, *args),
                                                            getattr(call, "__name__", "a read"), deadline_s))

    def _get(self, tp: TopicPartition) -> Partition:
        """The open partition; only partitions this node serves are open (the topics service
        opens those the cluster view gives it, and stops serving those it loses)."""
        partition = self._open.get(tp)
        if partition is not None:
            return partition
        if not self.owns(tp):
            raise NotServedHere(f"partition {tp.partition} of {tp.topic!r} is not served by this node")
        raise UnknownPartition(f"topic {tp.topic!r} has no partition {tp.partition}")

    def _wake(self, tp: TopicPartition) -> None:
        for future in self._waiters.pop(tp, ()):
            if not future.done():
                future.set_result(None)



def _info(partition: Partition) -> PartitionInfo:
    return PartitionInfo(partition.session, partition.start_offset, partition.checkpoint, partition.end_offset,
                         partition.high_watermark, partition.last_stable, partition.tail.unpersisted_bytes)
