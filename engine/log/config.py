"""Per-log settings. Units are the last word of each name."""

from dataclasses import dataclass

from ..errors import InvalidConfig

SEGMENT_BYTES_MAX = 2**31 - 1  # index entries hold file positions as u32; stay well inside


@dataclass
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    retention_ms: int = 604800000  # -1 = keep forever
    retention_bytes: int = -1  # -1 = no size limit
    index_interval_bytes: int = 4096
    deletes: bool = True  # retention deletes old segments (cleanup.policy has delete)
    compacted: bool = False  # a cleaner keeps the latest record per key (cleanup.policy has compact)
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    min_cleanable_ratio: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.segment_bytes <= SEGMENT_BYTES_MAX:
            raise InvalidConfig(f"segment_bytes must be in 1..{SEGMENT_BYTES_MAX}")
        if self.segment_ms <= 0 or self.index_interval_bytes < 0:
            raise InvalidConfig("segment_ms must be positive and index_interval_bytes not negative")
        if self.retention_ms < -1 or self.retention_bytes < -1:
            raise InvalidConfig("retention_ms and retention_bytes must be >= -1")
