"""Per-topic configuration in the engine's own names, with validation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import InvalidConfig

Kept = tuple[tuple[str, str], ...]  # (name, value) pairs, sorted by name
ConfigValue = int | float | str | Kept
Overrides = dict[str, ConfigValue]  # engine config names -> values, as a topic overrides them

FLUSH_MODES = ("async", "sync")
VISIBILITIES = ("persisted", "memory")  # what readers see: below C, or all that is in memory
TIMESTAMP_TYPES = ("create", "append")
CLEANUP_POLICIES = ("compact", "delete")  # cleanup_policy is a comma-separated list of these (or empty: neither)
LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class TopicConfig:
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0  # each segment rolls up to this much before segment_ms (spreads rolls out)
    max_batch_bytes: int = 1_048_588
    flush_mode: str = "async"
    visibility: str = "persisted"
    timestamp_type: str = "create"
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 86_400_000  # how long a compacted log keeps a tombstone once cleaned
    min_compaction_lag_ms: int = 0  # records younger than this are not compacted
    max_compaction_lag_ms: int = LONG_MAX  # a record older than this gets its log cleaned, dirty or not
    min_cleanable_ratio: float = 0.5  # a log is cleaned once this share of it is dirty
    # Settings a client gave that the engine keeps with the topic without acting on them (the
    # gateway's, by the gateway's names: Kafka's configs that mean nothing here, see
    # gateway/topic_configs.py).
    kept: Kept = ()

    def updated(self, changes: Mapping[str, ConfigValue]) -> TopicConfig:
        """A copy with `changes` applied and checked; unknown names are an error."""
        known = {field.name: field.type for field in fields(self)}
        for name in changes:
            if name not in known:
                raise InvalidConfig(f"unknown topic config {name!r}")
        if "kept" in changes:  # read back from JSON as lists
            changes = {**changes, "kept": _pairs(changes["kept"])}
        result = replace(self, **changes)  # type: ignore[arg-type]  # check() below validates each value
        result.check()
        return result

    def check(self) -> None:
        _at_least("retention_ms", self.retention_ms, -1)
        _at_least("retention_bytes", self.retention_bytes, -1)
        _at_least("segment_bytes", self.segment_bytes, 14)
        _at_least("segment_ms", self.segment_ms, 1)
        _at_least("segment_jitter_ms", self.segment_jitter_ms, 0)
        _at_least("max_batch_bytes", self.max_batch_bytes, 0)
        _one_of("flush_mode", self.flush_mode, FLUSH_MODES)
        _one_of("visibility", self.visibility, VISIBILITIES)
        _one_of("timestamp_type", self.timestamp_type, TIMESTAMP_TYPES)
        for item in self.cleanup_policy.split(",") if self.cleanup_policy else ():
            _one_of("cleanup_policy", item, CLEANUP_POLICIES)
        _at_least("delete_retention_ms", self.delete_retention_ms, 0)
        _at_least("min_compaction_lag_ms", self.min_compaction_lag_ms, 0)
        _at_least("max_compaction_lag_ms", self.max_compaction_lag_ms, 1)
        if not isinstance(self.min_cleanable_ratio, (int, float)) or not 0 <= self.min_cleanable_ratio <= 1:
            raise InvalidConfig(f"min_cleanable_ratio must be a number in [0, 1], not {self.min_cleanable_ratio!r}")

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def deletes(self) -> bool:
        """Retention (retention_ms, retention_bytes) deletes old segments."""
        return "delete" in self.cleanup_policy.split(",")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pairs(value: object) -> Kept:
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
            for pair in value):
        raise InvalidConfig(f"kept must be (name, value) pairs of strings, not {value!r}")
    return tuple(sorted((name, text) for name, text in value))


def _at_least(name: str, value: int, low: int) -> None:
    if not isinstance(value, int) or value < low:
        raise InvalidConfig(f"{name} must be an integer >= {low}, not {value!r}")


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InvalidConfig(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
