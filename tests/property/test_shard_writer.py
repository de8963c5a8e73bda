"""The off-loop write path (ShardWriter) against a model: records queued, appends let through
a few at a time (some failing), compactions forced at random points. Whatever the
interleaving, memory ends as the successful records applied in queue order, only the failed
writes' waiters see an error, and the log reopens to exactly what memory holds (no compaction
lost a write queued around it or kept a failed one)."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Awaitable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.engine.coordinator.records import Registry
from martlet.engine.coordinator.runtime import SHARDS_DIR
from martlet.engine.coordinator.shard import Shard, States
from martlet.engine.coordinator.writer import ShardWriter
from martlet.engine.groups import records as membership
from martlet.engine.groups.membership import ClassicGroupRecord, GroupGone
from martlet.engine.offsets import state as offsets
from martlet.engine.offsets.records import Commit, DeleteGroup, Remove, TxnOffsets, TxnOffsetsEnd
from martlet.engine.service import MACHINES
from martlet.engine.store import MemoryStore
from martlet.engine.transactions import records as transactions
from martlet.engine.transactions.records import TxnRecord
from martlet.engine.transactions.types import TxnMetadata, TxnState
from martlet.engine.types import CommittedOffset, TopicPartition
from martlet.records.header import BatchHeader

PATH = f"{SHARDS_DIR}/0"
REGISTRY = Registry(MACHINES)
WAIT_S_MAX = 10.0

groups = st.sampled_from(["a", "b"])
keys = st.builds(TopicPartition, st.just("t"), st.integers(0, 2))
entry = st.builds(lambda key, offset: (key.topic, key.partition, CommittedOffset(offset, -1, None, 0, "id")),
                  keys, st.integers(0, 99))
records = st.one_of(
    st.builds(lambda g, e: Commit(g, (e,)), groups, entry),
    st.builds(lambda g, key: Remove(g, (key,)), groups, keys),
    st.builds(DeleteGroup, groups),
    st.builds(lambda g, pid, e: TxnOffsets(g, pid, (e,)), groups, st.integers(1, 2), entry),
    st.builds(TxnOffsetsEnd, groups, st.integers(1, 2), st.booleans()),
    st.builds(lambda g, generation: ClassicGroupRecord(g, generation, "consumer", "range", None, ()),
              groups, st.integers(1, 9)),
    st.builds(GroupGone, groups),
    st.builds(lambda t, epoch, state: TxnRecord(TxnMetadata(t, 5, epoch, 60_000, state)),
              groups, st.integers(0, 3), st.sampled_from(TxnState)),
)
# A step queues a record (failing when its append comes, or not) or lets some appends through.
steps = st.lists(st.one_of(st.tuples(st.just("queue"), records, st.booleans()),
                           st.tuples(st.just("release"), st.integers(1, 4))), max_size=30)


class Gate:
    """Shard.append waits for an outcome per call, in queue order."""

    def __init__(self) -> None:
        self.outcomes: queue.Queue[bool] = queue.Queue()  # True: the append fails

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        append = Shard.append

        def gated(shard: Shard, batch: bytearray, header: BatchHeader) -> int:
            if self.outcomes.get(timeout=WAIT_S_MAX):
                raise OSError("refused by the test")
            return append(shard, batch, header)

        monkeypatch.setattr(Shard, "append", gated)


def contents(states: States) -> dict[str, Any]:
    """Every machine's state as plain values, with the size estimate."""
    offsets_state = states.by_machine[offsets.NAME]
    return {
        "offsets": offsets_state.groups,
        "staged": offsets_state.pending,
        "membership": states.by_machine[membership.NAME].by_group,
        "transactions": states.by_machine[transactions.NAME].by_id,
        "live_bytes": states.live_bytes,
    }


@settings(max_examples=150, deadline=None)
@given(plan=steps, compact_at=st.lists(st.booleans(), max_size=40))
def test_any_interleaving_ends_in_the_log_and_memory_alike(plan: list[tuple], compact_at: list[bool]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        gate = Gate()
        gate.install(monkeypatch)
        due = list(reversed(compact_at))
        monkeypatch.setattr(Shard, "should_compact", lambda shard, log_bytes: bool(due and due.pop()))
        asyncio.run(_run(plan, gate))


async def _run(plan: list[tuple], gate: Gate) -> None:
    store = MemoryStore()
    shard, writer = Shard(store, PATH, lambda: 0, REGISTRY), ShardWriter()
    queued: list[tuple[Any, bool, Awaitable[None]]] = []
    released = 0  # how many of `queued` the gate has let through
    for step in plan:
        if step[0] == "queue":
            _, record, fails = step
            queued.append((record, fails, writer.submit(shard, record)))
            continue
        newly = queued[released : released + step[1]]
        released += len(newly)
        for _, fails, _ in newly:
            gate.outcomes.put(fails)
        # settle those on the loop (a compaction may be queued behind the writes still held)
        await asyncio.gather(*(written for _, _, written in newly), return_exceptions=True)
    for _, fails, _ in queued[released:]:
        gate.outcomes.put(fails)
    await writer.wait_written()
    model = States(REGISTRY)
    for record, fails, written in queued:
        [result] = await asyncio.gather(written, return_exceptions=True)
        assert isinstance(result, OSError) == fails
        if not fails:
            model.apply(record)
    assert contents(shard.snapshot()) == contents(model)
    await writer.close([shard])
    reopened = Shard.open(store, PATH, lambda: 0, REGISTRY)
    assert contents(reopened.snapshot()) == contents(shard.snapshot())
    reopened.close()
