"""Committed offsets as a coordinator machine: the state of one shard, and the makers that
turn a request into the record to write.

State: group id -> (topic, partition) -> CommittedOffset, and the offsets each producer's open
transaction staged (`pending`). A commit request is one record, so it is applied whole or not
at all. Offsets carry the topic's id at commit time: readers ignore an entry whose id differs,
so a topic deleted and created again under the same name does not inherit the old topic's
offsets.

The makers are pure: they read the applied state and the group's records still queued
(`pending`, coordinator/writer.py), so their decisions see the state as it will be.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace

from ..coordinator.machine import Machine
from ..types import CommittedOffset, NewOffsets, TopicPartition
from .records import KINDS, Commit, DeleteGroup, OffsetRecord, Remove, TxnOffsets, TxnOffsetsEnd

NAME = "offsets"
COMPACT_BATCH_ENTRIES = 1_000  # offsets per record when the live state is rewritten
# Rough encoded size of one entry beyond its strings (numbers, quotes, commas), and of one
# group beyond its id (batch header, JSON wrapper). Generous, so the estimate errs high.
ENTRY_OVERHEAD_BYTES = 80
GROUP_OVERHEAD_BYTES = 128

Offsets = dict[TopicPartition, CommittedOffset]


class OffsetsState:
    def __init__(self) -> None:
        self.groups: dict[str, Offsets] = {}
        self.pending: dict[str, dict[int, Offsets]] = {}  # group -> producer id -> offsets of its open transaction
        self.live_bytes = 0  # estimate of the records' size, kept up to date by apply

    def copy(self) -> OffsetsState:
        twin = OffsetsState()
        twin.groups = {group_id: dict(offsets) for group_id, offsets in self.groups.items()}
        twin.pending = {group_id: {pid: dict(offsets) for pid, offsets in by_producer.items()}
                        for group_id, by_producer in self.pending.items()}
        twin.live_bytes = self.live_bytes
        return twin

    def apply(self, record: object) -> None:
        if isinstance(record, Commit):
            for topic, partition, value in record.offsets:
                self._put(record.group_id, TopicPartition(topic, partition), value)
        elif isinstance(record, Remove):
            for key in record.keys:
                self._drop(record.group_id, key)
        elif isinstance(record, DeleteGroup):
            for key in list(self.groups.get(record.group_id, {})):
                self._drop(record.group_id, key)
        elif isinstance(record, TxnOffsets):
            self._stage(record)
        elif isinstance(record, TxnOffsetsEnd):
            self._end(record)
        else:
            raise TypeError(f"not an offsets record: {record!r}")

    def records(self) -> Iterator[OffsetRecord]:
        """Commits of at most COMPACT_BATCH_ENTRIES offsets each, then what transactions staged."""
        for group_id, offsets in self.groups.items():
            entries = [(topic, partition, value) for (topic, partition), value in offsets.items()]
            for start in range(0, len(entries), COMPACT_BATCH_ENTRIES):
                yield Commit(group_id, tuple(entries[start : start + COMPACT_BATCH_ENTRIES]))
        for group_id, by_producer in self.pending.items():
            for producer_id, offsets in by_producer.items():
                staged = tuple((topic, partition, value) for (topic, partition), value in offsets.items())
                yield TxnOffsets(group_id, producer_id, staged)

    # -- reading

    def fetch(self, group_id: str, topic: str, partition: int, topic_id: str) -> CommittedOffset | None:
        """The committed offset, or None if there is none for this incarnation of the topic."""
        value = self.groups.get(group_id, {}).get(TopicPartition(topic, partition))
        return value if value is not None and value.topic_id == topic_id else None

    def staging_groups(self, producer_id: int) -> list[str]:
        """The groups in which the producer's open transaction staged offsets."""
        return sorted(group_id for group_id, by_producer in self.pending.items() if producer_id in by_producer)

    def has_pending(self, group_id: str, key: TopicPartition) -> bool:
        """Whether an open transaction commits an offset of `key` in the group."""
        return any(key in offsets for offsets in self.pending.get(group_id, {}).values())

    # -- making records (pure)

    def txn_end(self, group_id: str, producer_id: int, commit: bool,
                pending: Sequence[object] = ()) -> TxnOffsetsEnd | None:
        """A marker for the producer's transaction: commit or drop what it staged, if anything."""
        staged = producer_id in self.pending.get(group_id, {}) or any(
            isinstance(record, TxnOffsets) and record.producer_id == producer_id for record in pending)
        return TxnOffsetsEnd(group_id, producer_id, commit) if staged else None

    def delete_group(self, group_id: str, pending: Sequence[object] = ()) -> DeleteGroup | None:
        """DeleteGroups: forget the group's offsets, if it has (or is about to have) any."""
        committing = any(isinstance(record, Commit) for record in pending)
        return DeleteGroup(group_id) if group_id in self.groups or committing else None

    def delete_offsets(self, group_id: str, topic: str, partitions: list[int],
                       pending: Sequence[object] = ()) -> Remove | None:
        """OffsetDelete: forget these partitions' offsets (missing ones are ignored)."""
        present = self.groups.get(group_id, {}).keys() | _committed_keys(pending)
        keys = tuple(dict.fromkeys(key for key in (TopicPartition(topic, p) for p in partitions) if key in present))
        return Remove(group_id, keys) if keys else None

    def expired(self, now_ms: int, retention_ms: int, is_empty: Callable[[str], bool],
                pending_of: Callable[[str], Sequence[object]] = lambda group_id: ()) -> list[Remove]:
        """Drop offsets committed at least retention_ms ago, in groups with no members.

        KIP-211: a group's offsets only expire while it is empty, so an active consumer that
        commits rarely keeps them. Each group's removals are one tombstone record, so a restart
        does not bring them back. An offset with a commit still pending stays (as in Kafka's
        coordinator): the tombstone would land after that newer commit and erase it."""
        assert retention_ms >= 0, "offsets retention must not be negative"
        removals = []
        for group_id in [group_id for group_id in self.groups if is_empty(group_id)]:
            committing = _committed_keys(pending_of(group_id))
            keys = tuple(key for key, value in self.groups[group_id].items()
                         if value.commit_ms + retention_ms <= now_ms and key not in committing)
            if keys:
                removals.append(Remove(group_id, keys))
        return removals

    # -- applying

    def _stage(self, record: TxnOffsets) -> None:
        staged = self.pending.setdefault(record.group_id, {}).setdefault(record.producer_id, {})
        for topic, partition, value in record.offsets:
            key = TopicPartition(topic, partition)
            old = staged.get(key)
            if old is not None:
                self.live_bytes -= _entry_bytes(key, old)
            staged[key] = value
            self.live_bytes += _entry_bytes(key, value)

    def _end(self, record: TxnOffsetsEnd) -> None:
        by_producer = self.pending.get(record.group_id, {})
        staged = by_producer.pop(record.producer_id, {})
        if not by_producer:
            self.pending.pop(record.group_id, None)
        for key, value in staged.items():
            self.live_bytes -= _entry_bytes(key, value)
            if record.commit:
                self._put(record.group_id, key, value)

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


def commit(group_id: str, offsets: NewOffsets) -> Commit | None:
    """Store (topic, topic_id, partition, value) entries as one record: all or none.

    The tuple's topic_id is the one stored (it replaces value.topic_id if they differ), since
    the caller resolved it from the topic name for this very request."""
    entries = tuple(
        (topic, partition, value if value.topic_id == topic_id else replace(value, topic_id=topic_id))
        for topic, topic_id, partition, value in offsets
    )
    return Commit(group_id, entries) if entries else None


def txn_offsets(group_id: str, producer_id: int, offsets: NewOffsets) -> TxnOffsets | None:
    """TxnOffsetCommit: stage offsets in the producer's open transaction."""
    committed = commit(group_id, offsets)
    return None if committed is None else TxnOffsets(group_id, producer_id, committed.offsets)


MACHINE = Machine(NAME, KINDS, OffsetsState)


def _committed_keys(records: Iterable[object]) -> set[TopicPartition]:
    """The offsets these records commit."""
    return {TopicPartition(topic, partition) for record in records if isinstance(record, Commit)
            for topic, partition, _ in record.offsets}


def _entry_bytes(key: TopicPartition, value: CommittedOffset) -> int:
    metadata = value.metadata or ""
    return len(key[0].encode()) + len(value.topic_id.encode()) + len(metadata.encode()) + ENTRY_OVERHEAD_BYTES


def _group_bytes(group_id: str) -> int:
    return len(group_id.encode()) + GROUP_OVERHEAD_BYTES
