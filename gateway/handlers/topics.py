"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37)."""

from __future__ import annotations

import uuid
from collections import Counter

from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest
from kio.schema.errors import ErrorCode

from ...engine.api import errors
from ..context import Context
from ..mapping import configs_to_engine, error_code
from ..protocol.answers import (
    CreatePartitionsAnswer,
    CreatePartitionsTopicResultAnswer,
    CreateTopicsAnswer,
    CreateTopicsCreatableTopicResultAnswer,
    DeleteTopicsAnswer,
    DeleteTopicsDeletableTopicResultAnswer,
)
from ..protocol.apis import ApiKey
from ..protocol.codec import RequestHeader
from .api import handles
from .configs import describe_topic_configs

CreatedAnswer = CreateTopicsCreatableTopicResultAnswer


@handles(ApiKey.CREATE_TOPICS, 2, 7)
async def create_topics(ctx: Context, header: RequestHeader, request: CreateTopicsRequest) -> CreateTopicsAnswer:
    counts = Counter(topic.name for topic in request.topics)
    answers = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            answers.append(_created_error(topic.name, ErrorCode.invalid_request, "topic named more than once"))
        else:
            answers.append(await _create_one(ctx, topic, request.validate_only))
    return {"throttle_time": 0, "topics": answers}


async def _create_one(ctx: Context, wanted: CreatableTopic, validate_only: bool) -> CreatedAnswer:
    replication = wanted.replication_factor
    if replication not in (-1, 1):
        return _created_error(wanted.name, ErrorCode.invalid_replication_factor,
                              f"replication factor {replication} is larger than the 1 available broker")
    count = len(wanted.assignments) if wanted.assignments else wanted.num_partitions
    count = ctx.settings.default_partitions if count == -1 else count
    try:
        overrides = configs_to_engine({c.name: c.value for c in wanted.configs})
        if validate_only:
            ctx.topics.check_new(wanted.name, count, overrides)
            return {"name": wanted.name, "error_code": ErrorCode.none, "num_partitions": count,
                    "replication_factor": 1}
        topic = await ctx.topics.create(wanted.name, count, overrides)
    except errors.EngineError as error:
        return _created_error(wanted.name, error_code(error), str(error))
    return {"name": topic.name, "topic_id": topic.resource.uid, "error_code": ErrorCode.none,
            "num_partitions": count, "replication_factor": 1, "configs": describe_topic_configs(topic, None)}


def _created_error(name: str, code: ErrorCode, message: str) -> CreatedAnswer:
    return {"name": name, "error_code": code, "error_message": message, "num_partitions": -1,
            "replication_factor": -1, "configs": None}


@handles(ApiKey.DELETE_TOPICS, 1, 6)
async def delete_topics(ctx: Context, header: RequestHeader, request: DeleteTopicsRequest) -> DeleteTopicsAnswer:
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if header.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]  # type: ignore[attr-defined]  # v1-v5 field
    return {"throttle_time": 0, "responses": [await _delete_one(ctx, name, uid) for name, uid in wanted]}


async def _delete_one(ctx: Context, name: str | None, uid: uuid.UUID | None) -> DeleteTopicsDeletableTopicResultAnswer:
    if name is None:
        found = ctx.topics.by_id(uid) if uid is not None else None
        if found is None:
            return {"name": None, "topic_id": uid or uuid.UUID(int=0), "error_code": ErrorCode.unknown_topic_id,
                    "error_message": f"no topic has id {uid}"}
        name = found.name
    try:
        topic = await ctx.topics.delete(name)
    except errors.EngineError as error:
        return {"name": name, "topic_id": uid or uuid.UUID(int=0), "error_code": error_code(error),
                "error_message": str(error)}
    return {"name": name, "topic_id": topic.resource.uid, "error_code": ErrorCode.none}


@handles(ApiKey.CREATE_PARTITIONS, 0, 3)
async def create_partitions(ctx: Context, header: RequestHeader,
                            request: CreatePartitionsRequest) -> CreatePartitionsAnswer:
    results = [await _grow_one(ctx, wanted, request.validate_only) for wanted in request.topics]
    return {"throttle_time": 0, "results": results}


async def _grow_one(ctx: Context, wanted: CreatePartitionsTopic, validate_only: bool) -> CreatePartitionsTopicResultAnswer:
    try:
        await ctx.topics.grow(wanted.name, wanted.count, validate_only)
    except errors.EngineError as error:
        return {"name": wanted.name, "error_code": error_code(error), "error_message": str(error)}
    return {"name": wanted.name, "error_code": ErrorCode.none}

