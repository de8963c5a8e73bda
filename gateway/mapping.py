"""Where engine errors and settings meet Kafka codes and names (the only such place)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ..engine.api import ConfigValue, GroupError, Overrides, TopicConfig
from ..engine.api import errors as engine_errors
from ..records.errors import InvalidBatch, Reason

_ERROR_CODES: list[tuple[type[Exception], ErrorCode]] = [
    (engine_errors.CorruptBatch, ErrorCode.corrupt_message),
    (engine_errors.OffsetOutOfRange, ErrorCode.offset_out_of_range),
    (engine_errors.OutOfOrderSequence, ErrorCode.out_of_order_sequence_number),
    (engine_errors.StaleProducerEpoch, ErrorCode.invalid_producer_epoch),
    (engine_errors.InvalidName, ErrorCode.invalid_topic_exception),
    (engine_errors.TopicExists, ErrorCode.topic_already_exists),
    (engine_errors.UnknownTopic, ErrorCode.unknown_topic_or_partition),
    (engine_errors.UnknownPartition, ErrorCode.unknown_topic_or_partition),
    (engine_errors.InvalidPartitionCount, ErrorCode.invalid_partitions),
    (engine_errors.InvalidConfig, ErrorCode.invalid_config),
    (engine_errors.StaleSession, ErrorCode.fenced_leader_epoch),
    (engine_errors.PartitionClosed, ErrorCode.not_leader_or_follower),
    (engine_errors.NotServedHere, ErrorCode.not_leader_or_follower),
]


def error_code(error: Exception) -> ErrorCode:
    for kind, code in _ERROR_CODES:
        if isinstance(error, kind):
            return code
    return ErrorCode.unknown_server_error


# -- produced batches: Kafka's LogValidator answers. A record set that holds no whole v2 batch
# (short, another magic, truncated, two batches) is INVALID_RECORD, not CORRUPT_MESSAGE: checked
# against the reference broker.

_BATCH_CODES = {
    Reason.SHORT: ErrorCode.invalid_record,
    Reason.NOT_V2: ErrorCode.invalid_record,
    Reason.TRUNCATED: ErrorCode.invalid_record,
    Reason.NOT_ONE_BATCH: ErrorCode.invalid_record,
    Reason.TOO_LARGE: ErrorCode.message_too_large,
    Reason.CHECKSUM: ErrorCode.corrupt_message,
    Reason.RECORD_COUNT: ErrorCode.invalid_record,
    Reason.CONTROL_FROM_CLIENT: ErrorCode.invalid_record,
    Reason.NO_SEQUENCE: ErrorCode.invalid_record,
    Reason.MALFORMED_RECORDS: ErrorCode.corrupt_message,
}


def batch_code(invalid: InvalidBatch) -> ErrorCode:
    return _BATCH_CODES[invalid.reason]


# -- topic configuration: Kafka names and string values <-> engine names and values


@dataclass(frozen=True, slots=True)
class ConfigName:
    kafka: str
    engine: str
    to_engine: Callable[[str], ConfigValue]
    to_kafka: Callable[[Any], str]
    type_code: int  # DescribeConfigs v3+ config_type: 3 INT, 5 LONG, 2 STRING


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise engine_errors.InvalidConfig(f"{text!r} is not an integer") from None


def _choice(table: dict[str, str]) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if text not in table:
            raise engine_errors.InvalidConfig(f"{text!r} is not one of {', '.join(table)}")
        return table[text]
    return convert


_TIMESTAMP_TYPES = {"CreateTime": "create", "LogAppendTime": "append"}
_CLEANUP_POLICIES = {"delete": "delete"}
_FLUSH_MODES = {"async": "async", "sync": "sync"}
_VISIBILITIES = {"persisted": "persisted", "memory": "memory"}

CONFIG_NAMES = [
    ConfigName("cleanup.policy", "cleanup_policy", _choice(_CLEANUP_POLICIES), str, 7),
    ConfigName("max.message.bytes", "max_batch_bytes", _int, str, 3),
    ConfigName("message.timestamp.type", "timestamp_type", _choice(_TIMESTAMP_TYPES),
               {v: k for k, v in _TIMESTAMP_TYPES.items()}.__getitem__, 2),
    ConfigName("retention.bytes", "retention_bytes", _int, str, 5),
    ConfigName("retention.ms", "retention_ms", _int, str, 5),
    ConfigName("segment.bytes", "segment_bytes", _int, str, 3),
    ConfigName("segment.ms", "segment_ms", _int, str, 5),
    ConfigName("martlet.flush.mode", "flush_mode", _choice(_FLUSH_MODES), str, 2),
    ConfigName("martlet.visibility", "visibility", _choice(_VISIBILITIES), str, 2),
]
BY_KAFKA = {c.kafka: c for c in CONFIG_NAMES}
BY_ENGINE = {c.engine: c for c in CONFIG_NAMES}


def config_to_engine(name: str, value: str | None) -> tuple[str, ConfigValue]:
    spec = BY_KAFKA.get(name)
    if spec is None:
        raise engine_errors.InvalidConfig(f"unknown or unsupported topic config {name!r}")
    if value is None:
        raise engine_errors.InvalidConfig(f"config {name!r} needs a value")
    return spec.engine, spec.to_engine(value)


def configs_to_engine(pairs: dict[str, str | None]) -> Overrides:
    return dict(config_to_engine(name, value) for name, value in pairs.items())


def engine_overrides_to_kafka(config: TopicConfig, overrides: frozenset[str]) -> dict[str, str]:
    return {BY_ENGINE[name].kafka: BY_ENGINE[name].to_kafka(getattr(config, name)) for name in overrides}


# -- consumer groups

_GROUP_CODES = {
    GroupError.NONE: ErrorCode.none,
    GroupError.UNKNOWN_MEMBER: ErrorCode.unknown_member_id,
    GroupError.ILLEGAL_GENERATION: ErrorCode.illegal_generation,
    GroupError.REBALANCE_IN_PROGRESS: ErrorCode.rebalance_in_progress,
    GroupError.INCONSISTENT_PROTOCOL: ErrorCode.inconsistent_group_protocol,
    GroupError.INVALID_SESSION_TIMEOUT: ErrorCode.invalid_session_timeout,
    GroupError.INVALID_GROUP_ID: ErrorCode.invalid_group_id,
    GroupError.MEMBER_ID_REQUIRED: ErrorCode.member_id_required,
    GroupError.FENCED_INSTANCE_ID: ErrorCode.fenced_instance_id,
    GroupError.GROUP_MAX_SIZE_REACHED: ErrorCode.group_max_size_reached,
    GroupError.NON_EMPTY_GROUP: ErrorCode.non_empty_group,
    GroupError.GROUP_NOT_FOUND: ErrorCode.group_id_not_found,
    GroupError.COORDINATOR_NOT_AVAILABLE: ErrorCode.coordinator_not_available,
    GroupError.NOT_COORDINATOR: ErrorCode.not_coordinator,
    GroupError.FENCED_MEMBER_EPOCH: ErrorCode.fenced_member_epoch,
    GroupError.STALE_MEMBER_EPOCH: ErrorCode.stale_member_epoch,
    GroupError.UNRELEASED_INSTANCE_ID: ErrorCode.unreleased_instance_id,
    GroupError.UNSUPPORTED_ASSIGNOR: ErrorCode.unsupported_assignor,
    GroupError.INVALID_REQUEST: ErrorCode.invalid_request,
    GroupError.INVALID_REGULAR_EXPRESSION: ErrorCode.invalid_regular_expression,
}


def group_code(error: GroupError) -> ErrorCode:
    return _GROUP_CODES[error]
