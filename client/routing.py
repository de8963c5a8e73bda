"""Which physical partition a message goes to.

A PartitionKey is hashed to a 32-bit integer (CRC-32), that to one of the 65,536 logical
partitions (the hash modulo 65,536), and that to the physical partition whose slot range holds
it: the broker's own function (engine/catalog/ranges.py), so the SDK, the UDP front end and
`Topic.partition_for_key` always agree. A message without a key goes where the strategy says:
round robin (the default), random, or a function of the partition count.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence

from ..engine.catalog.ranges import SLOTS, partition_of_slot, slot_of

Strategy = str | Callable[[int], int]  # "round_robin", "random", or partition count -> index

__all__ = ["SLOTS", "Router", "Strategy", "slot_of"]


class Router:
    def __init__(self, ranges: Sequence[tuple[int, int]], strategy: Strategy = "round_robin") -> None:
        if isinstance(strategy, str) and strategy not in ("round_robin", "random"):
            raise ValueError(f"partition strategy {strategy!r} is not round_robin, random or a function")
        self.ranges = list(ranges)
        self.strategy = strategy
        self._turn = itertools.count()

    def partition(self, key: bytes | None) -> int:
        if key is not None:
            return partition_of_slot(self.ranges, slot_of(key))
        count = len(self.ranges)
        if self.strategy == "round_robin":
            return next(self._turn) % count
        if self.strategy == "random":
            return random.randrange(count)  # noqa: S311 - spreading load, not secrecy
        assert callable(self.strategy)
        chosen = self.strategy(count)
        if not 0 <= chosen < count:
            raise ValueError(f"the partition strategy chose {chosen} of {count} partitions")
        return chosen
