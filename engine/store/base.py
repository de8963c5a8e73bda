"""The storage interface the engine writes through.

Deliberately small and synchronous so that every backend (local disk, memory, HDFS) can pass
one conformance suite (tests/contract/test_store_contract.py).

Paths are '/'-separated strings relative to the store's root, e.g. "orders-0/00000000000000000000.log".
Missing files raise FileNotFoundError from size/read/truncate/rename; list, delete and exists
treat a missing path as empty, absent and false.
"""

from typing import Protocol


class AppendFile(Protocol):
    """An open file that only grows. `write` hands bytes to the backend at once (no buffering
    in the process), so a killed process loses nothing written; `sync` makes them durable."""

    @property
    def size(self) -> int: ...

    def write(self, data: bytes | bytearray | memoryview) -> None: ...

    def sync(self) -> None: ...

    def close(self) -> None: ...

    def abandon(self) -> None:
        """Stop using the file without closing it, because a write failed or hangs: closing
        a broken HDFS writer would complete the file at the length that writer saw. The
        next open_append or read recovers the file as the store kept it."""


class Store(Protocol):
    slow_writes: bool
    """True when a write may wait on the network (HDFS): the engine then never writes from
    its event loop. False for stores whose writes only reach the local OS."""

    slow_reads: bool
    """True when a read may wait on the network (HDFS): the engine then keeps a block cache
    in front of the store and reads ahead for cold consumers (engine/store/cache.py). False
    for stores whose reads the operating system already caches (the local disk's page cache):
    the engine reads those directly, one copy into the process instead of three."""

    def mkdir(self, path: str) -> None:
        """Create a directory and its parents; no error if it exists."""

    def list(self, path: str) -> list[str]:
        """Sorted names of the children of a directory; [] if it does not exist."""
        ...

    def size(self, path: str) -> int:
        """Size of a file in bytes."""
        ...

    def read(self, path: str, offset: int, length: int) -> bytes:
        """Up to `length` bytes from `offset`; shorter only at end of file."""
        ...

    def open_append(self, path: str) -> AppendFile:
        """Open a file for appending, creating it if missing (its directory must exist)."""
        ...

    def truncate(self, path: str, size: int) -> None:
        """Cut a file down to `size` bytes."""

    def rename(self, src: str, dst: str) -> None:
        """Move src to dst atomically, replacing a file at dst."""

    def delete(self, path: str) -> None:
        """Remove a file or a whole directory tree; no error if missing."""

    def exists(self, path: str) -> bool: ...

    def take_over(self, directory: str) -> None:
        """Before writing files another process may have been writing (a partition moving to
        this node): end that process's hold on every file in `directory`, all at once, so no
        write of it can land afterwards. HDFS recovers the leases; stores without leases have
        nothing to do."""
        ...

    def create_exclusive(self, path: str) -> bool:
        """Create an empty file at `path` unless anything is there (its directory must
        exist): True if this call created it, False if it already existed. Atomic across
        processes sharing the store, so it can serve as a claim (producer-id blocks)."""
        ...


def join(*parts: str) -> str:
    """Join store path parts with '/', skipping empty ones."""
    return "/".join(part.strip("/") for part in parts if part.strip("/"))


def check_path(path: str) -> list[str]:
    """Split a store path, refusing anything that could escape the store's root."""
    parts = [part for part in path.split("/") if part]
    if path.startswith("/") or any(part in (".", "..") for part in parts):
        raise ValueError(f"store paths are relative and plain: {path!r}")
    return parts


def location(store: Store) -> str:
    """Where a store keeps its files, as an operator names it: "hdfs://host:port/root" on HDFS,
    the directory on a local disk, "memory" for a store without one. Kafka's `log.dirs` and
    DescribeLogDirs show it. Read from the backends' own `url`/`root` attributes so the
    storage interface stays the seven calls every backend must have."""
    root = getattr(store, "root", None)
    if root is None:
        return "memory"
    url = getattr(store, "url", "")
    return f"{url}{root}" if url else str(root)
