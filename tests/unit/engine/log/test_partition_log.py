import pytest
from log_batches import ManualClock, make_batch

from martlet.engine.errors import CorruptBatch, InvalidConfig, OffsetOutOfRange
from martlet.engine.log import LogConfig, PartitionLog
from martlet.engine.store import LocalStore, MemoryStore
from martlet.records.header import iter_batches, parse_header, set_base_offset, set_leader_epoch

SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=100)


def open_log(store=None, config=SMALL, clock=None):
    store = store if store is not None else MemoryStore()
    return PartitionLog.open(store, "topic-0", config, clock or ManualClock())


def offsets_in(data: bytes) -> list[int]:
    return [header.base_offset for _, header in iter_batches(data)]


def fill(log, batches: int, records: int = 2, **kwargs) -> list[int]:
    return [log.append(*make_batch(record_count=records, **kwargs)) for _ in range(batches)]


def test_a_new_log_is_empty():
    log = open_log()
    assert (log.start_offset, log.end_offset) == (0, 0)
    assert (log.max_timestamp, log.max_timestamp_offset) == (-1, -1)
    assert log.read(0, 1000) == b""
    assert log.size_bytes() == 0


def test_append_assigns_dense_offsets_and_writes_them_into_the_batch():
    log = open_log()
    batch, header = make_batch(record_count=3)
    assert log.append(batch, header) == 0
    assert parse_header(batch).base_offset == 0
    batch, header = make_batch(record_count=2)
    assert log.append(batch, header) == 3
    assert parse_header(batch).base_offset == 3
    assert log.end_offset == 5


def test_read_returns_the_batch_holding_the_offset():
    log = open_log()
    fill(log, 3, records=4)
    assert offsets_in(log.read(5, 10_000)) == [4, 8]
    assert offsets_in(log.read(0, 10_000)) == [0, 4, 8]
    assert log.read(12, 100) == b""


def test_read_respects_max_bytes_in_whole_batches():
    log = open_log()
    fill(log, 5)
    size = len(make_batch(record_count=2)[0])
    assert offsets_in(log.read(0, size * 2 + size // 2)) == [0, 2]
    assert len(log.read(0, size * 2)) == size * 2


def test_read_returns_one_whole_batch_even_if_larger_than_max_bytes():
    log = open_log()
    fill(log, 2)
    data = log.read(0, 1)
    assert offsets_in(data) == [0] and len(data) == parse_header(data).size


def test_read_out_of_range_raises():
    log = open_log()
    fill(log, 2)
    with pytest.raises(OffsetOutOfRange):
        log.read(5, 100)
    log.delete_records(2)
    with pytest.raises(OffsetOutOfRange):
        log.read(1, 100)


def test_segments_roll_by_size_and_reads_cross_them():
    log = open_log()
    fill(log, 40)
    assert log.segment_count > 3
    assert offsets_in(log.read(0, 1_000_000)) == list(range(0, 80, 2))
    assert log.size_bytes() == 40 * len(make_batch(record_count=2)[0])


def test_read_does_not_skip_a_batch_that_did_not_fit():
    """A short read must stop at the first batch that does not fit, even at a segment end."""
    log = open_log(config=LogConfig(segment_bytes=300, index_interval_bytes=50))
    log.append(*make_batch(payload=b"a" * 10))
    log.append(*make_batch(payload=b"b" * 150))  # fills the first segment
    log.append(*make_batch(payload=b""))  # starts the second
    assert log.segment_count == 2
    assert offsets_in(log.read(0, 150)) == [0]


def test_a_batch_larger_than_a_segment_gets_its_own_segment():
    log = open_log(config=LogConfig(segment_bytes=200))
    log.append(*make_batch())
    log.append(*make_batch(payload=b"x" * 500))
    log.append(*make_batch())
    assert log.segment_count == 3
    assert offsets_in(log.read(1, 10)) == [1]


def test_segments_roll_by_age():
    clock = ManualClock()
    log = open_log(config=LogConfig(segment_ms=1000), clock=clock)
    fill(log, 2)
    clock.advance(1001)
    fill(log, 1)
    assert log.segment_count == 2
    clock.advance(5000)  # an idle active segment rolls only when something is appended
    assert log.segment_count == 2


def test_append_trusts_the_crc_and_recovery_checks_it(tmp_path):
    """The one CRC pass of a produced batch is martlet.records.validate's; the log checks
    the CRC again only where bytes come back from the store (assert on both sides)."""
    store = LocalStore(str(tmp_path))
    log = open_log(store)
    fill(log, 1)
    batch, header = make_batch()
    batch[-1] ^= 0xFF
    assert log.append(batch, header) == 2
    log.flush()
    reopened = open_log(store)  # never closed, as after a crash: the last segment is scanned
    assert reopened.end_offset == 2


def test_append_refuses_a_batch_that_does_not_match_its_header():
    log = open_log()
    batch, header = make_batch()
    with pytest.raises(CorruptBatch):
        log.append(batch + b"x", header)
    with pytest.raises(CorruptBatch):
        log.append(batch, header._replace(record_count=9))
    assert log.end_offset == 0


def test_max_timestamp_tracks_the_first_batch_holding_it():
    log = open_log()
    for ts in (50, 70, 60, 70):
        log.append(*make_batch(timestamp_ms=ts))
    assert (log.max_timestamp, log.max_timestamp_offset) == (70, 1)


def test_batch_at_finds_the_batch_holding_an_offset():
    log = open_log()
    fill(log, 30, records=3)
    assert parse_header(log.batch_at(40)).base_offset == 39
    assert log.batch_at(90) is None
    log.delete_records(30)
    assert log.batch_at(29) is None


def test_batch_at_time_uses_the_time_index_across_segments():
    log = open_log()
    for i in range(60):
        log.append(*make_batch(timestamp_ms=1000 + 10 * i))
    assert parse_header(log.batch_at_time(1255)).base_offset == 26
    assert parse_header(log.batch_at_time(0)).base_offset == 0
    assert parse_header(log.batch_at_time(1590)).base_offset == 59
    assert log.batch_at_time(1591) is None


def test_batch_at_time_skips_deleted_records():
    log = open_log()
    for i in range(10):
        log.append(*make_batch(timestamp_ms=1000 + i))
    log.delete_records(4)
    assert parse_header(log.batch_at_time(0)).base_offset == 4


def test_batch_at_time_with_out_of_order_timestamps():
    log = open_log()
    for ts in (100, 300, 200, 400, 250):
        log.append(*make_batch(timestamp_ms=ts))
    assert parse_header(log.batch_at_time(250)).base_offset == 1
    assert parse_header(log.batch_at_time(350)).base_offset == 3


def test_delete_records_moves_start_and_deletes_whole_segments():
    store = MemoryStore()
    log = open_log(store)
    fill(log, 40)
    segments = log.segment_count
    assert log.delete_records(31) == 31
    assert log.segment_count < segments
    assert offsets_in(log.read(31, 100))[0] == 30  # the batch holding 31
    assert log.delete_records(10) == 31  # never moves back
    with pytest.raises(OffsetOutOfRange):
        log.delete_records(81)
    assert log.delete_records(80) == 80
    assert log.read(80, 100) == b""


def test_delete_records_survives_a_restart():
    store = MemoryStore()
    log = open_log(store)
    fill(log, 10)
    log.delete_records(7)
    log.close()
    reopened = open_log(store)
    assert (reopened.start_offset, reopened.end_offset) == (7, 20)


def test_retention_by_time_deletes_old_segments_but_never_the_active_one():
    clock = ManualClock(now_ms=10_000)
    log = open_log(config=LogConfig(segment_bytes=1000, retention_ms=5_000), clock=clock)
    fill(log, 30, timestamp_ms=1_000)
    fill(log, 30, timestamp_ms=9_000)
    clock.now = 6_000  # the old batches are exactly retention_ms old: kept
    assert log.apply_retention() == 0
    clock.now = 6_001
    assert log.apply_retention() == 2  # 12 batches of 81 bytes per segment, all stamped 1_000
    assert log.start_offset == 48
    assert log.max_timestamp == 9_000
    clock.now = 100_000
    log.apply_retention()
    assert log.segment_count == 1 and log.end_offset == 120


def test_retention_by_size_keeps_the_newest_bytes():
    log = open_log(config=LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=-1))
    fill(log, 50)
    log.apply_retention()
    assert 1500 < log.size_bytes() <= 2500 + 1000
    assert log.start_offset > 0
    assert offsets_in(log.read(log.start_offset, 10**6))[-1] == 98


def test_retention_keeps_everything_with_minus_one():
    clock = ManualClock()
    log = open_log(config=LogConfig(segment_bytes=500, retention_ms=-1), clock=clock)
    fill(log, 20, timestamp_ms=0)
    clock.advance(10**12)
    assert log.apply_retention() == 0 and log.start_offset == 0


def test_reopen_after_close_restores_offsets_and_timestamps(tmp_path):
    store = LocalStore(str(tmp_path))
    log = open_log(store)
    for i in range(25):
        log.append(*make_batch(record_count=2, timestamp_ms=500 + i))
    expected = log.read(0, 10**6)
    log.close()
    reopened = open_log(store)
    assert (reopened.end_offset, reopened.max_timestamp, reopened.max_timestamp_offset) == (50, 524, 48)
    assert reopened.read(0, 10**6) == expected
    assert reopened.append(*make_batch()) == 50


def stored_batches(first_offset: int, count: int, records: int = 2):
    """Batches with offsets already assigned, as a partition's memory tail hands them over."""
    batches, headers = [], []
    offset = first_offset
    for _ in range(count):
        batch, header = make_batch(record_count=records)
        set_base_offset(batch, offset)
        batches.append(batch)
        headers.append(parse_header(batch))
        offset += records
    return batches, headers


def test_append_stored_writes_a_group_across_segments_and_survives_reopening(tmp_path):
    store = LocalStore(str(tmp_path))
    log = open_log(store)
    batches, headers = stored_batches(0, 30)  # 30 x 81 bytes: three segments of 1000 bytes
    log.append_stored(batches, headers)
    assert log.end_offset == 60 and log.segment_count == 3
    assert offsets_in(log.read(0, 10**6)) == list(range(0, 60, 2))
    # never closed, as after a crash: the reopened log recovers from the files alone
    reopened = open_log(store)
    assert reopened.end_offset == 60
    assert reopened.read(0, 10**6) == b"".join(batches)


def test_append_stored_refuses_a_gap_and_keeps_the_log_unchanged():
    log = open_log()
    fill(log, 2)
    batches, headers = stored_batches(6, 2)
    with pytest.raises(CorruptBatch, match="does not follow offset 4"):
        log.append_stored(batches, headers)
    assert log.end_offset == 4


def test_a_leader_epoch_patched_after_parsing_is_accepted_and_kept():
    log = open_log()
    batch, header = make_batch()
    set_leader_epoch(batch, 5)
    log.append(batch, header)
    assert parse_header(log.read(0, 100)).leader_epoch == 5


def test_index_interval_zero_indexes_every_batch():
    log = open_log(config=LogConfig(index_interval_bytes=0))
    fill(log, 5)
    assert offsets_in(log.read(6, 10**6)) == [6, 8]


@pytest.mark.parametrize(
    "bad",
    [
        dict(segment_bytes=0),
        dict(segment_bytes=2**31),
        dict(segment_ms=0),
        dict(retention_ms=-2),
        dict(index_interval_bytes=-1),
    ],
)
def test_config_refuses_impossible_values(bad):
    with pytest.raises(InvalidConfig):
        LogConfig(**bad)


def _roll_after_ms(path: str, jitter_ms: int) -> int:
    clock = ManualClock()
    config = LogConfig(segment_bytes=10_000, segment_ms=1000, segment_jitter_ms=jitter_ms, index_interval_bytes=100)
    log = PartitionLog.open(MemoryStore(), path, config, clock)
    log.append(*make_batch())
    for waited in range(0, 1100, 10):
        clock.now = 1_000_000 + waited
        log.append(*make_batch())
        if log.segment_count == 2:
            return waited
    raise AssertionError("never rolled")


def test_segment_jitter_rolls_each_partition_a_little_sooner():
    assert _roll_after_ms("t-0", 0) == 1010
    rolls = [_roll_after_ms(f"t-{i}", 900) for i in range(10)]
    assert all(100 < waited <= 1010 for waited in rolls)
    assert len(set(rolls)) > 3  # spread out, not all at once
    assert rolls == [_roll_after_ms(f"t-{i}", 900) for i in range(10)]  # and the same on every open


def test_discard_closes_the_active_file_and_writes_nothing_more(tmp_path):
    """A log whose topic is being deleted: close() would seal the segment (two index files),
    snapshot producer state and mark a clean shutdown, all to be deleted with the topic;
    discard() only closes the open file, so the folder holds just what close() would add to."""
    kept, discarded = LocalStore(str(tmp_path / "kept")), LocalStore(str(tmp_path / "discarded"))
    closing, discarding = open_log(kept), open_log(discarded)
    for log in (closing, discarding):
        fill(log, 3)
    before = sorted(discarded.list("topic-0"))
    closing.close()
    discarding.discard()
    assert sorted(discarded.list("topic-0")) == before
    assert set(kept.list("topic-0")) > set(before)  # what close() writes and discard() does not
    with pytest.raises(AssertionError, match="closed log"):
        discarding.append(*make_batch())
