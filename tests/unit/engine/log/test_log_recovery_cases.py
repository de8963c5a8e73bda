"""Recovery of a partition directory in states a crash or a bad disk can leave behind."""

import pytest
from log_batches import ManualClock, make_batch

from martlet.engine.log import LogConfig, PartitionLog
from martlet.engine.store import LocalStore, MemoryStore
from martlet.records.header import iter_batches

CONFIG = LogConfig(segment_bytes=800, index_interval_bytes=150)
DIR = "t-3"


def open_log(store):
    return PartitionLog.open(store, DIR, CONFIG, ManualClock())


def filled(store, batches=30, close=False):
    log = open_log(store)
    for i in range(batches):
        log.append(*make_batch(record_count=2, timestamp_ms=100 + i))
    if close:
        log.close()
    return log


def files(store, suffix):
    return [f"{DIR}/{name}" for name in store.list(DIR) if name.endswith(suffix)]


def all_offsets(log):
    return [h.base_offset for _, h in iter_batches(log.read(log.start_offset, 10**7))]


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    return MemoryStore() if request.param == "memory" else LocalStore(str(tmp_path))


def test_a_clean_close_leaves_a_marker_that_open_removes(store):
    filled(store, close=True)
    assert store.exists(f"{DIR}/clean-shutdown")
    log = open_log(store)
    assert not store.exists(f"{DIR}/clean-shutdown")
    assert log.end_offset == 60


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_missing_indexes_are_rebuilt(store, suffix):
    filled(store, close=True)
    for path in files(store, suffix):
        store.delete(path)
    log = open_log(store)
    assert all_offsets(log) == list(range(0, 60, 2))
    assert all(store.size(path) % 8 == 0 for path in files(store, ".index"))
    assert log.batch_at_time(115) is not None and log.max_timestamp == 129


def test_a_partial_index_entry_is_repaired(store):
    filled(store)
    index = files(store, ".index")[-1]
    store.open_append(index).write(b"\x01\x02\x03")
    log = open_log(store)
    assert store.size(index) % 8 == 0
    assert all_offsets(log) == list(range(0, 60, 2))


def test_an_index_pointing_past_the_log_is_rebuilt(store):
    filled(store, close=True)
    index = files(store, ".index")[0]
    store.open_append(index).write(b"\x00\x00\x00\x50\x00\x00\xff\xff")
    log = open_log(store)
    assert all_offsets(log) == list(range(0, 60, 2))


def test_garbled_index_entries_are_caught_by_the_tail_check(store):
    filled(store, close=True)
    index = files(store, ".index")[0]
    data = bytearray(store.read(index, 0, 10**6))
    data[-1] ^= 0x01  # last entry now points one byte into a batch
    store.delete(index)
    store.open_append(index).write(bytes(data))
    log = open_log(store)
    assert all_offsets(log) == list(range(0, 60, 2))


def test_a_torn_tail_is_cut_even_after_a_clean_close(store):
    filled(store, close=True)
    store.open_append(files(store, ".log")[-1]).write(b"\x00" * 20)
    log = open_log(store)
    assert all_offsets(log) == list(range(0, 60, 2))
    assert log.append(*make_batch()) == 60


def test_damage_in_an_old_segment_drops_everything_after_it(store):
    filled(store)
    first, second = files(store, ".log")[:2]
    size = store.size(first)
    store.truncate(first, size - 5)
    log = open_log(store)
    assert log.end_offset < 30
    assert files(store, ".log") == [first]
    assert all_offsets(log) == list(range(0, log.end_offset, 2))
    assert not store.exists(second)


def test_a_gap_between_segments_keeps_the_prefix(store):
    filled(store)
    logs = files(store, ".log")
    store.delete(logs[1])
    log = open_log(store)
    assert files(store, ".log") == [logs[0]]
    assert log.end_offset == all_offsets(log)[-1] + 2


def test_leftover_temp_files_and_orphan_indexes_are_removed(store):
    filled(store, close=True)
    store.open_append(f"{DIR}/start-offset.tmp").close()
    store.open_append(f"{DIR}/00000000000000099999.index").close()
    open_log(store)
    names = store.list(DIR)
    assert "start-offset.tmp" not in names and "00000000000000099999.index" not in names


def test_snapshots_past_the_end_are_dropped_after_a_cut(store):
    log = filled(store)
    last_log = files(store, ".log")[-1]
    base = int(last_log.rsplit("/", 1)[1][:20])
    assert store.exists(f"{DIR}/{base:020d}.producers")
    store.truncate(files(store, ".log")[-2], 10)  # cut the segment before the last
    reopened = open_log(store)
    assert not store.exists(f"{DIR}/{base:020d}.producers")
    assert reopened.end_offset < base
    del log


def test_an_empty_directory_with_a_start_checkpoint_starts_there(store):
    store.mkdir(DIR)
    store.open_append(f"{DIR}/start-offset").write(b"500\n")
    log = open_log(store)
    assert (log.start_offset, log.end_offset) == (500, 500)
    assert log.append(*make_batch()) == 500
