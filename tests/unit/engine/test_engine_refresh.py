"""Topic changes made by another process on the same store reach a running engine on refresh;
the engine names the node coordinating a group."""

from __future__ import annotations

import asyncio

import pytest

from martlet.engine.clock import ManualClock
from martlet.engine.errors import UnknownTopic
from martlet.engine.service import Engine
from martlet.engine.settings import EngineSettings
from martlet.engine.store import MemoryStore


def open_engine(store: MemoryStore) -> Engine:
    engine = Engine(store, EngineSettings(topic_partitions_max=64), ManualClock(0))
    engine.open()
    return engine


def test_a_refreshed_engine_opens_created_and_grown_partitions_and_drops_deleted_ones() -> None:
    store = MemoryStore()
    writer, reader = open_engine(store), open_engine(store)
    writer.create_topic("t", 2, {})
    changes = reader.refresh_catalog()
    assert [topic.name for topic in changes.created] == ["t"]
    assert reader.partition("t", 1) is not None

    writer.grow_topic("t", 3)
    writer.reconfigure_topic("t", {"retention_ms": 5})
    changes = reader.refresh_catalog()
    assert len(changes.grown) == 1 and len(changes.reconfigured) == 1
    assert reader.partition("t", 2).log.config.retention_ms == 5

    writer.delete_topic("t")
    assert [topic.name for topic in reader.refresh_catalog().deleted] == ["t"]
    with pytest.raises(UnknownTopic):
        reader.partition("t", 0)
    asyncio.run(reader.close())
    asyncio.run(writer.close())


def test_the_coordinator_of_a_group_is_the_owner_of_its_shard() -> None:
    engine = open_engine(MemoryStore())
    assert engine.groups.shard_of("a") == 97 % engine.settings.offsets_shards
    assert engine.coordinator_of("a") == engine.cluster.local()
    asyncio.run(engine.close())
