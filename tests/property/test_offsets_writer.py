"""The off-loop write path against a model: changes queued, appends let through a few at a
time (some failing), compactions forced at random points. Whatever the interleaving, memory
ends as the successful changes applied in queue order, only the failed writes' waiters see
an error, and the log reopens to exactly what memory holds (no compaction lost a write queued
around it or kept a failed one)."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Awaitable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.engine.groups.membership import ClassicGroupRecord, GroupGone
from martlet.engine.groups.offsets import CommittedOffset, LiveState, OffsetStore
from martlet.engine.groups.records import Change, Commit, DeleteGroup, Remove
from martlet.engine.groups.writer import OffsetWriter
from martlet.engine.store import MemoryStore
from martlet.records.header import BatchHeader

PATH = "internal/group-shards/0"
WAIT_S_MAX = 10.0

groups = st.sampled_from(["a", "b"])
keys = st.tuples(st.just("t"), st.integers(0, 2))
changes = st.one_of(
    st.builds(lambda g, key, offset: Commit(g, ((key[0], key[1], CommittedOffset(offset, -1, None, 0, "id")),)),
              groups, keys, st.integers(0, 99)),
    st.builds(lambda g, key: Remove(g, (key,)), groups, keys),
    st.builds(DeleteGroup, groups),
    st.builds(lambda g, generation: ClassicGroupRecord(g, generation, "consumer", "range", None, ()),
              groups, st.integers(1, 9)),
    st.builds(GroupGone, groups),
)
# A step queues a change (failing when its append comes, or not) or lets some appends through.
steps = st.lists(st.one_of(st.tuples(st.just("queue"), changes, st.booleans()),
                           st.tuples(st.just("release"), st.integers(1, 4))), max_size=30)


class Gate:
    """OffsetStore.append waits for an outcome per call, in queue order."""

    def __init__(self) -> None:
        self.outcomes: queue.Queue[bool] = queue.Queue()  # True: the append fails

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        append = OffsetStore.append

        def gated(shard: OffsetStore, batch: bytearray, header: BatchHeader) -> int:
            if self.outcomes.get(timeout=WAIT_S_MAX):
                raise OSError("refused by the test")
            return append(shard, batch, header)

        monkeypatch.setattr(OffsetStore, "append", gated)


def offsets_of(state: LiveState) -> tuple[dict[str, dict[tuple[str, int], CommittedOffset]], dict[str, object]]:
    return state.groups, {group_id: record for group_id, (record, _) in state.memberships.items()}


def contents(shard: OffsetStore) -> tuple[dict[str, dict[tuple[str, int], CommittedOffset]], dict[str, object]]:
    offsets = {group_id: shard.group_offsets(group_id) for group_id in shard.groups()}
    return offsets, {record.group_id: record for record in shard.memberships()}


@settings(max_examples=150, deadline=None)
@given(plan=steps, compact_at=st.lists(st.booleans(), max_size=40))
def test_any_interleaving_ends_in_the_log_and_memory_alike(plan: list[tuple], compact_at: list[bool]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        gate = Gate()
        gate.install(monkeypatch)
        due = list(reversed(compact_at))
        monkeypatch.setattr(OffsetStore, "should_compact", lambda shard, log_bytes: bool(due and due.pop()))
        asyncio.run(_run(plan, gate))


async def _run(plan: list[tuple], gate: Gate) -> None:
    store = MemoryStore()
    shard, writer = OffsetStore.unopened(store, PATH, lambda: 0), OffsetWriter()
    queued: list[tuple[Change, bool, Awaitable[None]]] = []
    released = 0  # how many of `queued` the gate has let through
    for step in plan:
        if step[0] == "queue":
            _, change, fails = step
            queued.append((change, fails, writer.submit(shard, change)))
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
    model = LiveState()
    for change, fails, written in queued:
        [result] = await asyncio.gather(written, return_exceptions=True)
        assert isinstance(result, OSError) == fails
        if not fails:
            model.apply(change)
    assert contents(shard) == offsets_of(model)
    await writer.close([shard])
    reopened = OffsetStore.open(store, PATH, lambda: 0)
    assert contents(reopened) == contents(shard)
    reopened.close()
