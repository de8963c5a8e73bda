"""ListPartitionReassignments (46), AlterPartitionReassignments (45), ElectLeaders (43).

In Martlet a reassignment is a move: the admin unloads the partition from the node serving it
and loads it on another, which reads the same files from the store. So an operator's replica
list comes down to its first node, the node wanted as leader (the others are only listed by
Metadata). `ctx.cluster.reassign` hands the moves to the admin; `ctx.cluster.reassignments()`
lists those it has not finished, which ListPartitionReassignments shows as Kafka shows a
reassignment in flight: replicas = target and current leader, adding the target, removing
the current leader.

A list of another length than the topic's replication factor is accepted (the factor is not
changed: it only tells how many nodes Metadata lists), unless the request forbids a change of
factor (v1, KIP-860), which Kafka then refuses.

Leaders are where placement put them, and the leader is by definition the first replica
Metadata lists, i.e. the preferred one: ElectLeaders answers ELECTION_NOT_NEEDED for a placed
partition (Kafka's answer when the preferred replica already leads), for PREFERRED and
UNCLEAN alike. Errors and messages per partition are Kafka's (KRaft's ReplicationControlManager).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kio.schema.alter_partition_reassignments.v1.request import AlterPartitionReassignmentsRequest, ReassignableTopic
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

from ...engine.api import Topic, TopicPartition
from ...protocol.answers import (
    AlterPartitionReassignmentsAnswer,
    AlterPartitionReassignmentsReassignablePartitionAnswer,
    AlterPartitionReassignmentsReassignableTopicAnswer,
    ElectLeadersAnswer,
    ElectLeadersPartitionResultAnswer,
    ElectLeadersReplicaElectionResultAnswer,
    ListPartitionReassignmentsAnswer,
    ListPartitionReassignmentsOngoingPartitionReassignmentAnswer,
    ListPartitionReassignmentsOngoingTopicReassignmentAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ..context import Context
from .api import handles
from .placement import alive_ids, replica_list_error

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders election_type
Moves = dict[TopicPartition, int | None]  # partition -> target node; None cancels
PartitionAnswer = AlterPartitionReassignmentsReassignablePartitionAnswer
OngoingTopicAnswer = ListPartitionReassignmentsOngoingTopicReassignmentAnswer
OngoingPartitionAnswer = ListPartitionReassignmentsOngoingPartitionReassignmentAnswer


# -- ListPartitionReassignments

@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)
async def list_partition_reassignments(ctx: Context, header: RequestHeader,
                                       request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsAnswer:
    pending = ctx.cluster.reassignments()
    if request.topics is not None:  # null lists every reassignment; a list, those of the partitions named
        named = {TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes}
        pending = {tp: target for tp, target in pending.items() if tp in named}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "topics": _ongoing(ctx, pending)}


def _ongoing(ctx: Context, pending: Mapping[TopicPartition, int]) -> list[OngoingTopicAnswer]:
    topics: dict[str, list[OngoingPartitionAnswer]] = {}
    for tp, target in sorted(pending.items()):
        leader = ctx.cluster.leader_of(tp.topic, tp.partition)
        leaving = [] if leader is None or leader.node_id == target else [leader.node_id]
        topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "replicas": [target, *leaving],
                                                "adding_replicas": [target], "removing_replicas": leaving})
    return [{"name": name, "partitions": partitions} for name, partitions in topics.items()]


# -- AlterPartitionReassignments

@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1)
async def alter_partition_reassignments(ctx: Context, header: RequestHeader,
                                        request: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsAnswer:
    moves: Moves = {}
    resizable = getattr(request, "allow_replication_factor_change", True)  # v1 (KIP-860); v0 allows it
    answers = [_alter_topic(ctx, wanted, resizable, moves) for wanted in request.topics]
    if moves:
        await ctx.cluster.reassign(moves)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "responses": answers,
            "allow_replication_factor_change": resizable}


def _alter_topic(ctx: Context, wanted: ReassignableTopic, resizable: bool,
                 moves: Moves) -> AlterPartitionReassignmentsReassignableTopicAnswer:
    topic = ctx.topics.find(wanted.name)
    alive = alive_ids(ctx)
    pending = ctx.cluster.reassignments()
    answers = []
    for partition in wanted.partitions:
        index, replicas = partition.partition_index, partition.replicas
        if topic is None:
            answers.append(_refused(index, ErrorCode.unknown_topic_or_partition,
                                    f"Unable to find a topic named {wanted.name}."))
        elif not 0 <= index < topic.partition_count:
            answers.append(_refused(index, ErrorCode.unknown_topic_or_partition,
                                    f"Unable to find partition {wanted.name}:{index}."))
        elif not resizable and replicas is not None and len(replicas) != topic.replication_factor:
            answers.append(_refused(index, ErrorCode.invalid_replication_factor,
                                    f"The replication factor is changed from {topic.replication_factor} to {len(replicas)}"))
        else:
            answers.append(_alter_partition(TopicPartition(topic.name, index), replicas, alive, pending, moves))
    return {"name": wanted.name, "partitions": answers}


def _alter_partition(tp: TopicPartition, replicas: Iterable[int] | None, alive: set[int],
                     pending: Mapping[TopicPartition, int], moves: Moves) -> PartitionAnswer:
    if replicas is None:  # a cancel: only a move still pending can be
        if tp not in pending and tp not in moves:
            return _refused(tp.partition, ErrorCode.no_reassignment_in_progress, None)
        moves[tp] = None
        return _accepted(tp.partition)
    wanted = list(replicas)
    message = replica_list_error(wanted, alive)
    if message:
        return _refused(tp.partition, ErrorCode.invalid_replica_assignment, message)
    moves[tp] = wanted[0]
    return _accepted(tp.partition)


def _accepted(index: int) -> PartitionAnswer:
    return {"partition_index": index, "error_code": ErrorCode.none, "error_message": None}


def _refused(index: int, code: ErrorCode, message: str | None) -> PartitionAnswer:
    return {"partition_index": index, "error_code": code, "error_message": message}


# -- ElectLeaders

NOT_NEEDED = "Leader election not needed for topic partition."


@handles(ApiKey.ELECT_LEADERS, 0, 2)
async def elect_leaders(ctx: Context, header: RequestHeader, request: ElectLeadersRequest) -> ElectLeadersAnswer:
    election = getattr(request, "election_type", PREFERRED)  # v0 elects the preferred leader
    if request.topic_partitions is None:
        results = [_every_partition(ctx, topic, election) for topic in ctx.topics]
    else:
        results = [_named(ctx, wanted.topic, wanted.partitions, election) for wanted in request.topic_partitions]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "replica_election_results": results}


def _every_partition(ctx: Context, topic: Topic, election: int) -> ElectLeadersReplicaElectionResultAnswer:
    """Null asks for every partition; as Kafka, those that need no election are left out."""
    results = [_election(ctx, topic, index, election) for index in range(topic.partition_count)]
    return {"topic": topic.name,
            "partition_result": [r for r in results if r["error_code"] != ErrorCode.election_not_needed]}


def _named(ctx: Context, name: str, indexes: Iterable[int], election: int) -> ElectLeadersReplicaElectionResultAnswer:
    topic = ctx.topics.find(name)
    results: list[ElectLeadersPartitionResultAnswer] = []
    for index in indexes:
        if topic is None:
            results.append(_elected(index, ErrorCode.unknown_topic_or_partition, f"No such topic as {name}"))
        elif not 0 <= index < topic.partition_count:
            results.append(_elected(index, ErrorCode.unknown_topic_or_partition, f"No such partition as {name}-{index}"))
        else:
            results.append(_election(ctx, topic, index, election))
    return {"topic": name, "partition_result": results}


def _election(ctx: Context, topic: Topic, index: int, election: int) -> ElectLeadersPartitionResultAnswer:
    """What electing a leader of a known partition comes to: placement already chose one."""
    if election not in (PREFERRED, UNCLEAN):
        return _elected(index, ErrorCode.invalid_request, f"Unknown election type {election}")
    if ctx.cluster.leader_of(topic.name, index) is not None:
        return _elected(index, ErrorCode.election_not_needed, NOT_NEEDED)
    if election == PREFERRED:  # nobody serves it yet: the admin places it, no election can
        return _elected(index, ErrorCode.preferred_leader_not_available,
                        f"Failed to elect leader for partition {topic.name}-{index} under strategy PREFERRED")
    return _elected(index, ErrorCode.eligible_leaders_not_available,
                    f"Failed to elect leader for partition {topic.name}-{index} under strategy UNCLEAN")


def _elected(index: int, code: ErrorCode, message: str | None) -> ElectLeadersPartitionResultAnswer:
    return {"partition_id": index, "error_code": code, "error_message": message}
