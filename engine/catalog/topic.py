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
from .ranges import partition_of_slot, slot_of, split_for, split_with_parents


@dataclass(frozen=True, slots=True)
class Topic:
    resource: ResourceName
    version: int
    ranges: tuple[tuple[int, int], ...]
    config: TopicConfig = field(default_factory=TopicConfig)
    overrides: frozenset[str] = frozenset()
    created_ms: int = 0
    replication_factor: int = 1
    # (child, parent, offset): partition `child` took the upper half of `parent`'s slots when the
    # topic grew, and `parent` held no record written by the new ranges below `offset` (its end
    # when its node saw the new V; -1, pending, until the parent's owner records it: in a
    # cluster the node growing the topic may not serve the parent). Native readers hold a
    # key's records in `child` back until they have read `parent` up to `offset`.
    splits: tuple[tuple[int, int, int], ...] = ()

    @property
    def name(self) -> str:
        return self.resource.name

    @property
    def partition_count(self) -> int:
        return len(self.ranges)

    def grown(self, count: int) -> Topic:
        return replace(self, version=self.version + 1, ranges=tuple(split_for(list(self.ranges), count)))

    def parents(self, old_count: int) -> list[tuple[int, int]]:
        """(child, parent) of each partition from `old_count` on: the partition whose range it
        took the upper half of, replaying the splits from the ranges `old_count` partitions had."""
        before = self.ranges_at(old_count)
        return split_with_parents(before, self.partition_count)[1]

    def ranges_at(self, count: int) -> list[tuple[int, int]]:
        """The ranges the topic had with `count` partitions (each split joined back)."""
        ranges = list(self.ranges)
        while len(ranges) > count:
            start, end = ranges.pop()
            joined = next(i for i, (_, upper) in enumerate(ranges) if upper == start)
            ranges[joined] = (ranges[joined][0], end)
        return ranges

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
            "splits": [list(split) for split in self.splits],
        }
        return json.dumps(doc, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Topic:
        doc = json.loads(data)
        config = TopicConfig().updated(doc["config"])
        ranges = tuple((int(a), int(b)) for a, b in doc["ranges"])
        return cls(ResourceName.parse(doc["resource"]), int(doc["version"]), ranges, config,
                   frozenset(doc["overrides"]), int(doc["created_ms"]), int(doc.get("replication_factor", 1)),
                   tuple((int(c), int(p), int(o)) for c, p, o in doc.get("splits", ())))
