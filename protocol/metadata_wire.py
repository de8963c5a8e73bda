"""Metadata answers (key 3, v0-v13) written by hand: every client asks on connect and on
every metadata refresh, and kio's generic writer (with building its entities first) was
two thirds of a one-topic answer's cost (cProfile: 45 µs a request, 30 of them there).
Requests still go through kio. The property tests hold this writer to kio's bytes.

Layout (Kafka's MetadataResponse.json); v9+ are flexible (compact lengths, a tagged-field
section after every struct, response header v1):

    throttle_time_ms int32 (v3+),
    brokers [node_id int32, host string, port int32, rack nullable string (v1+)],
    cluster_id nullable string (v2+), controller_id int32 (v1+),
    topics [error_code int16, name string (nullable v12+), topic_id uuid (v10+),
            is_internal bool (v1+),
            partitions [error_code int16, partition_index int32, leader_id int32,
                        leader_epoch int32 (v7+), replica_nodes [int32], isr_nodes [int32],
                        offline_replicas [int32] (v5+)],
            topic_authorized_operations int32 (v8+)],
    cluster_authorized_operations int32 (v8-v10), error_code int16 (v13+)

A field the answer mapping leaves out is written as kio's build fills it in: the schema's
default, else zero (codec.build).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from .answers import MetadataAnswer, MetadataBrokerAnswer, MetadataTopicAnswer
from .codec import RequestHeader
from .produce_wire import I16, I32, length, response_start, string

FLEXIBLE_FROM = 9
NO_OPERATIONS = -2147483648  # kio's default for the authorized-operations fields
ZERO_UUID = uuid.UUID(int=0)
PARTITION_HEAD = struct.Struct(">hii")  # error_code, partition_index, leader_id
PARTITION_HEAD_EPOCH = struct.Struct(">hiii")  # ... and leader_epoch (v7+)
NO_NODES: Sequence[int] = ()


def encode_metadata_response(header: RequestHeader, answer: MetadataAnswer) -> bytes:
    """A whole response frame (size prefix included) for the handler's answer mapping."""
    version = header.api_version
    flexible = version >= FLEXIBLE_FROM
    out = response_start(header.correlation_id, flexible)
    if version >= 3:
        out += I32.pack(answer.get("throttle_time", 0))
    _brokers(out, answer["brokers"], version, flexible)
    if version >= 2:
        string(out, answer.get("cluster_id"), flexible)
    if version >= 1:
        out += I32.pack(answer.get("controller_id", -1))
    topics = answer["topics"]
    length(out, len(topics), flexible)
    nodes: dict[int, bytes] = {}  # id of a node list -> its bytes: partitions share their lists
    for topic in topics:
        _topic(out, topic, version, flexible, nodes)
    if 8 <= version <= 10:
        out += I32.pack(answer.get("cluster_authorized_operations", NO_OPERATIONS))
    if version >= 13:
        out += I16.pack(int(answer.get("error_code", 0)))
    if flexible:
        out.append(0)
    I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def _brokers(out: bytearray, brokers: Sequence[MetadataBrokerAnswer], version: int, flexible: bool) -> None:
    length(out, len(brokers), flexible)
    for broker in brokers:
        out += I32.pack(broker["node_id"])
        string(out, broker["host"], flexible)
        out += I32.pack(broker["port"])
        if version >= 1:
            string(out, broker.get("rack"), flexible)
        if flexible:
            out.append(0)


def _topic(out: bytearray, topic: MetadataTopicAnswer, version: int, flexible: bool, nodes: dict[int, bytes]) -> None:
    out += I16.pack(int(topic["error_code"]))
    name = topic["name"]
    string(out, "" if name is None and version < 12 else name, flexible)  # null only where the schema allows it
    if version >= 10:
        topic_id = topic.get("topic_id") or ZERO_UUID
        out += (uuid.UUID(topic_id) if isinstance(topic_id, str) else topic_id).bytes  # kio's build takes both
    if version >= 1:
        out.append(1 if topic.get("is_internal", False) else 0)
    partitions = topic["partitions"]
    length(out, len(partitions), flexible)
    head = PARTITION_HEAD_EPOCH if version >= 7 else PARTITION_HEAD
    for p in partitions:
        if version >= 7:
            out += head.pack(int(p["error_code"]), p["partition_index"], p["leader_id"], p.get("leader_epoch", -1))
        else:
            out += head.pack(int(p["error_code"]), p["partition_index"], p["leader_id"])
        out += _nodes(p.get("replica_nodes", NO_NODES), flexible, nodes)
        out += _nodes(p.get("isr_nodes", NO_NODES), flexible, nodes)
        if version >= 5:
            out += _nodes(p.get("offline_replicas", NO_NODES), flexible, nodes)
        if flexible:
            out.append(0)
    if version >= 8:
        out += I32.pack(topic.get("topic_authorized_operations", NO_OPERATIONS))
    if flexible:
        out.append(0)


def _nodes(ids: Sequence[int], flexible: bool, written: dict[int, bytes]) -> bytes:
    """An array of node ids; a list already written in this answer is not written again."""
    found = written.get(id(ids))
    if found is None:
        encoded = bytearray()
        length(encoded, len(ids), flexible)
        encoded += struct.pack(f">{len(ids)}i", *ids)
        found = written[id(ids)] = bytes(encoded)
    return found
