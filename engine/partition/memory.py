"""The memory pool: one byte budget per process, shared by every partition's memory tail
and by the block cache of store reads.

Unpersisted bytes cannot be reclaimed; they only leave when the persister has written them.
Persisted bytes (tails' persisted batches, cached blocks) are reclaimed whenever the total
goes over budget, least recently read first. Producers wait for room when unpersisted bytes
alone fill the budget, so memory stays bounded without failing a write.

Counters and waiters belong to the event loop; the block cache, filled from reader threads,
tells the pool through `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol


class Reclaimable(Protocol):
    def drop_persisted(self) -> int:
        """Free every persisted byte held; returns how many."""
        ...


class BlockSource(Protocol):
    @property
    def bytes_held(self) -> int: ...

    def oldest_read(self) -> float | None:
        """Monotonic time the least recently read block was last read; None if empty."""
        ...

    def drop_oldest(self) -> int: ...


class MemoryPool:
    def __init__(self, budget_bytes: int, monotonic: Callable[[], float] = time.monotonic) -> None:
        if budget_bytes <= 0:
            raise ValueError("the memory budget must be positive")
        self.budget_bytes = budget_bytes
        self.monotonic = monotonic  # the clock of "last read", shared with the block cache
        self.unpersisted_bytes = 0
        self.tail_bytes = 0  # persisted bytes held by tails
        self._tails: OrderedDict[Reclaimable, float] = OrderedDict()  # least recently read first
        self._blocks: BlockSource | None = None
        self._room: list[asyncio.Future[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def attach_blocks(self, blocks: BlockSource) -> None:
        self._blocks = blocks

    @property
    def used_bytes(self) -> int:
        blocks = self._blocks.bytes_held if self._blocks else 0
        return self.unpersisted_bytes + self.tail_bytes + blocks

    # -- accounting (event loop) ------------------------------------------------------------

    def added(self, size: int) -> None:
        """A tail took `size` unpersisted bytes."""
        self.unpersisted_bytes += size
        if self.used_bytes > self.budget_bytes:
            self.reclaim()

    def persisted(self, tail: Reclaimable, size: int) -> None:
        """`size` bytes of `tail` reached the store; they become reclaimable."""
        self.unpersisted_bytes -= size
        self.tail_bytes += size
        self.read(tail)
        if self.used_bytes > self.budget_bytes:
            self.reclaim()
        if self._room:  # producers wait for room
            self._wake()

    def read(self, tail: Reclaimable) -> None:
        self._tails[tail] = self.monotonic()
        self._tails.move_to_end(tail)

    def forget(self, tail: Reclaimable, unpersisted: int) -> None:
        """A tail goes away (partition closed or deleted) with its bytes."""
        self.drop(tail)
        self.unpersisted_bytes -= unpersisted
        self._wake()

    def drop(self, tail: Reclaimable) -> None:
        """Drop a tail's persisted bytes now (the store's copy changed: a compaction pass)."""
        if self._tails.pop(tail, None) is not None:
            self.tail_bytes -= tail.drop_persisted()

    def reclaim(self) -> None:
        """Drop persisted data, least recently read first, until within budget."""
        while self.used_bytes > self.budget_bytes:
            tail_time = next(iter(self._tails.values()), None)
            block_time = self._blocks.oldest_read() if self._blocks else None
            if block_time is not None and (tail_time is None or block_time <= tail_time):
                self._blocks.drop_oldest()  # type: ignore[union-attr]
            elif tail_time is not None:
                tail, _ = self._tails.popitem(last=False)
                self.tail_bytes -= tail.drop_persisted()
            else:
                break  # only unpersisted bytes left: producers wait in wait_for_room

    def reclaim_soon(self) -> None:
        """Called from any thread (the block cache grew)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.reclaim)

    # -- back pressure --------------------------------------------------------------------

    def has_room(self) -> bool:
        return self.unpersisted_bytes < self.budget_bytes

    async def wait_for_room(self) -> None:
        """Return once unpersisted bytes are below budget again."""
        while not self.has_room():
            future = asyncio.get_running_loop().create_future()
            self._room.append(future)
            try:
                await future
            finally:
                if future in self._room:
                    self._room.remove(future)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def _wake(self) -> None:
        if self.has_room():
            waiting, self._room = self._room, []
            for future in waiting:
                if not future.done():
                    future.set_result(None)
