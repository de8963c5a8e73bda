"""validate_produced: each rule a produced batch must pass, with the reason it is refused."""

import struct

import pytest

from martlet.records.build import NO_PRODUCER, NewRecord, Producer, build_batch
from martlet.records.errors import InvalidBatch, Reason
from martlet.records.header import HEADER_BYTES, set_crc
from martlet.records.validate import validate_produced

LIMIT = 1 << 20


def batch(count: int = 2, producer: Producer = NO_PRODUCER) -> bytearray:
    return build_batch([NewRecord(b"k", b"v%d" % i, 1_000 + i) for i in range(count)], producer=producer)


def reason(records: bytes, limit: int = LIMIT) -> Reason:
    with pytest.raises(InvalidBatch) as refused:
        validate_produced(records, limit)
    return refused.value.reason


def test_a_good_batch_comes_back_as_a_patchable_copy_with_its_header():
    sent = bytes(batch(3))
    copy, header = validate_produced(memoryview(sent), LIMIT)
    assert isinstance(copy, bytearray) and copy == sent
    assert (header.record_count, header.size, header.max_timestamp) == (3, len(sent), 1_002)


def test_shape_rules():
    good = bytes(batch())
    assert reason(b"") is Reason.SHORT
    assert reason(good[: HEADER_BYTES - 1]) is Reason.SHORT
    assert reason(good[:-1]) is Reason.TRUNCATED
    assert reason(good + good) is Reason.NOT_ONE_BATCH
    assert reason(good, limit=len(good) - 1) is Reason.TOO_LARGE
    validate_produced(good, len(good))
    old = bytearray(good)
    old[16] = 1
    assert reason(bytes(old)) is Reason.NOT_V2


def test_checksum_is_checked_before_the_fields():
    damaged = batch()
    damaged[-1] ^= 0x01
    assert reason(bytes(damaged)) is Reason.CHECKSUM
    miscounted = batch()
    struct.pack_into(">i", miscounted, 57, 5)  # record_count, inside the CRC: checksum first
    assert reason(bytes(miscounted)) is Reason.CHECKSUM
    set_crc(miscounted)
    assert reason(bytes(miscounted)) is Reason.RECORD_COUNT


def test_field_rules():
    control = build_batch([NewRecord(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", 1)], control=True)
    assert reason(bytes(control)) is Reason.CONTROL_FROM_CLIENT
    assert reason(bytes(batch(producer=Producer(7, 0, -1)))) is Reason.NO_SEQUENCE
    validate_produced(bytes(batch(producer=Producer(7, 0, 0))), LIMIT)
