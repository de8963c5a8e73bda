"""The v2 batch header: fixed positions, parsing, patching in place, the checksum."""

import pytest

from martlet.records.build import NewRecord, Producer, build_batch
from martlet.records.errors import InvalidBatch, Reason
from martlet.records.header import (
    HEADER_BYTES,
    BatchHeader,
    crc_ok,
    iter_batches,
    pack_header,
    parse_header,
    peek_size,
    set_base_offset,
    set_leader_epoch,
    stamp_log_append_time,
)


def make_batch(record_count: int = 1, timestamp_ms: int = 1_000, producer_id: int = -1, producer_epoch: int = -1,
               base_sequence: int = -1, attributes: int = 0) -> tuple[bytearray, BatchHeader]:
    records = [NewRecord(None, b"r" * 10, timestamp_ms)] * record_count
    batch = build_batch(records, producer=Producer(producer_id, producer_epoch, base_sequence),
                        transactional=bool(attributes & 0x10), control=bool(attributes & 0x20))
    return batch, parse_header(batch)


def test_fields_sit_at_their_fixed_positions():
    batch, header = make_batch(record_count=3, timestamp_ms=77, producer_id=9, producer_epoch=2, base_sequence=5)
    assert batch[16] == 2  # magic
    assert int.from_bytes(batch[8:12], "big") == len(batch) - 12
    assert int.from_bytes(batch[43:51], "big") == 9
    assert int.from_bytes(batch[57:61], "big") == 3
    assert (header.last_offset_delta, header.max_timestamp, header.base_sequence) == (2, 77, 5)


def test_derived_properties():
    batch, header = make_batch(record_count=4)
    header = header._replace(base_offset=10)
    assert header.size == len(batch)
    assert header.next_offset == 14
    assert not header.is_transactional and not header.is_control
    _, control = make_batch(attributes=0x30)
    assert control.is_transactional and control.is_control


def test_pack_is_the_inverse_of_parse():
    batch, header = make_batch(record_count=2)
    assert pack_header(header) == bytes(batch[:HEADER_BYTES])


def test_parse_header_refuses_short_input():
    batch, _ = make_batch()
    with pytest.raises(InvalidBatch) as short:
        parse_header(batch[:60])
    assert short.value.reason is Reason.SHORT
    with pytest.raises(InvalidBatch):
        parse_header(batch, pos=len(batch) - 10)


def test_peek_size_reads_the_length_field_alone():
    first, _ = make_batch()
    second, _ = make_batch(record_count=3)
    assert peek_size(first + second) == len(first)
    assert peek_size(first + second, len(first)) == len(second)
    with pytest.raises(InvalidBatch):
        peek_size(first[:11])


def test_log_append_time_stamp_rewrites_covered_fields_and_the_crc():
    batch, before = make_batch(timestamp_ms=5)
    after = stamp_log_append_time(batch, 9_999)
    assert after.is_log_append_time and not before.is_log_append_time
    assert (after.max_timestamp, after.base_timestamp) == (9_999, 5)
    assert after.crc != before.crc and crc_ok(batch)


def test_crc_covers_attributes_to_end():
    batch, _ = make_batch()
    assert crc_ok(batch)
    batch[-1] ^= 1
    assert not crc_ok(batch)


def test_offset_and_leader_epoch_lie_outside_the_crc():
    batch, _ = make_batch()
    set_base_offset(batch, 1234)
    set_leader_epoch(batch, 7)
    header = parse_header(batch)
    assert (header.base_offset, header.leader_epoch) == (1234, 7)
    assert crc_ok(batch, header=header)


def test_crc_ok_is_false_for_a_truncated_batch():
    batch, header = make_batch()
    assert not crc_ok(batch[:-1], header=header)


def test_crc_ok_at_a_position():
    first, _ = make_batch()
    second, _ = make_batch(record_count=2)
    assert crc_ok(first + second, pos=len(first))


def test_iter_batches_yields_positions_and_stops_at_a_torn_tail():
    one, _ = make_batch(record_count=1)
    two, _ = make_batch(record_count=2)
    data = bytes(one + two + two[:-1])
    found = [(pos, header.record_count) for pos, header in iter_batches(data)]
    assert found == [(0, 1), (len(one), 2)]
    assert [pos for pos, _ in iter_batches(data, start=len(one))] == [len(one)]


def test_iter_batches_stops_at_a_nonsense_length():
    one, _ = make_batch()
    garbage = bytearray(one)
    garbage[8:12] = (10).to_bytes(4, "big")  # shorter than any header
    assert list(iter_batches(bytes(one + garbage))) == [(0, parse_header(one))]
    assert list(iter_batches(b"\x00" * 30)) == []
