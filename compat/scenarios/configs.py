"""Topic config scenarios: set, describe, alter and bad values; compression.type
recompressing what producers send; log compaction (latest value per key, tombstones); a
broker's configs under Kafka's names."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..clients.base import Driver, Record
from .common import NONE, Context, essentials, expect, expect_equal, now_ms, produced_ok, records, wait_for

SET_AT_CREATE = {"compression.type": "gzip", "max.message.bytes": "2000000", "cleanup.policy": "compact,delete",
                 "message.timestamp.type": "LogAppendTime", "min.compaction.lag.ms": "1000"}
READ_TIMEOUT_S = 15.0
KEYS = 10
COMPACTION_WAIT_S = 90.0  # Kafka's cleaner looks every 15 s (log.cleaner.backoff.ms), Martlet's too
SCAN_S = 3.0  # one read of a whole compacted topic: what arrives within this long


def topic_configs(driver: Driver, ctx: Context) -> dict[str, Any]:
    """configs set at create are described, an alter shows, bad values are INVALID_CONFIG."""
    topic = ctx.topic(driver, "t", configs=SET_AT_CREATE)
    shown = wait_for(lambda: _shows(driver, topic, SET_AT_CREATE), 10) or driver.describe_topic(topic)["configs"]
    expect_equal({name: shown.get(name) for name in SET_AT_CREATE}, SET_AT_CREATE, "configs set at create")
    seen: dict[str, Any] = {"alter": driver.alter_topic_config(topic, "retention.ms", "7200000")}
    expect_equal(seen["alter"], NONE, "alter retention.ms")
    expect(wait_for(lambda: _shows(driver, topic, {"retention.ms": "7200000"}), 10) is not None,
           "describe does not show retention.ms=7200000 after the alter")
    seen["alter_bad"] = driver.alter_topic_config(topic, "retention.ms", "soon")
    expect_equal(seen["alter_bad"], "INVALID_CONFIG", "alter retention.ms=soon")
    seen["create_bad"] = driver.create_topic(ctx.name("bad"), 1, {"cleanup.policy": "sideways"})
    expect_equal(seen["create_bad"], "INVALID_CONFIG", "create with cleanup.policy=sideways")
    return seen


def _shows(driver: Driver, topic: str, wanted: dict[str, str]) -> dict[str, str] | None:
    configs = driver.describe_topic(topic)["configs"]
    return configs if all(configs.get(name) == value for name, value in wanted.items()) else None


def recompression(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a compression.type=zstd topic takes batches in other codecs and gives the records back equal."""
    topic = ctx.topic(driver, "t", configs={"compression.type": "zstd"})
    sent: list[Record] = []
    for codec in ("none", "gzip", "lz4"):
        batch = records(20, codec, base_ts=now_ms() - 60_000)
        produced_ok(driver.produce(topic, batch, codec=codec), f"produce ({codec})")
        sent += batch
    got = driver.consume(topic, [0], "earliest", len(sent), READ_TIMEOUT_S)
    expect_equal(len(got), len(sent), "records read back")
    for index, (want, have) in enumerate(zip(sent, got)):
        expect_equal(essentials(have), essentials(want), f"record {index}")
    return {"records": len(got)}


def compaction(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a compacted topic read from the start gives each key once: its latest value, a tombstone
    for a deleted key, at the offset it was written at."""
    topic = ctx.topic(driver, "t", configs={"cleanup.policy": "compact", "segment.ms": "100",
                                            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "600000"})
    latest: dict[str, tuple[int, str | None]] = {}
    for round_ in ("old", "new"):
        batch = [_keyed(f"key-{i}", None if (round_, i) == ("new", 0) else f"{round_}-{i}") for i in range(KEYS)]
        for record, offset in zip(batch, produced_ok(driver.produce(topic, batch), f"produce {round_}")):
            latest[record["key"]] = (offset, record["value"])
    fillers = 0

    def compacted() -> list[Record] | None:
        nonlocal fillers
        fillers += 1  # another record of another key: its segment rolls (segment.ms), so the above can be cleaned
        produced_ok(driver.produce(topic, [_keyed(f"filler-{fillers}", "x")]), "produce a filler")
        got = [r for r in driver.consume(topic, [0], "earliest", 10_000, SCAN_S) if r["key"].startswith("key-")]
        return got if len(got) == KEYS else None

    got = wait_for(compacted, COMPACTION_WAIT_S, interval_s=1.0)
    expect(got is not None, f"the topic was not compacted within {COMPACTION_WAIT_S:.0f} s")
    assert got is not None
    expect_equal({r["key"]: (r["offset"], r["value"]) for r in got}, latest, "each key's record after compaction")
    return {"keys": len(got), "tombstones": sum(r["value"] is None for r in got)}


# A broker's configs every admin tool expects, with how Kafka flags each: (name, read-only).
BROKER_CONFIGS = (("broker.id", True), ("node.id", True), ("log.dirs", True), ("listeners", False),
                  ("advertised.listeners", True), ("num.partitions", True), ("auto.create.topics.enable", True),
                  ("log.retention.hours", True), ("log.retention.ms", False), ("log.segment.bytes", False),
                  ("message.max.bytes", False), ("log.cleanup.policy", False),
                  ("log.cleaner.delete.retention.ms", False), ("log.cleaner.min.cleanable.ratio", False))
LISTENER = re.compile(r"[A-Z_]+://[^,:]+:[0-9]+(,[A-Z_]+://[^,:]+:[0-9]+)*")


def broker_configs(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a broker's configs: Kafka's names, read-only flags and value shapes; no mutation."""
    described = driver.describe_broker()
    expect_equal(described["error"], NONE, "describe the broker's configs")
    configs = described["configs"]
    missing = [name for name, _ in BROKER_CONFIGS if name not in configs]
    expect(not missing, f"broker configs missing: {missing}")
    flags = {name: configs[name][2] for name, _ in BROKER_CONFIGS}
    expect_equal(flags, dict(BROKER_CONFIGS), "read-only flags")
    expect_equal(configs["broker.id"][0], str(described["broker"]), "broker.id")
    expect(LISTENER.fullmatch(configs["advertised.listeners"][0] or "") is not None,
           f"advertised.listeners is not a listener list: {configs['advertised.listeners'][0]!r}")
    for name in ("num.partitions", "log.segment.bytes", "message.max.bytes", "log.retention.hours"):
        expect((configs[name][0] or "").isdigit(), f"{name} is not a number: {configs[name][0]!r}")
    expect(configs["auto.create.topics.enable"][0] in ("true", "false"), "auto.create.topics.enable is not a boolean")
    # how many configs and their sources depend on each broker's settings: volatile ("_")
    return {"read_only": flags, "_configs": len(configs),
            "_sources": {name: configs[name][1] for name, _ in BROKER_CONFIGS}}


def _keyed(key: str, value: str | None) -> Record:
    return {"key": key, "value": value, "headers": [], "timestamp": None, "partition": 0}


SCENARIOS: list[Callable[[Driver, Context], dict[str, Any]]] = [topic_configs, recompression, compaction,
                                                                broker_configs]
