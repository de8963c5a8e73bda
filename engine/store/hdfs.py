"""Store on HDFS through hdfs-native (a pure client: Rust, no JVM).

Store paths map to `<root>/<path>` on the cluster named by `url` ("hdfs://host:port").

What each call gives, and why:
- `AppendFile.write` passes the bytes to the writer and then calls `hsync`, the only flush
  hdfs-native has (it has no hflush): the bytes leave the process at once, the DataNodes
  fsync them and the NameNode records the new length. So every write is durable when it
  returns; `sync` has nothing left to do. The price is one pipeline round trip per write.
- hdfs-native's reader sees only the finished blocks of a file that is open for writing
  (its length comes from the NameNode's located blocks, and it does not ask the DataNode for
  the length of the block being written); a file reopened for append is open again. So
  `read` of bytes past that point, on a file this store itself has open, closes the HDFS
  writer first, and the next `write` reopens the file for append. Another process cannot
  read an open file's unfinished last block.
  hdfs-native's close ends the last block at once (the NameNode then counts it in the
  length readers see, 5-12 ms after the close began on the reference HDFS) but then usually
  waits 500 ms before asking again to complete the file, because the DataNode has not
  reported the block yet. So the close runs on a thread of its own, and the read goes on as
  soon as a new reader sees the bytes written (measured: a cold consumer's one read past that
  point took 0.5 s, a third of the whole 100 MB read).
- `read_visible` reads only what a reader sees now and never closes a writer nor recovers a
  lease: for the block cache's read-ahead, which must not cost an active partition its
  writer for bytes nobody asked for yet.
- `read` keeps a reader per segment log (the most recently read READERS_KEPT of them):
  opening one asks the NameNode for the block locations, which cost more than a block-sized
  read itself.
  A read past a kept reader's end opens a new one (the file may have grown); this store's
  own truncate, rename, delete and take-over drop the readers of what they changed.
- `truncate`: hdfs-native has no truncate. The kept prefix is copied to a sibling file,
  hsynced, closed and renamed over the original (HDFS rename with OVERWRITE replaces the
  destination atomically on the NameNode), so a crash leaves the old or the new file,
  never a mix; it costs a copy of the kept bytes. Growing pads with zeros, as on local disk.
- `rename` is HDFS rename with OVERWRITE: one atomic NameNode operation that replaces a
  file or an empty directory at the destination.
- `create_exclusive` is a create without OVERWRITE: the NameNode refuses it if the path
  exists (or another client is creating it), atomically, so it works as a claim.
- Directory changes are NameNode edits, logged before the call returns.
- There is no `lock`: HDFS leases fence writers per file, not per process.
- A DataNode reserves disk for every block being written, and refuses new blocks once the
  reservations exceed its free space ("could only be written to 0 of the 1 minReplication
  nodes"). hdfs-native asks for a new block without saying its size, so the DataNode
  reserves its own dfs.blocksize (128 MiB by default), whatever the file's block size; an
  append to a partly written block reserves nothing (the DataNode reserves the size the
  client names, less what the block holds). Measured on the reference HDFS with 66 GB free
  (two volumes on one disk): the 964th new block at once was refused. So OpenWriters
  bounds the writers that hold a block they started (FRESH_BLOCKS_MAX): beyond it, the
  least recently written of them close in the background, which hands the reservation
  back, and their next write reopens the file for append.
- After a writer failed (a DataNode or the NameNode went away) or its process was killed,
  the NameNode still holds that writer's lease on the file: append refuses it, and readers
  do not see its unfinished last block. Nor does the NameNode's length tell: a writer killed
  before its first hsync leaves it at 0 while the DataNodes hold what it streamed. So the
  first `size`, `truncate` or `read` past what a reader sees, of a file this store has no
  writer for, asks for lease recovery, which closes the file at the length the DataNodes
  agree on (a few seconds on a test cluster; one NameNode call if the file was closed);
  `open_append` does too if the lease is still held.
- Read-only mode (`read_only=True`), for readers in other processes (engine/log/reader.py):
  nothing is written and no lease is ever recovered, so a live broker's open files are never
  closed under it. The price is the bound above: a file some writer has open is seen only up
  to its last finished block (sealed segments whole, the active one up to a multiple of
  dfs.blocksize, often none of it), and `size` gives that visible length, not the
  NameNode's. Writing calls raise PermissionError.
- While the NameNode is unreachable, hdfs-native retries each call for about three minutes
  before it fails; a NameNode or DataNode that is frozen (connections open, nothing answered)
  can hold a call forever. The engine calls the store only from worker threads whose jobs have
  deadlines (engine/store/workers.py): a call past its deadline is abandoned and its file
  reopened by the next use.

hdfs-native raises FileNotFoundError/FileExistsError for those cases and RuntimeError for
other NameNode errors; the latter are re-raised as OSError so callers see one family.
"""

from __future__ import annotations

import concurrent.futures
import functools
import heapq
import itertools
import logging
import posixpath
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar, cast

from hdfs_native import Client, FileReader, FileWriter, WriteOptions

from ..clock import Clock, SystemClock
from .background import in_background
from .base import check_path

COPY_CHUNK_BYTES = 8 << 20  # truncate copies in pieces of this size
logger = logging.getLogger(__name__)
LEASE_RECOVERY_S = 120.0  # longest open_append waits for the NameNode to recover a lease
LEASE_POLL_S = 0.1
# The NameNode places a new block only where the free space, less a block of the file's size
# for every block still being written there, holds one more (besides the DataNode's own
# reservation, see the module header): with HDFS's default 128 MB, 445 of 1,000 new files
# at once were refused on the reference HDFS, with 16 MiB none. A 1 GiB segment spans 64 blocks.
BLOCK_BYTES = 16 << 20
WRITERS_MAX = 2000  # open HDFS writers; a DataNode serves 4,096 pipelines by default, for all clients
# Writers holding a block they started, each holding a whole DataNode block size of reserved
# disk (see the module header): 256 x 128 MiB = 32 GiB.
FRESH_BLOCKS_MAX = 256
ADMIT_WAIT_S = 20.0  # the longest a write waits to start a block (a flush is abandoned after 30 s)
WRITER_IDLE_S = 60.0  # an HDFS writer unused this long is closed
# Writers closed at once. A close mostly sleeps: hdfs-native retries the NameNode's
# complete() every 500 ms until the DataNode has reported the block, so a closing thread
# closes about two files a second, and 5,000 partitions over 2,000 writers close hundreds.
CLOSING_THREADS = 64
# Beyond `most` open writers, this share more are closed in the same pass, so that a stream
# of reopens costs one pass (a look at every open writer) per batch of closes, not per close.
CLOSE_BATCH_SHARE = 1 / 64
SWEEP_S = 1.0
VISIBLE_POLL_S = (0.005, 0.05)  # while such a close runs: first and longest pause between looks at the length
READERS_KEPT = 256  # files whose readers are kept open (one NameNode call saved per read)
# Readers are kept for segment logs only: they only grow, and are cut only by this store's
# truncate or by a node taking their partition over (whose take-over drops them here when
# the partition comes back). Other files (the catalog, sessions, checkpoints) are replaced by
# renames from any node at any time, and a kept reader would read the replaced file's blocks.
KEPT_READER_SUFFIX = ".log"
_ABANDONED: list[FileWriter] = []  # broken writers, kept so that nothing closes or drops them
Pieces = list[bytes]  # what a read returns, in order (in HdfsStore, `list` names its method)

F = TypeVar("F", bound=Callable[..., object])


def _os_errors(method: F) -> F:
    """Re-raise hdfs-native's RuntimeError (a NameNode or DataNode error) as OSError."""

    @functools.wraps(method)
    def wrapper(*args: object, **kwargs: object) -> object:
        try:
            return method(*args, **kwargs)
        except OSError:
            raise
        except RuntimeError as exc:
            raise OSError(f"HDFS: {str(exc).splitlines()[0] if str(exc) else exc!r}") from exc

    return cast(F, wrapper)


def _read_range(reader: FileReader, offset: int, length: int, piece_bytes: int = 0) -> Pieces:
    """`length` bytes from `offset`, taken as the DataNode's 64 KiB packets and joined once:
    twice as fast as hdfs-native's read_range for the block cache's 7 MiB runs (measured on
    the reference HDFS: 500-600 MB/s against 270-320 on a loaded machine, 995 against 797 on
    a quiet one). Joined into one piece, or into pieces of `piece_bytes` (the last one
    shorter): the block cache's blocks, which cutting one piece would copy a second time."""
    packets = reader.read_range_stream(offset, length)
    if not piece_bytes:
        return [b"".join(packets)]
    pieces: Pieces = []
    pending: list[memoryview] = []
    held = 0
    for packet in packets:
        view = memoryview(packet)
        while view:
            take = min(len(view), piece_bytes - held)
            pending.append(view[:take])
            held += take
            view = view[take:]
            if held == piece_bytes:
                pieces.append(b"".join(pending))
                pending, held = [], 0
    if pending:
        pieces.append(b"".join(pending))
    return pieces


class HdfsAppendFile:
    """One file open for appending. Its HDFS writer may be released between writes (the
    store's OpenWriters closes idle ones) and is reopened by the next write; a lock keeps a
    release from running into a write."""

    def __init__(self, client: Client, hdfs_path: str, writer: FileWriter, size: int,
                 writers: OpenWriters, block_bytes: int) -> None:
        self._client = client
        self._path = hdfs_path
        self._writer: FileWriter | None = writer  # None while released
        self._size = size
        self._closed = False
        self._lock = threading.Lock()
        self._writers = writers
        self.block_bytes = block_bytes
        self.fresh = False  # the writer holds a block it started (the DataNode reserved a whole block)
        self.last_used: float | None = None  # OpenWriters' clock, at the last write (or open)
        self.mean_gap: float | None = None  # between writes, averaged (OpenWriters keeps both)
        writers.used(self)

    @property
    def size(self) -> int:
        return self._size

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def open(self) -> bool:
        """Holds an HDFS writer (a DataNode pipeline) now."""
        return self._writer is not None

    @_os_errors
    def write(self, data: bytes | bytearray | memoryview) -> None:
        starts_block = self._starts_block(len(data))  # writes to one file come one at a time
        if starts_block and not self.fresh:
            self._writers.admit(self)  # waits while the DataNode's reservations are at the bound
        with self._lock:
            try:
                assert not self._closed, "write after close"  # also if closed while admit() waited
                writer = self._writer
                if writer is None:
                    writer = self._writer = self._client.append(self._path)
                writer.write(data)
                writer.hsync()  # hand the bytes over now; also makes them durable
            except BaseException:
                self.abandon()
                raise
            self._size += len(data)
            self.fresh = self.fresh or starts_block
        self._writers.used(self)

    def _starts_block(self, count: int) -> bool:
        """Writing `count` more bytes makes the writer ask for a new block: the file ends at
        a block boundary, or the bytes cross one."""
        return count > 0 and (self._size % self.block_bytes == 0
                              or self._size // self.block_bytes != (self._size + count - 1) // self.block_bytes)

    def abandon(self) -> None:
        """Never close a writer whose pipeline failed: hdfs-native would complete the file
        at the length that writer knows, which can be 0. The writer object is kept alive
        (so it is not dropped either) and the file is left to lease recovery. Takes no
        lock: a write that hangs holds it, and abandoning is how the engine gives up on one."""
        self._closed = True
        if self._writer is not None:
            _ABANDONED.append(self._writer)
            self._writer = None
        self._writers.gone(self)

    def sync(self) -> None:
        assert not self._closed, "sync after close"
        # every write was hsynced already

    @_os_errors
    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._release()
        self._writers.gone(self)

    @_os_errors
    def release(self) -> None:
        """Close the HDFS writer (readers then see every byte written, see the module
        header, and the DataNode frees its pipeline); the next write reopens the file for
        append."""
        with self._lock:
            self._release()
        self._writers.gone(self)

    def _release(self) -> None:
        writer, self._writer = self._writer, None
        self.fresh = False
        if writer is not None:
            writer.close()


class OpenWriters:
    """Bounds the HDFS writers a store holds open: each is a pipeline to a DataNode, and a
    DataNode serves at most dfs.datanode.max.transfer.threads of them (4,096 by default) for
    every client together. A writer unused for `idle_s` is closed, and beyond `most` open
    writers the least recently used are closed, by a thread of their own (closing a file on
    HDFS waits for the NameNode to complete its last block, about half a second); the next
    write reopens the file for append (tens of milliseconds). Beyond `fresh_most` writers
    holding a block they started (each a whole block of disk reserved on the DataNode, see
    the module header), the least recently used of those close the same way.

    Which writers close beyond `most`: those expected to be written again last
    (_next_write_in). Least recently used alone closes exactly the wrong ones when more files
    take turns than writers are open: 5,000 partitions each written every few seconds
    through 2,000 writers are flushed round after round in the same order, so the least
    recently written is always the next one due, and every write reopened its file (on the
    reference HDFS 33-60 ms on a flush thread, against 3-12 ms for a write to an open one).
    Expecting each file's next write one mean gap after its last, a steady set of files keeps
    its writers and the others take turns on the rest; a busy file, with its short gaps,
    stays open, and a file written once, or no longer at its pace, ages out as under least
    recently used.

    A reservation lasts until its writer's close returns, and closes run about two a second
    per closing thread, while flushes can start hundreds of blocks a second (the first
    record to each of 5,000 new partitions). So a write about to start a block is admitted
    only while the writers holding one, those still closing and those admitted count fewer
    than `fresh_most`; otherwise it waits (at most ADMIT_WAIT_S) for a close to return.
    Without that wait, 5,000 partitions' first records overran the reference DataNode's
    free disk ("Out of space: the volume with the most available space ... is less than the
    block size") and hundreds of flushes failed and were retried."""

    def __init__(self, most: int, idle_s: float, clock: Clock, fresh_most: int = FRESH_BLOCKS_MAX) -> None:
        self.most = most
        self.idle_s = idle_s
        self.fresh_most = fresh_most
        self._clock = clock
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)  # notified when a reservation ends
        self._files: OrderedDict[HdfsAppendFile, None] = OrderedDict()  # open, least recently used first
        self._fresh: OrderedDict[HdfsAppendFile, None] = OrderedDict()  # of those, holding a started block
        self._admitted: set[HdfsAppendFile] = set()  # about to start a block (admit() returned)
        self._closing_fresh = 0  # handed to the closers while holding a started block
        self._waiting = 0  # writes waiting in admit()
        self._closing = ThreadPoolExecutor(CLOSING_THREADS, "martlet-hdfs-close")
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    def admit(self, file: HdfsAppendFile) -> None:
        """Before a write that starts a block: wait until fewer than `fresh_most` writers hold
        (or are closing, or are about to start) one, closing the least recently used of those
        meanwhile. Past ADMIT_WAIT_S the write goes ahead anyway (the DataNode refuses it if
        its disk is really full, and the flush is retried)."""
        deadline = time.monotonic() + ADMIT_WAIT_S  # a thread's real wait, whatever the clock
        with self._lock:
            self._waiting += 1
            try:
                while self._reserved() >= self.fresh_most:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        logger.warning("%d HDFS writers hold or are closing a started block: %s starts one "
                                       "without waiting longer", self._reserved(), file._path)
                        break
                    self._wake.set()
                    self._room.wait(min(remaining, SWEEP_S))
            finally:
                self._waiting -= 1
            self._admitted.add(file)

    def _reserved(self) -> int:
        """Lock held: the blocks whose reservation is held or about to be."""
        return len(self._fresh) + len(self._admitted) + self._closing_fresh

    def used(self, file: HdfsAppendFile) -> None:
        with self._lock:
            now = self._clock.monotonic()
            if file.last_used is not None:
                gap = now - file.last_used
                file.mean_gap = gap if file.mean_gap is None else (file.mean_gap + gap) / 2
            file.last_used = now
            self._admitted.discard(file)
            self._files[file] = None
            self._files.move_to_end(file)
            if file.fresh:
                self._fresh[file] = None
                self._fresh.move_to_end(file)
            over = len(self._files) > self.most or len(self._fresh) > self.fresh_most
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="martlet-hdfs-writers", daemon=True)
                self._thread.start()
        if over:
            self._wake.set()

    def gone(self, file: HdfsAppendFile) -> None:
        with self._lock:
            self._files.pop(file, None)
            self._admitted.discard(file)
            if file in self._fresh:
                del self._fresh[file]
                self._room.notify_all()

    def count(self) -> int:
        with self._lock:
            return len(self._files)

    def _run(self) -> None:
        while True:
            self._wake.wait(SWEEP_S)  # a periodic sweep; an excess of writers wakes it at once
            self._wake.clear()
            for file, fresh in self._to_close():
                self._closing.submit(self._close_quietly, file, fresh)

    def _to_close(self) -> list[tuple[HdfsAppendFile, bool]]:
        """The idle writers, those expected to be written again last beyond `most` (and a
        batch more, CLOSE_BATCH_SHARE), and the least recently used holding a started block
        beyond `fresh_most` (counting those admitted and the writes waiting to start one,
        not those already closing), taken off the lists; each with whether it holds a
        started block."""
        now = self._clock.monotonic()
        with self._lock:
            chosen: list[tuple[HdfsAppendFile, bool]] = []
            for file in self._files:  # least recently used first
                if now - cast(float, file.last_used) < self.idle_s:
                    break
                chosen.append((file, file in self._fresh))
            excess = len(self._files) - len(chosen) - self.most
            if excess > 0:
                rest = itertools.islice(self._files, len(chosen), None)
                batch = excess + int(self.most * CLOSE_BATCH_SHARE)
                latest = heapq.nlargest(batch, rest, key=lambda file: _next_write_in(file, now))
                chosen += [(file, file in self._fresh) for file in latest]
            for file, _ in chosen:
                del self._files[file]
                self._fresh.pop(file, None)
            while self._fresh and len(self._fresh) + len(self._admitted) + self._waiting > self.fresh_most:
                file, _ = self._fresh.popitem(last=False)
                self._files.pop(file, None)
                chosen.append((file, True))
            self._closing_fresh += sum(fresh for _, fresh in chosen)
            return chosen

    def _close_quietly(self, file: HdfsAppendFile, fresh: bool) -> None:
        try:
            file.release()
        except OSError as error:  # the next write finds out again, and its flush retries
            logger.warning("closing an idle HDFS writer of %s failed: %s", file._path, error)
        finally:
            if fresh:
                with self._lock:
                    self._closing_fresh -= 1
                    self._room.notify_all()


def _next_write_in(file: HdfsAppendFile, now: float) -> float:
    """How soon an open `file` is expected to be written again: one mean gap after its last
    write; a file quiet for longer than that (or written once) has lost its pace, and the
    longer it is quiet the later its next write is taken to be."""
    quiet_s = now - cast(float, file.last_used)
    gap = file.mean_gap
    return gap - quiet_s if gap is not None and quiet_s < gap else quiet_s


class HdfsStore:
    slow_writes = True
    slow_reads = True

    def __init__(self, url: str, root: str, read_only: bool = False, clock: Clock | None = None,
                 writers_max: int = WRITERS_MAX, writer_idle_s: float = WRITER_IDLE_S,
                 block_bytes: int = BLOCK_BYTES) -> None:
        if not root.startswith("/"):
            raise ValueError(f"HDFS root must be absolute: {root!r}")
        self.url = url
        self.root = posixpath.normpath(root)
        self.read_only = read_only
        self.block_bytes = block_bytes
        self._clock = clock or SystemClock()
        self._client = Client(url)
        self._writers: weakref.WeakValueDictionary[str, HdfsAppendFile] = (
            weakref.WeakValueDictionary()
        )
        self._settled: set[str] = set()  # paths known closed since this store last opened them
        self.open_writers = OpenWriters(writers_max, writer_idle_s, self._clock)
        self._readers: OrderedDict[str, FileReader] = OrderedDict()  # most recently read last
        self._readers_lock = threading.Lock()  # reads come from several worker threads
        if not read_only:
            self._client.mkdirs(self.root, create_parent=True)

    def _options(self, overwrite: bool) -> WriteOptions:
        """Files are created with this store's block size (see BLOCK_BYTES)."""
        options = WriteOptions(overwrite=overwrite, create_parent=False)
        options.block_size = self.block_bytes
        return options

    def _hdfs_path(self, path: str) -> str:
        return posixpath.join(self.root, *check_path(path))

    def _writable(self, path: str) -> str:
        if self.read_only:
            raise PermissionError(f"HDFS store opened read-only: cannot change {path!r}")
        return self._hdfs_path(path)

    @_os_errors
    def mkdir(self, path: str) -> None:
        self._writable(path)
        self._client.mkdirs(self._hdfs_path(path), create_parent=True)

    @_os_errors
    def list(self, path: str) -> list[str]:
        hdfs_path = self._hdfs_path(path)
        try:
            if not self._client.get_file_info(hdfs_path).isdir:
                return []
            return sorted(posixpath.basename(s.path) for s in self._client.list_status(hdfs_path))
        except FileNotFoundError:
            return []

    @_os_errors
    def size(self, path: str) -> int:
        hdfs_path = self._hdfs_path(path)
        if self.read_only:
            return int(self._client.read(hdfs_path).size)  # what a reader sees: no lease recovery
        own = self._writers.get(hdfs_path)
        if own is not None and not own.closed:
            return own.size
        self._whole_reader(hdfs_path)  # a dead writer's file is recovered first: its length may change
        return int(self._client.get_file_info(hdfs_path).length)

    def _whole_reader(self, hdfs_path: str, closed: bool = False) -> FileReader:
        """A reader that sees every byte of the file: this store's own writer is released if
        the NameNode counts more than a reader sees (`closed`: and its close waited for, as
        before a rename over the file), and a file some other (dead or broken) writer may have
        left open is recovered first, once."""
        own = self._writers.get(hdfs_path)
        if own is None or own.closed:
            if hdfs_path not in self._settled:
                self._recover_lease(hdfs_path)
                self._settled.add(hdfs_path)
            return self._client.read(hdfs_path)
        reader = self._client.read(hdfs_path)
        if reader.size >= self._client.get_file_info(hdfs_path).length:
            return reader
        if closed:
            own.release()
            return self._client.read(hdfs_path)
        return self._reader_once_released(own, hdfs_path)

    def _reader_once_released(self, own: HdfsAppendFile, hdfs_path: str) -> FileReader:
        """Release `own` on a thread of its own and return a reader as soon as one sees every
        byte written, without waiting out the rest of the close (see the module header)."""
        written = own.size  # every write was hsynced, and a write waits for the release
        closing = in_background(own.release, "martlet-hdfs-release")
        pause, longest = VISIBLE_POLL_S
        while not closing.done():
            reader = self._client.read(hdfs_path)
            if reader.size >= written:
                return reader
            concurrent.futures.wait([closing], timeout=pause)
            pause = min(pause * 2, longest)
        closing.result()  # a failed close raises here, as it did when the read closed it itself
        return self._client.read(hdfs_path)

    @_os_errors
    def read(self, path: str, offset: int, length: int) -> bytes:
        return self._read(self._hdfs_path(path), offset, length, whole=not self.read_only)[0]

    @_os_errors
    def read_visible(self, path: str, offset: int, length: int) -> bytes:
        """Up to `length` bytes from `offset` of what a reader sees now: shorter than `read`
        past the finished blocks of a file some writer has open, for which no writer is
        released and no lease recovered (see the module header)."""
        return self._read(self._hdfs_path(path), offset, length, whole=False)[0]

    @_os_errors
    def read_blocks(self, path: str, offset: int, length: int, block_bytes: int, visible: bool) -> Pieces:
        """What `read` (`visible`: `read_visible`) returns, as pieces of `block_bytes` (the
        last one shorter; none at the end of the file): for the block cache."""
        whole = not (visible or self.read_only)
        return self._read(self._hdfs_path(path), offset, length, whole, block_bytes)

    def _read(self, hdfs_path: str, offset: int, length: int, whole: bool, piece_bytes: int = 0) -> Pieces:
        kept = self._kept_reader(hdfs_path)
        if kept is not None and offset + length <= kept.size:
            try:
                return _read_range(kept, offset, length, piece_bytes)
            except RuntimeError:  # replaced after all (its blocks are gone): read it afresh
                self._drop_readers(hdfs_path)
        reader = self._client.read(hdfs_path)
        if whole and offset + length > reader.size:
            reader = self._whole_reader(hdfs_path)
        self._keep_reader(hdfs_path, reader)
        count = min(length, reader.size - offset)  # reading past the end panics in hdfs-native
        if count > 0:
            return _read_range(reader, offset, count, piece_bytes)
        return [] if piece_bytes else [b""]

    def _kept_reader(self, hdfs_path: str) -> FileReader | None:
        with self._readers_lock:
            reader = self._readers.get(hdfs_path)
            if reader is not None:
                self._readers.move_to_end(hdfs_path)
            return reader

    def _keep_reader(self, hdfs_path: str, reader: FileReader) -> None:
        """Keep a file's reader for its next reads: opening one asks the NameNode where the
        blocks are, which cost more than the read itself for a cold consumer's block-sized
        reads. Not in read-only mode: another process may replace a file (truncate renames
        a copy over it), and only this store's own rename or delete drops a kept reader."""
        if self.read_only or not hdfs_path.endswith(KEPT_READER_SUFFIX):
            return
        with self._readers_lock:
            self._readers[hdfs_path] = reader
            self._readers.move_to_end(hdfs_path)
            while len(self._readers) > READERS_KEPT:
                self._readers.popitem(last=False)

    @_os_errors
    def open_append(self, path: str) -> HdfsAppendFile:
        hdfs_path = self._writable(path)
        try:
            status = self._client.get_file_info(hdfs_path)
        except FileNotFoundError:
            writer, size = self._client.create(hdfs_path, self._options(overwrite=False)), 0
        else:
            if status.isdir:
                raise IsADirectoryError(path)
            writer = self._append(hdfs_path)
            size = int(self._client.get_file_info(hdfs_path).length)
        file = HdfsAppendFile(self._client, hdfs_path, writer, size, self.open_writers, self.block_bytes)
        self._writers[hdfs_path] = file
        self._settled.discard(hdfs_path)  # open again: a writer that breaks leaves it open
        return file

    def _append(self, hdfs_path: str) -> FileWriter:
        try:
            return self._client.append(hdfs_path)
        except FileExistsError as error:
            if "lease" not in str(error):
                raise
        self._recover_lease(hdfs_path)
        return self._client.append(hdfs_path)

    def _recover_lease(self, hdfs_path: str) -> None:
        """Have the NameNode close a file some writer left open (this client's broken writer,
        or a killed process's), at the length the DataNodes agree on."""
        deadline = self._clock.monotonic() + LEASE_RECOVERY_S
        while not self._client.recover_lease(hdfs_path):
            if self._clock.monotonic() > deadline:
                raise OSError(f"HDFS: lease recovery of {hdfs_path} did not finish in {LEASE_RECOVERY_S:.0f} s")
            self._clock.sleep(LEASE_POLL_S)  # the NameNode finishes recovery in the background

    @_os_errors
    def take_over(self, directory: str) -> None:
        """Recover the lease of every file in `directory` at once: ask for each, then wait for
        the NameNode to finish them together (one recovery's time, not one per file). After
        it, the previous writer's appends and closes fail; this store's own writers there are
        released first."""
        hdfs_dir = self._writable(directory)
        try:
            names = [posixpath.basename(s.path) for s in self._client.list_status(hdfs_dir) if not s.isdir]
        except FileNotFoundError:
            return
        paths = [posixpath.join(hdfs_dir, name) for name in names]
        for path in paths:
            own = self._writers.get(path)
            if own is not None and not own.closed:
                own.release()
        deadline = self._clock.monotonic() + LEASE_RECOVERY_S
        waiting = [path for path in paths if not self._recovered(path)]
        while waiting:
            if self._clock.monotonic() > deadline:
                raise OSError(f"HDFS: lease recovery in {hdfs_dir} did not finish in {LEASE_RECOVERY_S:.0f} s")
            self._clock.sleep(LEASE_POLL_S)  # the NameNode recovers them in the background
            waiting = [path for path in waiting if not self._recovered(path)]
        self._settled.update(paths)
        self._drop_readers(hdfs_dir)  # other nodes may have replaced files since this one read them

    def _recovered(self, hdfs_path: str) -> bool:
        try:
            return bool(self._client.recover_lease(hdfs_path))
        except FileNotFoundError:
            return True

    @_os_errors
    def truncate(self, path: str, size: int) -> None:
        hdfs_path = self._writable(path)
        reader = self._whole_reader(hdfs_path, closed=True)  # never copy a file whose tail a reader cannot see
        parent, name = posixpath.split(hdfs_path)
        tmp_path = posixpath.join(parent, f".{name}.truncating")
        writer = self._client.create(tmp_path, self._options(overwrite=True))
        try:
            for offset in range(0, size, COPY_CHUNK_BYTES):
                count = min(COPY_CHUNK_BYTES, size - offset)
                kept = min(count, max(0, reader.size - offset))
                if kept:
                    writer.write(reader.read_range(offset, kept))
                if count > kept:
                    writer.write(bytes(count - kept))  # growing: zeros, like os.truncate
            writer.hsync()
        finally:
            writer.close()
        self._client.rename(tmp_path, hdfs_path, overwrite=True)
        self._drop_readers(hdfs_path)

    @_os_errors
    def rename(self, src: str, dst: str) -> None:
        self._writable(dst)
        self._client.rename(self._hdfs_path(src), self._hdfs_path(dst), overwrite=True)
        self._forget(self._hdfs_path(src))
        self._forget(self._hdfs_path(dst))

    @_os_errors
    def delete(self, path: str) -> None:
        if not check_path(path):
            raise ValueError("refusing to delete the store root")
        self._client.delete(self._writable(path), recursive=True)
        self._forget(self._hdfs_path(path))

    def _forget(self, hdfs_path: str) -> None:
        """Drop what is known of a path and everything under it."""
        inside = hdfs_path + "/"
        # list() copies in one step, so worker threads may add paths meanwhile
        self._settled.difference_update(
            [p for p in list(self._settled) if p == hdfs_path or p.startswith(inside)])
        self._drop_readers(hdfs_path)

    def _drop_readers(self, hdfs_path: str) -> None:
        """Forget the kept readers of a path and of everything under it."""
        inside = hdfs_path + "/"
        with self._readers_lock:
            for path in [p for p in self._readers if p == hdfs_path or p.startswith(inside)]:
                del self._readers[path]

    @_os_errors
    def create_exclusive(self, path: str) -> bool:
        hdfs_path = self._hdfs_path(path)
        try:
            writer = self._client.create(hdfs_path, self._options(overwrite=False))
        except FileExistsError:
            return False
        writer.close()
        return True

    @_os_errors
    def exists(self, path: str) -> bool:
        try:
            self._client.get_file_info(self._hdfs_path(path))
        except FileNotFoundError:
            return False
        return True
