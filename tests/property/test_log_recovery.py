"""Crash recovery: whatever a crash leaves at the end of the active segment, open() keeps the
intact prefix with dense offsets, and appends continue after it."""

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.engine.log import LogConfig, PartitionLog
from martlet.engine.store import LocalStore, MemoryStore
from martlet.records.header import HEADER_BYTES, BatchHeader, iter_batches, pack_header, parse_header, set_crc

CONFIG = LogConfig(segment_bytes=2_000, index_interval_bytes=100)
DIR = "p"


def build_batch(records: int, payload_bytes: int, producer_id: int = -1, sequence: int = -1) -> bytearray:
    length = HEADER_BYTES - 12 + payload_bytes
    header = BatchHeader(0, length, 0, 2, 0, 0, records - 1, 5, 5, producer_id, 0, sequence, records)
    batch = bytearray(pack_header(header)) + bytes([records]) * payload_bytes
    set_crc(batch)
    return batch


def append(log, records=2, payload_bytes=40, **kwargs):
    batch = build_batch(records, payload_bytes, **kwargs)
    return log.append(batch, parse_header(batch))


def written_log(store, batches: int):
    """A log that was never closed, as a kill -9 leaves it; returns (active log path, sizes)."""
    log = PartitionLog.open(store, DIR, CONFIG, lambda: 0)
    sequence = 0
    for i in range(batches):
        records = 1 + i % 3
        append(log, records=records, payload_bytes=20 + 7 * i, producer_id=1, sequence=sequence)
        sequence += records
    logs = [name for name in store.list(DIR) if name.endswith(".log")]
    return f"{DIR}/{logs[-1]}"


def check_recovered(store, intact_end: int | None = None) -> PartitionLog:
    log = PartitionLog.open(store, DIR, CONFIG, lambda: 0)
    offsets = [(h.base_offset, h.next_offset) for _, h in iter_batches(log.read(0, 10**7))]
    assert all(a[1] == b[0] for a, b in zip(offsets, offsets[1:])), "offsets are dense"
    assert offsets[-1][1] == log.end_offset if offsets else log.end_offset == 0
    if intact_end is not None:
        assert log.end_offset == intact_end
    next_offset = log.end_offset
    assert append(log, producer_id=-1) == next_offset
    assert log.read(next_offset, 10**6)[:8] == next_offset.to_bytes(8, "big")
    return log


def boundaries(store, path):
    """([0, end of batch 1, ...], [segment base, next offset after batch 1, ...])."""
    data = store.read(path, 0, 10**7)
    batches = list(iter_batches(data))
    base = batches[0][1].base_offset
    return [0] + [pos + h.size for pos, h in batches], [base] + [h.next_offset for _, h in batches]


def test_cut_at_every_byte_of_the_last_batch():
    pristine = MemoryStore()
    path = written_log(pristine, 25)
    ends, next_offsets = boundaries(pristine, path)
    for cut in range(ends[-2], ends[-1]):
        store = copy.deepcopy(pristine)
        store.truncate(path, cut)
        check_recovered(store, intact_end=next_offsets[-2])


def test_cut_at_every_byte_of_the_last_batch_on_disk(tmp_path):
    for cut_back in (1, 2, 13, 30, 48, 49, 50, 59):  # every byte is covered in memory above
        store = LocalStore(str(tmp_path / str(cut_back)))
        path = written_log(store, 8)
        ends, next_offsets = boundaries(store, path)
        store.truncate(path, ends[-1] - cut_back)
        check_recovered(store, intact_end=next_offsets[-2])


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.data())
def test_a_cut_anywhere_in_the_active_segment_keeps_whole_batches(batches, data):
    store = MemoryStore()
    path = written_log(store, batches)
    ends, next_offsets = boundaries(store, path)
    cut = data.draw(st.integers(0, ends[-1]))
    store.truncate(path, cut)
    kept = [offset for end, offset in zip(ends, next_offsets) if end <= cut]
    log = check_recovered(store, intact_end=kept[-1])
    assert (log.producer_state.get(1) is not None) == (kept[-1] > 0)


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 30), st.data())
def test_garbage_in_the_last_batch_drops_it_or_keeps_it_whole(batches, data):
    store = MemoryStore()
    path = written_log(store, batches)
    ends, next_offsets = boundaries(store, path)
    start = ends[-2]
    position = data.draw(st.integers(start, ends[-1] - 1))
    last = bytearray(store.read(path, start, ends[-1] - start))
    last[position - start] ^= data.draw(st.integers(1, 255))
    store.truncate(path, start)
    store.open_append(path).write(last + b"\xab" * data.draw(st.integers(0, 80)))  # flipped, then junk
    log = check_recovered(store)
    # Only the leader epoch (bytes 12..15) lies outside both the CRC and the offset checks.
    leader_epoch = 12 <= position - start < 16
    kept_end = next_offsets[-1] if leader_epoch else next_offsets[-2]
    assert log.end_offset == kept_end + 2  # plus the batch appended by check_recovered
