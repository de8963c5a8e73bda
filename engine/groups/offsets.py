"""Committed offsets of consumer groups (and their membership records): an in-memory map
persisted through an engine log. One OffsetStore is one shard (shards.py routes groups).

State: group id -> (topic, partition) -> CommittedOffset. Every change is first appended to an
internal PartitionLog at the caller's path as one batch (format in records.py) and only then
applied in memory, so memory never holds what the log lacks. The log's append hands the bytes
to the OS before it returns, so a commit that returned survives kill -9 (not power loss: that
needs a flush). Opening replays the whole log from an empty state; a torn tail was already cut
by the log's recovery, so at most the last change is lost, never one before it.

The same log carries each group's membership records (membership.py): the last one per
group is kept (`memberships`), replayed and compacted like the offsets, so the coordinator
that opens the shard can resume its groups. It also carries the state of the transactional
ids that hash to the shard (records.TxnRecord): the last record per id is kept (`txns`).

A commit request is one batch, so it is applied whole or not at all. Offsets carry the topic's
id at commit time: fetch ignores an entry whose id differs, so a topic deleted and created
again under the same name does not inherit the old topic's offsets.

Two sides, two threads. A change is made in three steps, and the store's methods belong to
one side each, never sharing data with the other:

    state side (memory only; the event loop)   readers, the `*_change` makers, `encode`,
                                               `apply`, `should_compact`, `snapshot`, `compacted`
    log side (store calls; the groups' worker  `append`, `rewrite`, `flush`, `close`
    thread, one call at a time)

make the change and encode it (state side) -> append it (log side) -> apply it (state side).
writer.py runs the log side on the worker thread and keeps the order; the synchronous
mutators here (`commit`, `delete_group`, ..., `compact`) run all three steps in the caller's
thread, for the start-up migration and for tests. The makers take the group's `pending`
changes (submitted, not yet applied) so their decisions see the state as it will be.

Compaction keeps the log near the size of the live state: once the log exceeds
max(COMPACT_GROWTH x live estimate, segment_bytes, 2 x its size after the last compaction), the
live state is written as commit batches into a fresh log at <path>.compact, then swapped in:

    1. write and close <path>.compact          crash: <path> is whole, .compact is discarded
    2. rename <path> -> <path>.old             crash: <path> missing, .compact is complete
    3. rename <path>.compact -> <path>         crash: both exist, <path> is the new log
    4. delete <path>.old

`open` (and the log side's first use after a failed compaction) settles each of those states
(`_settle_compaction`) before it reads the log. `rewrite` takes the state to write as an
argument: writer.py hands it a snapshot, so the loop goes on changing the live one meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace

from ...records.header import BatchHeader, iter_batches
from ..log import LogConfig, PartitionLog
from ..store import Store, join
from ..transactions.types import TxnMetadata
from ..types import TopicPartition
from .membership import GroupGone, GroupRecord, MembershipChange
from .records import (
    Change,
    Commit,
    CommittedOffset,
    DeleteGroup,
    Remove,
    TxnOffsets,
    TxnOffsetsEnd,
    TxnRecord,
    encode,
    from_batch,
    to_batch,
)

__all__ = ["CommittedOffset", "LiveState", "OffsetStore"]

COMPACT_SUFFIX = ".compact"
OLD_SUFFIX = ".old"
COMPACT_GROWTH = 4  # compact once the log is this many times the live state
COMPACT_BATCH_ENTRIES = 1_000  # offsets per batch when the live state is rewritten
SEGMENT_BYTES = 64 * 1024 * 1024  # the log's segment size, and the floor compaction waits for
READ_CHUNK_BYTES = 1 << 20  # how much of the log replay reads at a time
# Rough encoded size of one entry beyond its strings (numbers, quotes, commas), and of one
# group beyond its id (batch header, JSON wrapper). Generous, so the estimate errs high.
ENTRY_OVERHEAD_BYTES = 80
GROUP_OVERHEAD_BYTES = 128

Offsets = dict[TopicPartition, CommittedOffset]


class LiveState:
    """What replaying a log gives: offsets and the last membership record by group, and an
    estimate of the compacted log's size. Memory only; whoever holds it owns it."""

    def __init__(self) -> None:
        self.groups: dict[str, Offsets] = {}
        self.memberships: dict[str, tuple[GroupRecord, int]] = {}  # group -> (record, its encoded size)
        self.txns: dict[str, tuple[TxnRecord, int]] = {}  # transactional id -> (record, its encoded size)
        self.pending: dict[str, dict[int, Offsets]] = {}  # group -> producer id -> offsets of its open transaction
        self.live_bytes = 0  # estimate of the compacted log's size, kept up to date by apply

    def copy(self) -> LiveState:
        """An independent copy (the values themselves are immutable)."""
        twin = LiveState()
        twin.groups = {group_id: dict(offsets) for group_id, offsets in self.groups.items()}
        twin.memberships = dict(self.memberships)
        twin.txns = dict(self.txns)
        twin.pending = {group_id: {pid: dict(offsets) for pid, offsets in by_producer.items()}
                        for group_id, by_producer in self.pending.items()}
        twin.live_bytes = self.live_bytes
        return twin

    def apply(self, change: Change) -> None:
        if isinstance(change, Commit):
            for topic, partition, value in change.offsets:
                self._put(change.group_id, TopicPartition(topic, partition), value)
        elif isinstance(change, Remove):
            for key in change.keys:
                self._drop(change.group_id, key)
        elif isinstance(change, DeleteGroup):
            for key in list(self.groups.get(change.group_id, {})):
                self._drop(change.group_id, key)
        elif isinstance(change, TxnRecord):
            self._set_txn(change)
        elif isinstance(change, TxnOffsets):
            self._stage(change)
        elif isinstance(change, TxnOffsetsEnd):
            self._end(change)
        else:
            self._set_membership(change)

    def changes(self) -> Iterator[Change]:
        """The state as changes that rebuild it: commits of at most COMPACT_BATCH_ENTRIES
        offsets each, then each group's membership record."""
        for group_id, offsets in self.groups.items():
            entries = [(topic, partition, value) for (topic, partition), value in offsets.items()]
            for start in range(0, len(entries), COMPACT_BATCH_ENTRIES):
                yield Commit(group_id, tuple(entries[start : start + COMPACT_BATCH_ENTRIES]))
        for group_id in sorted(self.memberships):
            yield self.memberships[group_id][0]
        for transactional_id in sorted(self.txns):
            yield self.txns[transactional_id][0]
        for group_id, by_producer in self.pending.items():
            for producer_id, offsets in by_producer.items():
                staged = tuple((topic, partition, value) for (topic, partition), value in offsets.items())
                yield TxnOffsets(group_id, producer_id, staged)

    def _stage(self, change: TxnOffsets) -> None:
        staged = self.pending.setdefault(change.group_id, {}).setdefault(change.producer_id, {})
        for topic, partition, value in change.offsets:
            key = TopicPartition(topic, partition)
            old = staged.get(key)
            if old is not None:
                self.live_bytes -= _entry_bytes(key, old)
            staged[key] = value
            self.live_bytes += _entry_bytes(key, value)

    def _end(self, change: TxnOffsetsEnd) -> None:
        by_producer = self.pending.get(change.group_id, {})
        staged = by_producer.pop(change.producer_id, {})
        if not by_producer:
            self.pending.pop(change.group_id, None)
        for key, value in staged.items():
            self.live_bytes -= _entry_bytes(key, value)
            if change.commit:
                self._put(change.group_id, key, value)

    def _set_txn(self, change: TxnRecord) -> None:
        old = self.txns.get(change.transactional_id)
        if old is not None:
            self.live_bytes -= old[1]
        size = len(encode(change)) + GROUP_OVERHEAD_BYTES
        self.txns[change.transactional_id] = (change, size)
        self.live_bytes += size

    def _set_membership(self, change: MembershipChange) -> None:
        old = self.memberships.pop(change.group_id, None)
        if old is not None:
            self.live_bytes -= old[1]
        if not isinstance(change, GroupGone):
            size = len(encode(change)) + GROUP_OVERHEAD_BYTES
            self.memberships[change.group_id] = (change, size)
            self.live_bytes += size

    def _put(self, group_id: str, key: TopicPartition, value: CommittedOffset) -> None:
        offsets = self.groups.get(group_id)
        if offsets is None:
            offsets = self.groups[group_id] = {}
            self.live_bytes += _group_bytes(group_id)
        old = offsets.get(key)
        if old is not None:
            self.live_bytes -= _entry_bytes(key, old)
        offsets[key] = value
        self.live_bytes += _entry_bytes(key, value)

    def _drop(self, group_id: str, key: TopicPartition) -> None:
        """Remove one entry, and the group once it has none (a removal of nothing is a no-op,
        as replaying a tombstone for an offset already gone must be)."""
        offsets = self.groups.get(group_id, {})
        value = offsets.pop(key, None)
        if value is not None:
            self.live_bytes -= _entry_bytes(key, value)
        if not offsets and group_id in self.groups:
            del self.groups[group_id]
            self.live_bytes -= _group_bytes(group_id)


class OffsetStore:
    def __init__(self, store: Store, path: str, now_ms: Callable[[], int], config: LogConfig) -> None:
        self._store = store
        self._path = path
        self._now_ms = now_ms
        self._config = config
        self._state = LiveState()  # state side
        self._compacted_bytes = 0  # state side: log size after this process last compacted it
        self._log: PartitionLog | None = None  # log side; opened at its first use
        self._closed = False

    @classmethod
    def open(
        cls,
        store: Store,
        path: str,
        now_ms: Callable[[], int],
        segment_bytes: int = SEGMENT_BYTES,
    ) -> OffsetStore:
        """Open the offsets log at `path` (created if missing) and rebuild the state from it."""
        offsets = cls.unopened(store, path, now_ms, segment_bytes)
        for change in _replay(offsets._open_log()):
            offsets.apply(change)
        return offsets

    @classmethod
    def unopened(
        cls,
        store: Store,
        path: str,
        now_ms: Callable[[], int],
        segment_bytes: int = SEGMENT_BYTES,
    ) -> OffsetStore:
        """An empty store for a path that holds no log yet, made without a store call: the
        log side creates the log at its first append."""
        path = join(path)
        assert path, "the offsets log needs a path below the store's root"
        # No retention: the log is the state, shrunk only by compaction.
        config = LogConfig(segment_bytes=segment_bytes, retention_ms=-1, retention_bytes=-1)
        return cls(store, path, now_ms, config)

    # -- reading (state side) ----------------------------------------------------------------

    def fetch(self, group_id: str, topic: str, partition: int, topic_id: str) -> CommittedOffset | None:
        """The committed offset, or None if there is none for this incarnation of the topic."""
        value = self._state.groups.get(group_id, {}).get(TopicPartition(topic, partition))
        return value if value is not None and value.topic_id == topic_id else None

    def group_offsets(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        """Every offset of the group, whatever topic id it was committed under (a copy)."""
        return dict(self._state.groups.get(group_id, {}))

    def groups(self) -> list[str]:
        """Groups with at least one committed offset, sorted."""
        return sorted(self._state.groups)

    def has_group(self, group_id: str) -> bool:
        return group_id in self._state.groups

    def membership(self, group_id: str) -> GroupRecord | None:
        entry = self._state.memberships.get(group_id)
        return None if entry is None else entry[0]

    def memberships(self) -> list[GroupRecord]:
        """The last membership record of every group that has one, by group id."""
        memberships = self._state.memberships
        return [memberships[group_id][0] for group_id in sorted(memberships)]

    def txns(self) -> list[TxnMetadata]:
        """The last state of every transactional id recorded here."""
        return [record.meta for record, _ in self._state.txns.values()]

    def txn(self, transactional_id: str) -> TxnMetadata | None:
        entry = self._state.txns.get(transactional_id)
        return None if entry is None else entry[0].meta

    def staging_groups(self, producer_id: int) -> list[str]:
        """The groups in which the producer's open transaction staged offsets."""
        return sorted(group_id for group_id, by_producer in self._state.pending.items() if producer_id in by_producer)

    def has_pending(self, group_id: str, key: TopicPartition) -> bool:
        """Whether an open transaction commits an offset of `key` in the group (OffsetFetch
        with require_stable answers UNSTABLE_OFFSET_COMMIT then, as Kafka)."""
        return any(key in offsets for offsets in self._state.pending.get(group_id, {}).values())

    # -- making changes (state side, pure) ---------------------------------------------------

    def commit_change(self, group_id: str, offsets: list[tuple[str, str, int, CommittedOffset]]) -> Commit | None:
        """Store (topic, topic_id, partition, value) entries as one batch: all or none.

        The tuple's topic_id is the one stored (it replaces value.topic_id if they differ),
        since the caller resolved it from the topic name for this very request."""
        entries = tuple(
            (topic, partition, value if value.topic_id == topic_id else replace(value, topic_id=topic_id))
            for topic, topic_id, partition, value in offsets
        )
        return Commit(group_id, entries) if entries else None

    def txn_offsets_change(self, group_id: str, producer_id: int,
                           offsets: list[tuple[str, str, int, CommittedOffset]]) -> TxnOffsets | None:
        """TxnOffsetCommit: stage offsets in the producer's open transaction."""
        committed = self.commit_change(group_id, offsets)
        return None if committed is None else TxnOffsets(group_id, producer_id, committed.offsets)

    def txn_end_change(self, group_id: str, producer_id: int, commit: bool,
                       pending: Sequence[Change] = ()) -> TxnOffsetsEnd | None:
        """A marker for the producer's transaction: commit or drop what it staged, if anything."""
        staged = producer_id in self._state.pending.get(group_id, {}) or any(
            isinstance(change, TxnOffsets) and change.producer_id == producer_id for change in pending)
        return TxnOffsetsEnd(group_id, producer_id, commit) if staged else None

    def delete_group_change(self, group_id: str, pending: Sequence[Change] = ()) -> DeleteGroup | None:
        """DeleteGroups: forget the group's offsets, if it has (or is about to have) any."""
        committing = any(isinstance(change, Commit) for change in pending)
        return DeleteGroup(group_id) if group_id in self._state.groups or committing else None

    def delete_offsets_change(self, group_id: str, topic: str, partitions: list[int],
                              pending: Sequence[Change] = ()) -> Remove | None:
        """OffsetDelete: forget these partitions' offsets (missing ones are ignored)."""
        present = self._state.groups.get(group_id, {}).keys() | _committed_keys(pending)
        keys = tuple(dict.fromkeys(key for key in (TopicPartition(topic, p) for p in partitions) if key in present))
        return Remove(group_id, keys) if keys else None

    def expiry_changes(self, now_ms: int, retention_ms: int, is_empty: Callable[[str], bool],
                       pending_of: Callable[[str], Sequence[Change]] = lambda group_id: ()) -> list[Remove]:
        """Drop offsets committed at least retention_ms ago, in groups with no members.

        KIP-211: a group's offsets only expire while it is empty, so an active consumer that
        commits rarely keeps them. Each group's removals are one tombstone batch, so a restart
        does not bring them back. An offset with a commit still pending stays (as in Kafka's
        coordinator): the tombstone would land after that newer commit and erase it."""
        assert retention_ms >= 0, "offsets retention must not be negative"
        removals = []
        for group_id in [group_id for group_id in self._state.groups if is_empty(group_id)]:
            committing = _committed_keys(pending_of(group_id))
            keys = tuple(key for key, value in self._state.groups[group_id].items()
                         if value.commit_ms + retention_ms <= now_ms and key not in committing)
            if keys:
                removals.append(Remove(group_id, keys))
        return removals

    def membership_change(self, change: MembershipChange,
                          pending: Sequence[Change] = ()) -> MembershipChange | None:
        """The record to write, or None when the log already ends with it for this group
        (the last pending record, else the applied one); a group never recorded needs no
        GroupGone."""
        latest: MembershipChange | None = self.membership(change.group_id)
        for earlier in pending:
            if isinstance(earlier, (Commit, Remove, DeleteGroup, TxnRecord, TxnOffsets, TxnOffsetsEnd)):
                continue
            latest = earlier
        if isinstance(change, GroupGone):
            return None if latest is None or isinstance(latest, GroupGone) else change
        return None if change == latest else change

    def encode(self, change: Change) -> tuple[bytearray, BatchHeader]:
        """The batch recording `change`; ValueError if it breaks the format's invariants."""
        return to_batch(change, self._now_ms())

    # -- applying (state side) -----------------------------------------------------------------

    def apply(self, change: Change) -> None:
        """Take in a change whose batch is in the log."""
        self._state.apply(change)

    def should_compact(self, log_bytes: int) -> bool:
        """Cheap: a few integer comparisons. The last term keeps an estimate that runs low
        (metadata full of characters JSON escapes) from compacting on every write."""
        floor = max(COMPACT_GROWTH * self._state.live_bytes, self._config.segment_bytes, 2 * self._compacted_bytes)
        return log_bytes > floor

    def snapshot(self) -> LiveState:
        """A copy of the applied state, for `rewrite` to write while this one moves on."""
        return self._state.copy()

    def compacted(self, log_bytes: int) -> None:
        """The log was rewritten and is now `log_bytes` long."""
        self._compacted_bytes = log_bytes

    # -- the log (log side) -----------------------------------------------------------------

    def append(self, batch: bytearray, header: BatchHeader) -> int:
        """Append one encoded change; the log's size after it."""
        log = self._open_log()
        try:
            log.append(batch, header)
        except BaseException:
            # The store failed the write (an HDFS writer whose pipeline failed is abandoned and
            # takes no more writes): drop this log, so the next append reopens it, which cuts
            # anything half written, as a partition's log is reopened after a failed flush.
            self._drop_log(log)
            raise
        return log.size_bytes()

    @property
    def log_open(self) -> bool:
        """The log side holds an open log (its next append needs no open, and so no lease
        recovery)."""
        return self._log is not None

    def abandon_log(self) -> None:
        """Give up on the log a stuck store call holds (any thread; takes no lock): nothing
        is written or closed, and the next use of the log side opens it again, which
        recovers it as the store kept it (on HDFS, lease recovery fences the stuck writer)."""
        log = self._log
        if log is not None:
            self._drop_log(log)

    def _drop_log(self, log: PartitionLog) -> None:
        if self._log is log:  # a stuck call failing late must not drop the log opened after it
            self._log = None
        log.abandon()

    def rewrite(self, state: LiveState) -> int:
        """Replace the log by one holding `state` (steps in the module docstring), which must
        be what the log holds now; the new log's size."""
        log = self._open_log()
        compact_path, old_path = self._path + COMPACT_SUFFIX, self._path + OLD_SUFFIX
        for leftover in (compact_path, old_path):  # settled on open: only garbage can be there
            self._store.delete(leftover)
        fresh = PartitionLog.open(self._store, compact_path, self._config, self._now_ms)
        for change in state.changes():
            fresh.append(*to_batch(change, self._now_ms()))
        fresh.close()  # durable and marked clean before it may replace the current log
        self._log = None  # a failure from here on is settled by the next _open_log
        log.close()
        self._store.rename(self._path, old_path)
        self._store.rename(compact_path, self._path)
        self._store.delete(old_path)
        return self._open_log().size_bytes()

    def _open_log(self) -> PartitionLog:
        assert not self._closed, "offset store is closed"
        if self._log is None:
            _settle_compaction(self._store, self._path)
            self._log = PartitionLog.open(self._store, self._path, self._config, self._now_ms)
        return self._log

    def flush(self) -> None:
        """Make every change so far durable (also against power loss)."""
        self._open_log().flush()

    def close(self) -> None:
        self._closed = True
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- changing in the caller's thread (make, append, apply) --------------------------------

    def commit(self, group_id: str, offsets: list[tuple[str, str, int, CommittedOffset]]) -> None:
        self._write(self.commit_change(group_id, offsets))

    def delete_group(self, group_id: str) -> None:
        self._write(self.delete_group_change(group_id))

    def delete_offsets(self, group_id: str, topic: str, partitions: list[int]) -> None:
        self._write(self.delete_offsets_change(group_id, topic, partitions))

    def expire(self, now_ms: int, retention_ms: int, is_empty: Callable[[str], bool]) -> int:
        """Returns how many offsets were removed."""
        removals = self.expiry_changes(now_ms, retention_ms, is_empty)
        for removal in removals:
            self._write(removal)
        return sum(len(removal.keys) for removal in removals)

    def record_membership(self, change: MembershipChange) -> None:
        """Persist a group's new membership (or that it is gone)."""
        self._write(self.membership_change(change))

    def record_txn(self, meta: TxnMetadata) -> None:
        self._write(TxnRecord(meta))

    def commit_in_txn(self, group_id: str, producer_id: int,
                      offsets: list[tuple[str, str, int, CommittedOffset]]) -> None:
        self._write(self.txn_offsets_change(group_id, producer_id, offsets))

    def end_txn(self, group_id: str, producer_id: int, commit: bool) -> None:
        self._write(self.txn_end_change(group_id, producer_id, commit))

    def compact(self) -> None:
        """Rewrite the live state into a fresh log and swap it in."""
        self.compacted(self.rewrite(self._state))

    def _write(self, change: Change | None) -> None:
        """Log first, then memory; then compact if the log has outgrown the state."""
        if change is None:
            return
        log_bytes = self.append(*self.encode(change))
        self.apply(change)
        if self.should_compact(log_bytes):
            self.compact()


def _committed_keys(changes: Iterable[Change]) -> set[TopicPartition]:
    """The offsets these changes commit."""
    return {TopicPartition(topic, partition) for change in changes if isinstance(change, Commit)
            for topic, partition, _ in change.offsets}


def _replay(log: PartitionLog) -> Iterator[Change]:
    """Every change in the log, oldest first."""
    offset = log.start_offset
    while offset < log.end_offset:
        data = memoryview(log.read(offset, READ_CHUNK_BYTES))
        before = offset
        for position, header in iter_batches(data):
            yield from_batch(data[position : position + header.size], header)
            offset = header.next_offset
        assert offset > before, f"offsets log returned no whole batch at {before}"


def _settle_compaction(store: Store, path: str) -> None:
    """Finish a compaction that got past its first rename, or discard one that did not."""
    compact_path, old_path = path + COMPACT_SUFFIX, path + OLD_SUFFIX
    if store.exists(old_path) and not store.exists(path):
        # Crashed between the renames: the compacted log is complete (closed before step 2).
        store.rename(compact_path if store.exists(compact_path) else old_path, path)
    store.delete(old_path)
    store.delete(compact_path)


def _entry_bytes(key: TopicPartition, value: CommittedOffset) -> int:
    metadata = value.metadata or ""
    return len(key[0].encode()) + len(value.topic_id.encode()) + len(metadata.encode()) + ENTRY_OVERHEAD_BYTES


def _group_bytes(group_id: str) -> int:
    return len(group_id.encode()) + GROUP_OVERHEAD_BYTES
