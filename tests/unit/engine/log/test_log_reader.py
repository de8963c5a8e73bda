"""The read-only reader on the local disk, where it reads segments through mappings
(LocalStore.read_view): reads are views, not copies; a mapping lives no longer than the views
of it (no deleted segment stays held); a tail cut past C does not reach what a read returned.
The reader's contract on every store: tests/contract/test_partition_reader_contract.py."""

from __future__ import annotations

import mmap
import os

from martlet.engine.log.config import LogConfig
from martlet.engine.log.files import LOG_SUFFIX, offset_file, write_published
from martlet.engine.log.log import PartitionLog
from martlet.engine.log.reader import open_readonly
from martlet.engine.store import LocalStore
from martlet.records.header import HEADER_BYTES, iter_batches
from tests.support.stores import mapped, open_descriptors
from tests.unit.engine.log.log_batches import make_batch

DIR = "p-0"


def write_log(store: LocalStore, count: int, segment_bytes: int, published: int | None = None) -> list[bytes]:
    """`count` batches of 2 records and about 3 KB each, written by the broker's log code;
    C published at `published` (default: the end). Returns the payloads."""
    log = PartitionLog.open(store, DIR, LogConfig(segment_bytes=segment_bytes), lambda: 1_000)
    sent = []
    for number in range(count):
        data, header = make_batch(record_count=2, payload=b"batch %06d " % number + b"x" * 3_000)
        log.append(data, header)
        sent.append(bytes(data[HEADER_BYTES:]))
    log.flush()
    end = log.end_offset if published is None else published
    write_published(store, DIR, end, end)
    log.abandon()  # files as a running broker leaves them
    return sent


def payloads(data: memoryview) -> list[bytes]:
    return [bytes(data[at + HEADER_BYTES:at + header.size]) for at, header in iter_batches(data)]


def next_offset(data: memoryview) -> int:
    *_, (_, header) = iter_batches(data)
    return header.next_offset


def test_reads_are_views_of_mappings_that_go_with_the_last_view(tmp_path):
    store = LocalStore(str(tmp_path))
    sent = write_log(store, 40, segment_bytes=40_000)  # 4 segments of 12 batches, one of 4
    reader = open_readonly(store, DIR)
    assert len(reader.segments()) == 4
    data = reader.read(0, 20_000)
    assert isinstance(data.obj, mmap.mmap)  # a view of the mapping, not a copy
    assert payloads(data) == sent[:6]
    found, views = payloads(data), [data]
    while view := reader.read(next_offset(views[-1]), 20_000):
        found += payloads(view)
        views.append(view)
    assert found == sent
    folder = str(tmp_path / DIR)
    assert mapped(folder)  # the views hold their mappings
    store.delete(DIR)  # as retention or a topic deletion would, under the reader
    assert payloads(views[0]) == sent[:6]  # what is held stays readable
    del data, view, views
    assert mapped(folder) == [] and open_descriptors(folder) == []  # nothing of the deleted files is held


def test_a_tail_cut_past_c_does_not_reach_the_views_read(tmp_path):
    """Recovery cuts the active segment's tail past C (a torn batch) while a reader holds a
    view of a read up to C: the view ends at C's batch, so no byte of it lies past the cut."""
    store = LocalStore(str(tmp_path))
    sent = write_log(store, 30, segment_bytes=1 << 20, published=20)  # C: batches 0-9 of 30
    reader = open_readonly(store, DIR)
    data = reader.read(0, 1 << 20)
    assert payloads(data) == sent[:10]
    cut = len(data)  # where batch 10 starts
    os.truncate(tmp_path / offset_file(DIR, 0, LOG_SUFFIX), cut + 30)  # a torn batch 10, 60 KB cut off
    assert payloads(data) == sent[:10]  # touching every byte of the view does not fault
    assert bytes(reader.read(20, 1 << 20)) == b""
    reader.refresh()
    assert payloads(reader.read(0, 1 << 20, end_offset=20)) == sent[:10]
