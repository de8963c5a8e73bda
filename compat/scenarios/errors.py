"""Error cases: each names the Kafka error the broker must answer with, or records what
the client reports when the client itself refuses (that part is compared, not expected)."""

from __future__ import annotations

from typing import Any

from ..clients.base import Driver
from .common import NONE, Context, expect, expect_equal, now_ms

UNKNOWN = "UNKNOWN_TOPIC_OR_PARTITION"


def error_unknown_topic(driver: Driver, ctx: Context) -> dict[str, Any]:
    """describe, delete, add partitions, list offsets of an unknown topic."""
    topic = ctx.name("never-created")
    seen = {"describe": driver.describe_topic(topic)["error"], "delete": driver.delete_topic(topic),
            "add_partitions": driver.add_partitions(topic, 3), "list_offsets": driver.list_offsets(topic, 0, "latest")["error"]}
    expect_equal(seen["describe"], UNKNOWN, "describe an unknown topic")
    expect_equal(seen["delete"], UNKNOWN, "delete an unknown topic")
    expect_equal(seen["add_partitions"], UNKNOWN, "add partitions to an unknown topic")
    expect(seen["list_offsets"] != NONE, "list offsets of an unknown topic succeeded")
    return seen


def error_invalid_topic_name(driver: Driver, ctx: Context) -> dict[str, Any]:
    """invalid topic names are refused with INVALID_TOPIC_EXCEPTION."""
    names = {"space_and_bang": "bad name!", "dot": ".", "dot_dot": "..", "too_long": "t" * 250}
    seen = {what: driver.create_topic(name, 1, {}) for what, name in names.items()}
    wrong = {what: error for what, error in seen.items() if error != "INVALID_TOPIC_EXCEPTION"}
    expect(not wrong, f"expected INVALID_TOPIC_EXCEPTION, got {wrong}")
    return seen


def error_partition_out_of_range(driver: Driver, ctx: Context) -> dict[str, Any]:
    """shrinking partitions is refused; partition 5 of 2 cannot be written or listed."""
    topic = ctx.topic(driver, "t", partitions=2)
    seen: dict[str, Any] = {"shrink_to_1": driver.add_partitions(topic, 1), "same_count": driver.add_partitions(topic, 2)}
    expect_equal(seen["shrink_to_1"], "INVALID_PARTITIONS", "asking for fewer partitions")
    expect_equal(seen["same_count"], "INVALID_PARTITIONS", "asking for the same partition count")
    record: dict[str, Any] = {"key": "k", "value": "v", "headers": [], "timestamp": None, "partition": 5}
    [answer] = driver.produce(topic, [record])
    seen["produce_to_5"] = answer["error"]
    expect(answer["error"] != NONE, "producing to partition 5 of a 2-partition topic succeeded")
    seen["list_offsets_5"] = driver.list_offsets(topic, 5, "latest")["error"]
    expect(seen["list_offsets_5"] != NONE, "list offsets of partition 5 of a 2-partition topic succeeded")
    return seen


def error_message_too_large(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a record over max.message.bytes is refused with MESSAGE_TOO_LARGE."""
    topic = ctx.topic(driver, "t", configs={"max.message.bytes": "4096"})
    record = {"key": "k", "value": "v" * 8192, "headers": [], "timestamp": now_ms(), "partition": 0}
    [answer] = driver.produce(topic, [record])
    expect_equal(answer["error"], "MESSAGE_TOO_LARGE", "producing 8 KiB to a topic with max.message.bytes=4096")
    latest = driver.list_offsets(topic, 0, "latest")
    expect_equal(latest["offset"], 0, "latest offset after the refused record")
    return {"produce": answer["error"], "latest": latest["offset"]}


SCENARIOS = [error_unknown_topic, error_invalid_topic_name, error_partition_out_of_range, error_message_too_large]
