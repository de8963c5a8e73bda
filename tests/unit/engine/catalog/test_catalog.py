import json
import uuid

import pytest

from martlet.engine.catalog.catalog import Catalog
from martlet.engine.catalog.config import TopicConfig
from martlet.engine.catalog.names import ResourceName
from martlet.engine.catalog.topic import Topic
from martlet.engine.errors import InvalidConfig, InvalidName, InvalidPartitionCount, TopicExists, UnknownTopic
from martlet.engine.store.memory import MemoryStore


def new_catalog(store=None):
    catalog = Catalog(store or MemoryStore(), "alice")
    catalog.load()
    return catalog


def test_created_topic_survives_reload_with_its_resource_name():
    store = MemoryStore()
    topic = new_catalog(store).create("orders", 3, TopicConfig(retention_ms=5), frozenset({"retention_ms"}), 10)
    assert str(topic.resource).startswith("alice#orders#")
    again = new_catalog(store).get("orders")
    assert again == topic


def test_recreated_topic_gets_a_new_uuid():
    catalog = new_catalog()
    first = catalog.create("t", 1, TopicConfig(), frozenset(), 0)
    catalog.delete("t")
    with pytest.raises(UnknownTopic):
        catalog.get("t")
    second = catalog.create("t", 1, TopicConfig(), frozenset(), 0)
    assert first.resource.uid != second.resource.uid


def test_growing_bumps_the_version_and_never_shrinks():
    catalog = new_catalog()
    catalog.create("t", 2, TopicConfig(), frozenset(), 0)
    grown = catalog.grow("t", 5)
    assert grown.version == 2 and grown.partition_count == 5
    with pytest.raises(InvalidPartitionCount):
        catalog.grow("t", 4)


def test_a_child_partition_names_the_parent_it_split_off_and_its_split_point_survives_a_reload():
    store = MemoryStore()
    catalog = new_catalog(store)
    catalog.create("t", 1, TopicConfig(), frozenset(), 0)
    grown = catalog.grow("t", 4)  # 0 splits into 0 and 1; then 0 into 0 and 2; then 1 into 1 and 3
    assert grown.parents(1) == [(1, 0), (2, 0), (3, 1)]
    recorded = catalog.record_splits("t", [(1, 0, 120), (2, 0, 120), (3, 1, 0)])
    assert recorded.version == grown.version and recorded.splits == ((1, 0, 120), (2, 0, 120), (3, 1, 0))
    assert new_catalog(store).get("t") == recorded


def test_a_pending_split_point_is_replaced_by_the_one_its_parents_owner_records():
    catalog = new_catalog(MemoryStore())
    catalog.create("t", 2, TopicConfig(), frozenset(), 0)
    catalog.grow("t", 4)
    catalog.record_splits("t", [(2, 0, 40), (3, 1, -1)])  # the growing node serves partition 0 only
    recorded = catalog.record_splits("t", [(3, 1, 75)])
    assert recorded.splits == ((2, 0, 40), (3, 1, 75))


@pytest.mark.parametrize("name", ["", ".", "..", "a#b", "a b", "x" * 250, "ü"])
def test_bad_names_are_refused(name):
    with pytest.raises(InvalidName):
        new_catalog().create(name, 1, TopicConfig(), frozenset(), 0)


def test_duplicates_and_bad_configs_are_refused():
    catalog = new_catalog()
    catalog.create("t", 1, TopicConfig(), frozenset(), 0)
    with pytest.raises(TopicExists):
        catalog.create("t", 1, TopicConfig(), frozenset(), 0)
    with pytest.raises(InvalidConfig):
        TopicConfig().updated({"flush_mode": "sometimes"})
    with pytest.raises(InvalidConfig):
        TopicConfig().updated({"no_such": 1})


def test_resource_name_round_trip():
    name = ResourceName.new("o", "n")
    assert ResourceName.parse(str(name)) == name
    with pytest.raises(InvalidName):
        ResourceName.parse("o#n")


# -- reload: another process's changes become visible


def two_catalogs():
    store = MemoryStore()
    return new_catalog(store), new_catalog(store)


def test_reload_reports_a_topic_another_catalog_created():
    writer, reader = two_catalogs()
    topic = writer.create("t", 2, TopicConfig(), frozenset(), 0)
    assert reader.find("t") is None
    changes = reader.reload()
    assert changes.created == (topic,) and not changes.deleted and not changes.grown
    assert reader.get("t") == topic
    assert not reader.reload()  # nothing new since


def test_reload_reports_grown_reconfigured_and_deleted_topics():
    writer, reader = two_catalogs()
    before = writer.create("t", 2, TopicConfig(), frozenset(), 0)
    other = writer.create("u", 1, TopicConfig(), frozenset(), 0)
    reader.reload()
    grown = writer.grow("t", 4)
    reconfigured = writer.reconfigure("u", TopicConfig(retention_ms=5), frozenset({"retention_ms"}))
    changes = reader.reload()
    assert changes.grown == ((before, grown),)
    assert changes.reconfigured == ((other, reconfigured),)
    assert reader.get("t").partition_count == 4
    writer.delete("t")
    changes = reader.reload()
    assert changes.deleted == (grown,) and not changes.created
    with pytest.raises(UnknownTopic):
        reader.get("t")


def test_reload_sees_a_topic_recreated_under_its_name_as_deleted_and_created():
    writer, reader = two_catalogs()
    first = writer.create("t", 1, TopicConfig(), frozenset(), 0)
    reader.reload()
    writer.delete("t")
    second = writer.create("t", 1, TopicConfig(), frozenset(), 0)
    changes = reader.reload()
    assert changes.deleted == (first,) and changes.created == (second,)


def test_reload_skips_a_create_still_in_progress_and_leaves_tombstones_alone():
    store = MemoryStore()
    reader = new_catalog(store)
    store.mkdir("topics/alice#half#00000000-0000-0000-0000-000000000001")  # no topic.json yet
    store.mkdir("topics/alice#gone#00000000-0000-0000-0000-000000000002.deleted")
    assert not reader.reload()
    assert store.exists("topics/alice#gone#00000000-0000-0000-0000-000000000002.deleted")
def test_resource_names_take_their_uuid_from_the_injected_source():
    uids = iter([uuid.UUID(int=1), uuid.UUID(int=2)])
    catalog = Catalog(MemoryStore(), "alice", new_uuid=lambda: next(uids))
    first = catalog.create("a", 1, TopicConfig(), frozenset(), 0)
    second = catalog.create("b", 1, TopicConfig(), frozenset(), 0)
    assert str(first.resource) == "alice#a#00000000-0000-0000-0000-000000000001"
    assert second.resource.uid == uuid.UUID(int=2)


def test_the_replication_factor_is_stored_and_old_topics_read_as_one():
    store = MemoryStore()
    catalog = new_catalog(store)
    catalog.create("wide", 2, TopicConfig(), frozenset(), 0, replication_factor=3)
    catalog.create("old", 1, TopicConfig(), frozenset(), 0)
    assert new_catalog(store).get("wide").replication_factor == 3
    assert catalog.grow("wide", 4).replication_factor == 3  # kept when the layout changes
    old = catalog.get("old")
    doc = json.loads(old.to_json())
    del doc["replication_factor"]  # a topic.json written before the field existed
    assert Topic.from_json(json.dumps(doc).encode()).replication_factor == 1
