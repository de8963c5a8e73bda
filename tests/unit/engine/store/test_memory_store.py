import pytest

from martlet.engine.store import MemoryStore


def test_open_append_needs_the_directory():
    store = MemoryStore()
    with pytest.raises(FileNotFoundError):
        store.open_append("d/f")
    store.mkdir("d")
    store.open_append("d/f").close()
    assert store.list("d") == ["f"]


def test_a_file_cannot_become_a_directory():
    store = MemoryStore()
    store.open_append("f").close()
    with pytest.raises(FileExistsError):
        store.mkdir("f/sub")


def test_write_after_close_is_a_bug():
    store = MemoryStore()
    file = store.open_append("f")
    file.close()
    with pytest.raises(AssertionError):
        file.write(b"x")


def test_truncate_can_grow_with_zeros_like_the_os():
    store = MemoryStore()
    file = store.open_append("f")
    file.write(b"ab")
    store.truncate("f", 4)
    assert store.read("f", 0, 10) == b"ab\x00\x00"
    assert file.size == 4
