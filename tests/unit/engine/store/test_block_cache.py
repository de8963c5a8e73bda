from martlet.engine.store.cache import CachedStore
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
    assert inner.reads == 1 and cache.bytes_held == 3072  # blocks 0, 1 and 2, in one store read
    assert cache.read("f.log", 1500, 400) == data[1500:1900]
    assert inner.reads == 1  # whole blocks: served from memory


def test_each_run_of_missing_blocks_is_one_store_read():
    inner, cache, data = filled(8192)
    cache.read("f.log", 2048, 1)  # block 2 is kept
    assert cache.read("f.log", 0, 8192) == data
    assert inner.reads == 1 + 2  # blocks 0-1, then 3-7; block 2 from memory


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
