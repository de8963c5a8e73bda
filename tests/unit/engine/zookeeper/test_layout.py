"""The ZooKeeper layout's names and JSON (engine/zookeeper/layout.py)."""

import pytest

from martlet.engine.types import TopicPartition
from martlet.engine.zookeeper.layout import (
    Assignment,
    BrokerRecord,
    parse_unit,
    reassignments_from_json,
    reassignments_to_json,
    split_zookeeper,
    unit_key,
)


@pytest.mark.parametrize(("address", "hosts", "chroot"), [
    ("zk:2181", "zk:2181", "/martlet"),
    ("zk:2181/", "zk:2181", "/martlet"),
    ("a:1,b:2/prod/m", "a:1,b:2", "/prod/m"),
    ("zk:2181/c1/", "zk:2181", "/c1"),
])
def test_a_zookeeper_address_splits_into_hosts_and_chroot(address: str, hosts: str, chroot: str) -> None:
    assert split_zookeeper(address) == (hosts, chroot)


def test_an_address_without_hosts_is_refused() -> None:
    with pytest.raises(ValueError, match="names no host"):
        split_zookeeper("/martlet")


def test_units_name_partitions_and_shards_apart() -> None:
    for unit in (TopicPartition("orders", 3), TopicPartition("a/b", 0), 7):
        assert parse_unit(unit_key(unit)) == unit
    assert unit_key(7) == "@offsets/7" and unit_key(TopicPartition("t", 1)) == "t/1"


def test_records_and_assignments_round_trip_and_old_records_read() -> None:
    record = BrokerRecord(4, "h", 9092, "m", "r1", frozenset({"t/0"}), {"t/0": 10}, {"t/0": 20}, 5, 6, True, 3,
                          {"t/0": 2})
    assert BrokerRecord.from_json(record.to_json()) == record
    assert BrokerRecord.from_json(b'{"id": 1, "host": "h", "port": 1}') == BrokerRecord(1, "h", 1, "h")
    assignment = Assignment(9, frozenset({"t/0", "@offsets/2"}))
    assert Assignment.from_json(assignment.to_json()) == assignment
    assert assignment.partitions() == {TopicPartition("t", 0)} and assignment.shards() == {2}
    assert Assignment.from_json(b"") == Assignment(0, frozenset())
    assert reassignments_from_json(reassignments_to_json({"t/1": 3})) == {"t/1": 3}
