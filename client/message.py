"""A message as the SDK's users see it, written or read."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Message:
    """value, optional key (the PartitionKey) and headers; once read (or written), where it
    lives: topic, partition, offset, and its timestamp in milliseconds."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int = -1
    topic: str = ""
    partition: int = -1
    offset: int = -1
    sequence: int = field(default=-1)  # the producer's number for it (Producer.send returns it)
    pinned: bool = False  # the sender chose the partition: it stays there when the topic grows
