"""Small value types every part of the engine names things with."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """One physical partition of a topic, by topic name and partition index."""

    topic: str
    partition: int
