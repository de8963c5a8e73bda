"""One segment of a partition log: a log file plus its two sparse indexes.

On-disk layout of a partition directory (all integers big-endian):

    00000000000000000000.log        batches exactly as appended, back to back; each batch's
                                    base_offset is its real offset (see batch.py)
    00000000000000000000.index      offset index, 8-byte entries:
                                        relative offset u32 | file position u32
    00000000000000000000.timeindex  time index, 12-byte entries:
                                        max timestamp so far i64 | relative offset u32
    00000000000000000000.txnindex   aborted transactions whose marker lies in the segment
                                    (txnindex.py); only while there are any
    00000000000000004242.log ...    the next segment, named by its base offset (20 digits)
    00000000000000004242.producers  producer state as of offset 4242 (producers.py)
    start-offset                    log start offset checkpoint, decimal text
    clean-shutdown                  present only while the log is closed cleanly

Invariants:
- A segment named B holds batches with offsets [B, next segment's B), in order; its last
  batch ends where the next segment begins. Batches are dense (each batch's base_offset is
  the previous batch's next_offset) until compaction (compaction.py) removes some: then a
  batch may start after the previous one ends, and an offset in between is read as the
  batch that follows it, as Kafka reads a compacted log.
- Relative offsets are offset - B and fit in u32 (the log rolls before they would not);
  file positions fit in u32 (segment_bytes is capped below 2**31).
- Offset index: before a batch is written at position P, an entry (its base_offset - B, P) is
  added when at least index_interval_bytes have passed since the last indexed position
  (position 0 is implicitly indexed). To find offset O: take the last entry with relative
  offset <= O - B and scan batch headers forward from its position.
- Time index: whenever an offset index entry is added, and again when the segment stops
  being active, an entry (M, R) is added if the running max timestamp M grew; R is the relative
  base offset of the first batch holding M. Every batch before R has max_timestamp <= M, so a
  search for timestamp T scans forward from the last entry with M < T.
- Both index columns strictly increase. Indexes are derived data: the active segment keeps
  them in memory and writes them whole when it is sealed (a roll or a clean close), so a
  partition has one file open for writing and a commit syncs only its log; recovery rebuilds
  them from the log whenever they are missing or disagree with it (the last segment after a
  crash always).
- The transaction index is written whole when the segment is sealed, like the other two, but
  it cannot be derived from the segment alone (an entry's first offset may lie in an earlier
  one): recovery rebuilds the entries after the producer snapshot it starts from by replaying
  the headers, and trusts the file for those before it (txnindex.py).
"""

import functools
from collections.abc import Callable, Iterator, Sequence

from ...records.header import HEADER_BYTES, MAGIC, MIN_BATCH_LENGTH, BatchHeader, Buffer, crc_ok, iter_batches, parse_header
from ..errors import CorruptBatch
from ..store import AppendFile, Store
from ..store.atomic import write_atomically
from .config import LogConfig
from .files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, offset_file
from .index import OffsetIndex, TimeIndex
from .txnindex import AbortedTxn, to_bytes

RELATIVE_OFFSET_MAX = 2**32 - 1
SCAN_CHUNK_BYTES = 1 << 20  # how much recovery reads at a time while validating batches


class Segment:
    def __init__(self, store: Store, directory: str, base_offset: int, config: LogConfig) -> None:
        self.store = store
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.next_offset = base_offset
        self.size_bytes = 0
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        self.offset_index = OffsetIndex()
        self.time_index = TimeIndex()
        self.indexed_position = 0
        self.aborted: list[AbortedTxn] = []  # transactions aborted by a marker in this segment, in order
        self.txn_saved: int | None = 0  # entries its .txnindex holds: 0 for no file, None if unknown
        self._log: AppendFile | None = None

    # -- files ---------------------------------------------------------------------------

    @property
    def log_path(self) -> str:
        return offset_file(self.directory, self.base_offset, LOG_SUFFIX)

    @property
    def index_path(self) -> str:
        return offset_file(self.directory, self.base_offset, INDEX_SUFFIX)

    @property
    def time_index_path(self) -> str:
        return offset_file(self.directory, self.base_offset, TIME_INDEX_SUFFIX)

    @property
    def txn_index_path(self) -> str:
        return offset_file(self.directory, self.base_offset, TXN_INDEX_SUFFIX)

    def open_for_append(self) -> None:
        """Open the log file for appending (only the active segment is open; its indexes
        live in memory until it is sealed)."""
        self._log = self.store.open_append(self.log_path)
        assert self._log.size == self.size_bytes, f"{self.log_path} changed under us"

    def flush(self) -> None:
        """Make the log durable."""
        if self._log is not None:
            self._log.sync()

    def finish_time_index(self) -> None:
        """Index the segment's max timestamp, as sealing does (no more batches come)."""
        self._index_max_timestamp()

    def finishing_writes(self) -> list[Callable[[], None]]:
        """What seals the segment once its log is durable and its time index finished:
        the indexes written whole and the log closed, independent of each other (so they may
        run side by side), each a file the store completes (about half a second on HDFS).
        None is needed to read the segment, which keeps its indexes in memory. The .txnindex
        is left out when it already holds `aborted` (no thread for a write with nothing to do)."""
        writes: list[Callable[[], None]] = [
            functools.partial(self.offset_index.save, self.store, self.index_path),
            functools.partial(self.time_index.save, self.store, self.time_index_path)]
        if self.aborted_unsaved:
            writes.append(self.save_aborted)
        return [*writes, self.close]

    @property
    def aborted_unsaved(self) -> bool:
        """The .txnindex does not hold `aborted` yet (save_aborted has something to do)."""
        return self.txn_saved != len(self.aborted)

    def save_aborted(self) -> None:
        """Make the .txnindex hold exactly `aborted`: written atomically, or deleted when there
        is none; nothing to do when it already does."""
        if not self.aborted_unsaved:
            return
        if self.aborted:
            write_atomically(self.store, self.txn_index_path, to_bytes(self.aborted))
        else:
            self.store.delete(self.txn_index_path)
        self.txn_saved = len(self.aborted)

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def abandon(self) -> None:
        """Let go of the open log file without closing it (see AppendFile.abandon)."""
        if self._log is not None:
            self._log.abandon()
            self._log = None

    def delete(self) -> None:
        self.close()
        paths = [self.log_path, self.index_path, self.time_index_path]
        if self.txn_saved != 0:
            paths.append(self.txn_index_path)  # no store call for the file most segments never have
        for path in paths:
            self.store.delete(path)

    # -- writing -------------------------------------------------------------------------

    def fits_offsets(self, header: BatchHeader) -> bool:
        """True if the batch's relative offsets still fit the indexes' u32 column."""
        return header.last_offset - self.base_offset <= RELATIVE_OFFSET_MAX

    def append(self, batch: bytes | bytearray | memoryview, header: BatchHeader) -> None:
        self.append_many([batch], [header])

    def append_many(self, batches: Sequence[bytes | bytearray | memoryview], headers: list[BatchHeader]) -> None:
        """Write consecutive batches with one write call (one round trip on HDFS)."""
        assert self._log is not None, "append to a segment that is not active"
        assert headers[0].base_offset == self.next_offset
        position = self.size_bytes
        self._log.write(batches[0] if len(batches) == 1 else b"".join(batches))  # log before index
        for header in headers:
            self.track(position, header)
            position += header.size

    def track(self, position: int, header: BatchHeader) -> None:
        """Account for a batch at `position`: sizes, offsets, max timestamp, index entries.
        Shared by append and recovery so both build identical indexes."""
        indexed = position - self.indexed_position >= self.config.index_interval_bytes
        if indexed:
            self.offset_index.add(header.base_offset - self.base_offset, position)
            self.indexed_position = position
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.max_timestamp_offset = header.base_offset
        if indexed:
            self._index_max_timestamp()
        self.next_offset = header.next_offset
        self.size_bytes = position + header.size

    def _index_max_timestamp(self) -> None:
        last = self.time_index.last()
        if self.max_timestamp >= 0 and (last is None or self.max_timestamp > last[0]):
            self.time_index.add(self.max_timestamp, self.max_timestamp_offset - self.base_offset)

    # -- reading -------------------------------------------------------------------------

    def locate(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the batch holding `offset`, None if past this segment."""
        if offset >= self.next_offset:
            return None
        entry = self.offset_index.floor(offset - self.base_offset)
        relative, position = entry if entry is not None else (0, 0)
        # The iterator is built from the index position before the loop rebinds `position`.
        for position, header in self.headers_from(position, self.base_offset + relative):  # noqa: B020
            if header.next_offset > offset:
                return position, header
        raise CorruptBatch(f"{self.log_path} ends before offset {offset}")

    def headers_from(self, position: int, base_offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the batches from `position` (whose base offset must be `base_offset`,
        and each next one's at least where the one before ends) to the end of the segment,
        reading about one index interval at a time."""
        chunk_bytes = max(self.config.index_interval_bytes, 4096) + HEADER_BYTES
        while position < self.size_bytes:
            data = self.store.read(self.log_path, position, min(chunk_bytes, self.size_bytes - position))
            at = 0
            while len(data) - at >= HEADER_BYTES:
                header = parse_header(data, at)
                self._check_stored(position + at, header, base_offset)
                yield position + at, header
                at += header.size
                base_offset = header.next_offset
            if at == 0:
                raise CorruptBatch(f"{self.log_path} has a torn batch at {position}")
            position += at

    def _check_stored(self, position: int, header: BatchHeader, base_offset: int) -> None:
        """Structural checks on a header read back from disk (checksums are left to recovery
        and to consumers)."""
        sane = header.batch_length >= MIN_BATCH_LENGTH and header.magic == MAGIC
        if not sane or header.base_offset < base_offset or position + header.size > self.size_bytes:
            raise CorruptBatch(f"{self.log_path}: bad batch at position {position}: {header}")

    def read(self, offset: int, max_bytes: int, at_least_one: bool) -> tuple[Buffer, int]:
        """Whole batches from the one holding `offset`, at most max_bytes of them, or
        exactly one whole batch when `at_least_one` and the first is larger. Returns the
        bytes (a view of what was read when a batch that did not fit is cut off: a cold
        consumer's fetch would otherwise copy a megabyte to drop its tail) and the offset
        that follows them."""
        found = self.locate(offset)
        if found is None:
            return b"", offset
        position, first = found
        if first.size > max_bytes and not at_least_one:
            return b"", first.base_offset
        length = min(max(max_bytes, first.size), self.size_bytes - position)
        data = self.store.read(self.log_path, position, length)
        end, next_offset = _whole_batches(data, first)
        return (data if end == len(data) else memoryview(data)[:end]), next_offset

    def batch_bytes(self, position: int, header: BatchHeader) -> bytes:
        data = self.store.read(self.log_path, position, header.size)
        if len(data) != header.size or parse_header(data) != header:
            raise CorruptBatch(f"{self.log_path}: batch at {position} changed while read")
        return data

    def find_time(self, timestamp_ms: int, min_offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch holding min_offset or later whose max_timestamp >= timestamp_ms."""
        if self.max_timestamp < timestamp_ms:
            return None
        entry = self.time_index.below(timestamp_ms)
        start = max(min_offset, self.base_offset + entry[1] if entry is not None else self.base_offset)
        found = self.locate(start)
        if found is None:
            return None
        for position, header in self.headers_from(found[0], found[1].base_offset):
            if header.max_timestamp >= timestamp_ms:
                return position, header
        return None


def _whole_batches(data: bytes, first: BatchHeader) -> tuple[int, int]:
    """(length, next offset) of the prefix of `data` made of whole batches in offset order
    starting with `first`; checks what was read against what was located."""
    end, expected = 0, first.base_offset
    for position, header in iter_batches(data):
        if header.base_offset < expected or (position == 0 and header != first):
            raise CorruptBatch(f"unexpected batch {header} where offset {expected} belongs")
        end, expected = position + header.size, header.next_offset
    return end, expected


def valid_batches(segment: Segment, position: int, base_offset: int, end: int,
                  gaps: bool = False) -> Iterator[tuple[int, BatchHeader]]:
    """Batches from `position` that pass every check (structure, magic, offsets, CRC32C),
    stopping silently at the first one that does not: the recovery scan. Each batch must
    start where the one before ends, or, with `gaps` (a sealed segment, which compaction may
    have rewritten), anywhere after: the base offset lies outside the CRC, so the last
    segment, the only one a crash can tear and never a compacted one, is held to the strict rule."""
    while position < end:
        data = _read_for_scan(segment, position, end)
        at = 0
        for at_, header in iter_batches(data):
            if not _batch_valid(data, at_, header, base_offset, gaps):
                return
            yield position + at_, header
            base_offset = header.next_offset
            at = at_ + header.size
        if at == 0:
            return
        position += at


def _read_for_scan(segment: Segment, position: int, end: int) -> bytes:
    data = segment.store.read(segment.log_path, position, min(SCAN_CHUNK_BYTES, end - position))
    if len(data) < HEADER_BYTES:
        return data
    size = parse_header(data).size
    if len(data) < size <= end - position:  # one batch bigger than a chunk: read it whole
        data = segment.store.read(segment.log_path, position, size)
    return data


def _batch_valid(data: bytes, position: int, header: BatchHeader, base_offset: int, gaps: bool) -> bool:
    return (
        header.magic == MAGIC
        and (header.base_offset >= base_offset if gaps else header.base_offset == base_offset)
        and header.last_offset_delta >= 0
        and crc_ok(data, position, header)
    )
