"""Committed offsets at work: reads answer from the shards' states in memory, and every
change is a record made here and written through the coordinator runtime (its awaitable
resolves once the record is in the log and applied), so a commit answered success survives a
crash. The group coordinator (engine/groups) and the transaction coordinator
(engine/transactions) reach offsets through this service only."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..coordinator.runtime import Runtime
from ..types import CommittedOffset, NewOffsets, TopicPartition
from . import state as machine
from .records import OffsetRecord
from .state import MACHINE, OffsetsState


class Offsets:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    # -- reading

    def fetch(self, group_id: str, topic: str, partition: int, topic_id: str) -> CommittedOffset | None:
        state = self._state(group_id)
        return None if state is None else state.fetch(group_id, topic, partition, topic_id)

    def group_offsets(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        """Every offset of the group, whatever topic id it was committed under (a copy)."""
        state = self._state(group_id)
        return {} if state is None else dict(state.groups.get(group_id, {}))

    def groups(self) -> list[str]:
        """Groups with at least one committed offset, sorted."""
        return sorted(group_id for state in self._states() for group_id in state.groups)

    def has_group(self, group_id: str) -> bool:
        state = self._state(group_id)
        return state is not None and group_id in state.groups

    def has_pending(self, group_id: str, key: TopicPartition) -> bool:
        """Whether an open transaction commits an offset of `key` in the group (OffsetFetch
        with require_stable answers UNSTABLE_OFFSET_COMMIT then, as Kafka)."""
        state = self._state(group_id)
        return state is not None and state.has_pending(group_id, key)

    # -- changing

    async def commit(self, group_id: str, offsets: NewOffsets) -> None:
        await self._write(machine.commit(group_id, offsets))

    async def commit_in_txn(self, group_id: str, producer_id: int, offsets: NewOffsets) -> None:
        """TxnOffsetCommit: stage offsets in the producer's transaction (applied by its end)."""
        await self._write(machine.txn_offsets(group_id, producer_id, offsets))

    async def end_txn(self, number: int, producer_id: int, commit: bool) -> None:
        """A transaction marker for shard `number`: end the producer's staged offsets in every
        group of the shard (a producer has one transaction open at a time)."""
        state = self._runtime.state_in(MACHINE, number)
        if state is None:
            return
        ends = [state.txn_end(group_id, producer_id, commit, self._pending(group_id))
                for group_id in state.staging_groups(producer_id)]
        await asyncio.gather(*(self._write(end) for end in ends))

    async def delete_group(self, group_id: str) -> None:
        state = self._state(group_id)
        if state is not None:
            await self._write(state.delete_group(group_id, self._pending(group_id)))

    async def delete_offsets(self, group_id: str, topic: str, partitions: list[int]) -> None:
        state = self._state(group_id)
        if state is not None:
            await self._write(state.delete_offsets(group_id, topic, partitions, self._pending(group_id)))

    async def expire(self, now_ms: int, retention_ms: int, is_empty: Callable[[str], bool]) -> int:
        """Remove expired offsets (OffsetsState.expired); how many were removed."""
        removals = [removal for state in self._states()
                    for removal in state.expired(now_ms, retention_ms, is_empty, self._pending)]
        await asyncio.gather(*(self._runtime.submit(removal) for removal in removals))
        return sum(len(removal.keys) for removal in removals)

    def _state(self, group_id: str) -> OffsetsState | None:
        return self._runtime.state(MACHINE, group_id)

    def _states(self) -> list[OffsetsState]:
        return self._runtime.states(MACHINE)

    def _pending(self, group_id: str) -> list[object]:
        return self._runtime.pending(MACHINE, group_id)

    async def _write(self, record: OffsetRecord | None) -> None:
        if record is not None:
            await self._runtime.submit(record)
