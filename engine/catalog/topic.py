"""A topic's metadata: resource name, version V, slot ranges, configuration, replication factor.

V is bumped whenever the partition layout changes (today: partitions added), so a writer
holding an older layout can be told to refresh.

The replication factor is what the topic was created with: the data has one copy in the
store (HDFS keeps its own replicas), and the factor only tells how many nodes Metadata lists
as the partition's replicas. topic.json files written before it existed lack the field and
read as 1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from .config import TopicConfig
from .names import ResourceName
from .ranges import partition_of_slot, slot_of, split_for


@dataclass(frozen=True, slots=True)
class Topic:
    resource: ResourceName
    version: int
    ranges: tuple[tuple[int, int], ...]
    config: TopicConfig = field(default_factory=TopicConfig)
    overrides: frozenset[str] = frozenset()
    created_ms: int = 0
    replication_factor: int = 1

    @property
    def name(self) -> str:
        return self.resource.name

    @property
    def partition_count(self) -> int:
        return len(self.ranges)

    def grown(self, count: int) -> Topic:
        return replace(self, version=self.version + 1, ranges=tuple(split_for(list(self.ranges), count)))

    def reconfigured(self, config: TopicConfig, overrides: frozenset[str]) -> Topic:
        return replace(self, config=config, overrides=overrides)

    def partition_for_key(self, key: bytes) -> int:
        return partition_of_slot(list(self.ranges), slot_of(key))

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "resource": str(self.resource),
            "version": self.version,
            "ranges": [list(r) for r in self.ranges],
            "config": self.config.to_dict(),
            "overrides": sorted(self.overrides),
            "created_ms": self.created_ms,
            "replication_factor": self.replication_factor,
        }
        return json.dumps(doc, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Topic:
        doc = json.loads(data)
        config = TopicConfig().updated(doc["config"])
        ranges = tuple((int(a), int(b)) for a, b in doc["ranges"])
        return cls(ResourceName.parse(doc["resource"]), int(doc["version"]), ranges, config,
                   frozenset(doc["overrides"]), int(doc["created_ms"]), int(doc.get("replication_factor", 1)))
