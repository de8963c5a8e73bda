"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from ...engine.catalog.names import check_name
from ...engine.errors import EngineError, InvalidPartitionCount, TopicExists
from ..mapping import configs_to_engine, error_code
from .configs import describe_topic_configs
from .registry import handles


@handles(19, 2, 7)
async def create_topics(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    counts = Counter(topic.name for topic in request.topics)
    answers = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            answers.append(_created_error(topic.name, ErrorCode.invalid_request, "topic named more than once"))
        else:
            answers.append(_create_one(ctx, topic, request.validate_only))
    return {"throttle_time": 0, "topics": answers}


def _create_one(ctx: Any, wanted: Any, validate_only: bool) -> dict[str, Any]:
    replication = wanted.replication_factor
    if replication not in (-1, 1):
        return _created_error(wanted.name, ErrorCode.invalid_replication_factor,
                              f"replication factor {replication} is larger than the 1 available broker")
    count = len(wanted.assignments) if wanted.assignments else wanted.num_partitions
    count = ctx.settings.default_partitions if count == -1 else count
    try:
        overrides = configs_to_engine({c.name: c.value for c in wanted.configs})
        if validate_only:
            return _validate(ctx, wanted.name, count, overrides)
        topic = ctx.engine.create_topic(wanted.name, count, overrides)
    except EngineError as error:
        return _created_error(wanted.name, error_code(error), str(error))
    return {"name": topic.name, "topic_id": topic.resource.uid, "error_code": ErrorCode.none,
            "num_partitions": count, "replication_factor": 1, "configs": describe_topic_configs(topic, None)}


def _validate(ctx: Any, name: str, count: int, overrides: dict[str, Any]) -> dict[str, Any]:
    check_name(name)
    if ctx.engine.catalog.find(name):
        raise TopicExists(f"topic {name!r} already exists")
    if count < 1:
        raise InvalidPartitionCount(f"partition count must be at least 1, not {count}")
    ctx.engine.settings.topic_defaults.updated(overrides)
    return {"name": name, "error_code": ErrorCode.none, "num_partitions": count, "replication_factor": 1}


def _created_error(name: str, code: ErrorCode, message: str) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message, "num_partitions": -1,
            "replication_factor": -1, "configs": None}


@handles(20, 1, 6)
async def delete_topics(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    if header.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    return {"throttle_time": 0, "responses": [_delete_one(ctx, name, uid) for name, uid in wanted]}


def _delete_one(ctx: Any, name: str | None, uid: Any) -> dict[str, Any]:
    if name is None:
        name = _name_for_id(ctx, uid)
        if name is None:
            return {"name": None, "topic_id": uid, "error_code": ErrorCode.unknown_topic_id,
                    "error_message": f"no topic has id {uid}"}
    try:
        topic = ctx.engine.delete_topic(name)
    except EngineError as error:
        return {"name": name, "topic_id": uid, "error_code": error_code(error), "error_message": str(error)}
    return {"name": name, "topic_id": topic.resource.uid, "error_code": ErrorCode.none}


def _name_for_id(ctx: Any, uid: Any) -> str | None:
    return next((topic.name for topic in ctx.engine.topics() if topic.resource.uid == uid), None)


@handles(37, 0, 3)
async def create_partitions(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    results = [_grow_one(ctx, wanted, request.validate_only) for wanted in request.topics]
    return {"throttle_time": 0, "results": results}


def _grow_one(ctx: Any, wanted: Any, validate_only: bool) -> dict[str, Any]:
    try:
        topic = ctx.engine.topic(wanted.name)
        if wanted.count <= topic.partition_count:
            raise InvalidPartitionCount(
                f"topic {wanted.name!r} has {topic.partition_count} partitions; it cannot go to {wanted.count}")
        if not validate_only:
            ctx.engine.grow_topic(wanted.name, wanted.count)
    except EngineError as error:
        return {"name": wanted.name, "error_code": error_code(error), "error_message": str(error)}
    return {"name": wanted.name, "error_code": ErrorCode.none}
