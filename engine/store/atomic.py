"""Whole small files (metadata, checkpoints) replaced atomically: write a temporary file,
make it durable, then rename it over the old one, so a crash leaves the old or the new
content and never a torn mix."""

from __future__ import annotations

from .base import Store


def write_atomically(store: Store, path: str, data: bytes) -> None:
    temporary = path + ".tmp"
    store.delete(temporary)
    handle = store.open_append(temporary)
    try:
        handle.write(data)
        handle.sync()
    finally:
        handle.close()
    store.rename(temporary, path)


def read_whole(store: Store, path: str) -> bytes:
    return store.read(path, 0, store.size(path))
