"""client/batching.py writes the very bytes records/build.py's build_batch writes for the same
records and producer: keys and values null, empty, short and past the varint table, headers or
none, timestamps going back and forth, sequences anywhere in their range."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.client.batching import TABLE_SIZE, build_producer_batch
from martlet.client.message import Message
from martlet.records.build import NewRecord, Producer, build_batch
from martlet.records.decode import decode_records

# Lengths at the edge of the varint table (8,191 bytes is the last it holds) are made cheaply,
# as zero bytes of a drawn length: drawing 8 KB of random bytes trips Hypothesis's health checks.
payloads = st.one_of(st.none(), st.binary(max_size=40), st.integers(TABLE_SIZE // 2 - 2, TABLE_SIZE // 2 + 2).map(bytes))
headers = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))), max_size=3).map(tuple)
records = st.builds(NewRecord, payloads, payloads, st.integers(1_600_000_000_000, 1_900_000_000_000), headers)
producers = st.builds(Producer, st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1), st.integers(0, 2**31 - 1))


@settings(max_examples=150, deadline=None)
@given(st.lists(records, min_size=1, max_size=30), producers)
def test_the_same_bytes_as_build_batch(batch: list[NewRecord], producer: Producer) -> None:
    assert build_producer_batch(batch, producer) == build_batch(batch, producer=producer)


@settings(max_examples=20, deadline=None)
@given(st.integers(TABLE_SIZE // 2 - 3, TABLE_SIZE // 2 + 3), producers)
def test_offset_deltas_past_the_table(count: int, producer: Producer) -> None:
    batch = [NewRecord(None, b"v", 1_700_000_000_000 + i % 5) for i in range(count)]
    assert build_producer_batch(batch, producer) == build_batch(batch, producer=producer)


def test_messages_encode_as_their_records() -> None:
    messages = [Message(b"value-%d" % i, b"key" if i % 2 else None, (("h", b"x"),) if i == 3 else (), 1_700_000_000_000 + i)
                for i in range(10)]
    producer = Producer(7, 1, 42)
    built = build_producer_batch(messages, producer)
    assert built == build_batch([NewRecord(m.key, m.value, m.timestamp, m.headers) for m in messages], producer=producer)
    assert [r.value for r in decode_records(built)] == [m.value for m in messages]


def test_no_records_no_batch() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_producer_batch([], Producer(1, 0, 0))
