"""The write policy: the checks a batch passes on its way into a topic, whichever front end
took it (Kafka's Produce, the native write, UDP datagrams), and what it becomes (stamped with
LogAppendTime, recompressed in the topic's compression.type).

A batch that is not a well-formed v2 batch raises InvalidBatch (records/errors.py); one the
topic's configs refuse raises Refused, neutral: a `Refusal`, Kafka's words for it where Kafka
has them, and the records at fault by index. Each front end says it its own way (Kafka codes:
mapping.py `refusal_code`). Authorization and quotas belong here too, when they come.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from ..engine.api import Topic, TopicPartition
from ..records.build import recompress
from ..records.compression import NONE as UNCOMPRESSED
from ..records.decode import decode_records, largest_record, record_times
from ..records.errors import InvalidBatch, Reason
from ..records.header import BatchHeader, parse_header, stamp_log_append_time
from ..records.validate import validate_produced
from .topic_configs import LONG_MAX, compression_of, decompressed_limit, timestamp_window

NO_TIMESTAMP = -1  # a record without a timestamp, which no timestamp window refuses
INVALID_TIMESTAMP = "One or more records have been rejected due to invalid timestamp"  # Kafka's words


class Refusal(enum.Enum):
    DECOMPRESSED_TOO_LARGE = "a record over max.decompressed.message.bytes"
    TIMESTAMP = "a record's timestamp outside message.timestamp.before/after.max.ms"
    KEYLESS = "a record without a key for a compacted topic"


class Refused(Exception):
    """A batch the topic refuses: why, Kafka's message (None where Kafka gives none), and
    (batch index, message) for each record at fault."""

    def __init__(self, refusal: Refusal, message: str | None = None, records: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message or refusal.value)
        self.refusal = refusal
        self.message = message
        self.records = records or []


class Checked(NamedTuple):  # a tuple: a frozen dataclass sets each field through object.__setattr__
    batch: bytearray
    header: BatchHeader
    append_time: int  # the LogAppendTime stamped, or -1 (CreateTime topics)


class Rules(NamedTuple):
    """What the checks ask of a topic's configs, worked out once per config (`rules_of`)."""

    max_batch_bytes: int  # max.message.bytes
    decompressed_limit: int | None  # max.decompressed.message.bytes; None: the default, no limit
    append_time: bool  # message.timestamp.type LogAppendTime
    window: tuple[int, int]  # message.timestamp.before/after.max.ms
    compacted: bool
    compression: tuple[int, int | None] | None  # compression.type's codec and level; None: as produced


_RULES: dict[int, tuple[object, Rules]] = {}  # id of a topic config -> (that config, its rules)
RULES_KEPT = 4096  # configs whose rules are kept; a config changed makes a new one


def rules_of(topic: Topic) -> Rules:
    """The topic's rules; worked out again only for a config not seen before (every
    produced batch asks, and reading four configs cost a produce request 1 us)."""
    config = topic.config
    found = _RULES.get(id(config))
    if found is not None and found[0] is config:
        return found[1]
    if len(_RULES) >= RULES_KEPT:
        _RULES.clear()
    rules = Rules(config.max_batch_bytes, decompressed_limit(topic), config.timestamp_type == "append",
                  timestamp_window(topic), config.compacted, compression_of(topic))
    _RULES[id(config)] = (config, rules)
    return rules


def checked(topic: Topic, tp: TopicPartition, records: bytes | memoryview | None, now_ms: int) -> Checked:
    """A produced batch, validated and checked against its topic, ready to append."""
    rules = rules_of(topic)
    batch, header = validate_produced(records, rules.max_batch_bytes)
    return within_rules(rules, tp, batch, header, now_ms)


def within_rules(rules: Rules, tp: TopicPartition, batch: bytearray, header: BatchHeader, now_ms: int) -> Checked:
    """A well-formed batch checked against its topic's configs: max.message.bytes,
    max.decompressed.message.bytes, the timestamp type and window, keys on a compacted topic,
    compression.type (the batch is recompressed when it differs, and must still fit)."""
    if header.size > rules.max_batch_bytes:
        raise InvalidBatch(Reason.TOO_LARGE, f"batch of {header.size} bytes exceeds max.message.bytes "
                                             f"{rules.max_batch_bytes}")
    if (header.compression != UNCOMPRESSED and rules.decompressed_limit is not None
            and largest_record(batch) > rules.decompressed_limit):
        raise Refused(Refusal.DECOMPRESSED_TOO_LARGE)
    append_time = -1
    if rules.append_time:
        append_time = now_ms
        header = stamp_log_append_time(batch, append_time)
    elif outside := _outside_window(batch, header, rules.window, now_ms):
        raise Refused(Refusal.TIMESTAMP, INVALID_TIMESTAMP, outside)
    if rules.compacted and (keyless := _without_key(batch, header, tp)):
        raise Refused(Refusal.KEYLESS, _rejected(keyless), keyless)
    if (wanted := rules.compression) is not None and wanted[0] != header.compression:
        batch, header = _recompressed(batch, wanted, rules.max_batch_bytes)  # keeps a stamped time
    return Checked(batch, header, append_time)


def _outside_window(batch: bytearray, header: BatchHeader, window: tuple[int, int], now_ms: int) -> list[tuple[int, str]]:
    """The records of a CreateTime batch whose timestamps are more than before_ms before now or
    after_ms after it (message.timestamp.before/after.max.ms), with Kafka's message for each;
    NO_TIMESTAMP (-1) is never refused. With the default before_ms (no limit) a batch whose
    max_timestamp is in range is not decoded."""
    before_ms, after_ms = window
    low, high = now_ms - before_ms, now_ms + after_ms
    if header.max_timestamp <= high and before_ms == LONG_MAX:
        return []
    return [(offset - header.base_offset, f"Timestamp {timestamp} of message with offset {offset} is out of range. "
                                          f"The timestamp should be within [{low}, {high}]")
            for offset, timestamp in record_times(batch)
            if timestamp != NO_TIMESTAMP and not low <= timestamp <= high]


def _without_key(batch: bytearray, header: BatchHeader, tp: TopicPartition) -> list[tuple[int, str]]:
    """The records of a batch for a compacted topic that have no key (a cleaner could never
    drop them), with Kafka's message for each."""
    message = f"Compacted topic cannot accept message without key in topic partition {tp.topic}-{tp.partition}"
    return [(record.offset - header.base_offset, message) for record in decode_records(batch) if record.key is None]


def _rejected(records: list[tuple[int, str]]) -> str:
    """Kafka's summary of a batch's record errors (RecordValidationException)."""
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')" for index, message in records[:3])
    return (f"One or more records have been rejected due to {len(records)} record errors in total, and only "
            f"showing the first three errors at most: [{shown}]")


def _recompressed(batch: bytearray, wanted: tuple[int, int | None], max_batch_bytes: int) -> tuple[bytearray, BatchHeader]:
    """The batch in the topic's codec (compression.type); InvalidBatch (MESSAGE_TOO_LARGE)
    when that makes it larger than max.message.bytes."""
    codec, level = wanted
    batch = recompress(batch, codec, level)
    header = parse_header(batch)
    if header.size > max_batch_bytes:
        raise InvalidBatch(Reason.TOO_LARGE, f"the batch is {header.size} bytes in the topic's compression.type, "
                                             f"over max.message.bytes {max_batch_bytes}")
    return batch, header
