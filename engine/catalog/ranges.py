"""Logical partitions (a fixed key space of 65,536 slots, as in Swift) mapped by ranges
onto physical partitions.

Physical partition i owns one contiguous range [start, end). Adding a partition splits the
widest range (the lowest index on ties) and gives its upper half to the new partition, so
existing partitions keep the lower part of what they had and no slot ever has two owners.
"""

from __future__ import annotations

import zlib

SLOTS = 65_536


def initial_ranges(count: int) -> list[tuple[int, int]]:
    assert 1 <= count <= SLOTS
    bounds = [i * SLOTS // count for i in range(count + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(count)]


def split_for(ranges: list[tuple[int, int]], count: int) -> list[tuple[int, int]]:
    """The ranges after growing to `count` physical partitions."""
    return split_with_parents(ranges, count)[0]


def split_with_parents(ranges: list[tuple[int, int]], count: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The ranges after growing to `count` physical partitions, and (child, parent) for each
    new partition: the one whose range it took the upper half of."""
    assert len(ranges) <= count <= SLOTS
    result = list(ranges)
    parents = []
    while len(result) < count:
        widest = max(range(len(result)), key=lambda i: (result[i][1] - result[i][0], -i))
        start, end = result[widest]
        middle = start + (end - start) // 2
        result[widest] = (start, middle)
        parents.append((len(result), widest))
        result.append((middle, end))
    return result, parents


def slot_of(key: bytes) -> int:
    """A stable hash of a key into the slot space."""
    return zlib.crc32(key) % SLOTS


def partition_of_slot(ranges: list[tuple[int, int]], slot: int) -> int:
    for index, (start, end) in enumerate(ranges):
        if start <= slot < end:
            return index
    raise AssertionError(f"slot {slot} has no owner in {ranges}")
