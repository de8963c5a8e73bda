"""Engine-wide settings: defaults for new topics and limits, from the config file."""

from __future__ import annotations

from dataclasses import dataclass, field

from .catalog.config import TopicConfig
from .coordinator.runtime import SHARDS_DEFAULT
from .groups.classic import GroupLimits


@dataclass(frozen=True, slots=True)
class EngineSettings:
    owner: str = "martlet"
    topic_defaults: TopicConfig = field(default_factory=TopicConfig)
    index_interval_bytes: int = 4096
    retention_check_ms: int = 300_000
    compaction_check_ms: int = 15_000           # how often compacted logs are checked for a pass (Kafka log.cleaner.backoff.ms)
    compaction_map_bytes: int = 128 << 20       # the key map of one compaction pass (Kafka log.cleaner.dedupe.buffer.size)
    topic_partitions_max: int = 10_000
    groups: GroupLimits = field(default_factory=GroupLimits)
    offsets_retention_ms: int = 604_800_000     # Kafka offsets.retention.minutes = 7 days
    # Committed offsets and group records are split into this many shards (Kafka's
    # offsets.topic.num.partitions, same default and same group -> shard hash), the unit a
    # coordinator owns. Fixed when a data dir is first used: later values are ignored.
    offsets_shards: int = SHARDS_DEFAULT
    memory_bytes: int = 256 << 20               # the pool: memory tails and the block cache
    flush_bytes: int = 1 << 20                  # the most one partition's flush (group commit) writes
    flush_ms: int = 0                           # how long a flush waits to gather more writes (0: next loop turn)
    flush_threads: int = 16                     # flushes running at once (store round trips; on HDFS each waits for an hsync)
    read_threads: int = 2                       # reads from the store running at once
    drain_ms: int = 30_000                      # a graceful stop waits this long for persisting
    checkpoint_publish_ms: int = 1000           # a partition's C is published for outside readers at most this often
    hdfs_writers_max: int = 2000                # HDFS files open for writing at once (DataNode pipelines)
    hdfs_writer_idle_ms: int = 60_000           # an HDFS file not written this long is closed
