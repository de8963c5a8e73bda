"""A view of a store that can only read, for code that must never change what a live
broker writes (engine/log/reader.py): list, size, read and exists pass through; every
writing call raises PermissionError before it reaches the backend.

Reading must not write behind the caller's back either. HdfsStore's reads recover the lease
of a file whose writer looks gone, which would close the live broker's active segment under
it; such a store is accepted only in its read-only mode (`HdfsStore(..., read_only=True)`),
recognised by its `read_only` attribute.
"""

from __future__ import annotations

from typing import NoReturn

from .base import AppendFile, Store


class ReadOnlyStore:
    slow_writes = True  # nothing is written; callers that check this never write from a loop

    def __init__(self, store: Store) -> None:
        if getattr(store, "read_only", None) is False:
            raise ValueError(f"{type(store).__name__} writes when it reads; open it with read_only=True")
        self.store = store
        self.slow_reads: bool = getattr(store, "slow_reads", True)

    def list(self, path: str) -> list[str]:
        return self.store.list(path)

    def size(self, path: str) -> int:
        return self.store.size(path)

    def read(self, path: str, offset: int, length: int) -> bytes:
        return self.store.read(path, offset, length)

    def exists(self, path: str) -> bool:
        return self.store.exists(path)

    def mkdir(self, path: str) -> None:
        _refuse("mkdir", path)

    def open_append(self, path: str) -> AppendFile:
        _refuse("open_append", path)

    def truncate(self, path: str, size: int) -> None:
        _refuse("truncate", path)

    def rename(self, src: str, dst: str) -> None:
        _refuse("rename", src)

    def delete(self, path: str) -> None:
        _refuse("delete", path)

    def create_exclusive(self, path: str) -> bool:
        _refuse("create_exclusive", path)

    def take_over(self, directory: str) -> None:
        _refuse("take_over", directory)


def _refuse(call: str, path: str) -> NoReturn:
    raise PermissionError(f"read-only store: {call}({path!r}) refused")
