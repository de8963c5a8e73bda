"""ListOffsets (key 2), OffsetForLeaderEpoch (key 23) and DeleteRecords (key 21)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...engine.errors import EngineError
from ...records.decode import record_times
from ..mapping import error_code
from .common import epoch_error
from .registry import handles

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


@handles(2, 1, 7)
async def list_offsets(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    topics = []
    for topic in request.topics:
        partitions = [_list_one(ctx, topic.name, p) for p in topic.partitions]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _list_one(ctx: Any, topic: str, wanted: Any) -> dict[str, Any]:
    answer = {"partition_index": wanted.partition_index, "error_code": ErrorCode.none,
              "timestamp": -1, "offset": -1, "leader_epoch": -1}
    try:
        partition = ctx.engine.partition(topic, wanted.partition_index)
    except EngineError as error:
        return answer | {"error_code": error_code(error)}
    code = epoch_error(getattr(wanted, "current_leader_epoch", -1), partition.session)
    if code != ErrorCode.none:
        return answer | {"error_code": code}
    timestamp, offset = _offset_for(partition, wanted.timestamp)
    return answer | {"timestamp": timestamp, "offset": offset, "leader_epoch": partition.session}


def _offset_for(partition: Any, timestamp: int) -> tuple[int, int]:
    if timestamp == EARLIEST:
        return -1, partition.start_offset
    if timestamp == LATEST:
        return -1, partition.high_watermark
    if timestamp == MAX_TIMESTAMP:
        return _max_timestamp(partition)
    if timestamp < 0:
        return -1, -1
    batch = partition.batch_at_time(timestamp)
    if batch is None:
        return -1, -1
    for offset, record_time in record_times(batch):
        if record_time >= timestamp and offset >= partition.start_offset:
            return record_time, offset
    return -1, -1


def _max_timestamp(partition: Any) -> tuple[int, int]:
    """Kafka (KIP-734) answers the first record that carries the largest timestamp."""
    max_timestamp, batch = partition.max_timestamp_batch()
    if batch is None:
        return -1, -1
    for offset, record_time in record_times(batch):
        if record_time == max_timestamp:
            return record_time, offset
    return -1, -1


@handles(23, 2, 4)
async def offset_for_leader_epoch(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    topics = []
    for topic in request.topics:
        partitions = [_epoch_one(ctx, topic.topic, p) for p in topic.partitions]
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _epoch_one(ctx: Any, topic: str, wanted: Any) -> dict[str, Any]:
    answer = {"partition": wanted.partition, "error_code": ErrorCode.none, "leader_epoch": -1, "end_offset": -1}
    try:
        partition = ctx.engine.partition(topic, wanted.partition)
    except EngineError as error:
        return answer | {"error_code": error_code(error)}
    code = epoch_error(wanted.current_leader_epoch, partition.session)
    if code != ErrorCode.none:
        return answer | {"error_code": code}
    epoch, end_offset = partition.end_offset_for(wanted.leader_epoch)
    return answer | {"leader_epoch": epoch, "end_offset": end_offset}


@handles(21, 0, 2)
async def delete_records(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    topics = []
    for topic in request.topics:
        partitions = [_delete_one(ctx, topic.name, p) for p in topic.partitions]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _delete_one(ctx: Any, topic: str, wanted: Any) -> dict[str, Any]:
    answer = {"partition_index": wanted.partition_index, "low_watermark": -1, "error_code": ErrorCode.none}
    try:
        partition = ctx.engine.partition(topic, wanted.partition_index)
        before = partition.high_watermark if wanted.offset == -1 else wanted.offset
        if before < 0:
            return answer | {"error_code": ErrorCode.offset_out_of_range}
        return answer | {"low_watermark": partition.delete_records(before)}
    except EngineError as error:
        return answer | {"error_code": error_code(error)}
