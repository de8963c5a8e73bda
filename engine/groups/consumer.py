"""The consumer group protocol (KIP-848, ConsumerGroupHeartbeat) as a deterministic state
machine: every call takes `now_ms`; nothing here sleeps, reads a clock or does I/O. Member
ids of v0 clients that send none come from an injected function (v1 clients bring their own).

Epochs, in the KIP's terms:
    group epoch        bumped whenever membership, a subscription, the chosen assignor or the
                       subscribed topics' partition counts change
    assignment epoch   the group epoch the current target assignment was computed at; the
                       target is recomputed lazily, on the next heartbeat of any member, by the
                       server-side assignor (assignors.py)
    member epoch       the target epoch the member has reconciled to

Reconciliation (the KIP's "Member Reconciliation"; Kafka's CurrentAssignmentBuilder):
    - a member whose epoch is behind the target first loses what the target takes from it:
      its assignment shrinks to (current & target) and the rest is pending revocation; its
      epoch stays (state UNREVOKED) until a heartbeat reports it no longer owns any of those
      partitions, or its rebalance timeout passes (then it is fenced: removed from the group)
    - then it moves to the target epoch and receives the target partitions that no other
      member still holds (assigned or pending revocation); any it must still wait for keep it
      in UNRELEASED until their owners let go, and later heartbeats hand them over
So a partition never has two owners: the server never gives a partition out before its
previous owner's heartbeat says it was revoked.

Static members (KIP-345 carried over): an instance id maps to one member; member_epoch -2 is a
temporary leave that keeps the member's assignment for a session timeout, and a new member
with that instance id takes it over.

Records out, replay in: calls note the groups they may have changed (`take_touched`);
`record` is a group's membership record (membership.py) and `restore` rebuilds the group
from it after a restart or a move, so members keep their ids and epochs: each gets a fresh
session from the restore, is taken to own what it was assigned or asked to revoke until its
next heartbeat says otherwise, and one that was revoking gets a fresh rebalance timeout.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .assignors import ASSIGNORS, UNIFORM, AssignmentSpec, MemberSpec
from .membership import ConsumerGroupRecord, ConsumerMemberRecord, GroupGone
from .types import (
    Assignment,
    ConsumerGroupState,
    ConsumerGroupView,
    ConsumerMemberView,
    GroupError,
    HeartbeatRequest,
    HeartbeatResult,
    TopicLookup,
)

E = GroupError
CS = ConsumerGroupState
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
EMPTY: Assignment = frozenset()


@dataclass(frozen=True, slots=True)
class ConsumerGroupLimits:
    heartbeat_interval_ms: int = 5_000        # Kafka group.consumer.heartbeat.interval.ms
    session_timeout_ms: int = 45_000          # group.consumer.session.timeout.ms
    group_size_max: int = 2**31 - 1           # group.consumer.max.size
    assignors: tuple[str, ...] = (UNIFORM, "range")  # group.consumer.assignors; the first is the default

    def __post_init__(self) -> None:
        assert self.heartbeat_interval_ms > 0 and self.session_timeout_ms > 0
        assert self.assignors and all(name in ASSIGNORS for name in self.assignors), self.assignors


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED = "unrevoked partitions"     # waits for the member to revoke `pending`
    UNRELEASED = "unreleased partitions"   # waits for other members to release target partitions


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 0
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = EMPTY           # what the member may own now
    pending: Assignment = EMPTY            # what it must revoke before it moves on
    owned: Assignment = EMPTY              # what it last reported owning
    session_deadline_ms: int = 0
    revoke_deadline_ms: int | None = None


@dataclass(slots=True)
class Group:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = UNIFORM
    target: dict[str, Assignment] = field(default_factory=dict)
    members: dict[str, Member] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)      # instance id -> member id
    topics: tuple[tuple[str, str, int], ...] = ()             # (name, id, partitions) subscribed

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return CS.EMPTY
        if self.epoch > self.assignment_epoch:
            return CS.ASSIGNING
        settled = all(m.epoch == self.assignment_epoch and m.state is MemberState.STABLE
                      for m in self.members.values())
        return CS.STABLE if settled else CS.RECONCILING


class ConsumerCoordinator:
    def __init__(self, limits: ConsumerGroupLimits, new_member_id: Callable[[], str]) -> None:
        self.limits = limits
        self.new_member_id = new_member_id
        self.groups: dict[str, Group] = {}
        self._touched: set[str] = set()  # groups whose record may have changed since take_touched

    # -- records

    def take_touched(self) -> set[str]:
        """Groups whose durable state may have changed since the last call."""
        touched, self._touched = self._touched, set()
        return touched

    def record(self, group_id: str) -> ConsumerGroupRecord | GroupGone:
        group = self.groups.get(group_id)
        if group is None:
            return GroupGone(group_id)
        members = tuple(ConsumerMemberRecord(
            m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.subscribed_topic_names, m.subscribed_topic_regex, m.server_assignor, m.epoch, m.previous_epoch,
            m.state.value, m.assigned, m.pending) for m in group.members.values())
        return ConsumerGroupRecord(group.group_id, group.epoch, group.assignment_epoch, group.assignor,
                                   group.topics, tuple(group.target.items()), members)

    def restore(self, record: ConsumerGroupRecord, now_ms: int) -> None:
        """Rebuild a group from its last record (see the module docstring for what resets)."""
        group = Group(record.group_id, record.epoch, record.assignment_epoch, record.assignor,
                      dict(record.target), topics=record.topics)
        for m in record.members:
            state = MemberState(m.state)
            revoke_deadline = now_ms + m.rebalance_timeout_ms if state is MemberState.UNREVOKED else None
            group.members[m.member_id] = Member(
                m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.subscribed_topic_names, m.subscribed_topic_regex, m.server_assignor, m.epoch, m.previous_epoch,
                state, m.assigned, m.pending, m.assigned | m.pending,
                now_ms + self.limits.session_timeout_ms, revoke_deadline)
            if m.instance_id is not None:
                group.static[m.instance_id] = m.member_id
        self.groups[record.group_id] = group

    # -- ConsumerGroupHeartbeat

    def heartbeat(self, request: HeartbeatRequest, topics: TopicLookup, now_ms: int) -> HeartbeatResult:
        self._touched.add(request.group_id)
        problem = self._check_request(request)
        if problem is not None:
            return HeartbeatResult(problem[0], message=problem[1])
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request, now_ms)
        group = self.groups.get(request.group_id)
        if group is None and request.member_epoch != JOIN_EPOCH:
            return HeartbeatResult(E.GROUP_NOT_FOUND, message="unknown group")
        group = group or self.groups.setdefault(request.group_id, Group(request.group_id, assignor=self.limits.assignors[0]))
        found = self._member_for(group, request, now_ms)
        if isinstance(found, HeartbeatResult):
            self._forget_if_unused(group)
            return found
        member, changed = found
        return self._heartbeat_member(group, member, request, topics, changed, now_ms)

    def _check_request(self, request: HeartbeatRequest) -> tuple[GroupError, str] | None:
        """Kafka's request validation (GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid)."""
        if not request.group_id:
            return E.INVALID_REQUEST, "GroupId can't be empty."
        if request.instance_id == "" or request.rack_id == "":
            return E.INVALID_REQUEST, "InstanceId and RackId can't be empty."
        if request.member_id_required and not request.member_id:
            return E.INVALID_REQUEST, "MemberId can't be empty."
        epoch = request.member_epoch
        if epoch == JOIN_EPOCH:
            join_problem = self._check_join(request)
            if join_problem is not None:
                return join_problem
        elif epoch < STATIC_LEAVE_EPOCH or not request.member_id:
            return E.INVALID_REQUEST, "MemberEpoch is invalid." if epoch < STATIC_LEAVE_EPOCH else "MemberId can't be empty."
        elif epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
            return E.INVALID_REQUEST, "InstanceId can't be null."
        if request.server_assignor is not None and request.server_assignor not in self.limits.assignors:
            return E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {request.server_assignor} is not supported."
        if request.subscribed_topic_regex is not None and _compile(request.subscribed_topic_regex) is None:
            return E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {request.subscribed_topic_regex!r} is invalid."
        return None

    def _check_join(self, request: HeartbeatRequest) -> tuple[GroupError, str] | None:
        if request.rebalance_timeout_ms < 0:
            return E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
        if request.owned is None or request.owned:
            return E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            return E.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        return None

    def _member_for(self, group: Group, request: HeartbeatRequest, now_ms: int) -> tuple[Member, bool] | HeartbeatResult:
        """The member this heartbeat speaks for, and whether it is new to the group."""
        if request.member_epoch == JOIN_EPOCH:
            return self._join(group, request, now_ms)
        if request.instance_id is not None and group.static.get(request.instance_id, request.member_id) != request.member_id:
            return HeartbeatResult(E.FENCED_INSTANCE_ID, message="another member uses this instance id")
        member = group.members.get(request.member_id)
        if member is None:
            return HeartbeatResult(E.UNKNOWN_MEMBER, message=f"member {request.member_id} is not in the group")
        owned = member.owned if request.owned is None else request.owned
        if not _epoch_acceptable(member, request.member_epoch, owned):
            return HeartbeatResult(E.FENCED_MEMBER_EPOCH,
                                   message=f"member epoch {request.member_epoch} is not {member.epoch}")
        return member, False

    def _join(self, group: Group, request: HeartbeatRequest, now_ms: int) -> tuple[Member, bool] | HeartbeatResult:
        member_id = request.member_id or self.new_member_id()
        instance = request.instance_id
        holder = group.static.get(instance) if instance is not None else None
        if holder is not None and holder != member_id:
            old = group.members[holder]
            if old.epoch != STATIC_LEAVE_EPOCH:
                return HeartbeatResult(E.UNRELEASED_INSTANCE_ID,
                                       message=f"static member {instance} has not left the group yet")
            return self._replace_static(group, old, member_id), False
        member = group.members.get(member_id)
        if member is not None:  # a known member starting over: it owns nothing any more
            member.assigned = member.pending = member.owned = EMPTY
            member.state, member.revoke_deadline_ms = MemberState.STABLE, None
            member.previous_epoch, member.epoch = -1, JOIN_EPOCH
            return member, False
        if len(group.members) >= self.limits.group_size_max:
            return HeartbeatResult(E.GROUP_MAX_SIZE_REACHED, message="the group is full")
        member = group.members[member_id] = Member(member_id, instance, session_deadline_ms=now_ms)
        if instance is not None:
            group.static[instance] = member_id
        return member, True

    def _replace_static(self, group: Group, old: Member, member_id: str) -> Member:
        """A restarted static member takes over its predecessor's epoch and partitions."""
        assert old.instance_id is not None
        old_id = old.member_id
        del group.members[old_id]
        if old_id in group.target:
            group.target[member_id] = group.target.pop(old_id)
        old.member_id = member_id
        old.epoch, old.owned = old.previous_epoch, EMPTY
        group.members[member_id] = old
        group.static[old.instance_id] = member_id
        return old

    def _heartbeat_member(self, group: Group, member: Member, request: HeartbeatRequest, topics: TopicLookup,
                          joined: bool, now_ms: int) -> HeartbeatResult:
        before = member.assigned
        changed = self._update_member(member, request, now_ms) or joined
        changed = self._refresh_topics(group, topics) or changed
        if changed:
            group.epoch += 1
            self._choose_assignor(group)
        if group.epoch > group.assignment_epoch:
            self._compute_target(group, topics)
        self._reconcile(group, member, now_ms)
        send = (request.member_epoch == JOIN_EPOCH or member.assigned != before
                or (request.owned is not None and request.owned != member.assigned))
        return HeartbeatResult(E.NONE, member.member_id, member.epoch, self.limits.heartbeat_interval_ms,
                               member.assigned if send else None)

    def _update_member(self, member: Member, request: HeartbeatRequest, now_ms: int) -> bool:
        """Apply the fields the request carries; True if the subscription or assignor changed."""
        member.session_deadline_ms = now_ms + self.limits.session_timeout_ms
        member.client_id = request.client_id or member.client_id
        member.client_host = request.client_host or member.client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.owned is not None:
            member.owned = request.owned
        old = (member.subscribed_topic_names, member.subscribed_topic_regex, member.server_assignor)
        if request.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(request.subscribed_topic_names)))
        if request.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = request.subscribed_topic_regex or None
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        return old != (member.subscribed_topic_names, member.subscribed_topic_regex, member.server_assignor)

    # -- target assignment

    def _refresh_topics(self, group: Group, topics: TopicLookup) -> bool:
        """Record the subscribed topics' ids and partition counts; True if they changed (a
        topic created, deleted, re-created or grown)."""
        names = set()
        for member in group.members.values():
            names.update(_subscribed_names(member, topics))
        described = []
        for name in sorted(names):
            count, topic_id = topics.partitions_of(name), topics.topic_id_of(name)
            if count is not None and topic_id is not None:
                described.append((name, topic_id, count))
        if tuple(described) == group.topics:
            return False
        group.topics = tuple(described)
        return True

    def _choose_assignor(self, group: Group) -> None:
        """The assignor most members ask for (ties by name), else the configured default."""
        votes: dict[str, int] = {}
        for member in group.members.values():
            if member.server_assignor is not None:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        group.assignor = min(votes, key=lambda name: (-votes[name], name)) if votes else self.limits.assignors[0]

    def _compute_target(self, group: Group, topics: TopicLookup) -> None:
        ids = {name: topic_id for name, topic_id, _ in group.topics}
        partitions = {topic_id: count for _, topic_id, count in group.topics}
        members = {}
        for member_id, member in group.members.items():
            subscribed = frozenset(ids[n] for n in _subscribed_names(member, topics) if n in ids)
            members[member_id] = MemberSpec(subscribed, group.target.get(member_id, EMPTY))
        group.target = ASSIGNORS[group.assignor](AssignmentSpec(members, partitions))
        group.assignment_epoch = group.epoch

    # -- reconciliation

    def _reconcile(self, group: Group, member: Member, now_ms: int) -> None:
        if member.state is MemberState.UNREVOKED:
            if member.owned & member.pending:
                return
            member.pending, member.state, member.revoke_deadline_ms = EMPTY, MemberState.STABLE, None
            # the target may have moved on while it revoked: anything more it must give up goes
            # through another revocation, never silently (its answer may be lost)
        if member.epoch != group.assignment_epoch or member.state is MemberState.UNRELEASED:
            target = group.target.get(member.member_id, EMPTY)
            revoke = member.assigned - target
            if revoke:
                member.assigned, member.pending = member.assigned & target, revoke
                member.state, member.revoke_deadline_ms = MemberState.UNREVOKED, now_ms + member.rebalance_timeout_ms
                return
            self._advance(group, member)

    def _advance(self, group: Group, member: Member) -> None:
        """Move to the target epoch with every target partition nobody else still holds."""
        target = group.target.get(member.member_id, EMPTY)
        held = _held_by_others(group, member)
        if member.epoch != group.assignment_epoch:
            member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch
        member.assigned = (member.assigned & target) | (target - held)
        member.state = MemberState.UNRELEASED if member.assigned != target else MemberState.STABLE

    # -- leaving and time

    def _leave(self, request: HeartbeatRequest, now_ms: int) -> HeartbeatResult:
        group = self.groups.get(request.group_id)
        member = group.members.get(request.member_id) if group is not None else None
        if group is None or member is None:
            return HeartbeatResult(E.UNKNOWN_MEMBER, message=f"member {request.member_id} is not in the group")
        if request.instance_id is not None and member.instance_id != request.instance_id:
            return HeartbeatResult(E.FENCED_INSTANCE_ID, message="another member uses this instance id")
        if request.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            member.previous_epoch, member.epoch = member.epoch, STATIC_LEAVE_EPOCH
            member.session_deadline_ms = now_ms + self.limits.session_timeout_ms
        else:
            self._remove(group, member)
        return HeartbeatResult(E.NONE, request.member_id, request.member_epoch)

    def _remove(self, group: Group, member: Member) -> None:
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        if member.instance_id is not None and group.static.get(member.instance_id) == member.member_id:
            del group.static[member.instance_id]
        group.epoch += 1
        self._choose_assignor(group)

    def _forget_if_unused(self, group: Group) -> None:
        """A join refused before the group had any member must not leave an empty group behind."""
        if not group.members and group.epoch == 0:
            del self.groups[group.group_id]

    def tick(self, now_ms: int) -> None:
        """Remove members whose session expired or that did not revoke within their
        rebalance timeout (fenced)."""
        for group in self.groups.values():
            for member in list(group.members.values()):
                late = member.revoke_deadline_ms is not None and member.revoke_deadline_ms <= now_ms
                if late or member.session_deadline_ms <= now_ms:
                    self._remove(group, member)
                    self._touched.add(group.group_id)

    def next_deadline_ms(self) -> int | None:
        times = []
        for group in self.groups.values():
            for member in group.members.values():
                times.append(member.session_deadline_ms)
                if member.revoke_deadline_ms is not None:
                    times.append(member.revoke_deadline_ms)
        return min(times, default=None)

    # -- offsets

    def validate_commit(self, group_id: str, member_id: str, member_epoch: int) -> GroupError:
        """OffsetCommit v9+ names the member epoch. With no members, a simple commit
        (epoch < 0) is allowed; otherwise the member must exist with exactly this epoch."""
        group = self.groups.get(group_id)
        if group is None or (not group.members and member_epoch < 0):
            return E.NONE if member_epoch < 0 else E.UNKNOWN_MEMBER
        return self._check_epoch(group, member_id, member_epoch)

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> GroupError:
        """OffsetFetch v9+: a member that names itself must be current (admin tools do not)."""
        group = self.groups.get(group_id)
        if member_id is None or member_epoch < 0 or group is None:
            return E.NONE
        return self._check_epoch(group, member_id, member_epoch)

    def _check_epoch(self, group: Group, member_id: str, member_epoch: int) -> GroupError:
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER
        if member_epoch > member.epoch:
            return E.FENCED_MEMBER_EPOCH
        return E.STALE_MEMBER_EPOCH if member_epoch < member.epoch else E.NONE

    # -- admin

    def has(self, group_id: str) -> bool:
        return group_id in self.groups

    def forget(self, group_id: str) -> None:
        """Drop the group from memory only (its coordinator moved to another node)."""
        self.groups.pop(group_id, None)
        self._touched.discard(group_id)

    def is_empty(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is None or not group.members

    def describe(self, group_id: str, topics: TopicLookup | None = None) -> ConsumerGroupView | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        members = tuple(self._member_view(group, m, topics) for m in group.members.values())
        return ConsumerGroupView(group.group_id, group.state(), group.epoch, group.assignment_epoch,
                                 group.assignor, members)

    def _member_view(self, group: Group, member: Member, topics: TopicLookup | None) -> ConsumerMemberView:
        return ConsumerMemberView(member.member_id, member.instance_id, member.rack_id, member.client_id,
                                  member.client_host, member.epoch, member.subscribed_topic_names,
                                  member.subscribed_topic_regex, member.assigned,
                                  group.target.get(member.member_id, EMPTY))

    def list(self) -> list[ConsumerGroupView]:
        return [view for view in map(self.describe, sorted(self.groups)) if view is not None]

    def delete(self, group_id: str) -> GroupError:
        group = self.groups.get(group_id)
        if group is None:
            return E.GROUP_NOT_FOUND
        if group.members:
            return E.NON_EMPTY_GROUP
        del self.groups[group_id]
        self._touched.add(group_id)
        return E.NONE


def _epoch_acceptable(member: Member, epoch: int, owned: Assignment) -> bool:
    """KIP-848: the current epoch, or the previous one when the answer that moved the member
    on may have been lost (then it must not own anything beyond its assignment)."""
    if epoch == member.epoch:
        return True
    return epoch < member.epoch and epoch == member.previous_epoch and owned <= member.assigned


def _held_by_others(group: Group, member: Member) -> Assignment:
    held: set[tuple[str, int]] = set()
    for other in group.members.values():
        if other is not member:
            held |= other.assigned | other.pending
    return frozenset(held)


def _subscribed_names(member: Member, topics: TopicLookup) -> set[str]:
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        pattern = _compile(member.subscribed_topic_regex)
        if pattern is not None:
            names.update(name for name in topics.names() if pattern.fullmatch(name))
    return names


def _compile(regex: str) -> re.Pattern[str] | None:
    try:
        return re.compile(regex)
    except re.error:
        return None
