"""Compaction of a partition log: a pass keeps each key's latest record at its offset, reads
across the gaps it leaves, survives a reopen, expires tombstones on a later pass, and a crash
at any store call of a pass leaves a log that opens and reads whole."""

from __future__ import annotations

from typing import Any

import pytest
from log_batches import ManualClock, read_committed

from martlet.engine.log import LogConfig, PartitionLog
from martlet.engine.log.compaction import rewrite
from martlet.engine.store import MemoryStore
from martlet.records.build import NewRecord, Producer, build_batch, build_control_batch
from martlet.records.control import ControlType
from martlet.records.decode import decode_records
from martlet.records.header import iter_batches, parse_header

COMPACTED = LogConfig(segment_bytes=600, index_interval_bytes=100, compacted=True, deletes=False,
                      min_cleanable_ratio=0.0, delete_retention_ms=1000)
NOW = 1_000_000
MAP_BYTES = 1 << 20  # the key map of one pass


def open_log(store: MemoryStore, clock: ManualClock) -> PartitionLog:
    return PartitionLog.open(store, "topic-0", COMPACTED, clock)


def append(log: PartitionLog, key: bytes, value: bytes | None, stamp: int = NOW) -> int:
    batch = build_batch([NewRecord(key, value, stamp)])
    return log.append(batch, parse_header(batch))


def one_pass(log: PartitionLog, map_bytes: int = MAP_BYTES) -> int:
    work = log.compaction_plan()
    if work is None:
        return 0
    done, reached = rewrite(work, log.producers_last(), log.config, log.now_ms(), map_bytes)
    return log.swap_cleaned(done, reached)


def records(log: PartitionLog, offset: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    found = []
    while offset < log.end_offset:
        data = log.read(offset, 1 << 20)
        for at, header in iter_batches(data):
            found += [(r.offset, r.key, r.value) for r in decode_records(data[at:at + header.size])]
            offset = header.next_offset
    return found


def history(log: PartitionLog) -> dict[int, tuple[bytes, bytes | None]]:
    """Keys k0-k4 written 30 times over; k4's last record is a tombstone."""
    written = {}
    for i in range(30):
        key, value = b"k%d" % (i % 5), b"v%02d" % i
        if i == 29:
            value = None
        written[append(log, key, value)] = (key, value)
    log.flush()
    return written


def latest(written: dict[int, tuple[bytes, bytes | None]], end: int) -> dict[bytes, tuple[int, bytes | None]]:
    found: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, (key, value) in sorted(written.items()):
        if offset < end:
            found[key] = (offset, value)
    return found


def test_a_pass_keeps_the_latest_of_each_key_at_its_offset_and_reads_across_gaps() -> None:
    store, clock = MemoryStore(), ManualClock(NOW)
    log = open_log(store, clock)
    written = history(log)
    end, sealed_end = log.end_offset, log._segments[-1].base_offset  # noqa: SLF001
    assert log.segment_count > 3
    assert one_pass(log) > 0
    got = records(log)
    assert len(got) < len(written)
    assert [o for o, _, _ in got] == sorted(o for o, _, _ in got)
    assert all(written[o] == (k, v) for o, k, v in got)  # every survivor unchanged, at its own offset
    mapped = latest(written, sealed_end)
    for key, (offset, value) in mapped.items():
        assert [(o, v) for o, k, v in got if k == key and o < sealed_end] == [(offset, value)]
    assert log.end_offset == end
    first_gap = next(o for o in range(end) if o not in {o for o, _, _ in got})
    assert parse_header(log.read(first_gap, 100)).next_offset > first_gap  # a gap reads as what follows
    reopened = open_log(store, clock)
    assert records(reopened) == got
    assert one_pass(reopened) == 0  # nothing dirty is left below the active segment


def test_a_map_smaller_than_the_dirty_keys_cleans_in_several_passes_to_the_same_log() -> None:
    whole_store, small_store = MemoryStore(), MemoryStore()
    whole, small = open_log(whole_store, ManualClock(NOW)), open_log(small_store, ManualClock(NOW))
    history(whole)
    history(small)
    one_pass(whole)
    passes = 0
    while one_pass(small, map_bytes=1) or small.cleaner_offset < whole.cleaner_offset:  # one batch mapped a pass
        passes += 1
        assert passes < 100
    assert passes > 2 and small.cleaner_offset == whole.cleaner_offset
    assert records(small) == records(whole)


def test_a_pass_leaves_no_file_for_a_segment_it_did_not_change() -> None:
    store, clock = MemoryStore(), ManualClock(NOW)
    log = open_log(store, clock)
    for i in range(30):
        append(log, b"k%02d" % i, b"v")  # every key once: nothing to drop
    log.flush()
    before = records(log)
    assert one_pass(log) == 0
    assert records(log) == before
    assert not [name for name in store.list("topic-0") if name.endswith(".cleaned")]


def test_a_later_pass_drops_tombstones_once_their_horizon_passed() -> None:
    store, clock = MemoryStore(), ManualClock(NOW)
    log = open_log(store, clock)
    history(log)
    for i in range(12):  # push the tombstone into a sealed segment
        append(log, b"x%d" % i, b"y")
    log.flush()
    one_pass(log)
    assert any(k == b"k4" and v is None for _, k, v in records(log))
    clock.advance(COMPACTED.delete_retention_ms)
    for i in range(12):
        append(log, b"z%d" % i, b"y")  # new dirty segments so a pass runs again
    log.flush()
    log.cleaner_offset = 0  # let the pass reach the tombstone's segment again
    one_pass(log)
    assert not any(k == b"k4" for _, k, _ in records(log))


class Crash(Exception):
    pass


class CrashingStore:
    """A MemoryStore that raises Crash on its n-th changing call (and then stays up)."""

    CHANGES = ("open_append", "rename", "delete", "truncate", "create_exclusive")

    def __init__(self, inner: MemoryStore, crash_at: int) -> None:
        self.inner, self.calls, self.crash_at = inner, 0, crash_at

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.CHANGES:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == self.crash_at:
                raise Crash(f"crash at call {self.calls}: {name}{args}")
            return attr(*args, **kwargs)
        return call


def _store_calls_of_a_pass() -> int:
    store = MemoryStore()
    log = open_log(store, ManualClock(NOW))
    history(log)
    counting = CrashingStore(store, crash_at=-1)
    log.store = counting
    for segment in log._segments:  # noqa: SLF001
        segment.store = counting
    one_pass(log)
    return counting.calls


CALLS_MAX = 30  # the pass below makes 22 changing store calls today


def test_the_crash_table_covers_every_store_call_of_a_pass() -> None:
    assert 0 < _store_calls_of_a_pass() <= CALLS_MAX


@pytest.mark.parametrize("crash_at", range(1, CALLS_MAX + 1))
def test_a_crash_at_any_store_call_of_a_pass_leaves_a_readable_log(crash_at: int) -> None:
    if crash_at > _store_calls_of_a_pass():
        pytest.skip("the pass makes fewer store calls")
    store, clock = MemoryStore(), ManualClock(NOW)
    log = open_log(store, clock)
    written = history(log)
    end = log.end_offset
    crashing = CrashingStore(store, crash_at)
    log.store = crashing
    for segment in log._segments:  # noqa: SLF001
        segment.store = crashing
    with pytest.raises(Crash):
        one_pass(log)
    log.abandon()
    reopened = open_log(store, clock)  # recovery after the crash
    got = records(reopened)
    assert reopened.end_offset == end
    assert all(written[o] == (k, v) for o, k, v in got)
    for key, (offset, value) in latest(written, end).items():
        assert (offset, key, value) in got  # the latest of every key survives, whatever step died
    assert not [name for name in store.list("topic-0") if name.endswith(".cleaned")]
    one_pass(reopened)  # and the next pass finishes the job
    assert len(records(reopened)) < len(written) and records(reopened)[-1][0] == max(written)


def txn_append(log: PartitionLog, pid: int, sequence: int, key: bytes, value: bytes) -> int:
    batch = build_batch([NewRecord(key, value, NOW)], producer=Producer(pid, 0, sequence), transactional=True)
    return log.append(batch, parse_header(batch))


def end_txn(log: PartitionLog, pid: int, commit: bool) -> int:
    batch = build_control_batch(pid, 0, ControlType.COMMIT if commit else ControlType.ABORT, 0, NOW)
    return log.append(batch, parse_header(batch))


def fill(log: PartitionLog, rounds: int) -> None:
    """Other keys, enough to seal the segments above."""
    for i in range(rounds):
        append(log, b"other%d" % (i % 3), b"x%02d" % i)


def test_an_aborted_write_neither_survives_nor_hides_the_committed_value_before_it() -> None:
    store, clock = MemoryStore(), ManualClock(NOW)
    log = open_log(store, clock)
    committed = append(log, b"k", b"committed")
    aborted = txn_append(log, 7, 0, b"k", b"aborted")
    end_txn(log, 7, commit=False)
    fill(log, 30)
    log.flush()
    assert one_pass(log) > 0
    kept = {offset: (key, value) for offset, key, value in records(log)}
    assert kept[committed] == (b"k", b"committed")  # the map never took the aborted offset
    assert aborted not in kept
    reopened = open_log(store, clock)
    assert {o: (k, v) for o, k, v in records(reopened)}[committed] == (b"k", b"committed")


def test_a_committed_transactional_write_is_compacted_like_any_other() -> None:
    store, clock = MemoryStore(), ManualClock(NOW)
    log = open_log(store, clock)
    older = append(log, b"k", b"old")
    newer = txn_append(log, 7, 0, b"k", b"new")
    end_txn(log, 7, commit=True)
    fill(log, 30)
    log.flush()
    assert one_pass(log) > 0
    kept = {offset: (key, value) for offset, key, value in records(log)}
    assert older not in kept and kept[newer] == (b"k", b"new")


def test_nothing_from_an_open_transaction_on_is_cleaned() -> None:
    store, clock = MemoryStore(), ManualClock(NOW)
    log = open_log(store, clock)
    append(log, b"k", b"before")
    first_open = txn_append(log, 7, 0, b"k", b"open")
    fill(log, 30)  # seals segments above the open transaction
    log.flush()
    work = log.compaction_plan()
    assert work is None or all(segment.next_offset <= first_open for segment in work.segments)
    one_pass(log)
    assert (first_open, b"k", b"open") in records(log)


def batches_of(log: PartitionLog) -> list[bytes]:
    found, offset = [], 0
    while offset < log.end_offset:
        data = log.read(offset, 1 << 20)
        for at, header in iter_batches(data):
            found.append(bytes(data[at:at + header.size]))
            offset = header.next_offset
    return found


def committed_view(log: PartitionLog) -> dict[int, tuple[bytes | None, bytes | None]]:
    return read_committed(batches_of(log), log.aborted_transactions())


def markers(log: PartitionLog) -> list[int]:
    return [parse_header(batch).base_offset for batch in batches_of(log) if parse_header(batch).is_control]


def three_transactions(log: PartitionLog) -> tuple[list[int], int]:
    """Producer 7 commits k=t1, aborts k=aborted, commits k=t3; returns the markers and t3's offset."""
    txn_append(log, 7, 0, b"k", b"t1")
    ends = [end_txn(log, 7, commit=True)]
    txn_append(log, 7, 1, b"k", b"aborted")
    ends.append(end_txn(log, 7, commit=False))
    t3 = txn_append(log, 7, 2, b"k", b"t3")
    ends.append(end_txn(log, 7, commit=True))
    fill(log, 30)
    log.flush()
    return ends, t3


def again(log: PartitionLog, clock: ManualClock, advance_ms: int = 0) -> int:
    """Another pass over the whole log, after `advance_ms`."""
    clock.advance(advance_ms)
    fill(log, 12)
    log.flush()
    log.cleaner_offset = 0
    return one_pass(log)


def test_markers_go_once_their_transaction_has_no_records_left_and_their_horizon_passed() -> None:
    store, clock = MemoryStore(), ManualClock(NOW)
    log = open_log(store, clock)
    (commit1, abort, commit3), t3 = three_transactions(log)
    assert log.aborted_transactions()[0].last_offset == abort
    one_pass(log)  # the records of the first two transactions go; their markers stay
    assert markers(log) == [commit1, abort, commit3]
    again(log, clock)  # their markers get a delete horizon
    assert markers(log) == [commit1, abort, commit3]
    again(log, clock, COMPACTED.delete_retention_ms - 1)
    assert markers(log) == [commit1, abort, commit3]
    again(log, clock, 1)  # the horizon passed: gone, the ABORT with its aborted-transaction entry
    assert markers(log) == [commit3]
    assert log.aborted_transactions() == []
    assert not [name for name in store.list("topic-0") if name.endswith(".txnindex")]
    assert committed_view(log)[t3] == (b"k", b"t3")
    reopened = open_log(store, clock)
    assert markers(reopened) == [commit3] and reopened.aborted_transactions() == []
    assert committed_view(reopened)[t3] == (b"k", b"t3")


def test_a_producers_last_marker_stays_for_its_epoch() -> None:
    store, clock = MemoryStore(), ManualClock(NOW)
    log = open_log(store, clock)
    txn_append(log, 9, 0, b"k", b"aborted")
    bumped = build_control_batch(9, 1, ControlType.ABORT, 0, NOW)  # the coordinator aborted it at a new epoch
    marker = log.append(bumped, parse_header(bumped))
    append(log, b"k", b"plain")
    fill(log, 30)
    log.flush()
    for advance in (0, 0, COMPACTED.delete_retention_ms, COMPACTED.delete_retention_ms):
        again(log, clock, advance)
    assert markers(log) == [marker]
    assert open_log(store, clock).producer_state.producers[9].epoch == 1


MARKER_PASS_CALLS_MAX = 45  # the pass below makes 39 changing store calls today


@pytest.mark.parametrize("crash_at", range(1, MARKER_PASS_CALLS_MAX + 1))
def test_a_crash_at_any_store_call_of_a_pass_that_removes_markers_loses_nothing(crash_at: int) -> None:
    store, clock = MemoryStore(), ManualClock(NOW)
    log = open_log(store, clock)
    (_, _, commit3), t3 = three_transactions(log)
    one_pass(log)
    again(log, clock)
    clock.advance(COMPACTED.delete_retention_ms)
    fill(log, 12)
    log.flush()
    log.cleaner_offset = 0
    crashing = CrashingStore(store, crash_at)
    log.store = crashing
    for segment in log._segments:  # noqa: SLF001
        segment.store = crashing
    try:
        one_pass(log)
    except Crash:
        pass
    else:
        assert crashing.calls <= MARKER_PASS_CALLS_MAX  # fewer calls than crash_at, all of them in the table
        assert markers(log) == [commit3]
    log.abandon()
    reopened = open_log(store, clock)
    view = committed_view(reopened)
    assert view[t3] == (b"k", b"t3") and b"aborted" not in {value for _, value in view.values()}
    assert {entry.last_offset for entry in reopened.aborted_transactions()} <= set(markers(reopened))
    reopened.cleaner_offset = 0
    one_pass(reopened)
    assert markers(reopened) == [commit3] and reopened.aborted_transactions() == []
