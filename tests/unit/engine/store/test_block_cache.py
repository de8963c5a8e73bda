import threading
from concurrent.futures import ThreadPoolExecutor

from martlet.engine.store.cache import READ_AHEAD_BLOCKS, READ_AHEAD_RUNS, CachedStore
from martlet.engine.store.memory import MemoryStore
from tests.support.stores import Deferred


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def read(self, path: str, offset: int, length: int) -> bytes:
        self.reads += 1
        return super().read(path, offset, length)


def filled(size: int) -> tuple[CountingStore, CachedStore, bytes]:
    inner = CountingStore()
    data = bytes(range(256)) * (size // 256)
    file = inner.open_append("f.log")
    file.write(data)
    return inner, CachedStore(inner, block_bytes=1024), data


def test_reads_are_served_from_whole_blocks_once_read():
    inner, cache, data = filled(4096)
    assert cache.read("f.log", 100, 2000) == data[100:2100]
    assert inner.reads == 1 and cache.bytes_held == 4096  # blocks 0-2 in one store read, and 3 read ahead
    assert cache.read("f.log", 1500, 400) == data[1500:1900]
    assert inner.reads == 1  # whole blocks: served from memory


def test_each_run_of_missing_blocks_is_one_store_read():
    inner, cache, data = filled(64 * 1024)
    cache.read("f.log", 40 * 1024, 1)  # blocks 40-63 are kept (40, and the rest read ahead)
    assert inner.reads == 1 and cache.bytes_held == 24 * 1024
    assert cache.read("f.log", 0, 64 * 1024) == data
    assert inner.reads == 2  # blocks 0-39 in one read (no read-ahead: 40 is held); 40-63 from memory


def test_a_sequential_reader_reads_ahead():
    inner, cache, data = filled(100 * 1024)
    for block in range(100):
        assert cache.read("f.log", block * 1024, 1024) == data[block * 1024 : (block + 1) * 1024]
    assert inner.reads == -(-100 // (1 + READ_AHEAD_BLOCKS))  # one store read per 1 + READ_AHEAD_BLOCKS blocks


def test_a_partial_last_block_is_not_kept_and_sees_later_appends():
    inner, cache, data = filled(1536)
    assert cache.read("f.log", 1024, 1024) == data[1024:1536]
    assert cache.bytes_held == 0
    inner.open_append("f.log").write(b"more")
    assert cache.read("f.log", 1530, 100) == data[1530:] + b"more"


def test_truncate_delete_and_rename_drop_the_files_blocks():
    inner, cache, data = filled(2048)
    cache.read("f.log", 0, 2048)
    assert cache.bytes_held == 2048
    cache.truncate("f.log", 100)
    assert cache.bytes_held == 0 and cache.read("f.log", 0, 2048) == data[:100]


def test_the_pool_drops_least_recently_read_blocks_first():
    inner, cache, _ = filled(3072)
    cache.read("f.log", 0, 1)
    cache.read("f.log", 1024, 1)
    cache.read("f.log", 0, 1)  # block 0 is now the most recently read
    assert cache.drop_oldest() == 1024
    reads = inner.reads
    cache.read("f.log", 0, 1)
    assert inner.reads == reads  # block 0 stayed


# -- read-ahead in the background (an executor given) -------------------------------------------

RUN_BYTES = READ_AHEAD_BLOCKS * 1024


def streaming(size: int, ahead_bytes_max: int = 1 << 30) -> tuple[CountingStore, CachedStore, bytes, Deferred]:
    inner, _, data = filled(size)
    background = Deferred()
    return inner, CachedStore(inner, block_bytes=1024, read_ahead=background, ahead_bytes_max=ahead_bytes_max), data, background


def test_a_sequential_reader_finds_its_next_blocks_read_in_the_background():
    inner, cache, data, background = streaming(200 * 1024)
    assert cache.read("f.log", 0, 1024) == data[:1024]
    assert inner.reads == 1 and len(background.calls) == READ_AHEAD_RUNS  # only what was asked, now
    background.run_all()
    assert inner.reads == 1 + READ_AHEAD_RUNS
    for block in range(1, 200):
        reads = inner.reads
        assert cache.read("f.log", block * 1024, 1024) == data[block * 1024 : (block + 1) * 1024]
        assert inner.reads == reads  # from memory: the reader itself read block 0 only
        background.run_all()
    assert inner.reads == 1 + -(-199 // READ_AHEAD_BLOCKS)  # one store read per run


def test_a_read_waits_for_the_run_reading_its_block_instead_of_reading_it_again():
    class Gated(CountingStore):
        def __init__(self) -> None:
            super().__init__()
            self.gate = threading.Event()

        def read(self, path: str, offset: int, length: int) -> bytes:
            if offset > 0:
                assert self.gate.wait(10), "the test never opened the gate"
            return super().read(path, offset, length)

    inner = Gated()
    data = bytes(range(256)) * 400
    inner.open_append("f.log").write(data)
    with ThreadPoolExecutor(READ_AHEAD_RUNS) as background:
        cache = CachedStore(inner, block_bytes=1024, read_ahead=background)
        cache.read("f.log", 0, 1024)  # starts the runs; they wait at the gate
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(cache.read("f.log", 1024, 4096)))
        reader.start()
        inner.gate.set()
        reader.join(10)
    assert got == [data[1024:5120]]
    assert inner.reads == 1 + READ_AHEAD_RUNS  # block 0, and the runs; blocks 1-4 were not read twice


def test_a_run_of_a_file_truncated_while_it_was_read_is_discarded():
    class TruncatedMeanwhile(CountingStore):
        def read_visible(self, path: str, offset: int, length: int) -> bytes:
            read = self.read(path, offset, length)
            if self.size(path) > 2048:
                cache.truncate("f.log", 2048)  # as the partition's owner could, between read and keep
            return read

    inner = TruncatedMeanwhile()
    data = bytes(range(256)) * 400
    inner.open_append("f.log").write(data)
    background = Deferred()
    cache = CachedStore(inner, block_bytes=1024, read_ahead=background)
    cache.read("f.log", 0, 1024)
    background.run_all()  # read ahead with read_visible, where the store has it
    assert cache.bytes_held == 0
    assert cache.read("f.log", 0, 10_000) == data[:2048]


def test_blocks_a_stream_read_past_are_dropped_first():
    inner, cache, data, background = streaming(100 * 1024)
    cache.read("f.log", 0, 1024)  # block 0: read by the reader itself, so an ordinary block
    background.run_all()
    cache.read("f.log", 1024, 3 * 1024)  # blocks 1-3 read ahead; the reader is past 1 and 2
    cache.drop_oldest()
    cache.drop_oldest()
    reads = inner.reads
    assert cache.read("f.log", 0, 1024) == data[:1024] and inner.reads == reads  # block 0 stayed
    assert cache.read("f.log", 3 * 1024, 1024) == data[3 * 1024 : 4 * 1024] and inner.reads == reads
    assert cache.read("f.log", 1024, 1024) == data[1024:2048] and inner.reads == reads + 1  # block 1 went


def test_past_its_bound_a_read_reads_ahead_itself():
    inner, cache, data, background = streaming(100 * 1024, ahead_bytes_max=RUN_BYTES)
    inner.open_append("g.log").write(data)
    cache.read("f.log", 0, 1024)
    assert len(background.calls) == 1  # room for one run only
    background.run_all()
    held = cache.bytes_held
    assert cache.read("g.log", 0, 1024) == data[:1024]
    assert not background.calls and cache.bytes_held == held + (1 + READ_AHEAD_BLOCKS) * 1024  # inline


def test_a_store_that_reads_in_blocks_is_not_cut_by_the_cache():
    class BlockReadingStore(CountingStore):
        """Like HdfsStore: joins what it reads into the cache's blocks itself."""

        def __init__(self) -> None:
            super().__init__()
            self.block_reads: list[tuple[int, int, bool]] = []

        def read_blocks(self, path: str, offset: int, length: int, block_bytes: int, visible: bool) -> list[bytes]:
            self.block_reads.append((offset, length, visible))
            data = MemoryStore.read(self, path, offset, length)
            return [data[at : at + block_bytes] for at in range(0, len(data), block_bytes)]

    inner = BlockReadingStore()
    data = bytes(range(256)) * 40 + b"tail"
    inner.open_append("f.log").write(data)
    background = Deferred()
    cache = CachedStore(inner, block_bytes=1024, read_ahead=background)
    assert cache.read("f.log", 0, 1000) == data[:1000]
    background.run_all()  # the stream's runs: visible reads, which end at the file's end
    assert cache.read("f.log", 1000, 20_000) == data[1000:]
    assert inner.reads == 0
    run = READ_AHEAD_BLOCKS * 1024
    assert inner.block_reads == [(0, 1024, False),  # what the reader asked for
                                 *[(1024 + i * run, run, True) for i in range(READ_AHEAD_RUNS)],  # the runs
                                 (10 * 1024, 11 * 1024, False)]  # the short last block, again
    assert cache.bytes_held == 10 * 1024  # the short last block is never kept
