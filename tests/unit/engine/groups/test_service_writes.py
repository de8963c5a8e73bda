"""Groups over the off-loop write path: a call's replies wait for the records, and go out
even when the call that produced them is cancelled while its records are written."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest

from martlet.engine.clock import ManualClock
from martlet.engine.coordinator.shard import Shard
from martlet.engine.groups.classic import GroupLimits
from martlet.engine.groups.service import Groups
from martlet.engine.groups.types import GroupError, GroupState, JoinRequest, JoinResult, SyncRequest
from martlet.engine.store import MemoryStore
from martlet.engine.types import CommittedOffset
from martlet.records.header import BatchHeader
from tests.support.coordinator import close_groups, open_groups

G = "g"
WAIT_S_MAX = 10.0
TURNS_MAX = 1_000  # loop turns a condition may take to come true


@pytest.fixture
def closed_gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Shard.append (on the worker thread) waits while the event is clear."""
    gate = threading.Event()
    gate.set()
    append = Shard.append

    def gated(self: Shard, batch: bytearray, header: BatchHeader) -> int:
        if not gate.wait(WAIT_S_MAX):
            raise TimeoutError("the test never opened the gate")
        return append(self, batch, header)

    monkeypatch.setattr(Shard, "append", gated)
    yield gate
    gate.set()


def join_request(member_id: str = "") -> JoinRequest:
    return JoinRequest(G, member_id, None, "consumer", (("range", b""),), 10_000, 10_000, False)


async def wait_until(condition: Callable[[], bool]) -> None:
    for _ in range(TURNS_MAX):
        if condition():
            return
        await asyncio.sleep(0)  # one loop turn: the other tasks take their next step
    raise AssertionError("condition not met")


def test_replies_to_other_members_go_out_although_their_call_was_cancelled(closed_gate: threading.Event) -> None:
    async def scenario() -> None:
        clock = ManualClock(1_000)
        groups = open_groups(MemoryStore(), GroupLimits(initial_rebalance_delay_ms=0), clock.now_ms, 1_000_000)
        first = await groups.join(join_request())
        assert first.error is GroupError.NONE
        sync = SyncRequest(G, first.member_id, first.generation_id, None, None, None, ((first.member_id, b"a"),))
        assert (await groups.sync(sync)).error is GroupError.NONE

        second = asyncio.ensure_future(groups.join(join_request()))  # waits for the first to rejoin
        await wait_until(lambda: _state(groups) is GroupState.PREPARING_REBALANCE)
        closed_gate.clear()
        offset = CommittedOffset(1, -1, None, clock.now_ms(), "id-t")
        commit = asyncio.ensure_future(groups.commit("other", [("t", "id-t", 0, offset)]))
        rejoin = asyncio.ensure_future(groups.join(join_request(first.member_id)))  # completes the round
        await wait_until(lambda: _state(groups) is GroupState.COMPLETING_REBALANCE)
        assert not second.done()  # its answer waits for the writes queued before it
        rejoin.cancel()  # the caller goes away while the records are written
        closed_gate.set()
        answer = await asyncio.wait_for(second, WAIT_S_MAX)
        assert isinstance(answer, JoinResult) and answer.error is GroupError.NONE
        assert answer.generation_id == first.generation_id + 1
        await commit
        with pytest.raises(asyncio.CancelledError):
            await rejoin
        await close_groups(groups)

    asyncio.run(scenario())


def _state(groups: Groups) -> GroupState | None:
    view = groups.describe(G)
    return None if view is None else view.state
