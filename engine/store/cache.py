"""A block cache in front of a store's reads, inside the memory pool's budget.

Files are read in aligned blocks of `block_bytes`. Each run of blocks the cache lacks is one
store read. A block is kept only when it is whole (the file already reached its end), because
the files are append-only: a whole block never changes until the file is truncated, renamed
over or deleted, and those calls drop the file's blocks. Reads come from worker threads, so
the cache has its own lock; the pool decides what goes (least recently read first, across
blocks and memory tails) and calls `drop_oldest`.

Read-ahead, for consumers reading cold data in order (on HDFS every store read is a round
trip to a DataNode, about 10 ms for 7 MiB on the reference HDFS):
- Without an executor, a read that misses up to the end of what it asked for also reads the
  next READ_AHEAD_BLOCKS in the same store call, and its caller waits for them.
- With an executor (`read_ahead`), such a read takes only what it asked for and starts a
  stream on the file: READ_AHEAD_RUNS runs of READ_AHEAD_BLOCKS are read in the background,
  and each time a read reaches the last run started, one more is. The next fetches then find
  their blocks in memory while the current one is answered, and a read that needs a block of
  a run still being read waits for that run instead of reading the block again (and reads a
  run no background thread has started yet itself).
  Runs read with the store's `read_visible` where it has one (HDFS): bytes nobody asked for
  yet must not cost an active partition its writer.
  At most `ahead_bytes_max` bytes are read ahead and not read yet, in flight or held (a
  block read ahead and not read within AHEAD_UNREAD_S stops counting: its reader went
  away); past that a read falls back to reading ahead inline, as without an executor. A run
  that ends the file ends the stream; a miss at the end of a later read starts a new one.
- Blocks read ahead are used once: after the stream's reader has read past one, it goes to
  the front of the eviction order, so one cold scan does not push memory tails and blocks
  that other readers use out of the budget (the page cache's inactive list does the same for
  pages read once). The block the reader stopped in keeps its place: its next fetch starts
  there.
- Truncate, rename and delete drop the file's blocks and stream; a run of the file still
  being read is discarded when it completes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field

from .base import AppendFile, Store

logger = logging.getLogger(__name__)
BLOCK_BYTES = 256 * 1024
READ_AHEAD_BLOCKS = 28  # one read-ahead run: 7 MiB, near hdfs-native's fastest read size (measured)
READ_AHEAD_RUNS = 2  # runs a stream keeps started ahead of its reader
AHEAD_BYTES_MAX = 64 << 20  # read ahead and not read yet, over all streams (without an executor: unused)
STREAMS_MAX = 1024  # files whose sequential reading is followed
RUN_WAIT_S = 300.0  # longest a read waits for a run being read ahead before reading the block itself
USED_ONCE = 0.0  # the "last read" time of a block read ahead and read past: older than anything
AHEAD_UNREAD_S = 10.0  # a block read ahead and not read this long no longer counts against ahead_bytes_max


@dataclass(eq=False, slots=True)
class _Run:
    """Blocks first .. first + count - 1 of a file, being read in the background."""

    path: str
    first: int
    count: int
    done: threading.Event = field(default_factory=threading.Event)
    started: bool = False  # by a background thread, or by a read that needed it first
    stale: bool = False  # the file was truncated, renamed over or deleted meanwhile

    def holds(self, number: int) -> bool:
        return self.first <= number < self.first + self.count


@dataclass(slots=True)
class _Stream:
    """A file read in order: runs started up to block `end` (exclusive); a read that reaches
    block `trigger` (the first of the last run started) starts the next."""

    end: int
    trigger: int


def _joined(parts: list[bytes], start: int, length: int) -> bytes:
    """Bytes start .. start + length of the blocks `parts` put end to end, copied once."""
    if len(parts) == 1:
        return parts[0][start : start + length]
    views = [memoryview(part) for part in parts]
    views[0] = views[0][start:]
    excess = sum(len(view) for view in views) - length
    if excess > 0:
        views[-1] = views[-1][: len(views[-1]) - excess]
    return b"".join(views)


class CachedStore:
    def __init__(self, store: Store, on_grow: Callable[[], None] = lambda: None,
                 block_bytes: int = BLOCK_BYTES, monotonic: Callable[[], float] = time.monotonic,
                 read_ahead: Executor | None = None, ahead_bytes_max: int = AHEAD_BYTES_MAX) -> None:
        self.store = store
        self.monotonic = monotonic  # must be the memory pool's clock: both orders are compared
        self.slow_writes = getattr(store, "slow_writes", True)
        self.slow_reads = True  # served from memory when cached, but a miss is the store's read
        self.block_bytes = block_bytes
        self.ahead_bytes_max = ahead_bytes_max
        self._on_grow = on_grow
        self._executor = read_ahead
        self._read_visible: Callable[[str, int, int], bytes] = getattr(store, "read_visible", store.read)
        self._store_blocks: Callable[[str, int, int, int, bool], list[bytes]] | None = getattr(store, "read_blocks", None)
        self._lock = threading.Lock()
        self._blocks: OrderedDict[tuple[str, int], tuple[bytes, float]] = OrderedDict()
        self._held = 0
        self._streams: OrderedDict[str, _Stream] = OrderedDict()  # least recently advanced first
        self._runs: dict[str, list[_Run]] = {}
        # Blocks read ahead and not read yet, oldest first, with when they were read.
        self._unread_ahead: OrderedDict[tuple[str, int], float] = OrderedDict()
        self._ahead_bytes = 0  # runs in flight and blocks in _unread_ahead

    # -- the pool's side -------------------------------------------------------------------

    @property
    def bytes_held(self) -> int:
        return self._held

    def oldest_read(self) -> float | None:
        with self._lock:
            first = next(iter(self._blocks.values()), None)
        return first[1] if first else None

    def drop_oldest(self) -> int:
        with self._lock:
            if not self._blocks:
                return 0
            key, (data, _) = self._blocks.popitem(last=False)
            self._held -= len(data)
            self._no_longer_ahead(key, len(data))
            return len(data)

    # -- Store -------------------------------------------------------------------------------

    def read(self, path: str, offset: int, length: int) -> bytes:
        if length <= 0:
            return b""
        size = self.block_bytes
        first, last = offset // size, (offset + length - 1) // size
        parts: list[bytes] = []
        number = first
        missed_end = False
        while number <= last:
            cached = self._cached(path, number)
            if cached is None and self._wait_for_run(path, number):
                cached = self._cached(path, number)
            if cached is not None:
                parts.append(cached)
                number += 1
                continue
            missing = number + 1  # a run of missing blocks is read with one store call
            while missing <= last and not self._holds(path, missing):
                missing += 1
            missed_end = missing > last
            ahead = READ_AHEAD_BLOCKS if missed_end and not self._may_stream() else 0
            fetched = self._fetch(path, number, missing - number + ahead)
            wanted = fetched[: missing - number]
            parts += wanted
            if len(wanted) < missing - number or len(wanted[-1]) < size:
                missed_end = False  # end of file: nothing to read ahead
                break
            number = missing
        self._followed(path, first, last, missed_end)
        return _joined(parts, offset - first * size, length)

    def _cached(self, path: str, number: int) -> bytes | None:
        key = (path, number)
        with self._lock:
            found = self._blocks.get(key)
            if found is None:
                return None
            self._blocks[key] = (found[0], self.monotonic())
            self._blocks.move_to_end(key)
            return found[0]

    def _holds(self, path: str, number: int) -> bool:
        with self._lock:
            return (path, number) in self._blocks or self._run_holding(path, number) is not None

    def _fetch(self, path: str, number: int, count: int) -> list[bytes]:
        """Blocks number .. number + count - 1 read with one store call (fewer at the end of
        the file, the last one then short); the whole ones are kept."""
        return self._keep(path, number, self._read_blocks(path, number, count, visible=False), None)

    def _read_blocks(self, path: str, number: int, count: int, visible: bool) -> list[bytes]:
        """Blocks number .. number + count - 1 with one store call (`visible`: its
        `read_visible`), the last one short at the end of the file; [b""] past it. A store
        that can joins what it reads into blocks itself (HDFS: its packets), else what it
        returns is cut."""
        size = self.block_bytes
        if self._store_blocks is not None:
            return self._store_blocks(path, number * size, count * size, size, visible) or [b""]
        data = (self._read_visible if visible else self.store.read)(path, number * size, count * size)
        return [data[at : at + size] for at in range(0, len(data), size)] or [b""]

    def _keep(self, path: str, number: int, blocks: list[bytes], run: _Run | None) -> list[bytes]:
        """Keep the whole ones of `blocks` (read from block `number` on), unless `run` went
        stale while they were read."""
        size = self.block_bytes
        now = self.monotonic()
        grew = False
        with self._lock:
            if run is not None:
                self._ahead_bytes -= run.count * size
            for i, block in enumerate(blocks):
                key = (path, number + i)
                if len(block) != size or key in self._blocks or (run is not None and run.stale):
                    continue
                self._blocks[key] = (block, now)
                self._held += size
                grew = True
                if run is not None:
                    self._unread_ahead[key] = now
                    self._ahead_bytes += size
        if grew:
            self._on_grow()
        return blocks

    # -- read-ahead streams (see the module header) ------------------------------------------

    def _may_stream(self) -> bool:
        """Room for another run read ahead in the background."""
        if self._executor is None:
            return False
        with self._lock:
            return self._room_for_run()

    def _room_for_run(self) -> bool:
        """Lock held."""
        run_bytes = READ_AHEAD_BLOCKS * self.block_bytes
        if self._ahead_bytes + run_bytes > self.ahead_bytes_max:
            self._forget_unread(self.monotonic() - AHEAD_UNREAD_S)
        return self._ahead_bytes + run_bytes <= self.ahead_bytes_max

    def _forget_unread(self, before: float) -> None:
        """Lock held: blocks read ahead before `before` and still not read stop counting."""
        while self._unread_ahead:
            key, when = next(iter(self._unread_ahead.items()))
            if when >= before:
                break
            self._no_longer_ahead(key, self.block_bytes)

    def _followed(self, path: str, first: int, last: int, missed_end: bool) -> None:
        """After a read of blocks first .. last: mark what it read past as used once, and
        start the runs its stream needs next (a new stream if the read missed at its end)."""
        if self._executor is None:
            return
        with self._lock:
            for number in range(first, last):  # `last`: the next fetch starts inside it
                self._used_once((path, number))
            stream = self._streams.get(path)
            if stream is not None and stream.trigger <= last < stream.end:
                runs = [self._next_run(path, stream)]
            elif missed_end:
                stream = self._streams[path] = _Stream(end=last + 1, trigger=last + 1)
                runs = [self._next_run(path, stream) for _ in range(READ_AHEAD_RUNS)]
            else:
                return
            self._streams.move_to_end(path)
            while len(self._streams) > STREAMS_MAX:
                self._streams.popitem(last=False)
        for run in runs:
            if run is not None:
                self._executor.submit(self._read_run, run)

    def _next_run(self, path: str, stream: _Stream) -> _Run | None:
        """Lock held: the stream's next run, registered as in flight; None without room."""
        if not self._room_for_run():
            return None
        run = _Run(path, stream.end, READ_AHEAD_BLOCKS)
        stream.trigger, stream.end = stream.end, stream.end + READ_AHEAD_BLOCKS
        self._runs.setdefault(path, []).append(run)
        self._ahead_bytes += run.count * self.block_bytes
        return run

    def _read_run(self, run: _Run) -> None:
        """Background: read a run, unless a read needed it before it came up."""
        if self._claim(run):
            self._read_claimed(run)

    def _claim(self, run: _Run) -> bool:
        with self._lock:
            claimed, run.started = not run.started, True
            return claimed

    def _read_claimed(self, run: _Run) -> None:
        """Read a run and keep its blocks; one that ends the file ends its stream."""
        size = self.block_bytes
        ended = True
        try:
            blocks = self._keep(run.path, run.first, self._read_blocks(run.path, run.first, run.count, visible=True), run)
            ended = len(blocks) < run.count or len(blocks[-1]) < size
        except Exception as error:  # noqa: BLE001 - a reader that needs the blocks reads them itself
            logger.debug("reading ahead in %s failed: %s", run.path, error)
            with self._lock:
                self._ahead_bytes -= run.count * size
        finally:
            with self._lock:
                runs = self._runs.get(run.path, [])
                if run in runs:
                    runs.remove(run)
                if not runs:
                    self._runs.pop(run.path, None)
                if ended and not run.stale:
                    self._streams.pop(run.path, None)
            run.done.set()

    def _wait_for_run(self, path: str, number: int) -> bool:
        """Wait for the run reading block `number`, if one is (or read it now, if no
        background thread has started it yet); True if there was one."""
        with self._lock:
            run = self._run_holding(path, number)
        if run is None:
            return False
        if self._claim(run):
            self._read_claimed(run)
        else:
            run.done.wait(RUN_WAIT_S)
        return True

    def _run_holding(self, path: str, number: int) -> _Run | None:
        """Lock held."""
        return next((run for run in self._runs.get(path, ()) if run.holds(number)), None)

    def _used_once(self, key: tuple[str, int]) -> None:
        """Lock held: a block read ahead has been read past; it goes first when memory is needed."""
        if key not in self._unread_ahead:
            return
        data, _ = self._blocks[key]
        self._blocks[key] = (data, USED_ONCE)
        self._blocks.move_to_end(key, last=False)
        self._no_longer_ahead(key, len(data))

    def _no_longer_ahead(self, key: tuple[str, int], size: int) -> None:
        """Lock held."""
        if self._unread_ahead.pop(key, None) is not None:
            self._ahead_bytes -= size

    def _forget(self, prefix: str) -> None:
        def inside(path: str) -> bool:
            return path == prefix or path.startswith(prefix + "/")

        with self._lock:
            for key in [key for key in self._blocks if inside(key[0])]:
                size = len(self._blocks.pop(key)[0])
                self._held -= size
                self._no_longer_ahead(key, size)
            for path in [path for path in self._streams if inside(path)]:
                del self._streams[path]
            for path, runs in self._runs.items():
                if inside(path):
                    for run in runs:
                        run.stale = True

    def mkdir(self, path: str) -> None:
        self.store.mkdir(path)

    def list(self, path: str) -> list[str]:
        return self.store.list(path)

    def size(self, path: str) -> int:
        return self.store.size(path)

    def open_append(self, path: str) -> AppendFile:
        return self.store.open_append(path)

    def truncate(self, path: str, size: int) -> None:
        self._forget(path)
        self.store.truncate(path, size)

    def rename(self, src: str, dst: str) -> None:
        self._forget(src)
        self._forget(dst)
        self.store.rename(src, dst)

    def delete(self, path: str) -> None:
        self._forget(path)
        self.store.delete(path)

    def exists(self, path: str) -> bool:
        return self.store.exists(path)

    def take_over(self, directory: str) -> None:
        self.store.take_over(directory)

    def create_exclusive(self, path: str) -> bool:
        return self.store.create_exclusive(path)
