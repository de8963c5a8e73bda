"""Whole small files (metadata, checkpoints) replaced atomically: write a temporary file,
make it durable, then rename it over the old one, so a crash leaves the old or the new
content and never a torn mix. The temporary name is unique to the call: several processes
sharing a store (a cluster's brokers starting together) may write the same file at once,
and the last rename wins whole. A crash can leave a `<path>.<id>.tmp` behind; it is never read."""

from __future__ import annotations

import uuid

from .base import Store


def write_atomically(store: Store, path: str, data: bytes) -> None:
    temporary = f"{path}.{uuid.uuid4().hex[:12]}.tmp"
    handle = store.open_append(temporary)
    try:
        handle.write(data)
        handle.sync()
    finally:
        handle.close()
    store.rename(temporary, path)


def read_whole(store: Store, path: str) -> bytes:
    return store.read(path, 0, store.size(path))
