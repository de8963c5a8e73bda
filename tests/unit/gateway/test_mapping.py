"""Batch refusals meet Kafka codes in gateway/mapping.py (the codes LogValidator answers)."""

from kio.schema.errors import ErrorCode

from martlet.gateway.mapping import batch_code
from martlet.records.errors import InvalidBatch, Reason


def test_every_reason_has_the_code_a_kafka_broker_answers():
    codes = {reason: batch_code(InvalidBatch(reason, "")) for reason in Reason}
    assert codes.pop(Reason.CHECKSUM) == ErrorCode.corrupt_message
    assert codes.pop(Reason.MALFORMED_RECORDS) == ErrorCode.corrupt_message
    assert codes.pop(Reason.TOO_LARGE) == ErrorCode.message_too_large
    assert set(codes.values()) == {ErrorCode.invalid_record}
