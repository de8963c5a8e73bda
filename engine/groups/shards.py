"""Committed offsets and group records split into shards, each its own log.

A group lives in shard `shard_of(group_id, count)`: Kafka's partitionFor, the absolute value
of Java's String.hashCode of the group id modulo the shard count, so with Kafka's default of
50 a group sits in the same shard number as in `__consumer_offsets`. Python's hash() is
salted per process, so it could not be used: every process must agree.

Each shard is an OffsetStore (offsets.py) with its own log, replayed on its own, so different
processes can own different shards; the shard is what a coordinator owns (cluster.py). This
process opens only the shards its ClusterView says it owns.

Threads: `open` (start-up, before anything is served) opens and replays the existing shards
and migrates a legacy log in the caller's thread. Once serving, reads answer from memory on
the event loop, and every change goes through the OffsetWriter (writer.py): made on the loop,
appended by the groups' worker thread, applied on the loop; the mutators return once their
change is applied. A shard first written after start-up is made empty on the loop, without a
store call, and its log is created by the worker thread at the first append.

Layout under the store root:
    internal/group-shards/count      the shard count, written once when the layout is created;
                                     the setting only applies to a new data dir, since
                                     changing it would move groups away from their records
    internal/group-shards/<n>/       shard n's log, created on the shard's first write
    internal/group-shards/<n>.compact, <n>.old
                                     a compaction under way (offsets.py); open settles it

Upgrade: a data dir written before shards has one log for every group at
`internal/group-offsets/`. Opening migrates it: its live offsets and records are appended
to their shards, the shards are flushed, then the old log is deleted. A crash before the
delete repeats the migration, which is harmless (commits are upserts of the same values).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from ..errors import InvalidConfig
from ..store import Store
from ..store.atomic import read_whole, write_atomically
from ..transactions.types import TxnMetadata
from ..types import TopicPartition
from .membership import GroupGone, GroupRecord, MembershipChange
from .offsets import COMPACT_SUFFIX, OLD_SUFFIX, SEGMENT_BYTES, CommittedOffset, OffsetStore
from .records import Change, TxnRecord
from .writer import OffsetWriter

SHARDS_DIR = "internal/group-shards"
COUNT_PATH = f"{SHARDS_DIR}/count"
LEGACY_PATH = "internal/group-offsets"
SHARDS_DEFAULT = 50  # Kafka's offsets.topic.num.partitions
SHARDS_MAX = 10_000


def shard_of(group_id: str, count: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode()) % count: stable across processes and runs."""
    value = 0
    encoded = group_id.encode("utf-16-be", "surrogatepass")
    for index in range(0, len(encoded), 2):  # Java hashes UTF-16 code units
        value = (31 * value + (encoded[index] << 8 | encoded[index + 1])) & 0xFFFFFFFF
    signed = value - (1 << 32) if value >= 1 << 31 else value
    return (0 if signed == -(1 << 31) else abs(signed)) % count


class OffsetShards:
    """Routes each group to its shard's OffsetStore: reads from memory, changes through the
    writer (their awaitables resolve once the change is applied)."""

    def __init__(self, store: Store, now_ms: Callable[[], int], count: int,
                 owns_shard: Callable[[int], bool], segment_bytes: int) -> None:
        self._store = store
        self._now_ms = now_ms
        self.count = count
        self._owns_shard = owns_shard
        self._segment_bytes = segment_bytes
        self._shards: dict[int, OffsetStore] = {}
        self._writer = OffsetWriter()

    @classmethod
    def open(cls, store: Store, now_ms: Callable[[], int], count: int,
             owns_shard: Callable[[int], bool] = lambda shard: True,
             segment_bytes: int = SEGMENT_BYTES) -> OffsetShards:
        """Open the owned shards that exist, after migrating a legacy single log."""
        shards = cls(store, now_ms, _settle_count(store, count), owns_shard, segment_bytes)
        for number in _shard_numbers(store.list(SHARDS_DIR)):
            if number < shards.count and owns_shard(number):
                shards._open_shard(number)
        if any(store.exists(LEGACY_PATH + suffix) for suffix in ("", COMPACT_SUFFIX, OLD_SUFFIX)):
            shards._migrate_legacy()  # (a compaction it crashed in is settled by its open)
        return shards

    def shard_of(self, group_id: str) -> int:
        return shard_of(group_id, self.count)

    # -- reading

    def fetch(self, group_id: str, topic: str, partition: int, topic_id: str) -> CommittedOffset | None:
        shard = self._existing(group_id)
        return None if shard is None else shard.fetch(group_id, topic, partition, topic_id)

    def group_offsets(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        shard = self._existing(group_id)
        return {} if shard is None else shard.group_offsets(group_id)

    def groups(self) -> list[str]:
        return sorted(group_id for shard in self._shards.values() for group_id in shard.groups())

    def has_group(self, group_id: str) -> bool:
        shard = self._existing(group_id)
        return shard is not None and shard.has_group(group_id)

    def membership(self, group_id: str) -> GroupRecord | None:
        """The group's last membership record, if it has one."""
        shard = self._existing(group_id)
        return None if shard is None else shard.membership(group_id)

    def memberships(self) -> list[GroupRecord]:
        records = [record for shard in self._shards.values() for record in shard.memberships()]
        return sorted(records, key=lambda record: record.group_id)

    def txns(self, number: int | None = None) -> list[TxnMetadata]:
        """The recorded state of every transactional id in shard `number`, or in every shard
        served here."""
        shards = self._shards.values() if number is None else [s for n, s in self._shards.items() if n == number]
        return [meta for shard in shards for meta in shard.txns()]

    def txn(self, transactional_id: str) -> TxnMetadata | None:
        shard = self._existing(transactional_id)
        return None if shard is None else shard.txn(transactional_id)

    # -- changing (event loop)

    def record_txn(self, meta: TxnMetadata) -> Awaitable[None]:
        """Queue a transactional id's new state; await the result to know it is written."""
        return self._writer.submit(self._shard(meta.transactional_id), TxnRecord(meta))

    async def commit(self, group_id: str, offsets: list[tuple[str, str, int, CommittedOffset]]) -> None:
        if offsets:
            shard = self._shard(group_id)
            await self._write(shard, shard.commit_change(group_id, offsets))

    async def commit_txn_offsets(self, group_id: str, producer_id: int,
                                 offsets: list[tuple[str, str, int, CommittedOffset]]) -> None:
        if offsets:
            shard = self._shard(group_id)
            await self._write(shard, shard.txn_offsets_change(group_id, producer_id, offsets))

    async def end_txn_in_shard(self, number: int, producer_id: int, commit: bool) -> None:
        """A transaction marker for shard `number`: end the producer's staged offsets in every
        group of the shard (a producer has one transaction open at a time)."""
        shard = self._shards.get(number)
        if shard is None:
            return
        ends = [shard.txn_end_change(group_id, producer_id, commit, self._writer.pending(group_id))
                for group_id in shard.staging_groups(producer_id)]
        await asyncio.gather(*(self._write(shard, end) for end in ends))

    def has_pending(self, group_id: str, key: TopicPartition) -> bool:
        shard = self._existing(group_id)
        return shard is not None and shard.has_pending(group_id, key)

    async def delete_group(self, group_id: str) -> None:
        shard = self._existing(group_id)
        if shard is not None:
            await self._write(shard, shard.delete_group_change(group_id, self._writer.pending(group_id)))

    async def delete_offsets(self, group_id: str, topic: str, partitions: list[int]) -> None:
        shard = self._existing(group_id)
        if shard is not None:
            pending = self._writer.pending(group_id)
            await self._write(shard, shard.delete_offsets_change(group_id, topic, partitions, pending))

    async def expire(self, now_ms: int, retention_ms: int, is_empty: Callable[[str], bool]) -> int:
        """Remove expired offsets (OffsetStore.expiry_changes); how many were removed."""
        removals = [(shard, removal) for shard in list(self._shards.values())
                    for removal in shard.expiry_changes(now_ms, retention_ms, is_empty, self._writer.pending)]
        await asyncio.gather(*(self._writer.submit(shard, removal) for shard, removal in removals))
        return sum(len(removal.keys) for _, removal in removals)

    def record_membership(self, change: MembershipChange) -> Awaitable[None] | None:
        """Queue a group's new membership (or that it is gone) now; None if its log already
        ends with it. Await the result to know it is written."""
        if isinstance(change, GroupGone):
            shard = self._existing(change.group_id)
            if shard is None:  # a group never recorded needs no tombstone
                return None
        else:
            shard = self._shard(change.group_id)
        record = shard.membership_change(change, self._writer.pending(change.group_id))
        return None if record is None else self._writer.submit(shard, record)

    async def wait_written(self, timeout_s: float | None = None) -> bool:
        """Until every change queued so far is written and applied (or failed), or
        `timeout_s` passed; True if all had."""
        return await self._writer.wait_written(timeout_s)

    @property
    def stalled(self) -> bool:
        """The store has not taken a queued change for a while (writer.STALLED_S)."""
        return self._writer.stalled

    def holds(self, number: int) -> bool:
        return number in self._shards

    async def load(self, number: int) -> list[GroupRecord]:
        """Start serving shard `number` (the cluster gave it to this node): open and replay
        its log on the groups' thread; returns the membership records to resume."""
        if number not in self._shards:
            shard = await self._writer.run(OffsetStore.open, self._store, _shard_path(number), self._now_ms,
                                           self._segment_bytes)
            self._shards[number] = shard
        return self._shards[number].memberships()

    async def drop(self, number: int) -> list[str]:
        """Stop serving shard `number`: finish its queued changes, close its log (so the next
        owner replays everything); returns the ids of the groups it held."""
        shard = self._shards.get(number)
        if shard is None:
            return []
        groups = [record.group_id for record in shard.memberships()] + shard.groups()
        del self._shards[number]  # no change can name it from now on
        await self._writer.wait_idle(shard)  # those that did are written
        # Closed beside the writer's thread, not on it: a shard's close on HDFS takes about
        # 0.4 s (the NameNode completing its files), and a node handing over its 25 shards one
        # after another on that thread took 10 s to stop.
        await self._writer.close_log(shard)
        return sorted(set(groups))

    async def close(self) -> None:
        """Finish the queued changes, then close every log (on the worker thread)."""
        await self._writer.close(list(self._shards.values()))
        self._shards.clear()

    async def _write(self, shard: OffsetStore, change: Change | None) -> None:
        if change is not None:
            await self._writer.submit(shard, change)

    # -- shards

    def _existing(self, group_id: str) -> OffsetStore | None:
        return self._shards.get(self.shard_of(group_id))

    def _shard(self, group_id: str) -> OffsetStore:
        """The group's shard; one that does not exist yet is made empty, without a store call
        (`open` opened every shard that has a log), and its log is created by its first append."""
        number = self.shard_of(group_id)
        shard = self._shards.get(number)
        if shard is None:
            assert self._owns_shard(number), f"group {group_id!r} is in shard {number}, not served here"
            shard = OffsetStore.unopened(self._store, _shard_path(number), self._now_ms, self._segment_bytes)
            self._shards[number] = shard
        return shard

    def _open_shard(self, number: int) -> OffsetStore:
        shard = OffsetStore.open(self._store, _shard_path(number), self._now_ms, self._segment_bytes)
        self._shards[number] = shard
        return shard

    def _migrate_legacy(self) -> None:
        legacy = OffsetStore.open(self._store, LEGACY_PATH, self._now_ms, self._segment_bytes)
        try:
            for group_id in legacy.groups():
                entries = [(topic, value.topic_id, partition, value)
                           for (topic, partition), value in legacy.group_offsets(group_id).items()]
                self._shard(group_id).commit(group_id, entries)
            for record in legacy.memberships():
                self._shard(record.group_id).record_membership(record)
        finally:
            legacy.close()
        for shard in self._shards.values():
            shard.flush()  # durable before the only other copy goes
        self._store.delete(LEGACY_PATH)


def _shard_path(number: int) -> str:
    return f"{SHARDS_DIR}/{number}"


def _shard_numbers(names: Iterable[str]) -> set[int]:
    """Shards with a log, or with a compaction to settle (`<n>.compact`, `<n>.old`): a shard
    whose crash left only those still has its state there."""
    stems = (name.split(".", 1)[0] for name in names)
    return {int(stem) for stem in stems if stem.isdigit()}


def _settle_count(store: Store, wanted: int) -> int:
    """The data dir's shard count: the stored one, else `wanted` (stored now)."""
    if not 1 <= wanted <= SHARDS_MAX:
        raise InvalidConfig(f"offsets_shards must be between 1 and {SHARDS_MAX}, not {wanted}")
    if store.exists(COUNT_PATH):
        return int(read_whole(store, COUNT_PATH))
    store.mkdir(SHARDS_DIR)
    write_atomically(store, COUNT_PATH, str(wanted).encode())
    return wanted
