"""Async face of the group coordinator: parks JoinGroup and SyncGroup callers until the
state machine answers them, runs its clock, and answers for the groups' committed offsets
(engine/offsets, given to it as `offsets`).

Two state machines, both synchronous and deterministic: classic.py (JoinGroup/SyncGroup) and
consumer.py (KIP-848 ConsumerGroupHeartbeat). A group id belongs to one of them at a time;
this module decides which by the group that exists: a heartbeat of the other protocol is
refused while the group has members, and takes the id over once it is empty (as Kafka does
for empty groups; the online migration of KIP-848 with members is not implemented).

Membership survives a restart or a move: after every call into a state machine, the groups
it touched are written as membership records (records.py, a machine of the coordinator
runtime) to their shard (`_record_touched`), and opening or loading a shard replays them
(`_restore`), so members keep their ids, generations and epochs.

Threads: everything here runs on the event loop, and no store call does. The coordinators and
the runtime's states are memory; a change to the offsets or a membership record is queued to
the runtime's worker thread (engine/coordinator) and awaited, so the methods that write are
coroutines (`join`, `sync`, `leave`, `consumer_heartbeat`, `tick`, `commit`,
`delete_offsets`, `delete`, `expire_offsets`, `close`); the readers (`committed`,
`describe`, `list`, the validations, the classic `heartbeat`) answer from memory at once.
A call's replies go out once its records are written (`_record_touched`), or RECORD_WAIT_S
after they were queued, or at once while the store is stalled (engine/coordinator/writer.py).

Membership records are memory-first when the store does not answer; committed offsets never
are. A group's record only lets a coordinator that opens the shard later (after a restart or a
move) resume the group without a rebalance: so during a store outage (HDFS down or frozen)
groups go on in memory: members keep their assignments, heartbeats are answered from memory,
joins and syncs complete (new groups form), and their records are written once the store is
back. What a crash during the outage loses is those records only: the next coordinator
resumes each group from its last record written, and members it does not know (or know at an
older generation) are told UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION and rejoin: one rebalance,
no offsets lost. A commit, though, is answered success only once written (Kafka's rule): in an
outage it is answered COORDINATOR_NOT_AVAILABLE within 5 s (gateway/handlers/group_offsets.py)
and clients retry it, so a crash loses no acknowledged commit. Transactional offsets and
transaction records are never memory-only either.

This module is the only group code that knows asyncio. A timer task calls
both coordinators' `tick` at their next deadline (at least every `TICK_MS_MAX`), and every call
that may change a deadline wakes it.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from ..coordinator.runtime import Listener, Runtime
from ..ids import Ids, RandomIds
from ..types import CommittedOffset, NewOffsets, TopicPartition
from .classic import ClassicCoordinator, GroupLimits
from .consumer import ConsumerCoordinator, ConsumerGroupLimits
from .membership import ClassicGroupRecord, GroupGone, GroupRecord, MembershipChange
from .records import MACHINE, MembershipState
from .types import (
    ConsumerGroupState,
    ConsumerGroupView,
    GroupError,
    GroupState,
    GroupView,
    HeartbeatRequest,
    HeartbeatResult,
    JoinRequest,
    JoinResult,
    ListedGroup,
    MemberView,
    Outcome,
    Reply,
    SyncRequest,
    SyncResult,
    TopicLookup,
)

TICK_MS_MAX = 1000
RECORD_WAIT_S = 5.0  # the longest a reply waits for its group records (Kafka's offsets.commit.timeout.ms)
logger = logging.getLogger(__name__)


# How a consumer group looks to the classic APIs (DescribeGroups, the GroupView callers).
_CLASSIC_STATE = {
    ConsumerGroupState.EMPTY: GroupState.EMPTY,
    ConsumerGroupState.ASSIGNING: GroupState.PREPARING_REBALANCE,
    ConsumerGroupState.RECONCILING: GroupState.COMPLETING_REBALANCE,
    ConsumerGroupState.STABLE: GroupState.STABLE,
    ConsumerGroupState.DEAD: GroupState.DEAD,
}


@dataclass(frozen=True, slots=True)
class MemberIds:
    """Where new member ids come from (randomness is injected: tests count instead)."""

    classic: Callable[[str], str]  # from the client id, as Kafka does
    consumer: Callable[[], str]

    @classmethod
    def drawn_from(cls, ids: Ids) -> MemberIds:
        """A classic member's id is "<client id>-<uuid>", a KIP-848 member's a bare uuid."""
        return cls(lambda prefix: f"{prefix}-{ids.uuid()}", lambda: str(ids.uuid()))


class GroupOffsets(Protocol):
    """What the group coordinator asks of committed offsets (engine/offsets/service.py)."""

    def fetch(self, group_id: str, topic: str, partition: int, topic_id: str) -> CommittedOffset | None: ...
    def group_offsets(self, group_id: str) -> dict[TopicPartition, CommittedOffset]: ...
    def groups(self) -> list[str]: ...
    def has_group(self, group_id: str) -> bool: ...
    def has_pending(self, group_id: str, key: TopicPartition) -> bool: ...
    async def commit(self, group_id: str, offsets: NewOffsets) -> None: ...
    async def commit_in_txn(self, group_id: str, producer_id: int, offsets: NewOffsets) -> None: ...
    async def end_txn(self, number: int, producer_id: int, commit: bool) -> None: ...
    async def delete_group(self, group_id: str) -> None: ...
    async def delete_offsets(self, group_id: str, topic: str, partitions: list[int]) -> None: ...
    async def expire(self, now_ms: int, retention_ms: int, is_empty: Callable[[str], bool]) -> int: ...


class Groups:
    def __init__(self, runtime: Runtime, offsets: GroupOffsets, limits: GroupLimits, now_ms: Callable[[], int],
                 offsets_retention_ms: int, consumer_limits: ConsumerGroupLimits | None = None,
                 ids: MemberIds | None = None) -> None:
        self.now_ms = now_ms
        ids = ids or MemberIds.drawn_from(RandomIds())
        self.classic = ClassicCoordinator(limits, ids.classic)
        self.consumer = ConsumerCoordinator(consumer_limits or ConsumerGroupLimits(), ids.consumer)
        self.runtime = runtime
        self.offsets = offsets
        self._unrecorded: set[str] = set()  # touched groups whose record a store error held back
        self._records_failing = False  # the latest record written failed (logged once until one is written)
        for state in runtime.states(MACHINE):
            self._restore(state)
        runtime.listen(Listener(self._shard_loaded, self._shard_dropping, self._shard_dropped))
        self.offsets_retention_ms = offsets_retention_ms
        self._waiters: dict[tuple[str, str, str], list[asyncio.Future[Any]]] = {}
        self._wake = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._publishing: set[asyncio.Task[None]] = set()  # records being written before their replies go out

    def start(self) -> None:
        self._timer = asyncio.get_running_loop().create_task(self._run_timer())

    async def close(self) -> None:
        if self._timer:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
        for futures in self._waiters.values():
            for future in futures:
                future.cancel()

    def _shard_loaded(self, number: int) -> None:
        """The cluster moved shard `number` here: resume its groups, whose members keep their
        assignment if their record was written."""
        state = self.runtime.state_in(MACHINE, number)
        if state is not None:
            self._restore(state)

    async def _shard_dropping(self, number: int) -> None:
        await self._written(self._queue_records())

    def _shard_dropped(self, number: int) -> None:
        """Stop coordinating the groups of shard `number` (the cluster moved it away)."""
        known = {view.group_id for view in self.classic.list()} | {view.group_id for view in self.consumer.list()}
        for group_id in [group_id for group_id in known if self.shard_of(group_id) == number]:
            self.classic.forget(group_id)
            self.consumer.forget(group_id)
        for key in [key for key in self._waiters if self.shard_of(key[0]) == number]:
            for future in self._waiters.pop(key):
                future.cancel()

    def serves_shard(self, number: int) -> bool:
        return self.runtime.holds(number)

    @property
    def shard_count(self) -> int:
        """How many coordinator shards there are (Kafka's offsets.topic.num.partitions): fixed
        when the store was first used, so it may differ from the setting."""
        return self.runtime.count

    def shard_of(self, group_id: str) -> int:
        """The shard holding the group (its coordinator is that shard's owner)."""
        return self.runtime.shard_of(group_id)

    def membership(self, group_id: str) -> GroupRecord | None:
        """The group's last membership record written, if this node holds its shard."""
        state = self.runtime.state(MACHINE, group_id)
        return None if state is None else state.get(group_id)

    # -- membership records

    def _restore(self, state: MembershipState) -> None:
        """Resume every group recorded in a shard's membership state."""
        now_ms = self.now_ms()
        for record in state.records():
            if isinstance(record, ClassicGroupRecord):
                self.classic.restore(record, now_ms)
            else:
                self.consumer.restore(record, now_ms)

    async def _record_touched(self) -> None:
        """Write the new record of every group the coordinators changed, and wait until it and
        every change queued before it are written: log first, as this runs before any reply
        of the call is delivered (a reply that reads a state another call changed waits for
        that call's record too, as in Kafka's coordinator). A group id is one protocol's at
        a time, so the coordinator that has the group speaks for it; neither has it: it is gone.

        The records are queued at once, in the coordinators' order, before anything is awaited,
        so each log holds them in the order the coordinators made them.

        A store error is logged, not raised: the coordinators' state has moved on and their
        replies must still go out (a JoinGroup waiter would hang otherwise). Nor does a reply
        wait for a store that does not answer: RECORD_WAIT_S at most, and not at all while
        the writer is stalled. The groups not written are tried again after the next call or
        tick; a restart before that resumes them from their previous record, which costs a
        rebalance, as before records existed."""
        await self._written(self._queue_records())

    def _queue_records(self) -> list[tuple[str, Awaitable[None]]]:
        """Queue the record of every touched group (and of those a store error held back)."""
        due = sorted(self._unrecorded | self.consumer.take_touched() | self.classic.take_touched())
        self._unrecorded.difference_update(due)
        return [(group_id, written) for group_id in due if (written := self._record(group_id)) is not None]

    async def _written(self, queued: list[tuple[str, Awaitable[None]]]) -> None:
        """Wait for every change queued so far, RECORD_WAIT_S at most and not at all while
        the store is stalled (a record is memory-first then: see the header); a record that
        fails is noted, to queue again with the next call or tick."""
        if not self.runtime.stalled:
            await self.runtime.wait_written(RECORD_WAIT_S)
        for group_id, written in queued:
            outcome = asyncio.ensure_future(written)
            if outcome.done():  # taken in now, so the caller's next step sees a failure noted
                self._recorded(group_id, outcome)
            else:
                outcome.add_done_callback(functools.partial(self._recorded, group_id))

    def _recorded(self, group_id: str, written: asyncio.Future[None]) -> None:
        """A record's outcome; failures said once until a record is written again."""
        error = None if written.cancelled() else written.exception()
        if error is None:
            if self._records_failing:
                self._records_failing = False
                logger.warning("group records are written again")
            return
        if not self._records_failing:
            self._records_failing = True
            logger.warning("group records not written, kept in memory to write again: %s", error)
        self._unrecorded.add(group_id)

    def _record(self, group_id: str) -> Awaitable[None] | None:
        """Queue the group's current record, unless its log already ends with it."""
        record: MembershipChange | None
        if self.classic.has(group_id):
            record = self.classic.record(group_id)
        else:
            record = self.consumer.record(group_id)
        return None if record is None else self._write_membership(record)

    def _write_membership(self, change: MembershipChange) -> Awaitable[None] | None:
        """Queue a group's new membership (or that it is gone) now; None if its log already
        ends with it. Await the result to know it is written."""
        state: MembershipState | None
        if isinstance(change, GroupGone):
            state = self.runtime.state(MACHINE, change.group_id)
            if state is None:  # a group never recorded needs no tombstone
                return None
        else:
            state = self.runtime.prepared(change.group_id).state(MACHINE)
        record = state.change(change, self.runtime.pending(MACHINE, change.group_id))
        return None if record is None else self.runtime.submit(record)

    # -- membership

    def coordinates(self, group_id: str) -> bool:
        """True if this node coordinates the group (it serves the group's coordinator shard);
        every group call on another node answers NOT_COORDINATOR, and the client asks
        FindCoordinator again."""
        return self.runtime.owns(self.shard_of(group_id))

    async def join(self, request: JoinRequest) -> JoinResult:
        if not self.coordinates(request.group_id):
            return JoinResult(GroupError.NOT_COORDINATOR, member_id=request.member_id)
        if not self._claim_for_classic(request.group_id):
            await self._record_touched()
            return JoinResult(GroupError.INCONSISTENT_PROTOCOL, member_id=request.member_id)
        outcome = self.classic.join(request, self.now_ms())
        result = await self._settle(request.group_id, "join", outcome)
        assert isinstance(result, JoinResult)
        return result

    async def sync(self, request: SyncRequest) -> SyncResult:
        if not self.coordinates(request.group_id):
            return SyncResult(GroupError.NOT_COORDINATOR)
        outcome = self.classic.sync(request, self.now_ms())
        result = await self._settle(request.group_id, "sync", outcome)
        assert isinstance(result, SyncResult)
        return result

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, instance_id: str | None) -> GroupError:
        if not self.coordinates(group_id):
            return GroupError.NOT_COORDINATOR
        return self.classic.heartbeat(group_id, member_id, generation_id, instance_id, self.now_ms())

    async def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[GroupError]:
        if not self.coordinates(group_id):
            return [GroupError.NOT_COORDINATOR] * len(leaving)
        errors, replies = self.classic.leave(group_id, leaving, self.now_ms())
        await self._record_then_deliver(replies)
        return errors

    def _claim_for_classic(self, group_id: str) -> bool:
        """A consumer-protocol group id may become classic once it has no members."""
        if not self.consumer.has(group_id):
            return True
        return self.consumer.delete(group_id) is GroupError.NONE

    def _claim_for_consumer(self, group_id: str) -> bool:
        view = self.classic.describe(group_id)
        return view is None or self.classic.delete(group_id) is GroupError.NONE

    # -- consumer protocol (KIP-848)

    async def consumer_heartbeat(self, request: HeartbeatRequest, topics: TopicLookup) -> HeartbeatResult:
        if not self.coordinates(request.group_id):
            return HeartbeatResult(GroupError.NOT_COORDINATOR)
        if not self._claim_for_consumer(request.group_id):
            await self._record_touched()
            return HeartbeatResult(GroupError.GROUP_NOT_FOUND,
                                   message=f"Group {request.group_id} is not a consumer group.")
        result = self.consumer.heartbeat(request, topics, self.now_ms())
        await self._record_touched()
        self._wake.set()
        return result

    def describe_consumer(self, group_id: str, topics: TopicLookup) -> ConsumerGroupView | GroupError:
        """ConsumerGroupDescribe: GROUP_NOT_FOUND for classic and unknown groups (the Java
        admin then falls back to DescribeGroups)."""
        view = self.consumer.describe(group_id, topics)
        return GroupError.GROUP_NOT_FOUND if view is None else view

    async def _settle(self, group_id: str, kind: str, outcome: Outcome) -> JoinResult | SyncResult:
        """Record what the coordinator's step changed, then deliver its replies and answer. The
        waiter is registered before the records are awaited: a later call may reply to it."""
        future: asyncio.Future[JoinResult | SyncResult] | None = None
        if outcome.answer is None:
            future = asyncio.get_running_loop().create_future()
            # a client may resend while its first request still waits: both get the answer
            self._waiters.setdefault((group_id, outcome.waiting_as, kind), []).append(future)
        await self._record_then_deliver(outcome.replies)
        if future is None:
            assert isinstance(outcome.answer, (JoinResult, SyncResult))
            return outcome.answer
        return await future

    async def _record_then_deliver(self, replies: list[Reply]) -> None:
        """Record the touched groups, then deliver `replies` (other members' answers among
        them), in a task of its own: a caller cancelled meanwhile (its connection aborted)
        must not keep those answers from going out."""
        task = asyncio.get_running_loop().create_task(self._written(self._queue_records()))
        task.add_done_callback(lambda _: self._deliver(replies))
        self._publishing.add(task)
        task.add_done_callback(self._publishing.discard)
        await asyncio.shield(task)

    def _deliver(self, replies: list[Reply]) -> None:
        for reply in replies:
            for future in self._waiters.pop((reply.group_id, reply.member_id, reply.kind), []):
                if not future.done():
                    future.set_result(reply.result)
        self._wake.set()

    def _next_deadline_ms(self) -> int | None:
        deadlines = [d for d in (self.classic.next_deadline_ms(), self.consumer.next_deadline_ms()) if d is not None]
        return min(deadlines, default=None)

    async def _run_timer(self) -> None:
        while True:
            deadline = self._next_deadline_ms()
            wait_ms = TICK_MS_MAX if deadline is None else min(max(deadline - self.now_ms(), 0), TICK_MS_MAX)
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), wait_ms / 1000)
            except TimeoutError:
                pass
            self._deliver(await self.tick())

    async def tick(self) -> list[Reply]:
        """Run both coordinators' timers now and record what they changed; the replies due."""
        now_ms = self.now_ms()
        self.consumer.tick(now_ms)
        replies = self.classic.tick(now_ms)
        await self._record_touched()
        return replies

    # -- offsets

    def validate_commit(self, group_id: str, member_id: str, generation_id: int, instance_id: str | None) -> GroupError:
        """For a consumer-protocol group the generation is the member epoch (OffsetCommit v9+)."""
        if not self.coordinates(group_id):
            return GroupError.NOT_COORDINATOR
        if self.consumer.has(group_id):
            return self.consumer.validate_commit(group_id, member_id, generation_id)
        if not self.classic.has(group_id) and self.offsets.has_group(group_id):
            # a group that only has committed offsets is an Empty group to Kafka
            return GroupError.NONE if generation_id < 0 else GroupError.UNKNOWN_MEMBER
        return self.classic.validate_commit(group_id, member_id, generation_id, instance_id, self.now_ms())

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> GroupError:
        """OffsetFetch v9+ from a member of a consumer-protocol group must carry its epoch."""
        if not self.coordinates(group_id):
            return GroupError.NOT_COORDINATOR
        return self.consumer.validate_fetch(group_id, member_id, member_epoch)

    async def commit(self, group_id: str, offsets: NewOffsets) -> None:
        await self.offsets.commit(group_id, offsets)

    async def commit_in_txn(self, group_id: str, producer_id: int,
                            offsets: NewOffsets) -> None:
        """TxnOffsetCommit: stage offsets in the producer's transaction (applied by its commit)."""
        await self.offsets.commit_in_txn(group_id, producer_id, offsets)

    async def end_txn(self, shard: int, producer_id: int, commit: bool) -> None:
        """The marker of the producer's transaction for coordinator shard `shard`: apply (commit)
        or drop what it staged in the shard's groups."""
        await self.offsets.end_txn(shard, producer_id, commit)

    def unstable(self, group_id: str, topic: str, partition: int) -> bool:
        """An open transaction stages an offset for this partition (OffsetFetch require_stable)."""
        return self.offsets.has_pending(group_id, TopicPartition(topic, partition))

    def committed(self, group_id: str, topic: str, partition: int, topic_id: str) -> CommittedOffset | None:
        return self.offsets.fetch(group_id, topic, partition, topic_id)

    def all_committed(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        """Every offset the group committed, by (topic, partition); a topic's id may be stale."""
        return self.offsets.group_offsets(group_id)

    async def delete_offsets(self, group_id: str, topic: str, partitions: list[int]) -> None:
        await self.offsets.delete_offsets(group_id, topic, partitions)

    async def expire_offsets(self) -> int:
        """Drop the offsets past retention of groups with no members; how many were dropped."""
        return await self.offsets.expire(self.now_ms(), self.offsets_retention_ms, self.is_empty)

    # -- admin

    def is_empty(self, group_id: str) -> bool:
        if self.consumer.has(group_id):
            return self.consumer.is_empty(group_id)
        view = self.classic.describe(group_id)
        return view is None or view.state is GroupState.EMPTY

    def describe(self, group_id: str) -> GroupView | None:
        consumer = self.consumer.describe(group_id)
        if consumer is not None:
            return _classic_view(consumer)
        view = self.classic.describe(group_id)
        if view is None and self.offsets.has_group(group_id):
            return _offsets_only(group_id)
        return view

    def is_consumer_group(self, group_id: str) -> bool:
        return self.consumer.has(group_id)

    def subscribed_topics(self, group_id: str, decode_subscription: Callable[[bytes], Iterable[str]]) -> set[str]:
        """Topics the group's current members subscribe to (OffsetDelete must refuse those).
        A classic "consumer" group's members carry theirs in protocol metadata, bytes the
        engine does not read: `decode_subscription` (the caller's) names their topics."""
        consumer = self.consumer.describe(group_id)
        if consumer is not None:
            return {name for m in consumer.members for name in m.subscribed_topic_names}
        view = self.classic.describe(group_id)
        if view is None or view.protocol_type != "consumer":
            return set()
        return {name for m in view.members for name in decode_subscription(m.metadata)}

    def list(self) -> list[GroupView]:
        known = {view.group_id: view for view in self.classic.list()}
        known.update((view.group_id, _classic_view(view)) for view in self.consumer.list())
        for group_id in self.offsets.groups():
            known.setdefault(group_id, _offsets_only(group_id))
        return [known[g] for g in sorted(known)]

    def listing(self) -> builtins.list[ListedGroup]:  # `list` here is the method above
        """ListGroups rows with each group's own type and state names."""
        consumer = {view.group_id: view for view in self.consumer.list()}
        rows = []
        for view in self.list():
            own = consumer.get(view.group_id)
            if own is None:
                rows.append(ListedGroup(view.group_id, view.protocol_type, view.state.value, "classic"))
            else:
                rows.append(ListedGroup(view.group_id, "consumer", own.state.value, "consumer"))
        return rows

    async def delete(self, group_id: str) -> GroupError:
        error = self._delete(group_id)
        if error is GroupError.NONE:
            await self.offsets.delete_group(group_id)
        await self._record_touched()
        return error

    def _delete(self, group_id: str) -> GroupError:
        """Delete the group from its coordinator; NONE if its offsets are to go too."""
        if self.consumer.has(group_id):
            return self.consumer.delete(group_id)
        error = self.classic.delete(group_id)
        if error is GroupError.GROUP_NOT_FOUND and self.offsets.has_group(group_id):
            error = GroupError.NONE
        return error


def _offsets_only(group_id: str) -> GroupView:
    """A group known only by its committed offsets: Empty, with no protocol type (as Kafka)."""
    return GroupView(group_id, GroupState.EMPTY, "", "", 0, "", ())


def _classic_view(view: ConsumerGroupView) -> GroupView:
    """A consumer-protocol group in the classic shape: no protocol metadata or assignment bytes
    (its members never sent any), the assignor as protocol name, the group epoch as generation."""
    members = tuple(MemberView(m.member_id, m.instance_id, m.client_id, m.client_host, b"", b"")
                    for m in view.members)
    return GroupView(view.group_id, _CLASSIC_STATE[view.state], "consumer", view.assignor_name,
                     view.group_epoch, "", members)
