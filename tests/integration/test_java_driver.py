"""The compat suite's Java driver (kafka-clients 4.4.0 in a JVM) against the reference Kafka
and against Martlet: every test that takes `driver` runs once per broker."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from martlet.compat.clients.base import Unsupported
from martlet.compat.clients.java_driver import JavaCallError, JavaDriver, JavaDriverError
from tests.fixtures.martlet import wait_until
from tests.integration.clients import unique_topic

pytestmark = [pytest.mark.integration, pytest.mark.java]


@pytest.fixture(scope="module", params=["reference", "martlet"])
def broker(request: pytest.FixtureRequest) -> tuple[str, str]:
    fixture = "reference_kafka" if request.param == "reference" else "martlet"
    return request.param, request.getfixturevalue(fixture).bootstrap


@pytest.fixture(scope="module")
def driver(broker: tuple[str, str]) -> Iterator[JavaDriver]:
    with JavaDriver(broker[1]) as java:
        yield java


def test_produce_consume_and_list_offsets(driver: JavaDriver) -> None:
    topic = unique_topic("java-rt")
    assert driver.create_topic(topic, 3, {}) == "NONE"
    base_ts = int(time.time() * 1000) - 60_000
    records = [
        {"key": f"k{i}", "value": None if i == 50 else f"value-{i}",
         "headers": [["seq", str(i)], ["dup", "a"], ["dup", "b"]] if i % 2 == 0 else [],
         "timestamp": base_ts + i, "partition": i % 3}
        for i in range(100)
    ]  # fmt: skip
    results = driver.produce(topic, records, codec="gzip")
    assert [r["error"] for r in results] == ["NONE"] * 100
    assert [(r["partition"], r["offset"]) for r in results] == [(i % 3, i // 3) for i in range(100)]

    consumed = driver.consume(topic, None, "earliest", 100, 30.0)
    assert len(consumed) == 100
    by_position = {(r["partition"], r["offset"]): r for r in consumed}
    for i, sent in enumerate(records):
        got = by_position[(i % 3, i // 3)]
        assert (got["key"], got["value"], got["headers"]) == (sent["key"], sent["value"], sent["headers"])
        assert (got["timestamp"], got["timestamp_type"]) == (sent["timestamp"], "CreateTime")

    # one partition from an offset, and max_records honoured
    part = driver.consume(topic, [1], 30, 10, 2.0)  # only 3 there: returns at the timeout
    assert [(r["partition"], r["offset"]) for r in part] == [(1, 30), (1, 31), (1, 32)]
    assert len(driver.consume(topic, [0], "earliest", 5, 10.0)) == 5

    counts = {0: 34, 1: 33, 2: 33}
    for partition, count in counts.items():
        assert driver.list_offsets(topic, partition, "earliest")["offset"] == 0
        latest = driver.list_offsets(topic, partition, "latest")
        assert (latest["error"], latest["offset"]) == ("NONE", count)
        newest = driver.list_offsets(topic, partition, "max_timestamp")
        assert (newest["error"], newest["offset"]) == ("NONE", count - 1)
    found = driver.list_offsets(topic, 2, base_ts + 50)
    assert (found["error"], found["offset"], found["timestamp"]) == ("NONE", 16, base_ts + 50)
    assert driver.list_offsets(topic, 2, base_ts + 10_000)["offset"] == -1
    assert driver.list_offsets(unique_topic("java-none"), 0, "latest")["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_describe_alter_grow_delete(driver: JavaDriver) -> None:
    topic = unique_topic("java-admin")
    assert driver.create_topic(topic, 2, {"retention.ms": "3600000"}) == "NONE"
    assert driver.create_topic(topic, 2, {}) == "TOPIC_ALREADY_EXISTS"
    described = driver.describe_topic(topic)
    assert described["error"] == "NONE" and described["partitions"] == 2
    assert isinstance(described["topic_id"], str) and len(described["topic_id"]) == 22
    assert described["configs"] == {"retention.ms": "3600000"}

    assert driver.alter_topic_config(topic, "retention.bytes", "1048576") == "NONE"
    assert driver.add_partitions(topic, 4) == "NONE"
    assert driver.add_partitions(topic, 3) == "INVALID_PARTITIONS"
    described = driver.describe_topic(topic)
    assert described["partitions"] == 4
    assert described["configs"] == {"retention.ms": "3600000", "retention.bytes": "1048576"}

    results = driver.produce(topic, [{"key": None, "value": f"v{i}", "headers": [], "timestamp": None,
                                      "partition": 0} for i in range(10)])
    assert {r["error"] for r in results} == {"NONE"}
    assert driver.delete_records(topic, 0, 6) == {"error": "NONE", "low_watermark": 6}
    assert driver.list_offsets(topic, 0, "earliest")["offset"] == 6
    assert [r["offset"] for r in driver.consume(topic, [0], "earliest", 4, 10.0)] == [6, 7, 8, 9]

    assert driver.describe_topic(unique_topic("java-none"))["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert driver.delete_topic(topic) == "NONE"
    assert wait_until(lambda: driver.describe_topic(topic)["error"] == "UNKNOWN_TOPIC_OR_PARTITION", 15.0)
    assert driver.delete_topic(topic) == "UNKNOWN_TOPIC_OR_PARTITION"


def test_api_versions_is_unsupported(driver: JavaDriver) -> None:
    with pytest.raises(Unsupported, match="no public API"):
        driver.api_versions()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_two_member_group(driver: JavaDriver, protocol: str) -> None:
    topic = unique_topic(f"java-group-{protocol}")
    group = unique_topic("java-g")
    assert driver.create_topic(topic, 4, {}) == "NONE"
    sent = [{"key": f"k{i}", "value": f"v{i}", "headers": [], "timestamp": None, "partition": i % 4}
            for i in range(40)]
    assert {r["error"] for r in driver.produce(topic, sent)} == {"NONE"}
    assignor = "range" if protocol == "classic" else None
    seen: set[tuple[int, int]] = set()

    def poll(handle: str) -> dict:
        answer = driver.member_poll(handle, 0.5)
        assert all(r["topic"] == topic for r in answer["records"])
        seen.update((r["partition"], r["offset"]) for r in answer["records"])
        return answer

    driver.member_start("a", group, [topic], assignor=assignor, protocol=protocol)
    assert wait_until(lambda: len(poll("a")["assignment"]) == 4, 60.0, interval_s=0)
    driver.member_start("b", group, [topic], assignor=assignor, protocol=protocol)
    state: dict[str, dict] = {}

    def balanced() -> bool:
        state["a"], state["b"] = poll("a"), poll("b")
        mine, theirs = state["a"]["assignment"], state["b"]["assignment"]
        return len(mine) == 2 and len(theirs) == 2 and sorted(mine + theirs) == [[topic, p] for p in range(4)]

    assert wait_until(balanced, 90.0, interval_s=0), state
    assert state["a"]["revoked"] >= 2 and state["b"]["revoked"] == 0
    assert wait_until(lambda: (poll("a"), poll("b")) and len(seen) == 40, 30.0, interval_s=0)
    assert driver.member_commit("a") == "NONE"
    assert driver.member_commit("b") == "NONE"
    assert driver.committed(group, topic, [0, 1, 2, 3]) == {"0": 10, "1": 10, "2": 10, "3": 10}
    assert driver.committed(unique_topic("java-nogroup"), topic, [0]) == {"0": -1}
    driver.member_stop("a")
    driver.member_stop("b")
    with pytest.raises(JavaCallError, match="no member a"):
        driver.member_poll("a", 0.1)


def test_transactions(driver: JavaDriver) -> None:
    topic = unique_topic("java-txn")
    assert driver.create_topic(topic, 1, {}) == "NONE"

    def batch(tag: str) -> list[dict]:
        return [{"key": None, "value": f"{tag}{i}", "headers": [], "timestamp": None, "partition": None}
                for i in range(5)]

    assert driver.transaction(topic, batch("c"), unique_topic("java-tx"), commit=True) == "NONE"
    assert driver.transaction(topic, batch("a"), unique_topic("java-tx"), commit=False) == "NONE"
    read_committed = driver.consume(topic, None, "earliest", 5, 10.0, isolation="read_committed")
    assert [r["value"] for r in read_committed] == [f"c{i}" for i in range(5)]
    assert driver.consume(topic, None, read_committed[-1]["offset"] + 1, 5, 2.0, isolation="read_committed") == []
    everything = driver.consume(topic, None, "earliest", 10, 10.0)
    assert sorted(r["value"] for r in everything) == sorted([f"c{i}" for i in range(5)] + [f"a{i}" for i in range(5)])


def test_jvm_death_timeout_and_close_are_reported() -> None:
    # nothing listens on port 9: the JVM starts, but a call waits on the client's own timeouts
    with JavaDriver("127.0.0.1:9", call_timeout_s=3.0) as java:
        assert java.client_version == "4.4.0"
        started = time.monotonic()
        with pytest.raises(JavaDriverError, match="no answer within 3s; the JVM was killed"):
            java.describe_topic("t")
        assert time.monotonic() - started < 15
        with pytest.raises(JavaDriverError, match="exited with"):
            java.delete_topic("t")
    java = JavaDriver("127.0.0.1:9")
    pid = java.pid
    java._proc.kill()  # type: ignore[union-attr]  # the JVM dies under the driver
    with pytest.raises(JavaDriverError, match=r"exited with -9(.|\n)*JVM stderr"):
        java.delete_topic("t")
    java.close()
    java.close()
    with pytest.raises(JavaDriverError, match="after close"):
        java.delete_topic("t")
    assert pid is not None
