"""Server-side assignors of the consumer group protocol (KIP-848, "Assignor" section).

An assignor maps a snapshot of the group (each member's subscribed topic ids and its previous
target assignment) and the subscribed topics' partition counts to a new target assignment.
Both are pure and deterministic: the same spec always gives the same answer, whatever the
order of the mappings, so every replica (and every test run) agrees.

uniform  (Kafka's default): every partition goes to exactly one subscribed member; with equal
         subscriptions the counts differ by at most one. Sticky: a member keeps what it had as
         far as balance allows, so a rebalance moves as few partitions as it can.
range    per topic, the partitions are cut into contiguous ranges over the subscribed members
         sorted by member id; the first (count mod members) get one partition more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .types import Assignment, TopicPartition

UNIFORM = "uniform"
RANGE = "range"


@dataclass(frozen=True, slots=True)
class MemberSpec:
    topics: frozenset[str]       # subscribed topic ids that exist
    current: Assignment          # the member's previous target assignment


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    members: Mapping[str, MemberSpec]
    partitions: Mapping[str, int]  # topic id -> partition count


Assignor = Callable[[AssignmentSpec], dict[str, Assignment]]


def range_assign(spec: AssignmentSpec) -> dict[str, Assignment]:
    result: dict[str, set[TopicPartition]] = {m: set() for m in spec.members}
    for topic, count in sorted(spec.partitions.items()):
        members = _subscribers(spec, topic)
        if not members:
            continue
        base, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            size = base + (1 if index < extra else 0)
            result[member].update((topic, p) for p in range(start, start + size))
            start += size
    return {m: frozenset(tps) for m, tps in result.items()}


def uniform_assign(spec: AssignmentSpec) -> dict[str, Assignment]:
    """Keep current partitions up to each member's fair share, hand the rest to the least
    loaded subscribers, then move partitions from the fullest members while that narrows a
    gap of two or more."""
    eligible = {topic: _subscribers(spec, topic) for topic in spec.partitions}
    result = _keep_sticky(spec, eligible)
    _assign_free(spec, eligible, result)
    _balance(eligible, result)
    return {m: frozenset(tps) for m, tps in result.items()}


ASSIGNORS: dict[str, Assignor] = {UNIFORM: uniform_assign, RANGE: range_assign}


def _subscribers(spec: AssignmentSpec, topic: str) -> list[str]:
    return sorted(m for m, member in spec.members.items() if topic in member.topics)


def _shares(spec: AssignmentSpec, eligible: Mapping[str, list[str]]) -> dict[str, float]:
    """A member's fair share: each topic's partitions split evenly over its subscribers."""
    shares = dict.fromkeys(spec.members, 0.0)
    for topic, members in eligible.items():
        for member in members:
            shares[member] += spec.partitions[topic] / len(members)
    return shares


def _keep_sticky(spec: AssignmentSpec, eligible: Mapping[str, list[str]]) -> dict[str, set[TopicPartition]]:
    shares = _shares(spec, eligible)
    floors = {m: int(share + 1e-9) for m, share in shares.items()}
    spare = sum(spec.partitions[t] for t, members in eligible.items() if members) - sum(floors.values())
    claimed: set[TopicPartition] = set()
    result: dict[str, set[TopicPartition]] = {m: set() for m in spec.members}
    valid: dict[str, list[TopicPartition]] = {}
    for member_id in sorted(spec.members):
        member = spec.members[member_id]
        mine = [tp for tp in sorted(member.current) if _still_valid(spec, member, tp) and tp not in claimed]
        claimed.update(mine)
        valid[member_id] = mine
        result[member_id].update(mine[:floors[member_id]])
    for member_id in sorted(spec.members):  # the remainder: one more for members that had more
        if spare > 0 and len(valid[member_id]) > floors[member_id]:
            result[member_id].add(valid[member_id][floors[member_id]])
            spare -= 1
    return result


def _still_valid(spec: AssignmentSpec, member: MemberSpec, tp: TopicPartition) -> bool:
    topic, partition = tp
    return topic in member.topics and 0 <= partition < spec.partitions.get(topic, 0)


def _assign_free(spec: AssignmentSpec, eligible: Mapping[str, list[str]],
                 result: dict[str, set[TopicPartition]]) -> None:
    taken = set().union(*result.values()) if result else set()
    # Topics with the fewest subscribers first: they have the fewest places to go.
    for topic in sorted(eligible, key=lambda t: (len(eligible[t]), t)):
        members = eligible[topic]
        if not members:
            continue
        for partition in range(spec.partitions[topic]):
            if (topic, partition) not in taken:
                receiver = min(members, key=lambda m: (len(result[m]), m))
                result[receiver].add((topic, partition))


def _balance(eligible: Mapping[str, list[str]], result: dict[str, set[TopicPartition]]) -> None:
    """Each move lowers the sum of squared loads, so this ends."""
    while _move_one(eligible, result):
        pass


def _move_one(eligible: Mapping[str, list[str]], result: dict[str, set[TopicPartition]]) -> bool:
    if not result:
        return False
    lowest = min(len(tps) for tps in result.values())
    for donor in sorted(result, key=lambda m: (-len(result[m]), m)):
        if len(result[donor]) <= lowest + 1:
            return False
        for tp in sorted(result[donor], reverse=True):
            receiver = min(eligible[tp[0]], key=lambda m: (len(result[m]), m))
            if len(result[receiver]) + 1 < len(result[donor]):
                result[donor].remove(tp)
                result[receiver].add(tp)
                return True
    return False
