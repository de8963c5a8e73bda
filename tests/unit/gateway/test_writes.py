"""The write policy (gateway/writes.py): one set of checks for Produce, the native write and
UDP, with neutral refusals each front end maps (Kafka codes: mapping.py)."""

import dataclasses
import uuid

import pytest
from kio.schema.errors import ErrorCode

from martlet.engine.api import Topic, TopicConfig, TopicPartition
from martlet.engine.catalog.names import ResourceName
from martlet.gateway.mapping import refusal_code
from martlet.gateway.writes import INVALID_TIMESTAMP, Refusal, Refused, checked
from martlet.records.errors import InvalidBatch, Reason
from martlet.records.header import parse_header
from tests.integration.raw_client import batch_of_size, record_batch

NOW_MS = 1_700_000_000_000
TP = TopicPartition("t", 0)


def topic(kept: dict[str, object] | None = None, **config: object) -> Topic:
    """A one-partition topic with these TopicConfig fields and Kafka configs (`kept`)."""
    named = tuple(sorted((name, str(value)) for name, value in (kept or {}).items()))
    return Topic(ResourceName("o", "t", uuid.UUID(int=1)), 1, ((0, 65_535),), TopicConfig(kept=named, **config))


def test_a_fitting_create_time_batch_passes_as_sent() -> None:
    sent = record_batch([b"a", b"b"], NOW_MS)
    written = checked(topic(), TP, sent, NOW_MS)
    assert bytes(written.batch) == sent and written.append_time == -1 and written.header == parse_header(sent)


def test_a_log_append_time_topic_stamps_the_batch() -> None:
    written = checked(topic(timestamp_type="append"), TP, record_batch([b"a"], 5), NOW_MS)
    assert written.append_time == NOW_MS and written.header.max_timestamp == NOW_MS


def test_refusals_are_neutral_and_name_the_records_at_fault() -> None:
    window = topic(kept={"message.timestamp.after.max.ms": 1000})
    with pytest.raises(Refused) as late:
        checked(window, TP, record_batch([b"ok", b"future"], [NOW_MS, NOW_MS + 5000]), NOW_MS)
    assert late.value.refusal is Refusal.TIMESTAMP and late.value.message == INVALID_TIMESTAMP
    assert [index for index, _ in late.value.records] == [1]
    with pytest.raises(Refused) as keyless:
        checked(topic(cleanup_policy="compact"), TP, record_batch([b"no key"], NOW_MS), NOW_MS)
    assert keyless.value.refusal is Refusal.KEYLESS and keyless.value.records[0][0] == 0
    assert (refusal_code(Refusal.TIMESTAMP), refusal_code(Refusal.KEYLESS)) == (
        ErrorCode.invalid_timestamp, ErrorCode.invalid_record)


def test_a_batch_over_max_message_bytes_is_an_invalid_batch() -> None:
    with pytest.raises(InvalidBatch) as large:
        checked(topic(max_batch_bytes=100), TP, batch_of_size(200, NOW_MS), NOW_MS)
    assert large.value.reason is Reason.TOO_LARGE


def test_a_changed_config_applies_to_the_next_batch() -> None:
    """A topic's rules are worked out once per config; altering a config makes a new one."""
    before = topic()
    sent = record_batch([b"a", b"b"], NOW_MS)
    assert checked(before, TP, sent, NOW_MS).append_time == -1
    small = dataclasses.replace(before, config=dataclasses.replace(before.config, max_batch_bytes=10))
    with pytest.raises(InvalidBatch):
        checked(small, TP, sent, NOW_MS)
    stamped = dataclasses.replace(before, config=dataclasses.replace(before.config, timestamp_type="append"))
    assert checked(stamped, TP, sent, NOW_MS).append_time == NOW_MS
    assert checked(before, TP, sent, NOW_MS).append_time == -1
