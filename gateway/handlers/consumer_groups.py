"""Consumer groups of the KIP-848 protocol: ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69).

Assignments travel as topic ids; the engine's machine keeps them as the catalog's topic uuid
in hex, and this module turns them back into UUIDs (and names, for Describe). The heartbeat
never waits: a member learns of a new assignment on its next heartbeat.
"""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest, TopicPartitions
from kio.schema.errors import ErrorCode

from ...engine.api import Assignment, ConsumerGroupView, GroupError, HeartbeatRequest
from ...protocol.answers import (
    ConsumerGroupDescribeAnswer,
    ConsumerGroupDescribeAssignmentAnswer,
    ConsumerGroupDescribeDescribedGroupAnswer,
    ConsumerGroupHeartbeatAnswer,
    ConsumerGroupHeartbeatAssignmentAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ..context import Context
from ..mapping import group_code
from .api import handles
from .common import millis

NO_OPERATIONS = -2147483648
CONSUMER_MEMBER = 1  # ConsumerGroupDescribe v1 member_type: +1 for a consumer-protocol member


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1)
async def consumer_group_heartbeat(ctx: Context, header: RequestHeader,
                                   request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatAnswer:
    result = await ctx.groups.consumer_heartbeat(_heartbeat_request(header, request), ctx.topics.lookup())
    assignment: ConsumerGroupHeartbeatAssignmentAnswer | None = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": topic_id, "partitions": partitions}
                                           for topic_id, partitions in _by_topic(result.assignment)]}
    return {"throttle_time": 0, "error_code": group_code(result.error), "error_message": result.message,
            "member_id": result.member_id, "member_epoch": result.member_epoch,
            "heartbeat_interval": result.heartbeat_interval_ms, "assignment": assignment}


def _heartbeat_request(header: RequestHeader, request: ConsumerGroupHeartbeatRequest) -> HeartbeatRequest:
    names = request.subscribed_topic_names
    return HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=millis(request.rebalance_timeout),
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor, owned=_owned(request.topic_partitions),
        client_id=header.client_id or "", client_host=header.peer.host,
        member_id_required=header.api_version >= 1)


def _owned(topic_partitions: Iterable[TopicPartitions] | None) -> Assignment | None:
    if topic_partitions is None:
        return None
    return frozenset((tp.topic_id.hex, int(p)) for tp in topic_partitions if tp.topic_id is not None
                     for p in tp.partitions)


def _by_topic(assignment: Iterable[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    grouped: dict[str, list[int]] = {}
    for topic_id, partition in sorted(assignment):
        grouped.setdefault(topic_id, []).append(partition)
    return list(grouped.items())


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
async def consumer_group_describe(ctx: Context, header: RequestHeader,
                                  request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeAnswer:
    lookup = ctx.topics.lookup()
    names = {topic.resource.uid.hex: topic.name for topic in ctx.topics}
    groups = []
    for group_id in request.group_ids:
        view = ctx.groups.describe_consumer(group_id, lookup)
        groups.append(_not_found(ctx, group_id) if isinstance(view, GroupError) else _described(view, names))
    return {"throttle_time": 0, "groups": groups}


def _not_found(ctx: Context, group_id: str) -> ConsumerGroupDescribeDescribedGroupAnswer:
    known = ctx.groups.describe(group_id) is not None
    message = f"Group {group_id} is not a consumer group." if known else f"Group {group_id} not found."
    # Kafka fills nothing else in: the schema's defaults (no state, epochs 0)
    return {"error_code": ErrorCode.group_id_not_found, "error_message": message, "group_id": group_id,
            "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
            "members": [], "authorized_operations": NO_OPERATIONS}


def _described(view: ConsumerGroupView, names: dict[str, str]) -> ConsumerGroupDescribeDescribedGroupAnswer:
    return {"error_code": ErrorCode.none, "error_message": None, "group_id": view.group_id,
            "group_state": view.state.value, "group_epoch": view.group_epoch,
            "assignment_epoch": view.assignment_epoch, "assignor_name": view.assignor_name,
            "members": [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                         "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                         "subscribed_topic_names": list(m.subscribed_topic_names),
                         "subscribed_topic_regex": m.subscribed_topic_regex or "",  # Kafka: "" for none, not null
                         "assignment": _described_assignment(m.assignment, names),
                         "target_assignment": _described_assignment(m.target_assignment, names),
                         "member_type": CONSUMER_MEMBER} for m in view.members],
            "authorized_operations": NO_OPERATIONS}


def _described_assignment(assignment: Assignment, names: dict[str, str]) -> ConsumerGroupDescribeAssignmentAnswer:
    return {"topic_partitions": [{"topic_id": topic_id, "topic_name": names[topic_id], "partitions": partitions}
                                 for topic_id, partitions in _by_topic(assignment) if topic_id in names]}
