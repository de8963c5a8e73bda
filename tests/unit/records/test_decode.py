"""Decoding records: what clients send (uncompressed and compressed), markers, and garbage."""

import struct

import cramjam
import pytest

from martlet.records import compression
from martlet.records.build import NewRecord, Producer, build_batch, build_control_batch, recompress
from martlet.records.control import ControlType, Marker
from martlet.records.decode import Record, control_marker, decode_records, largest_record, record_times
from martlet.records.errors import InvalidBatch, Reason
from martlet.records.header import COMPRESSION_MASK, HEADER_BYTES, crc_ok, parse_header, set_crc, stamp_log_append_time
from tests.integration.raw_client import record_batch


def test_a_client_batch_decodes_to_its_values_and_times():
    sent = record_batch([b"a", b"bb", b"ccc"], [100, 90, 130])
    assert list(decode_records(sent)) == [Record(0, 100, None, b"a"), Record(1, 90, None, b"bb"),
                                          Record(2, 130, None, b"ccc")]
    assert list(record_times(sent)) == [(0, 100), (1, 90), (2, 130)]


def test_offsets_follow_the_patched_base_offset():
    built = build_batch([NewRecord(b"k", b"v", 5), NewRecord(b"k", b"w", 6)], base_offset=40)
    assert [r.offset for r in decode_records(built)] == [40, 41]


def test_log_append_time_gives_every_record_the_max_timestamp():
    built = build_batch([NewRecord(None, b"v", 5), NewRecord(None, b"w", 6)], compression=compression.GZIP)
    stamp_log_append_time(built, 777)
    assert list(record_times(built)) == [(0, 777), (1, 777)]
    assert [r.timestamp for r in decode_records(built)] == [777, 777]


def test_xerial_framed_snappy_as_java_clients_send_it():
    plain = build_batch([NewRecord(b"key", b"value" * 50, 9, (("h", b"x"),))])
    records = bytes(plain[HEADER_BYTES:])
    chunks = [records[:40], records[40:]]
    framed = compression.XERIAL_MAGIC + struct.pack(">ii", 1, 1) + b"".join(
        struct.pack(">i", len(c)) + c for c in (bytes(cramjam.snappy.compress_raw(c)) for c in chunks))
    batch = bytearray(plain[:HEADER_BYTES]) + framed
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, compression.SNAPPY)
    set_crc(batch)
    assert list(decode_records(batch)) == list(decode_records(plain))


def test_a_control_batch_carries_its_marker():
    batch = build_control_batch(7, 3, ControlType.ABORT, coordinator_epoch=11, timestamp_ms=50)
    header = parse_header(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.record_count) == (7, 3, -1, 1)
    assert control_marker(batch) == Marker(ControlType.ABORT, 11)
    with pytest.raises(InvalidBatch):
        control_marker(build_batch([NewRecord(b"\x00\x00\x00\x01", b"\x00" * 6, 1)], producer=Producer(7, 3, 0)))


@pytest.mark.parametrize("damage", [
    lambda b: b[:-2],                                    # the last record is cut short
    lambda b: b[:HEADER_BYTES] + b"\xff" * 11,           # a varint that never ends
    lambda b: b[:HEADER_BYTES] + b"\x7e" + b[HEADER_BYTES + 1 :],  # a record length past the end
])
def test_garbage_records_are_invalid_batches(damage):
    good = bytes(build_batch([NewRecord(b"k", b"v", 1), NewRecord(b"k", b"w", 2)]))
    bad = bytearray(damage(good))
    struct.pack_into(">i", bad, 8, len(bad) - 12)
    with pytest.raises(InvalidBatch) as refused:
        list(decode_records(bad))
    assert refused.value.reason is Reason.MALFORMED_RECORDS


def test_records_that_do_not_decompress_are_invalid_batches():
    bad = bytearray(build_batch([NewRecord(b"k", b"v", 1)]))
    struct.pack_into(">h", bad, 21, compression.ZSTD)
    with pytest.raises(InvalidBatch) as refused:
        list(decode_records(bad))
    assert refused.value.reason is Reason.MALFORMED_RECORDS


@pytest.mark.parametrize(("source", "target"), [(compression.NONE, compression.ZSTD), (compression.GZIP, compression.NONE),
                                                (compression.LZ4, compression.SNAPPY), (compression.SNAPPY, compression.GZIP)])
def test_a_recompressed_batch_holds_the_same_records_and_header_under_the_new_codec(source: int, target: int):
    producer = Producer(producer_id=7, producer_epoch=2, base_sequence=40)
    sent = build_batch([NewRecord(b"k", b"v" * 500, 5), NewRecord(None, b"w", 3)], producer=producer, compression=source,
                       base_offset=9)
    stamp_log_append_time(sent, 77)
    again = recompress(sent, target, level=1)
    before, after = parse_header(sent), parse_header(again)
    assert after.compression == target and crc_ok(again)
    assert after._replace(attributes=before.attributes, batch_length=0, crc=0) == before._replace(batch_length=0, crc=0)
    assert after.attributes & ~COMPRESSION_MASK == before.attributes & ~COMPRESSION_MASK  # the time stamp bit stays
    assert list(decode_records(again)) == list(decode_records(sent))


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.LZ4, compression.ZSTD])
def test_the_largest_record_is_its_declared_length_once_decompressed(codec: int) -> None:
    batch = build_batch([NewRecord(b"k", b"x" * 100, 1), NewRecord(b"k", b"y" * 504, 1), NewRecord(None, None, 1)],
                        compression=codec)
    assert largest_record(batch) == 512  # key b"k" and the value's 2-byte length: 8 bytes besides the value
