"""A partition's transactions as readers see them: the last stable offset (LSO), the aborted
transactions a read-committed read is told of, the published (C, LSO), and all of it again
after the partition reopens (clean, or after a crash)."""

import asyncio

from martlet.engine.clock import ManualClock
from martlet.engine.log import open_readonly
from martlet.engine.log.files import read_published
from martlet.engine.partitions import Durability, Partitions
from martlet.engine.service import Engine
from martlet.engine.settings import EngineSettings
from martlet.engine.store.memory import MemoryStore
from martlet.engine.types import TopicPartition
from martlet.records.build import NewRecord, Producer, build_batch
from martlet.records.header import iter_batches, parse_header

NOW_MS = 1_700_000_000_000
TP = TopicPartition("t", 0)
WAIT_S = 10.0


class SlowStore(MemoryStore):
    """Flushes run on the persister's threads, as on HDFS: an append returns before C moves."""

    slow_writes = True


class Client:
    """Appends through the Partitions service, as Produce and the coordinator do."""

    def __init__(self, partitions: Partitions) -> None:
        self.partitions = partitions
        self.sequences: dict[int, int] = {}

    def data(self, pid: int, records: int = 2, transactional: bool = True) -> int:
        sequence = self.sequences.get(pid, 0)
        self.sequences[pid] = sequence + records
        producer = Producer(pid, 0, sequence) if pid >= 0 else Producer(-1, -1, -1)
        batch = build_batch([NewRecord(None, b"v%d" % i, NOW_MS) for i in range(records)], producer=producer,
                            transactional=transactional)
        return self.partitions.append(TP, batch, parse_header(batch), Durability.MEMORY).base_offset

    def marker(self, pid: int, commit: bool) -> int:
        return self.partitions.append_control(TP, pid, 0, commit, 0, NOW_MS)


def scenario(test, configs=None, store=None):
    """Run test(engine, client) on a fresh engine with topic t (unless the store has it)."""
    store = store if store is not None else SlowStore()

    async def run() -> None:
        engine = Engine(store, EngineSettings(), ManualClock(NOW_MS))
        engine.open()
        engine.pool.bind(asyncio.get_running_loop())
        if engine.topics.find("t") is None:
            await engine.topics.create("t", 1, configs or {"segment_bytes": 400})
        try:
            await asyncio.wait_for(test(engine, Client(engine.partitions)), WAIT_S)
        finally:
            await engine.close()

    asyncio.run(run())
    return store


def test_the_lso_waits_for_the_oldest_open_transaction_and_for_its_marker_to_persist():
    async def test(engine, client):
        partitions = engine.partitions
        client.data(-1, transactional=False)
        first = client.data(7)
        client.data(-1, transactional=False)
        assert await engine.flush(WAIT_S)
        info = partitions.info(TP)
        assert (info.last_stable, info.high_watermark) == (first, 6)
        client.marker(7, commit=True)  # decided, but not below C yet
        assert partitions.info(TP).last_stable == first
        assert await engine.flush(WAIT_S)
        assert partitions.info(TP).last_stable == partitions.info(TP).high_watermark == 7

    scenario(test)


def test_with_memory_visibility_the_lso_follows_the_memory_tail():
    async def test(engine, client):
        partitions = engine.partitions
        first = client.data(7)
        client.data(-1, transactional=False)
        assert partitions.info(TP).last_stable == first
        client.marker(7, commit=False)
        assert partitions.info(TP).last_stable == partitions.info(TP).end_offset == 5  # no flush needed
        assert engine.partitions.get_open(TP).to_publish() == (partitions.info(TP).checkpoint,
                                                               min(first, partitions.info(TP).checkpoint))

    scenario(test, {"visibility": "memory"})


def test_a_read_committed_read_stops_at_the_lso_and_names_the_aborted_transactions():
    async def test(engine, client):
        partitions = engine.partitions
        aborted_first = client.data(7)  # 0-1
        open_first = client.data(8)  # 2-3, stays open
        client.data(7)  # 4-5
        client.marker(7, commit=False)  # 6
        client.data(-1, transactional=False)  # 7-8
        assert await engine.flush(WAIT_S)
        assert partitions.info(TP).last_stable == open_first
        data = await partitions.read(TP, 0, 1 << 20, committed=True)
        assert [h.base_offset for _, h in iter_batches(data)] == [0]  # batches below the LSO only
        assert partitions.aborted_transactions(TP, 0, data) == [(7, aborted_first)]
        everything = await partitions.read(TP, 0, 1 << 20)
        assert [h.base_offset for _, h in iter_batches(everything)] == [0, 2, 4, 6, 7]
        client.marker(8, commit=True)  # 9
        assert await engine.flush(WAIT_S)
        data = await partitions.read(TP, 2, 1 << 20, committed=True)
        assert [h.base_offset for _, h in iter_batches(data)] == [2, 4, 6, 7, 9]
        assert partitions.aborted_transactions(TP, 2, data) == [(7, aborted_first)]  # 4-5 is still 7's
        assert partitions.aborted_transactions(TP, 7, data[-150:]) == []  # past its marker: nothing

    scenario(test)


def test_cold_reads_are_told_of_the_same_aborted_transactions():
    async def test(engine, client):
        partitions = engine.partitions
        for round_ in range(8):
            client.data(7)
            client.data(-1, transactional=False)
            client.marker(7, commit=round_ % 3 == 0)
        assert await engine.flush(WAIT_S)
        hot = await read_all(partitions)
        engine.pool.drop(partitions.get_open(TP).tail)  # memory gives the tail back: reads go to the store
        assert partitions.get_open(TP).read_memory(0, 100) is None
        assert await read_all(partitions) == hot
        assert len(hot[1]) == 5

    scenario(test)


async def read_all(partitions, max_bytes=200):
    """Every batch below the LSO in small reads, and each read's aborted list."""
    offset, batches, aborted = 0, [], []
    while offset < partitions.info(TP).last_stable:
        data = await partitions.read(TP, offset, max_bytes, committed=True)
        headers = [header for _, header in iter_batches(data)]
        aborted += partitions.aborted_transactions(TP, offset, data)
        batches += [header.base_offset for header in headers]
        offset = headers[-1].next_offset
    return batches, sorted(set(aborted))


def test_a_read_committed_wait_ends_when_the_lso_passes():
    async def test(engine, client):
        partitions = engine.partitions
        first = client.data(7)
        client.data(-1, transactional=False)
        assert await engine.flush(WAIT_S)
        waiting = asyncio.ensure_future(partitions.wait_for_data([(TP, first)], int(WAIT_S * 1000), committed=True))
        await asyncio.sleep(0)
        assert not waiting.done()  # the high watermark is past `first`, the LSO is not
        client.marker(7, commit=True)
        assert await engine.flush(WAIT_S)
        await asyncio.wait_for(waiting, WAIT_S)

    scenario(test)


def history(client: Client) -> None:
    """Rolls (400-byte segments), aborts in several segments, two transactions left open."""
    client.data(1)
    client.data(2)
    for round_ in range(5):
        client.data(1)
        client.data(-1, transactional=False)
        client.marker(1, commit=round_ % 2 == 0)
        client.data(1)
        if round_ == 2:
            client.marker(2, commit=False)
            client.data(2)


def test_reopening_gives_back_the_lso_aborted_transactions_and_published_lso():
    seen = {}

    async def write(engine, client):
        history(client)
        assert await engine.flush(WAIT_S)
        seen["info"] = engine.partitions.info(TP)
        seen["read"] = await read_all(engine.partitions)
        seen["aborted"] = engine.partitions.get_open(TP).transactions.aborted[:]
        assert engine.partitions.get_open(TP).log.segment_count > 2

    async def reopened(engine, client):
        info = engine.partitions.info(TP)
        assert (info.last_stable, info.checkpoint) == (seen["info"].last_stable, seen["info"].checkpoint)
        assert engine.partitions.get_open(TP).transactions.aborted == seen["aborted"]
        assert await read_all(engine.partitions) == seen["read"]
        client.sequences = {1: 12, 2: 6}
        client.marker(2, commit=False)  # the open transactions are known: 2's ends here
        assert engine.partitions.get_open(TP).transactions.aborted[-1].first_offset == seen["info"].last_stable

    store = scenario(write)
    path = f"{topic_dir(store)}/0"
    assert read_published(store, path) == (seen["info"].checkpoint, seen["info"].last_stable)
    reader = open_readonly(store, path)  # a reader in another process stops at the published LSO
    assert reader.last_stable == seen["info"].last_stable < reader.checkpoint
    data = reader.read(0, 1 << 20, end_offset=reader.last_stable)
    assert [h.next_offset for _, h in iter_batches(data)][-1] == reader.last_stable
    scenario(reopened, store=store)


def test_after_a_crash_the_partition_gives_back_the_same_lso_and_aborted_transactions():
    seen = {}

    async def crash(engine, client):
        history(client)
        assert await engine.flush(WAIT_S)
        seen["info"] = engine.partitions.info(TP)
        seen["read"] = await read_all(engine.partitions)
        engine.partitions.get_open(TP).log.abandon()  # as kill -9 leaves it: no snapshot, no clean shutdown

    async def reopened(engine, client):
        info = engine.partitions.info(TP)
        assert (info.last_stable, info.checkpoint) == (seen["info"].last_stable, seen["info"].checkpoint)
        assert await read_all(engine.partitions) == seen["read"]

    store = scenario(crash)
    assert not any(name.endswith("clean-shutdown") for name in store.list(f"{topic_dir(store)}/0"))
    scenario(reopened, store=store)


def topic_dir(store: MemoryStore) -> str:
    [name] = store.list("topics")
    return f"topics/{name}"
