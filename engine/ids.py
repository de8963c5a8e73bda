"""Ids are injected as time is (engine/clock.py): every uuid the engine makes (topic ids and
resource names, group member ids, the cluster id, an admin's id) comes from an `Ids`, so a
test can count them instead of drawing them at random.

RandomIds is the real thing (uuid4); CountingIds gives 00000000-0000-0000-0000-000000000001,
...02, ... in the order they are asked for.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Protocol


class Ids(Protocol):
    def uuid(self) -> uuid.UUID: ...


class RandomIds:
    def uuid(self) -> uuid.UUID:
        return uuid.uuid4()


class CountingIds:
    def __init__(self, first: int = 1) -> None:
        self._next = itertools.count(first)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(int=next(self._next))
