"""martlet.records: whatever build.py writes, decode.py reads back record for record, and a
produced (non-control) batch passes validate_produced with the header the builder meant."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.records import compression
from martlet.records.build import NewRecord, Producer, build_batch, build_control_batch
from martlet.records.control import ControlType, Marker
from martlet.records.decode import Record, control_marker, decode_records, record_times
from martlet.records.header import crc_ok, parse_header, set_base_offset, set_leader_epoch
from martlet.records.validate import validate_produced

I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
TIMESTAMPS = st.integers(0, 2**62)  # a batch's deltas must fit an i64 too
OPTIONAL_BYTES = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.tuples(st.text(max_size=20), OPTIONAL_BYTES), max_size=4).map(tuple)
RECORDS = st.lists(st.builds(NewRecord, OPTIONAL_BYTES, OPTIONAL_BYTES, TIMESTAMPS, HEADERS), min_size=1, max_size=20)
CODECS = st.sampled_from([compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4,
                          compression.ZSTD])
PRODUCERS = st.just(Producer(-1, -1, -1)) | st.builds(Producer, st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1),
                                                       st.integers(0, 2**31 - 1))


@settings(max_examples=200, deadline=None, database=None)
@given(RECORDS, CODECS, PRODUCERS, st.booleans(), st.integers(0, 2**62), I32)
def test_built_batches_decode_to_their_records(records, codec, producer, transactional, base_offset, epoch):
    batch = build_batch(records, producer=producer, transactional=transactional, compression=codec)
    set_base_offset(batch, base_offset)  # as a broker patches them: outside the CRC
    set_leader_epoch(batch, epoch)
    header = parse_header(batch)
    assert crc_ok(batch) and header.size == len(batch)
    assert (header.compression, header.is_transactional, header.is_control) == (codec, transactional, False)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert (header.record_count, header.max_timestamp) == (len(records), max(r.timestamp for r in records))
    expected = [Record(base_offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]
    assert list(decode_records(batch)) == expected
    assert list(record_times(batch)) == [(r.offset, r.timestamp) for r in expected]


@settings(max_examples=100, deadline=None, database=None)
@given(RECORDS, CODECS, PRODUCERS)
def test_built_batches_pass_validation_unchanged(records, codec, producer):
    batch = build_batch(records, producer=producer, compression=codec)
    copy, header = validate_produced(bytes(batch), len(batch))
    assert copy == batch and header == parse_header(batch)


@settings(deadline=None, database=None)
@given(st.integers(0, 2**63 - 1), I16, st.sampled_from(ControlType), I32, TIMESTAMPS)
def test_control_batches_carry_their_marker(producer_id, producer_epoch, control_type, coordinator_epoch, now_ms):
    batch = build_control_batch(producer_id, producer_epoch, control_type, coordinator_epoch, now_ms)
    header = parse_header(batch)
    assert crc_ok(batch) and header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (producer_id, producer_epoch, -1)
    assert control_marker(batch) == Marker(control_type, coordinator_epoch)
