"""Producer-id blocks: claimed atomically, never overlapping, never going backwards."""

import asyncio
import concurrent.futures

from martlet.engine.producer_ids import BLOCK, BLOCKS_DIR, LEGACY_PATH, ProducerIds
from martlet.engine.store import LocalStore, MemoryStore
from martlet.engine.store.atomic import write_atomically


def take(allocator: ProducerIds, count: int = 1) -> list[int]:
    """`count` ids, each allocated as the broker does, from an event loop."""
    async def allocate() -> list[int]:
        return [await allocator.allocate() for _ in range(count)]
    return asyncio.run(allocate())


def test_ids_are_consecutive_within_a_block_and_blocks_are_claimed_as_files() -> None:
    store = MemoryStore()
    ids = ProducerIds(store)
    assert take(ids, BLOCK + 1) == list(range(BLOCK + 1))
    assert store.list(BLOCKS_DIR) == ["0", "1"]


def test_a_restarted_allocator_starts_above_every_claimed_block() -> None:
    store = MemoryStore()
    take(ProducerIds(store))
    assert take(ProducerIds(store)) == [BLOCK]  # block 0 may have ids in use: skipped


def test_two_allocators_on_one_store_never_overlap(tmp_path) -> None:
    """Two processes' allocators (two LocalStores on one directory) racing from threads."""
    stores = [LocalStore(str(tmp_path)), LocalStore(str(tmp_path))]
    allocators = [ProducerIds(store) for store in stores]

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda allocator: take(allocator, 3 * BLOCK + 7), allocators)
    assert not set(first) & set(second)
    assert len(set(first)) == len(first) and len(set(second)) == len(second)
    blocks = {i // BLOCK for i in first}, {i // BLOCK for i in second}
    assert not blocks[0] & blocks[1]


def test_a_data_dir_from_before_blocks_keeps_its_ids_going_forward() -> None:
    """Older brokers kept the next free block's first id in `producer-ids`."""
    store = MemoryStore()
    write_atomically(store, LEGACY_PATH, b"5000")
    assert take(ProducerIds(store)) == [5000]
    write_atomically(store, LEGACY_PATH, b"90500")  # not on a block boundary: round up
    assert take(ProducerIds(store)) == [91000]


def test_a_claim_starts_above_blocks_another_process_claimed() -> None:
    store = MemoryStore()
    ids = ProducerIds(store)
    take(ids)
    store.create_exclusive(f"{BLOCKS_DIR}/1")  # the other process claimed the next block
    ids._next = ids._block_end  # this block is used up
    assert take(ids) == [2 * BLOCK]
