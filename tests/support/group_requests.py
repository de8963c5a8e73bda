"""Group requests over a raw connection at the versions real clients send (JoinGroup, SyncGroup,
Heartbeat, OffsetCommit, OffsetFetch), the consumer protocol's embedded formats, and whether a
broker's group coordinator answers yet."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from martlet.protocol.codec import build
from tests.integration.raw_client import RawClient

E = ErrorCode
GROUP_CONFIG = b"[groups]\ninitial_rebalance_delay_ms = 0\n"
SESSION_MS = 30_000        # long enough that no member expires while a case runs
REBALANCE_MS = 10_000
RETRIABLE = {E.coordinator_load_in_progress, E.coordinator_not_available, E.not_coordinator}


# -- the consumer protocol's embedded formats (what a Java consumer puts in JoinGroup/SyncGroup)


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        name = topic.encode()
        out += struct.pack(">h", len(name)) + name
    return out + struct.pack(">i", -1)


def assignment(topic: str, partitions: Sequence[int]) -> bytes:
    """ConsumerProtocolAssignment v0: one topic's partitions, null user data."""
    name = topic.encode()
    out = struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", len(partitions))
    out += b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


# -- requests


def code(value: int) -> ErrorCode:
    return ErrorCode(value)


def request(api_key: int, version: int, body: dict[str, Any]) -> Any:
    return build(load_request_schema(api_key, version), body)


def join_request(group: str, member_id: str = "", version: int = 5, instance: str | None = None,
                 protocol_type: str = "consumer", protocols: Sequence[tuple[str, bytes]] = (("range", b""),),
                 session_ms: int = SESSION_MS) -> Any:
    return request(11, version, {
        "group_id": group, "session_timeout": session_ms, "rebalance_timeout": REBALANCE_MS,
        "member_id": member_id, "group_instance_id": instance, "protocol_type": protocol_type,
        "protocols": [{"name": name, "metadata": meta} for name, meta in protocols], "reason": None})


def join(client: RawClient, group: str, member_id: str = "", **kw: Any) -> Any:
    return client.request(join_request(group, member_id, **kw))


def sync(client: RawClient, group: str, generation: int, member_id: str, version: int = 3,
         assignments: Sequence[tuple[str, bytes]] = (), instance: str | None = None,
         protocol_type: str | None = None, protocol_name: str | None = None) -> ErrorCode:
    body = {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": instance,
            "protocol_type": protocol_type, "protocol_name": protocol_name,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]}
    return code(client.request(request(14, version, body)).error_code)


def heartbeat(client: RawClient, group: str, generation: int, member_id: str, version: int = 4,
              instance: str | None = None) -> ErrorCode:
    body = {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": instance}
    return code(client.request(request(12, version, body)).error_code)


Offset = tuple[str, int, int, str | None]  # topic, partition, offset, metadata


def commit(client: RawClient, group: str, generation: int, member_id: str, offsets: Sequence[Offset],
           version: int = 8, instance: str | None = None) -> list[ErrorCode]:
    """Partition error codes, in request order (one topic entry per offset)."""
    topics = [{"name": topic, "partitions": [{"partition_index": partition, "committed_offset": offset,
                                              "committed_leader_epoch": -1, "committed_metadata": metadata}]}
              for topic, partition, offset, metadata in offsets]
    body = {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
            "group_instance_id": instance, "topics": topics}
    answer = client.request(request(8, version, body))
    return [code(p.error_code) for t in answer.topics for p in t.partitions]


def fetch(client: RawClient, group: str,
          topics: dict[str, list[int]] | None) -> tuple[ErrorCode, list[tuple[Any, ...]]]:
    """OffsetFetch v8 of one group: its error and (topic, partition, offset, error) rows."""
    wanted = None if topics is None else [{"name": t, "partition_indexes": p} for t, p in topics.items()]
    body = {"groups": [{"group_id": group, "topics": wanted}], "require_stable": False}
    [answer] = client.request(request(9, 8, body)).groups
    rows = [(t.name, p.partition_index, p.committed_offset, code(p.error_code))
            for t in answer.topics for p in t.partitions]
    return code(answer.error_code), sorted(rows)


def coordinator_ready(client: RawClient) -> bool:
    body = {"key_type": 0, "coordinator_keys": ["group-errors-warmup"]}
    [found] = client.request(request(10, 4, body)).coordinators
    if found.error_code != E.none:
        return False
    return heartbeat(client, "group-errors-warmup", 1, "nobody") not in RETRIABLE
