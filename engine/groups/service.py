"""Async face of the group coordinator: parks JoinGroup and SyncGroup callers until the
state machine answers them, runs its clock, and keeps committed offsets.

The state machine (classic.py) is synchronous and deterministic; this module is the only
group code that knows asyncio. A timer task calls `tick` at the machine's next deadline
(at least every `TICK_MS_MAX`), and every call that may change a deadline wakes it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from ..store.base import Store
from .classic import ClassicCoordinator, GroupLimits
from .offsets import CommittedOffset, OffsetStore
from .types import GroupError, GroupState, GroupView, JoinRequest, JoinResult, Outcome, Reply, SyncRequest, SyncResult

TICK_MS_MAX = 1000
OFFSETS_PATH = "internal/group-offsets"


def random_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


class Groups:
    def __init__(self, store: Store, limits: GroupLimits, now_ms: Callable[[], int],
                 offsets_retention_ms: int, new_member_id: Callable[[str], str] = random_member_id) -> None:
        self.now_ms = now_ms
        self.machine = ClassicCoordinator(limits, new_member_id)
        self.offsets = OffsetStore.open(store, OFFSETS_PATH, now_ms)
        self.offsets_retention_ms = offsets_retention_ms
        self._waiters: dict[tuple[str, str, str], asyncio.Future[Any]] = {}
        self._wake = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._timer = asyncio.get_running_loop().create_task(self._run_timer())

    def close(self) -> None:
        if self._timer:
            self._timer.cancel()
        for future in self._waiters.values():
            future.cancel()
        self.offsets.close()

    # -- membership

    async def join(self, request: JoinRequest) -> JoinResult:
        result = await self._settle(request.group_id, "join", self.machine.join(request, self.now_ms()))
        assert isinstance(result, JoinResult)
        return result

    async def sync(self, request: SyncRequest) -> SyncResult:
        result = await self._settle(request.group_id, "sync", self.machine.sync(request, self.now_ms()))
        assert isinstance(result, SyncResult)
        return result

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, instance_id: str | None) -> GroupError:
        return self.machine.heartbeat(group_id, member_id, generation_id, instance_id, self.now_ms())

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[GroupError]:
        errors, replies = self.machine.leave(group_id, leaving, self.now_ms())
        self._deliver(replies)
        return errors

    async def _settle(self, group_id: str, kind: str, outcome: Outcome) -> JoinResult | SyncResult:
        future: asyncio.Future[Any] | None = None
        if outcome.answer is None:
            future = asyncio.get_running_loop().create_future()
            self._waiters[(group_id, outcome.waiting_as, kind)] = future
        self._deliver(outcome.replies)
        if future is None:
            assert isinstance(outcome.answer, (JoinResult, SyncResult))
            return outcome.answer
        return await future

    def _deliver(self, replies: list[Reply]) -> None:
        for reply in replies:
            future = self._waiters.pop((reply.group_id, reply.member_id, reply.kind), None)
            if future is not None and not future.done():
                future.set_result(reply.result)
        self._wake.set()

    async def _run_timer(self) -> None:
        while True:
            deadline = self.machine.next_deadline_ms()
            wait_ms = TICK_MS_MAX if deadline is None else min(max(deadline - self.now_ms(), 0), TICK_MS_MAX)
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), wait_ms / 1000)
            except TimeoutError:
                pass
            self._deliver(self.machine.tick(self.now_ms()))

    # -- offsets

    def validate_commit(self, group_id: str, member_id: str, generation_id: int, instance_id: str | None) -> GroupError:
        return self.machine.validate_commit(group_id, member_id, generation_id, instance_id, self.now_ms())

    def commit(self, group_id: str, offsets: list[tuple[str, str, int, CommittedOffset]]) -> None:
        self.offsets.commit(group_id, offsets)

    def committed(self, group_id: str, topic: str, partition: int, topic_id: str) -> CommittedOffset | None:
        return self.offsets.fetch(group_id, topic, partition, topic_id)

    def expire_offsets(self) -> int:
        return self.offsets.expire(self.now_ms(), self.offsets_retention_ms, self.is_empty)

    # -- admin

    def is_empty(self, group_id: str) -> bool:
        view = self.machine.describe(group_id)
        return view is None or view.state is GroupState.EMPTY

    def describe(self, group_id: str) -> GroupView | None:
        view = self.machine.describe(group_id)
        if view is None and group_id in self.offsets.groups():
            return GroupView(group_id, GroupState.EMPTY, "consumer", "", 0, "", ())
        return view

    def list(self) -> list[GroupView]:
        known = {view.group_id: view for view in self.machine.list()}
        for group_id in self.offsets.groups():
            known.setdefault(group_id, GroupView(group_id, GroupState.EMPTY, "consumer", "", 0, "", ()))
        return [known[g] for g in sorted(known)]

    def delete(self, group_id: str) -> GroupError:
        error = self.machine.delete(group_id)
        if error is GroupError.GROUP_NOT_FOUND and group_id in self.offsets.groups():
            error = GroupError.NONE
        if error is GroupError.NONE:
            self.offsets.delete_group(group_id)
        return error
