import os
import subprocess
import sys

import pytest

from martlet.engine.errors import DataDirLocked
from martlet.engine.store import LocalStore


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
