"""Small value types every part of the engine names things with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class TopicPartition(NamedTuple):
    """One physical partition of a topic, by topic name and partition index."""

    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A group's committed position in one partition (OffsetCommit, TxnOffsetCommit)."""

    offset: int
    leader_epoch: int  # -1 if unknown
    metadata: str | None
    commit_ms: int
    topic_id: str  # the topic's uuid (hex str) at commit time


NewOffsets = list[tuple[str, str, int, CommittedOffset]]  # a commit request's (topic, topic_id, partition, value)
