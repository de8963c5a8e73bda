"""Values exchanged with the group coordinator state machines (classic protocol, and the
consumer protocol of KIP-848 at the end of this module).

The coordinator never blocks: a JoinGroup or SyncGroup that must wait for other members is
answered later, as a `Reply` in the `replies` of whichever later call (or `tick`) completes
the rebalance. Every call returns the replies it completes, in the order they should be
sent. Error values are engine words (`GroupError`); the gateway maps them to Kafka codes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
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
    NOT_COORDINATOR = "not coordinator"                 # 16: another node coordinates the group
    # consumer group protocol (KIP-848)
    FENCED_MEMBER_EPOCH = "fenced member epoch"         # 110
    STALE_MEMBER_EPOCH = "stale member epoch"           # 113
    UNRELEASED_INSTANCE_ID = "unreleased instance id"   # 111
    UNSUPPORTED_ASSIGNOR = "unsupported assignor"       # 112
    INVALID_REQUEST = "invalid request"                 # 42
    INVALID_REGULAR_EXPRESSION = "invalid regular expression"  # 128


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
    skip_assignment_supported: bool = False  # JoinGroup v9+ (KIP-814)


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


# -- consumer group protocol (KIP-848): ConsumerGroupHeartbeat and ConsumerGroupDescribe

TopicPartition = tuple[str, int]  # (topic id, partition index): assignments name topics by id
Assignment = frozenset[TopicPartition]


class ConsumerGroupState(enum.Enum):
    """Kafka's ConsumerGroup.ConsumerGroupState, as ListGroups and ConsumerGroupDescribe name it."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"        # the group epoch moved past the target assignment's epoch
    RECONCILING = "Reconciling"    # some member has not reached the target assignment yet
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class TopicLookup:
    """The catalog as the consumer-protocol machine may see it (read-only, injected per call)."""

    partitions_of: Callable[[str], int | None]  # topic name -> partition count, None if unknown
    topic_id_of: Callable[[str], str | None]     # topic name -> topic id (the gateway's UUID, as text)
    names: Callable[[], Iterable[str]]           # every topic name, for regex subscriptions


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat. None in an optional field means "unchanged since last time"."""

    group_id: str
    member_id: str                      # "" only from a v0 client joining: the coordinator names it
    member_epoch: int                   # 0 join, -1 leave, -2 static member leaving for a while
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None     # partitions the member reports owning
    client_id: str = ""
    client_host: str = ""
    member_id_required: bool = False    # v1+: the client generates its member id (KIP-1082)


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: GroupError
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged, the member keeps what it was told
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerMemberView:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    member_epoch: int
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: Assignment
    target_assignment: Assignment


@dataclass(frozen=True, slots=True)
class ConsumerGroupView:
    group_id: str
    state: ConsumerGroupState
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[ConsumerMemberView, ...]


@dataclass(frozen=True, slots=True)
class ListedGroup:
    """One ListGroups row, for either kind of group."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str                     # "classic" or "consumer"
