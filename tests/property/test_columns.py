"""The columnar decoder (connectors/columns.py) gives what the record-by-record decoder
(records/decode.py) gives, for any records in any codec."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.connectors.columns import columns
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
    assert found.keys.to_pylist() == [r.key for r in wanted]
    assert found.values.to_pylist() == [r.value for r in wanted]
    assert found.offsets.tolist() == [r.offset for r in wanted]
    assert found.timestamps.tolist() == [r.timestamp for r in wanted]
    assert found.kind == int(append_time)
    assert found.headers.to_pylist() == [[{"key": k, "value": v} for k, v in r.headers] for r in wanted]
    middle = wanted[len(wanted) // 2].offset
    assert found.between(middle, middle + 3).offsets.tolist() == [r.offset for r in wanted
                                                                   if middle <= r.offset < middle + 3]
