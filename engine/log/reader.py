"""A read-only view of a partition log, for readers in other processes (a Spark job, an
export) on the same store as a live broker: `open_readonly(store, path)`.

It never writes and never runs recovery. The broker may be appending to the active segment
at this moment, so what looks torn at the end of a file may be a write in progress, and only
the broker may cut it. The reader therefore goes through a ReadOnlyStore (any writing call
fails) and trusts two things only:

- how far it may read: the broker's published checkpoint C (the name of the partition's
  `checkpoint-<C>-<LSO>` file, files.py; LSO is the last stable offset, where a
  read-committed reader stops: the first offset of a transaction undecided as of C), at most
  `checkpoint_publish_ms` plus a sweep behind the broker's C. A file's size is never taken
  as the end: bytes past C may be unpersisted, half written or about to be cut. `refresh`
  lists the directory again; until then reads stop at the C seen last (open looks once).
  Nothing published yet means C = 0.
- the batches themselves: every batch returned is whole, has magic 2, the base offset that
  follows its predecessor and a correct CRC32C. Only in a sealed segment may a batch start
  past its predecessor's end: compaction leaves such gaps (compaction.py), and a sealed
  segment is never torn; in the last one a gap is damage, as recovery holds it.

What the store shows bounds a read too: on HDFS (read-only mode, which never recovers a
lease) a file the broker holds open shows only its finished blocks, so the active segment
may be invisible until the broker rolls or closes it; on local disk a batch being written
may be partly visible. Either way a batch that is not visible whole ends the read, quietly:
it is not damage, the next read after a refresh gets further. A batch that is visible whole
below C and fails its checks is damage: CorruptBatch when it is the first one asked for
(the caller would make no progress otherwise), else the read stops before it.

On the local disk segments are read through mappings (`LocalStore.read_view`), and a read
returns a view of the mapped batches, not a copy: Spark and the exports decode the records
in place (connectors/columns.py) and copy each value once, into Arrow. A broker may cut the
active segment's tail (recovery after a crash cuts a torn batch, which lies past C); a page
wholly past a cut faults a process that touches it, so a read looks at no byte past the
batch that reaches its bound, and returns none. What a view holds stays allocated while the
view lives, a deleted segment too: readers let go of them (the connectors copy what they
keep). Other stores are read with `read` (a copy). A read's batches from two reads of the
store (across segments) are joined into one copy.

Segments are found by listing the directory (named by base offset, segment.py). A read
resumes where the previous one ended; otherwise it starts at the segment's last offset index
entry at or below the offset, an entry it checks against the batch found there and ignores
(scanning from the segment's start) when the index is behind, torn or wrong.

Reading below the LSO gives decided transactions only, but not which were aborted: this view
does not offer the aborted list (the active segment's part of it lives in the broker's memory
until the segment is sealed, txnindex.py): such a reader keeps a transaction's batches until
the marker that ends it says whether it committed.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ...records.header import HEADER_BYTES, MAGIC, MIN_BATCH_LENGTH, BatchHeader, crc_ok, iter_batches, parse_header
from ..errors import CorruptBatch, OffsetOutOfRange
from ..store.base import Store
from ..store.readonly import ReadOnlyStore
from .files import INDEX_SUFFIX, LOG_SUFFIX, offset_file, offsets_with_suffix, read_published, read_start_offset
from .index import IndexInvalid, OffsetIndex

CHUNK_BYTES_MIN = 64 << 10  # a read fetches at least this much of a segment at a time
CHUNK_BYTES_MAX = 8 << 20  # and at most this much, unless one batch is bigger
ReadView = Callable[[str, int, int], memoryview]  # LocalStore.read_view: a read without a copy


@dataclass(frozen=True)
class _Position:
    """Where the batch with base offset `offset` starts: segment `base`, byte `byte`."""

    base: int
    byte: int
    offset: int


def open_readonly(store: Store, path: str) -> LogReader:
    """A reader of the partition log at `path`, as far as the broker published it; on a
    store that can map files (`LocalStore.read_view`) it reads segments as views."""
    return LogReader(ReadOnlyStore(store), path, getattr(store, "read_view", None))


class LogReader:
    def __init__(self, store: ReadOnlyStore, path: str, read_view: ReadView | None = None) -> None:
        self.store = store
        self.path = path
        self._read: ReadView | Callable[[str, int, int], bytes] = read_view or store.read  # segments' bytes
        self.checkpoint = 0  # C as published when last refreshed: reads end here
        self.last_stable = 0  # LSO as published (<= C): below it every transaction is decided
        self.start_offset = 0  # the log start offset as checkpointed by the broker
        self._resume: _Position | None = None  # where the last read ended
        self.refresh()

    def refresh(self) -> None:
        """Look up the published C and LSO, and the log start offset, again."""
        self.checkpoint, self.last_stable = read_published(self.store, self.path) or (0, 0)
        self.start_offset = read_start_offset(self.store, self.path)

    def segments(self) -> list[int]:
        """Base offsets of the segments on the store, oldest first."""
        return offsets_with_suffix(self.store, self.path, LOG_SUFFIX)

    # -- reading ---------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, end_offset: int | None = None) -> memoryview:
        """Whole batches from the one holding `offset`, none reaching past `end_offset` or
        the published C (whichever is lower; pass last_stable for read-committed), up to
        max_bytes but at least one batch. Empty at or past the end, or when the store does not
        show the next batch whole yet. OffsetOutOfRange below the log start.

        The batches are a view of what the store read, not a copy, unless they come from two
        reads of it (a read across segments): then they are joined."""
        end = self.checkpoint if end_offset is None else min(end_offset, self.checkpoint)
        bases = self.segments()
        if offset < self.start_offset or not bases or offset < bases[0]:
            raise OffsetOutOfRange(f"offset {offset} is below the start of {self.path}")
        if offset >= end:
            return memoryview(b"")
        runs: list[_Run] = []
        size = 0
        try:
            for chunk, at, header, after in self._batches(bases, offset, end, max_bytes):
                if runs and size + header.size > max_bytes:
                    break
                _add(runs, chunk, at, at + header.size)
                size += header.size
                self._resume = after
                if size >= max_bytes:
                    break
        except (CorruptBatch, FileNotFoundError) as error:
            if not runs:
                raise (_out_of_range(offset, self.path) if isinstance(error, FileNotFoundError) else error) from error
        return _joined(runs)

    def _batches(self, bases: list[int], offset: int, end: int,
                 max_bytes: int) -> Iterator[tuple[memoryview, int, BatchHeader, _Position]]:
        """Checked batches from the one holding `offset` until `end`, across segments, each
        as (chunk, its position in the chunk, header, the position that follows it); ends
        where the store shows no more whole ones."""
        position: _Position | None = self._start(bases, offset)
        while position is not None and position.offset < end:
            after = position
            sealed = position.base != bases[-1]
            for chunk, at, header, after in self._segment_batches(position, end, max_bytes, sealed):
                if header.next_offset > offset:
                    self._check_crc(chunk, at, header)
                    yield chunk, at, header, after
            position = self._next_segment(bases, after)

    def _next_segment(self, bases: list[int], position: _Position) -> _Position | None:
        """The start of the segment that follows at `position`'s offset, None if none does
        (the segment is not finished, or not visible further yet)."""
        at = bases.index(position.base) + 1
        if at < len(bases) and bases[at] == position.offset:
            return _Position(bases[at], 0, position.offset)
        return None

    def _segment_batches(self, start: _Position, end: int, max_bytes: int,
                         sealed: bool) -> Iterator[tuple[memoryview, int, BatchHeader, _Position]]:
        """Structurally checked batches of one segment from `start`, each as (chunk, its
        position in the chunk, header, the position after it), until `end` or the end of what
        the store shows whole (a sealed segment may have gaps between batches). Nothing past
        the batch that reaches `end` is looked at: the bytes after C may be cut under us."""
        log_path = offset_file(self.path, start.base, LOG_SUFFIX)
        byte, expected = start.byte, start.offset
        while expected < end:
            chunk = self._read_chunk(log_path, byte, max_bytes)
            used = 0
            for at, header in iter_batches(chunk):
                if header.next_offset > end:
                    return  # past the bound: not ours to look at
                gap_allowed = sealed and header.base_offset > expected
                if (header.base_offset != expected and not gap_allowed) or header.magic != MAGIC \
                        or header.last_offset_delta < 0:
                    raise CorruptBatch(f"{log_path}: {header} at byte {byte + at} where offset {expected} belongs")
                used, expected = at + header.size, header.next_offset
                yield chunk, at, header, _Position(start.base, byte + used, expected)
                if expected >= end:
                    return
            if used == 0:
                return  # the store shows no whole batch here (yet)
            byte += used

    def _read_chunk(self, log_path: str, byte: int, max_bytes: int) -> memoryview:
        """About max_bytes from `byte`, or the whole first batch when it is bigger."""
        want = max(CHUNK_BYTES_MIN, min(CHUNK_BYTES_MAX, max_bytes + HEADER_BYTES))
        data = self._read(log_path, byte, want)
        if len(data) == want:
            header = parse_header(data)
            if want < header.size and header.batch_length >= MIN_BATCH_LENGTH:
                data = self._read(log_path, byte, header.size)
        return memoryview(data)

    def _check_crc(self, chunk: memoryview, at: int, header: BatchHeader) -> None:
        if not crc_ok(chunk, at, header):
            raise CorruptBatch(f"{self.path}: batch at offset {header.base_offset} fails its CRC32C")

    # -- where a read starts -------------------------------------------------------------

    def _start(self, bases: list[int], offset: int) -> _Position:
        resume = self._resume
        if resume is not None and resume.offset == offset and resume.base in bases:
            return resume
        base = bases[bisect_right(bases, offset) - 1]
        return self._index_hint(base, offset) or _Position(base, 0, base)

    def _index_hint(self, base: int, offset: int) -> _Position | None:
        """The last offset index entry at or below `offset`, if the batch there agrees."""
        path = offset_file(self.path, base, INDEX_SUFFIX)
        try:
            data = self.store.read(path, 0, self.store.size(path))
            entries = OffsetIndex.from_bytes(data[: len(data) - len(data) % OffsetIndex.entry.size])
        except (FileNotFoundError, IndexInvalid):
            return None
        entry = entries.floor(offset - base)
        if entry is None:
            return None
        relative, byte = entry
        header_bytes = self.store.read(offset_file(self.path, base, LOG_SUFFIX), byte, HEADER_BYTES)
        if len(header_bytes) < HEADER_BYTES or parse_header(header_bytes).base_offset != base + relative:
            return None
        return _Position(base, byte, base + relative)


@dataclass
class _Run:
    """Batches that lie one after the other in one chunk: chunk[start:end]."""

    chunk: memoryview
    start: int
    end: int


def _add(runs: list[_Run], chunk: memoryview, start: int, end: int) -> None:
    """Batch chunk[start:end] after those in `runs`: the last run grows when it ends there."""
    last = runs[-1] if runs else None
    if last is not None and last.chunk is chunk and last.end == start:
        last.end = end
    else:
        runs.append(_Run(chunk, start, end))


def _joined(runs: list[_Run]) -> memoryview:
    """The batches of `runs` as one buffer: a view when they are one run, else a copy."""
    if len(runs) == 1:
        return runs[0].chunk[runs[0].start:runs[0].end]
    return memoryview(b"".join(run.chunk[run.start:run.end] for run in runs))


def _out_of_range(offset: int, path: str) -> OffsetOutOfRange:
    """A segment vanished under the read: retention or DeleteRecords moved the start past it."""
    return OffsetOutOfRange(f"offset {offset} of {path} was deleted while being read")
