"""Produce and consume: codecs, headers, nulls, timestamps, record size limits, offsets by
time, the idempotent producer. Each writes to its own one-partition topic and reads back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..clients.base import Driver, Record
from .common import NONE, Context, essentials, expect, expect_equal, now_ms, produced_ok, records

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
READ_TIMEOUT_S = 20.0
PAST_MS = 3_600_000  # explicit timestamps an hour ago: inside Kafka's default acceptance window


def round_trip(driver: Driver, ctx: Context, sent: list[Record], *, codec: str = "none",
               idempotent: bool = False, configs: dict[str, str] | None = None,
               with_timestamp: bool = True) -> tuple[list[int], list[Record]]:
    topic = ctx.topic(driver, "t", configs=configs)
    offsets = produced_ok(driver.produce(topic, sent, codec=codec, idempotent=idempotent), f"produce ({codec})")
    expect_equal(offsets, list(range(len(sent))), "offsets the producer reported")
    got = driver.consume(topic, [0], "earliest", len(sent), READ_TIMEOUT_S)
    expect_equal(len(got), len(sent), "records read back")
    expect_equal([r["offset"] for r in got], offsets, "offsets read back")
    for index, (want, have) in enumerate(zip(sent, got)):
        expect_equal(essentials(have, with_timestamp), essentials(want, with_timestamp), f"record {index}")
    return offsets, got


def codec_scenario(codec: str) -> Callable[[Driver, Context], dict[str, Any]]:
    def scenario(driver: Driver, ctx: Context) -> dict[str, Any]:
        sent = records(40, codec, base_ts=now_ms() - PAST_MS)
        offsets, got = round_trip(driver, ctx, sent, codec=codec)
        return {"offsets": offsets, "timestamp_types": sorted({r["timestamp_type"] for r in got})}

    scenario.__name__ = f"produce_consume_{codec}"
    scenario.__doc__ = f"produce with compression {codec}, read back equal records"
    return scenario


def headers(driver: Driver, ctx: Context) -> dict[str, Any]:
    """headers with repeated names, empty and non-ASCII values survive a round trip."""
    sent = records(3, "h", base_ts=now_ms() - PAST_MS, headers=False)
    sent[0]["headers"] = [["a", "1"], ["a", "2"], ["b", ""]]
    sent[1]["headers"] = [["unicode-\u00e9", "\u2603 snow"], ["empty", ""]]
    offsets, got = round_trip(driver, ctx, sent)
    return {"offsets": offsets, "headers": [r["headers"] for r in got]}


def null_key_and_value(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a null key, a null value (tombstone) and empty ones survive a round trip."""
    base = now_ms() - PAST_MS
    sent: list[dict[str, Any]] = [{"key": None, "value": "no key", "headers": [], "timestamp": base, "partition": 0},
            {"key": "tombstone", "value": None, "headers": [], "timestamp": base + 1, "partition": 0},
            {"key": "", "value": "", "headers": [], "timestamp": base + 2, "partition": 0}]
    offsets, got = round_trip(driver, ctx, sent)
    return {"offsets": offsets, "keys": [r["key"] for r in got], "values": [r["value"] for r in got]}


def null_header_value(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a header with a null value survives a round trip."""
    sent = [{"key": "k", "value": "v", "headers": [["null", None], ["set", "x"]],
             "timestamp": now_ms() - PAST_MS, "partition": 0}]
    offsets, got = round_trip(driver, ctx, sent)
    return {"offsets": offsets, "headers": got[0]["headers"]}


def create_time(driver: Driver, ctx: Context) -> dict[str, Any]:
    """explicit and client-chosen CreateTime timestamps are read back."""
    sent = records(5, "ct", base_ts=now_ms() - PAST_MS)
    sent.append({"key": "k", "value": "client-chosen", "headers": [], "timestamp": None, "partition": 0})
    before = now_ms()
    _, got = round_trip(driver, ctx, sent, with_timestamp=False)
    after = now_ms()
    expect_equal([r["timestamp"] for r in got[:5]], [r["timestamp"] for r in sent[:5]], "explicit timestamps")
    expect(before - 1000 <= got[5]["timestamp"] <= after + 1000,
           f"client-chosen timestamp {got[5]['timestamp']} outside [{before}, {after}]")
    types = [r["timestamp_type"] for r in got]
    expect_equal(set(types), {"CreateTime"}, "timestamp types")
    return {"timestamp_types": types}


def log_append_time(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a LogAppendTime topic stamps records with the broker's time."""
    sent = records(5, "lat", base_ts=now_ms() - PAST_MS)
    before = now_ms()
    _, got = round_trip(driver, ctx, sent, configs={"message.timestamp.type": "LogAppendTime"},
                        with_timestamp=False)
    after = now_ms()
    types = [r["timestamp_type"] for r in got]
    expect_equal(set(types), {"LogAppendTime"}, "timestamp types")
    stamps = [r["timestamp"] for r in got]
    expect(all(before - 1000 <= ts <= after + 1000 for ts in stamps),
           f"log append times {stamps} outside [{before}, {after}]")
    return {"timestamp_types": types, "_timestamps": stamps}


MAX_MESSAGE_BYTES = 32768


def record_near_max_message_bytes(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a record just under the topic's max.message.bytes is accepted."""
    # A batch of one record: 61 bytes of batch header plus the record's own framing (under 30
    # bytes for a short key and no headers) must fit in max.message.bytes.
    value = "v" * (MAX_MESSAGE_BYTES - 200)
    sent = [{"key": "big", "value": value, "headers": [], "timestamp": now_ms() - PAST_MS, "partition": 0}]
    offsets, got = round_trip(driver, ctx, sent, configs={"max.message.bytes": str(MAX_MESSAGE_BYTES)})
    return {"offsets": offsets, "value_length": len(got[0]["value"])}


def list_offsets_by_time(driver: Driver, ctx: Context) -> dict[str, Any]:
    """earliest, latest and offsets for timestamps before, at, between and after records."""
    topic = ctx.topic(driver, "t")
    base = now_ms() - PAST_MS
    produced_ok(driver.produce(topic, records(10, "lo", base_ts=base)), "produce")
    queries: dict[str, str | int] = {
        "earliest": "earliest", "latest": "latest", "before_first": base - 1, "exact_4": base + 40,
        "between_4_5": base + 41, "after_last": base + 1000,
    }
    seen = {name: driver.list_offsets(topic, 0, spec) for name, spec in queries.items()}
    errors = {name: answer["error"] for name, answer in seen.items() if answer["error"] != NONE}
    expect(not errors, f"list offsets errors: {errors}")
    offsets = {name: answer["offset"] for name, answer in seen.items()}
    expect_equal(offsets, {"earliest": 0, "latest": 10, "before_first": 0, "exact_4": 4, "between_4_5": 5,
                           "after_last": -1}, "offsets")
    expect_equal(seen["exact_4"]["timestamp"], base + 40, "timestamp of the record found for time base+40")
    return {"offsets": offsets}


def list_offsets_max_timestamp(driver: Driver, ctx: Context) -> dict[str, Any]:
    """the max-timestamp query finds the record with the largest timestamp."""
    topic = ctx.topic(driver, "t")
    base = now_ms() - PAST_MS
    sent = records(8, "mt", base_ts=base)
    sent[5]["timestamp"] = base + 100_000  # the largest timestamp sits in the middle
    produced_ok(driver.produce(topic, sent), "produce")
    answer = driver.list_offsets(topic, 0, "max_timestamp")
    expect_equal(answer, {"error": NONE, "offset": 5, "timestamp": base + 100_000}, "max timestamp query")
    return {"offset": answer["offset"]}


def idempotent_producer(driver: Driver, ctx: Context) -> dict[str, Any]:
    """an idempotent producer writes dense offsets, read back equal."""
    sent = records(60, "idem", base_ts=now_ms() - PAST_MS)
    offsets, _ = round_trip(driver, ctx, sent, idempotent=True)
    return {"offsets": offsets}


SCENARIOS: list[Callable[[Driver, Context], dict[str, Any]]] = [
    *(codec_scenario(codec) for codec in CODECS), headers, null_key_and_value, null_header_value,
    create_time, log_append_time, record_near_max_message_bytes, list_offsets_by_time,
    list_offsets_max_timestamp, idempotent_producer,
]
