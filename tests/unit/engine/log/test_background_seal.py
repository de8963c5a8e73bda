"""A roll on a store whose writes are slow (HDFS) leaves the sealed segment's indexes, the
close of its log and the producer snapshot to a thread of its own (PartitionLog._roll)."""

import threading

import pytest
from log_batches import ManualClock, make_batch

from martlet.engine.log import LogConfig, PartitionLog
from martlet.engine.log.files import INDEX_SUFFIX, PRODUCERS_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, offset_file
from martlet.engine.store import MemoryStore
from martlet.records.build import build_control_batch
from martlet.records.control import ControlType
from martlet.records.header import TRANSACTIONAL_BIT, iter_batches, parse_header

SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=100)
PATH = "topic-0"
WAIT_S = 10.0


class GatedStore(MemoryStore):
    """Slow writes, as on HDFS; renames onto a file ending in `gated` (an offset index unless
    told) wait for `gate` (or fail with `failure`), so a roll's sealing stays in progress
    until the test lets it go."""

    slow_writes = True

    def __init__(self, gated: str = INDEX_SUFFIX) -> None:
        super().__init__()
        self.gated = gated
        self.gate = threading.Event()
        self.sealing = threading.Event()  # set once a sealing waits at the gate
        self.failure: OSError | None = None

    def rename(self, src: str, dst: str) -> None:
        if dst.endswith(self.gated):
            self.sealing.set()
            assert self.gate.wait(WAIT_S), "the test never opened the gate"
            if self.failure is not None:
                raise self.failure
        super().rename(src, dst)


def rolled_once(store: GatedStore, aborted: bool = False) -> tuple[PartitionLog, int, list[int]]:
    """A log whose first roll is sealing in the background, with a few batches in the next
    segment (`aborted`: the first holds an aborted transaction); returns it, the second
    segment's base offset and every offset appended."""
    log = PartitionLog.open(store, PATH, SMALL, ManualClock())
    offsets = []
    if aborted:
        offsets.append(log.append(*make_batch(record_count=2, producer_id=7, base_sequence=0,
                                              attributes=TRANSACTIONAL_BIT)))
        marker = build_control_batch(7, 0, ControlType.ABORT, 0, 1_000)
        offsets.append(log.append(marker, parse_header(marker)))
    while log.segment_count == 1:
        offsets.append(log.append(*make_batch(record_count=2)))
    base = offsets[-1]
    offsets += [log.append(*make_batch(record_count=2)) for _ in range(2)]
    assert log.segment_count == 2
    assert store.sealing.wait(WAIT_S)
    return log, base, offsets


def offsets_in(data: bytes) -> list[int]:
    return [header.base_offset for _, header in iter_batches(data)]


def test_appends_and_reads_go_on_while_the_sealed_segment_is_finished():
    store = GatedStore()
    log, base, offsets = rolled_once(store)
    assert offsets_in(log.read(0, 100_000)) == offsets  # the sealed segment reads from its indexes in memory
    assert log.batch_at(base - 1) is not None
    assert not store.exists(offset_file(PATH, 0, INDEX_SUFFIX))
    store.gate.set()
    log.close()  # waits for the sealing first
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        assert store.exists(offset_file(PATH, 0, suffix))
    assert store.exists(offset_file(PATH, base, PRODUCERS_SUFFIX))
    reopened = PartitionLog.open(store, PATH, SMALL, ManualClock())
    assert reopened.end_offset == log.end_offset
    assert offsets_in(reopened.read(0, 100_000)) == offsets


def test_a_failed_sealing_fails_the_next_call_that_waits_for_it():
    store = GatedStore()
    log, _, offsets = rolled_once(store)
    store.failure = OSError("the store went away")
    store.gate.set()
    with pytest.raises(OSError, match="went away"):
        log.close()
    store.failure = None
    log.abandon()
    reopened = PartitionLog.open(store, PATH, SMALL, ManualClock())
    assert offsets_in(reopened.read(0, 100_000)) == offsets


def test_no_snapshot_is_written_above_a_transaction_index_that_failed():
    """Recovery trusts the .txnindex files of the segments below the snapshot it starts from."""
    store = GatedStore(gated=TXN_INDEX_SUFFIX)
    log, base, offsets = rolled_once(store, aborted=True)
    store.failure = OSError("the store went away")
    store.gate.set()
    with pytest.raises(OSError, match="went away"):
        log.close()
    assert not store.exists(offset_file(PATH, base, PRODUCERS_SUFFIX))
    store.failure = None
    log.abandon()
    reopened = PartitionLog.open(store, PATH, SMALL, ManualClock())
    assert offsets_in(reopened.read(0, 100_000)) == offsets


def test_deleting_the_segment_being_sealed_waits_for_its_files():
    store = GatedStore()
    log, base, _ = rolled_once(store)
    deleting = threading.Thread(target=log.delete_records, args=(base,))
    deleting.start()
    store.gate.set()
    deleting.join(WAIT_S)
    assert not deleting.is_alive()
    assert log.start_offset == base
    assert [name for name in store.list(PATH) if name.startswith(f"{0:020d}")] == []


def test_a_fast_store_seals_before_the_roll_returns():
    store = MemoryStore()
    log = PartitionLog.open(store, PATH, SMALL, ManualClock())
    while log.segment_count == 1:
        base = log.append(*make_batch(record_count=2))
    assert store.exists(offset_file(PATH, 0, INDEX_SUFFIX))
    assert store.exists(offset_file(PATH, base, PRODUCERS_SUFFIX))
