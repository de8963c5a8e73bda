"""Answers compared whole, every field: `shape` reduces a decoded answer to plain values (what
each broker picks for itself only as null or not), `differences` lists where two shapes differ."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

# Values each broker chooses for itself: compared as null or not.
OWN = frozenset({"topic_id", "cluster_id", "host", "port", "throttle_time", "log_append_time"})
# Lists clients look up by name or index, which Kafka answers in an order of its own (unknown
# topics first, partitions as a hash map holds them): compared sorted. Any other list (replicas,
# config synonyms, records) is compared in order.
ORDER_FREE = frozenset({"topics", "partitions", "responses", "partition_responses", "results", "configs"})


def shape(value: Any, name: str = "") -> Any:
    """An answer as nested plain values, with OWN fields and messages reduced to their nullness
    and ORDER_FREE lists sorted."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: shape(getattr(value, f.name), f.name) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        items = [shape(item) for item in value]
        return sorted(items, key=order) if name in ORDER_FREE else items
    if name in OWN or name.endswith("message"):
        return None if value is None else "<set>"
    if isinstance(value, uuid.UUID):
        return "<zero>" if value.int == 0 else "<id>"
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else value  # enums as numbers


def order(item: Any) -> tuple[str, int]:
    if isinstance(item, dict):
        return str(item.get("name", item.get("topic", ""))), item.get("partition_index", item.get("partition", 0))
    return "", 0


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return [d for key in ours.keys() | theirs.keys()
                for d in differences(ours.get(key), theirs.get(key), f"{path}.{key}")]
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [d for index, (a, b) in enumerate(zip(ours, theirs, strict=True))
                for d in differences(a, b, f"{path}[{index}]")]
    return [] if ours == theirs else [f"{path}: Martlet {ours!r}, Kafka {theirs!r}"]
