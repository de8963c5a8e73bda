"""Two writers of one log, as in a cluster while a partition moves: the next owner starts a
segment of its own, and whichever of the two creates a segment file second fails instead of
writing a file the other does not know about (PartitionLog.start_own_segment).

On HDFS the lease fences the old writer's appends to the segment the new owner recovered, so
the old writer can only reach the boundary the new owner starts at; these stores have no
leases, so the tests roll the old writer at that boundary directly."""

import pytest
from log_batches import ManualClock, make_batch

from martlet.engine.log import LogConfig, PartitionLog
from martlet.engine.store import LocalStore, MemoryStore
from martlet.records.header import iter_batches

CONFIG = LogConfig(segment_bytes=800, index_interval_bytes=150)
DIR = "t-0"


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    return MemoryStore() if request.param == "memory" else LocalStore(str(tmp_path))


def open_log(store):
    return PartitionLog.open(store, DIR, CONFIG, ManualClock())


def append(log, count):
    for i in range(count):
        log.append(*make_batch(record_count=2, timestamp_ms=100 + i))
    log.flush()


def offsets(log):
    return [h.base_offset for _, h in iter_batches(log.read(log.start_offset, 10**7))]


def test_the_old_owner_cannot_roll_into_the_segment_the_new_owner_started(store):
    old = open_log(store)
    append(old, 3)  # one segment, not full
    new = open_log(store)
    new.start_own_segment()
    assert new.segment_count == 2 and new.end_offset == 6
    with pytest.raises(FileExistsError):
        old._roll()  # its roll would create the new owner's file
    append(new, 2)
    assert offsets(open_log(store)) == [0, 2, 4, 6, 8]


def test_a_new_owner_that_lost_the_race_to_a_late_roll_fails_and_succeeds_on_reopening(store):
    old = open_log(store)
    append(old, 3)
    new = open_log(store)  # lists the log before the old owner rolls
    old._roll()  # the old owner seals and starts a segment at 6 after the new owner listed
    with pytest.raises(FileExistsError):
        new.start_own_segment()
    new.abandon()
    again = open_log(store)
    again.start_own_segment()
    assert again.end_offset == 6


def test_an_empty_active_segment_is_kept(store):
    log = open_log(store)
    log.start_own_segment()
    assert log.segment_count == 1


def test_an_owner_killed_before_writing_to_its_own_segment_leaves_a_log_the_next_owner_opens(store):
    """The taken-over segment has no producer snapshot at its end (start_own_segment writes
    none) and the new owner's segment stays empty: the next owner replays the producers from
    the start and skips the empty segment (it once failed an assertion there, forever)."""
    first = open_log(store)
    first.append(*make_batch(record_count=2, producer_id=7, producer_epoch=0, base_sequence=0))
    first.flush()
    second = open_log(store)
    second.start_own_segment()  # killed before anything reached its segment
    assert second.segment_count == 2
    third = open_log(store)
    assert third.end_offset == 2
    assert third.producer_state.get(7) is not None
