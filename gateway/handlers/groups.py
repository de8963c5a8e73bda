"""Classic consumer groups: FindCoordinator (10), JoinGroup (11), SyncGroup (14),
Heartbeat (12), LeaveGroup (13), ListGroups (16), DescribeGroups (15), DeleteGroups (42).

This node coordinates every group. JoinGroup and SyncGroup may wait for other members;
the connection's next request waits with them, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...engine.groups.types import JoinRequest, SyncRequest
from ..mapping import group_code
from .common import millis
from .registry import handles

GROUP_KEY = 0
NO_OPERATIONS = -2147483648


@handles(10, 0, 4)
async def find_coordinator(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    if header.api_version >= 4:
        keys = list(request.coordinator_keys)
        return {"throttle_time": 0, "coordinators": [_coordinator(ctx, key, request.key_type) for key in keys]}
    key_type = getattr(request, "key_type", GROUP_KEY)
    return {"throttle_time": 0} | _coordinator(ctx, request.key, key_type)


def _coordinator(ctx: Any, key: str, key_type: int) -> dict[str, Any]:
    settings = ctx.settings
    if key_type != GROUP_KEY:
        return {"key": key, "error_code": ErrorCode.coordinator_not_available, "node_id": -1, "host": "",
                "port": -1, "error_message": "transactions are not supported yet"}
    return {"key": key, "error_code": ErrorCode.none, "node_id": ctx.node_id, "host": settings.advertised_host,
            "port": settings.advertised_port, "error_message": None}


@handles(11, 0, 9)
async def join_group(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    session_ms = millis(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)
    join = JoinRequest(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None), protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols), session_timeout_ms=session_ms,
        rebalance_timeout_ms=session_ms if rebalance is None else millis(rebalance),
        require_known_member_id=header.api_version >= 4, client_id=header.client_id or "",
        client_host=header.client_host, reason=getattr(request, "reason", None),
        skip_assignment_supported=header.api_version >= 9)
    result = await ctx.engine.groups.join(join)
    members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
               for m in result.members]
    return {"throttle_time": 0, "error_code": group_code(result.error), "generation_id": result.generation_id,
            "protocol_type": result.protocol_type, "protocol_name": result.protocol_name or "",
            "leader": result.leader_id, "skip_assignment": result.skip_assignment,
            "member_id": result.member_id, "members": members}


@handles(14, 0, 5)
async def sync_group(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    sync = SyncRequest(
        group_id=request.group_id, member_id=request.member_id, generation_id=request.generation_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None), protocol_name=getattr(request, "protocol_name", None),
        assignments=tuple((a.member_id, a.assignment) for a in request.assignments))
    result = await ctx.engine.groups.sync(sync)
    return {"throttle_time": 0, "error_code": group_code(result.error), "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name, "assignment": result.assignment}


@handles(12, 0, 4)
async def heartbeat(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    error = ctx.engine.groups.heartbeat(request.group_id, request.member_id, request.generation_id,
                                        getattr(request, "group_instance_id", None))
    return {"throttle_time": 0, "error_code": group_code(error)}


@handles(13, 0, 5)
async def leave_group(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    if header.api_version < 3:
        [error] = ctx.engine.groups.leave(request.group_id, [(request.member_id, None)])
        return {"throttle_time": 0, "error_code": group_code(error)}
    leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    errors = ctx.engine.groups.leave(request.group_id, leaving)
    members = [{"member_id": member_id, "group_instance_id": instance_id, "error_code": group_code(error)}
               for (member_id, instance_id), error in zip(leaving, errors)]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "members": members}


@handles(16, 0, 5)
async def list_groups(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    states = {s.lower() for s in (getattr(request, "states_filter", None) or ())}
    types = {t.lower() for t in (getattr(request, "types_filter", None) or ())}
    groups = [{"group_id": row.group_id, "protocol_type": row.protocol_type, "group_state": row.state,
               "group_type": row.group_type}
              for row in ctx.engine.groups.listing()
              if (not states or row.state.lower() in states) and (not types or row.group_type in types)]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "groups": groups}


@handles(15, 0, 5)
async def describe_groups(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "groups": [_describe(ctx, group_id) for group_id in request.groups]}


def _describe(ctx: Any, group_id: str) -> dict[str, Any]:
    groups = ctx.engine.groups
    view = None if groups.is_consumer_group(group_id) else groups.describe(group_id)
    if view is None:  # Kafka describes unknown and consumer-protocol groups as Dead here
        return {"error_code": ErrorCode.none, "group_id": group_id, "group_state": "Dead", "protocol_type": "",
                "protocol_data": "", "members": [], "authorized_operations": NO_OPERATIONS}
    stable = view.state.value == "Stable"
    members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                "client_host": m.client_host, "member_metadata": m.metadata,
                "member_assignment": m.assignment if stable else b""} for m in view.members]
    return {"error_code": ErrorCode.none, "group_id": group_id, "group_state": view.state.value,
            "protocol_type": view.protocol_type, "protocol_data": view.protocol_name, "members": members,
            "authorized_operations": NO_OPERATIONS}


@handles(42, 0, 2)
async def delete_groups(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    results = []
    for group_id in request.groups_names:
        error = ctx.engine.groups.delete(group_id)  # Kafka answers GROUP_ID_NOT_FOUND for "" too
        results.append({"group_id": group_id, "error_code": group_code(error)})
    return {"throttle_time": 0, "results": results}
