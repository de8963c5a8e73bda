"""A partition log: an ordered list of segments, the last of which takes appends.

Offsets are dense as appended: each batch's base offset is the previous batch's next offset
(a compacted log then has gaps where records were removed, see compaction.py). The log
keeps [start_offset, end_offset): start moves up through delete_records and retention (whole
segments are deleted only once everything in them lies below start), end moves up by appends.
Time comes from the injected now_ms; nothing here reads the clock itself.
"""

import functools
import logging
import zlib
from bisect import bisect_right
from collections.abc import Callable
from concurrent.futures import Future, wait

from ...records.header import HEADER_BYTES, MAGIC, BatchHeader, Buffer, header_fields, parse_header, set_base_offset
from ..errors import CorruptBatch, OffsetOutOfRange
from ..store import Store, join
from ..store.atomic import write_atomically
from ..store.background import in_background
from .cleaner import Aborted
from .compaction import Plan, Rewritten, discard, plan, read_cleaner_offset, swap, write_cleaner_offset
from .config import LogConfig
from .files import CLEAN_SHUTDOWN_FILE, PRODUCERS_SUFFIX, offset_file, offsets_with_suffix, write_start_offset
from .producers import end_marker
from .recovery import Recovered, recover
from .segment import Segment
from .txnindex import AbortedTxn

SNAPSHOTS_KEPT = 2  # the newest plus one spare in case the newest is damaged
logger = logging.getLogger(__name__)


class PartitionLog:
    def __init__(
        self,
        store: Store,
        path: str,
        config: LogConfig,
        now_ms: Callable[[], int],
        recovered: Recovered,
    ) -> None:
        self.store = store
        self.path = path
        self.config = config
        self.now_ms = now_ms
        self.start_offset = recovered.start_offset
        self.producer_state = recovered.producer_state
        self._segments = recovered.segments
        self._closed = False
        self._sealing: Future[None] | None = None  # the last roll's work left to a thread (_roll)
        self.cleaner_offset = read_cleaner_offset(store, path)  # compaction: where the dirty part starts
        self._active_since_ms = self._first_batch_ms()
        self._active.open_for_append()
        self._delete_segments_below_start()

    @classmethod
    def open(cls, store: Store, path: str, config: LogConfig, now_ms: Callable[[], int]) -> "PartitionLog":
        """Open the log at `path`, creating it empty or recovering what is there."""
        return cls(store, path, config, now_ms, recover(store, path, config))

    # -- state -----------------------------------------------------------------------------

    @property
    def _active(self) -> Segment:
        return self._segments[-1]

    @property
    def end_offset(self) -> int:
        return self._active.next_offset

    @property
    def max_timestamp(self) -> int:
        return max(segment.max_timestamp for segment in self._segments)

    @property
    def max_timestamp_offset(self) -> int:
        newest = max(self._segments, key=lambda segment: segment.max_timestamp)  # first of equals
        return newest.max_timestamp_offset

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def size_bytes(self) -> int:
        return sum(segment.size_bytes for segment in self._segments)

    # -- appending -------------------------------------------------------------------------

    def append(self, batch: bytearray, header: BatchHeader) -> int:
        """Store `batch` at offset end_offset (written into its bytes) and return that offset."""
        assert not self._closed, "append to a closed log"
        check_handed(batch, header)
        self.producer_state.check(header)
        header = header._replace(base_offset=self.end_offset)
        if self._should_roll(header):
            self._roll()
        set_base_offset(batch, header.base_offset)
        self._active.append(batch, header)
        self._learn(batch, header)
        if self._active_since_ms is None:
            self._active_since_ms = self.now_ms()
        return header.base_offset

    def append_stored(self, batches: list[bytearray], headers: list[BatchHeader], sync: bool = True) -> None:
        """Persist batches whose offsets the caller already assigned and wrote into their
        bytes (a partition's memory tail): the first starts at end_offset and each follows
        the one before. One write per segment touched, then one sync unless `sync` is
        false (the bytes are then only handed to the store). The producer state learns of
        each segment's batches once they are written, before a roll snapshots it, so a
        snapshot never claims what is not on the store, nor misses what is below it."""
        assert not self._closed, "append to a closed log"
        run: list[bytearray] = []
        run_headers: list[BatchHeader] = []
        run_bytes = 0
        expected = self.end_offset
        for batch, header in zip(batches, headers, strict=True):
            size = header.size
            if header.base_offset != expected or len(batch) != size:
                raise CorruptBatch(f"batch at {header.base_offset} does not follow offset {expected}")
            if self._should_roll(header, run_bytes):
                if run:
                    self._write_run(run, run_headers)
                    run, run_headers, run_bytes = [], [], 0
                self._roll()
            if self._active_since_ms is None:
                self._active_since_ms = self.now_ms()
            run.append(batch)
            run_headers.append(header)
            run_bytes += size
            expected += header.last_offset_delta + 1
        if run:
            self._write_run(run, run_headers)
        if sync:
            self.flush()

    def _write_run(self, batches: list[bytearray], headers: list[BatchHeader]) -> None:
        self._active.append_many(batches, headers)
        for batch, header in zip(batches, headers, strict=True):
            self._learn(batch, header)

    def _learn(self, batch: Buffer, header: BatchHeader) -> None:
        """A batch was written to the active segment: producer state takes it, and an ABORT
        marker adds its transaction to the segment's index."""
        completed = self.producer_state.update(header, end_marker(batch, header))
        if completed is not None and completed.aborted:
            self._active.aborted.append(completed.aborted_entry())

    def _should_roll(self, header: BatchHeader, unwritten_bytes: int = 0) -> bool:
        active = self._segments[-1]
        size = active.size_bytes + unwritten_bytes
        if size == 0:
            return False  # never leave an empty segment behind; a huge batch gets its own
        config = self.config
        if size + header.size > config.segment_bytes or not active.fits_offsets(header):
            return True
        since = self._active_since_ms
        if since is None:
            return False
        age_ms = self.now_ms() - since
        return age_ms > config.segment_ms - (self._jitter_ms() if config.segment_jitter_ms > 0 else 0)

    def _jitter_ms(self) -> int:
        """How much sooner than segment_ms the active segment rolls (Kafka's segment.jitter.ms:
        partitions created together do not all roll at once). Kafka draws it at random per
        segment; here it is drawn from the log's path and the segment's base offset, so it is
        as spread out and the same on every open."""
        jitter = min(self.config.segment_jitter_ms, self.config.segment_ms - 1)
        if jitter <= 0:
            return 0
        return zlib.crc32(f"{self.path}@{self._active.base_offset}".encode()) % jitter

    def _roll(self, snapshot: bool = True) -> None:
        """Seal the active segment and start the next. The sealed log is synced first, so
        recovery may trust it from then on. The rest of sealing (indexes written, log closed)
        and the producer snapshot at the boundary (which only spares a later recovery some
        replay) are needed by no read: when the store's writes are slow, they run on a
        thread of their own while appends go on in the new segment (on HDFS
        they are four files the NameNode completes, each about half a second, see
        docs/decisions.md). One roll's work runs at a time, and whatever deletes or rewrites
        segments waits for it first (_settle)."""
        self._settle()
        work = self._start_sealing(snapshot)
        if self.store.slow_writes:
            self._sealing = in_background(work, "martlet-seal")
            self._sealing.add_done_callback(functools.partial(_log_failure, self._active.log_path))
        else:
            work()
        segment = Segment(self.store, self.path, self.end_offset, self.config)
        if not self.store.create_exclusive(segment.log_path):
            # Only another writer of this log makes a segment where ours would go: in a cluster,
            # the partition's next owner (see start_own_segment). This writer is fenced.
            raise FileExistsError(f"{segment.log_path} exists: another node writes {self.path} now")
        segment.open_for_append()
        self._segments.append(segment)
        self._active_since_ms = None

    def start_own_segment(self) -> None:
        """A new owner's first step (a cluster): seal the segment the last owner was writing
        and create the next one exclusively. Every file a writer appends to was then created
        by it or recovered from the last writer (HDFS lease recovery fences that writer), and a
        segment file is created once: a fenced writer's roll fails instead of starting a file
        the new owner does not know about. FileExistsError if the last owner rolled after this
        node listed the log: open it again (that segment is then recovered, and its writer fenced).
        The sealing itself goes on in the background, as after any roll: a move on HDFS then waits
        for none of its closes (kill -9 to the first acknowledged produce, five kills on three
        brokers: p50 2.38-2.41 s before, 1.96-2.08 s after)."""
        if self._active.size_bytes:
            self._roll(snapshot=False)  # no snapshot: recovery replays from an older one

    def _start_sealing(self, snapshot: bool) -> Callable[[], None]:
        """Finish the active segment's time index and sync its log (recovery may trust it
        from then on); returns the rest of sealing it (_finish_seal), with the producer state
        at its end if `snapshot`."""
        sealed, base = self._active, self.end_offset
        sealed.finish_time_index()
        sealed.flush()
        state = self.producer_state.to_bytes(base) if snapshot else None
        return functools.partial(self._finish_seal, sealed, base, state)

    def _finish_seal(self, sealed: Segment, base: int, state: bytes | None) -> None:
        """Sealing after the sealed log is synced (a roll, a close): its indexes, its close and
        the producer snapshot at `base`, side by side when the store's writes are slow (on
        HDFS each waits about half a second for the NameNode to complete its file). A snapshot
        waits for a transaction index still to be written: recovery trusts the .txnindex
        files of the segments below the snapshot it starts from."""
        writes = sealed.finishing_writes()
        snapshot: list[Callable[[], None]] = []
        if state is not None:
            snapshot.append(functools.partial(self._save_producer_snapshot, base, state))
        if sealed.aborted_unsaved:
            self._together(writes)
            self._together(snapshot)
        else:
            self._together(writes + snapshot)

    def _together(self, calls: list[Callable[[], None]]) -> None:
        """Run `calls`, side by side on a store whose writes are slow; raise the first error
        once all are done."""
        if not self.store.slow_writes:
            for call in calls:
                call()
            return
        done = [in_background(call, "martlet-seal") for call in calls[1:]]
        try:
            if calls:
                calls[0]()
        finally:
            wait(done)
        for future in done:
            future.result()

    def _settle(self) -> None:
        """Wait for the last roll's work left to a thread, and raise its error here: the
        caller then fails as it would have had the roll done that work itself (a flush that
        fails has its log abandoned and opened again). Bounded like any store call."""
        sealing, self._sealing = self._sealing, None
        if sealing is not None:
            sealing.result()

    def _save_producer_snapshot(self, offset: int, state: bytes) -> None:
        path = offset_file(self.path, offset, PRODUCERS_SUFFIX)
        write_atomically(self.store, path, state)
        for old in offsets_with_suffix(self.store, self.path, PRODUCERS_SUFFIX)[:-SNAPSHOTS_KEPT]:
            self.store.delete(offset_file(self.path, old, PRODUCERS_SUFFIX))

    def _first_batch_ms(self) -> int | None:
        """When the active segment's age started: its first batch's timestamp, but never in
        the future (a client's clock must not keep a segment from rolling)."""
        active = self._active
        if active.size_bytes == 0:
            return None
        timestamp = parse_header(self.store.read(active.log_path, 0, HEADER_BYTES)).max_timestamp
        now = self.now_ms()
        return min(timestamp, now) if timestamp >= 0 else now

    # -- reading ---------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int) -> Buffer:
        """Whole batches from the one holding `offset`, up to max_bytes, but at least one."""
        self._check_offset(offset)
        parts: list[Buffer] = []
        remaining = max_bytes
        for segment in self._segments[self._segment_index(offset) :]:
            data, offset = segment.read(max(offset, segment.base_offset), remaining, at_least_one=not parts)
            parts.append(data)
            remaining -= len(data)
            if offset < segment.next_offset or remaining <= 0:
                break  # stopped inside this segment: what follows would leave a hole
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def batch_at(self, offset: int) -> bytes | None:
        """The batch holding `offset`, None if no readable batch does."""
        if not self.start_offset <= offset < self.end_offset:
            return None
        segment = self._segments[self._segment_index(offset)]
        found = segment.locate(offset)
        return segment.batch_bytes(*found) if found is not None else None

    def batch_at_time(self, timestamp_ms: int) -> bytes | None:
        """The first readable batch whose max_timestamp >= timestamp_ms."""
        for segment in self._segments:
            if segment.next_offset <= self.start_offset:
                continue
            found = segment.find_time(timestamp_ms, self.start_offset)
            if found is not None:
                return segment.batch_bytes(*found)
        return None

    def aborted_transactions(self) -> list[AbortedTxn]:
        """Every aborted transaction whose marker the log holds, in marker order."""
        return [entry for segment in self._segments for entry in segment.aborted]

    def _check_offset(self, offset: int) -> None:
        if not self.start_offset <= offset <= self.end_offset:
            raise OffsetOutOfRange(f"offset {offset} outside [{self.start_offset}, {self.end_offset}]")

    def _segment_index(self, offset: int) -> int:
        return bisect_right(self._segments, offset, key=lambda segment: segment.base_offset) - 1

    # -- deleting --------------------------------------------------------------------------

    def delete_records(self, before_offset: int) -> int:
        """Make offsets below before_offset unreadable; returns the new start_offset."""
        if before_offset > self.end_offset:
            raise OffsetOutOfRange(f"cannot delete up to {before_offset}, log ends at {self.end_offset}")
        if before_offset > self.start_offset:
            self._move_start(before_offset)
        return self.start_offset

    def apply_retention(self) -> int:
        """Delete the oldest segments that retention_ms or retention_bytes condemn."""
        deleted = 0
        while len(self._segments) > 1 and self._expired(self._segments[0]):
            self._move_start(max(self.start_offset, self._segments[1].base_offset))
            deleted += 1
        return deleted

    def _expired(self, segment: Segment) -> bool:
        if not self.config.deletes:
            return False  # a compacted-only log keeps every segment
        retention_ms, retention_bytes = self.config.retention_ms, self.config.retention_bytes
        too_old = retention_ms >= 0 and self.now_ms() - segment.max_timestamp > retention_ms
        too_big = retention_bytes >= 0 and self.size_bytes() - segment.size_bytes >= retention_bytes
        return too_old or too_big

    def _move_start(self, offset: int) -> None:
        """Checkpoint first, then delete: a crash in between only leaves files that the next
        open deletes again."""
        self._settle()  # the segment a roll is still sealing may be among those deleted
        self.start_offset = offset
        write_start_offset(self.store, self.path, offset)
        self._delete_segments_below_start()

    def _delete_segments_below_start(self) -> None:
        while len(self._segments) > 1 and self._segments[0].next_offset <= self.start_offset:
            self._segments.pop(0).delete()
        first = self._segments[0].base_offset
        for offset in offsets_with_suffix(self.store, self.path, PRODUCERS_SUFFIX):
            if offset < first:
                self.store.delete(offset_file(self.path, offset, PRODUCERS_SUFFIX))

    # -- compaction (compaction.py; the caller holds the partition's lock around each) -------

    def compaction_plan(self) -> Plan | None:
        """The pass a compacted log is due, None if none is (or the log is not compacted)."""
        if not self.config.compacted:
            return None
        self._settle()  # a pass swaps files of sealed segments: none may still be being written
        return plan(self._segments, self.cleaner_offset, self.config, self.now_ms(),
                    self.producer_state.first_open_offset(),
                    Aborted(entry for segment in self._segments for entry in segment.aborted))

    def producers_last(self) -> dict[int, int]:
        """The batch a pass keeps of each producer, even emptied (Kafka's rule): its last batch
        of records at its epoch, which holds its last sequence, or else its last marker, which
        holds its epoch."""
        last = {pid: entry.batches[-1].base_offset if entry.batches else entry.last_marker
                for pid, entry in self.producer_state.producers.items()}
        return {pid: offset for pid, offset in last.items() if offset >= 0}

    def swap_cleaned(self, done: list[Rewritten], cleaner_offset: int) -> int:
        """Serve the segments a pass rewrote (those retention has not deleted meanwhile) and
        move the cleaner offset; returns how many were swapped."""
        swapped = 0
        for rewritten in done:
            if rewritten.new is None:
                continue
            index = next((i for i, s in enumerate(self._segments) if s is rewritten.old), None)
            if index is None or index == len(self._segments) - 1:
                discard(self.store, rewritten)
                continue
            swap(self.store, rewritten)
            self._segments[index] = rewritten.new
            swapped += 1
        self.cleaner_offset = max(self.cleaner_offset, cleaner_offset)
        write_cleaner_offset(self.store, self.path, self.cleaner_offset)
        return swapped

    # -- durability ------------------------------------------------------------------------

    def flush(self) -> None:
        """Make every appended batch durable (sync the active segment's log)."""
        self._active.flush()

    def abandon(self) -> None:
        """Stop using the files without writing or closing anything (the store failed, or a
        call hangs): the next open recovers from what the store kept."""
        self._closed = True
        self._active.abandon()

    def discard(self) -> None:
        """Close the active segment's file and nothing more, for a log whose topic is being
        deleted: sealing, the producer snapshot and the clean-shutdown mark would be written
        only to be deleted (on HDFS each is a file the NameNode completes, about half a second)."""
        if self._closed:
            return
        self._closed = True
        sealing, self._sealing = self._sealing, None
        if sealing is not None:
            wait([sealing])  # so no file of it appears after the topic's; its outcome no longer matters
        self._active.close()

    def close(self) -> None:
        """Flush, snapshot producer state and mark the shutdown clean, so the next open
        trusts the files after cheap checks instead of scanning the active segment."""
        if self._closed:
            return
        self._settle()
        self._start_sealing(snapshot=True)()
        write_atomically(self.store, join(self.path, CLEAN_SHUTDOWN_FILE), b"")
        self._closed = True


def check_handed(batch: bytearray, header: BatchHeader) -> None:
    """Check that a caller's batch and the header handed with it agree before the batch
    takes an offset. The CRC is not computed again: a produced batch passed
    martlet.records.validate (its one CRC pass) and the engine's own batches are built with
    a CRC; recovery and consumers check it on the way back from the store."""
    size = header.size
    if len(batch) != size or size < HEADER_BYTES:
        raise CorruptBatch(f"{len(batch)} batch bytes handed with a header of a {size}-byte batch")
    if not _same_content(header_fields(batch), header):
        raise CorruptBatch("batch bytes do not match the header given with them")
    if header.magic != MAGIC or header.last_offset_delta < 0:
        raise CorruptBatch(f"not a storable batch: {header}")


def _same_content(a: tuple[int, ...], b: BatchHeader) -> bool:
    """Equal apart from base offset and leader epoch, which callers may patch into the bytes
    after parsing (both lie outside the CRC)."""
    return a[1] == b[1] and a[3:] == b[3:]  # batch_length, then magic onwards (no copies made by _replace)



def _log_failure(what: str, done: Future[None]) -> None:
    """A roll's background work failed: said at once, since nobody may wait for it (a log
    abandoned meanwhile); whoever does wait gets the error too (_settle)."""
    if not done.cancelled() and done.exception() is not None:
        logger.warning("sealing %s failed: %s", what, done.exception())
