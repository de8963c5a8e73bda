"""ProducerState's transactions (KIP-98): a transactional batch opens one, a marker closes it,
an ABORT marker is reported for the transaction index; snapshots keep the open ones."""

import json
import struct

import crc32c
import pytest
from log_batches import make_batch

from martlet.engine.errors import CoordinatorFenced, StaleProducerEpoch, TransactionOpen
from martlet.engine.log.producers import CompletedTxn, ProducerState, end_marker
from martlet.records.build import build_control_batch
from martlet.records.control import ControlType, Marker
from martlet.records.header import TRANSACTIONAL_BIT, parse_header

NOW_MS = 1_700_000_000_000


class Writer:
    """Feeds a ProducerState batches at dense offsets, as a log does."""

    def __init__(self) -> None:
        self.state = ProducerState()
        self.offset = 0
        self.sequences: dict[int, int] = {}

    def data(self, pid: int, records: int = 2, transactional: bool = True, epoch: int = 0) -> int:
        sequence = self.sequences.get(pid, 0)
        _, header = make_batch(record_count=records, producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                               attributes=TRANSACTIONAL_BIT if transactional else 0)
        header = header._replace(base_offset=self.offset)
        self.state.check(header)
        self.state.update(header)
        self.sequences[pid] = sequence + records
        self.offset = header.next_offset
        return header.base_offset

    def marker(self, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0,
               timestamp_ms: int = NOW_MS) -> CompletedTxn | None:
        kind = ControlType.COMMIT if commit else ControlType.ABORT
        batch = build_control_batch(pid, epoch, kind, coordinator_epoch, timestamp_ms, base_offset=self.offset)
        header = parse_header(batch)
        marker = end_marker(batch, header)
        self.state.check(header, marker)  # the marker checks: producer and coordinator epochs
        self.offset = header.next_offset
        return self.state.update(header, marker)


def test_the_first_transactional_batch_opens_a_transaction_at_its_base_offset():
    writer = Writer()
    writer.data(-1, transactional=False)
    first = writer.data(7)
    writer.data(7)
    assert writer.state.open == {7: first}
    assert writer.state.first_open_offset() == first == 2


def test_a_commit_closes_the_transaction_and_names_it():
    writer = Writer()
    writer.data(7)
    writer.data(7)
    completed = writer.marker(7, commit=True)
    assert completed == CompletedTxn(7, 0, 4, 5, aborted=False)
    assert writer.state.open == {} and writer.state.first_open_offset() is None


def test_an_abort_names_the_transaction_and_the_stable_offset_after_it():
    writer = Writer()
    writer.data(7)  # 0-1
    writer.data(8)  # 2-3: still open after 7's abort
    completed = writer.marker(7, commit=False)  # 4
    assert completed == CompletedTxn(7, 0, 4, 2, aborted=True)
    assert completed.aborted_entry() == (7, 0, 4, 2)
    assert writer.state.open == {8: 2}


def test_a_marker_without_an_open_transaction_changes_nothing():
    writer = Writer()
    writer.data(7, transactional=False)
    assert writer.marker(7, commit=False) is None
    assert writer.marker(9, commit=True) is None
    assert writer.state.open == {}


def test_open_transactions_stay_in_the_order_they_began():
    writer = Writer()
    firsts = {pid: writer.data(pid) for pid in (5, 3, 9)}
    writer.marker(3, commit=True)
    writer.data(3)  # a new transaction of 3, the newest
    assert list(writer.state.open.items()) == [(5, firsts[5]), (9, firsts[9]), (3, 7)]
    assert writer.state.first_open_offset() == firsts[5]


def test_a_producer_with_an_open_transaction_may_not_write_outside_it():
    writer = Writer()
    writer.data(7)
    with pytest.raises(TransactionOpen):
        writer.data(7, transactional=False)
    writer.marker(7, commit=True)
    writer.data(7, transactional=False)  # closed: fine again


def test_a_marker_moves_the_producer_to_its_epoch():
    writer = Writer()
    writer.data(7, epoch=0)
    writer.marker(7, commit=False, epoch=1)  # the coordinator bumped the epoch when it aborted
    entry = writer.state.get(7)
    assert entry is not None and entry.epoch == 1 and not entry.batches
    writer.sequences[7] = 0
    writer.data(7, epoch=1)  # the producer goes on at the new epoch from sequence 0


def test_a_marker_older_than_the_producers_epoch_is_refused():
    writer = Writer()
    writer.data(7, epoch=2)
    with pytest.raises(StaleProducerEpoch):
        writer.marker(7, commit=False, epoch=1)
    assert writer.state.first_open_offset() == 0  # the transaction is still open
    assert writer.marker(7, commit=False, epoch=2) is not None


def test_a_marker_from_an_older_coordinator_is_fenced():
    writer = Writer()
    writer.data(7)
    writer.marker(7, commit=False, coordinator_epoch=5)
    writer.data(7)
    with pytest.raises(CoordinatorFenced):
        writer.marker(7, commit=True, coordinator_epoch=3)
    assert writer.state.first_open_offset() is not None
    completed = writer.marker(7, commit=True, coordinator_epoch=5)  # the same coordinator: taken
    assert completed is not None and not completed.aborted


def test_markers_of_unknown_producers_pass():
    writer = Writer()
    assert writer.marker(9, commit=True, epoch=0, coordinator_epoch=0) is None  # nothing open: ends nothing


def test_end_marker_reads_the_control_record_and_ignores_other_batches():
    commit = build_control_batch(7, 0, ControlType.COMMIT, 3, NOW_MS)
    assert end_marker(commit, parse_header(commit)) == Marker(ControlType.COMMIT, 3)
    batch, header = make_batch(producer_id=7, base_sequence=0, attributes=TRANSACTIONAL_BIT)
    assert end_marker(batch, header) is None
    not_a_marker, header = make_batch(attributes=0x30)  # control bit, but no control record in it
    assert end_marker(not_a_marker, header) is None


def test_a_snapshot_keeps_the_open_transactions_in_order():
    writer = Writer()
    for pid in (4, 2, 6):
        writer.data(pid)
    writer.marker(2, commit=True)
    writer.data(2)
    offset, loaded = ProducerState.from_bytes(writer.state.to_bytes(writer.offset))
    assert offset == writer.offset
    assert list(loaded.open.items()) == list(writer.state.open.items())
    assert loaded.producers == writer.state.producers


def test_a_producer_shows_its_last_timestamp_and_the_coordinator_epoch_of_its_last_marker():
    writer = Writer()
    writer.data(7)
    entry = writer.state.get(7)
    assert entry is not None and entry.last_timestamp == 1_000 and entry.coordinator_epoch == -1
    writer.marker(7, commit=False, epoch=1, coordinator_epoch=3, timestamp_ms=NOW_MS + 5)
    entry = writer.state.get(7)
    assert entry is not None and (entry.last_timestamp, entry.coordinator_epoch) == (NOW_MS + 5, 3)
    writer.sequences[7] = 0
    writer.data(7, epoch=2)  # a new epoch starts the batches over, not the coordinator epoch
    entry = writer.state.get(7)
    assert entry is not None and (entry.epoch, entry.last_timestamp, entry.coordinator_epoch) == (2, 1_000, 3)
    _, loaded = ProducerState.from_bytes(writer.state.to_bytes(writer.offset))
    assert loaded.get(7) == entry


def test_a_snapshot_written_before_transactions_loads_with_none_open():
    body = json.dumps({"offset": 10, "producers": [[7, 0, [[0, 1, 0, 1]]]]}).encode()
    offset, loaded = ProducerState.from_bytes(struct.pack(">I", crc32c.crc32c(body)) + body)
    assert offset == 10 and loaded.open == {} and loaded.get(7).next_sequence() == 2
    assert (loaded.get(7).last_timestamp, loaded.get(7).coordinator_epoch) == (-1, -1)


def test_a_snapshot_loads_open_transactions_sorted_by_first_offset():
    body = json.dumps({"offset": 10, "producers": [], "transactions": [[1, 8], [2, 3]]}).encode()
    _, loaded = ProducerState.from_bytes(struct.pack(">I", crc32c.crc32c(body)) + body)
    assert list(loaded.open.items()) == [(2, 3), (1, 8)]
