"""The cleaner's rules held to a model over random histories: after a pass, each key's latest
record survives once (a tombstone until its delete horizon passes), nothing older does,
every surviving record is unchanged at its original offset, batches keep their offset ranges
and only a producer's last batch may stay empty."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.engine.log.cleaner import Aborted, Markers, clean_batch, last_batches, latest_offsets
from martlet.engine.log.producers import ProducerState, end_marker
from martlet.engine.log.txnindex import AbortedTxn
from martlet.records.build import NewRecord, Producer, build_batch, build_control_batch
from martlet.records.control import ControlType
from martlet.records.decode import Record, decode_records
from martlet.records.header import crc_ok, parse_header
from tests.unit.engine.log.log_batches import read_committed

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
    markers = Markers()
    out = [clean_batch(batch, latest, now_ms, retention_ms, producers, markers) for batch in batches]
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
    markers = Markers()
    out = [clean_batch(batch, latest, T0 + 20_000, 1_000, producers, markers, aborted) for batch in batches]
    kept = _records([batch for batch in out if batch is not None])
    assert {r.key: r for r in kept} == committed
    assert not {r.offset for r in kept} & gone


LIVE_RECORD = st.tuples(st.sampled_from([b"a", b"b", b"c"]), st.binary(min_size=0, max_size=4), st.integers(0, 100))
TXN_STEP = st.tuples(st.lists(LIVE_RECORD, min_size=1, max_size=3), st.sampled_from([7, 9]),
                     st.sampled_from(["write", "write", "commit", "abort"]))


@settings(max_examples=150, deadline=None)
@given(st.lists(TXN_STEP, min_size=1, max_size=16))
def test_markers_go_only_once_nothing_of_their_transaction_is_left(
        steps: list[tuple[list[tuple[bytes, bytes, int]], int, str]]) -> None:
    """Transactions of two producers, committed and aborted, cleaned pass after pass as time
    passes: after every pass a read_committed reader (told of the aborted transactions whose
    marker is left) gets each key's latest committed record, and a replay of the log (as
recovery reads it) finds no transaction left open; in the end the only markers left
    are those of transactions with records left and producers' last batches."""
    batches: list[bytearray | bytes] = []
    entries: list[AbortedTxn] = []
    offset, sequences, open_at = 0, {7: 0, 9: 0}, {}
    committed: list[tuple[int, bytes, bytes]] = []
    writes: dict[int, list[tuple[int, bytes, bytes]]] = {7: [], 9: []}

    def end(producer_id: int, commit: bool) -> None:
        nonlocal offset
        control = ControlType.COMMIT if commit else ControlType.ABORT
        batches.append(build_control_batch(producer_id, 0, control, 0, T0, base_offset=offset))
        if commit:
            committed.extend(writes[producer_id])
        else:
            entries.append(AbortedTxn(producer_id, open_at[producer_id], offset, offset + 1))
        writes[producer_id] = []
        del open_at[producer_id]
        offset += 1

    for records, producer_id, step in steps:
        if step != "write":
            if producer_id in open_at:
                end(producer_id, step == "commit")
            continue
        batches.append(build_batch([NewRecord(k, v, T0 + t) for k, v, t in records], transactional=True,
                                   producer=Producer(producer_id, 0, sequences[producer_id]), base_offset=offset))
        open_at.setdefault(producer_id, offset)
        writes[producer_id] += [(offset + i, k, v) for i, (k, v, _) in enumerate(records)]
        sequences[producer_id] += len(records)
        offset += len(records)
    for producer_id in sorted(open_at):
        end(producer_id, True)
    latest = {key: (at, value) for at, key, value in sorted(committed)}  # the latest by offset, as in the log

    now = T0 + 20_000
    for advance in (0, 0, 1_000, 1_000):
        now += advance
        batches, entries = _pass_with_markers(batches, entries, now, 1_000)
        view = read_committed(batches, entries)
        assert {key: (at, value) for at, (key, value) in view.items()} == latest
        assert {entry.last_offset for entry in entries} <= {parse_header(b).base_offset for b in batches}
        replayed = ProducerState()  # as recovery reads the log: every transaction ends
        for batch in batches:
            replayed.update(parse_header(batch), end_marker(batch, parse_header(batch)))
        assert replayed.first_open_offset() is None
    last, holding = last_batches(batches), set[int]()
    for header in (parse_header(batch) for batch in batches):  # each marker left has a reason to be
        if header.is_control:
            assert header.producer_id in holding or last[header.producer_id] == header.base_offset
            holding.discard(header.producer_id)
        else:
            holding.add(header.producer_id)


def _pass_with_markers(batches: list[bytearray | bytes], entries: list[AbortedTxn], now_ms: int,
                       retention_ms: int) -> tuple[list[bytearray | bytes], list[AbortedTxn]]:
    aborted = Aborted(entries)
    latest = latest_offsets(batches, aborted=aborted)
    markers = Markers()
    producers = last_batches(b for b in batches if not parse_header(b).is_control)  # as the log keeps them:
    for batch in batches:  # the last batch of records, else the last marker (PartitionLog.producers_last)
        header = parse_header(batch)
        if header.is_control and header.producer_id not in producers:
            producers[header.producer_id] = header.base_offset
    out = [clean_batch(batch, latest, now_ms, retention_ms, producers, markers, aborted) for batch in batches]
    kept = [batch for batch in out if batch is not None]
    left = {parse_header(batch).base_offset for batch in kept if parse_header(batch).is_control}
    return kept, [entry for entry in entries if entry.last_offset in left]
