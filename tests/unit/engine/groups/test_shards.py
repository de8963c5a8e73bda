"""Committed offsets sharded by group: stable routing, lazy shards, a fixed count, and the
upgrade from the single offsets log of earlier versions."""

from __future__ import annotations

import asyncio

import pytest

from martlet.engine.groups.offsets import CommittedOffset, OffsetStore
from martlet.engine.groups.shards import COUNT_PATH, LEGACY_PATH, SHARDS_DIR, OffsetShards, shard_of
from martlet.engine.store import MemoryStore


def offset(value: int) -> CommittedOffset:
    return CommittedOffset(value, -1, None, 0, "id-t")


def commit(offsets: OffsetStore, group_id: str, value: int, partition: int = 0) -> None:
    """A commit through the synchronous OffsetStore (the layout of earlier versions)."""
    offsets.commit(group_id, [("t", "id-t", partition, offset(value))])


def commit_all(offsets: OffsetShards, *commits: tuple[str, int]) -> None:
    """Commit (group, value) pairs through the shards, as the event loop does."""
    async def run() -> None:
        for group_id, value in commits:
            await offsets.commit(group_id, [("t", "id-t", 0, offset(value))])
    asyncio.run(run())


def close(offsets: OffsetShards) -> None:
    asyncio.run(offsets.close())


@pytest.mark.parametrize(("group_id", "shard"), [
    ("a", 97 % 50),                  # "a".hashCode() == 97
    ("hello", 99162322 % 50),        # a well-known Java hashCode
    ("", 0),
    ("polygenelubricants", 0),       # hashCode() == Integer.MIN_VALUE: Kafka's Utils.abs gives 0
])
def test_groups_land_in_kafkas_consumer_offsets_partition(group_id: str, shard: int) -> None:
    assert shard_of(group_id, 50) == shard


def test_each_group_lives_in_its_own_shard_log_created_on_first_write() -> None:
    store = MemoryStore()
    offsets = OffsetShards.open(store, lambda: 0, 8)
    assert store.list(SHARDS_DIR) == ["count"]
    groups = [f"g{n}" for n in range(20)]
    commit_all(offsets, *((group_id, n) for n, group_id in enumerate(groups)))
    used = sorted({shard_of(g, 8) for g in groups})
    assert len(used) > 1
    assert store.list(SHARDS_DIR) == sorted(["count", *map(str, used)])
    close(offsets)
    reopened = OffsetShards.open(store, lambda: 0, 8)
    assert reopened.groups() == sorted(groups)
    assert [reopened.fetch(g, "t", 0, "id-t") for g in groups] == [offset(n) for n in range(20)]
    close(reopened)


def test_the_shard_count_is_fixed_when_the_data_dir_is_first_used() -> None:
    store = MemoryStore()
    offsets = OffsetShards.open(store, lambda: 0, 8)
    commit_all(offsets, ("g", 5))
    close(offsets)
    reopened = OffsetShards.open(store, lambda: 0, 50)  # a changed setting must not move groups
    assert reopened.count == 8 and store.read(COUNT_PATH, 0, 10) == b"8"
    assert reopened.fetch("g", "t", 0, "id-t") == offset(5)
    close(reopened)


def test_only_owned_shards_are_opened() -> None:
    store = MemoryStore()
    offsets = OffsetShards.open(store, lambda: 0, 4)
    mine, theirs = "a", next(g for g in (f"g{n}" for n in range(100)) if shard_of(g, 4) != shard_of("a", 4))
    commit_all(offsets, (mine, 1), (theirs, 2))
    close(offsets)
    partial = OffsetShards.open(store, lambda: 0, 4, owns_shard=lambda shard: shard == shard_of("a", 4))
    assert partial.groups() == [mine]
    assert partial.fetch(theirs, "t", 0, "id-t") is None
    close(partial)


def test_a_shard_left_mid_compaction_is_opened_and_settled() -> None:
    """A crash between the compaction's renames leaves only <n>.old and <n>.compact: the shard
    still has its state there, and opening finds it."""
    store = MemoryStore()
    offsets = OffsetShards.open(store, lambda: 0, 4)
    commit_all(offsets, ("g", 5))
    close(offsets)
    number = shard_of("g", 4)
    store.rename(f"{SHARDS_DIR}/{number}", f"{SHARDS_DIR}/{number}.old")
    reopened = OffsetShards.open(store, lambda: 0, 4)
    assert reopened.fetch("g", "t", 0, "id-t") == offset(5)
    assert store.list(SHARDS_DIR) == sorted(["count", str(number)])
    close(reopened)


def test_a_single_offsets_log_from_before_shards_is_migrated_and_removed() -> None:
    store = MemoryStore()
    legacy = OffsetStore.open(store, LEGACY_PATH, lambda: 0)  # the layout earlier versions wrote
    for n in range(10):
        commit(legacy, f"g{n}", n, partition=n)
    legacy.delete_group("g3")
    legacy.close()

    offsets = OffsetShards.open(store, lambda: 0, 4)
    assert not store.exists(LEGACY_PATH)
    expected = [f"g{n}" for n in range(10) if n != 3]
    assert offsets.groups() == expected
    for n in (0, 1, 2, 4, 9):
        assert offsets.fetch(f"g{n}", "t", n, "id-t") == offset(n)
    close(offsets)
    assert OffsetShards.open(store, lambda: 0, 4).groups() == expected


def test_a_migration_cut_short_is_done_again_on_the_next_open() -> None:
    store = MemoryStore()
    legacy = OffsetStore.open(store, LEGACY_PATH, lambda: 0)
    commit(legacy, "g", 7)
    legacy.close()
    early = OffsetShards.open(store, lambda: 0, 4)
    commit_all(early, ("g", 7))  # as if the migration had written this shard, then crashed
    close(early)
    legacy = OffsetStore.open(store, LEGACY_PATH, lambda: 0)
    commit(legacy, "h", 8)
    legacy.close()
    offsets = OffsetShards.open(store, lambda: 0, 4)
    assert offsets.groups() == ["g", "h"] and not store.exists(LEGACY_PATH)
    close(offsets)
