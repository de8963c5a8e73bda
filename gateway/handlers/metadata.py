"""Metadata (key 3) and DescribeCluster (key 60).

One node leads every partition today; the leader epoch is the partition's session S.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...engine.catalog.topic import Topic
from ...engine.errors import EngineError
from ..mapping import error_code
from .registry import handles

UNKNOWN_TOPIC = ErrorCode.unknown_topic_or_partition


def broker(ctx: Any) -> dict[str, Any]:
    settings = ctx.settings
    return {"node_id": ctx.node_id, "broker_id": ctx.node_id, "host": settings.advertised_host,
            "port": settings.advertised_port, "rack": None}


def describe_topic(ctx: Any, topic: Topic) -> dict[str, Any]:
    partitions = []
    for index in range(topic.partition_count):
        session = ctx.engine.partition(topic.name, index).session
        partitions.append({"error_code": ErrorCode.none, "partition_index": index, "leader_id": ctx.node_id,
                           "leader_epoch": session, "replica_nodes": [ctx.node_id],
                           "isr_nodes": [ctx.node_id], "offline_replicas": []})
    return {"error_code": ErrorCode.none, "name": topic.name, "topic_id": topic.resource.uid,
            "is_internal": False, "partitions": partitions, "topic_authorized_operations": -2147483648}


def _requested(ctx: Any, header: Any, request: Any) -> list[dict[str, Any]]:
    auto_create = getattr(request, "allow_auto_topic_creation", True) and ctx.settings.auto_create_topics
    answers = []
    for wanted in request.topics:
        topic_id = getattr(wanted, "topic_id", None)
        if wanted.name is None and topic_id is not None and topic_id.int != 0:
            answers.append(_by_id(ctx, topic_id))  # v10+: a KIP-848 consumer resolves assigned ids
        else:
            answers.append(_one(ctx, wanted.name, auto_create))
    return answers


def _by_id(ctx: Any, topic_id: Any) -> dict[str, Any]:
    topic = next((t for t in ctx.engine.catalog if t.resource.uid == topic_id), None)
    if topic is None:
        return {"error_code": ErrorCode.unknown_topic_id, "name": None, "topic_id": topic_id, "partitions": []}
    return describe_topic(ctx, topic)


def _one(ctx: Any, name: str | None, auto_create: bool) -> dict[str, Any]:
    engine = ctx.engine
    topic = engine.catalog.find(name) if name else None
    if topic is None and auto_create and name:
        try:
            topic = engine.create_topic(name, ctx.settings.default_partitions, {})
        except EngineError as error:
            return {"error_code": error_code(error), "name": name, "partitions": []}
    if topic is None:
        return {"error_code": UNKNOWN_TOPIC, "name": name, "partitions": []}
    return describe_topic(ctx, topic)


@handles(3, 0, 12)
async def metadata(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    if request.topics is None or (header.api_version == 0 and not request.topics):
        topics = [describe_topic(ctx, topic) for topic in ctx.engine.topics()]
    else:
        topics = _requested(ctx, header, request)
    return {"throttle_time": 0, "brokers": [broker(ctx)], "cluster_id": ctx.cluster_id,
            "controller_id": ctx.node_id, "topics": topics, "cluster_authorized_operations": -2147483648}


@handles(60, 0, 1)
async def describe_cluster(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": ErrorCode.none, "endpoint_type": 1,
            "cluster_id": ctx.cluster_id, "controller_id": ctx.node_id, "brokers": [broker(ctx)],
            "cluster_authorized_operations": -2147483648}
