"""Property tests: whatever batches go in, every offset and timestamp lookup through the sparse
indexes agrees with a linear scan of what was appended, before and after a restart."""

from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.engine.log import LogConfig, PartitionLog
from martlet.engine.store import MemoryStore
from martlet.records.header import HEADER_BYTES, BatchHeader, pack_header, parse_header, set_crc

I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)

headers = st.builds(
    BatchHeader,
    base_offset=I64,
    batch_length=I32,
    leader_epoch=I32,
    magic=st.integers(-128, 127),
    crc=st.integers(0, 2**32 - 1),
    attributes=I16,
    last_offset_delta=I32,
    base_timestamp=I64,
    max_timestamp=I64,
    producer_id=I64,
    producer_epoch=I16,
    base_sequence=I32,
    record_count=I32,
)


@given(headers)
def test_header_round_trip(header):
    assert parse_header(pack_header(header)) == header
    assert parse_header(b"junk" + pack_header(header), pos=4) == header


def build_batch(records: int, payload_bytes: int, timestamp_ms: int) -> bytearray:
    length = HEADER_BYTES - 12 + payload_bytes
    header = BatchHeader(0, length, 0, 2, 0, 0, records - 1, timestamp_ms, timestamp_ms, -1, -1, -1, records)
    batch = bytearray(pack_header(header)) + bytes(i % 251 for i in range(payload_bytes))
    set_crc(batch)
    return batch


batch_specs = st.lists(
    st.tuples(st.integers(1, 5), st.integers(0, 300), st.integers(0, 1_000)),  # records, payload, ts
    min_size=1,
    max_size=40,
)
configs = st.builds(LogConfig, segment_bytes=st.integers(150, 3_000), index_interval_bytes=st.integers(1, 600))


def expected_batches(specs):
    """(base offset, next offset, max timestamp, bytes) of each batch, by linear bookkeeping."""
    out, offset = [], 0
    for records, payload, ts in specs:
        batch = build_batch(records, payload, ts)
        batch[:8] = offset.to_bytes(8, "big")
        out.append((offset, offset + records, ts, bytes(batch)))
        offset += records
    return out


def check_lookups(log, expected):
    assert log.end_offset == expected[-1][1]
    assert log.read(0, 10**7) == b"".join(b for *_, b in expected)
    for base, next_offset, _, data in expected:
        for offset in range(base, next_offset):
            assert log.batch_at(offset) == data
            assert log.read(offset, 1) == data
    for target in {ts for _, _, ts, _ in expected} | {-1, 0, 1_001}:
        linear = next((b for _, _, ts, b in expected if ts >= target), None)
        assert log.batch_at_time(target) == linear
    assert log.max_timestamp == max(ts for _, _, ts, _ in expected)


@settings(max_examples=60, deadline=None)
@given(batch_specs, configs, st.booleans())
def test_lookups_agree_with_a_linear_scan(specs, config, clean):
    store = MemoryStore()
    log = PartitionLog.open(store, "p", config, lambda: 0)
    for records, payload, ts in specs:
        batch = build_batch(records, payload, ts)
        log.append(batch, parse_header(batch))
    expected = expected_batches(specs)
    check_lookups(log, expected)
    if clean:
        log.close()
    check_lookups(PartitionLog.open(store, "p", config, lambda: 0), expected)


@settings(max_examples=40, deadline=None)
@given(batch_specs, configs, st.data())
def test_reads_from_any_offset_are_whole_contiguous_batches(specs, config, data):
    log = PartitionLog.open(MemoryStore(), "p", config, lambda: 0)
    for records, payload, ts in specs:
        batch = build_batch(records, payload, ts)
        log.append(batch, parse_header(batch))
    expected = expected_batches(specs)
    offset = data.draw(st.integers(0, log.end_offset))
    max_bytes = data.draw(st.integers(0, 5_000))
    got = log.read(offset, max_bytes)
    holding = [i for i, (base, nxt, _, _) in enumerate(expected) if base <= offset < nxt]
    if not holding:
        assert got == b""
        return
    tail = [b for *_, b in expected[holding[0] :]]
    n = 1
    while n < len(tail) and sum(map(len, tail[: n + 1])) <= max_bytes:
        n += 1
    assert got == b"".join(tail[:n])
