"""ListOffsets (key 2), OffsetForLeaderEpoch (key 23) and DeleteRecords (key 21).

ListOffsets' special timestamps are taken from the version Kafka takes them (SPECIAL_FROM);
an older version asking for one is answered UNSUPPORTED_VERSION, as Kafka answers it. A
partition a ListOffsets request names twice is answered once, INVALID_REQUEST, as Kafka does.
As Kafka's Partition.fetchOffsetForTimestamp, a lookup answers only offsets a consumer of the
request's isolation level may fetch: latest (-1) is the high watermark, or the last stable
offset for read_committed (isolation_level 1, v2+), and a lookup by time (or -3) that finds an
offset at or past that bound answers none; earliest is never bounded."""

from __future__ import annotations

from collections import Counter

from kio.schema.delete_records.v2.request import DeleteRecordsPartition, DeleteRecordsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v11.request import ListOffsetsPartition, ListOffsetsRequest
from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest, OffsetForLeaderPartition

from ...engine.api import PartitionInfo, TopicPartition, errors
from ...protocol.answers import (
    DeleteRecordsAnswer,
    DeleteRecordsPartitionResultAnswer,
    DeleteRecordsTopicResultAnswer,
    ListOffsetsAnswer,
    ListOffsetsPartitionAnswer,
    ListOffsetsTopicAnswer,
    OffsetForLeaderEpochAnswer,
    OffsetForLeaderEpochEpochEndOffsetAnswer,
    OffsetForLeaderEpochOffsetForLeaderTopicResultAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ...records.decode import record_times
from ..context import Context
from ..internal_topics import READ_REFUSED, WRITE_REFUSED, is_internal
from ..mapping import error_code
from .api import handles
from .common import epoch_error

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3  # KIP-734, v7+
EARLIEST_LOCAL = -4  # KIP-405, v8+: the log start offset (all of a log is "local" here)
LATEST_TIERED = -5  # KIP-1005, v9+: nothing is tiered, so no offset
EARLIEST_PENDING_UPLOAD = -6  # v11+: nothing waits for tiering, so no offset
SPECIAL_FROM = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}
READ_COMMITTED = 1


@handles(ApiKey.LIST_OFFSETS, 1, 11)
async def list_offsets(ctx: Context, header: RequestHeader, request: ListOffsetsRequest) -> ListOffsetsAnswer:
    counts = Counter((topic.name, p.partition_index) for topic in request.topics for p in topic.partitions)
    answered: set[tuple[str, int]] = set()
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED  # v2+
    topics: list[ListOffsetsTopicAnswer] = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            key = (topic.name, wanted.partition_index)
            if counts[key] == 1:
                partitions.append(await _list_one(ctx, topic.name, wanted, header.api_version, committed))
            elif key not in answered:  # as Kafka: a partition asked twice is answered once, INVALID_REQUEST
                answered.add(key)
                partitions.append({"partition_index": wanted.partition_index, "error_code": ErrorCode.invalid_request,
                                   "timestamp": -1, "offset": -1, "leader_epoch": -1})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


async def _list_one(ctx: Context, topic: str, wanted: ListOffsetsPartition, version: int,
                    committed: bool) -> ListOffsetsPartitionAnswer:
    answer: ListOffsetsPartitionAnswer = {"partition_index": wanted.partition_index, "error_code": ErrorCode.none,
                                          "timestamp": -1, "offset": -1, "leader_epoch": -1}
    if wanted.timestamp < EARLIEST and version < SPECIAL_FROM.get(wanted.timestamp, version + 1):
        return answer | {"error_code": ErrorCode.unsupported_version}  # as Kafka: not a timestamp this version has
    if is_internal(topic):
        return answer | {"error_code": READ_REFUSED}
    tp = TopicPartition(topic, wanted.partition_index)
    try:
        info = ctx.partitions.info(tp)
        code = epoch_error(getattr(wanted, "current_leader_epoch", -1), info.session)
        if code != ErrorCode.none:
            return answer | {"error_code": code}
        fetchable = info.last_stable if committed else info.high_watermark
        timestamp, offset = await _offset_for(ctx, tp, info, wanted.timestamp, fetchable)
    except errors.EngineError as error:
        return answer | {"error_code": error_code(error)}
    return answer | {"timestamp": timestamp, "offset": offset, "leader_epoch": info.session if offset >= 0 else -1}


async def _offset_for(ctx: Context, tp: TopicPartition, info: PartitionInfo, timestamp: int,
                      fetchable: int) -> tuple[int, int]:
    """`fetchable`: the offset a consumer of the request's isolation level may fetch up to."""
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, info.start_offset
    if timestamp == LATEST:
        return -1, fetchable
    found = await _looked_up(ctx, tp, info, timestamp)
    return found if found[1] < fetchable else (-1, -1)


async def _looked_up(ctx: Context, tp: TopicPartition, info: PartitionInfo, timestamp: int) -> tuple[int, int]:
    if timestamp == MAX_TIMESTAMP:
        return await _max_timestamp(ctx, tp)
    if timestamp < 0:  # LATEST_TIERED, EARLIEST_PENDING_UPLOAD
        return -1, -1
    return await ctx.partitions.offset_at_time(tp, timestamp)


async def _max_timestamp(ctx: Context, tp: TopicPartition) -> tuple[int, int]:
    """Kafka (KIP-734) answers the first record that carries the largest timestamp."""
    max_timestamp, batch = await ctx.partitions.max_timestamp_batch(tp)
    if batch is None:
        return -1, -1
    for offset, record_time in record_times(batch):
        if record_time == max_timestamp:
            return record_time, offset
    return -1, -1


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4)
async def offset_for_leader_epoch(ctx: Context, header: RequestHeader,
                                  request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochAnswer:
    topics: list[OffsetForLeaderEpochOffsetForLeaderTopicResultAnswer] = []
    for topic in request.topics:
        partitions = [_epoch_one(ctx, topic.topic, p) for p in topic.partitions]
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _epoch_one(ctx: Context, topic: str, wanted: OffsetForLeaderPartition) -> OffsetForLeaderEpochEpochEndOffsetAnswer:
    answer: OffsetForLeaderEpochEpochEndOffsetAnswer = {"partition": wanted.partition, "error_code": ErrorCode.none,
                                                        "leader_epoch": -1, "end_offset": -1}
    if is_internal(topic):
        return answer | {"error_code": READ_REFUSED}
    tp = TopicPartition(topic, wanted.partition)
    try:
        code = epoch_error(wanted.current_leader_epoch, ctx.partitions.info(tp).session)
        if code != ErrorCode.none:
            return answer | {"error_code": code}
        epoch, end_offset = ctx.partitions.end_offset_for(tp, wanted.leader_epoch)
    except errors.EngineError as error:
        return answer | {"error_code": error_code(error)}
    return answer | {"leader_epoch": epoch, "end_offset": end_offset}


@handles(ApiKey.DELETE_RECORDS, 0, 2)
async def delete_records(ctx: Context, header: RequestHeader, request: DeleteRecordsRequest) -> DeleteRecordsAnswer:
    topics: list[DeleteRecordsTopicResultAnswer] = []
    for topic in request.topics:
        partitions = [await _delete_one(ctx, topic.name, p) for p in topic.partitions]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


async def _delete_one(ctx: Context, topic: str, wanted: DeleteRecordsPartition) -> DeleteRecordsPartitionResultAnswer:
    answer: DeleteRecordsPartitionResultAnswer = {"partition_index": wanted.partition_index, "low_watermark": -1,
                                                  "error_code": ErrorCode.none}
    if is_internal(topic):
        return answer | {"error_code": WRITE_REFUSED}
    tp = TopicPartition(topic, wanted.partition_index)
    try:
        ctx.partitions.info(tp)  # an unknown partition is named before a bad offset
        if wanted.offset < -1:
            return answer | {"error_code": ErrorCode.offset_out_of_range}
        low = await ctx.partitions.delete_records(tp, wanted.offset)
    except errors.EngineError as error:
        return answer | {"error_code": error_code(error)}
    return answer | {"low_watermark": low}
