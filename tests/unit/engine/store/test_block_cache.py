from martlet.engine.store.cache import READ_AHEAD_BLOCKS, CachedStore
from martlet.engine.store.memory import MemoryStore


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
