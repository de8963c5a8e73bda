"""The read-only partition reader (engine/log/reader.py) on every backend: it never writes,
reads what the broker wrote, only ever sees whole batches below the published C while the
broker writes, and never returns a torn tail.

Each test gets two views of one store: the broker's, and the reader's as another process
would open it (on HDFS a second client in read-only mode, which never recovers a lease).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from martlet.engine.catalog.catalog import topic_dir
from martlet.engine.clock import ManualClock
from martlet.engine.errors import CorruptBatch, OffsetOutOfRange
from martlet.engine.log.compaction import rewrite
from martlet.engine.log.config import LogConfig
from martlet.engine.log.files import CHECKPOINT_PREFIX, LOG_SUFFIX, offset_file, write_published
from martlet.engine.log.log import PartitionLog
from martlet.engine.log.reader import LogReader, open_readonly
from martlet.engine.partitions import Durability
from martlet.engine.service import Engine
from martlet.engine.settings import EngineSettings
from martlet.engine.store import LocalStore, MemoryStore, Store
from martlet.engine.store.hdfs import HdfsStore
from martlet.engine.types import TopicPartition
from martlet.records.build import NewRecord, build_batch
from martlet.records.decode import decode_records
from martlet.records.header import HEADER_BYTES, crc_ok, iter_batches, parse_header
from tests.unit.engine.log.log_batches import make_batch

DIR = "p-0"
FOLLOW_S = 120  # the longest the reader follows a writing broker (real seconds)


TP = TopicPartition("t", 0)


@pytest.fixture(params=["local", "memory", pytest.param("hdfs", marks=pytest.mark.java)])
def stores(request: pytest.FixtureRequest, tmp_path) -> tuple[Store, Store]:
    """(the broker's store, the reader's view of the same store)."""
    if request.param == "local":
        return LocalStore(str(tmp_path / "root")), LocalStore(str(tmp_path / "root"))
    if request.param == "hdfs":
        hdfs = request.getfixturevalue("reference_hdfs")
        root = f"/reader/{uuid.uuid4().hex}"
        broker = HdfsStore(hdfs.url, root)
        reader = HdfsStore(hdfs.url, root, read_only=True)
        reader._client = ReadOnlyClient(reader._client)  # type: ignore[assignment]
        return broker, reader
    store = MemoryStore()
    return store, store


class ReadOnlyClient:
    """An hdfs-native client that fails the test on any call that changes the cluster,
    lease recovery included (it would close the live broker's open segment)."""

    CHANGING = {"append", "create", "delete", "mkdirs", "recover_lease", "rename", "set_times", "set_replication"}

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        assert name not in self.CHANGING, f"a read-only HDFS store called {name}"
        return getattr(self._client, name)


class WriteSpy:
    """Passes every call through and records those that change the store."""

    CHANGING = ("mkdir", "open_append", "truncate", "rename", "delete")

    def __init__(self, store: Store) -> None:
        self.store = store
        self.writes: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        call = getattr(self.store, name)
        if name not in self.CHANGING:
            return call

        def recorded(*args: Any) -> Any:
            self.writes.append((name, args))
            return call(*args)

        return recorded


# -- helpers -------------------------------------------------------------------------------


def batch(number: int) -> tuple[bytearray, Any]:
    """A batch of 1-3 records whose payload names it."""
    return make_batch(record_count=1 + number % 3, payload=b"batch %06d " % number + b"x" * (number % 50))


def payloads(data: bytes, first_offset: int, limit: int) -> list[bytes]:
    """Check `data` is whole, valid, contiguous batches from first_offset ending at or below
    `limit`, and return their payloads."""
    found, expected, end = [], first_offset, 0
    for position, header in iter_batches(data):
        assert header.base_offset == expected, f"a gap or overlap at {expected}"
        assert header.next_offset <= limit, f"batch ending at {header.next_offset} is past C = {limit}"
        assert crc_ok(data, position, header)
        found.append(bytes(data[position + HEADER_BYTES : position + header.size]))
        expected, end = header.next_offset, position + header.size
    assert end == len(data), "a partial batch was returned"
    return found


def read_all(reader: LogReader, offset: int = 0, max_bytes: int = 700) -> tuple[list[bytes], int]:
    """Every batch from `offset` to the published C, in small reads; (payloads, next offset)."""
    found: list[bytes] = []
    while True:
        data = reader.read(offset, max_bytes)
        if not data:
            return found, offset
        found += payloads(data, offset, reader.checkpoint)
        offset = last_next_offset(data)


def last_next_offset(data: bytes) -> int:
    *_, (_, header) = iter_batches(data)
    return header.next_offset


def write_log(store: Store, count: int, segment_bytes: int = 1000, close: bool = True) -> list[bytes]:
    """A log of `count` batches, written with PartitionLog (the broker's log code); C is
    published as its end. Returns the payloads."""
    log = PartitionLog.open(store, DIR, LogConfig(segment_bytes=segment_bytes, index_interval_bytes=200),
                            lambda: 1_000)
    sent = []
    for number in range(count):
        data, header = batch(number)
        log.append(data, header)
        sent.append(bytes(data[HEADER_BYTES:]))
    log.flush()
    write_published(store, DIR, log.end_offset, log.end_offset)
    if close:
        log.close()
    else:
        log.abandon()  # as a killed process leaves it: no clean shutdown, files as written
    return sent


def offsets_of(count: int) -> list[int]:
    """Base offsets of batch(0) .. batch(count - 1) in a log that starts at 0."""
    bases, offset = [], 0
    for number in range(count):
        bases.append(offset)
        offset += 1 + number % 3
    return bases


def files(store: Store, directory: str = DIR) -> dict[str, bytes]:
    """Every file of the directory with its content."""
    return {name: store.read(f"{directory}/{name}", 0, 1 << 30) for name in store.list(directory)}


# -- never writes ----------------------------------------------------------------------------


def test_a_read_only_open_never_writes_even_where_recovery_would(stores):
    broker, reader_store = stores
    sent = write_log(broker, 40, close=False)  # no clean shutdown: recovery would scan and rewrite
    torn = broker.open_append(offset_file(DIR, max(_bases(broker)), LOG_SUFFIX))
    torn.write(bytes(batch(99)[0])[:30])  # and a torn tail that recovery would cut
    torn.close()
    broker.delete(offset_file(DIR, min(_bases(broker)), ".index"))  # an index recovery would rebuild
    before = files(broker)
    spy = WriteSpy(reader_store)
    reader = open_readonly(spy, DIR)  # type: ignore[arg-type]
    assert read_all(reader)[0] == sent
    assert reader.read(10, 1 << 20, end_offset=12)  # a bounded read, from the middle
    assert spy.writes == []
    assert files(broker) == before


def test_the_read_only_store_refuses_writes_and_hdfs_must_be_read_only(stores):
    _, reader_store = stores
    reader = open_readonly(reader_store, DIR)
    for call in (lambda: reader.store.mkdir("x"), lambda: reader.store.open_append("x"),
                 lambda: reader.store.delete(DIR), lambda: reader.store.rename("a", "b"),
                 lambda: reader.store.truncate("a", 0)):
        with pytest.raises(PermissionError):
            call()
    if isinstance(reader_store, HdfsStore):
        with pytest.raises(ValueError):
            open_readonly(HdfsStore(reader_store.url, reader_store.root), DIR)  # its reads recover leases


# -- reads what the broker wrote -------------------------------------------------------------


def test_nothing_is_readable_before_c_is_published(stores):
    broker, reader_store = stores
    write_log(broker, 5)
    [published] = [name for name in broker.list(DIR) if name.startswith(CHECKPOINT_PREFIX)]
    broker.delete(f"{DIR}/{published}")
    reader = open_readonly(reader_store, DIR)
    assert (reader.checkpoint, reader.last_stable) == (0, 0)
    assert reader.read(0, 1 << 20) == b""


def test_reads_what_the_broker_wrote_across_segments_and_within_bounds(stores):
    broker, reader_store = stores
    sent = write_log(broker, 60, segment_bytes=800)
    reader = open_readonly(reader_store, DIR)
    assert len(reader.segments()) > 3
    assert reader.checkpoint == reader.last_stable == sum(1 + n % 3 for n in range(60))
    assert read_all(reader)[0] == sent
    assert read_all(reader, max_bytes=1)[0] == sent  # at least one batch per read
    fresh = open_readonly(reader_store, DIR)  # no position to resume from: the index is used
    bases = offsets_of(60)
    holding_50 = max(i for i, base in enumerate(bases) if base <= 50)
    middle = fresh.read(50, 1 << 20, end_offset=70)
    wanted = [sent[i] for i in range(holding_50, 60) if bases[i] + 1 + i % 3 <= 70]
    assert payloads(middle, bases[holding_50], 70) == wanted
    assert fresh.read(fresh.checkpoint, 1 << 20) == b""
    assert payloads(fresh.read(0, 1 << 20, end_offset=1), 0, 1) == sent[:1]  # batch 0 holds offset 0 only
    assert fresh.read(1, 1 << 20, end_offset=2) == b""  # batch 1 holds offsets 1 and 2: not whole below 2
    with pytest.raises(OffsetOutOfRange):
        fresh.read(-1, 100)


def test_reads_what_the_engine_wrote(stores):
    broker, reader_store = stores
    sent = [batch(n) for n in range(30)]

    async def produce() -> str:
        engine = Engine(broker, EngineSettings())
        engine.open()
        topic = await engine.topics.create("t", 1, {"segment_bytes": 1500})
        for data, header in sent:
            engine.partitions.append(TP, bytearray(data), header, Durability.MEMORY)
        assert await engine.flush(30)
        await engine.close()  # publishes the final C
        return f"{topic_dir(topic)}/0"

    path = asyncio.run(produce())
    reader = open_readonly(reader_store, path)
    assert reader.checkpoint == sum(header.record_count for _, header in sent)
    assert read_all(reader)[0] == [bytes(data[HEADER_BYTES:]) for data, _ in sent]


# -- while the broker writes ---------------------------------------------------------------------


def test_reading_while_the_engine_writes_sees_whole_batches_below_c_in_order(stores, caplog):
    broker, reader_store = stores
    count = 150
    sent = [batch(n) for n in range(count)]
    clock = ManualClock(1_000_000)  # publish sweeps run when the writer below moves it
    settings = EngineSettings(checkpoint_publish_ms=100)

    async def produce(engine: Engine, follower: Follower) -> None:
        partition = engine.partitions.get_open(TP)
        assert partition is not None
        for number, (data, header) in enumerate(sent):
            offset = engine.partitions.append(TP, bytearray(data), header, Durability.MEMORY).base_offset
            if number % 7 == 6:
                await engine.partitions.wait_persisted(TP, offset)  # flushes interleave with appends
            if number % 10 == 9:
                clock.advance(settings.checkpoint_publish_ms)  # a sweep publishes C (on a worker)
                await asyncio.sleep(0)  # one loop turn, for the sweep's completion to come in
            if number % 50 == 49:  # now and then, let the reader catch up with the broker paused
                assert await engine.flush(30)  # flushes and the publish sweep are done
                visible = visible_end(broker, reader_store, follower.path, partition.published_checkpoint)
                caught_up = asyncio.get_running_loop().run_in_executor(None, follower.wait_for, visible)
                assert await caught_up, f"the reader did not reach offset {visible}"
        assert await engine.flush(30)

    async def scenario() -> tuple[list[bytes], int]:
        engine = Engine(broker, settings, clock)
        engine.open()
        topic = await engine.topics.create("t", 1, {"segment_bytes": 2000})
        follower = Follower(reader_store, f"{topic_dir(topic)}/0")
        follower.start()
        await asyncio.wait_for(produce(engine, follower), FOLLOW_S)
        await asyncio.wait_for(engine.close(), FOLLOW_S)  # publishes the final C
        return follower.finish(), follower.seen_while_writing

    with caplog.at_level(logging.WARNING):
        found, seen_while_writing = asyncio.run(scenario())
    assert found == [bytes(data[HEADER_BYTES:]) for data, _ in sent]
    assert seen_while_writing > 0  # the reader did read while the broker wrote
    assert not [r for r in caplog.records if "failed" in r.getMessage()]  # the broker's writes never broke


def visible_end(broker: Store, reader_store: Store, path: str, published: int) -> int:
    """How far a reader can get: C, but on HDFS only the sealed segments (the broker holds
    the active one open, and a read-only reader sees nothing of an open file)."""
    if not isinstance(reader_store, HdfsStore):
        return published
    bases = [int(name[: -len(LOG_SUFFIX)]) for name in broker.list(path) if name.endswith(LOG_SUFFIX)]
    return max(base for base in bases if base <= published)


class Follower(threading.Thread):
    """Reads a partition from its start as the broker publishes more, checking each read."""

    def __init__(self, store: Store, path: str) -> None:
        super().__init__(daemon=True)
        self.store, self.path = store, path
        self.done = threading.Event()
        self.found: list[bytes] = []
        self.seen_while_writing = 0
        self.error: BaseException | None = None
        self.offset = 0  # the next offset to read
        self.stopped = False
        self._moved = threading.Condition()

    def run(self) -> None:
        try:
            self._follow()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            self.error = error
        with self._moved:
            self.stopped = True
            self._moved.notify_all()

    def wait_for(self, offset: int) -> bool:
        """Block until the reader has read up to `offset` (False if it failed or timed out)."""
        with self._moved:
            self._moved.wait_for(lambda: self.offset >= offset or self.stopped, FOLLOW_S)
            return self.offset >= offset

    def _follow(self) -> None:
        reader = open_readonly(self.store, self.path)
        offset, published = 0, 0
        deadline = time.monotonic() + FOLLOW_S
        while time.monotonic() < deadline:
            last_round = self.done.is_set()  # checked first: the broker closed before this refresh
            reader.refresh()
            assert reader.checkpoint >= published, "the published C went back"
            published = reader.checkpoint
            for data in self._reads(reader, offset):
                self.found += payloads(data, offset, reader.checkpoint)
                offset = last_next_offset(data)
                if not last_round:
                    self.seen_while_writing += 1
                with self._moved:
                    self.offset = offset
                    self._moved.notify_all()
            if last_round:
                assert offset == reader.checkpoint
                return
        raise AssertionError(f"the reader did not catch up in {FOLLOW_S} s")

    @staticmethod
    def _reads(reader: LogReader, offset: int) -> Iterator[bytes]:
        while data := reader.read(offset, 1000):
            yield data
            offset = last_next_offset(data)

    def finish(self) -> list[bytes]:
        self.done.set()
        self.join(FOLLOW_S)
        assert not self.is_alive(), "the reader never finished"
        if self.error is not None:
            raise self.error
        return self.found


# -- torn and damaged data ---------------------------------------------------------------------


def test_a_torn_tail_is_not_returned_even_when_c_claims_it(stores):
    broker, reader_store = stores
    sent = write_log(broker, 12, segment_bytes=1 << 20, close=False)
    end = sum(1 + n % 3 for n in range(12))
    data, _ = batch(12)
    data[0:8] = end.to_bytes(8, "big")  # the next batch, at the right offset, but only half of it
    torn = broker.open_append(offset_file(DIR, 0, LOG_SUFFIX))
    torn.write(bytes(data)[: len(data) // 2])
    torn.close()
    write_published(broker, DIR, end + 5, end + 5)  # a C ahead of the store (it lost data)
    reader = open_readonly(reader_store, DIR)
    assert read_all(reader)[0] == sent
    assert reader.read(end, 1 << 20) == b""  # the torn batch: nothing, not a part of it


def test_a_damaged_batch_below_c_ends_the_read_before_it_and_is_raised_when_asked_for(stores):
    broker, reader_store = stores
    write_log(broker, 10, segment_bytes=1 << 20)
    log_path = offset_file(DIR, 0, LOG_SUFFIX)
    content = bytearray(broker.read(log_path, 0, 1 << 20))
    positions = [(position, header) for position, header in iter_batches(content)]
    position, damaged = positions[4]
    content[position + HEADER_BYTES] ^= 0xFF  # a flipped bit in the fifth batch's records
    broker.delete(log_path)
    rewritten = broker.open_append(log_path)
    rewritten.write(bytes(content))
    rewritten.close()
    reader = open_readonly(reader_store, DIR)
    before = reader.read(0, 1 << 20)
    assert last_next_offset(before) == damaged.base_offset
    with pytest.raises(CorruptBatch):
        reader.read(damaged.base_offset, 1 << 20)


def _bases(store: Store) -> list[int]:
    return [int(name[: -len(LOG_SUFFIX)]) for name in store.list(DIR) if name.endswith(LOG_SUFFIX)]


def test_offsets_deleted_by_the_broker_are_out_of_range(stores):
    broker, reader_store = stores
    write_log(broker, 40, segment_bytes=600)
    reader = open_readonly(reader_store, DIR)
    first, second = reader.segments()[:2]
    assert reader.read(first, 100)
    log = PartitionLog.open(broker, DIR, LogConfig(segment_bytes=600, index_interval_bytes=200), lambda: 1_000)
    log.delete_records(second)  # the broker moves the start and deletes the first segment
    log.close()
    with pytest.raises(OffsetOutOfRange):
        reader.read(first, 100)  # the segment is gone, though the reader's start is stale
    reader.refresh()
    assert reader.start_offset == second
    with pytest.raises(OffsetOutOfRange):
        reader.read(first, 100)
    assert reader.read(second, 100)


COMPACTED_RECORDS = 24  # six of each of four keys, over five segments (each roll on HDFS closes four
# files, about half a second each: 60 records took 36 s there)


def test_reads_a_compacted_log_across_the_gaps_compaction_left(stores):
    """Compaction (engine/log/compaction.py) removes batches from sealed segments: the reader
    reads across the gaps there, and still refuses one in the last segment."""
    broker, reader_store = stores
    config = LogConfig(segment_bytes=400, index_interval_bytes=100, compacted=True, deletes=False,
                       min_cleanable_ratio=0.0)
    log = PartitionLog.open(broker, DIR, config, lambda: 1_000_000)
    for number in range(COMPACTED_RECORDS):
        record = build_batch([NewRecord(b"k%d" % (number % 4), b"v%03d" % number, 1_000)])
        log.append(record, parse_header(record))
    log.flush()
    work = log.compaction_plan()
    assert work is not None
    done, reached = rewrite(work, log.producers_last(), log.config, log.now_ms(), 1 << 20)
    assert log.swap_cleaned(done, reached) > 0
    write_published(broker, DIR, log.end_offset, log.end_offset)
    log.close()
    reader = open_readonly(reader_store, DIR)
    got, offset, end = {}, 0, reader.checkpoint
    while data := reader.read(offset, 300):
        for at, header in iter_batches(data):
            got.update({r.offset: r.value for r in decode_records(data[at:at + header.size])})
            offset = header.next_offset
    assert offset == end and len(got) < COMPACTED_RECORDS  # read to C, past the removed batches
    for key in range(4):  # each key's latest value is there
        last = max(n for n in range(COMPACTED_RECORDS) if n % 4 == key)
        assert got[last] == b"v%03d" % last
