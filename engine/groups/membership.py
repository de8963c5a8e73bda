"""Group membership as records: what a coordinator writes so another (or a restarted) one
can resume a group without a rebalance.

Each record is a snapshot of one group's durable state, written to the group's coordinator shard
(records.py frames it) whenever that state changes, as Kafka writes GroupMetadata records
into `__consumer_offsets`. Replaying a shard keeps the last record of each group; a
`GroupGone` record forgets it. What is left out is what a restart must reset anyway:
session deadlines (every member gets a fresh session timeout from the restart), waiting
JoinGroup/SyncGroup requests, pending member ids (KIP-394) and the partitions a KIP-848
member last reported owning (it reports them again on its next heartbeat).

Payload shapes (JSON, inside the shard record's {"v":1,"type":...,"group":G} object; bytes
as base64; a null where the field says "or null"):

    classic_group   "generation":int, "protocol_type":str|null, "protocol":str|null,
                    "leader":str|null,
                    "members":[[member_id, instance_id|null, client_id, client_host,
                                session_timeout_ms, rebalance_timeout_ms, protocol_type,
                                [[protocol_name, metadata_b64], ...], assignment_b64], ...]
        written when a classic group becomes Stable (the leader's assignment arrived) or
        Empty: the points where Kafka stores the group. A restart in the middle of a
        rebalance resumes at the last stable generation; members that already moved on get
        ILLEGAL_GENERATION and rejoin, as after a Kafka coordinator failover.
    consumer_group  "epoch":int, "assignment_epoch":int, "assignor":str,
                    "topics":[[name, topic_id, partitions], ...],
                    "target":[[member_id, [[topic_id, partition], ...]], ...],
                    "members":[[member_id, instance_id|null, rack_id|null, client_id,
                                client_host, rebalance_timeout_ms, [topic_name, ...],
                                regex|null, server_assignor|null, epoch, previous_epoch,
                                state, assigned, pending], ...]
                    (assigned and pending as [[topic_id, partition], ...])
        written after every change to any of those fields (KIP-848 groups move in small
        steps, each of which a member may have been told about).
    group_gone      (no fields) the group no longer exists at its coordinator.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from .types import Assignment, TopicPartition

JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]


@dataclass(frozen=True, slots=True)
class ClassicMemberRecord:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes


@dataclass(frozen=True, slots=True)
class ClassicGroupRecord:
    group_id: str
    generation: int
    protocol_type: str | None
    protocol_name: str | None
    leader_id: str | None
    members: tuple[ClassicMemberRecord, ...]


@dataclass(frozen=True, slots=True)
class ConsumerMemberRecord:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    epoch: int
    previous_epoch: int
    state: str  # MemberState value
    assigned: Assignment
    pending: Assignment


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    group_id: str
    epoch: int
    assignment_epoch: int
    assignor: str
    topics: tuple[tuple[str, str, int], ...]
    target: tuple[tuple[str, Assignment], ...]
    members: tuple[ConsumerMemberRecord, ...]


@dataclass(frozen=True, slots=True)
class GroupGone:
    group_id: str


GroupRecord = ClassicGroupRecord | ConsumerGroupRecord
MembershipChange = ClassicGroupRecord | ConsumerGroupRecord | GroupGone


# -- to JSON ---------------------------------------------------------------------------------


def fields_of(change: MembershipChange) -> tuple[str, dict[str, JsonValue]]:
    """The record's type name and its fields beyond "v", "type" and "group"."""
    if isinstance(change, ClassicGroupRecord):
        return "classic_group", {
            "generation": change.generation, "protocol_type": change.protocol_type,
            "protocol": change.protocol_name, "leader": change.leader_id,
            "members": [_classic_member(m) for m in change.members]}
    if isinstance(change, ConsumerGroupRecord):
        return "consumer_group", {
            "epoch": change.epoch, "assignment_epoch": change.assignment_epoch, "assignor": change.assignor,
            "topics": [[name, topic_id, count] for name, topic_id, count in change.topics],
            "target": [[member_id, _partitions(a)] for member_id, a in change.target],
            "members": [_consumer_member(m) for m in change.members]}
    return "group_gone", {}


def _classic_member(m: ClassicMemberRecord) -> JsonValue:
    protocols: list[JsonValue] = [[name, _b64(meta)] for name, meta in m.protocols]
    return [m.member_id, m.instance_id, m.client_id, m.client_host, m.session_timeout_ms,
            m.rebalance_timeout_ms, m.protocol_type, protocols, _b64(m.assignment)]


def _consumer_member(m: ConsumerMemberRecord) -> JsonValue:
    names: list[JsonValue] = list(m.subscribed_topic_names)
    return [m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            names, m.subscribed_topic_regex, m.server_assignor, m.epoch, m.previous_epoch, m.state,
            _partitions(m.assigned), _partitions(m.pending)]


def _partitions(assignment: Assignment) -> JsonValue:
    return [[topic_id, partition] for topic_id, partition in sorted(assignment)]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- from JSON (ValueError/TypeError/KeyError on any surprise; records.py makes it CorruptBatch)


def parse(kind: str, group_id: str, body: dict[str, JsonValue]) -> MembershipChange | None:
    """The membership change of record type `kind`, or None if `kind` is not one."""
    if kind == "classic_group":
        members = tuple(_parse_classic_member(m) for m in _list(body["members"]))
        return ClassicGroupRecord(group_id, _int(body["generation"]), _opt_str(body["protocol_type"]),
                                  _opt_str(body["protocol"]), _opt_str(body["leader"]), members)
    if kind == "consumer_group":
        topics = tuple((_str(n), _str(i), _int(c)) for n, i, c in map(_list, _list(body["topics"])))
        target = tuple((_str(m), _parse_partitions(a)) for m, a in map(_list, _list(body["target"])))
        consumer_members = tuple(_parse_consumer_member(m) for m in _list(body["members"]))
        return ConsumerGroupRecord(group_id, _int(body["epoch"]), _int(body["assignment_epoch"]),
                                   _str(body["assignor"]), topics, target, consumer_members)
    if kind == "group_gone":
        return GroupGone(group_id)
    return None


def _parse_classic_member(value: JsonValue) -> ClassicMemberRecord:
    member_id, instance_id, client_id, host, session, rebalance, protocol_type, protocols, assignment = _list(value)
    pairs = tuple((_str(name), _unb64(meta)) for name, meta in map(_list, _list(protocols)))
    return ClassicMemberRecord(_str(member_id), _opt_str(instance_id), _str(client_id), _str(host), _int(session),
                               _int(rebalance), _str(protocol_type), pairs, _unb64(assignment))


def _parse_consumer_member(value: JsonValue) -> ConsumerMemberRecord:
    (member_id, instance_id, rack_id, client_id, host, rebalance, names, regex, assignor, epoch,
     previous_epoch, state, assigned, pending) = _list(value)
    return ConsumerMemberRecord(
        _str(member_id), _opt_str(instance_id), _opt_str(rack_id), _str(client_id), _str(host), _int(rebalance),
        tuple(_str(n) for n in _list(names)), _opt_str(regex), _opt_str(assignor), _int(epoch),
        _int(previous_epoch), _str(state), _parse_partitions(assigned), _parse_partitions(pending))


def _parse_partitions(value: JsonValue) -> Assignment:
    pairs: list[TopicPartition] = [(_str(t), _int(p)) for t, p in map(_list, _list(value))]
    return frozenset(pairs)


def _list(value: JsonValue) -> list[JsonValue]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, not {value!r}")
    return value


def _str(value: JsonValue) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {value!r}")
    return value


def _opt_str(value: JsonValue) -> str | None:
    return None if value is None else _str(value)


def _int(value: JsonValue) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, not {value!r}")
    return value


def _unb64(value: JsonValue) -> bytes:
    return base64.b64decode(_str(value), validate=True)
