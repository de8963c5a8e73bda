"""Topic configs answer as the reference Apache Kafka does: the same names, types, defaults,
sources and synonyms in DescribeConfigs, and the same error code and message for every value
in a table of good and bad ones, set through IncrementalAlterConfigs and CreateTopics.

Differences, each with its reason (the rest must match):
- Martlet adds martlet.flush.mode and martlet.visibility;
- the reference fixture sets min.insync.replicas as a dynamic broker default;
- min.cleanable.dirty.ratio=NaN is refused, where Kafka takes it.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest

from martlet.gateway.topic_configs import CONFIGS
from martlet.records import compression
from martlet.records.build import NewRecord, build_batch
from martlet.records.decode import decode_records
from martlet.records.header import parse_header
from tests.fixtures.reference_pair import Both
from tests.integration.raw_client import record_batch
from tests.support.fetching import fetch_body
from tests.support.kafka_admin import CREATE_TOPICS, DESCRIBE_CONFIGS, create

pytestmark = [pytest.mark.integration, pytest.mark.java]

PRODUCE, FETCH = 0, 1
INCREMENTAL_ALTER_CONFIGS = 44
TOPIC = 2
SET = 0
OWN = {"martlet.flush.mode", "martlet.visibility"}
FIXTURE_SET = {"min.insync.replicas"}
VALUES = ["x", "", " 5", "1.5", "TRUE", "false", "-9223372036854775808", "-131073", "-131072", "-3", "-2", "-1", "0",
          "1", "4", "9", "10", "17", "18", "22", "23", "1048575", "1048576", "2147483647", "2147483648",
          "9223372036854775807", "9223372036854775808", "compact", "delete", "compact,delete", "delete, compact",
          "delete,delete", "compact,", "*", "0:1", "0:1,1:1", "a:b", "gzip", "GZIP", "producer", "CreateTime",
          "0.5", "1e-3", None]


def _describe(both: Both, topic: str) -> tuple[dict[str, object], dict[str, object]]:
    body = {"resources": [{"resource_type": TOPIC, "resource_name": topic, "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False}
    ours, theirs = both.ask(DESCRIBE_CONFIGS, 4, body)
    return ({c.name: c for c in ours.results[0].configs}, {c.name: c for c in theirs.results[0].configs})


def _shown(entry: object) -> tuple[object, ...]:
    return (entry.value, entry.read_only, int(entry.config_source), entry.is_sensitive, int(entry.config_type),
            [(s.name, s.value, int(s.source)) for s in entry.synonyms])


def test_describe_shows_kafkas_names_defaults_sources_and_synonyms(both: Both) -> None:
    topic = f"configs-{uuid.uuid4().hex[:8]}"
    create(both, topic, 1)
    ours, theirs = _describe(both, topic)
    assert set(ours) - OWN == set(theirs)
    assert {config.name for config in CONFIGS} - OWN == set(theirs)
    different = {name: (_shown(ours[name]), _shown(theirs[name])) for name in theirs
                 if name not in FIXTURE_SET and _shown(ours[name]) != _shown(theirs[name])}
    assert different == {}

    changes = {"retention.ms": " +1000", "flush.ms": "10", "compression.type": "zstd", "preallocate": "TRUE",
               "min.cleanable.dirty.ratio": "1e-3", "cleanup.policy": "delete, delete",
               "follower.replication.throttled.replicas": "0:1, 1:1"}
    body = {"resources": [{"resource_type": TOPIC, "resource_name": topic, "configs": [
        {"name": n, "config_operation": SET, "value": v} for n, v in changes.items()]}], "validate_only": False}
    for answer in both.ask(INCREMENTAL_ALTER_CONFIGS, 1, body):
        assert answer.responses[0].error_code == 0, answer
    ours, theirs = _describe(both, topic)
    assert {name: _shown(ours[name]) for name in changes} == {name: _shown(theirs[name]) for name in changes}


def test_every_config_takes_and_refuses_values_as_kafka_does(both: Both) -> None:
    topic = f"checks-{uuid.uuid4().hex[:8]}"
    create(both, topic, 1)
    different = {}
    for config in CONFIGS:
        if config.name in OWN:
            continue
        for value in VALUES:
            body = {"resources": [{"resource_type": TOPIC, "resource_name": topic, "configs": [
                {"name": config.name, "config_operation": SET, "value": value}]}], "validate_only": True}
            ours, theirs = (a.responses[0] for a in both.ask(INCREMENTAL_ALTER_CONFIGS, 1, body))
            if (ours.error_code, ours.error_message) != (theirs.error_code, theirs.error_message):
                different[(config.name, value)] = ((ours.error_code, ours.error_message),
                                                   (theirs.error_code, theirs.error_message))
    assert different == {}


def test_create_topics_refuses_bad_configs_as_kafka_does(both: Both) -> None:
    for name, value in [("retention.ms", "-5"), ("segment.bytes", "10"), ("no.such.config", "1"),
                        ("compression.type", "brotli"), ("cleanup.policy", "compact,")]:
        body = {"topics": [{"name": f"bad-{uuid.uuid4().hex[:8]}", "num_partitions": 1, "replication_factor": 1,
                            "configs": [{"name": name, "value": value}]}], "timeout": 30_000, "validate_only": True}
        ours, theirs = (a.topics[0] for a in both.ask(CREATE_TOPICS, 7, body))
        assert (ours.error_code, ours.error_message) == (theirs.error_code, theirs.error_message), (name, value)


def _refusals(answer: object) -> tuple[object, ...]:
    """A produce answer's partition error, with the window's bounds (each broker's clock) cut."""
    p = answer.responses[0].partition_responses[0]
    return (int(p.error_code), p.error_message,
            [(e.batch_index, re.sub(r"within \[-?\d+, \d+\]", "within [..]", e.batch_index_error_message))
             for e in p.record_errors])


def test_records_outside_the_timestamp_window_are_refused_as_kafka_refuses_them(both: Both) -> None:
    topic, strict = f"window-{uuid.uuid4().hex[:8]}", f"strict-{uuid.uuid4().hex[:8]}"
    create(both, topic, 1)
    create(both, strict, 1, {"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    for name, stamps in [(topic, [now, now + 2 * 3_600_000, now + 3 * 3_600_000]), (topic, [now - 10**12]),
                         (strict, [now, now - 3_600_000]), (strict, [-1])]:
        body = {"acks": -1, "timeout": 30_000, "topic_data": [
            {"name": name, "partition_data": [{"index": 0, "records": record_batch([b"v"] * len(stamps), stamps)}]}]}
        ours, theirs = both.ask(PRODUCE, 11, body)
        assert _refusals(ours) == _refusals(theirs), (name, stamps)


def test_a_topic_codec_recompresses_batches_as_kafka_does(both: Both) -> None:
    configs = {"gzip": {"compression.type": "gzip"}, "lz4": {"compression.type": "lz4"},
               "zstd": {"compression.type": "zstd"}, "plain": {"compression.type": "uncompressed"},
               "small": {"compression.type": "uncompressed", "max.message.bytes": "500"}}
    names = {kind: f"codec-{kind}-{uuid.uuid4().hex[:8]}" for kind in configs}
    for kind, wanted in configs.items():
        create(both, names[kind], 1, wanted)
    now = int(time.time() * 1000)
    sent = {"gzip": record_batch([b"a" * 300, b"b"], now), "lz4": record_batch([b"c" * 300], now),
            "zstd": bytes(build_batch([NewRecord(b"k", b"d" * 300, now)], compression=compression.SNAPPY)),
            "plain": bytes(build_batch([NewRecord(b"k", b"v" * 300, now)], compression=compression.LZ4)),
            "small": bytes(build_batch([NewRecord(None, b"x" * 2000, now)], compression=compression.GZIP))}
    assert len(sent["small"]) < 500  # fits as sent, not once uncompressed
    for kind, batch in sent.items():
        body = {"acks": -1, "timeout": 30_000, "topic_data": [
            {"name": names[kind], "partition_data": [{"index": 0, "records": batch}]}]}
        ours, theirs = (a.responses[0].partition_responses[0].error_code for a in both.ask(PRODUCE, 11, body))
        assert ours == theirs, kind
    for kind in ("gzip", "lz4", "zstd", "plain"):  # lz4: Kafka reads what Martlet wrote, and the reverse
        ours, theirs = (a.responses[0].partitions[0].records for a in both.ask(
            FETCH, 12, fetch_body([(names[kind], 0, 0, 1 << 20)])))
        assert parse_header(ours).compression == parse_header(theirs).compression, kind
        assert list(decode_records(ours)) == list(decode_records(theirs)), kind


def test_a_compressed_record_larger_than_max_decompressed_message_bytes_is_refused_as_kafka_refuses_it(
        both: Both) -> None:
    """max.decompressed.message.bytes bounds each record of a compressed batch once
    decompressed (a small batch cannot make the broker allocate a huge record); records of an
    uncompressed batch are bounded by max.message.bytes instead."""
    limited, open_ = f"inflate-{uuid.uuid4().hex[:8]}", f"inflate-open-{uuid.uuid4().hex[:8]}"
    create(both, limited, 1, {"max.decompressed.message.bytes": "512"})
    create(both, open_, 1)
    now = int(time.time() * 1000)
    cases = {"gzip 4 KB": (limited, [b"x" * 4096], compression.GZIP),
             "gzip 4 KB among small ones": (limited, [b"s", b"y" * 4096, b"t", b"z" * 600], compression.GZIP),
             "zstd 4 KB": (limited, [b"x" * 4096], compression.ZSTD),
             "gzip small": (limited, [b"x" * 100, b"y" * 400], compression.GZIP),
             "gzip record of 512 bytes": (limited, [b"x" * 504], compression.GZIP),  # 8 bytes besides the value
             "gzip record of 513 bytes": (limited, [b"x" * 505], compression.GZIP),
             "plain 4 KB": (limited, [b"x" * 4096], compression.NONE),
             "gzip 4 KB, no limit": (open_, [b"x" * 4096], compression.GZIP)}
    found: dict[str, tuple[object, object]] = {}
    for case, (name, values, codec) in cases.items():
        batch = bytes(build_batch([NewRecord(b"k", value, now) for value in values], compression=codec))
        body = {"acks": -1, "timeout": 30_000, "topic_data": [
            {"name": name, "partition_data": [{"index": 0, "records": batch}]}]}
        ours, theirs = both.ask(PRODUCE, 11, body)
        found[case] = (_refusals(ours), _refusals(theirs))
    assert all(ours == theirs for ours, theirs in found.values()), found
    assert [case for case, (_, theirs) in found.items() if theirs[0]] == [  # what Kafka refused, INVALID_RECORD
        "gzip 4 KB", "gzip 4 KB among small ones", "zstd 4 KB", "gzip record of 513 bytes"]
