"""Topic changes made by another process on the same store reach a running engine on refresh;
the engine names the node coordinating a group."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from martlet.engine.clock import ManualClock
from martlet.engine.errors import UnknownPartition
from martlet.engine.service import Engine
from martlet.engine.settings import EngineSettings
from martlet.engine.store import MemoryStore
from martlet.engine.types import TopicPartition


def open_engine(store: MemoryStore) -> Engine:
    engine = Engine(store, EngineSettings(topic_partitions_max=64), ManualClock(0))
    engine.open()
    return engine


def test_a_refreshed_engine_opens_created_and_grown_partitions_and_drops_deleted_ones() -> None:
    store = MemoryStore()
    writer, reader = open_engine(store), open_engine(store)

    async def scenario() -> None:
        await writer.topics.create("t", 2, {})
        changes = await reader.topics.refresh()
        assert [topic.name for topic in changes.created] == ["t"]
        assert reader.partitions.info(TopicPartition("t", 1)).end_offset == 0

        await writer.topics.grow("t", 3)
        await writer.topics.reconfigure("t", {"retention_ms": 5})
        changes = await reader.topics.refresh()
        assert len(changes.grown) == 1 and len(changes.reconfigured) == 1
        assert reader.topics.get("t").config.retention_ms == 5
        partition = reader.partitions.get_open(TopicPartition("t", 2))
        assert partition is not None and partition.log.config.retention_ms == 5

        await writer.topics.delete("t")
        assert [topic.name for topic in (await reader.topics.refresh()).deleted] == ["t"]
        with pytest.raises(UnknownPartition):
            reader.partitions.info(TopicPartition("t", 0))
        await reader.close()
        await writer.close()

    asyncio.run(scenario())


def test_the_coordinator_of_a_group_is_the_owner_of_its_shard() -> None:
    engine = open_engine(MemoryStore())
    assert engine.groups.shard_of("a") == 97 % engine.settings.offsets_shards
    assert engine.coordinator_of("a") == engine.cluster.local()
    asyncio.run(engine.close())


class OneHolderLock:
    """A cluster lock that, like one node's ZooKeeper lock object, must not be taken by two
    threads of the node at once; it records whether that happened."""

    def __init__(self) -> None:
        self.holders, self.most, self.taken = 0, 0, 0
        self.guard = threading.Lock()

    def lock_topics(self, timeout_s: float) -> None:
        with self.guard:
            self.holders += 1
            self.most, self.taken = max(self.most, self.holders), self.taken + 1
        time.sleep(0.02)  # holding it a while, so that concurrent takers would overlap

    def unlock_topics(self) -> None:
        with self.guard:
            self.holders -= 1

    def topics_changed(self) -> None:
        pass


def test_concurrent_topic_changes_on_one_node_take_the_cluster_lock_one_at_a_time() -> None:
    engine = open_engine(MemoryStore())
    lock = OneHolderLock()
    engine.topics.shared = lock

    async def scenario() -> None:
        await asyncio.gather(*(engine.topics.create(f"t{index}", 1, {}) for index in range(5)))
        await engine.close()

    asyncio.run(scenario())
    assert (lock.taken, lock.most, lock.holders) == (5, 1, 0)
