"""Read committed (KIP-98), end to end through the engine: random interleavings of
transactional batches from a few producers, commits, aborts, plain batches, flushes, segment
rolls (small segments), memory drops (cold reads) and reopens (clean or after a crash). A
model says which records a read-committed consumer may see; reading the partition below its
last stable offset in small fetches, each filtered by the consumer's rule with the aborted
transactions that fetch was given, yields exactly those records, in order."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.engine.clock import ManualClock
from martlet.engine.log.producers import end_marker
from martlet.engine.partitions import Durability
from martlet.engine.service import Engine
from martlet.engine.settings import EngineSettings
from martlet.engine.store.memory import MemoryStore
from martlet.engine.types import TopicPartition
from martlet.records.build import NewRecord, Producer, build_batch
from martlet.records.control import ControlType
from martlet.records.decode import decode_records
from martlet.records.header import iter_batches, parse_header

NOW_MS = 1_700_000_000_000
TP = TopicPartition("t", 0)
PRODUCERS = (1, 2, 3)
WAIT_S = 20.0


class SlowStore(MemoryStore):
    """Flushes on the persister's threads: C moves some time after an append, as on HDFS."""

    slow_writes = True


@dataclass
class Txn:
    first: int
    records: list[bytes] = field(default_factory=list)
    marker: int | None = None
    committed: bool = False


@dataclass
class Model:
    """What was appended, in offset order: plain records and transactions."""

    entries: list[tuple[int, bytes, Txn | None]] = field(default_factory=list)  # (offset, value, its txn)
    open: dict[int, Txn] = field(default_factory=dict)
    txns: list[Txn] = field(default_factory=list)
    sequences: dict[int, int] = field(default_factory=dict)
    values: int = 0

    def new_values(self, count: int) -> list[bytes]:
        self.values += count
        return [b"%d" % n for n in range(self.values - count, self.values)]

    def last_stable(self, checkpoint: int) -> int:
        """The first offset of a transaction open as of C, else C."""
        undecided = [t.first for t in self.txns if t.marker is None or t.marker >= checkpoint]
        return min([checkpoint, *undecided])

    def visible(self, below: int) -> list[bytes]:
        return [value for offset, value, txn in self.entries
                if offset < below and (txn is None or txn.committed)]


def consumer_view(data: bytes | bytearray | memoryview, aborted: list[tuple[int, int]]) -> list[bytes]:
    """The records a read-committed consumer keeps of one fetch (the Java consumer's rule)."""
    queue = sorted(aborted, key=lambda entry: entry[1])
    aborted_producers: set[int] = set()
    kept = []
    for position, header in iter_batches(data):
        batch = bytes(data[position : position + header.size])
        if header.producer_id >= 0:
            while queue and queue[0][1] <= header.last_offset:
                aborted_producers.add(queue.pop(0)[0])
            marker = end_marker(batch, header)
            if marker is not None and marker.control_type == ControlType.ABORT:
                aborted_producers.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in aborted_producers:
                continue
        if not header.is_control:
            kept += [record.value or b"" for record in decode_records(batch)]
    return kept


operations = st.one_of(
    st.tuples(st.just("data"), st.sampled_from(PRODUCERS), st.integers(1, 3)),
    st.tuples(st.just("plain"), st.integers(1, 3)),
    st.tuples(st.sampled_from(["commit", "abort"]), st.sampled_from(PRODUCERS)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("drop")),
    st.tuples(st.just("reopen"), st.booleans()),
    st.tuples(st.just("check"), st.integers(60, 600)),
)


class Run:
    def __init__(self, segment_bytes: int) -> None:
        self.store = SlowStore()
        self.segment_bytes = segment_bytes
        self.model = Model()
        self.engine: Engine | None = None

    async def open(self) -> Engine:
        engine = Engine(self.store, EngineSettings(), ManualClock(NOW_MS))
        engine.open()
        engine.pool.bind(asyncio.get_running_loop())
        if engine.topics.find("t") is None:
            await engine.topics.create("t", 1, {"segment_bytes": self.segment_bytes})
        self.engine = engine
        return engine

    async def apply(self, op: tuple[Any, ...]) -> None:
        engine = self.engine
        assert engine is not None
        kind = op[0]
        if kind == "data":
            self.data(op[1], op[2])
        elif kind == "plain":
            self.plain(op[1])
        elif kind in ("commit", "abort"):
            self.marker(op[1], kind == "commit")
        elif kind == "flush":
            assert await engine.flush(WAIT_S)
        elif kind == "drop":
            engine.pool.drop(engine.partitions.get_open(TP).tail)
        elif kind == "reopen":
            await self.reopen(crash=op[1])
        else:
            await self.check(op[1])

    def data(self, pid: int, count: int) -> None:
        model = self.model
        values = model.new_values(count)
        sequence = model.sequences.get(pid, 0)
        batch = build_batch([NewRecord(None, v, NOW_MS) for v in values], producer=Producer(pid, 0, sequence),
                            transactional=True)
        offset = self.append(batch)
        model.sequences[pid] = sequence + count
        txn = model.open.get(pid)
        if txn is None:
            txn = model.open[pid] = Txn(offset)
            model.txns.append(txn)
        model.entries += [(offset + i, value, txn) for i, value in enumerate(values)]

    def plain(self, count: int) -> None:
        values = self.model.new_values(count)
        offset = self.append(build_batch([NewRecord(None, v, NOW_MS) for v in values]))
        self.model.entries += [(offset + i, value, None) for i, value in enumerate(values)]

    def append(self, batch: bytearray) -> int:
        assert self.engine is not None
        return self.engine.partitions.append(TP, batch, parse_header(batch), Durability.MEMORY).base_offset

    def marker(self, pid: int, commit: bool) -> None:
        assert self.engine is not None
        offset = self.engine.partitions.append_control(TP, pid, 0, commit, 0, NOW_MS)
        txn = self.model.open.pop(pid, None)
        if txn is not None:
            txn.marker, txn.committed = offset, commit

    async def reopen(self, crash: bool) -> None:
        engine = self.engine
        assert engine is not None
        assert await engine.flush(WAIT_S)  # what was appended is persisted: the model keeps it all
        if crash:
            engine.partitions.get_open(TP).log.abandon()  # no snapshot, no index files, no clean shutdown
        await engine.close()
        await self.open()

    def check_last_stable(self) -> int:
        """The partition's LSO (and the one it would publish) is the model's, for its C."""
        assert self.engine is not None
        info = self.engine.partitions.info(TP)
        last_stable = self.model.last_stable(info.checkpoint)
        assert info.last_stable == last_stable
        assert self.engine.partitions.get_open(TP).to_publish() == (info.checkpoint, last_stable)
        return last_stable

    async def check(self, max_bytes: int) -> None:
        """Read everything below the LSO in fetches of about max_bytes, as a consumer would.
        C (so the LSO) may move while a read waits for the store: read on until the offset
        reaches the LSO of that moment."""
        assert self.engine is not None
        partitions = self.engine.partitions
        offset, seen = partitions.info(TP).start_offset, []
        while offset < self.check_last_stable():
            data = await partitions.read(TP, offset, max_bytes, committed=True)
            seen += consumer_view(data, partitions.aborted_transactions(TP, offset, data))
            headers = [header for _, header in iter_batches(data)]
            assert headers and headers[-1].next_offset <= self.check_last_stable()
            offset = headers[-1].next_offset
        assert seen == self.model.visible(offset)


@settings(max_examples=60, deadline=None)
@given(st.integers(150, 900), st.lists(operations, max_size=40))
def test_read_committed_sees_exactly_the_committed_records(segment_bytes: int, ops: list[tuple[Any, ...]]) -> None:
    run = Run(segment_bytes)

    async def scenario() -> None:
        await run.open()
        try:
            for op in ops:
                await run.apply(op)
                run.check_last_stable()
            assert run.engine is not None and await run.engine.flush(WAIT_S)
            await run.check(250)
        finally:
            assert run.engine is not None
            await run.engine.close()

    asyncio.run(asyncio.wait_for(scenario(), WAIT_S * 3))
