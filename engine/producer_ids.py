"""Producer ids, unique for the life of a data directory, across every process sharing it.

Ids are handed out from blocks of BLOCK ids. Block n (ids n*BLOCK .. (n+1)*BLOCK-1) belongs
to whoever created the empty file `producer-id-blocks/<n>` with the store's
create_exclusive, an atomic claim even when several processes share the store: two
allocators never get the same block, and a crash skips ids but never repeats one.

A claim starts above the highest block listed and above the allocator's own last block, and
tries the next number while another process wins the race. Blocks are never deleted: a
deleted claim could be won again. One empty file per BLOCK ids is cheap enough (a million
producer ids leave a thousand files).

Upgrade: data written before blocks existed kept the start of the next unused block in the
file `producer-ids` (read-modify-written by the one broker). It is read, never written, as a
floor, so ids never go backwards.

Claiming a block is store work: it runs on a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio

from .store.atomic import read_whole
from .store.base import Store
from .store.workers import Workers

BLOCK = 1000
BLOCKS_DIR = "producer-id-blocks"
LEGACY_PATH = "producer-ids"
CLAIM_S = 30.0  # deadline of claiming a block (a few NameNode calls)
CLAIM_ATTEMPTS_MAX = 1000  # a claim that loses this many races in a row is a bug, not contention


class ProducerIds:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._next = 0
        self._block_end = 0
        self._last_block = -1
        self._claiming = asyncio.Lock()
        self._claims = Workers(1, "martlet-producer-ids")

    async def allocate(self) -> int:
        async with self._claiming:
            if self._next >= self._block_end:
                block = await asyncio.wrap_future(self._claims.call(self._claim_block, "a producer-id block's claim",
                                                                    CLAIM_S))
                self._last_block = block
                self._next, self._block_end = block * BLOCK, (block + 1) * BLOCK
        allocated = self._next
        self._next += 1
        return allocated

    def _claim_block(self) -> int:
        """Worker thread: the number of a block this allocator now owns."""
        self.store.mkdir(BLOCKS_DIR)
        block = max(self._first_free_hint(), self._last_block + 1)
        for _ in range(CLAIM_ATTEMPTS_MAX):
            if self.store.create_exclusive(f"{BLOCKS_DIR}/{block}"):
                return block
            block += 1  # another process took it: try the next one
        raise AssertionError(f"no producer-id block claimed in {CLAIM_ATTEMPTS_MAX} attempts")

    def _first_free_hint(self) -> int:
        """The lowest block number that no claim and no legacy counter has passed."""
        claimed = [int(name) for name in self.store.list(BLOCKS_DIR) if name.isdigit()]
        return max(max(claimed, default=-1) + 1, self._legacy_floor())

    def _legacy_floor(self) -> int:
        if not self.store.exists(LEGACY_PATH):
            return 0
        next_id = int(read_whole(self.store, LEGACY_PATH))
        return -(-next_id // BLOCK)  # the first block wholly at or above it
