"""The transaction index (`.txnindex`): its file, the search, and how a log writes, deletes and
recovers it along with the open transactions (clean close, crash, lost snapshots, damage)."""

import pytest
from log_batches import ManualClock, make_batch

from martlet.engine.log import LogConfig, PartitionLog
from martlet.engine.log.recovery import recover
from martlet.engine.log.txnindex import AbortedTxn, check_order, from_bytes, overlapping, to_bytes
from martlet.engine.store import LocalStore, MemoryStore
from martlet.records.build import build_control_batch
from martlet.records.control import ControlType
from martlet.records.header import TRANSACTIONAL_BIT, parse_header

CONFIG = LogConfig(segment_bytes=500, index_interval_bytes=150)
DIR = "t-0"
NOW_MS = 1_700_000_000_000


# -- the file and the search ---------------------------------------------------------------


def test_entries_round_trip_through_the_file():
    entries = [AbortedTxn(7, 0, 4, 2), AbortedTxn(8, 2, 9, 10), AbortedTxn(7, 11, 12, 13)]
    assert from_bytes(to_bytes(entries)) == entries
    assert from_bytes(to_bytes([])) == []


@pytest.mark.parametrize("damage", ["flip", "cut", "version"])
def test_a_damaged_file_is_refused(damage):
    data = bytearray(to_bytes([AbortedTxn(7, 0, 4, 5)]))
    if damage == "flip":
        data[-1] ^= 1
    elif damage == "cut":
        del data[-3:]
    else:
        data = bytearray(to_bytes([]))
        data[5] = 1  # version 1, and the CRC no longer matches either
    with pytest.raises(ValueError):
        from_bytes(bytes(data))


def test_entries_out_of_marker_order_are_refused():
    with pytest.raises(ValueError):
        check_order([AbortedTxn(7, 0, 9, 10), AbortedTxn(8, 1, 5, 6)])
    with pytest.raises(ValueError):
        check_order([AbortedTxn(7, 5, 5, 6)])  # a transaction's data lies before its marker


def test_the_search_finds_what_overlaps_a_read():
    # 3 began at 6, before 2's marker at 8: the stable offset after that marker is 6
    entries = [AbortedTxn(1, 0, 3, 4), AbortedTxn(2, 5, 8, 6), AbortedTxn(3, 6, 12, 13), AbortedTxn(4, 14, 15, 16)]
    assert overlapping(entries, 0, 20) == entries
    assert overlapping(entries, 4, 7) == entries[1:3]  # both began below 7 and ended at or after 4
    assert overlapping(entries, 9, 10) == [entries[2]]  # began at 6, aborted at 12: spans the read
    assert overlapping(entries, 16, 30) == []
    assert overlapping(entries, 0, 0) == []


def test_the_search_stops_at_a_stable_offset_past_the_read():
    # The second entry's stable offset (9) reaches past the read's end (7): no transaction aborted
    # after it can have begun below 7, so the third is never looked at, though it claims to.
    entries = [AbortedTxn(1, 0, 3, 4), AbortedTxn(2, 5, 8, 9), AbortedTxn(3, 1, 12, 13)]
    assert overlapping(entries, 0, 7) == entries[:2]


# -- a log's index files -------------------------------------------------------------------


class Writer:
    """Transactional batches and markers into a log, with each producer's sequence."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.sequences: dict[int, int] = {}

    def data(self, pid: int, records: int = 2, transactional: bool = True) -> int:
        sequence = self.sequences.get(pid, 0)
        self.sequences[pid] = sequence + records
        return self.log.append(*make_batch(record_count=records, producer_id=pid, base_sequence=sequence,
                                           attributes=TRANSACTIONAL_BIT if transactional else 0))

    def plain(self, records: int = 2) -> int:
        return self.log.append(*make_batch(record_count=records))

    def marker(self, pid: int, commit: bool) -> int:
        batch = build_control_batch(pid, 0, ControlType.COMMIT if commit else ControlType.ABORT, 0, NOW_MS)
        return self.log.append(batch, parse_header(batch))


def open_log(store) -> PartitionLog:
    return PartitionLog.open(store, DIR, CONFIG, ManualClock())


def txn_files(store) -> dict[int, list[AbortedTxn]]:
    names = [name for name in store.list(DIR) if name.endswith(".txnindex")]
    return {int(name[:20]): from_bytes(store.read(f"{DIR}/{name}", 0, 10**6)) for name in names}


def state(log: PartitionLog) -> tuple[dict[int, int], list[AbortedTxn], dict[int, list[AbortedTxn]]]:
    """What recovery must give back: open transactions, aborted ones, and which segment holds which."""
    by_segment = {segment.base_offset: list(segment.aborted) for segment in log._segments}
    return dict(log.producer_state.open), log.aborted_transactions(), by_segment


def history(log: PartitionLog) -> Writer:
    """Several segments: aborts and commits, transactions spanning rolls, two left open."""
    writer = Writer(log)
    writer.data(1)
    writer.data(2)
    writer.plain()
    for round_ in range(6):
        writer.data(1)
        writer.marker(1, commit=round_ % 2 == 0)
        writer.data(1)
        writer.plain()
        writer.data(2)
        if round_ % 3 == 2:
            writer.marker(2, commit=False)
            writer.data(2)
    writer.data(3)
    return writer


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    return MemoryStore() if request.param == "memory" else LocalStore(str(tmp_path))


def test_a_sealed_segment_gets_a_file_only_when_it_holds_aborts(store):
    log = open_log(store)
    history(log)
    sealed = {segment.base_offset: segment.aborted for segment in log._segments[:-1]}
    assert log.segment_count > 3
    assert txn_files(store) == {base: aborted for base, aborted in sealed.items() if aborted}
    assert any(not aborted for aborted in sealed.values())  # some segments have none, and no file
    assert log.aborted_transactions() == [entry for aborted in sealed.values() for entry in aborted] + \
        log._segments[-1].aborted


def test_an_aborted_entry_names_the_first_batch_and_the_marker(store):
    log = open_log(store)
    writer = Writer(log)
    first = writer.data(5)
    writer.data(6)
    writer.data(5)
    marker = writer.marker(5, commit=False)
    assert log.aborted_transactions() == [AbortedTxn(5, first, marker, 2)]  # 6's transaction began at 2


def test_a_clean_close_writes_the_active_segments_file_and_open_restores_everything(store):
    log = open_log(store)
    history(log)
    before = state(log)
    log.close()
    assert log._segments[-1].base_offset in txn_files(store) or not log._segments[-1].aborted
    assert state(open_log(store)) == before


def test_after_a_crash_the_replay_rebuilds_the_active_segments_entries(store):
    log = open_log(store)
    writer = history(log)
    before = state(log)
    log.flush()  # persisted, but never closed: no snapshot, no file for the active segment
    reopened = open_log(store)
    assert state(reopened) == before
    writer.log = reopened
    writer.data(3)  # the open transactions go on where they were
    writer.marker(3, commit=False)
    assert reopened.aborted_transactions()[-1].first_offset == before[0][3]


def test_a_crash_after_a_reopen_keeps_the_entries_below_the_close_snapshot(store):
    log = open_log(store)
    writer = history(log)
    log.close()
    log = open_log(store)
    writer.log = log
    writer.data(3)
    writer.marker(3, commit=False)  # aborted after the clean close's snapshot, in the same segment
    writer.marker(1, commit=False)
    before = state(log)
    log.flush()
    assert state(open_log(store)) == before


def test_without_snapshots_the_whole_log_is_replayed(store):
    log = open_log(store)
    history(log)
    before = state(log)
    log.close()
    for name in store.list(DIR):
        if name.endswith(".producers"):
            store.delete(f"{DIR}/{name}")
    assert state(open_log(store)) == before


def damage_first_file(store) -> int:
    damaged = min(txn_files(store))
    path = f"{DIR}/{damaged:020d}.txnindex"
    data = bytearray(store.read(path, 0, 10**6))
    data[-1] ^= 0xFF
    store.delete(path)
    store.open_append(path).write(bytes(data))
    return damaged


def test_a_damaged_file_is_rebuilt_by_a_full_replay_and_rewritten(store):
    log = open_log(store)
    history(log)
    before = state(log)
    log.close()
    damaged = damage_first_file(store)
    reopened = open_log(store)
    assert state(reopened) == before
    assert txn_files(store)[damaged] == before[2][damaged]


def test_a_new_owner_hands_the_rebuilt_file_to_its_caller(store):
    log = open_log(store)
    history(log)
    before = state(log)
    log.close()
    damaged = damage_first_file(store)
    deferred: list[tuple[str, bytes]] = []
    recover(store, DIR, CONFIG, deferred)  # a take-over writes these beside its sessions file
    assert [(path, from_bytes(data)) for path, data in deferred if path.endswith(".txnindex")] == \
        [(f"{DIR}/{damaged:020d}.txnindex", before[2][damaged])]


def test_a_new_owners_own_segment_seals_the_last_with_its_file(store):
    log = open_log(store)
    writer = history(log)
    writer.marker(1, commit=False)
    log.flush()
    taken = open_log(store)  # the last owner never closed
    taken.start_own_segment()  # seals that segment without a snapshot
    before = state(taken)
    sealed = taken._segments[-2]
    assert txn_files(store).get(sealed.base_offset, []) == sealed.aborted
    assert state(open_log(store)) == before  # replayed from the older snapshot, across the roll


def test_deleting_a_segment_deletes_its_file(store):
    log = open_log(store)
    history(log)
    with_file = min(txn_files(store))
    after = next(s.next_offset for s in log._segments if s.base_offset == with_file)
    log.delete_records(after)
    assert with_file not in txn_files(store)
    assert all(entry.last_offset >= with_file for entry in log.aborted_transactions())


def test_recovery_deletes_a_file_whose_log_is_gone(store):
    log = open_log(store)
    history(log)
    log.close()
    store.open_append(f"{DIR}/{10**9:020d}.txnindex").write(to_bytes([AbortedTxn(1, 0, 3, 4)]))
    open_log(store)
    assert 10**9 not in txn_files(store)
