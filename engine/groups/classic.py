"""The classic consumer-group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as a
deterministic state machine: every call takes `now_ms`, nothing here sleeps, reads a clock
or does I/O. Member ids come from an injected function, so tests are repeatable.

States follow Kafka's ClassicGroupState:
    Empty --join--> PreparingRebalance --all rejoined / deadline--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable --join of a new member, a leave,
    an expired session, changed protocols--> PreparingRebalance
A rebalance that ends with no members leaves the group Empty (its committed offsets stay).

Waiting JoinGroup and SyncGroup requests are answered by `Reply` values in the outcome of
whatever later call completes them (see types.py).

Records out, replay in: each call notes the groups whose durable state it may have changed
(`take_touched`); `record` turns a group into its membership record (membership.py) at the
points Kafka stores a group (Stable or Empty; None in between), and `restore` rebuilds a
group from its last record, giving every member a fresh session from `now_ms`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from .membership import ClassicGroupRecord, ClassicMemberRecord, GroupGone
from .types import (
    GroupError,
    GroupState,
    GroupView,
    JoinMember,
    JoinRequest,
    JoinResult,
    MemberView,
    Outcome,
    Reply,
    SyncRequest,
    SyncResult,
)

E = GroupError
S = GroupState


@dataclass(frozen=True, slots=True)
class GroupLimits:
    session_timeout_ms_min: int = 6_000          # Kafka group.min.session.timeout.ms
    session_timeout_ms_max: int = 1_800_000      # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000      # group.initial.rebalance.delay.ms
    group_size_max: int = 2**31 - 1              # group.max.size


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    last_seen_ms: int
    assignment: bytes = b""
    joining: bool = False      # a JoinGroup of this member waits for the rebalance to complete
    syncing: bool = False      # a SyncGroup of this member waits for the leader's assignment

    def metadata(self, protocol: str | None) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = S.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)       # instance id -> member id
    pending: dict[str, int] = field(default_factory=dict)      # KIP-394 ids handed out -> expiry
    deadline_ms: int | None = None     # rebalance deadline (join phase or sync phase)
    initial_until_ms: int | None = None  # initial rebalance delay of a group that was empty
    started_ms: int = 0


class ClassicCoordinator:
    def __init__(self, limits: GroupLimits, new_member_id: Callable[[str], str]) -> None:
        self.limits = limits
        self.new_member_id = new_member_id
        self.groups: dict[str, Group] = {}
        self._touched: set[str] = set()  # groups whose record may have changed since take_touched

    # -- records

    def take_touched(self) -> set[str]:
        """Groups whose durable state may have changed since the last call."""
        touched, self._touched = self._touched, set()
        return touched

    def record(self, group_id: str) -> ClassicGroupRecord | GroupGone | None:
        """The group's membership record; None while a rebalance is under way (nothing to
        store: a restart resumes from the last stable generation)."""
        group = self.groups.get(group_id)
        if group is None:
            return GroupGone(group_id)
        if group.state not in (S.STABLE, S.EMPTY):
            return None
        members = tuple(ClassicMemberRecord(m.member_id, m.instance_id, m.client_id, m.client_host,
                                            m.session_timeout_ms, m.rebalance_timeout_ms, m.protocol_type,
                                            m.protocols, m.assignment) for m in group.members.values())
        return ClassicGroupRecord(group.group_id, group.generation, group.protocol_type, group.protocol_name,
                                  group.leader_id, members)

    def restore(self, record: ClassicGroupRecord, now_ms: int) -> None:
        """Rebuild a group from its last record; members' sessions start again at `now_ms`."""
        members = {m.member_id: Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                                       m.rebalance_timeout_ms, m.protocol_type, m.protocols, now_ms, m.assignment)
                   for m in record.members}
        static = {m.instance_id: m.member_id for m in record.members if m.instance_id is not None}
        state = S.STABLE if members else S.EMPTY
        self.groups[record.group_id] = Group(record.group_id, state, record.generation, record.protocol_type,
                                             record.protocol_name, record.leader_id, members, static)

    # -- JoinGroup

    def join(self, request: JoinRequest, now_ms: int) -> Outcome:
        error = self._check_join(request)
        if error is not E.NONE:
            return Outcome(JoinResult(error, member_id=request.member_id))
        group = self.groups.setdefault(request.group_id, Group(request.group_id))
        if not self._protocols_fit(group, request):
            return Outcome(JoinResult(E.INCONSISTENT_PROTOCOL, member_id=request.member_id))
        if request.member_id == "":
            return self._join_unknown(group, request, now_ms)
        return self._join_known(group, request, now_ms)

    def _check_join(self, request: JoinRequest) -> GroupError:
        if not request.group_id:
            return E.INVALID_GROUP_ID
        limits = self.limits
        if not limits.session_timeout_ms_min <= request.session_timeout_ms <= limits.session_timeout_ms_max:
            return E.INVALID_SESSION_TIMEOUT
        if not request.protocol_type or not request.protocols:
            return E.INCONSISTENT_PROTOCOL
        group = self.groups.get(request.group_id)
        if group is None and request.member_id:
            return E.UNKNOWN_MEMBER
        return E.NONE

    def _protocols_fit(self, group: Group, request: JoinRequest) -> bool:
        """Kafka's rule: a group with members only takes its protocol type, and a protocol
        list that shares a protocol with every member (the joiner's old list included)."""
        if not group.members:
            return True
        if request.protocol_type != group.protocol_type:
            return False
        offered = {name for name, _ in request.protocols}
        return bool(offered.intersection(*({n for n, _ in m.protocols} for m in group.members.values())))

    def _join_unknown(self, group: Group, request: JoinRequest, now_ms: int) -> Outcome:
        if request.group_instance_id is not None and request.group_instance_id in group.static:
            return self._replace_static(group, request, now_ms)
        if len(group.members) + len(group.pending) >= self.limits.group_size_max:
            return Outcome(JoinResult(E.GROUP_MAX_SIZE_REACHED))
        prefix = request.group_instance_id or request.client_id
        member_id = self.new_member_id(prefix)
        if request.require_known_member_id and request.group_instance_id is None:
            group.pending[member_id] = now_ms + request.session_timeout_ms
            return Outcome(JoinResult(E.MEMBER_ID_REQUIRED, member_id=member_id))
        return self._add_member(group, request, member_id, now_ms)

    def _join_known(self, group: Group, request: JoinRequest, now_ms: int) -> Outcome:
        member_id = request.member_id
        if member_id in group.pending:
            del group.pending[member_id]
            return self._add_member(group, request, member_id, now_ms)
        fenced = self._fenced(group, member_id, request.group_instance_id)
        if fenced is not E.NONE:
            return Outcome(JoinResult(fenced, member_id=member_id))
        member = group.members[member_id]
        changed = member.protocols != request.protocols
        self._refresh(member, request, now_ms)
        if group.state is S.PREPARING_REBALANCE:
            return self._wait_join(group, member, now_ms)
        if changed or member_id == group.leader_id or group.state is S.EMPTY:
            return self._rebalance_and_wait(group, member, now_ms)
        return Outcome(self._join_result(group, member))  # a member that missed its join answer

    def _add_member(self, group: Group, request: JoinRequest, member_id: str, now_ms: int) -> Outcome:
        member = Member(member_id, request.group_instance_id, request.client_id, request.client_host,
                        request.session_timeout_ms, request.rebalance_timeout_ms, request.protocol_type,
                        request.protocols, now_ms)
        if not group.members:  # the first member names the type; an Empty group keeps it, as in Kafka
            group.protocol_type = request.protocol_type
        group.members[member_id] = member
        if member.instance_id is not None:
            group.static[member.instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        return self._rebalance_and_wait(group, member, now_ms)

    def _replace_static(self, group: Group, request: JoinRequest, now_ms: int) -> Outcome:
        """KIP-345: a static member that restarts takes over its old member id's place."""
        assert request.group_instance_id is not None
        self._touched.add(group.group_id)
        old_id = group.static[request.group_instance_id]
        old = group.members[old_id]
        replies = self._fence_waiters(group, old)
        new_id = self.new_member_id(request.group_instance_id)
        old.member_id = new_id
        old.joining = old.syncing = False
        self._refresh(old, request, now_ms)
        # same place in the member order: the protocol vote's tie-break follows that order
        group.members = {new_id if member_id == old_id else member_id: member
                         for member_id, member in group.members.items()}
        group.static[request.group_instance_id] = new_id
        was_leader = group.leader_id == old_id
        if was_leader:
            group.leader_id = new_id
        if group.state is S.STABLE and self._select_protocol(group) == group.protocol_name:
            # Kafka: no rebalance; the member gets its old assignment through SyncGroup
            return Outcome(self._static_rejoin_result(group, old, old_id, was_leader, request), replies)
        outcome = self._rebalance_and_wait(group, old, now_ms)
        outcome.replies[:0] = replies
        return outcome

    def _static_rejoin_result(self, group: Group, member: Member, old_id: str, was_leader: bool,
                              request: JoinRequest) -> JoinResult:
        """A restarted static leader (KIP-814): from JoinGroup v9 it is told it leads but may
        skip the assignment; older clients are named a follower (the old id leads) so they
        just sync and get their old assignment."""
        result = self._join_result(group, member)
        if not was_leader:
            return result
        if request.skip_assignment_supported:
            return replace(result, skip_assignment=True)
        return replace(result, leader_id=old_id, members=())

    def _refresh(self, member: Member, request: JoinRequest, now_ms: int) -> None:
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.client_id = request.client_id or member.client_id
        member.client_host = request.client_host or member.client_host
        member.last_seen_ms = now_ms

    def _rebalance_and_wait(self, group: Group, member: Member, now_ms: int) -> Outcome:
        replies = self._prepare_rebalance(group, now_ms)
        outcome = self._wait_join(group, member, now_ms)
        outcome.replies[:0] = replies
        return outcome

    def _wait_join(self, group: Group, member: Member, now_ms: int) -> Outcome:
        member.joining = True
        if group.initial_until_ms is not None and group.deadline_ms is not None:
            span = self.limits.initial_rebalance_delay_ms
            group.initial_until_ms = min(max(group.initial_until_ms, now_ms + span), group.deadline_ms)
        return Outcome(None, self._maybe_complete_join(group, now_ms), waiting_as=member.member_id)

    # -- rebalance phases

    def _prepare_rebalance(self, group: Group, now_ms: int) -> list[Reply]:
        if group.state is S.PREPARING_REBALANCE:
            return []
        replies = [self._sync_reply(group, m, SyncResult(E.REBALANCE_IN_PROGRESS))
                   for m in group.members.values() if m.syncing]
        for member in group.members.values():
            if member.syncing:
                member.last_seen_ms = now_ms  # its session restarts when it is answered
            member.syncing = False
        was_empty = group.state is S.EMPTY
        group.state = S.PREPARING_REBALANCE
        group.started_ms = now_ms
        group.deadline_ms = now_ms + max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        delay = self.limits.initial_rebalance_delay_ms
        group.initial_until_ms = min(now_ms + delay, group.deadline_ms) if was_empty and delay > 0 else None
        return replies

    def _maybe_complete_join(self, group: Group, now_ms: int) -> list[Reply]:
        if group.state is not S.PREPARING_REBALANCE:
            return []
        if group.initial_until_ms is not None and now_ms < group.initial_until_ms:
            return []
        # Ids handed out but not yet used (KIP-394) hold the join back, as in Kafka, unless
        # nobody is left to wait for; the group then empties and they join afresh.
        everyone = all(m.joining for m in group.members.values()) and not (group.pending and group.members)
        if not everyone and (group.deadline_ms is None or now_ms < group.deadline_ms):
            return []
        return self._complete_join(group, now_ms)

    def _complete_join(self, group: Group, now_ms: int) -> list[Reply]:
        self._touched.add(group.group_id)
        for member in [m for m in group.members.values() if not m.joining]:
            self._remove(group, member)
        group.generation += 1
        group.initial_until_ms = None
        if not group.members:
            self._become_empty(group)
            return []
        group.protocol_name = self._select_protocol(group)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.state = S.COMPLETING_REBALANCE
        group.deadline_ms = now_ms + max(m.rebalance_timeout_ms for m in group.members.values())
        replies = []
        for member in group.members.values():
            member.joining = False
            member.assignment = b""
            member.last_seen_ms = now_ms
            replies.append(Reply(group.group_id, member.member_id, "join", self._join_result(group, member)))
        return replies

    def _become_empty(self, group: Group) -> None:
        group.state = S.EMPTY
        group.protocol_name = group.leader_id = None  # protocol_type stays: Kafka describes and lists it
        group.deadline_ms = None

    def _select_protocol(self, group: Group) -> str:
        members = list(group.members.values())
        common = set.intersection(*({n for n, _ in m.protocols} for m in members))
        votes: dict[str, int] = {}
        for member in members:
            choice = next(name for name, _ in member.protocols if name in common)
            votes[choice] = votes.get(choice, 0) + 1
        order = [name for name, _ in members[0].protocols if name in votes]
        return max(order, key=lambda name: votes[name])

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        members: tuple[JoinMember, ...] = ()
        if member.member_id == group.leader_id:
            members = tuple(JoinMember(m.member_id, m.instance_id, m.metadata(group.protocol_name))
                            for m in group.members.values())
        return JoinResult(E.NONE, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id or "", member.member_id, False, members)

    # -- SyncGroup

    def sync(self, request: SyncRequest, now_ms: int) -> Outcome:
        group = self.groups.get(request.group_id)
        error = self._check_member(group, request.member_id, request.group_instance_id, request.generation_id)
        if error is E.NONE and group is not None:
            error = self._check_sync_protocol(group, request)
        if error is not E.NONE or group is None:
            return Outcome(SyncResult(error))
        member = group.members[request.member_id]
        member.last_seen_ms = now_ms
        if group.state is S.PREPARING_REBALANCE:
            return Outcome(SyncResult(E.REBALANCE_IN_PROGRESS))
        if group.state is S.STABLE:
            return Outcome(SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment))
        member.syncing = True
        is_leader = member.member_id == group.leader_id
        replies = self._complete_sync(group, dict(request.assignments), now_ms) if is_leader else []
        return Outcome(None, replies, waiting_as=member.member_id)

    def _check_sync_protocol(self, group: Group, request: SyncRequest) -> GroupError:
        if request.protocol_type is not None and request.protocol_type != group.protocol_type:
            return E.INCONSISTENT_PROTOCOL
        if request.protocol_name is not None and request.protocol_name != group.protocol_name:
            return E.INCONSISTENT_PROTOCOL
        return E.NONE

    def _complete_sync(self, group: Group, assignments: dict[str, bytes], now_ms: int) -> list[Reply]:
        self._touched.add(group.group_id)
        group.state = S.STABLE
        group.deadline_ms = None
        replies = []
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
            if member.syncing:
                member.syncing = False
                member.last_seen_ms = now_ms  # as Kafka's propagateAssignment: the session restarts
                result = SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment)
                replies.append(self._sync_reply(group, member, result))
        return replies

    def _sync_reply(self, group: Group, member: Member, result: SyncResult) -> Reply:
        return Reply(group.group_id, member.member_id, "sync", result)

    # -- Heartbeat, LeaveGroup, commits

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, instance_id: str | None,
                  now_ms: int) -> GroupError:
        group = self.groups.get(group_id)
        error = self._check_member(group, member_id, instance_id, generation_id)
        if error is not E.NONE or group is None:
            return error
        group.members[member_id].last_seen_ms = now_ms
        return E.REBALANCE_IN_PROGRESS if group.state is S.PREPARING_REBALANCE else E.NONE

    def validate_commit(self, group_id: str, member_id: str, generation_id: int, instance_id: str | None,
                        now_ms: int) -> GroupError:
        """OffsetCommit rules: members commit in their generation; anyone may commit to a group
        with no members using generation -1 (simple consumers, Flink, Spark, admin tools)."""
        group = self.groups.get(group_id)
        if group is None or group.state is S.EMPTY:
            if generation_id < 0:
                return E.NONE
            return E.ILLEGAL_GENERATION if group is None else E.UNKNOWN_MEMBER
        error = self._check_member(group, member_id, instance_id, generation_id)
        if error is not E.NONE:
            return error
        group.members[member_id].last_seen_ms = now_ms
        return E.REBALANCE_IN_PROGRESS if group.state is S.COMPLETING_REBALANCE else E.NONE

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]], now_ms: int) -> tuple[list[GroupError], list[Reply]]:
        group = self.groups.get(group_id)
        if group is None:
            return [E.UNKNOWN_MEMBER for _ in leaving], []
        errors, replies = [], []
        for member_id, instance_id in leaving:
            member_id = group.static.get(instance_id, member_id) if instance_id and not member_id else member_id
            if group.pending.pop(member_id, None) is not None:
                errors.append(E.NONE)
                replies += self._maybe_complete_join(group, now_ms)
                continue
            error = self._fenced(group, member_id, instance_id)
            errors.append(error)
            if error is E.NONE:
                replies += self._remove_and_rebalance(group, group.members[member_id], now_ms)
        return errors, replies

    def _check_member(self, group: Group | None, member_id: str, instance_id: str | None,
                      generation_id: int) -> GroupError:
        if group is None or group.state is S.DEAD:
            return E.UNKNOWN_MEMBER
        error = self._fenced(group, member_id, instance_id)
        if error is not E.NONE:
            return error
        return E.ILLEGAL_GENERATION if generation_id != group.generation else E.NONE

    def _fenced(self, group: Group, member_id: str, instance_id: str | None) -> GroupError:
        if instance_id is not None and instance_id in group.static and group.static[instance_id] != member_id:
            return E.FENCED_INSTANCE_ID
        return E.NONE if member_id in group.members else E.UNKNOWN_MEMBER

    # -- time

    def tick(self, now_ms: int) -> list[Reply]:
        """Expire pending member ids and silent members, end join and sync phases that ran
        past their deadline."""
        replies: list[Reply] = []
        for group in list(self.groups.values()):
            group.pending = {m: until for m, until in group.pending.items() if until > now_ms}
            for member in [m for m in group.members.values() if self._expired(m, now_ms)]:
                if member.member_id in group.members:  # an earlier removal may have ended the join
                    replies += self._remove_and_rebalance(group, member, now_ms)
            replies += self._phase_deadline(group, now_ms)
        return replies

    def _expired(self, member: Member, now_ms: int) -> bool:
        waiting = member.joining or member.syncing
        return not waiting and member.last_seen_ms + member.session_timeout_ms <= now_ms

    def _phase_deadline(self, group: Group, now_ms: int) -> list[Reply]:
        if group.state is S.PREPARING_REBALANCE:
            if group.initial_until_ms is not None and now_ms >= group.initial_until_ms:
                group.initial_until_ms = None  # the delay is over; now it ends like any join phase
            return self._maybe_complete_join(group, now_ms)
        if group.state is S.COMPLETING_REBALANCE and group.deadline_ms is not None and now_ms >= group.deadline_ms:
            replies = []
            for member in [m for m in group.members.values() if not m.syncing]:
                if member.member_id in group.members:
                    replies += self._remove_and_rebalance(group, member, now_ms)
            return replies
        return []

    def next_deadline_ms(self) -> int | None:
        times: list[int] = []
        for group in self.groups.values():
            times += group.pending.values()
            times += [m.last_seen_ms + m.session_timeout_ms for m in group.members.values()
                      if not (m.joining or m.syncing)]
            if group.state in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE) and group.deadline_ms is not None:
                times.append(group.deadline_ms)
            if group.initial_until_ms is not None:
                times.append(group.initial_until_ms)
        return min(times, default=None)

    # -- membership changes

    def _remove_and_rebalance(self, group: Group, member: Member, now_ms: int) -> list[Reply]:
        replies = self._fence_waiters(group, member, E.UNKNOWN_MEMBER)
        self._remove(group, member)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            replies += self._prepare_rebalance(group, now_ms)
        if group.state is S.PREPARING_REBALANCE:
            if not group.members:
                group.initial_until_ms = None
            replies += self._maybe_complete_join(group, now_ms)
        return replies

    def _remove(self, group: Group, member: Member) -> None:
        self._touched.add(group.group_id)
        del group.members[member.member_id]
        if member.instance_id is not None and group.static.get(member.instance_id) == member.member_id:
            del group.static[member.instance_id]
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _fence_waiters(self, group: Group, member: Member, error: GroupError = E.FENCED_INSTANCE_ID) -> list[Reply]:
        replies = []
        if member.joining:
            replies.append(Reply(group.group_id, member.member_id, "join", JoinResult(error, member_id=member.member_id)))
        if member.syncing:
            replies.append(self._sync_reply(group, member, SyncResult(error)))
        return replies

    # -- admin

    def has(self, group_id: str) -> bool:
        return group_id in self.groups

    def forget(self, group_id: str) -> None:
        """Drop the group from memory only (its coordinator moved to another node)."""
        self.groups.pop(group_id, None)
        self._touched.discard(group_id)

    def describe(self, group_id: str) -> GroupView | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        members = tuple(MemberView(m.member_id, m.instance_id, m.client_id, m.client_host,
                                   m.metadata(group.protocol_name), m.assignment) for m in group.members.values())
        return GroupView(group.group_id, group.state, group.protocol_type or "", group.protocol_name or "",
                         group.generation, group.leader_id or "", members)

    def list(self) -> list[GroupView]:
        return [view for view in map(self.describe, sorted(self.groups)) if view is not None]

    def delete(self, group_id: str) -> GroupError:
        group = self.groups.get(group_id)
        if group is None:
            return E.GROUP_NOT_FOUND
        if group.members or group.state is not S.EMPTY:
            return E.NON_EMPTY_GROUP
        del self.groups[group_id]
        self._touched.add(group_id)
        return E.NONE
