"""The local store keeps the descriptors of the most recently written append files open
between writes, at most KEPT_OPEN_MAX of them (issue 47: an open and a close per produce)."""

import os
import threading

from martlet.engine.store import LocalStore, local
from martlet.engine.store.local import KEPT_OPEN, _KeptOpen


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_the_most_recently_written_files_keep_descriptors_up_to_the_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(local, "KEPT_OPEN", _KeptOpen(4))
    store = LocalStore(str(tmp_path))
    files = [store.open_append(f"f{index}") for index in range(10)]
    before = open_descriptors()
    for round_ in range(3):
        for file in files:
            file.write(b"%d" % round_)
    assert open_descriptors() - before == 4
    assert len(local.KEPT_OPEN) == 4
    for index in range(len(files)):  # every write reached its file, kept open or not
        assert (tmp_path / f"f{index}").read_bytes() == b"012"
    for file in files:
        file.close()
    assert open_descriptors() == before and len(local.KEPT_OPEN) == 0


def test_a_closed_file_keeps_no_descriptor(tmp_path):
    store = LocalStore(str(tmp_path))
    file = store.open_append("f")
    file.write(b"a")
    file.sync()
    assert file.size == 1 and (tmp_path / "f").read_bytes() == b"a"
    assert file in KEPT_OPEN._files and file._fd is not None
    file.close()
    assert file not in KEPT_OPEN._files and file._fd is None


def test_letting_go_during_a_write_closes_the_descriptor_when_the_write_returns(tmp_path):
    store = LocalStore(str(tmp_path))
    file = store.open_append("f")
    file.write(b"a")
    in_write, release = threading.Event(), threading.Event()
    real_write = os.write

    def slow_write(fd: int, data: memoryview) -> int:
        in_write.set()
        assert release.wait(10)
        return real_write(fd, data)

    done = threading.Thread(target=lambda: file.write(b"b"))
    # the one write of the thread above blocks until released
    os.write = slow_write
    try:
        done.start()
        assert in_write.wait(10)
        file.let_go()  # must not wait for the write in progress
        assert file._fd is not None
        release.set()
        done.join(10)
    finally:
        os.write = real_write
    assert not done.is_alive() and file._fd is None
    assert (tmp_path / "f").read_bytes() == b"ab"
    file.close()


def test_a_partial_write_is_carried_on_until_every_byte_is_written(tmp_path, monkeypatch):
    store = LocalStore(str(tmp_path))
    file = store.open_append("f")
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:3])))  # 3 bytes a call at most
    file.write(b"0123456789")
    monkeypatch.setattr(os, "write", real_write)
    assert file.size == 10 and (tmp_path / "f").read_bytes() == b"0123456789"
    file.close()
