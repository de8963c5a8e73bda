"""Produce (key 0): check each batch, append it, answer per partition.

acks=0 gets no answer; acks=1 and acks=all are answered after the append reached the
log (handed to the OS; topics in `sync` flush mode are also fsynced first).
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ...engine.errors import DuplicateBatch, EngineError
from ..mapping import error_code
from ..protocol.record_batch import BatchRejected, check_batch, stamp_log_append_time
from .registry import handles

log = logging.getLogger(__name__)
ACKS_ALLOWED = (0, 1, -1)


@handles(0, 3, 11)
async def produce(ctx: Any, header: Any, request: Any) -> dict[str, Any] | None:
    if request.acks not in ACKS_ALLOWED:
        responses = _all_failed(request, ErrorCode.invalid_required_acks, f"acks={request.acks} is not 0, 1 or -1")
    else:
        responses = [_topic(ctx, request, topic) for topic in request.topic_data]
    if request.acks == 0:
        return None
    return {"responses": responses, "throttle_time": 0}


def _all_failed(request: Any, code: ErrorCode, message: str) -> list[dict[str, Any]]:
    return [{"name": topic.name, "partition_responses": [_failure(p.index, code, message) for p in topic.partition_data]}
            for topic in request.topic_data]


def _topic(ctx: Any, request: Any, topic_data: Any) -> dict[str, Any]:
    topic = _find_topic(ctx, topic_data.name)
    answers = []
    for partition_data in topic_data.partition_data:
        if topic is None:
            answers.append(_failure(partition_data.index, ErrorCode.unknown_topic_or_partition,
                                    f"topic {topic_data.name!r} does not exist"))
        else:
            answers.append(_append(ctx, request, topic, partition_data))
    return {"name": topic_data.name, "partition_responses": answers}


def _find_topic(ctx: Any, name: str) -> Any:
    topic = ctx.engine.catalog.find(name)
    if topic is None and ctx.settings.auto_create_topics:
        try:
            topic = ctx.engine.create_topic(name, ctx.settings.default_partitions, {})
        except EngineError:
            return None
    return topic


def _append(ctx: Any, request: Any, topic: Any, partition_data: Any) -> dict[str, Any]:
    index = partition_data.index
    try:
        batch, header = check_batch(partition_data.records, topic.config.max_batch_bytes)
        if header.is_transactional or request.transactional_id is not None:
            return _failure(index, ErrorCode.invalid_txn_state, "transactions are not supported yet")
        append_time = -1
        if topic.config.timestamp_type == "append":
            append_time = ctx.engine.clock.now_ms()
            header = stamp_log_append_time(batch, append_time)
        base_offset = ctx.engine.append(topic.name, index, batch, header)
    except BatchRejected as rejected:
        return _failure(index, rejected.code, str(rejected))
    except DuplicateBatch as duplicate:
        base_offset, append_time = duplicate.base_offset, -1
    except EngineError as error:
        return _failure(index, error_code(error), str(error))
    start = ctx.engine.partition(topic.name, index).start_offset
    return {"index": index, "error_code": ErrorCode.none, "base_offset": base_offset,
            "log_append_time": append_time, "log_start_offset": start}


def _failure(index: int, code: ErrorCode, message: str) -> dict[str, Any]:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time": -1,
            "log_start_offset": -1, "error_message": message}
