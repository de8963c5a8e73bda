"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37).

CreateTopics takes a replication factor from 1 to the number of live nodes (-1: 1) and
records it in the topic; Metadata then lists that many replicas. Durability comes from the
store, not from copies, so the factor changes nothing else. Explicit replica assignments are
checked as Kafka checks them; the first node of each list is where the partition is wanted,
which the cluster view is asked for once the topic exists.

Each change waits for the store at most until the request's timeout_ms (the client's
operation timeout; DDL_TIMEOUT_S when it sends none), then is answered REQUEST_TIMED_OUT, as
Kafka's controller answers a change it did not complete in time; the change itself goes on
(see common.within). A store outage thus delays DDL answers instead of holding them until
the store gives up (about three minutes for HDFS) and closing the connection. A client that
asks again after the store is back finds the topic created (TOPIC_ALREADY_EXISTS) or deleted.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest
from kio.schema.errors import ErrorCode

from ...engine.api import TopicPartition, errors
from ...protocol.answers import (
    CreatePartitionsAnswer,
    CreatePartitionsTopicResultAnswer,
    CreateTopicsAnswer,
    CreateTopicsCreatableTopicResultAnswer,
    DeleteTopicsAnswer,
    DeleteTopicsDeletableTopicResultAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ..changes import DDL_TIMEOUT_S, TIMED_OUT, within
from ..context import Context
from ..internal_topics import WRITE_REFUSED, change_message, internal_by_id, is_internal
from ..mapping import error_code
from ..topic_configs import to_overrides
from .api import handles
from .common import millis
from .configs import describe_topic_configs
from .placement import alive_ids, replica_list_error, replication_factor_error

CreatedAnswer = CreateTopicsCreatableTopicResultAnswer
DEFAULT_REPLICATION_FACTOR = 1  # Kafka's default.replication.factor


class Refused(Exception):
    """A CreateTopics entry refused for its replication settings, with Kafka's error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@handles(ApiKey.CREATE_TOPICS, 2, 7)
async def create_topics(ctx: Context, header: RequestHeader, request: CreateTopicsRequest) -> CreateTopicsAnswer:
    counts = Counter(topic.name for topic in request.topics)
    deadline = _deadline(request.timeout)
    answers = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            answers.append(_created_error(topic.name, ErrorCode.invalid_request, "topic named more than once"))
        else:
            answers.append(await _create_one(ctx, topic, request.validate_only, deadline))
    return {"throttle_time": 0, "topics": answers}


def _deadline(timeout: object) -> float:
    """When a DDL request's changes must be answered (time.monotonic())."""
    timeout_ms = millis(timeout)
    return time.monotonic() + (timeout_ms / 1000 if timeout_ms > 0 else DDL_TIMEOUT_S)


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.001)


async def _create_one(ctx: Context, wanted: CreatableTopic, validate_only: bool, deadline: float) -> CreatedAnswer:
    try:
        factor, leaders = _replication(ctx, wanted)
    except Refused as refused:
        return _created_error(wanted.name, refused.code, str(refused))
    count = len(leaders) if leaders else wanted.num_partitions
    count = ctx.settings.default_partitions if count == -1 else count
    try:
        overrides = to_overrides({c.name: c.value for c in wanted.configs})
        if validate_only:
            ctx.topics.check_new(wanted.name, count, overrides)
            return {"name": wanted.name, "error_code": ErrorCode.none, "num_partitions": count,
                    "replication_factor": factor}
        topic = await within(ctx.topics.create(wanted.name, count, overrides, factor), _left(deadline))
    except errors.EngineError as error:
        return _created_error(wanted.name, error_code(error), str(error))
    except TimeoutError:
        return _created_error(wanted.name, ErrorCode.request_timed_out, TIMED_OUT)
    if leaders:
        await ctx.cluster.reassign({TopicPartition(topic.name, index): node for index, node in enumerate(leaders)})
    return {"name": topic.name, "topic_id": topic.resource.uid, "error_code": ErrorCode.none,
            "num_partitions": count, "replication_factor": factor, "configs": describe_topic_configs(ctx, topic, None)}


def _replication(ctx: Context, wanted: CreatableTopic) -> tuple[int, list[int]]:
    """(the replication factor, the wanted leader of each partition when the request assigns
    replicas, else []); Refused with Kafka's error and message (ReplicationControlManager)."""
    alive = alive_ids(ctx)
    if not wanted.assignments:
        message = replication_factor_error(wanted.replication_factor, len(alive))
        if message:
            raise Refused(ErrorCode.invalid_replication_factor, message)
        factor = wanted.replication_factor
        return (DEFAULT_REPLICATION_FACTOR if factor == -1 else factor), []
    if wanted.replication_factor != -1:
        raise Refused(ErrorCode.invalid_request,
                      "A manual partition assignment was specified, but replication factor was not set to -1.")
    if wanted.num_partitions != -1:
        raise Refused(ErrorCode.invalid_request,
                      "A manual partition assignment was specified, but numPartitions was not set to -1.")
    return _assigned(wanted, alive)


def _assigned(wanted: CreatableTopic, alive: set[int]) -> tuple[int, list[int]]:
    lists: dict[int, tuple[int, ...]] = {}
    for assignment in wanted.assignments:
        index, replicas = assignment.partition_index, assignment.broker_ids
        if index in lists:
            raise Refused(ErrorCode.invalid_replica_assignment,
                          f"Found multiple manual partition assignments for partition {index}")
        message = replica_list_error(replicas, alive)
        if message is None and lists and len(replicas) != len(first := next(iter(lists.values()))):
            message = (f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but"
                       f" this is not consistent with previous partitions, which have {len(first)} replica(s).")
        if message:
            raise Refused(ErrorCode.invalid_replica_assignment, message)
        lists[index] = replicas
    if sorted(lists) != list(range(len(lists))):
        raise Refused(ErrorCode.invalid_replica_assignment, "partitions should be a consecutive 0-based integer sequence")
    return len(lists[0]), [lists[index][0] for index in range(len(lists))]


def _created_error(name: str, code: ErrorCode, message: str) -> CreatedAnswer:
    return {"name": name, "error_code": code, "error_message": message, "num_partitions": -1,
            "replication_factor": -1, "configs": []}


@handles(ApiKey.DELETE_TOPICS, 1, 6)
async def delete_topics(ctx: Context, header: RequestHeader, request: DeleteTopicsRequest) -> DeleteTopicsAnswer:
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if header.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]  # type: ignore[attr-defined]  # v1-v5 field
    deadline = _deadline(request.timeout)
    return {"throttle_time": 0, "responses": [await _delete_one(ctx, name, uid, deadline) for name, uid in wanted]}


async def _delete_one(ctx: Context, name: str | None, uid: uuid.UUID | None,
                      deadline: float) -> DeleteTopicsDeletableTopicResultAnswer:
    if name is None:
        name = internal_by_id(ctx, uid)
    if name is None:
        found = ctx.topics.by_id(uid) if uid is not None else None
        if found is None:
            return {"name": None, "topic_id": uid or uuid.UUID(int=0), "error_code": ErrorCode.unknown_topic_id,
                    "error_message": f"no topic has id {uid}"}
        name = found.name
    if is_internal(name):
        return {"name": name, "topic_id": uid or uuid.UUID(int=0), "error_code": WRITE_REFUSED,
                "error_message": change_message(name)}
    try:
        topic = await within(ctx.topics.delete(name), _left(deadline))
    except errors.EngineError as error:
        return {"name": name, "topic_id": uid or uuid.UUID(int=0), "error_code": error_code(error),
                "error_message": str(error)}
    except TimeoutError:
        return {"name": name, "topic_id": uid or uuid.UUID(int=0), "error_code": ErrorCode.request_timed_out,
                "error_message": TIMED_OUT}
    return {"name": name, "topic_id": topic.resource.uid, "error_code": ErrorCode.none}


@handles(ApiKey.CREATE_PARTITIONS, 0, 3)
async def create_partitions(ctx: Context, header: RequestHeader,
                            request: CreatePartitionsRequest) -> CreatePartitionsAnswer:
    deadline = _deadline(request.timeout)
    results = [await _grow_one(ctx, wanted, request.validate_only, deadline) for wanted in request.topics]
    return {"throttle_time": 0, "results": results}


async def _grow_one(ctx: Context, wanted: CreatePartitionsTopic, validate_only: bool,
                    deadline: float) -> CreatePartitionsTopicResultAnswer:
    if is_internal(wanted.name):
        return {"name": wanted.name, "error_code": WRITE_REFUSED, "error_message": change_message(wanted.name)}
    try:
        await within(ctx.topics.grow(wanted.name, wanted.count, validate_only), _left(deadline))
    except errors.UnknownTopic as error:  # Kafka names no message for it
        return {"name": wanted.name, "error_code": error_code(error), "error_message": None}
    except errors.EngineError as error:
        return {"name": wanted.name, "error_code": error_code(error), "error_message": str(error)}
    except TimeoutError:
        return {"name": wanted.name, "error_code": ErrorCode.request_timed_out, "error_message": TIMED_OUT}
    return {"name": wanted.name, "error_code": ErrorCode.none}

