"""Values exchanged with the group coordinator state machine (classic protocol).

The coordinator never blocks: a JoinGroup or SyncGroup that must wait for other members is
answered later, as a `Reply` in the `replies` of whichever later call (or `tick`) completes
the rebalance. Every call returns the replies it completes, in the order they should be
sent. Error values are engine words (`GroupError`); the gateway maps them to Kafka codes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class GroupError(enum.Enum):
    NONE = "none"
    UNKNOWN_MEMBER = "unknown member"                   # Kafka UNKNOWN_MEMBER_ID 25
    ILLEGAL_GENERATION = "illegal generation"           # 22
    REBALANCE_IN_PROGRESS = "rebalance in progress"     # 27
    INCONSISTENT_PROTOCOL = "inconsistent protocol"     # 23
    INVALID_SESSION_TIMEOUT = "invalid session timeout" # 26
    INVALID_GROUP_ID = "invalid group id"               # 24
    MEMBER_ID_REQUIRED = "member id required"           # 79 (KIP-394)
    FENCED_INSTANCE_ID = "fenced instance id"           # 82 (KIP-345)
    GROUP_MAX_SIZE_REACHED = "group max size reached"   # 81
    NON_EMPTY_GROUP = "non-empty group"                 # 68
    GROUP_NOT_FOUND = "group not found"                 # 69
    COORDINATOR_NOT_AVAILABLE = "coordinator not available"  # 15 (group is Dead)


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str                  # "" on a first join
    group_instance_id: str | None   # static membership (KIP-345)
    protocol_type: str              # "consumer" for Kafka consumers
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's preference order
    session_timeout_ms: int
    rebalance_timeout_ms: int
    require_known_member_id: bool   # JoinGroup v4+: answer MEMBER_ID_REQUIRED first (KIP-394)
    client_id: str = ""
    client_host: str = ""
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes                 # metadata of the selected protocol


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: GroupError
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    skip_assignment: bool = False   # JoinGroup v9 (KIP-814): static leader rejoining a stable group
    members: tuple[JoinMember, ...] = ()  # only for the leader


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None
    protocol_type: str | None       # SyncGroup v5+: must match the group's, else INCONSISTENT_PROTOCOL
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]  # (member id, assignment); only the leader sends them


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: GroupError
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class Reply:
    """A completed JoinGroup or SyncGroup for one waiting member."""

    group_id: str
    member_id: str                  # the id the request was waiting under
    kind: str                       # "join" or "sync"
    result: JoinResult | SyncResult


@dataclass(slots=True)
class Outcome:
    """What one call produced: its own answer (None if the caller must wait for a Reply
    addressed to it), and replies it completed for other waiting members."""

    answer: JoinResult | SyncResult | GroupError | None
    replies: list[Reply] = field(default_factory=list)
    waiting_as: str = ""            # with answer None: the member id the Reply will carry


@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes                 # selected protocol's metadata (b"" if none selected)
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupView:
    group_id: str
    state: GroupState
    protocol_type: str
    protocol_name: str
    generation_id: int
    leader_id: str
    members: tuple[MemberView, ...]
