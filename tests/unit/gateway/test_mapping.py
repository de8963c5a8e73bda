"""Batch refusals meet Kafka codes in gateway/mapping.py (the codes LogValidator answers)."""

from kio.schema.errors import ErrorCode

from martlet.engine.api import TopicPartition
from martlet.engine.api import errors as engine_errors
from martlet.gateway.mapping import batch_code, error_code
from martlet.records.errors import InvalidBatch, Reason


def test_every_reason_has_the_code_a_kafka_broker_answers():
    codes = {reason: batch_code(InvalidBatch(reason, "")) for reason in Reason}
    assert codes.pop(Reason.CHECKSUM) == ErrorCode.corrupt_message
    assert codes.pop(Reason.MALFORMED_RECORDS) == ErrorCode.corrupt_message
    assert codes.pop(Reason.TOO_LARGE) == ErrorCode.message_too_large
    assert set(codes.values()) == {ErrorCode.invalid_record}


def test_a_reader_behind_or_ahead_of_the_session_gets_kip_320s_codes():
    tp = TopicPartition("t", 0)
    assert error_code(engine_errors.OlderSession(tp)) == ErrorCode.fenced_leader_epoch
    assert error_code(engine_errors.NewerSession(tp)) == ErrorCode.unknown_leader_epoch
