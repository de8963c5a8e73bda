"""Topic changes made by another process on the same store reach a running engine on refresh;
the engine names the node coordinating a group."""

from __future__ import annotations

import asyncio

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
