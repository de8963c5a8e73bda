"""Classic consumer groups: FindCoordinator (10), JoinGroup (11), SyncGroup (14),
Heartbeat (12), LeaveGroup (13), ListGroups (16), DescribeGroups (15), DeleteGroups (42).

This node coordinates every group. JoinGroup and SyncGroup may wait for other members;
the connection's next request waits with them, as in Kafka.
"""

from __future__ import annotations

from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v6.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest
from kio.schema.leave_group.v5.request import LeaveGroupRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.sync_group.v5.request import SyncGroupRequest

from ...engine.api import JoinRequest, SyncRequest
from ...protocol.answers import (
    DeleteGroupsAnswer,
    DeleteGroupsDeletableGroupResultAnswer,
    DescribeGroupsAnswer,
    DescribeGroupsDescribedGroupAnswer,
    FindCoordinatorAnswer,
    FindCoordinatorCoordinatorAnswer,
    HeartbeatAnswer,
    JoinGroupAnswer,
    JoinGroupMemberAnswer,
    LeaveGroupAnswer,
    LeaveGroupMemberAnswer,
    ListGroupsAnswer,
    ListGroupsListedGroupAnswer,
    SyncGroupAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ..context import Context
from ..mapping import group_code
from .api import handles
from .common import millis
from .metadata import address

GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types; 2 (share groups, v6) is not served
BATCHED_FROM = 4  # FindCoordinator: a list of keys, each answered with its own code and message (KIP-699)
NOT_FOUND_FROM = 6  # DescribeGroups answers GROUP_ID_NOT_FOUND for a group it cannot describe (KIP-1043)
NO_OPERATIONS = -2147483648
NULLABLE_PROTOCOL_FROM = 7  # JoinGroup: from v7 a join without a chosen protocol (an error) names none, as Kafka


@handles(ApiKey.FIND_COORDINATOR, 0, 6)
async def find_coordinator(ctx: Context, header: RequestHeader, request: FindCoordinatorRequest) -> FindCoordinatorAnswer:
    """A found coordinator has a message that is not null, as Kafka 4.4 answers: "NONE" (the
    error's name) in v1-v3, "" in the batched form."""
    if header.api_version >= BATCHED_FROM:
        keys = list(request.coordinator_keys)
        return {"throttle_time": 0, "coordinators": [_coordinator(ctx, key, request.key_type, "", header.peer.listener)
                                                           for key in keys]}
    key_type = getattr(request, "key_type", GROUP_KEY)
    found = _coordinator(ctx, request.key, key_type, "NONE", header.peer.listener)  # type: ignore[attr-defined]  # v0-v3 field
    return {"throttle_time": 0, "error_code": found["error_code"], "error_message": found["error_message"],
            "node_id": found["node_id"], "host": found["host"], "port": found["port"]}


def _coordinator(ctx: Context, key: str, key_type: int, found_message: str,
                 listener: str) -> FindCoordinatorCoordinatorAnswer:
    if key_type not in (GROUP_KEY, TRANSACTION_KEY):  # Kafka 4.4 without share groups answers INVALID_REQUEST too
        return {"key": key, "error_code": ErrorCode.invalid_request, "node_id": -1, "host": "",
                "port": -1, "error_message": f"coordinator key type {key_type} is not served"}
    # A transactional id lives in the coordinator shard its id hashes to, as a group does
    # (engine/transactions/service.py), so both kinds of key find the same coordinator.
    if ctx.groups.coordinates(key):  # this node: the address it advertises on that listener
        host, port = ctx.settings.endpoint(listener)
        return {"key": key, "error_code": ErrorCode.none, "node_id": ctx.node_id, "host": host,
                "port": port, "error_message": found_message}
    node = ctx.coordinator_of(key)  # in a cluster: the node serving the group's coordinator shard
    if node is None:
        return {"key": key, "error_code": ErrorCode.coordinator_not_available, "node_id": -1, "host": "",
                "port": -1, "error_message": "the group's coordinator is moving; try again"}
    host, port = address(ctx, node, listener)
    return {"key": key, "error_code": ErrorCode.none, "node_id": node.node_id, "host": host,
            "port": port, "error_message": found_message}


@handles(ApiKey.JOIN_GROUP, 0, 9)
async def join_group(ctx: Context, header: RequestHeader, request: JoinGroupRequest) -> JoinGroupAnswer:
    session_ms = millis(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)
    join = JoinRequest(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None), protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols), session_timeout_ms=session_ms,
        rebalance_timeout_ms=session_ms if rebalance is None else millis(rebalance),
        require_known_member_id=header.api_version >= 4, client_id=header.client_id or "",
        client_host=header.peer.host, reason=getattr(request, "reason", None),
        skip_assignment_supported=header.api_version >= 9)
    result = await ctx.groups.join(join)
    members: list[JoinGroupMemberAnswer] = [
        {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
        for m in result.members]
    protocol_name = result.protocol_name
    if protocol_name is None and header.api_version < NULLABLE_PROTOCOL_FROM:
        protocol_name = ""
    return {"throttle_time": 0, "error_code": group_code(result.error), "generation_id": result.generation_id,
            "protocol_type": result.protocol_type, "protocol_name": protocol_name,
            "leader": result.leader_id, "skip_assignment": result.skip_assignment,
            "member_id": result.member_id, "members": members}


@handles(ApiKey.SYNC_GROUP, 0, 5)
async def sync_group(ctx: Context, header: RequestHeader, request: SyncGroupRequest) -> SyncGroupAnswer:
    sync = SyncRequest(
        group_id=request.group_id, member_id=request.member_id, generation_id=request.generation_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None), protocol_name=getattr(request, "protocol_name", None),
        assignments=tuple((a.member_id, a.assignment) for a in request.assignments))
    result = await ctx.groups.sync(sync)
    return {"throttle_time": 0, "error_code": group_code(result.error), "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name, "assignment": result.assignment}


@handles(ApiKey.HEARTBEAT, 0, 4)
async def heartbeat(ctx: Context, header: RequestHeader, request: HeartbeatRequest) -> HeartbeatAnswer:
    error = ctx.groups.heartbeat(request.group_id, request.member_id, request.generation_id,
                                 getattr(request, "group_instance_id", None))
    return {"throttle_time": 0, "error_code": group_code(error)}


@handles(ApiKey.LEAVE_GROUP, 0, 5)
async def leave_group(ctx: Context, header: RequestHeader, request: LeaveGroupRequest) -> LeaveGroupAnswer:
    if header.api_version < 3:
        [error] = await ctx.groups.leave(request.group_id, [(request.member_id, None)])  # type: ignore[attr-defined]
        return {"throttle_time": 0, "error_code": group_code(error)}
    leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    errors = await ctx.groups.leave(request.group_id, leaving)
    members: list[LeaveGroupMemberAnswer] = [
        {"member_id": member_id, "group_instance_id": instance_id, "error_code": group_code(error)}
        for (member_id, instance_id), error in zip(leaving, errors, strict=True)]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "members": members}


@handles(ApiKey.LIST_GROUPS, 0, 5)
async def list_groups(ctx: Context, header: RequestHeader, request: ListGroupsRequest) -> ListGroupsAnswer:
    states = {s.lower() for s in (getattr(request, "states_filter", None) or ())}
    types = {t.lower() for t in (getattr(request, "types_filter", None) or ())}
    groups: list[ListGroupsListedGroupAnswer] = [
        {"group_id": row.group_id, "protocol_type": row.protocol_type, "group_state": row.state,
         "group_type": row.group_type}
        for row in ctx.groups.listing()
        if (not states or row.state.lower() in states) and (not types or row.group_type in types)]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "groups": groups}


@handles(ApiKey.DESCRIBE_GROUPS, 0, 6)
async def describe_groups(ctx: Context, header: RequestHeader, request: DescribeGroupsRequest) -> DescribeGroupsAnswer:
    not_found = header.api_version >= NOT_FOUND_FROM
    return {"throttle_time": 0, "groups": [_describe(ctx, group_id, not_found) for group_id in request.groups]}


def _describe(ctx: Context, group_id: str, not_found: bool) -> DescribeGroupsDescribedGroupAnswer:
    groups = ctx.groups
    consumer_group = groups.is_consumer_group(group_id)
    view = None if consumer_group else groups.describe(group_id)
    if view is None:  # Kafka describes unknown and consumer-protocol groups as Dead; from v6 with an error
        dead: DescribeGroupsDescribedGroupAnswer = {
            "error_code": ErrorCode.none, "group_id": group_id, "group_state": "Dead", "protocol_type": "",
            "protocol_data": "", "members": [], "authorized_operations": NO_OPERATIONS}
        if not_found:
            why = "is not a classic group" if consumer_group else "not found"
            dead |= {"error_code": ErrorCode.group_id_not_found, "error_message": f"Group {group_id} {why}."}
        return dead
    stable = view.state.value == "Stable"
    return {"error_code": ErrorCode.none, "group_id": group_id, "group_state": view.state.value,
            "protocol_type": view.protocol_type, "protocol_data": view.protocol_name,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host, "member_metadata": m.metadata,
                         "member_assignment": m.assignment if stable else b""} for m in view.members],
            "authorized_operations": NO_OPERATIONS}


@handles(ApiKey.DELETE_GROUPS, 0, 2)
async def delete_groups(ctx: Context, header: RequestHeader, request: DeleteGroupsRequest) -> DeleteGroupsAnswer:
    results: list[DeleteGroupsDeletableGroupResultAnswer] = []
    for group_id in request.groups_names:
        error = await ctx.groups.delete(group_id)  # Kafka answers GROUP_ID_NOT_FOUND for "" too
        results.append({"group_id": group_id, "error_code": group_code(error)})
    return {"throttle_time": 0, "results": results}
