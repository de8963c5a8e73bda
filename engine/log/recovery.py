"""Bring a partition directory back to a consistent state when a log opens.

After a clean close (the clean-shutdown marker exists) every segment is trusted after cheap
checks: its index files parse and point inside the log, and the batches after the last index
entry validate up to the exact end of the file. Without the marker the process may have died
mid-write (kill -9, power loss), so the last segment is scanned whole: every batch must have a
sane length, magic 2, a correct CRC32C and the offset following its predecessor. The log is
cut at the first batch that fails, indexes are rebuilt from what survives, and segments that
would start past the cut are dropped. Any segment failing the cheap checks is scanned whole too.
Segments are rolled only after the previous one was fsynced, so older segments are normally
intact and only the cheap checks run on them.

Producer state is loaded from the newest usable snapshot and brought up to date by reading
the batch headers that follow it (and the markers among them). Each segment's aborted
transactions are those of its `.txnindex` whose marker lies below that snapshot, then those the
replay finds (txnindex.py says why the file holds all of the former); a sealed segment whose
file disagrees with the result gets it rewritten. A damaged `.txnindex` cannot be rebuilt from
its segment alone, so the replay then starts at the first segment with an empty state, as it
does when no snapshot is usable.
"""

from dataclasses import dataclass

from ..errors import CorruptBatch
from ..store import Store, join
from ..store.atomic import read_whole, write_atomically
from .config import LogConfig
from .files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    PRODUCERS_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file,
    offsets_with_suffix,
    read_start_offset,
)
from .index import IndexInvalid, OffsetIndex, TimeIndex, check_offset_index, check_time_index
from .producers import ProducerState, end_marker
from .segment import Segment, valid_batches
from .txnindex import AbortedTxn, from_bytes, to_bytes


@dataclass
class Recovered:
    segments: list[Segment]
    start_offset: int
    producer_state: ProducerState


def recover(store: Store, directory: str, config: LogConfig,
            deferred: list[tuple[str, bytes]] | None = None) -> Recovered:
    """`deferred`: instead of rewriting the index files of a segment it rebuilt, append
    (path, content) here; the caller writes them (atomically) before the log is opened for
    appending. A node taking a partition over writes them beside its sessions file: on HDFS
    each write ends in a file close of about half a second."""
    store.mkdir(directory)
    clean = store.exists(join(directory, CLEAN_SHUTDOWN_FILE))
    _delete_leftovers(store, directory)
    segments = _load_segments(store, directory, config, clean, deferred)
    if not segments:
        segments = [_new_segment(store, directory, read_start_offset(store, directory), config)]
    start_offset = min(max(read_start_offset(store, directory), segments[0].base_offset), segments[-1].next_offset)
    producers = _recover_producers(store, directory, segments, deferred)
    store.delete(join(directory, CLEAN_SHUTDOWN_FILE))  # from here on a crash means dirty
    return Recovered(segments, start_offset, producers)


def _delete_leftovers(store: Store, directory: str) -> None:
    """Half-written temp files, compaction's rewrites that were never swapped in, and
    indexes whose log is gone."""
    logs = set(offsets_with_suffix(store, directory, LOG_SUFFIX))
    for name in store.list(directory):
        if name.endswith((TMP_SUFFIX, CLEANED_SUFFIX)):
            store.delete(join(directory, name))
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        for base in set(offsets_with_suffix(store, directory, suffix)) - logs:
            store.delete(offset_file(directory, base, suffix))


def _load_segments(store: Store, directory: str, config: LogConfig, clean: bool,
                   deferred: list[tuple[str, bytes]] | None) -> list[Segment]:
    bases = offsets_with_suffix(store, directory, LOG_SUFFIX)
    segments: list[Segment] = []
    for i, base in enumerate(bases):
        if segments and base != segments[-1].next_offset:
            _drop_segments(store, directory, bases[i:], config)  # a gap or overlap: keep the prefix
            break
        sealed = i < len(bases) - 1
        segment, cut = _load_segment(store, directory, base, config, clean or sealed, deferred, gaps=sealed)
        segments.append(segment)
        if cut:
            _drop_segments(store, directory, bases[i + 1 :], config)
            break
    return segments


def _drop_segments(store: Store, directory: str, bases: list[int], config: LogConfig) -> None:
    for base in bases:
        segment = Segment(store, directory, base, config)
        segment.txn_saved = None  # it may have a transaction index: delete that too
        segment.delete()


def _load_segment(store: Store, directory: str, base: int, config: LogConfig, trusted: bool,
                  deferred: list[tuple[str, bytes]] | None, gaps: bool) -> tuple[Segment, bool]:
    """(segment, whether its log was cut)."""
    if trusted:
        try:
            return _load_checked(store, directory, base, config, deferred, gaps), False
        except (IndexInvalid, CorruptBatch, FileNotFoundError):
            pass  # fall through to a full scan
    return _rebuild(store, directory, base, config, deferred, gaps)


def _load_checked(store: Store, directory: str, base: int, config: LogConfig,
                  deferred: list[tuple[str, bytes]] | None, gaps: bool) -> Segment:
    """Load a segment's indexes and validate the batches after the last index entry."""
    segment = Segment(store, directory, base, config)
    log_bytes = store.size(segment.log_path)
    segment.offset_index = OffsetIndex.from_bytes(read_whole(store, segment.index_path))
    segment.time_index = TimeIndex.from_bytes(read_whole(store, segment.time_index_path))
    check_offset_index(segment.offset_index, log_bytes, 2**32)
    counts = (len(segment.offset_index), len(segment.time_index))
    _start_at_last_entry(segment)
    for position, header in valid_batches(segment, segment.size_bytes, segment.next_offset, log_bytes, gaps):
        segment.track(position, header)
    if segment.size_bytes != log_bytes:
        raise CorruptBatch(f"{segment.log_path} does not end with a whole valid batch")
    check_time_index(segment.time_index, segment.next_offset - base)
    if counts != (len(segment.offset_index), len(segment.time_index)):
        _rewrite_indexes(segment, deferred)  # entries lost in a crash were re-derived from the log
    return segment


def _start_at_last_entry(segment: Segment) -> None:
    """Position the segment's counters at its last offset index entry, ready to replay
    the tail; the time index already covers everything before that entry."""
    relative, position = segment.offset_index.last() or (0, 0)
    segment.next_offset = segment.base_offset + relative
    segment.size_bytes = position
    segment.indexed_position = position
    last_time = segment.time_index.last()
    if last_time is not None:
        segment.max_timestamp, segment.max_timestamp_offset = last_time[0], segment.base_offset + last_time[1]


def _rebuild(store: Store, directory: str, base: int, config: LogConfig,
             deferred: list[tuple[str, bytes]] | None, gaps: bool) -> tuple[Segment, bool]:
    """Scan the whole log, cut it after the last valid batch and rewrite both indexes."""
    segment = Segment(store, directory, base, config)
    log_bytes = store.size(segment.log_path)
    for position, header in valid_batches(segment, 0, base, log_bytes, gaps):
        segment.track(position, header)
    cut = segment.size_bytes < log_bytes
    if cut:
        store.truncate(segment.log_path, segment.size_bytes)
    _rewrite_indexes(segment, deferred)
    return segment, cut


def _rewrite_indexes(segment: Segment, deferred: list[tuple[str, bytes]] | None) -> None:
    files = [(segment.index_path, segment.offset_index.to_bytes()),
             (segment.time_index_path, segment.time_index.to_bytes())]
    segment.offset_index.saved, segment.time_index.saved = len(segment.offset_index), len(segment.time_index)
    if deferred is not None:
        deferred.extend(files)
        return
    for path, data in files:
        write_atomically(segment.store, path, data)


def _new_segment(store: Store, directory: str, base: int, config: LogConfig) -> Segment:
    segment = Segment(store, directory, base, config)
    segment.open_for_append()  # creates the three files
    segment.flush()
    segment.close()
    return segment


def _recover_producers(store: Store, directory: str, segments: list[Segment],
                       deferred: list[tuple[str, bytes]] | None) -> ProducerState:
    """Producer state, and each segment's aborted transactions (see the module header)."""
    offset, state = _load_snapshot(store, directory, segments)
    stored, damaged = _read_txn_indexes(store, directory)
    if damaged:
        offset, state = segments[0].base_offset, ProducerState()
    for segment in segments:
        on_store = stored.get(segment.base_offset, [])
        below = min(offset, segment.next_offset)
        segment.aborted = [entry for entry in on_store if segment.base_offset <= entry.last_offset < below]
        _replay(segment, state, offset)
        agrees = segment.base_offset not in damaged and segment.aborted == on_store
        segment.txn_saved = len(on_store) if agrees else None
    for sealed in segments[:-1]:
        _save_rebuilt(sealed, deferred)
    return state


def _replay(segment: Segment, state: ProducerState, offset: int) -> None:
    """Bring `state` and the segment's aborted transactions up to date with its batches from
    `offset` on; a marker's batch is read whole for its control record."""
    start = max(offset, segment.base_offset)
    if segment.next_offset <= start:
        return  # all before the snapshot, or empty (a new owner's segment it never wrote to)
    found = segment.locate(start)
    assert found is not None
    for position, header in segment.headers_from(found[0], found[1].base_offset):
        marker = end_marker(segment.batch_bytes(position, header), header) if header.is_control else None
        completed = state.update(header, marker)
        if completed is not None and completed.aborted:
            segment.aborted.append(completed.aborted_entry())


def _read_txn_indexes(store: Store, directory: str) -> tuple[dict[int, list[AbortedTxn]], set[int]]:
    """The entries of every segment's transaction index by base offset, and the base offsets
    of those that are damaged."""
    stored, damaged = {}, set()
    for base in offsets_with_suffix(store, directory, TXN_INDEX_SUFFIX):
        try:
            stored[base] = from_bytes(read_whole(store, offset_file(directory, base, TXN_INDEX_SUFFIX)))
        except (ValueError, FileNotFoundError):
            damaged.add(base)
    return stored, damaged


def _save_rebuilt(segment: Segment, deferred: list[tuple[str, bytes]] | None) -> None:
    """A sealed segment's transaction index, if it disagrees with what recovery found."""
    if segment.txn_saved == len(segment.aborted):
        return
    if deferred is not None and segment.aborted:
        deferred.append((segment.txn_index_path, to_bytes(segment.aborted)))
        segment.txn_saved = len(segment.aborted)
    else:
        segment.save_aborted()


def _load_snapshot(store: Store, directory: str, segments: list[Segment]) -> tuple[int, ProducerState]:
    """The newest snapshot lying within the log; stale or damaged ones are deleted."""
    first, end = segments[0].base_offset, segments[-1].next_offset
    for offset in reversed(offsets_with_suffix(store, directory, PRODUCERS_SUFFIX)):
        path = offset_file(directory, offset, PRODUCERS_SUFFIX)
        if first <= offset <= end:
            try:
                return _read_snapshot(store, path, offset)
            except (ValueError, KeyError, TypeError):
                pass  # damaged: fall back to an older snapshot or a full header scan
        store.delete(path)
    return first, ProducerState()


def _read_snapshot(store: Store, path: str, offset: int) -> tuple[int, ProducerState]:
    stored_offset, state = ProducerState.from_bytes(read_whole(store, path))
    if stored_offset != offset:
        raise ValueError(f"{path} holds the state at offset {stored_offset}")
    return offset, state
