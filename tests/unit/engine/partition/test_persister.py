"""Partition + persister + pool on a store that can fail, driven on a real event loop."""

import asyncio
import threading

import pytest

from martlet.engine.errors import StaleSession
from martlet.engine.log.config import LogConfig
from martlet.engine.partition.memory import MemoryPool
from martlet.engine.partition.partition import Partition
from martlet.engine.partition.persister import Persister
from martlet.engine.store.memory import MemoryAppendFile, MemoryStore
from martlet.records.header import iter_batches
from tests.unit.engine.log.log_batches import ManualClock, make_batch

WAIT_S = 10
BATCH_BYTES = 81  # make_batch(record_count=2)


class FlakyStore(MemoryStore):
    """A MemoryStore whose writes fail while `down`; a failing write may land half its bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.half_writes = False
        self.writes = 0
        self.hang: threading.Event | None = None  # set: the next write blocks until it is set

    def open_append(self, path: str) -> MemoryAppendFile:
        if self.down:
            raise OSError("store is down")
        file = super().open_append(path)
        store = self

        class Flaky(MemoryAppendFile):
            def write(self, data: bytes | memoryview) -> None:
                if store.hang is not None:
                    released, store.hang = store.hang, None
                    released.wait(WAIT_S)
                    raise OSError("fenced: the file was recovered while this write hung")
                if store.down:
                    if store.half_writes:
                        file.write(bytes(data)[: len(data) // 2])
                    raise OSError("store is down")
                store.writes += 1
                file.write(data)

            def sync(self) -> None:
                if store.down:
                    raise OSError("store is down")

        flaky = Flaky(bytearray())
        flaky._data = file._data  # share the bytes with the store's file
        return flaky

    def read(self, path: str, offset: int, length: int) -> bytes:
        if self.down:
            raise OSError("store is down")
        return super().read(path, offset, length)


def open_partition(store, pool, path="t-0") -> Partition:
    return Partition.open(store, path, LogConfig(segment_bytes=2000), ManualClock(), pool)


def append(partition: Partition, persister: Persister, count: int = 1) -> list[int]:
    offsets = []
    for _ in range(count):
        offsets.append(partition.append(*make_batch(record_count=2)))
        persister.schedule(partition)
    return offsets


def stored_offsets(store, path="t-0") -> list[int]:
    reopened = Partition.open(store, path, LogConfig(segment_bytes=2000), ManualClock(), MemoryPool(1 << 20))
    data = reopened.read_stored(0, 10**9, reopened.checkpoint)
    return [header.base_offset for _, header in iter_batches(data)]


def run(scenario, commit_timeout_s=WAIT_S):
    async def wrapper():
        persister = Persister(commit_bytes=1 << 20, commit_ms=1, threads=2, now_ms=ManualClock(), retry_ms_max=50,
                              commit_timeout_s=commit_timeout_s)
        try:
            await asyncio.wait_for(scenario(persister), WAIT_S)
        finally:
            persister.close()

    asyncio.run(wrapper())


def test_c_follows_the_commits_and_readers_see_only_below_c():
    store = FlakyStore()

    async def scenario(persister):
        partition = open_partition(store, MemoryPool(1 << 20))
        offsets = append(partition, persister, 3)
        assert partition.read_memory(0, 10**6) == b""  # nothing persisted yet: nothing to read
        await partition.wait_persisted(offsets[-1])
        assert partition.checkpoint == partition.end_offset == 6
        assert len(partition.read_memory(0, 10**6)) == 3 * BATCH_BYTES
        assert store.writes <= 3  # one write per commit, not per index entry or batch

    run(scenario)
    assert stored_offsets(store) == [0, 2, 4]


@pytest.mark.parametrize("half_writes", [False, True])
def test_a_store_outage_keeps_data_in_memory_and_persists_it_once_when_back(half_writes):
    store = FlakyStore()
    store.half_writes = half_writes

    async def scenario(persister):
        partition = open_partition(store, MemoryPool(1 << 20))
        await partition.wait_persisted(append(partition, persister, 2)[-1])
        store.down = True
        offsets = append(partition, persister, 5)
        waiting = asyncio.ensure_future(partition.wait_persisted(offsets[-1]))
        await asyncio.sleep(0.2)  # let several commits fail and retry (the outage itself)
        assert not waiting.done() and partition.checkpoint == 4 and partition.end_offset == 14
        store.down = False
        await waiting
        assert partition.checkpoint == 14

    run(scenario)
    assert stored_offsets(store) == list(range(0, 14, 2))


def test_a_writer_naming_an_old_session_or_version_gets_v_s_and_c():
    store = FlakyStore()

    async def scenario(persister):
        first = open_partition(store, MemoryPool(1 << 20))
        old_session = first.session
        await first.wait_persisted(append(first, persister, 2)[-1])
        first.close()
        second = open_partition(store, MemoryPool(1 << 20))
        assert second.session == old_session + 1
        with pytest.raises(StaleSession) as stale:
            second.append(*make_batch(), session=old_session, current_version=3)
        assert (stale.value.version, stale.value.session, stale.value.checkpoint) == (3, second.session, 4)
        with pytest.raises(StaleSession):
            second.append(*make_batch(), version=2, session=second.session, current_version=3)
        assert second.append(*make_batch(), version=3, session=second.session, current_version=3) == 4

    run(scenario)


def test_producers_wait_for_room_while_unpersisted_data_fills_the_budget():
    store = FlakyStore()
    pool = MemoryPool(3 * BATCH_BYTES)

    async def scenario(persister):
        partition = open_partition(store, pool)
        store.down = True
        append(partition, persister, 3)
        assert not pool.has_room()
        room = asyncio.ensure_future(pool.wait_for_room())
        await asyncio.sleep(0.1)
        assert not room.done()
        store.down = False
        await room
        assert pool.unpersisted_bytes < pool.budget_bytes

    run(scenario)


def test_persisted_data_is_reclaimed_least_recently_read_first():
    store = FlakyStore()
    pool = MemoryPool(4 * BATCH_BYTES)

    async def scenario(persister):
        cold = open_partition(store, pool, "cold-0")
        hot = open_partition(store, pool, "hot-0")
        await cold.wait_persisted(append(cold, persister, 2)[-1])
        await hot.wait_persisted(append(hot, persister, 2)[-1])
        assert hot.read_memory(0, 10**6) and cold.read_memory(0, 10**6)
        hot.read_memory(0, 10**6)  # hot is now the most recently read
        await hot.wait_persisted(append(hot, persister, 1)[-1])  # over budget: something goes
        assert pool.used_bytes <= pool.budget_bytes
        assert cold.read_memory(0, 10**6) is None  # cold went to the store only
        assert hot.read_memory(0, 10**6) is not None

    run(scenario)


def test_a_commit_that_never_returns_is_abandoned_and_the_data_persisted_anyway():
    store = FlakyStore()
    released = threading.Event()

    async def scenario(persister):
        partition = open_partition(store, MemoryPool(1 << 20))
        await partition.wait_persisted(append(partition, persister, 1)[-1])
        store.hang = released
        offsets = append(partition, persister, 3)
        await partition.wait_persisted(offsets[-1])  # done by a fresh worker on a reopened log
        assert partition.checkpoint == 8
        released.set()  # the stuck write now fails, and its outcome is ignored

    run(scenario, commit_timeout_s=0.2)
    assert stored_offsets(store) == [0, 2, 4, 6]
