import pytest
from log_batches import ManualClock, make_batch

from martlet.engine.errors import DuplicateBatch, OutOfOrderSequence, StaleProducerEpoch
from martlet.engine.log import LogConfig, PartitionLog
from martlet.engine.log.producers import SEQUENCE_MAX, ProducerState
from martlet.engine.store import MemoryStore

PID = 7


def open_log(store, config=LogConfig(segment_bytes=600)):  # noqa: B008 (only read, never changed)
    return PartitionLog.open(store, "p-0", config, ManualClock())


def produce(log, seq, records=2, epoch=0, pid=PID, **kwargs):
    batch = make_batch(record_count=records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kwargs)
    return log.append(*batch)


def test_sequences_continue_batch_after_batch():
    log = open_log(MemoryStore())
    assert [produce(log, seq) for seq in (0, 2, 4)] == [0, 2, 4]
    entry = log.producer_state.get(PID)
    assert entry.epoch == 0 and entry.next_sequence() == 6


def test_a_retried_batch_is_a_duplicate_of_the_original():
    log = open_log(MemoryStore())
    produce(log, 0)
    produce(log, 2)
    with pytest.raises(DuplicateBatch) as raised:
        produce(log, 0)
    assert raised.value.base_offset == 0
    assert log.end_offset == 4  # nothing written


def test_only_the_last_five_batches_are_remembered():
    log = open_log(MemoryStore())
    for seq in range(0, 12, 2):
        produce(log, seq)
    with pytest.raises(DuplicateBatch):
        produce(log, 2)  # the oldest kept of six
    with pytest.raises(OutOfOrderSequence):
        produce(log, 0)  # forgotten: now just out of order


def test_a_gap_in_sequences_is_refused():
    log = open_log(MemoryStore())
    produce(log, 0)
    with pytest.raises(OutOfOrderSequence):
        produce(log, 5)


def test_an_unknown_producer_may_start_anywhere():
    log = open_log(MemoryStore())
    assert produce(log, 1234) == 0


def test_an_older_epoch_is_fenced():
    log = open_log(MemoryStore())
    produce(log, 0, epoch=3)
    with pytest.raises(StaleProducerEpoch):
        produce(log, 2, epoch=2)


def test_a_new_epoch_starts_at_sequence_zero():
    log = open_log(MemoryStore())
    produce(log, 0, epoch=1)
    with pytest.raises(OutOfOrderSequence):
        produce(log, 2, epoch=2)
    produce(log, 0, epoch=2)
    assert log.producer_state.get(PID).epoch == 2


def test_sequences_wrap_after_the_largest_int32():
    log = open_log(MemoryStore())
    produce(log, SEQUENCE_MAX - 1, records=2)
    entry = log.producer_state.get(PID)
    assert entry.batches[-1].last_sequence == SEQUENCE_MAX
    produce(log, 0, records=3)
    with pytest.raises(OutOfOrderSequence):
        produce(log, 1)
    produce(log, 3)


def test_a_batch_spanning_the_wrap():
    state = ProducerState()
    _, header = make_batch(record_count=4, producer_id=1, base_sequence=SEQUENCE_MAX - 1)
    state.update(header)
    assert state.get(1).batches[-1].last_sequence == 1  # MAX-1, MAX, 0, 1


def test_control_batches_and_plain_producers_are_not_tracked():
    log = open_log(MemoryStore())
    log.append(*make_batch(producer_id=-1))
    log.append(*make_batch(producer_id=PID, producer_epoch=0, base_sequence=-1, attributes=0x30))
    assert len(log.producer_state) == 0


def test_producers_are_independent():
    log = open_log(MemoryStore())
    produce(log, 0, pid=1)
    produce(log, 0, pid=2)
    produce(log, 2, pid=1)
    assert log.producer_state.get(2).next_sequence() == 2


@pytest.mark.parametrize("clean", [True, False])
def test_state_is_rebuilt_on_restart(clean):
    store = MemoryStore()
    log = open_log(store)
    for seq in range(0, 40, 2):  # several segments, so snapshots are involved
        produce(log, seq)
    produce(log, 0, pid=99, epoch=4)
    assert log.segment_count > 2
    if clean:
        log.close()
    reopened = open_log(store)
    with pytest.raises(DuplicateBatch) as raised:
        produce(reopened, 36)
    assert raised.value.base_offset == 36
    with pytest.raises(StaleProducerEpoch):
        produce(reopened, 2, pid=99, epoch=3)
    assert produce(reopened, 40) == 42


def test_rebuild_without_snapshots_reads_the_headers():
    store = MemoryStore()
    log = open_log(store)
    for seq in range(0, 30, 2):
        produce(log, seq)
    for name in store.list("p-0"):
        if name.endswith(".producers"):
            store.delete(f"p-0/{name}")
    reopened = open_log(store)
    assert reopened.producer_state.get(PID).next_sequence() == 30


def test_a_damaged_snapshot_is_ignored():
    store = MemoryStore()
    log = open_log(store)
    for seq in range(0, 30, 2):
        produce(log, seq)
    log.close()
    newest = [n for n in store.list("p-0") if n.endswith(".producers")][-1]
    store.truncate(f"p-0/{newest}", 10)
    reopened = open_log(store)
    assert reopened.producer_state.get(PID).next_sequence() == 30
    assert newest not in store.list("p-0")


def test_snapshot_round_trip():
    state = ProducerState()
    for seq in range(0, 14, 2):
        state.update(make_batch(record_count=2, producer_id=5, producer_epoch=1, base_sequence=seq)[1])
    offset, loaded = ProducerState.from_bytes(state.to_bytes(42))
    assert offset == 42 and loaded.producers == state.producers
    with pytest.raises(ValueError):
        ProducerState.from_bytes(b"\x00" + state.to_bytes(42)[1:])
