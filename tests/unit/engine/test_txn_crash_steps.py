"""A transaction's end (commit or abort) survives a crash at every step (issue 14, point 2).

The engine runs over a store that dies at its n-th changing call (a write, sync, open,
rename, truncate or delete): from then on nothing reaches it, as after a kill -9. A new
engine then opens what the store holds. Whatever n, the transaction ends whole:
- the PrepareCommit record was written: the restart writes the markers again and the
  transaction completes as a commit, its offsets applied;
- it was not: the transaction is still ongoing after the restart and is aborted at its
  timeout, its offsets dropped.
Either way every partition holds exactly one outcome for it (a commit marker everywhere, or
an abort marker everywhere listed among the aborted transactions), nothing is left open
below the end (the last stable offset reaches the end), and the producer id goes on with a
bumped epoch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from martlet.engine.clock import Clock, ManualClock, SystemClock
from martlet.engine.log.producers import end_marker
from martlet.engine.partitions import Durability
from martlet.engine.service import Engine
from martlet.engine.settings import EngineSettings
from martlet.engine.store.memory import MemoryStore
from martlet.engine.transactions.types import TxnError, TxnState
from martlet.engine.types import CommittedOffset, TopicPartition
from martlet.records.build import NewRecord, Producer, build_batch
from martlet.records.control import ControlType
from martlet.records.header import iter_batches, parse_header

TIMEOUT_MS = 60_000
WAIT_S = 20.0
TPS = (TopicPartition("out", 0), TopicPartition("out", 1))
SOURCE = TopicPartition("in", 0)
GROUP = "g"
TXN_ID = "tx"
CALLS_MAX = 12  # an end over two partitions and one group makes five changing calls today


class Dead(OSError):
    """The process died at this call: it did not reach the store."""


class DyingStore:
    """A MemoryStore that dies at its n-th changing call once armed. That call fails; every
    later change is dropped without a word, as if the process had stopped there (so the
    engine's own close after it reaches nothing either). Writes through files opened before
    count too: the transaction log and the partitions write through open files."""

    CHANGES = ("open_append", "rename", "delete", "truncate", "create_exclusive", "mkdir")

    def __init__(self, inner: MemoryStore) -> None:
        self.inner, self.calls, self.die_at, self.dead = inner, 0, -1, False

    def arm(self, die_at: int) -> None:
        self.calls, self.die_at = 0, die_at

    def reaches(self, what: str) -> bool:
        """Whether a change reaches the store: False once dead, Dead at the dying call."""
        if self.dead:
            return False
        self.calls += 1
        if self.calls == self.die_at:
            self.dead = True
            raise Dead(f"died at call {self.calls}: {what}")
        return True

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.CHANGES:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if not self.reaches(f"{name}{args[:1]}"):
                return DyingFile(self, None, args[0]) if name == "open_append" else None
            made = attr(*args, **kwargs)
            return DyingFile(self, made, args[0]) if name == "open_append" else made
        return call


class DyingFile:
    """An open file of a DyingStore; `inner` None: opened after the death (reaches nothing)."""

    def __init__(self, store: DyingStore, inner: Any, path: str) -> None:
        self.store, self.inner, self.path, self.dropped = store, inner, path, 0

    @property
    def size(self) -> int:
        return (int(self.inner.size) if self.inner is not None else 0) + self.dropped

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.inner is not None and self.store.reaches(f"write {self.path}"):
            self.inner.write(data)
        else:
            self.dropped += len(data)

    def sync(self) -> None:
        if self.inner is not None and self.store.reaches(f"sync {self.path}"):
            self.inner.sync()

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()

    def abandon(self) -> None:
        if self.inner is not None:
            self.inner.abandon()


def settings() -> EngineSettings:
    return EngineSettings(drain_ms=200)


async def opened(store: Any, clock: Clock | None) -> Engine:
    engine = Engine(store, settings(), clock)
    engine.open()
    engine.start_background()
    return engine


async def transaction_to_commit(engine: Engine) -> tuple[int, int]:
    """Topics, then an ongoing transaction over both partitions of `out` with offsets of
    group g staged; returns (producer id, epoch). Everything here is persisted."""
    await engine.topics.create("out", 2, {})
    source = await engine.topics.create("in", 1, {})
    answer = await engine.transactions.init_producer_id(TXN_ID, TIMEOUT_MS)
    assert answer.error is TxnError.NONE
    pid, epoch = answer.producer_id, answer.epoch
    assert (await engine.transactions.add_partitions(TXN_ID, pid, epoch, list(TPS))).error is TxnError.NONE
    for tp in TPS:
        batch = build_batch([NewRecord(None, b"v%d" % n, 0) for n in range(3)],
                            producer=Producer(pid, epoch, 0), transactional=True)
        appended = engine.partitions.append(tp, batch, parse_header(batch), Durability.PERSISTED)
        await engine.partitions.wait_persisted(tp, appended.base_offset)
    assert (await engine.transactions.add_offsets(TXN_ID, pid, epoch, GROUP)).error is TxnError.NONE
    uid = source.resource.uid.hex
    await engine.groups.commit_in_txn(GROUP, pid, [("in", uid, 0, CommittedOffset(42, -1, None, 0, uid))])
    return pid, epoch


async def end(engine: Engine, dying: DyingStore, pid: int, epoch: int, commit: bool) -> None:
    """EndTxn, then until its markers are settled or the store died (a dead process
    waits for nothing: what it had written is all the restart gets)."""
    await engine.transactions.end_txn(TXN_ID, pid, epoch, commit)
    settled = asyncio.ensure_future(engine.transactions.markers_settled())
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not settled.done() and not dying.dead:
        assert asyncio.get_running_loop().time() < deadline, "the commit's markers neither settled nor died"
        await asyncio.wait([settled], timeout=0.01)
    settled.cancel()


async def markers(engine: Engine, tp: TopicPartition, pid: int) -> list[ControlType]:
    """The end markers of `pid` in the partition, in offset order."""
    data = await engine.partitions.read(tp, 0, 1 << 20)
    found = []
    for position, header in iter_batches(data):
        marker = end_marker(bytes(data[position : position + header.size]), header)
        if marker is not None and header.producer_id == pid:
            found.append(marker.control_type)
    return found


async def settle(engine: Engine, clock: ManualClock) -> TxnState:
    """After the restart: markers of a prepared transaction written; an ongoing one aborted
    at its timeout. The transaction's final state."""
    await asyncio.wait_for(engine.transactions.markers_settled(), WAIT_S)
    meta = engine.transactions.describe(TXN_ID)
    assert meta is not None
    if meta.state is TxnState.ONGOING:
        clock.advance(TIMEOUT_MS + 1)
        await engine.transactions.tick()
        await asyncio.wait_for(engine.transactions.markers_settled(), WAIT_S)
    assert await engine.flush(WAIT_S)
    meta = engine.transactions.describe(TXN_ID)
    assert meta is not None
    return meta.state


async def check_whole(engine: Engine, pid: int, state: TxnState) -> None:
    committed = state is TxnState.COMPLETE_COMMIT
    assert state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
    for tp in TPS:
        kinds = await markers(engine, tp, pid)
        # A marker written before the crash is written again after it: a second one is a no-op.
        assert kinds and set(kinds) == {ControlType.COMMIT if committed else ControlType.ABORT}, (tp, kinds)
        info = engine.partitions.info(tp)
        assert info.last_stable == info.high_watermark == info.end_offset
        data = await engine.partitions.read(tp, 0, 1 << 20, committed=True)
        aborted = engine.partitions.aborted_transactions(tp, 0, data)
        assert (aborted == []) == committed, aborted
    offset = engine.groups.committed(GROUP, "in", 0, engine.topics.find("in").resource.uid.hex)  # type: ignore[union-attr]
    assert (offset.offset if offset is not None else None) == (42 if committed else None)
    assert not engine.groups.unstable(GROUP, "in", 0)


async def crash_during_end(die_at: int, commit: bool) -> tuple[int, TxnState]:
    """Returns the store calls the EndTxn made before it was stopped and the outcome."""
    inner = MemoryStore()
    dying = DyingStore(inner)
    # The dying process keeps real time, so its stop (which reaches nothing) ends after
    # drain_ms; the restart's clock goes on from there and is moved by hand.
    engine = await opened(dying, SystemClock())
    pid, epoch = await transaction_to_commit(engine)
    dying.arm(die_at)
    try:
        await end(engine, dying, pid, epoch, commit)
    finally:
        dying.dead = True  # the process is gone: its close reaches nothing
        await engine.close()
    calls = dying.calls
    clock = ManualClock(SystemClock().now_ms())
    again = await opened(inner, clock)
    try:
        state = await settle(again, clock)
        await check_whole(again, pid, state)
        answer = await again.transactions.init_producer_id(TXN_ID, TIMEOUT_MS)
        assert answer.error is TxnError.NONE and answer.producer_id == pid and answer.epoch > epoch
    finally:
        await again.close()
    return calls, state


def store_calls(commit: bool) -> int:
    """The changing store calls of an EndTxn and its markers, none failing."""
    calls, state = asyncio.run(asyncio.wait_for(crash_during_end(-1, commit), WAIT_S * 3))
    assert state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
    return calls


@pytest.fixture(scope="module")
def end_calls() -> Iterator[dict[bool, int]]:
    yield {commit: store_calls(commit) for commit in (True, False)}


def test_the_crash_table_covers_every_store_call_of_an_end(end_calls: dict[bool, int]) -> None:
    # The Prepare record, a marker in each partition, the group shard's end of the staged
    # offsets, the Complete record: five today.
    assert all(0 < calls <= CALLS_MAX for calls in end_calls.values()), end_calls


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize("die_at", range(1, CALLS_MAX + 1))
def test_a_crash_at_any_store_call_of_an_end_leaves_the_transaction_whole(die_at: int, commit: bool,
                                                                          end_calls: dict[bool, int]) -> None:
    if die_at > end_calls[commit]:
        pytest.skip("the end makes fewer store calls")
    calls, state = asyncio.run(asyncio.wait_for(crash_during_end(die_at, commit), WAIT_S * 3))
    assert calls == die_at
    # The first changing call is the Prepare record: dying there leaves the transaction
    # ongoing, aborted at its timeout; any later one finds it prepared and completes it.
    committed = commit and die_at > 1
    assert state is (TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT)
