"""A broker's HTTP address in its cluster registration (issue 17, point 3): published with the
record, passed on as given, and absent (null) in the records of brokers that predate it, so a
rolling upgrade mixes both."""

from __future__ import annotations

import json

from martlet.engine.cluster import EmbeddedCluster, NodeIdentity
from martlet.engine.zookeeper.layout import BrokerRecord


def test_a_record_carries_its_http_address() -> None:
    record = BrokerRecord(2, "10.0.0.2", 9092, "m2", http="10.0.0.2:9644")
    assert json.loads(record.to_json())["http"] == "10.0.0.2:9644"
    assert BrokerRecord.from_json(record.to_json()) == record


def test_an_older_brokers_record_reads_without_one() -> None:
    old = b'{"id": 3, "host": "h", "port": 9092, "machine": "m", "held": ["t/0"], "memory_bytes": 7}'
    record = BrokerRecord.from_json(old)
    assert record.http is None and record.held == frozenset({"t/0"}) and record.memory_bytes == 7
    assert BrokerRecord.from_json(b'{"id": 3, "host": "h", "port": 9092, "http": null}').http is None
    assert BrokerRecord.from_json(b'{"id": 3, "host": "h", "port": 9092, "http": ""}').http is None


def test_an_older_reader_finds_every_field_it_knows() -> None:
    """Older brokers and admins read records by key and ignore the rest: the new key changes none of theirs."""
    with_http = json.loads(BrokerRecord(4, "h", 1, "m", "r", http="h:2").to_json())
    without = json.loads(BrokerRecord(4, "h", 1, "m", "r").to_json())
    assert with_http.pop("http") == "h:2" and without.pop("http") is None
    assert with_http == without


def test_the_embedded_node_keeps_its_http_address() -> None:
    cluster = EmbeddedCluster(NodeIdentity(1, "", 0))
    node = cluster.advertise("broker.example", 9092, None, "broker.example:9644")
    assert node.http == "broker.example:9644" and cluster.alive() == (node,) == (cluster.local(),)
    assert cluster.advertise("broker.example", 9092).http is None
    assert NodeIdentity(1, "h", 1) == NodeIdentity(1, "h", 1, None, None)
