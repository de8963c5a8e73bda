"""The columnar decoder (connectors/columns.py) gives what the record-by-record decoder
(records/decode.py) gives, for any records in any codec."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.connectors.columns import binary_array, columns, headers_array
from martlet.records import compression
from martlet.records.build import NewRecord, build_batch
from martlet.records.decode import decode_records
from martlet.records.header import parse_header, stamp_log_append_time

BYTES = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.tuples(st.text(max_size=5), BYTES), max_size=2)
RECORD = st.tuples(BYTES, BYTES, st.integers(-(2**40), 2**40), HEADERS)


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, min_size=1, max_size=200), st.sampled_from([compression.NONE, compression.GZIP,
                                                                    compression.LZ4, compression.ZSTD]),
       st.integers(0, 2**40), st.booleans(), st.booleans())
def test_columns_match_the_record_decoder(records: list, codec: int, base_offset: int, headers: bool,
                                          append_time: bool) -> None:
    batch = build_batch([NewRecord(k, v, 1_700_000_000_000 + t, tuple(h) if headers else ())
                         for k, v, t, h in records], compression=codec, base_offset=base_offset)
    if append_time:
        stamp_log_append_time(batch, 1_800_000_000_000)
    header = parse_header(batch)
    found = columns(bytes(batch), header)
    wanted = list(decode_records(batch))
    assert binary_array([found.keys]).to_pylist() == [r.key for r in wanted]
    assert binary_array([found.values]).to_pylist() == [r.value for r in wanted]
    assert found.offsets.tolist() == [r.offset for r in wanted]
    assert found.timestamps.tolist() == [r.timestamp for r in wanted]
    assert found.kind == int(append_time)
    assert headers_array([found]).to_pylist() == [[{"key": k, "value": v} for k, v in r.headers] for r in wanted]
    middle = wanted[len(wanted) // 2].offset
    assert found.between(middle, middle + 3).offsets.tolist() == [r.offset for r in wanted
                                                                   if middle <= r.offset < middle + 3]


SIZED = st.tuples(st.none() | st.integers(0, 20), st.none() | st.integers(0, 300), st.integers(1, 150))


@settings(max_examples=200, deadline=None)
@given(st.lists(SIZED, min_size=1, max_size=4), st.integers(0, 100), st.randoms(use_true_random=False),
       st.sampled_from([compression.NONE, compression.ZSTD]))
def test_runs_of_records_of_one_size_decode_and_gather_across_pieces(runs: list, step_ms: int, random: Any,
                                                                    codec: int) -> None:
    """Runs of records of one size (the walk's guesses and the strided copies), timestamps that
    grow a varint byte now and then, gathered into one column from several slices."""
    sizes = [(key, value) for key, value, count in runs for _ in range(count)]
    records = [NewRecord(None if k is None else random.randbytes(k), None if v is None else random.randbytes(v),
                         1_700_000_000_000 + step_ms * i, ()) for i, (k, v) in enumerate(sizes)]
    batch = build_batch(records, compression=codec, base_offset=1_000)
    found = columns(bytes(batch), parse_header(batch))
    wanted = list(decode_records(batch))
    assert found.timestamps.tolist() == [r.timestamp for r in wanted]
    cuts = sorted({1_000, 1_000 + len(wanted), *(1_000 + random.randrange(len(wanted) + 1) for _ in range(3))})
    pieces = [found.between(a, b) for a, b in zip(cuts, cuts[1:], strict=False)]
    assert binary_array([p.keys for p in pieces]).to_pylist() == [r.key for r in wanted]
    assert binary_array([p.values for p in pieces]).to_pylist() == [r.value for r in wanted]
    assert headers_array(pieces).to_pylist() == [[] for _ in wanted]

