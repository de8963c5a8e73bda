"""Metadata (key 3) and DescribeCluster (key 60).

One node leads every partition today; the leader epoch is the partition's session S.
"""

from __future__ import annotations

import uuid

from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from ...engine.api import Topic, errors
from ..context import Context
from ..mapping import error_code
from ..protocol.answers import (
    DescribeClusterAnswer,
    MetadataAnswer,
    MetadataBrokerAnswer,
    MetadataPartitionAnswer,
    MetadataTopicAnswer,
)
from ..protocol.apis import ApiKey
from ..protocol.codec import RequestHeader
from .api import handles

UNKNOWN_TOPIC = ErrorCode.unknown_topic_or_partition
NO_OPERATIONS = -2147483648


def broker(ctx: Context) -> MetadataBrokerAnswer:
    settings = ctx.settings
    return {"node_id": ctx.node_id, "host": settings.advertised_host, "port": settings.advertised_port,
            "rack": None}


def describe_topic(ctx: Context, topic: Topic) -> MetadataTopicAnswer:
    partitions: list[MetadataPartitionAnswer] = []
    for index, session in enumerate(ctx.partitions.sessions(topic.name, topic.partition_count)):
        partitions.append({"error_code": ErrorCode.none, "partition_index": index, "leader_id": ctx.node_id,
                           "leader_epoch": session, "replica_nodes": [ctx.node_id],
                           "isr_nodes": [ctx.node_id], "offline_replicas": []})
    return {"error_code": ErrorCode.none, "name": topic.name, "topic_id": topic.resource.uid,
            "is_internal": False, "partitions": partitions, "topic_authorized_operations": NO_OPERATIONS}


async def _requested(ctx: Context, request: MetadataRequest) -> list[MetadataTopicAnswer]:
    auto_create = getattr(request, "allow_auto_topic_creation", True) and ctx.settings.auto_create_topics
    answers = []
    for wanted in request.topics or ():
        topic_id = getattr(wanted, "topic_id", None)
        if wanted.name is None and topic_id is not None and topic_id.int != 0:
            answers.append(_by_id(ctx, topic_id))  # v10+: a KIP-848 consumer resolves assigned ids
        else:
            answers.append(await _one(ctx, wanted.name, auto_create))
    return answers


def _by_id(ctx: Context, topic_id: uuid.UUID) -> MetadataTopicAnswer:
    topic = ctx.topics.by_id(topic_id)
    if topic is None:
        return {"error_code": ErrorCode.unknown_topic_id, "name": None, "topic_id": topic_id, "partitions": []}
    return describe_topic(ctx, topic)


async def _one(ctx: Context, name: str | None, auto_create: bool) -> MetadataTopicAnswer:
    topic = ctx.topics.find(name) if name else None
    if topic is None and auto_create and name:
        try:
            topic = await ctx.topics.create(name, ctx.settings.default_partitions, {})
        except errors.EngineError as error:
            return {"error_code": error_code(error), "name": name, "partitions": []}
    if topic is None:
        return {"error_code": UNKNOWN_TOPIC, "name": name, "partitions": []}
    return describe_topic(ctx, topic)


@handles(ApiKey.METADATA, 0, 12)
async def metadata(ctx: Context, header: RequestHeader, request: MetadataRequest) -> MetadataAnswer:
    if request.topics is None or (header.api_version == 0 and not request.topics):
        topics = [describe_topic(ctx, topic) for topic in ctx.topics]
    else:
        topics = await _requested(ctx, request)
    return {"throttle_time": 0, "brokers": [broker(ctx)], "cluster_id": ctx.cluster_id,
            "controller_id": ctx.node_id, "topics": topics, "cluster_authorized_operations": NO_OPERATIONS}


@handles(ApiKey.DESCRIBE_CLUSTER, 0, 1)
async def describe_cluster(ctx: Context, header: RequestHeader, request: DescribeClusterRequest) -> DescribeClusterAnswer:
    settings = ctx.settings
    return {"throttle_time": 0, "error_code": ErrorCode.none, "endpoint_type": 1,
            "cluster_id": ctx.cluster_id, "controller_id": ctx.node_id,
            "brokers": [{"broker_id": ctx.node_id, "host": settings.advertised_host,
                         "port": settings.advertised_port, "rack": None}],
            "cluster_authorized_operations": NO_OPERATIONS}
