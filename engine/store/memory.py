"""In-memory Store for tests: same contract as LocalStore, nothing touches the disk.

Directories are explicit (mkdir), as on a real file system, so code that forgets a mkdir
fails here as it would on disk.
"""

from .base import check_path


class MemoryAppendFile:
    def __init__(self, data: bytearray) -> None:
        self._data = data
        self._closed = False

    @property
    def size(self) -> int:
        return len(self._data)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self._closed, "write after close"
        self._data += data

    def sync(self) -> None:
        assert not self._closed, "sync after close"

    def close(self) -> None:
        self._closed = True

    def abandon(self) -> None:
        self._closed = True


class MemoryStore:
    slow_writes = False
    slow_reads = False

    def __init__(self) -> None:
        self._files: dict[str, bytearray] = {}
        self._dirs: set[str] = {""}

    @staticmethod
    def _key(path: str) -> str:
        return "/".join(check_path(path))

    def _parent_exists(self, key: str) -> bool:
        return key.rpartition("/")[0] in self._dirs

    def _file(self, path: str) -> bytearray:
        key = self._key(path)
        if key not in self._files:
            raise FileNotFoundError(path)
        return self._files[key]

    def mkdir(self, path: str) -> None:
        parts = check_path(path)
        for end in range(1, len(parts) + 1):
            key = "/".join(parts[:end])
            if key in self._files:
                raise FileExistsError(path)
            self._dirs.add(key)

    def list(self, path: str) -> list[str]:
        key = self._key(path)
        if key not in self._dirs:
            return []
        prefix = key + "/" if key else ""
        children = (k for k in (*self._files, *self._dirs) if k.startswith(prefix) and k != key)
        names = {k[len(prefix) :].split("/")[0] for k in children}
        return sorted(names)

    def size(self, path: str) -> int:
        return len(self._file(path))

    def read(self, path: str, offset: int, length: int) -> bytes:
        return bytes(self._file(path)[offset : offset + length])

    def open_append(self, path: str) -> MemoryAppendFile:
        key = self._key(path)
        if not self._parent_exists(key) or key in self._dirs:
            raise FileNotFoundError(path)
        return MemoryAppendFile(self._files.setdefault(key, bytearray()))

    def truncate(self, path: str, size: int) -> None:
        data = self._file(path)
        if size <= len(data):
            del data[size:]
        else:
            data += bytes(size - len(data))  # like os.truncate: grow with zeros

    def rename(self, src: str, dst: str) -> None:
        src_key, dst_key = self._key(src), self._key(dst)
        if src_key in self._dirs:
            self._rename_dir(src_key, dst_key)
            return
        data = self._file(src)
        if not self._parent_exists(dst_key):
            raise FileNotFoundError(dst)
        del self._files[src_key]
        self._files[dst_key] = data

    def _rename_dir(self, src_key: str, dst_key: str) -> None:
        if dst_key in self._files or self.list(dst_key) or not self._parent_exists(dst_key):
            raise OSError(f"cannot rename directory {src_key!r} to {dst_key!r}")
        def moved(key: str) -> str:
            return dst_key + key[len(src_key) :] if _inside(key, src_key) else key

        self._dirs = {moved(k) for k in self._dirs}
        self._files = {moved(k): v for k, v in self._files.items()}

    def delete(self, path: str) -> None:
        key = self._key(path)
        if key == "":
            raise ValueError("refusing to delete the store root")
        self._files = {k: v for k, v in self._files.items() if not _inside(k, key)}
        self._dirs = {k for k in self._dirs if not _inside(k, key)}

    def exists(self, path: str) -> bool:
        key = self._key(path)
        return key in self._files or key in self._dirs

    def take_over(self, directory: str) -> None:
        return None  # no leases: one process per data dir is enforced by its lock

    def create_exclusive(self, path: str) -> bool:
        key = self._key(path)
        if not self._parent_exists(key):
            raise FileNotFoundError(path)
        if key in self._dirs:
            return False
        created = bytearray()
        return self._files.setdefault(key, created) is created  # one atomic step under the GIL


def _inside(key: str, top: str) -> bool:
    """True if `key` is `top` itself or lies below it."""
    return key == top or key.startswith(top + "/")
