"""Store on the local file system, through os-level calls only.

Writes go straight to the kernel with os.write (no Python buffering), so a process killed
right after `write` returns loses nothing; only `sync` (fsync) protects against power loss.
Creating, renaming and deleting entries also fsyncs the parent directory, so the change to
the directory itself survives power loss as well.

Reads copy from the page cache (pread); `read_view` maps the pages instead (mmap), for a
reader that only looks at the bytes and lets go of them soon (engine/log/reader.py).
"""

import collections
import fcntl
import mmap
import os
import shutil
import threading

from ..errors import DataDirLocked
from .base import check_path

KEPT_OPEN_MAX = 256  # append files whose descriptor stays open between writes: the most recently written


class LocalAppendFile:
    """An append-only file. The KEPT_OPEN_MAX most recently written append files keep their
    descriptor between writes (an open and a close cost a produce request 4-6 microseconds
    when every write opens the file for itself); the others hold none, so ten thousand
    partitions with an active segment each cost at most KEPT_OPEN_MAX descriptors.

    A descriptor is used and closed under the file's lock. Letting go of it never waits for
    a call in progress (a write stuck on a failing disk): that call closes it when it returns."""

    def __init__(self, os_path: str, new_dir: str | None) -> None:
        self._path = os_path
        self._size = os.stat(os_path).st_size
        self._new_dir = new_dir  # set when we created the file: sync its directory once
        self._closed = False
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._let_go_after = False  # asked to close the descriptor while a call held it

    @property
    def size(self) -> int:
        return self._size

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self._closed, "write after close"
        with self._lock:
            try:
                if self._fd is None:
                    self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND)
                rest = data  # a memoryview only if a write comes back partial (large writes may)
                while rest:
                    written = os.write(self._fd, rest)
                    self._size += written
                    rest = memoryview(rest)[written:] if written < len(rest) else b""
            finally:
                self._after_call()
        if not self._closed and KEPT_OPEN.last is not self:
            KEPT_OPEN.written(self)

    def sync(self) -> None:
        assert not self._closed, "sync after close"
        with self._lock:
            try:
                if self._fd is None:
                    self._fd = os.open(self._path, os.O_WRONLY)
                    self._let_go_after = True  # not one kept: this call's own
                os.fsync(self._fd)
            finally:
                self._after_call()
        if self._new_dir is not None:
            _fsync_dir(self._new_dir)
            self._new_dir = None

    def close(self) -> None:
        self._closed = True
        KEPT_OPEN.forget(self)
        self.let_go()

    def abandon(self) -> None:
        self.close()

    def let_go(self) -> None:
        """Close the descriptor kept, now or (a call holds it) when that call returns."""
        if self._lock.acquire(blocking=False):
            try:
                self._close_fd()
            finally:
                self._lock.release()
        else:
            self._let_go_after = True

    def _after_call(self) -> None:
        """Under the lock, at the end of a call."""
        if self._let_go_after or self._closed:
            self._let_go_after = False
            self._close_fd()

    def _close_fd(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


class _KeptOpen:
    """The append files that keep their descriptor, least recently written first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._files: collections.OrderedDict[LocalAppendFile, None] = collections.OrderedDict()
        self.last: LocalAppendFile | None = None  # the most recently written: writing it again changes nothing

    def written(self, file: LocalAppendFile) -> None:
        with self._lock:
            self._files[file] = None
            self._files.move_to_end(file)
            over = [self._files.popitem(last=False)[0] for _ in range(len(self._files) - self.limit)]
            self.last = file if file not in over else None
        for victim in over:  # outside the lock: letting go takes the victim's own
            victim.let_go()

    def forget(self, file: LocalAppendFile) -> None:
        with self._lock:
            self._files.pop(file, None)
            if self.last is file:
                self.last = None

    def __len__(self) -> int:
        return len(self._files)


KEPT_OPEN = _KeptOpen(KEPT_OPEN_MAX)


class FileLock:
    """An exclusive flock held on an open file; released by `release` or process exit."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = -1

    def __enter__(self) -> "FileLock":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class LocalStore:
    slow_writes = False
    slow_reads = False

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)

    def _os_path(self, path: str) -> str:
        return os.path.join(self.root, *check_path(path))

    def mkdir(self, path: str) -> None:
        os.makedirs(self._os_path(path), exist_ok=True)

    def list(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self._os_path(path)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def size(self, path: str) -> int:
        return os.stat(self._os_path(path)).st_size

    def read(self, path: str, offset: int, length: int) -> bytes:
        fd = os.open(self._os_path(path), os.O_RDONLY)
        try:
            return _pread_fully(fd, offset, length)
        finally:
            os.close(fd)

    def read_view(self, path: str, offset: int, length: int) -> memoryview:
        """What `read` gives, as a view of the file's pages in the page cache (a read-only
        mapping) instead of a copy: no copy is made, and pages are mapped as they are touched.

        The mapping, and the file descriptor it keeps, live as long as the view or any slice
        of it (CPython frees them with the last reference): meanwhile the file's blocks stay
        allocated even if the file is deleted, so a caller lets go of the views it has read. The caller must touch no byte that
        may be cut off the file meanwhile: a page wholly past the file's new end faults the
        process (SIGBUS). Appending is harmless; the view never grows."""
        fd = os.open(self._os_path(path), os.O_RDONLY)
        try:
            length = min(length, os.fstat(fd).st_size - offset)
            if length <= 0:
                return memoryview(b"")
            start = offset - offset % mmap.ALLOCATIONGRANULARITY  # where a mapping may begin
            mapping = mmap.mmap(fd, offset + length - start, prot=mmap.PROT_READ, offset=start)
        finally:
            os.close(fd)  # the mapping holds a duplicate
        return memoryview(mapping)[offset - start:]

    def open_append(self, path: str) -> LocalAppendFile:
        os_path = self._os_path(path)
        created = not os.path.exists(os_path)
        os.close(os.open(os_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
        return LocalAppendFile(os_path, os.path.dirname(os_path) if created else None)

    def truncate(self, path: str, size: int) -> None:
        os.truncate(self._os_path(path), size)

    def rename(self, src: str, dst: str) -> None:
        os_dst = self._os_path(dst)
        os.replace(self._os_path(src), os_dst)
        _fsync_dir(os.path.dirname(os_dst))

    def delete(self, path: str) -> None:
        if not check_path(path):
            raise ValueError("refusing to delete the store root")
        os_path = self._os_path(path)
        if os.path.isdir(os_path) and not os.path.islink(os_path):
            shutil.rmtree(os_path)
        else:
            try:
                os.unlink(os_path)
            except FileNotFoundError:
                return
        _fsync_dir(os.path.dirname(os_path))

    def exists(self, path: str) -> bool:
        return os.path.exists(self._os_path(path))

    def take_over(self, directory: str) -> None:
        return None  # no leases: one process per data dir is enforced by its lock

    def create_exclusive(self, path: str) -> bool:
        os_path = self._os_path(path)
        try:
            os.close(os.open(os_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            return False
        _fsync_dir(os.path.dirname(os_path))  # the claim survives power loss
        return True

    def lock(self, path: str) -> FileLock:
        """Take an exclusive, non-blocking lock on `path` (created if missing).

        flock, not lockf: flock locks belong to the open file, so a second open in the same
        process conflicts too, and closing an unrelated descriptor does not drop the lock."""
        fd = os.open(self._os_path(path), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirLocked(f"{self._os_path(path)} is locked by another process") from None
        return FileLock(fd)


def _pread_fully(fd: int, offset: int, length: int) -> bytes:
    chunks = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break  # end of file: a short read is part of the contract
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def _fsync_dir(os_path: str) -> None:
    fd = os.open(os_path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
