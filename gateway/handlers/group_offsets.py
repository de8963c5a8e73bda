"""Committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47).

For a consumer-protocol group (KIP-848) OffsetCommit v9's generation is the member epoch and
OffsetFetch v9 may name a member and its epoch; engine/groups/service.py checks both.

Offsets are kept per topic id, so a deleted and re-created topic starts with none.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...engine.groups.offsets import CommittedOffset
from ...engine.groups.types import GroupError
from ..mapping import group_code
from ..protocol.subscription import subscription_topics
from .registry import handles

METADATA_BYTES_MAX = 4096  # Kafka offset.metadata.max.bytes


@handles(8, 2, 9)
async def offset_commit(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    generation = getattr(request, "generation_id_or_member_epoch", getattr(request, "generation_id", -1))
    groups = ctx.engine.groups
    error = groups.validate_commit(request.group_id, request.member_id, generation,
                                   getattr(request, "group_instance_id", None))
    if not request.group_id:
        error = GroupError.INVALID_GROUP_ID
    elif error is GroupError.ILLEGAL_GENERATION and header.api_version >= 9 and groups.describe(request.group_id) is None:
        error = GroupError.GROUP_NOT_FOUND  # Kafka 4.x answers so from v9 on
    if error is not GroupError.NONE:
        return _commit_answer(request, lambda _t, _p: group_code(error))
    now_ms = ctx.engine.clock.now_ms()
    accepted, codes = [], {}
    for topic in request.topics:
        known = ctx.engine.catalog.find(topic.name)
        for p in topic.partitions:
            code = _commit_code(known, p)
            codes[(topic.name, p.partition_index)] = code
            if code == ErrorCode.none:
                value = CommittedOffset(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                        p.committed_metadata, now_ms, known.resource.uid.hex)
                accepted.append((topic.name, known.resource.uid.hex, p.partition_index, value))
    if accepted:
        groups.commit(request.group_id, accepted)
    return _commit_answer(request, lambda t, p: codes[(t, p)])


def _commit_code(topic: Any, partition: Any) -> ErrorCode:
    if topic is None or not 0 <= partition.partition_index < topic.partition_count:
        return ErrorCode.unknown_topic_or_partition
    if partition.committed_metadata is not None and len(partition.committed_metadata.encode()) > METADATA_BYTES_MAX:
        return ErrorCode.offset_metadata_too_large
    return ErrorCode.none


def _commit_answer(request: Any, code: Any) -> dict[str, Any]:
    topics = [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": code(t.name, p.partition_index)}
                                              for p in t.partitions]} for t in request.topics]
    return {"throttle_time": 0, "topics": topics}


@handles(9, 1, 9)
async def offset_fetch(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    if header.api_version >= 8:
        return {"throttle_time": 0, "groups": [_fetch_batched(ctx, g) for g in request.groups]}
    return {"throttle_time": 0, "topics": _fetch_group(ctx, request.group_id, request.topics),
            "error_code": ErrorCode.none}


def _fetch_batched(ctx: Any, group: Any) -> dict[str, Any]:
    """v9+ members of a consumer-protocol group name themselves and their epoch (KIP-848)."""
    error = ctx.engine.groups.validate_fetch(group.group_id, getattr(group, "member_id", None),
                                             getattr(group, "member_epoch", -1))
    if error is not GroupError.NONE:
        return {"group_id": group.group_id, "topics": [], "error_code": group_code(error)}
    return {"group_id": group.group_id, "topics": _fetch_group(ctx, group.group_id, group.topics),
            "error_code": ErrorCode.none}


def _fetch_group(ctx: Any, group_id: str, topics: Any) -> list[dict[str, Any]]:
    if topics is None:
        return _all_committed(ctx, group_id)
    answer = []
    for topic in topics:
        known = ctx.engine.catalog.find(topic.name)
        partitions = [_fetch_one(ctx, group_id, topic.name, known, index) for index in topic.partition_indexes]
        answer.append({"name": topic.name, "partitions": partitions})
    return answer


def _fetch_one(ctx: Any, group_id: str, name: str, topic: Any, index: int) -> dict[str, Any]:
    committed = ctx.engine.groups.committed(group_id, name, index, topic.resource.uid.hex) if topic else None
    if committed is None:
        return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                "error_code": ErrorCode.none}
    return {"partition_index": index, "committed_offset": committed.offset,
            "committed_leader_epoch": committed.leader_epoch, "metadata": committed.metadata or "",
            "error_code": ErrorCode.none}


def _all_committed(ctx: Any, group_id: str) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (name, index), committed in sorted(ctx.engine.groups.offsets.group_offsets(group_id).items()):
        topic = ctx.engine.catalog.find(name)
        if topic is not None and topic.resource.uid.hex == committed.topic_id:
            by_topic.setdefault(name, []).append(_fetch_one(ctx, group_id, name, topic, index))
    return [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]


@handles(47, 0, 0)
async def offset_delete(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    groups = ctx.engine.groups
    view = groups.describe(request.group_id)
    if view is None:
        return {"error_code": ErrorCode.group_id_not_found, "throttle_time": 0, "topics": []}
    subscribed = groups.subscribed_topics(request.group_id, subscription_topics)
    topics = []
    for topic in request.topics:
        indexes = [p.partition_index for p in topic.partitions]
        busy = topic.name in subscribed
        code = ErrorCode.group_subscribed_to_topic if busy else ErrorCode.none
        if not busy:
            groups.offsets.delete_offsets(request.group_id, topic.name, indexes)
        topics.append({"name": topic.name, "partitions": [{"partition_index": i, "error_code": code} for i in indexes]})
    return {"error_code": ErrorCode.none, "throttle_time": 0, "topics": topics}
