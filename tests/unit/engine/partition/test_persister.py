"""Partition + persister + pool on a store that can fail, on a real event loop and worker
threads but a manual clock: every timer (commit delay, retry back-off, watchdog, checkpoint
publishing) fires when the test moves the clock, never by waiting."""

import asyncio
import threading

import pytest

from martlet.engine.clock import ManualClock as TimerClock
from martlet.engine.errors import PartitionClosed, StaleSession
from martlet.engine.log.config import LogConfig
from martlet.engine.log.files import read_published
from martlet.engine.partition.memory import MemoryPool
from martlet.engine.partition.partition import Partition
from martlet.engine.partition.persister import FlushLimits, Persister
from martlet.engine.store.memory import MemoryAppendFile, MemoryStore
from martlet.records.header import iter_batches
from tests.unit.engine.log.log_batches import ManualClock, make_batch

WAIT_S = 10  # real seconds: the bound on every wait for a worker thread
BATCH_BYTES = 81  # make_batch(record_count=2)
RETRY_MS = 50  # the persister's first back-off, and its cap here
SOON_MS = RETRY_MS  # clock.next_timer(SOON_MS) fires a retry, never a watchdog (seconds away)


class FlakyStore(MemoryStore):
    """A MemoryStore whose writes fail while `down`; a failing write may land half its bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.half_writes = False
        self.writes = 0
        self.hang: threading.Event | None = None  # set: the next write blocks until it is set
        self.hanging = threading.Event()  # set once a write blocks on `hang`

    def open_append(self, path: str) -> MemoryAppendFile:
        if self.down:
            raise OSError("store is down")
        file = super().open_append(path)
        store = self

        class Flaky(MemoryAppendFile):
            def write(self, data: bytes | memoryview) -> None:
                if store.hang is not None:
                    released, store.hang = store.hang, None
                    store.hanging.set()
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


def run(scenario, flush_timeout_s=WAIT_S, flush_ms=0, publish_ms=60_000, inline=False):
    """Run scenario(persister, clock); the persister's timers run on `clock`."""
    async def wrapper():
        clock = TimerClock(1_000_000)
        limits = FlushLimits(flush_bytes=1 << 20, flush_ms=flush_ms, threads=2, retry_ms_max=RETRY_MS,
                             flush_timeout_s=flush_timeout_s, publish_ms=publish_ms)
        persister = Persister(limits, clock, inline=inline)
        try:
            await asyncio.wait_for(scenario(persister, clock), WAIT_S)
        finally:
            persister.close()

    asyncio.run(wrapper())


def test_c_follows_the_commits_and_readers_see_only_below_c():
    store = FlakyStore()

    async def scenario(persister, clock):
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

    async def scenario(persister, clock):
        partition = open_partition(store, MemoryPool(1 << 20))
        await partition.wait_persisted(append(partition, persister, 2)[-1])
        store.down = True
        offsets = append(partition, persister, 5)
        waiting = asyncio.ensure_future(partition.wait_persisted(offsets[-1]))
        for _ in range(3):  # the failed commit's retry, then two more after failed reopens
            assert await clock.next_timer(SOON_MS) == RETRY_MS
        await clock.wait_for_timer(SOON_MS)  # the third reopen failed as well
        assert not waiting.done() and partition.checkpoint == 4 and partition.end_offset == 14
        store.down = False
        await clock.next_timer(SOON_MS)  # this reopen works, and the commit follows at once
        await waiting
        assert partition.checkpoint == 14

    run(scenario)
    assert stored_offsets(store) == list(range(0, 14, 2))


def test_a_writer_naming_an_old_session_or_version_gets_v_s_and_c():
    store = FlakyStore()

    async def scenario(persister, clock):
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

    async def scenario(persister, clock):
        partition = open_partition(store, pool)
        store.down = True
        append(partition, persister, 3)
        assert not pool.has_room()
        room = asyncio.ensure_future(pool.wait_for_room())
        await clock.next_timer(SOON_MS)  # the failed commit's retry: a reopen that fails too
        await clock.wait_for_timer(SOON_MS)  # (armed again only once that reopen failed)
        assert not room.done()
        store.down = False
        await clock.next_timer(SOON_MS)
        await room
        assert pool.unpersisted_bytes < pool.budget_bytes

    run(scenario)


def test_persisted_data_is_reclaimed_least_recently_read_first():
    store = FlakyStore()
    pool = MemoryPool(4 * BATCH_BYTES)

    async def scenario(persister, clock):
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

    async def scenario(persister, clock):
        partition = open_partition(store, MemoryPool(1 << 20))
        await partition.wait_persisted(append(partition, persister, 1)[-1])
        store.hang = released
        offsets = append(partition, persister, 3)
        assert await asyncio.to_thread(store.hanging.wait, WAIT_S)  # the flush is in the store
        assert await clock.next_timer(200) == 200  # the watchdog gives up on the stuck commit
        assert partition.checkpoint == 2
        assert await clock.next_timer(SOON_MS) == RETRY_MS  # then the log is reopened
        await partition.wait_persisted(offsets[-1])  # done by a fresh worker on a reopened log
        assert partition.checkpoint == 8
        released.set()  # the stuck write now fails, and its outcome is ignored

    run(scenario, flush_timeout_s=0.2)
    assert stored_offsets(store) == [0, 2, 4, 6]


def test_a_commit_waits_commit_ms_for_more_writes_then_takes_them_all():
    store = FlakyStore()

    async def scenario(persister, clock):
        partition = open_partition(store, MemoryPool(1 << 20))
        writes = store.writes
        append(partition, persister, 2)
        clock.advance(4)
        append(partition, persister, 1)  # joins the commit already armed
        await asyncio.sleep(0)  # one loop turn: an urgent commit would have started here
        assert store.writes == writes and clock.pending_ms() == [1]
        clock.advance(1)
        await partition.wait_persisted(4)
        assert partition.checkpoint == 6 and store.writes == writes + 1

    run(scenario, flush_ms=5)


def test_c_is_published_at_most_every_publish_ms_and_on_close():
    store = FlakyStore()

    async def scenario(persister, clock):
        partition = open_partition(store, MemoryPool(1 << 20))
        assert read_published(store, "t-0") is None  # a new, empty partition publishes nothing
        await partition.wait_persisted(append(partition, persister, 1)[-1])
        assert clock.pending_ms() == [1000] and read_published(store, "t-0") is None
        await partition.wait_persisted(append(partition, persister, 1)[-1])  # C moves again: same sweep
        assert clock.pending_ms() == [1000]
        clock.advance(1000)
        assert await persister.drain([partition], WAIT_S)  # the sweep is a job on a worker
        assert read_published(store, "t-0") == (4, 4)
        await partition.wait_persisted(append(partition, persister, 1)[-1])
        assert read_published(store, "t-0") == (4, 4) and clock.pending_ms() == [1000]
        partition.close()
        partition.close_log()  # publishes the last C at once (off the loop in the engine)
        assert read_published(store, "t-0") == (6, 6)

    run(scenario, publish_ms=1000)


def test_an_unfinished_drain_times_out_on_the_clock():
    store = FlakyStore()

    async def scenario(persister, clock):
        partition = open_partition(store, MemoryPool(1 << 20))
        store.down = True
        append(partition, persister, 1)
        drained = asyncio.ensure_future(persister.drain([partition], timeout_s=5))
        await clock.next_timer(SOON_MS)  # the commit failed; a retry is due
        assert not drained.done()
        clock.advance(5_000)
        assert await drained is False

    run(scenario)


def test_reopening_after_a_crash_publishes_the_recovered_c():
    store = FlakyStore()

    async def scenario(persister, clock):
        partition = open_partition(store, MemoryPool(1 << 20))
        await partition.wait_persisted(append(partition, persister, 3)[-1])
        assert read_published(store, "t-0") is None  # the sweep has not run: no clean close either
        again = open_partition(store, MemoryPool(1 << 20))  # as after kill -9
        assert read_published(store, "t-0") == (6, 6) == (again.checkpoint, again.checkpoint)

    run(scenario)


def test_drain_ends_when_a_partition_waiting_for_a_retry_is_closed():
    store = FlakyStore()

    async def scenario(persister, clock):
        partition = open_partition(store, MemoryPool(1 << 20))
        store.down = True
        append(partition, persister, 1)
        await clock.wait_for_timer(SOON_MS)  # the commit failed; its retry is armed
        drained = asyncio.ensure_future(persister.drain([partition], timeout_s=60))
        await asyncio.sleep(0)
        store.down = False
        partition.close()  # its unpersisted data is given up
        await clock.next_timer(SOON_MS)  # the retry finds it closed
        assert await drained is True  # without waiting for the drain's 60 s

    run(scenario)


class ThreadNotingStore(MemoryStore):
    """Notes which thread each log write runs on; a write may be made to take `slow_ms` of the clock."""

    def __init__(self, clock: TimerClock) -> None:
        super().__init__()
        self.clock = clock
        self.slow_ms = 0
        self.threads: list[int] = []

    def open_append(self, path: str) -> MemoryAppendFile:
        file = super().open_append(path)
        store = self

        class Noting(MemoryAppendFile):
            def write(self, data: bytes | memoryview) -> None:
                store.threads.append(threading.get_ident())
                if store.slow_ms:
                    store.clock.advance(store.slow_ms)
                    store.slow_ms = 0
                file.write(data)

        noting = Noting(bytearray())
        noting._data = file._data
        return noting


def test_a_slow_flush_on_the_loop_sends_flushes_to_the_workers_for_a_while():
    """Inline flushes (a local store) stall the loop for at most one slow write per pause."""
    from martlet.engine.partition.persister import INLINE_PAUSE_S

    async def scenario(persister, clock):
        loop_thread = threading.get_ident()
        store = ThreadNotingStore(clock)
        partition = open_partition(store, MemoryPool(1 << 20))
        store.threads.clear()
        store.slow_ms = 50  # the first flush takes 50 ms of the clock, on the loop
        append(partition, persister)
        assert store.threads == [loop_thread] and partition.checkpoint == 2  # two records a batch
        await partition.wait_persisted(append(partition, persister)[-1])  # now on a worker
        assert store.threads[-1] != loop_thread
        clock.advance(int(INLINE_PAUSE_S * 1000))
        append(partition, persister)
        assert store.threads[-1] == loop_thread and partition.checkpoint == 6  # inline again

    run(scenario, inline=True)


def test_an_owner_taken_over_while_it_held_the_partition_stops_and_leaves_the_files_alone():
    """A node frozen past its cluster session wakes: its next write fails (the new owner
    fenced it), and its reopen finds the new owner's claim. It must not recover the files
    again (on HDFS that takes the leases back and cuts what the new owner wrote): its
    waiters are refused, and closing it writes nothing."""
    store = FlakyStore()

    async def scenario(persister, clock):
        old = open_partition(store, MemoryPool(1 << 20))
        await old.wait_persisted(append(old, persister, 2)[-1])
        new = Partition.open(store, "t-0", LogConfig(segment_bytes=2000), ManualClock(), MemoryPool(1 << 20),
                             own_segment=True)
        assert new.session == old.session + 1
        store.down = True  # the old owner's write fails, as a fenced HDFS writer's does
        waiting = asyncio.ensure_future(old.wait_persisted(append(old, persister)[-1]))
        await clock.next_timer(SOON_MS)  # the retry: the reopen finds the claim
        store.down = False
        with pytest.raises(PartitionClosed):
            await waiting
        assert old.closed
        with pytest.raises(PartitionClosed):
            old.append(*make_batch(record_count=2))
        files = {name: store.read(f"t-0/{name}", 0, 1 << 20) for name in store.list("t-0")}
        old.close_log()
        assert {name: store.read(f"t-0/{name}", 0, 1 << 20) for name in store.list("t-0")} == files
        await new.wait_persisted(append(new, persister)[-1])
        new.close()
        new.close_log()

    run(scenario)
    assert stored_offsets(store) == [0, 2, 4]


def test_memory_visibility_reads_past_c_and_a_crash_takes_back_what_was_read():
    store = FlakyStore()
    read_past_c = []

    async def scenario(persister, clock):
        partition = open_partition(store, MemoryPool(1 << 20))
        partition.visibility = "memory"
        await partition.wait_persisted(append(partition, persister, 2)[-1])
        store.down = True
        append(partition, persister, 3)  # offsets 4 to 9, never persisted
        assert await clock.next_timer(SOON_MS) == RETRY_MS  # the commit failed
        assert partition.checkpoint == 4 and partition.high_watermark == partition.end_offset == 10
        read_past_c.append(partition.read_memory(0, 10**6))
        partition.visibility = "persisted"  # a topic switched back: readers stop at C again
        assert len(partition.read_memory(0, 10**6)) == 2 * BATCH_BYTES

    run(scenario)
    assert [header.base_offset for _, header in iter_batches(read_past_c[0])] == [0, 2, 4, 6, 8]
    # the broker dies before HDFS is back: what was read above C is gone and its offsets are
    # reused, in a new session whose start tells a reader of session 0 where that one ended
    store.down = False
    reopened = open_partition(store, MemoryPool(1 << 20))
    assert reopened.session == 1 and reopened.end_offset == 4
    assert reopened.end_offset_for(0) == (0, 4)
