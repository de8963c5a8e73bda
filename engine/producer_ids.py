"""Producer ids, unique for the life of a data directory.

Ids are handed out from blocks: the file `producer-ids` holds the first id of the next
unused block and is advanced (atomically) before any id of a block is handed out, so a
crash can skip ids but never repeat one. Claiming a block is a store call, made off the
event loop.
"""

from __future__ import annotations

import asyncio

from .store.atomic import read_whole, write_atomically
from .store.base import Store

BLOCK = 1000
PATH = "producer-ids"


class ProducerIds:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._next = 0
        self._block_end = 0
        self._claiming = asyncio.Lock()

    async def allocate(self) -> int:
        async with self._claiming:
            if self._next >= self._block_end:
                self._next, self._block_end = await asyncio.get_running_loop().run_in_executor(None, self._claim_block)
        allocated = self._next
        self._next += 1
        return allocated

    def _claim_block(self) -> tuple[int, int]:
        """Worker thread: the next block, [start, end)."""
        start = int(read_whole(self.store, PATH)) if self.store.exists(PATH) else 0
        write_atomically(self.store, PATH, str(start + BLOCK).encode())
        return start, start + BLOCK
