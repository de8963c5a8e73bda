"""Admin scenarios: ApiVersions, metadata, the topic life cycle, delete records."""

from __future__ import annotations

from typing import Any

from ..clients.base import Driver
from .common import NONE, Context, expect, expect_equal, produced_ok, records, wait_for

# What the four clients need for produce, consume, groups, admin and transactions
# (see shared/reference/kafka-clients.md, section 2), by key.
NEEDED_APIS = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit",
    32: "DescribeConfigs", 33: "AlterConfigs", 37: "CreatePartitions", 44: "IncrementalAlterConfigs",
}


def api_versions(driver: Driver, ctx: Context) -> dict[str, Any]:
    """ApiVersions advertises every API the clients need, with min <= max."""
    table = driver.api_versions()
    missing = sorted(name for key, name in NEEDED_APIS.items() if str(key) not in table)
    inverted = sorted(key for key, (low, high) in table.items() if low > high)
    expect(not inverted, f"min > max for API keys {inverted}")
    expect(not missing, f"APIs the clients need are not advertised: {', '.join(missing)}")
    return {"needed_apis_missing": missing, "_advertised": table}


def metadata(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a new 3-partition topic is described with 3 partitions."""
    topic = ctx.topic(driver, "t", partitions=3)
    described = wait_for(lambda: _described_with(driver, topic, 3), 10) or driver.describe_topic(topic)
    expect_equal(described["error"], NONE, "describe error")
    expect_equal(described["partitions"], 3, "partitions")
    return {"partitions": described["partitions"], "has_topic_id": described["topic_id"] is not None,
            "_topic_id": described["topic_id"]}


def _described_with(driver: Driver, topic: str, partitions: int) -> dict[str, Any] | None:
    described = driver.describe_topic(topic)
    return described if described["partitions"] == partitions else None


def topic_lifecycle(driver: Driver, ctx: Context) -> dict[str, Any]:
    """create (and again: TOPIC_ALREADY_EXISTS), describe, alter config, add partitions, delete."""
    topic = ctx.topic(driver, "t", partitions=2, configs={"retention.ms": "3600000"})
    seen: dict[str, Any] = {"create_again": driver.create_topic(topic, 2, {})}
    expect_equal(seen["create_again"], "TOPIC_ALREADY_EXISTS", "creating it again")
    # a new topic reaches every broker's metadata a little after CreateTopics answers (Kafka)
    described = wait_for(lambda: _described_with(driver, topic, 2), 10) or driver.describe_topic(topic)
    expect_equal((described["partitions"], described["configs"].get("retention.ms")), (2, "3600000"),
                 "partitions and retention.ms after create")
    seen["alter"] = driver.alter_topic_config(topic, "retention.ms", "7200000")
    expect_equal(seen["alter"], NONE, "alter retention.ms")
    altered = wait_for(lambda: driver.describe_topic(topic)["configs"].get("retention.ms") == "7200000", 10)
    expect(altered, "describe does not show retention.ms=7200000 after the alter")
    seen["add_partitions"] = driver.add_partitions(topic, 4)
    expect_equal(seen["add_partitions"], NONE, "add partitions to 4")
    grown = wait_for(lambda: driver.describe_topic(topic)["partitions"] == 4, 10)
    expect(grown, "describe does not show 4 partitions after adding")
    seen["delete"] = driver.delete_topic(topic)
    expect_equal(seen["delete"], NONE, "delete")
    gone = wait_for(lambda: driver.describe_topic(topic)["error"] == "UNKNOWN_TOPIC_OR_PARTITION", 15)
    expect(gone, "describe still finds the topic 15 s after deleting it")
    ctx.topics.remove(topic)
    return seen


def delete_records(driver: Driver, ctx: Context) -> dict[str, Any]:
    """delete records moves the log start; reading starts there; past the end is refused."""
    topic = ctx.topic(driver, "t")
    produced_ok(driver.produce(topic, records(10, "d")), "produce")
    seen: dict[str, Any] = {"delete_before_4": driver.delete_records(topic, 0, 4)}
    expect_equal(seen["delete_before_4"], {"error": NONE, "low_watermark": 4}, "delete records before offset 4")
    seen["earliest"] = driver.list_offsets(topic, 0, "earliest")["offset"]
    expect_equal(seen["earliest"], 4, "earliest offset after deleting")
    got = driver.consume(topic, [0], "earliest", 6, 15.0)
    seen["consumed_offsets"] = [r["offset"] for r in got]
    expect_equal(seen["consumed_offsets"], list(range(4, 10)), "offsets read from earliest")
    seen["delete_past_end"] = driver.delete_records(topic, 0, 20)["error"]
    expect_equal(seen["delete_past_end"], "OFFSET_OUT_OF_RANGE", "deleting before an offset past the end")
    return seen
