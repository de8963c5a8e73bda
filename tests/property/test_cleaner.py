"""The cleaner's rules held to a model over random histories: after a pass, each key's latest
record survives once (a tombstone until its delete horizon passes), nothing older does,
every surviving record is unchanged at its original offset, batches keep their offset ranges
and only a producer's last batch may stay empty."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.engine.log.cleaner import Aborted, clean_batch, last_batches, latest_offsets
from martlet.engine.log.txnindex import AbortedTxn
from martlet.records.build import NewRecord, Producer, build_batch
from martlet.records.decode import Record, decode_records
from martlet.records.header import crc_ok, parse_header

KEYS = st.none() | st.sampled_from([b"a", b"b", b"c", b"d", b"e"])
VALUES = st.none() | st.binary(min_size=0, max_size=6)
RECORD = st.tuples(KEYS, VALUES, st.integers(0, 10_000))
BATCH = st.tuples(st.lists(RECORD, min_size=1, max_size=5), st.sampled_from([-1, 7, 9]), st.sampled_from([0, 1, 4]))
T0 = 1_700_000_000_000


def _log(history: list[tuple[list[tuple[bytes | None, bytes | None, int]], int, int]]) -> list[bytearray]:
    batches, offset, sequences = [], 0, {7: 0, 9: 0}
    for records, producer_id, codec in history:
        producer = Producer(producer_id, 0, sequences[producer_id]) if producer_id >= 0 else Producer(-1, -1, -1)
        if producer_id >= 0:
            sequences[producer_id] += len(records)
        batches.append(build_batch([NewRecord(k, v, T0 + t) for k, v, t in records], producer=producer,
                                   compression=codec, base_offset=offset))
        offset += len(records)
    return batches


def _pass(batches: list[bytearray | bytes], now_ms: int, retention_ms: int) -> list[bytes | bytearray]:
    latest = latest_offsets(batches)
    producers = last_batches(batches)
    out = [clean_batch(batch, latest, now_ms, retention_ms, producers) for batch in batches]
    return [batch for batch in out if batch is not None]


def _records(batches: list[bytes | bytearray]) -> list[Record]:
    return [record for batch in batches for record in decode_records(batch)]


@settings(max_examples=150, deadline=None)
@given(st.lists(BATCH, min_size=1, max_size=12), st.integers(0, 5_000), st.integers(0, 10_000))
def test_a_pass_keeps_the_latest_of_each_key_and_a_later_one_expires_tombstones(
        history: list[tuple[list[tuple[bytes | None, bytes | None, int]], int, int]], retention_ms: int,
        later_ms: int) -> None:
    original = _log(history)
    by_offset = {r.offset: r for r in _records(original)}
    latest: dict[bytes, Record] = {}
    for record in by_offset.values():
        if record.key is not None:
            latest[record.key] = record
    first_ms = T0 + 20_000
    first = _pass(list(original), first_ms, retention_ms)
    _check(original, first, by_offset)
    assert {r.key: r for r in _records(first)} == latest  # every key once, its latest (tombstones too)
    second_ms = first_ms + later_ms
    second = _pass(first, second_ms, retention_ms)
    _check(original, second, by_offset)
    expired = second_ms >= first_ms + retention_ms
    assert {r.key: r for r in _records(second)} == {
        key: r for key, r in latest.items() if not (r.value is None and expired)}


def _check(original: list[bytearray], cleaned: list[bytes | bytearray], by_offset: dict[int, Record]) -> None:
    ranges = {(parse_header(b).base_offset, parse_header(b).last_offset): parse_header(b) for b in original}
    last_of = last_batches(original)
    previous_end = -1
    for batch in cleaned:
        header = parse_header(batch)
        assert crc_ok(batch)
        assert (header.base_offset, header.last_offset) in ranges  # the batch's offsets did not move
        before = ranges[(header.base_offset, header.last_offset)]
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
            before.producer_id, before.producer_epoch, before.base_sequence)
        assert header.base_offset > previous_end
        previous_end = header.last_offset
        records = list(decode_records(batch))
        assert header.record_count == len(records)
        if not records:
            assert header.producer_id >= 0 and last_of[header.producer_id] == header.base_offset
        for record in records:
            assert record == by_offset[record.offset]  # key, value, timestamp, headers unchanged
            assert record.key is not None


TXN_BATCH = st.tuples(st.lists(RECORD, min_size=1, max_size=5), st.sampled_from([7, 9]), st.booleans())


@settings(max_examples=150, deadline=None)
@given(st.lists(TXN_BATCH, min_size=1, max_size=12))
def test_aborted_records_go_and_never_hide_a_committed_value(
        history: list[tuple[list[tuple[bytes | None, bytes | None, int]], int, bool]]) -> None:
    """Transactional batches, some of them aborted: a pass keeps each key's latest committed
    record and nothing of an aborted one."""
    batches: list[bytearray | bytes] = []
    entries, offset, sequences = [], 0, {7: 0, 9: 0}
    for records, producer_id, aborted in history:
        batch = build_batch([NewRecord(k, v, T0 + t) for k, v, t in records], transactional=True,
                            producer=Producer(producer_id, 0, sequences[producer_id]), base_offset=offset)
        if aborted:
            entries.append(AbortedTxn(producer_id, offset, offset + len(records) - 1, offset + len(records)))
        batches.append(batch)
        sequences[producer_id] += len(records)
        offset += len(records)
    gone = {offset for entry in entries for offset in range(entry.first_offset, entry.last_offset + 1)}
    committed: dict[bytes, Record] = {}
    for record in _records(batches):
        if record.key is not None and record.offset not in gone:
            committed[record.key] = record
    aborted = Aborted(entries)
    latest = latest_offsets(batches, aborted=aborted)
    producers = last_batches(batches)
    out = [clean_batch(batch, latest, T0 + 20_000, 1_000, producers, aborted) for batch in batches]
    kept = _records([batch for batch in out if batch is not None])
    assert {r.key: r for r in kept} == committed
    assert not {r.offset for r in kept} & gone
