"""Compacting a partition log (cleanup.policy=compact): which segments a pass cleans, how it
rewrites them, and the swap that makes a rewritten segment the log's.

Only sealed segments are cleaned; the active one takes appends. A pass (`plan`, `rewrite`,
`swap`):
1. plan, under the partition's lock (memory only): the dirty segments are the sealed ones
   past the cleaner offset (`cleaner-offset`, the end of what the last pass mapped), up to the
   first holding a record younger than min.compaction.lag.ms; the pass runs when they are at
   least min.cleanable.dirty.ratio of the sealed bytes, or when the oldest dirty segment is
   older than max.compaction.lag.ms;
2. rewrite, without the lock (sealed segments never change; retention may delete one, which
   ends the pass): map each key's latest offset over the dirty segments, batch by batch, until
   the map holds `map_bytes` (the engine's compaction_map_bytes, Kafka's
   log.cleaner.dedupe.buffer.size: a larger log is cleaned in several passes, and a pass may
   stop inside a segment), then rewrite every sealed segment up to the last mapped offset with
   cleaner.py's rules into `<base>.cleaned`, streamed (a batch at a time: memory holds the
   map and about a megabyte of reads) and synced. A segment's last batch always stays (empty
   if need be), so a segment still ends where the next begins; a segment where nothing
   changed is not rewritten (its `.cleaned` file is deleted). The walk starts at the log's
   first segment, so it tells which transaction markers have no records left (cleaner.py);
3. swap, under the lock, per rewritten segment: delete its two index files; write its
   transaction index without the ABORT markers the pass removed (nothing those hid is left,
   so a crash that keeps the old log under the new index loses nothing); rename the cleaned
   file over the log (atomic on every store); write the new indexes, and serve the new
   segment. A crash at any step leaves either segment whole, and recovery rebuilds missing
   indexes and deletes `.cleaned` leftovers. Then the cleaner offset moves.
Produce and fetch only wait for the lock during a swap (a few store calls per segment).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ...records.build import retained
from ...records.header import Buffer, iter_batches, parse_header
from ..store import Store, join
from ..store.atomic import write_atomically
from .cleaner import NONE_ABORTED, Aborted, Markers, clean_batch, map_batch
from .config import LogConfig
from .files import CLEANED_SUFFIX, CLEANER_OFFSET_FILE, offset_file
from .segment import Segment

READ_BYTES = 1 << 20  # how much of a segment a pass reads at a time
CLEANER_OFFSET_BYTES_MAX = 32


@dataclass(frozen=True)
class Plan:
    """The sealed segments a pass may rewrite; the dirty ones, which it maps, start at `dirty_from`."""

    segments: tuple[Segment, ...]
    dirty_from: int  # index in `segments` of the first dirty one
    cleaner_offset: int  # where mapping starts: a pass that stopped inside a segment goes on there
    aborted: Aborted = NONE_ABORTED  # the batches of aborted transactions, which a pass removes


@dataclass
class Rewritten:
    old: Segment
    new: Segment | None  # None: nothing in it changed


def plan(segments: list[Segment], cleaner_offset: int, config: LogConfig, now_ms: int,
         stable_offset: int | None = None, aborted: Aborted = NONE_ABORTED) -> Plan | None:
    """What a pass over `segments` (the log's, the active one last) would clean now, None if
    nothing is due. Nothing from `stable_offset` on (the first offset of an open transaction)
    is cleaned: its outcome is not known yet (Kafka cleans below the first unstable offset)."""
    sealed = segments[:-1]
    dirty_from = next((i for i, s in enumerate(sealed) if s.next_offset > cleaner_offset), len(sealed))
    dirty_end = dirty_from
    while (dirty_end < len(sealed) and sealed[dirty_end].max_timestamp <= now_ms - config.min_compaction_lag_ms
           and (stable_offset is None or sealed[dirty_end].next_offset <= stable_offset)):
        dirty_end += 1
    if dirty_end == dirty_from:
        return None
    dirty_bytes = sum(s.size_bytes for s in sealed[dirty_from:dirty_end])
    total_bytes = sum(s.size_bytes for s in sealed[:dirty_end])
    overdue = sealed[dirty_from].max_timestamp < now_ms - config.max_compaction_lag_ms
    if total_bytes == 0 or (dirty_bytes / total_bytes < config.min_cleanable_ratio and not overdue):
        return None
    return Plan(tuple(sealed[:dirty_end]), dirty_from, cleaner_offset, aborted)


def batches(segment: Segment) -> Iterator[bytes]:
    """Every batch of a sealed segment, read about a megabyte at a time."""
    position = 0
    while position < segment.size_bytes:
        data = segment.store.read(segment.log_path, position, min(READ_BYTES, segment.size_bytes - position))
        size = parse_header(data).size
        if len(data) < size:  # one batch larger than a read
            data = segment.store.read(segment.log_path, position, size)
        end = 0
        for at, header in iter_batches(data):
            yield bytes(data[at:at + header.size])
            end = at + header.size
        if end == 0:
            raise FileNotFoundError(f"{segment.log_path} changed while it was cleaned")
        position += end


def rewrite(work: Plan, producers_last: dict[int, int], config: LogConfig, now_ms: int,
            map_bytes: int) -> tuple[list[Rewritten], int]:
    """Clean the planned segments into `.cleaned` files; returns them and the offset the map
    reached (the next pass's cleaner offset)."""
    latest: dict[bytes, int] = {}
    reached = _map(work.segments[work.dirty_from:], work.cleaner_offset, latest, map_bytes, work.aborted)
    markers = Markers()
    done = [_rewrite_one(segment, latest, producers_last, config, now_ms, work.aborted, markers)
            for segment in work.segments if segment.base_offset < reached]
    return done, reached


def _map(dirty: tuple[Segment, ...], start: int, latest: dict[bytes, int], map_bytes: int, aborted: Aborted) -> int:
    """Map keys over `dirty` from offset `start` until the map holds `map_bytes`; the offset
    after the last mapped batch."""
    used = 0
    reached = max(dirty[0].base_offset, start)
    for segment in dirty:
        for batch in batches(segment):
            next_offset = parse_header(batch).next_offset
            if next_offset <= start:
                continue  # mapped by the pass before
            used += map_batch(batch, latest, aborted)
            reached = next_offset
            if used >= map_bytes:
                return reached
    return reached


def _rewrite_one(segment: Segment, latest: dict[bytes, int], producers_last: dict[int, int], config: LogConfig,
                 now_ms: int, aborted: Aborted, markers: Markers) -> Rewritten:
    store = segment.store
    cleaned = Segment(store, segment.directory, segment.base_offset, segment.config)
    path = cleaned_path(segment)
    target = store.open_append(path)
    changed = False
    removed_markers: set[int] = set()
    try:
        position = 0
        for batch in batches(segment):
            kept: Buffer | None = clean_batch(batch, latest, now_ms, config.delete_retention_ms, producers_last,
                                              markers, aborted)
            header = parse_header(batch)
            if kept is None and batch_is_last(segment, batch):  # a segment still ends where the next begins
                kept = batch if header.is_control else retained(header, [])
            if kept is None and header.is_control:
                removed_markers.add(header.base_offset)
            changed = changed or kept is not batch
            if kept is not None:
                target.write(kept)
                cleaned.track(position, parse_header(kept))
                position += len(kept)
        if changed:
            target.sync()
    except BaseException:
        target.close()
        store.delete(path)  # a segment retention deleted meanwhile, a store failure: nothing half-written stays
        raise
    target.close()
    if not changed:
        store.delete(path)
        return Rewritten(segment, None)
    cleaned.finish_time_index()
    cleaned.aborted = [entry for entry in segment.aborted if entry.last_offset not in removed_markers]
    cleaned.txn_saved = segment.txn_saved  # what the index file holds until the swap rewrites it
    return Rewritten(segment, cleaned)


def batch_is_last(segment: Segment, batch: Buffer) -> bool:
    return parse_header(batch).next_offset == segment.next_offset


def cleaned_path(segment: Segment) -> str:
    return offset_file(segment.directory, segment.base_offset, CLEANED_SUFFIX)


def swap(store: Store, done: Rewritten) -> None:
    """Make the cleaned file the segment's log (see the header for why this order)."""
    assert done.new is not None
    old = done.old
    store.delete(old.index_path)
    store.delete(old.time_index_path)
    done.new.save_aborted()
    store.rename(cleaned_path(old), old.log_path)
    done.new.offset_index.save(store, old.index_path)
    done.new.time_index.save(store, old.time_index_path)


def discard(store: Store, done: Rewritten) -> None:
    """A rewrite that is not swapped in (its segment went away meanwhile)."""
    if done.new is not None:
        store.delete(cleaned_path(done.old))


def read_cleaner_offset(store: Store, directory: str) -> int:
    try:
        text = store.read(join(directory, CLEANER_OFFSET_FILE), 0, CLEANER_OFFSET_BYTES_MAX).strip()
    except FileNotFoundError:
        return 0
    return int(text) if text.isdigit() else 0


def write_cleaner_offset(store: Store, directory: str, offset: int) -> None:
    write_atomically(store, join(directory, CLEANER_OFFSET_FILE), b"%d\n" % offset)
