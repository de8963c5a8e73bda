"""Metadata (key 3), DescribeCluster (key 60) and DescribeTopicPartitions (key 75): the live
nodes and who leads what.

Both answer from the cluster view (engine/cluster.py): the brokers are the nodes alive, the
controller is the view's controller node, a partition's leader is the node serving it. The
leader epoch is the partition's session S: read from the partition when this node serves it,
else what the view knows (-1 when it does not). A partition nobody serves has leader -1 and
LEADER_NOT_AVAILABLE, which clients retry.

Replicas: every partition has one copy, in the store (HDFS replicates it), but tools written
for Kafka expect a topic created with replication factor N to list N replicas, all in sync.
So Metadata lists N nodes: the leader first, then the next live nodes by node id, wrapping
around (fewer when fewer are alive). The lists are shared between partitions with the same
leader, so a 600-partition answer builds a handful of lists, not 1,200.

DescribeTopicPartitions (KIP-966, what `kafka-topics --describe` asks a Kafka 4 broker) pages
through the same entries: topics by name (all of them when none is named), partitions by
index, at most response_partition_limit partitions per answer (capped at Kafka's
max.request.partition.size.limit, 2000), and a next_cursor where the next page starts.

Both list `__consumer_offsets` among all topics, as an internal topic with a partition per
coordinator shard (internal_topics.py).
"""

from __future__ import annotations

import functools
import uuid

from kio.schema.describe_cluster.v2.request import DescribeClusterRequest
from kio.schema.describe_topic_partitions.v0.request import DescribeTopicPartitionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from ...engine.api import NodeIdentity, Topic, errors
from ...protocol.answers import (
    DescribeClusterAnswer,
    DescribeTopicPartitionsAnswer,
    DescribeTopicPartitionsCursorAnswer,
    DescribeTopicPartitionsTopicAnswer,
    MetadataAnswer,
    MetadataBrokerAnswer,
    MetadataPartitionAnswer,
    MetadataTopicAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ...protocol.metadata_wire import encode_metadata_response
from ..context import Context
from ..internal_topics import INTERNAL_CONFIGS, internal_by_id, internal_topic_id, is_internal
from ..listeners import parse_endpoint
from ..mapping import error_code
from .api import Codec, handles

UNKNOWN_TOPIC = ErrorCode.unknown_topic_or_partition
NO_OPERATIONS = -2147483648
PARTITION_LIMIT_MAX = 2000  # Kafka's max.request.partition.size.limit default
TOPIC_OPERATIONS = 3576  # what Kafka without an authorizer reports: READ to ALTER_CONFIGS, all allowed


def address(ctx: Context, node: NodeIdentity, listener: str) -> tuple[str, int]:
    """Where a client that came in on `listener` reaches `node`, as Kafka answers: this node's
    address comes from the gateway's settings (each listener's, known once bound), another
    node's from the listeners it registered (its one address when it registered none, or
    none of that name)."""
    if node.node_id == ctx.node_id:
        return ctx.settings.endpoint(listener)
    if node.endpoints:
        found = _endpoints(node.endpoints).get(listener)
        if found is not None:
            return found
    return node.host, node.port


@functools.cache
def _endpoints(endpoints: tuple[str, ...]) -> dict[str, tuple[str, int]]:
    """{name: (host, port)} of registered "NAME://host:port" endpoints (a node's, unchanged while it lives)."""
    found = {}
    for endpoint in endpoints:
        try:
            name, host, port = parse_endpoint(endpoint)
        except ValueError:  # not one this node can read: that listener is not offered
            continue
        found[name] = (host, port)
    return found


def brokers(ctx: Context, listener: str) -> list[MetadataBrokerAnswer]:
    answers: list[MetadataBrokerAnswer] = []
    for node in ctx.cluster.alive():
        host, port = address(ctx, node, listener)
        answers.append({"node_id": node.node_id, "host": host, "port": port, "rack": node.rack})
    return answers


class Replicas:
    """The replica lists of one answer: `replication_factor` nodes, the leader first, then
    the next live nodes by node id, wrapping around. Built once per (leader, factor)."""

    def __init__(self, alive: tuple[NodeIdentity, ...]) -> None:
        self._ids = sorted(node.node_id for node in alive)
        self._lists: dict[tuple[int, int], list[int]] = {}

    def of(self, leader_id: int, factor: int) -> list[int]:
        key = (leader_id, factor)
        found = self._lists.get(key)
        if found is None:
            found = self._lists[key] = self._build(leader_id, factor)
        return found

    def _build(self, leader_id: int, factor: int) -> list[int]:
        after = [i for i in self._ids if i > leader_id] + [i for i in self._ids if i < leader_id]
        return [leader_id, *after[:max(factor - 1, 0)]]


NO_LEADER: MetadataPartitionAnswer = {"error_code": ErrorCode.leader_not_available, "leader_id": -1,
                                      "leader_epoch": -1, "replica_nodes": [], "isr_nodes": [],
                                      "offline_replicas": []}


def describe_topic(ctx: Context, topic: Topic, replicas: Replicas | None = None) -> MetadataTopicAnswer:
    replicas = replicas or Replicas(ctx.cluster.alive())
    return {"error_code": ErrorCode.none, "name": topic.name, "topic_id": topic.resource.uid,
            "is_internal": False, "partitions": _partitions(ctx, topic, replicas),
            "topic_authorized_operations": NO_OPERATIONS}


def describe_internal_topic(ctx: Context, name: str, replicas: Replicas | None = None) -> MetadataTopicAnswer:
    """__consumer_offsets or __transaction_state (internal_topics.py): a partition per shard,
    led by its coordinator."""
    return {"error_code": ErrorCode.none, "name": name, "topic_id": internal_topic_id(ctx, name),
            "is_internal": True, "partitions": _shard_partitions(ctx, replicas or Replicas(ctx.cluster.alive())),
            "topic_authorized_operations": NO_OPERATIONS}


def _shard_partitions(ctx: Context, replicas: Replicas) -> list[MetadataPartitionAnswer]:
    partitions: list[MetadataPartitionAnswer] = []
    for index in range(ctx.groups.shard_count):
        owner = ctx.cluster.shard_owner(index)
        if owner is None:
            partitions.append(NO_LEADER | {"partition_index": index})
            continue
        nodes = replicas.of(owner.node_id, 1)
        partitions.append({"error_code": ErrorCode.none, "partition_index": index, "leader_id": owner.node_id,
                           "leader_epoch": 0, "replica_nodes": nodes, "isr_nodes": nodes, "offline_replicas": []})
    return partitions


def _partitions(ctx: Context, topic: Topic, replicas: Replicas) -> list[MetadataPartitionAnswer]:
    """One entry per partition; the hot loop of a Metadata answer (keep it lean)."""
    cluster, name, factor = ctx.cluster, topic.name, topic.replication_factor
    session_if_open = ctx.partitions.session_if_open
    partitions: list[MetadataPartitionAnswer] = []
    for index in range(topic.partition_count):
        leader = cluster.leader_of(name, index)
        if leader is None:
            partitions.append(NO_LEADER | {"partition_index": index})
            continue
        session = session_if_open(name, index)
        if session is None or not cluster.owns(name, index):
            session = cluster.leader_epoch_of(name, index)
        nodes = replicas.of(leader.node_id, factor)
        partitions.append({"error_code": ErrorCode.none, "partition_index": index, "leader_id": leader.node_id,
                           "leader_epoch": session, "replica_nodes": nodes, "isr_nodes": nodes,
                           "offline_replicas": []})
    return partitions


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
    if (internal := internal_by_id(ctx, topic_id)) is not None:
        return describe_internal_topic(ctx, internal)
    topic = ctx.topics.by_id(topic_id)
    if topic is None:
        return {"error_code": ErrorCode.unknown_topic_id, "name": None, "topic_id": topic_id, "partitions": []}
    return describe_topic(ctx, topic)


async def _one(ctx: Context, name: str | None, auto_create: bool) -> MetadataTopicAnswer:
    if name is not None and is_internal(name):
        return describe_internal_topic(ctx, name)
    topic = ctx.topics.find(name) if name else None
    if topic is None and auto_create and name:
        try:
            topic = await ctx.topics.create(name, ctx.settings.default_partitions, {})
        except errors.EngineError as error:
            return {"error_code": error_code(error), "name": name, "partitions": []}
    if topic is None:
        return {"error_code": UNKNOWN_TOPIC, "name": name, "partitions": []}
    return describe_topic(ctx, topic)


@handles(ApiKey.METADATA, 0, 13, Codec(encode=encode_metadata_response))
async def metadata(ctx: Context, header: RequestHeader, request: MetadataRequest) -> MetadataAnswer:
    if request.topics is None or (header.api_version == 0 and not request.topics):
        replicas = Replicas(ctx.cluster.alive())
        topics = [describe_topic(ctx, topic, replicas) for topic in ctx.topics]
        topics += [describe_internal_topic(ctx, name, replicas) for name in INTERNAL_CONFIGS]
    else:
        topics = await _requested(ctx, request)
    return {"throttle_time": 0, "brokers": brokers(ctx, header.peer.listener), "cluster_id": ctx.cluster_id,
            "controller_id": ctx.cluster.controller().node_id, "topics": topics,
            "cluster_authorized_operations": NO_OPERATIONS, "error_code": ErrorCode.none}


@handles(ApiKey.DESCRIBE_CLUSTER, 0, 2)
async def describe_cluster(ctx: Context, header: RequestHeader, request: DescribeClusterRequest) -> DescribeClusterAnswer:
    return {"throttle_time": 0, "error_code": ErrorCode.none, "endpoint_type": 1,
            "cluster_id": ctx.cluster_id, "controller_id": ctx.cluster.controller().node_id,
            "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"],
                         "is_fenced": False}  # a live node is never fenced
                        for b in brokers(ctx, header.peer.listener)],
            "cluster_authorized_operations": NO_OPERATIONS}


@handles(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0)
async def describe_topic_partitions(ctx: Context, header: RequestHeader,
                                    request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsAnswer:
    names = sorted({t.name for t in request.topics} if request.topics else [*INTERNAL_CONFIGS, *(t.name for t in ctx.topics)])
    cursor = request.cursor
    if cursor is not None and request.topics and cursor.topic_name not in names:
        return {"throttle_time": 0, "next_cursor": None, "topics": [  # Kafka: the cursor must name a listed topic
            {"error_code": ErrorCode.invalid_request, "name": names[0], "topic_id": uuid.UUID(int=0),
             "is_internal": False, "partitions": [], "topic_authorized_operations": NO_OPERATIONS}]}
    if cursor is not None:
        names = [name for name in names if name >= cursor.topic_name]
    room = min(max(request.response_partition_limit, 1), PARTITION_LIMIT_MAX)
    replicas = Replicas(ctx.cluster.alive())
    answers: list[DescribeTopicPartitionsTopicAnswer] = []
    next_cursor: DescribeTopicPartitionsCursorAnswer | None = None
    for name in names:
        topic = ctx.topics.find(name)
        if topic is None and not is_internal(name):
            answers.append({"error_code": UNKNOWN_TOPIC, "name": name, "topic_id": uuid.UUID(int=0),
                            "is_internal": False, "partitions": [],
                            "topic_authorized_operations": TOPIC_OPERATIONS})
            continue
        if room == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        every = _partitions(ctx, topic, replicas) if topic is not None else _shard_partitions(ctx, replicas)
        partitions = every[first:first + room]
        room -= len(partitions)
        answers.append({"error_code": ErrorCode.none, "name": name,
                        "topic_id": topic.resource.uid if topic is not None else internal_topic_id(ctx, name),
                        "is_internal": topic is None, "topic_authorized_operations": TOPIC_OPERATIONS,
                        "partitions": [{**p, "eligible_leader_replicas": [], "last_known_elr": []}
                                       for p in partitions]})
        if first + len(partitions) < len(every):
            next_cursor = {"topic_name": name, "partition_index": first + len(partitions)}
            break
    return {"throttle_time": 0, "topics": answers, "next_cursor": next_cursor}
