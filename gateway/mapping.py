"""Where engine errors and settings meet Kafka codes and names (the only such place, with
topic_configs.py for topic configs)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..engine.api import GroupError, TxnError
from ..engine.api import errors as engine_errors
from ..protocol.apis import ApiKey
from ..records.errors import InvalidBatch, Reason
from .topic_configs import NullValue
from .writes import Refusal

_ERROR_CODES: list[tuple[type[Exception], ErrorCode]] = [
    (engine_errors.CorruptBatch, ErrorCode.corrupt_message),
    (engine_errors.OffsetOutOfRange, ErrorCode.offset_out_of_range),
    (engine_errors.OutOfOrderSequence, ErrorCode.out_of_order_sequence_number),
    (engine_errors.StaleProducerEpoch, ErrorCode.invalid_producer_epoch),
    (engine_errors.CoordinatorFenced, ErrorCode.transaction_coordinator_fenced),
    (engine_errors.TransactionOpen, ErrorCode.invalid_txn_state),
    (engine_errors.InvalidName, ErrorCode.invalid_topic_exception),
    (engine_errors.TopicExists, ErrorCode.topic_already_exists),
    (engine_errors.UnknownTopic, ErrorCode.unknown_topic_or_partition),
    (engine_errors.UnknownPartition, ErrorCode.unknown_topic_or_partition),
    (engine_errors.InvalidPartitionCount, ErrorCode.invalid_partitions),
    (NullValue, ErrorCode.invalid_request),
    (engine_errors.InvalidConfig, ErrorCode.invalid_config),
    (engine_errors.StaleSession, ErrorCode.fenced_leader_epoch),
    (engine_errors.OlderSession, ErrorCode.fenced_leader_epoch),
    (engine_errors.NewerSession, ErrorCode.unknown_leader_epoch),
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


# -- batches a topic refuses (gateway/writes.py)

_REFUSAL_CODES = {
    Refusal.DECOMPRESSED_TOO_LARGE: ErrorCode.invalid_record,
    Refusal.TIMESTAMP: ErrorCode.invalid_timestamp,
    Refusal.KEYLESS: ErrorCode.invalid_record,
}


def refusal_code(refusal: Refusal) -> ErrorCode:
    return _REFUSAL_CODES[refusal]


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


# -- transactions: a fenced producer is PRODUCER_FENCED from these versions, INVALID_PRODUCER_EPOCH before

FENCED_FROM = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2, ApiKey.ADD_OFFSETS_TO_TXN: 2,
               ApiKey.END_TXN: 2, ApiKey.TXN_OFFSET_COMMIT: 3}
_TXN_CODES = {
    TxnError.NONE: ErrorCode.none,
    TxnError.INVALID_PRODUCER_ID_MAPPING: ErrorCode.invalid_producer_id_mapping,
    TxnError.CONCURRENT_TRANSACTIONS: ErrorCode.concurrent_transactions,
    TxnError.INVALID_TXN_STATE: ErrorCode.invalid_txn_state,
    TxnError.INVALID_TRANSACTION_TIMEOUT: ErrorCode.invalid_transaction_timeout,
}


def txn_code(error: TxnError | None, key: ApiKey, version: int) -> ErrorCode:
    """A transaction coordinator's answer (None: no coordinator here) as the API's version says it."""
    if error is None:
        return ErrorCode.coordinator_not_available
    if error is TxnError.PRODUCER_FENCED:
        return ErrorCode.producer_fenced if version >= FENCED_FROM[key] else ErrorCode.invalid_producer_epoch
    return _TXN_CODES[error]
