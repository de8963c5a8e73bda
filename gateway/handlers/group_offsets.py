"""Committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47).

For a consumer-protocol group (KIP-848) OffsetCommit v9's generation is the member epoch and
OffsetFetch v9 may name a member and its epoch; engine/groups/service.py checks both.

Offsets are kept per topic id, so a deleted and re-created topic starts with none. From v10
both APIs name topics by id (Kafka 4.1); an id no topic has is answered UNKNOWN_TOPIC_ID.

A commit is answered once its offsets are written to the store, or after COMMIT_TIMEOUT_S
(Kafka's offsets.commit.timeout.ms) with COORDINATOR_NOT_AVAILABLE: what Kafka's group
coordinator answers when the write of a commit times out or fails. The Java consumer and
librdkafka retry it (after looking the coordinator up again, which names this node), so a
store outage delays commits instead of failing them. The timed out write still goes on and
is applied when the store answers, as in Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v10.request import OffsetCommitRequest, OffsetCommitRequestPartition
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_fetch.v10.request import OffsetFetchRequest, OffsetFetchRequestGroup

from ...engine.api import CommittedOffset, GroupError, Topic
from ...protocol.answers import (
    OffsetCommitAnswer,
    OffsetCommitTopicAnswer,
    OffsetDeleteAnswer,
    OffsetDeleteTopicAnswer,
    OffsetFetchAnswer,
    OffsetFetchGroupAnswer,
    OffsetFetchPartitionsAnswer,
    OffsetFetchTopicsAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ...protocol.subscription import subscription_topics
from ..changes import within
from ..context import Context
from ..mapping import group_code
from .api import handles

METADATA_BYTES_MAX = 4096  # Kafka offset.metadata.max.bytes
COMMIT_TIMEOUT_S = 5.0  # Kafka offsets.commit.timeout.ms
TOPIC_IDS_FROM = 10  # both APIs
CodeOf = Callable[[str, int], ErrorCode]


def _named(ctx: Context, entry: object) -> tuple[str, Topic | None, uuid.UUID | None]:
    """(the topic's name, the topic if it exists, the id the request used if it used one)."""
    topic_id = getattr(entry, "topic_id", None)
    if topic_id is None:
        name: str = getattr(entry, "name", "")
        return name, ctx.topics.find(name), None
    topic = ctx.topics.by_id(topic_id)
    return (topic.name if topic else ""), topic, topic_id


@handles(ApiKey.OFFSET_COMMIT, 2, 10)
async def offset_commit(ctx: Context, header: RequestHeader, request: OffsetCommitRequest) -> OffsetCommitAnswer:
    generation = getattr(request, "generation_id_or_member_epoch", getattr(request, "generation_id", -1))
    groups = ctx.groups
    error = groups.validate_commit(request.group_id, request.member_id, generation,
                                   getattr(request, "group_instance_id", None))
    if not request.group_id:
        error = GroupError.INVALID_GROUP_ID
    elif error is GroupError.ILLEGAL_GENERATION and header.api_version >= 9 and groups.describe(request.group_id) is None:
        error = GroupError.GROUP_NOT_FOUND  # Kafka 4.x answers so from v9 on
    if error is not GroupError.NONE:
        return _commit_answer(request, lambda _t, _p: group_code(error))
    now_ms = ctx.clock.now_ms()
    accepted: list[tuple[str, str, int, CommittedOffset]] = []
    codes: dict[tuple[str, int], ErrorCode] = {}
    for topic in request.topics:
        name, known, topic_id = _named(ctx, topic)
        for p in topic.partitions:
            code = _commit_code(known, p, topic_id)
            codes[(_key(topic), p.partition_index)] = code
            if known is not None and code == ErrorCode.none:
                value = CommittedOffset(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                        p.committed_metadata, now_ms, known.resource.uid.hex)
                accepted.append((name, known.resource.uid.hex, p.partition_index, value))
    if accepted and not await _written(groups.commit(request.group_id, accepted)):
        for topic in request.topics:
            for p in topic.partitions:
                if codes[(_key(topic), p.partition_index)] == ErrorCode.none:
                    codes[(_key(topic), p.partition_index)] = ErrorCode.coordinator_not_available
    return _commit_answer(request, lambda t, p: codes[(t, p)])


def _key(entry: object) -> str:
    """How the request named a topic, as a key: its name, or its id from v10."""
    topic_id = getattr(entry, "topic_id", None)
    return str(topic_id) if topic_id is not None else getattr(entry, "name", "")


async def _written(commit: Awaitable[None]) -> bool:
    """True once the commit is in the store; False if the store failed it or did not take
    it within COMMIT_TIMEOUT_S (see the header)."""
    try:
        await within(commit, COMMIT_TIMEOUT_S)
    except (TimeoutError, OSError):
        return False
    return True


def _commit_code(topic: Topic | None, partition: OffsetCommitRequestPartition, topic_id: uuid.UUID | None) -> ErrorCode:
    if topic is None and topic_id is not None:
        return ErrorCode.unknown_topic_id
    if topic is None or not 0 <= partition.partition_index < topic.partition_count:
        return ErrorCode.unknown_topic_or_partition
    if partition.committed_metadata is not None and len(partition.committed_metadata.encode()) > METADATA_BYTES_MAX:
        return ErrorCode.offset_metadata_too_large
    return ErrorCode.none


def _commit_answer(request: OffsetCommitRequest, code: CodeOf) -> OffsetCommitAnswer:
    topics: list[OffsetCommitTopicAnswer] = [
        {"name": getattr(t, "name", ""), "topic_id": getattr(t, "topic_id", None),
         "partitions": [{"partition_index": p.partition_index, "error_code": code(_key(t), p.partition_index)}
                        for p in t.partitions]}
        for t in request.topics]
    return {"throttle_time": 0, "topics": topics}


@handles(ApiKey.OFFSET_FETCH, 1, 10)
async def offset_fetch(ctx: Context, header: RequestHeader, request: OffsetFetchRequest) -> OffsetFetchAnswer:
    if header.api_version >= 8:
        by_id = header.api_version >= TOPIC_IDS_FROM
        stable = bool(getattr(request, "require_stable", False))
        return {"throttle_time": 0, "groups": [_fetch_batched(ctx, g, by_id, stable) for g in request.groups]}
    # v1-v7: one group, named at the top level; its answer's topics have the same fields
    group_id: str = request.group_id  # type: ignore[attr-defined]
    if not ctx.groups.coordinates(group_id):
        return {"throttle_time": 0, "topics": [], "error_code": ErrorCode.not_coordinator}
    stable = bool(getattr(request, "require_stable", False))
    topics = _fetch_group(ctx, group_id, request.topics, False, stable)  # type: ignore[attr-defined]
    return {"throttle_time": 0, "topics": topics, "error_code": ErrorCode.none}


def _fetch_batched(ctx: Context, group: OffsetFetchRequestGroup, by_id: bool, stable: bool) -> OffsetFetchGroupAnswer:
    """v9+ members of a consumer-protocol group name themselves and their epoch (KIP-848)."""
    error = ctx.groups.validate_fetch(group.group_id, getattr(group, "member_id", None),
                                      getattr(group, "member_epoch", -1))
    if error is not GroupError.NONE:
        return {"group_id": group.group_id, "topics": [], "error_code": group_code(error)}
    return {"group_id": group.group_id, "topics": _fetch_group(ctx, group.group_id, group.topics, by_id, stable),
            "error_code": ErrorCode.none}


class _Wanted(Protocol):
    """What OffsetFetch asks of one topic (v1-v7 and v8+ name the fields alike; v10 names
    the topic by `topic_id` instead of `name`)."""

    @property
    def partition_indexes(self) -> tuple[int, ...]: ...


def _fetch_group(ctx: Context, group_id: str, topics: Iterable[_Wanted] | None,
                 by_id: bool, stable: bool) -> list[OffsetFetchTopicsAnswer]:
    """The committed offsets asked for (all of the group's when `topics` is None); topics
    are named by id in the answer when `by_id` (v10+), else by name only. With `stable`
    (require_stable, KIP-447) an offset an open transaction stages answers
    UNSTABLE_OFFSET_COMMIT, which clients retry until the transaction's markers are written."""
    if topics is None:
        return _all_committed(ctx, group_id, by_id, stable)
    answer: list[OffsetFetchTopicsAnswer] = []
    for topic in topics:
        name, known, topic_id = _named(ctx, topic)
        partitions: list[OffsetFetchPartitionsAnswer]
        if known is None and topic_id is not None:
            partitions = [{"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                           "metadata": "", "error_code": ErrorCode.unknown_topic_id}
                          for index in topic.partition_indexes]
        else:
            partitions = [_fetch_one(ctx, group_id, name, known, index, stable) for index in topic.partition_indexes]
        answer.append({"name": name, "topic_id": topic_id, "partitions": partitions} if by_id else
                      {"name": name, "partitions": partitions})
    return answer


def _fetch_one(ctx: Context, group_id: str, name: str, topic: Topic | None, index: int,
               stable: bool) -> OffsetFetchPartitionsAnswer:
    if stable and ctx.groups.unstable(group_id, name, index):
        return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                "error_code": ErrorCode.unstable_offset_commit}
    committed = ctx.groups.committed(group_id, name, index, topic.resource.uid.hex) if topic else None
    if committed is None:
        return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                "error_code": ErrorCode.none}
    return {"partition_index": index, "committed_offset": committed.offset,
            "committed_leader_epoch": committed.leader_epoch, "metadata": committed.metadata or "",
            "error_code": ErrorCode.none}


def _all_committed(ctx: Context, group_id: str, by_id: bool, stable: bool) -> list[OffsetFetchTopicsAnswer]:
    by_topic: dict[str, list[OffsetFetchPartitionsAnswer]] = {}
    for (name, index), committed in sorted(ctx.groups.all_committed(group_id).items()):
        topic = ctx.topics.find(name)
        if topic is not None and topic.resource.uid.hex == committed.topic_id:
            by_topic.setdefault(name, []).append(_fetch_one(ctx, group_id, name, topic, index, stable))
    if not by_id:
        return [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]
    return [{"name": name, "topic_id": ctx.topics.get(name).resource.uid, "partitions": partitions}
            for name, partitions in by_topic.items()]


@handles(ApiKey.OFFSET_DELETE, 0, 0)
async def offset_delete(ctx: Context, header: RequestHeader, request: OffsetDeleteRequest) -> OffsetDeleteAnswer:
    groups = ctx.groups
    if groups.describe(request.group_id) is None:
        return {"error_code": ErrorCode.group_id_not_found, "throttle_time": 0, "topics": []}
    subscribed = groups.subscribed_topics(request.group_id, subscription_topics)
    topics: list[OffsetDeleteTopicAnswer] = []
    for topic in request.topics:
        indexes = [p.partition_index for p in topic.partitions]
        busy = topic.name in subscribed
        code = ErrorCode.group_subscribed_to_topic if busy else ErrorCode.none
        if not busy:
            await groups.delete_offsets(request.group_id, topic.name, [int(i) for i in indexes])
        topics.append({"name": topic.name, "partitions": [{"partition_index": i, "error_code": code} for i in indexes]})
    return {"error_code": ErrorCode.none, "throttle_time": 0, "topics": topics}
