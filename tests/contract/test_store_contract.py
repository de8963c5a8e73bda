"""One conformance suite for every Store backend (STYLE.md rule 5)."""

import concurrent.futures
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import hdfs_native
import pytest

from martlet.engine.store import LocalStore, MemoryStore, Store
from martlet.engine.store.hdfs import HdfsStore


@pytest.fixture(params=["local", "memory", pytest.param("hdfs", marks=pytest.mark.java)])
def store(request: pytest.FixtureRequest, tmp_path) -> Store:
    if request.param == "local":
        return LocalStore(str(tmp_path / "root"))
    if request.param == "hdfs":
        hdfs = request.getfixturevalue("reference_hdfs")
        return HdfsStore(hdfs.url, f"/contract/{uuid.uuid4().hex}")  # a fresh root per test
    return MemoryStore()


def write(store: Store, path: str, data: bytes) -> None:
    file = store.open_append(path)
    file.write(data)
    file.close()


def test_list_is_sorted_and_empty_when_missing(store):
    store.mkdir("d")
    for name in ("b", "a", "c"):
        write(store, f"d/{name}", b"")
    store.mkdir("d/sub")
    assert store.list("d") == ["a", "b", "c", "sub"]
    assert store.list("missing") == []
    assert store.list("") == ["d"]


def test_mkdir_makes_parents_and_is_idempotent(store):
    store.mkdir("a/b/c")
    store.mkdir("a/b/c")
    assert store.exists("a/b") and store.exists("a/b/c")
    assert store.list("a/b/c") == []


def test_append_grows_a_file_and_tracks_its_size(store):
    store.mkdir("d")
    file = store.open_append("d/f")
    assert file.size == 0
    file.write(b"hello ")
    file.write(memoryview(b"world"))
    assert file.size == 11
    file.sync()
    file.close()
    assert store.size("d/f") == 11
    reopened = store.open_append("d/f")
    assert reopened.size == 11
    reopened.write(b"!")
    reopened.close()
    assert store.read("d/f", 0, 100) == b"hello world!"


def test_written_bytes_are_readable_before_sync_or_close(store):
    store.mkdir("d")
    file = store.open_append("d/f")
    file.write(b"abc")
    assert store.read("d/f", 0, 3) == b"abc"  # handed to the backend at once, no buffering
    file.close()


def test_read_at_offsets_and_short_at_eof(store):
    store.mkdir("d")
    write(store, "d/f", b"0123456789")
    assert store.read("d/f", 3, 4) == b"3456"
    assert store.read("d/f", 8, 100) == b"89"
    assert store.read("d/f", 10, 5) == b""
    assert store.read("d/f", 50, 5) == b""


def test_missing_files_raise_file_not_found(store):
    for call in (lambda: store.size("nope"), lambda: store.read("nope", 0, 1), lambda: store.truncate("nope", 0)):
        with pytest.raises(FileNotFoundError):
            call()
    with pytest.raises(FileNotFoundError):
        store.open_append("no-dir/f")


def test_truncate_cuts_a_file(store):
    store.mkdir("d")
    write(store, "d/f", b"0123456789")
    store.truncate("d/f", 4)
    assert store.size("d/f") == 4
    assert store.read("d/f", 0, 100) == b"0123"


def test_an_open_append_file_sees_a_truncate_before_it_was_opened(store):
    store.mkdir("d")
    write(store, "d/f", b"0123456789")
    store.truncate("d/f", 2)
    file = store.open_append("d/f")
    file.write(b"xy")
    file.close()
    assert store.read("d/f", 0, 10) == b"01xy"


def test_rename_replaces_the_destination(store):
    store.mkdir("d")
    write(store, "d/new", b"new")
    write(store, "d/old", b"old contents")
    store.rename("d/new", "d/old")
    assert not store.exists("d/new")
    assert store.read("d/old", 0, 100) == b"new"
    assert store.list("d") == ["old"]


def test_reads_follow_a_file_that_grows_is_truncated_replaced_or_deleted(store):
    """A store may keep what it learnt of a file between reads (HDFS keeps readers): every
    change made through the store shows in the next read."""
    store.mkdir("d")
    write(store, "d/f", b"0123")
    assert store.read("d/f", 0, 4) == b"0123"
    write(store, "d/f", b"4567")  # appends
    assert store.read("d/f", 2, 6) == b"234567"
    store.truncate("d/f", 3)
    assert store.read("d/f", 0, 10) == b"012"
    write(store, "d/g", b"replaced")
    store.rename("d/g", "d/f")
    assert store.read("d/f", 0, 10) == b"replaced"
    store.delete("d")
    with pytest.raises(FileNotFoundError):
        store.read("d/f", 0, 1)


def test_rename_moves_a_directory(store):
    store.mkdir("a/inner")
    write(store, "a/inner/f", b"x")
    store.rename("a", "b")
    assert store.list("") == ["b"]
    assert store.read("b/inner/f", 0, 1) == b"x"


def test_delete_file_tree_and_missing(store):
    store.mkdir("t/sub")
    write(store, "t/f", b"1")
    write(store, "t/sub/g", b"2")
    store.delete("t/f")
    assert store.list("t") == ["sub"]
    store.delete("t")
    assert not store.exists("t") and not store.exists("t/sub/g")
    store.delete("t")  # missing: no error
    store.delete("never/was")


def test_exists(store):
    assert not store.exists("d")
    store.mkdir("d")
    write(store, "d/f", b"")
    assert store.exists("d") and store.exists("d/f") and not store.exists("d/g")


def test_create_exclusive_creates_only_once(store):
    store.mkdir("claims")
    assert store.create_exclusive("claims/7")
    assert store.size("claims/7") == 0
    assert not store.create_exclusive("claims/7")
    write(store, "claims/8", b"kept")
    assert not store.create_exclusive("claims/8")
    assert store.read("claims/8", 0, 10) == b"kept"
    store.mkdir("claims/dir")
    assert not store.create_exclusive("claims/dir")
    assert store.list("claims") == ["7", "8", "dir"]


def test_create_exclusive_needs_its_directory(store):
    with pytest.raises(FileNotFoundError):
        store.create_exclusive("missing/7")


def test_create_exclusive_has_one_winner_among_racing_stores(store):
    """Two store objects on one root (two processes, for local and HDFS) race for the same
    names from several threads: each name is won exactly once."""
    other = _same_root(store)
    store.mkdir("race")
    names = [f"race/{n}" for n in range(20)]

    def claim(view: Store) -> list[str]:
        return [name for name in names if view.create_exclusive(name)]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(claim, [store, other, store, other]))
    won = [name for result in results for name in result]
    assert sorted(won) == sorted(names)


@pytest.mark.parametrize("name", ["catalog", "00000000000000000000.log"])
def test_a_file_another_store_replaces_is_read_afresh(store, name):
    """Another node rewrites shared files by renaming a new copy over them: the catalog at
    any time, a partition's segment logs only while it owns the partition, so this store
    reads them again only after taking the partition over. Its next read sees the new copy."""
    other = _same_root(store)
    store.mkdir("d")
    write(store, f"d/{name}", b"first version")
    assert store.read(f"d/{name}", 0, 100) == b"first version"
    write(other, "d/tmp", b"second")
    other.rename("d/tmp", f"d/{name}")
    if name.endswith(".log"):
        store.take_over("d")
    assert store.read(f"d/{name}", 0, 6) == b"second"


def _same_root(store: Store) -> Store:
    if isinstance(store, LocalStore):
        return LocalStore(store.root)
    if isinstance(store, HdfsStore):
        return HdfsStore(store.url, store.root)
    return store  # a memory store cannot be shared: its threads race instead


@pytest.mark.parametrize("path", ["/abs", "../escape", "a/../../b", "./x"])
def test_paths_cannot_escape_the_root(store, path):
    with pytest.raises(ValueError):
        store.exists(path)


def test_the_root_cannot_be_deleted(store):
    with pytest.raises(ValueError):
        store.delete("")


# HDFS only: the one backend whose server can go away under the store.


@pytest.mark.java
def test_hdfs_synced_data_survives_a_cluster_restart(reference_hdfs):
    store = HdfsStore(reference_hdfs.url, f"/restart/{uuid.uuid4().hex}")
    store.mkdir("d")
    write(store, "d/closed", b"closed before the restart")
    file = store.open_append("d/open")
    file.write(b"synced, still open")
    file.sync()
    reference_hdfs.restart()  # same NameNode port and data folder, not formatted
    after = HdfsStore(reference_hdfs.url, store.root)
    assert after.list("d") == ["closed", "open"]
    assert after.read("d/closed", 0, 100) == b"closed before the restart"
    assert after.size("d/open") == len(b"synced, still open")
    # The old writer's lease outlives the restart: recover it (as a new owner must) to read
    # the file's last, unfinished block.
    client = hdfs_native.Client(reference_hdfs.url)
    deadline = time.monotonic() + 30
    while not client.recover_lease(f"{store.root}/d/open"):
        assert time.monotonic() < deadline, "lease recovery did not finish in 30 s"
        time.sleep(0.2)
    assert after.read("d/open", 0, 100) == b"synced, still open"


@pytest.mark.java
def test_hdfs_a_broken_writer_is_abandoned_and_its_synced_bytes_kept(reference_hdfs):
    store = HdfsStore(reference_hdfs.url, f"/broken/{uuid.uuid4().hex}")
    store.mkdir("d")
    file = store.open_append("d/log")
    file.write(b"synced before the outage")
    reference_hdfs.restart()  # the writer's pipeline is gone
    with pytest.raises(OSError):
        for _ in range(3):  # the first write after a restart may still be buffered
            file.write(b"lost")
    # Closing the broken writer would complete the file at the length it saw; abandoning
    # leaves it to lease recovery, which keeps every synced byte.
    assert store.size("d/log") == len(b"synced before the outage")
    assert store.read("d/log", 0, 100) == b"synced before the outage"
    again = store.open_append("d/log")
    again.write(b", and more")
    again.close()
    assert store.read("d/log", 0, 100) == b"synced before the outage, and more"


@pytest.mark.java
def test_hdfs_reading_the_unfinished_block_of_an_own_open_file(reference_hdfs):
    """Readers see only the finished blocks of a file open for writing: `read` past them
    releases this store's writer (closing it on another thread, see engine/store/hdfs.py) and
    returns every byte written; `read_visible`, for read-ahead, gives what a reader sees and
    leaves the writer open. A write after the release reopens the file."""
    block = 1 << 20  # HDFS's smallest block size
    store = HdfsStore(reference_hdfs.url, f"/unfinished/{uuid.uuid4().hex}", block_bytes=block)
    store.mkdir("d")
    file = store.open_append("d/0.log")
    data = bytes(range(256)) * (block // 256) + b"the unfinished block"
    file.write(data)
    assert store.read_visible("d/0.log", 0, len(data)) == data[:block]
    # The block cache's form of the same reads: pieces of its block size, joined from packets.
    assert store.read_blocks("d/0.log", 0, len(data), 300_000, visible=True) == [
        data[at : min(at + 300_000, block)] for at in range(0, block, 300_000)]
    assert file.open
    assert store.read("d/0.log", block - 10, 100) == data[block - 10 :]
    assert not file.open
    file.write(b", more")
    assert store.read("d/0.log", len(data), 100) == b", more"
    file.close()
    assert store.read_visible("d/0.log", block, 100) == b"the unfinished block, more"
    tail = data[block - 4 :] + b", more"  # 30 bytes: two pieces of 16, the last one short
    assert store.read_blocks("d/0.log", block - 4, 100, 16, visible=False) == [tail[:16], tail[16:]]


@pytest.mark.java
def test_hdfs_a_killed_writers_unsynced_bytes_are_settled_before_the_size_is_given(reference_hdfs):
    # A writer killed before its first hsync leaves the NameNode counting 0 bytes while the
    # DataNode holds what the writer streamed. Lease recovery settles the file at the
    # DataNode's length, so the store must recover before it answers `size`, or a caller that
    # then appends finds the file longer than it was told.
    store = HdfsStore(reference_hdfs.url, f"/killed/{uuid.uuid4().hex}")
    store.mkdir("d")
    writer = textwrap.dedent(f"""
        import os, signal, hdfs_native
        file = hdfs_native.Client({reference_hdfs.url!r}).create({store.root + '/d/log'!r})
        file.write(b"x" * (16 << 20))  # more than the writer buffers: packets leave unsynced
        print("written", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", writer], capture_output=True, timeout=60)
    assert done.stdout == b"written\n" and done.returncode == -signal.SIGKILL
    size = store.size("d/log")
    assert store.read("d/log", 0, 32 << 20) == b"x" * size
    file = store.open_append("d/log")
    assert file.size == size
    file.write(b"after")
    file.close()
    assert store.read("d/log", size, 100) == b"after"


@pytest.mark.java
def test_hdfs_closes_the_least_recently_written_files_beyond_its_limit_and_idle_ones(reference_hdfs):
    """Each file open for writing holds a DataNode pipeline: beyond `writers_max` the least
    recently written are closed, and so is every file idle for `writer_idle_s`; the next
    write reopens a closed one, and nothing written is lost."""
    store = HdfsStore(reference_hdfs.url, f"/writers/{uuid.uuid4().hex}", writers_max=2, writer_idle_s=3600)
    store.mkdir("d")
    files = [store.open_append(f"d/{i}") for i in range(5)]
    for i, file in enumerate(files):
        file.write(f"first {i};".encode())
    wait_until(lambda: store.open_writers.count() <= 2, "the writers beyond the limit to close")
    assert [file.open for file in files] == [False, False, False, True, True]
    files[0].write(b"again;")  # reopened for append
    assert files[0].open
    idle = HdfsStore(reference_hdfs.url, store.root, writer_idle_s=0.5)
    late = idle.open_append("d/late")
    late.write(b"late;")
    wait_until(lambda: not late.open, "the idle writer to close")
    assert idle.open_writers.count() == 0
    for file in files:
        file.close()
    assert store.read("d/0", 0, 100) == b"first 0;again;"
    assert [store.read(f"d/{i}", 0, 100) for i in range(1, 5)] == [f"first {i};".encode() for i in range(1, 5)]
    assert idle.read("d/late", 0, 100) == b"late;"


@pytest.mark.java
def test_hdfs_closes_writers_holding_a_started_block_beyond_its_limit(reference_hdfs):
    """A writer that started a block holds a whole DataNode block size of reserved disk;
    beyond `fresh_most` of them the least recently written close, and their next write
    reopens the file for append, which reserves nothing and so does not count."""
    store = HdfsStore(reference_hdfs.url, f"/fresh/{uuid.uuid4().hex}", writer_idle_s=3600)
    store.open_writers.fresh_most = 1
    store.mkdir("d")
    files = [store.open_append(f"d/{i}") for i in range(3)]
    for i, file in enumerate(files):
        file.write(f"first {i};".encode())
    wait_until(lambda: [file.open for file in files] == [False, False, True], "the older started blocks to close")
    files[0].write(b"again;")  # an append to its partial block: no new block started
    assert files[0].open and not files[0].fresh and files[2].fresh
    for file in files:
        file.close()
    assert [store.read(f"d/{i}", 0, 100) for i in range(3)] == [b"first 0;again;", b"first 1;", b"first 2;"]


def wait_until(condition, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)  # polling state another thread changes; bounded by the deadline
