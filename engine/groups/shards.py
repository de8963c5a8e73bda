"""Committed offsets and group records split into shards, each its own log.

A group lives in shard `shard_of(group_id, count)`: Kafka's partitionFor, the absolute value
of Java's String.hashCode of the group id modulo the shard count, so with Kafka's default of
50 a group sits in the same shard number as in `__consumer_offsets`. Python's hash() is
salted per process, so it could not be used: every process must agree.

Each shard is an OffsetStore (offsets.py) with its own log, replayed on its own, so different
processes can own different shards; the shard is what a coordinator owns (cluster.py). This
process opens only the shards its ClusterView says it owns.

Layout under the store root:
    internal/group-shards/count      the shard count, written once when the layout is created;
                                     the setting only applies to a new data dir, since
                                     changing it would move groups away from their records
    internal/group-shards/<n>/       shard n's log, created on the shard's first write

Upgrade: a data dir written before shards has one log for every group at
`internal/group-offsets/`. Opening migrates it: its live offsets and records are appended
to their shards, the shards are flushed, then the old log is deleted. A crash before the
delete repeats the migration, which is harmless (commits are upserts of the same values).
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import InvalidConfig
from ..store import Store
from ..store.atomic import read_whole, write_atomically
from .membership import GroupGone, GroupRecord, MembershipChange
from .offsets import COMPACT_SUFFIX, OLD_SUFFIX, SEGMENT_BYTES, CommittedOffset, OffsetStore

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
    """Routes each group to its shard's OffsetStore. Same calls as an OffsetStore."""

    def __init__(self, store: Store, now_ms: Callable[[], int], count: int,
                 owns_shard: Callable[[int], bool], segment_bytes: int) -> None:
        self._store = store
        self._now_ms = now_ms
        self.count = count
        self._owns_shard = owns_shard
        self._segment_bytes = segment_bytes
        self._shards: dict[int, OffsetStore] = {}

    @classmethod
    def open(cls, store: Store, now_ms: Callable[[], int], count: int,
             owns_shard: Callable[[int], bool] = lambda shard: True,
             segment_bytes: int = SEGMENT_BYTES) -> OffsetShards:
        """Open the owned shards that exist, after migrating a legacy single log."""
        shards = cls(store, now_ms, _settle_count(store, count), owns_shard, segment_bytes)
        for name in store.list(SHARDS_DIR):
            if name.isdigit() and int(name) < shards.count and owns_shard(int(name)):
                shards._open_shard(int(name))
        if any(store.exists(LEGACY_PATH + suffix) for suffix in ("", COMPACT_SUFFIX, OLD_SUFFIX)):
            shards._migrate_legacy()  # (a compaction it crashed in is settled by its open)
        return shards

    def shard_of(self, group_id: str) -> int:
        return shard_of(group_id, self.count)

    # -- reading

    def fetch(self, group_id: str, topic: str, partition: int, topic_id: str) -> CommittedOffset | None:
        shard = self._existing(group_id)
        return None if shard is None else shard.fetch(group_id, topic, partition, topic_id)

    def group_offsets(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
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

    # -- changing

    def commit(self, group_id: str, offsets: list[tuple[str, str, int, CommittedOffset]]) -> None:
        if offsets:
            self._shard(group_id).commit(group_id, offsets)

    def delete_group(self, group_id: str) -> None:
        shard = self._existing(group_id)
        if shard is not None:
            shard.delete_group(group_id)

    def delete_offsets(self, group_id: str, topic: str, partitions: list[int]) -> None:
        shard = self._existing(group_id)
        if shard is not None:
            shard.delete_offsets(group_id, topic, partitions)

    def expire(self, now_ms: int, retention_ms: int, is_empty: Callable[[str], bool]) -> int:
        return sum(shard.expire(now_ms, retention_ms, is_empty) for shard in self._shards.values())

    def record_membership(self, change: MembershipChange) -> None:
        if isinstance(change, GroupGone):
            shard = self._existing(change.group_id)
            if shard is not None:  # a group never recorded needs no tombstone
                shard.record_membership(change)
            return
        self._shard(change.group_id).record_membership(change)

    def compact(self) -> None:
        for shard in self._shards.values():
            shard.compact()

    def close(self) -> None:
        for shard in self._shards.values():
            shard.close()
        self._shards.clear()

    # -- shards

    def _existing(self, group_id: str) -> OffsetStore | None:
        return self._shards.get(self.shard_of(group_id))

    def _shard(self, group_id: str) -> OffsetStore:
        """The group's shard, created on its first write."""
        number = self.shard_of(group_id)
        shard = self._shards.get(number)
        if shard is None:
            assert self._owns_shard(number), f"group {group_id!r} is in shard {number}, not served here"
            shard = self._open_shard(number)
        return shard

    def _open_shard(self, number: int) -> OffsetStore:
        shard = OffsetStore.open(self._store, f"{SHARDS_DIR}/{number}", self._now_ms, self._segment_bytes)
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


def _settle_count(store: Store, wanted: int) -> int:
    """The data dir's shard count: the stored one, else `wanted` (stored now)."""
    if not 1 <= wanted <= SHARDS_MAX:
        raise InvalidConfig(f"offsets_shards must be between 1 and {SHARDS_MAX}, not {wanted}")
    if store.exists(COUNT_PATH):
        return int(read_whole(store, COUNT_PATH))
    store.mkdir(SHARDS_DIR)
    write_atomically(store, COUNT_PATH, str(wanted).encode())
    return wanted
