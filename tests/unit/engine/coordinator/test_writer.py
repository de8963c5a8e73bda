"""The coordinator's write path (writer.py): appends on the worker thread in queue order,
memory changed on the loop only after the log, and compaction from a snapshot that keeps every
record written before it, also when a write ahead of it failed."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Awaitable, Iterator

import pytest

from martlet.engine.coordinator import writer as writer_module
from martlet.engine.coordinator.records import Registry
from martlet.engine.coordinator.shard import Shard
from martlet.engine.coordinator.writer import ShardWriter
from martlet.engine.groups import records as membership
from martlet.engine.groups.membership import ClassicGroupRecord, GroupGone
from martlet.engine.offsets.records import Commit, Remove
from martlet.engine.offsets.state import MACHINE, NAME, OffsetsState
from martlet.engine.service import MACHINES
from martlet.engine.store import MemoryStore
from martlet.engine.store.memory import MemoryAppendFile
from martlet.engine.store.workers import StoreTimeout
from martlet.engine.types import CommittedOffset, TopicPartition
from martlet.records.header import BatchHeader

PATH = "internal/group-shards/0"
REGISTRY = Registry(MACHINES)
WAIT_S_MAX = 10.0  # a gate nobody opens fails the test instead of hanging it


def value(offset: int, commit_ms: int = 0) -> CommittedOffset:
    return CommittedOffset(offset, -1, None, commit_ms, "id-t")


def commit(partition: int, offset: int, group_id: str = "g", commit_ms: int = 0) -> Commit:
    return Commit(group_id, (("t", partition, value(offset, commit_ms)),))


def new_shard(store: MemoryStore, path: str = PATH) -> Shard:
    """A shard with no log yet (made without a store call, as the runtime makes one)."""
    return Shard(store, path, lambda: 0, REGISTRY)


def reopen(store: MemoryStore, path: str = PATH) -> Shard:
    return Shard.open(store, path, lambda: 0, REGISTRY)


def offsets_of(shard: Shard) -> OffsetsState:
    state: OffsetsState = shard.state(MACHINE)
    return state


def state(shard: Shard, group_id: str = "g") -> dict[TopicPartition, CommittedOffset]:
    return dict(offsets_of(shard).groups.get(group_id, {}))


class Gate:
    """Holds every Shard.append (on the worker thread) until the test lets one through, with
    the outcome it chose: None to append, an exception to raise instead."""

    def __init__(self) -> None:
        self.outcomes: queue.Queue[BaseException | None] = queue.Queue()

    def let_through(self, *outcomes: BaseException | None) -> None:
        for outcome in outcomes:
            self.outcomes.put(outcome)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    gate = Gate()
    append = Shard.append

    def gated(self: Shard, batch: bytearray, header: BatchHeader) -> int:
        outcome = gate.outcomes.get(timeout=WAIT_S_MAX)
        if outcome is not None:
            raise outcome
        return append(self, batch, header)

    monkeypatch.setattr(Shard, "append", gated)
    yield gate


def force_compaction_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next write that settles queues a compaction, whatever the log's size."""
    due = [True]
    monkeypatch.setattr(Shard, "should_compact", lambda self, log_bytes: bool(due and due.pop()))


def test_memory_changes_only_once_the_log_has_the_record(gate: Gate) -> None:
    async def scenario() -> None:
        shard, writer = new_shard(MemoryStore()), ShardWriter()
        first, second = writer.submit(shard, commit(0, 1)), writer.submit(shard, commit(0, 2))
        assert state(shard) == {} and writer.pending(NAME, "g") == [commit(0, 1), commit(0, 2)]
        gate.let_through(None)
        await first
        assert state(shard) == {("t", 0): value(1)} and writer.pending(NAME, "g") == [commit(0, 2)]
        gate.let_through(None)
        await second
        assert state(shard) == {("t", 0): value(2)} and writer.pending(NAME, "g") == []
        await writer.close([shard])

    asyncio.run(scenario())


def test_pending_records_are_kept_by_machine_and_key(gate: Gate) -> None:
    """A group's offsets and its membership are different owners, as are two groups."""
    async def scenario() -> None:
        shard, writer = new_shard(MemoryStore()), ShardWriter()
        record = ClassicGroupRecord("g", 1, "consumer", "range", None, ())
        writes = [writer.submit(shard, commit(0, 1)), writer.submit(shard, record),
                  writer.submit(shard, commit(0, 2, group_id="h"))]
        assert writer.pending(NAME, "g") == [commit(0, 1)]
        assert writer.pending(membership.NAME, "g") == [record]
        assert writer.pending(NAME, "h") == [commit(0, 2, group_id="h")]
        assert writer.pending(membership.NAME, "h") == []
        gate.let_through(None, None, None)
        await asyncio.gather(*writes)
        assert writer.pending(NAME, "g") == writer.pending(membership.NAME, "g") == []
        assert shard.state(membership.MACHINE).get("g") == record
        await writer.close([shard])

    asyncio.run(scenario())


def test_a_record_that_breaks_its_invariants_is_refused_unqueued() -> None:
    async def scenario() -> None:
        shard, writer = new_shard(MemoryStore()), ShardWriter()
        with pytest.raises(ValueError):
            writer.submit(shard, commit(-1, 1))
        assert writer.pending(NAME, "g") == [] and await writer.wait_written(0)
        await writer.close([shard])

    asyncio.run(scenario())


def test_a_failed_append_fails_only_its_own_write(gate: Gate) -> None:
    async def scenario() -> None:
        store = MemoryStore()
        shard, writer = new_shard(store), ShardWriter()
        writes = [writer.submit(shard, commit(p, p)) for p in range(3)]
        gate.let_through(None, OSError("store down"), None)
        await writes[0]
        with pytest.raises(OSError, match="store down"):
            await writes[1]
        await writes[2]
        assert state(shard) == {("t", 0): value(0), ("t", 2): value(2)}
        await writer.close([shard])
        assert state(reopen(store)) == state(shard)

    asyncio.run(scenario())


def test_a_compaction_keeps_the_writes_queued_around_it(gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshot = applied state + the writes ahead of the compaction that succeeded: the one
    that failed must not reach the new log, the one behind the compaction must land in it."""
    force_compaction_once(monkeypatch)

    async def scenario() -> None:
        store = MemoryStore()
        shard, writer = new_shard(store), ShardWriter()
        first = writer.submit(shard, commit(0, 1))
        failing, ahead = writer.submit(shard, commit(1, 2)), writer.submit(shard, commit(2, 3))
        gate.let_through(None)
        await first  # settled: the compaction is queued now, behind `failing` and `ahead`
        behind = writer.submit(shard, commit(0, 4))
        assert state(shard) == {("t", 0): value(1)}  # readers see applied records only
        gate.let_through(OSError("store down"), None, None)
        with pytest.raises(OSError):
            await failing
        await ahead
        await behind
        await writer.wait_written()
        assert state(shard) == {("t", 0): value(4), ("t", 2): value(3)}
        await writer.close([shard])
        reopened = reopen(store)
        assert state(reopened) == state(shard)
        # one batch for the compacted state, then `behind`: the log was rewritten
        assert reopened._open_log().end_offset == 2
        reopened.close()

    asyncio.run(scenario())


def test_a_waiter_that_gives_up_does_not_cancel_its_write(gate: Gate) -> None:
    async def scenario() -> None:
        shard, writer = new_shard(MemoryStore()), ShardWriter()
        written = writer.submit(shard, commit(0, 1))
        assert isinstance(written, asyncio.Future)
        written.cancel()  # what cancelling a task that awaits it does
        gate.let_through(None)
        await writer.wait_written()
        assert state(shard) == {("t", 0): value(1)}
        await writer.close([shard])

    asyncio.run(scenario())


def test_shards_written_in_turns_each_keep_their_order(gate: Gate) -> None:
    async def scenario() -> None:
        store = MemoryStore()
        shards = [new_shard(store, f"internal/group-shards/{n}") for n in range(2)]
        writer = ShardWriter()
        writes = [writer.submit(shards[i % 2], commit(0, i, group_id=f"g{i % 2}")) for i in range(20)]
        gate.let_through(*[None] * 20)
        await asyncio.gather(*writes)
        assert [state(shard, f"g{n}") for n, shard in enumerate(shards)] == [{("t", 0): value(18)},
                                                                              {("t", 0): value(19)}]
        await writer.close(shards)
        for n in range(2):
            assert state(reopen(store, f"internal/group-shards/{n}"), f"g{n}") == {("t", 0): value(18 + n)}

    asyncio.run(scenario())


class FailingOnce(MemoryStore):
    """A memory store whose first mkdir fails, as a store that is briefly unreachable."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = [OSError("unreachable")]

    def mkdir(self, path: str) -> None:
        if self.failures:
            raise self.failures.pop()
        super().mkdir(path)


def test_a_shard_whose_log_could_not_be_created_creates_it_at_the_next_write() -> None:
    async def scenario() -> None:
        store = FailingOnce()
        shard, writer = new_shard(store), ShardWriter()
        with pytest.raises(OSError, match="unreachable"):
            await writer.submit(shard, commit(0, 1))
        await writer.submit(shard, commit(0, 2))
        assert state(shard) == {("t", 0): value(2)}
        await writer.close([shard])
        assert state(reopen(store)) == {("t", 0): value(2)}

    asyncio.run(scenario())


# -- decisions that read the state see the pending records too


def test_offset_delete_and_delete_group_see_a_pending_commit() -> None:
    offsets = offsets_of(new_shard(MemoryStore()))
    pending = [commit(3, 7)]
    assert offsets.delete_offsets("g", "t", [3], pending) == Remove("g", (("t", 3),))
    assert offsets.delete_offsets("g", "t", [3]) is None
    assert offsets.delete_group("g", pending) is not None
    assert offsets.delete_group("g") is None


def test_the_makers_see_what_the_writer_holds_pending(gate: Gate) -> None:
    """The same decisions, fed by the writer's queue while the commit waits for the store."""
    async def scenario() -> None:
        shard, writer = new_shard(MemoryStore()), ShardWriter()
        written = writer.submit(shard, commit(3, 7))
        offsets = offsets_of(shard)
        assert offsets.delete_offsets("g", "t", [3], writer.pending(NAME, "g")) == Remove("g", (("t", 3),))
        assert offsets.delete_group("g", writer.pending(NAME, "g")) is not None
        assert offsets.delete_group("h", writer.pending(NAME, "h")) is None
        gate.let_through(None)
        await written
        await writer.close([shard])

    asyncio.run(scenario())


def test_expiry_leaves_an_offset_with_a_commit_in_flight() -> None:
    """Its tombstone would land after the newer commit and erase it (Kafka skips it too)."""
    shard = new_shard(MemoryStore())
    shard.apply(Commit("g", (("t", 0, value(1)), ("t", 1, value(1)))))
    pending = {"g": [commit(0, 2, commit_ms=500)]}
    removals = offsets_of(shard).expired(1_000, 100, lambda group_id: True, lambda group_id: pending.get(group_id, []))
    assert removals == [Remove("g", (("t", 1),))]


def test_a_membership_record_is_compared_with_the_last_one_queued() -> None:
    shard = new_shard(MemoryStore())
    memberships: membership.MembershipState = shard.state(membership.MACHINE)
    older = ClassicGroupRecord("g", 1, "consumer", "range", None, ())
    newer = ClassicGroupRecord("g", 2, "consumer", "range", None, ())
    shard.apply(older)
    assert memberships.change(older) is None  # the log already ends with it
    assert memberships.change(older, [newer]) == older  # not once `newer` is written
    assert memberships.change(newer, [newer]) is None
    assert memberships.change(GroupGone("g"), [GroupGone("g")]) is None
    assert memberships.change(GroupGone("h")) is None  # never recorded: nothing to bury


# -- a store that does not answer


class Hanging(MemoryStore):
    """A MemoryStore whose appends block while `frozen` is set, as a frozen HDFS holds an
    hsync: until `thawed` is set (then they fail, as a recovered lease fails the old writer)."""

    def __init__(self) -> None:
        super().__init__()
        self.frozen = False
        self.thawed = threading.Event()
        self.hanging = threading.Event()  # set once an append blocks

    def open_append(self, path: str) -> MemoryAppendFile:
        file = super().open_append(path)
        store = self

        class Held(MemoryAppendFile):
            def write(self, data: bytes | memoryview) -> None:
                if store.frozen:
                    store.hanging.set()
                    assert store.thawed.wait(WAIT_S_MAX)
                    raise OSError("the stuck writer's lease was recovered")
                super().write(data)

        return Held(file._data)  # the same bytes the store keeps


async def stuck_second_write(store: Hanging) -> tuple[Shard, ShardWriter, Awaitable[None]]:
    """A shard whose first commit is written and whose second hangs in the frozen store."""
    shard, writer = new_shard(store), ShardWriter()
    await writer.submit(shard, commit(0, 1))
    store.frozen = True
    return shard, writer, writer.submit(shard, commit(0, 2))


def test_an_append_stuck_past_its_deadline_fails_its_waiter_and_the_next_write_reopens_the_log(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "WRITE_S", 0.5)
    store = Hanging()

    async def scenario() -> None:
        shard, writer, stuck = await stuck_second_write(store)
        with pytest.raises(StoreTimeout):
            await asyncio.wait_for(stuck, WAIT_S_MAX)
        assert not shard.log_open  # abandoned: the next write opens it again
        store.frozen = False
        await asyncio.wait_for(writer.submit(shard, commit(0, 3)), WAIT_S_MAX)
        assert state(shard) == {("t", 0): value(3)}
        store.thawed.set()  # the stuck append returns late: its outcome is dropped
        await writer.close([shard])
        assert state(reopen(store)) == {("t", 0): value(3)}

    asyncio.run(scenario())


def test_a_stalled_writer_refuses_new_records_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "STALLED_S", 0.2)
    store = Hanging()

    async def scenario() -> None:
        shard, writer, stuck = await stuck_second_write(store)
        assert await asyncio.to_thread(store.hanging.wait, WAIT_S_MAX)
        while not writer.stalled:  # bounded by the test's own wait_for below
            await asyncio.sleep(0.05)
        with pytest.raises(StoreTimeout, match="has not taken a coordinator record"):
            await writer.submit(shard, commit(0, 3))  # refused without queueing
        assert writer.pending(NAME, "g") == [commit(0, 2)]
        store.frozen = False
        store.thawed.set()
        with pytest.raises(OSError):
            await stuck
        await asyncio.wait_for(writer.submit(shard, commit(0, 4)), WAIT_S_MAX)
        assert state(shard) == {("t", 0): value(4)}
        await writer.close([shard])

    asyncio.run(asyncio.wait_for(scenario(), WAIT_S_MAX))
