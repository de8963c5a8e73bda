import os
import subprocess
import sys

import pytest

from martlet.engine.errors import DataDirLocked
from martlet.engine.store import LocalStore
from tests.support.stores import mapped, open_descriptors


def test_files_live_under_the_root(tmp_path):
    store = LocalStore(str(tmp_path))
    store.mkdir("t-0")
    file = store.open_append("t-0/a.log")
    file.write(b"abc")
    file.sync()
    file.close()
    assert (tmp_path / "t-0" / "a.log").read_bytes() == b"abc"


def test_write_reaches_the_os_before_close(tmp_path):
    store = LocalStore(str(tmp_path))
    file = store.open_append("f")
    file.write(b"x" * 100_000)
    # Another descriptor sees the bytes: nothing waits in a Python buffer.
    assert os.path.getsize(tmp_path / "f") == 100_000
    file.close()


def test_close_twice_is_harmless(tmp_path):
    file = LocalStore(str(tmp_path)).open_append("f")
    file.close()
    file.close()


def test_lock_refuses_a_second_holder_in_this_process(tmp_path):
    store = LocalStore(str(tmp_path))
    lock = store.lock("LOCK")
    with pytest.raises(DataDirLocked):
        store.lock("LOCK")
    lock.release()
    with store.lock("LOCK"):
        pass


def test_lock_refuses_while_another_process_holds_it(tmp_path):
    holder = (
        "import fcntl, os, sys\n"
        f"fd = os.open({str(tmp_path / 'LOCK')!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"locked\n"
        with pytest.raises(DataDirLocked):
            LocalStore(str(tmp_path)).lock("LOCK")
    finally:
        child.stdin.close()
        child.wait(timeout=10)
        child.stdout.close()
    LocalStore(str(tmp_path)).lock("LOCK").release()  # free again once the holder exits


def test_location_names_the_directory_or_the_hdfs_url(tmp_path) -> None:
    from martlet.engine.api import store_location
    from martlet.engine.store.memory import MemoryStore

    class OnHdfs:  # the attributes HdfsStore keeps, without a NameNode
        url, root = "hdfs://nn:8020", "/martlet"

    assert store_location(LocalStore(str(tmp_path / "data"))) == str(tmp_path / "data")
    assert store_location(OnHdfs()) == "hdfs://nn:8020/martlet"  # type: ignore[arg-type]
    assert store_location(MemoryStore()) == "memory"


# -- read_view: reads through a mapping --------------------------------------------------------


def test_read_view_gives_what_read_gives(tmp_path):
    store = LocalStore(str(tmp_path))
    content = os.urandom(200_000)  # several mapping granules (4 KB)
    (tmp_path / "f").write_bytes(content)
    for offset, length in [(0, 10), (1, 4095), (4095, 2), (4096, 8192), (12_345, 100_000), (199_990, 100),
                           (0, 200_000), (0, 1 << 30), (200_000, 5), (250_000, 5), (7, 0)]:
        view = store.read_view("f", offset, length)
        assert isinstance(view, memoryview) and view.readonly
        assert bytes(view) == store.read("f", offset, length) == content[offset:offset + length]
    with pytest.raises(FileNotFoundError):
        store.read_view("missing", 0, 10)


def test_a_view_holds_its_mapping_until_released_even_of_a_deleted_file(tmp_path):
    store = LocalStore(str(tmp_path))
    content = os.urandom(50_000)
    (tmp_path / "f").write_bytes(content)
    view = store.read_view("f", 5_000, 30_000)
    part = view[100:200]
    del view
    store.delete("f")
    assert bytes(part) == content[5_100:5_200]  # the pages stay while a slice lives
    assert [line for line in mapped(str(tmp_path / "f")) if "(deleted)" in line]
    del part
    assert mapped(str(tmp_path / "f")) == []
    assert open_descriptors(str(tmp_path / "f")) == []


def test_a_view_does_not_grow_with_the_file(tmp_path):
    store = LocalStore(str(tmp_path))
    file = store.open_append("f")
    file.write(b"a" * 10_000)
    view = store.read_view("f", 0, 1 << 20)
    file.write(b"b" * 10_000)
    assert bytes(view) == b"a" * 10_000
    assert bytes(store.read_view("f", 9_990, 20)) == b"a" * 10 + b"b" * 10
