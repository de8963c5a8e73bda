"""Fetch v12 request bodies (the fields a consumer sends) and a Fetch through the handler test broker."""

from __future__ import annotations

from tests.unit.gateway.handlers.harness import FETCH, Broker


def fetch_body(partitions: list[tuple[str, int, int, int]], max_bytes: int = 1 << 20, min_bytes: int = 0,
               max_wait_ms: int = 0) -> dict:
    topics: dict[str, list] = {}
    for topic, partition, offset, partition_max_bytes in partitions:
        topics.setdefault(topic, []).append({
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": partition_max_bytes})
    return {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": name, "partitions": wanted} for name, wanted in topics.items()]}


def fetch(broker: Broker, partitions: list[tuple[str, int, int, int]], **limits: int) -> list:
    answer = broker.call(FETCH, 12, fetch_body(partitions, **limits))
    assert answer.error_code == 0
    return [p for topic in answer.responses for p in topic.partitions]
