"""The published checkpoint: C and LSO in the name of one empty file, moved by rename."""

from martlet.engine.log.files import read_published, write_published
from martlet.engine.store.memory import MemoryStore


class RenameCounter(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def list(self, path: str) -> list[str]:
        self.calls.append(f"list {path}")
        return super().list(path)

    def rename(self, src: str, dst: str) -> None:
        self.calls.append(f"rename {src} {dst}")
        super().rename(src, dst)

    def open_append(self, path: str):  # type: ignore[no-untyped-def]
        self.calls.append(f"create {path}")
        return super().open_append(path)


def test_nothing_published_reads_as_none_and_the_first_publish_creates_the_file():
    store = RenameCounter()
    store.mkdir("p")
    assert read_published(store, "p") is None
    store.calls.clear()
    write_published(store, "p", 7, 7)
    assert store.calls == ["list p", "create p/checkpoint-7-7"]
    assert read_published(store, "p") == (7, 7)


def test_each_later_publish_is_one_rename_and_an_unchanged_one_nothing():
    store = RenameCounter()
    store.mkdir("p")
    write_published(store, "p", 7, 7)
    store.calls.clear()
    write_published(store, "p", 12, 10)
    write_published(store, "p", 12, 10)
    assert store.calls == ["list p", "rename p/checkpoint-7-7 p/checkpoint-12-10", "list p"]
    assert read_published(store, "p") == (12, 10)


def test_a_publish_that_knows_the_previous_file_renames_it_without_listing():
    store = RenameCounter()
    store.mkdir("p")
    write_published(store, "p", 7, 7)
    store.calls.clear()
    write_published(store, "p", 12, 12, previous=(7, 7))
    write_published(store, "p", 12, 12, previous=(12, 12))
    assert store.calls == ["rename p/checkpoint-7-7 p/checkpoint-12-12"]
    assert read_published(store, "p") == (12, 12)


def test_a_previous_file_that_is_gone_falls_back_to_listing():
    store = RenameCounter()
    store.mkdir("p")
    write_published(store, "p", 7, 7)
    store.calls.clear()
    write_published(store, "p", 12, 12, previous=(5, 5))  # not what the store holds
    assert store.calls == ["rename p/checkpoint-5-5 p/checkpoint-12-12", "list p",
                           "rename p/checkpoint-7-7 p/checkpoint-12-12"]
    assert store.list("p") == ["checkpoint-12-12"]


def test_other_names_are_ignored_and_leftovers_cleaned_up():
    store = MemoryStore()
    store.mkdir("p")
    for name in ("checkpoint-3-3", "checkpoint-9-9", "checkpoint-x-1", "checkpoint-4-5", "00000000000000000000.log"):
        store.open_append(f"p/{name}").close()
    assert read_published(store, "p") == (9, 9)  # the highest; an LSO above C is not a value
    write_published(store, "p", 11, 11)
    assert store.list("p") == ["00000000000000000000.log", "checkpoint-11-11", "checkpoint-4-5", "checkpoint-x-1"]
