"""The committed-offsets store: every method, restarts, torn tails and crashes mid-compaction."""

import json

import pytest

from martlet.engine.errors import CorruptBatch
from martlet.engine.groups.offsets import COMPACT_SUFFIX, OLD_SUFFIX, CommittedOffset, OffsetStore
from martlet.engine.groups.records import Commit, DeleteGroup, Remove, decode, encode, to_batch
from martlet.engine.log import LogConfig, PartitionLog
from martlet.engine.store import LocalStore, MemoryStore
from martlet.records.header import HEADER_BYTES, BatchHeader, pack_header, parse_header, set_crc

PATH = "internal/group-offsets"
SEGMENT_BYTES = 2_000


class Clock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    return MemoryStore() if request.param == "memory" else LocalStore(str(tmp_path))


def open_offsets(store, segment_bytes=SEGMENT_BYTES):
    return OffsetStore.open(store, PATH, Clock(), segment_bytes=segment_bytes)


def value(offset, commit_ms=1_000, topic_id="id-1", metadata=None, leader_epoch=-1):
    return CommittedOffset(offset, leader_epoch, metadata, commit_ms, topic_id)


def commit(offsets, group, topic, partition, offset, topic_id="id-1", commit_ms=1_000, metadata=None):
    offsets.commit(group, [(topic, topic_id, partition, value(offset, commit_ms, topic_id, metadata))])


def snapshot(offsets):
    return {group: offsets.group_offsets(group) for group in offsets.groups()}


def reopened(store, offsets, segment_bytes=SEGMENT_BYTES):
    """Close cleanly and open again."""
    offsets.close()
    return open_offsets(store, segment_bytes)


def crash_reopened(store, offsets):
    """Reopen as after kill -9: the log's files stay as written, the clean marker is absent.
    (Closing first releases LocalStore descriptors; removing the marker forces the full scan.)"""
    offsets.close()
    store.delete(f"{PATH}/clean-shutdown")
    return open_offsets(store)


def active_log_file(store, path=PATH):
    return f"{path}/{[name for name in store.list(path) if name.endswith('.log')][-1]}"


def log_end_offset(offsets):
    return offsets._open_log().end_offset


# -- commit, fetch, listing ---------------------------------------------------------------


def test_fetch_returns_what_was_committed(store):
    offsets = open_offsets(store)
    committed = CommittedOffset(42, 7, "meta", 1_234, "id-1")
    offsets.commit("g", [("t", "id-1", 0, committed), ("t", "id-1", 1, value(5))])
    assert offsets.fetch("g", "t", 0, "id-1") == committed
    assert offsets.fetch("g", "t", 1, "id-1") == value(5)
    assert offsets.fetch("g", "t", 2, "id-1") is None
    assert offsets.fetch("other", "t", 0, "id-1") is None
    assert offsets.groups() == ["g"]
    assert offsets.group_offsets("g") == {("t", 0): committed, ("t", 1): value(5)}
    assert offsets.group_offsets("other") == {}


def test_a_later_commit_replaces_the_earlier_one(store):
    offsets = open_offsets(store)
    commit(offsets, "g", "t", 0, 1)
    commit(offsets, "g", "t", 0, 9, commit_ms=2_000)
    assert offsets.fetch("g", "t", 0, "id-1") == value(9, 2_000)


def test_one_request_is_one_batch_and_an_empty_request_writes_nothing(store):
    offsets = open_offsets(store)
    offsets.commit("g", [("t", "id-1", p, value(p)) for p in range(10)])
    assert log_end_offset(offsets) == 1
    offsets.commit("g", [])
    assert log_end_offset(offsets) == 1


def test_the_request_topic_id_is_the_one_stored(store):
    offsets = open_offsets(store)
    offsets.commit("g", [("t", "id-2", 0, value(3, topic_id="placeholder"))])
    assert offsets.fetch("g", "t", 0, "id-2") == value(3, topic_id="id-2")


def test_a_recreated_topic_does_not_inherit_old_offsets(store):
    offsets = open_offsets(store)
    commit(offsets, "g", "t", 0, 100, topic_id="old")
    assert offsets.fetch("g", "t", 0, "new") is None
    commit(offsets, "g", "t", 0, 3, topic_id="new")
    offsets = reopened(store, offsets)
    assert offsets.fetch("g", "t", 0, "old") is None
    assert offsets.fetch("g", "t", 0, "new") == value(3, topic_id="new")


def test_groups_lists_only_groups_with_offsets_sorted(store):
    offsets = open_offsets(store)
    for group in ("b", "a", "c"):
        commit(offsets, group, "t", 0, 1)
    offsets.delete_group("c")
    assert offsets.groups() == ["a", "b"]


def test_invalid_values_are_refused_before_anything_is_written(store):
    offsets = open_offsets(store)
    for bad in ([("t", "id", -1, value(1))], [("t", "id", 0, value(True))], [("t", "id", 0, value(1, leader_epoch=2**31))]):
        with pytest.raises(ValueError):
            offsets.commit("g", bad)
    with pytest.raises(ValueError):
        offsets.commit("g", [("t", "id", 0, value(1, metadata="\ud800"))])  # not encodable
    assert log_end_offset(offsets) == 0 and offsets.groups() == []


# -- deleting and expiring ----------------------------------------------------------------


def test_delete_group_removes_all_its_offsets_and_survives_reopen(store):
    offsets = open_offsets(store)
    offsets.commit("g", [("t", "id-1", p, value(p)) for p in range(3)])
    commit(offsets, "h", "t", 0, 7)
    offsets.delete_group("g")
    assert offsets.groups() == ["h"] and offsets.group_offsets("g") == {}
    offsets = reopened(store, offsets)
    assert snapshot(offsets) == {"h": {("t", 0): value(7)}}


def test_deleting_what_is_not_there_writes_nothing(store):
    offsets = open_offsets(store)
    commit(offsets, "g", "t", 0, 1)
    offsets.delete_group("missing")
    offsets.delete_offsets("g", "t", [5, 6])
    offsets.delete_offsets("missing", "t", [0])
    assert log_end_offset(offsets) == 1


def test_delete_offsets_removes_only_those_partitions(store):
    offsets = open_offsets(store)
    offsets.commit("g", [("t", "id-1", p, value(p)) for p in range(3)] + [("u", "id-u", 0, value(9, topic_id="id-u"))])
    offsets.delete_offsets("g", "t", [0, 2, 2, 8])
    assert offsets.group_offsets("g") == {("t", 1): value(1), ("u", 0): value(9, topic_id="id-u")}
    offsets = reopened(store, offsets)
    assert offsets.group_offsets("g") == {("t", 1): value(1), ("u", 0): value(9, topic_id="id-u")}


def test_the_group_disappears_with_its_last_offset(store):
    offsets = open_offsets(store)
    commit(offsets, "g", "t", 0, 1)
    offsets.delete_offsets("g", "t", [0])
    assert offsets.groups() == []
    assert reopened(store, offsets).groups() == []


def test_expire_touches_only_empty_groups_and_only_old_offsets(store):
    offsets = open_offsets(store)
    for group in ("empty", "active"):
        commit(offsets, group, "t", 0, 1, commit_ms=1_000)
        commit(offsets, group, "t", 1, 2, commit_ms=5_000)
    removed = offsets.expire(now_ms=11_000, retention_ms=10_000, is_empty=lambda group: group == "empty")
    assert removed == 1  # commit_ms + retention_ms <= now_ms: 1_000 + 10_000 <= 11_000 expires
    assert offsets.group_offsets("empty") == {("t", 1): value(2, 5_000)}
    assert len(offsets.group_offsets("active")) == 2
    offsets = reopened(store, offsets)
    assert offsets.group_offsets("empty") == {("t", 1): value(2, 5_000)}
    assert offsets.expire(now_ms=15_000, retention_ms=10_000, is_empty=lambda group: True) == 3
    assert crash_reopened(store, offsets).groups() == []


def test_expire_with_nothing_due_writes_nothing(store):
    offsets = open_offsets(store)
    commit(offsets, "g", "t", 0, 1, commit_ms=1_000)
    assert offsets.expire(now_ms=10_999, retention_ms=10_000, is_empty=lambda group: True) == 0
    assert log_end_offset(offsets) == 1


# -- restarts -----------------------------------------------------------------------------


def filled(store):
    offsets = open_offsets(store)
    for i in range(20):
        commit(offsets, f"g{i % 3}", f"t{i % 4}", i % 5, i, commit_ms=i, metadata=f"m{i}" if i % 2 else None)
    offsets.delete_offsets("g0", "t0", [0])
    offsets.delete_group("g2")
    return offsets


def test_reopen_after_close_rebuilds_the_same_state(store):
    offsets = filled(store)
    before = snapshot(offsets)
    assert before and "g2" not in before
    assert snapshot(reopened(store, offsets)) == before


def test_reopen_after_a_crash_rebuilds_the_same_state(store):
    offsets = filled(store)
    before = snapshot(offsets)
    assert snapshot(crash_reopened(store, offsets)) == before


def test_a_process_killed_without_closing_loses_nothing():
    store = MemoryStore()
    offsets = filled(store)
    before = snapshot(offsets)
    del offsets  # no close: no flush, no clean-shutdown marker
    assert snapshot(open_offsets(store)) == before


@pytest.mark.parametrize("cut_bytes", [1, 5, HEADER_BYTES + 3])
def test_a_torn_tail_loses_at_most_the_last_commit(store, cut_bytes):
    offsets = filled(store)
    before = snapshot(offsets)
    commit(offsets, "g0", "t9", 0, 999)
    offsets.close()
    store.delete(f"{PATH}/clean-shutdown")
    path = active_log_file(store)
    store.truncate(path, store.size(path) - cut_bytes)
    offsets = open_offsets(store)
    assert snapshot(offsets) == before
    commit(offsets, "g0", "t9", 0, 1_000)  # appends continue after the cut
    assert snapshot(reopened(store, offsets))["g0"][("t9", 0)] == value(1_000)


def test_a_corrupt_payload_stops_the_open(store):
    log = PartitionLog.open(store, PATH, LogConfig(), Clock())
    payload = b'{"v":1,"type":"commit","group":"g","offsets":[["t","id",-4,1,-1,null,0]]}'
    header = BatchHeader(0, HEADER_BYTES - 12 + len(payload), -1, 2, 0, 0, 0, 0, 0, -1, -1, -1, 1)
    batch = bytearray(pack_header(header)) + payload
    set_crc(batch)
    log.append(batch, parse_header(batch))
    log.close()
    with pytest.raises(CorruptBatch, match="bad partition"):
        open_offsets(store)


def test_close_is_idempotent_and_final(store):
    offsets = open_offsets(store)
    offsets.close()
    offsets.close()
    with pytest.raises(AssertionError):
        commit(offsets, "g", "t", 0, 1)


# -- compaction ---------------------------------------------------------------------------


def test_compact_keeps_the_live_state_and_survives_reopen(store):
    offsets = filled(store)
    for i in range(50):
        commit(offsets, "g0", "t0", 1, i)
    before, size_before = snapshot(offsets), offsets._open_log().size_bytes()
    offsets.compact()
    assert snapshot(offsets) == before
    assert offsets._open_log().size_bytes() < size_before / 4
    assert store.list("internal") == ["group-offsets"]  # no .compact or .old left behind
    commit(offsets, "g0", "t0", 1, 77)
    before = snapshot(offsets)
    assert snapshot(reopened(store, offsets)) == before


def test_compact_of_an_empty_store(store):
    offsets = open_offsets(store)
    offsets.compact()
    assert reopened(store, offsets).groups() == []


def test_the_log_stays_bounded_under_repeated_commits(store):
    offsets = open_offsets(store, segment_bytes=1_000)
    for i in range(400):
        commit(offsets, "g", "t", i % 2, i)
    # Without compaction this would be ~400 batches of ~130 bytes.
    assert offsets._open_log().size_bytes() <= 2 * 1_000
    assert offsets.group_offsets("g") == {("t", 0): value(398), ("t", 1): value(399)}
    assert reopened(store, offsets, segment_bytes=1_000).group_offsets("g") == offsets.group_offsets("g")


class Crash(Exception):
    """Stands for the process dying at a given store operation."""


class FaultyStore:
    """Delegates to a store and crashes at the first changing operation `crash_when` picks."""

    CHANGING = frozenset({"mkdir", "open_append", "truncate", "rename", "delete"})

    def __init__(self, inner):
        self.inner = inner
        self.crash_when = lambda name, args: False
        self.changes = 0

    def __getattr__(self, name):
        method = getattr(self.inner, name)
        if name not in self.CHANGING:
            return method

        def changing(*args):
            if self.crash_when(name, args):
                raise Crash(f"{name}{args}")
            self.changes += 1
            return method(*args)

        return changing


def test_a_crash_at_any_point_of_compaction_loses_nothing(store):
    offsets = filled(store)
    before = snapshot(offsets)
    offsets.close()
    crash_at = 0
    while True:
        faulty = FaultyStore(store)
        offsets = OffsetStore.open(faulty, PATH, Clock(), segment_bytes=SEGMENT_BYTES)
        faulty.crash_when = lambda name, args, f=faulty, at=faulty.changes + crash_at: f.changes == at
        try:
            offsets.compact()
        except Crash:
            crashed = True
        else:
            crashed = False
            faulty.crash_when = lambda name, args: False
            offsets.close()
        after = open_offsets(store)
        assert snapshot(after) == before, f"crash at change {crash_at}"
        assert store.list("internal") == ["group-offsets"]
        after.close()
        if not crashed:
            break
        crash_at += 1
    assert crash_at > 10  # the loop did walk through the whole compaction


@pytest.mark.parametrize("step", ["old log moved away", "compacted log moved in"])
def test_a_crash_in_a_compaction_that_a_commit_started_keeps_that_commit(step):
    store = MemoryStore()
    faulty = FaultyStore(store)
    offsets = OffsetStore.open(faulty, PATH, Clock(), segment_bytes=1_000)
    source = PATH if step == "old log moved away" else PATH + COMPACT_SUFFIX
    faulty.crash_when = lambda name, args: name == "rename" and args[0] == source
    with pytest.raises(Crash):
        for i in range(100):
            commit(offsets, "g", "t", 0, i)
    assert i > 3  # compaction started only once the log had outgrown segment_bytes
    assert open_offsets(store).fetch("g", "t", 0, "id-1") == value(i)


def test_open_finishes_a_compaction_that_renamed_the_old_log_away(store):
    offsets = filled(store)
    before = snapshot(offsets)
    offsets.close()
    fresh = OffsetStore.open(store, "scratch", Clock())  # the compacted log, written by hand
    for group, entries in before.items():
        fresh.commit(group, [(topic, v.topic_id, partition, v) for (topic, partition), v in entries.items()])
    fresh.close()
    store.rename(PATH, PATH + OLD_SUFFIX)
    store.rename("scratch", PATH + COMPACT_SUFFIX)
    assert snapshot(open_offsets(store)) == before
    assert store.list("internal") == ["group-offsets"]


def test_open_drops_the_old_log_left_after_the_swap(store):
    offsets = filled(store)
    before = snapshot(offsets)
    offsets.compact()
    offsets.close()
    store.mkdir(PATH + OLD_SUFFIX)  # as if the crash came before the old log's deletion
    handle = store.open_append(f"{PATH}{OLD_SUFFIX}/00000000000000000000.log")
    handle.write(b"stale")
    handle.close()
    assert snapshot(open_offsets(store)) == before
    assert store.list("internal") == ["group-offsets"]


def test_open_discards_a_half_written_compaction(store):
    offsets = filled(store)
    before = snapshot(offsets)
    offsets.close()
    store.mkdir(PATH + COMPACT_SUFFIX)
    handle = store.open_append(f"{PATH}{COMPACT_SUFFIX}/00000000000000000000.log")
    handle.write(b"half a batch")
    handle.close()
    assert snapshot(open_offsets(store)) == before
    assert store.list("internal") == ["group-offsets"]


# -- records --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        Commit("g", (("t", 0, value(1)), ("tø", 2**31 - 1, CommittedOffset(2**63 - 1, 5, "é\n\"", -(2**63), "x")))),
        Remove("g", (("t", 0), ("u", 3))),
        DeleteGroup("ü"),
    ],
)
def test_changes_round_trip_through_their_payload(change):
    assert decode(encode(change)) == change
    batch, header = to_batch(change, 123)
    assert header.size == len(batch) and header.max_timestamp == 123 and header.record_count == 1


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"\xff",
        b"[]",
        json.dumps({"v": 2, "type": "delete_group", "group": "g"}).encode(),
        json.dumps({"v": 1, "type": "rename", "group": "g"}).encode(),
        json.dumps({"v": 1, "type": "remove", "group": "g", "keys": [["t"]]}).encode(),
        json.dumps({"v": 1, "type": "remove", "group": 5, "keys": []}).encode(),
        json.dumps({"v": 1, "type": "commit", "group": "g", "offsets": [["t", "i", 0, 1.5, -1, None, 0]]}).encode(),
        b'{"v":1,"type":"delete_group","group":"\\ud800"}',
    ],
)
def test_bad_payloads_are_corrupt_batches(payload):
    with pytest.raises(CorruptBatch):
        decode(payload)


class PipelineFailing(MemoryStore):
    """A memory store whose next log write (once armed) writes half its bytes, fails, and
    leaves its file refusing writes: an HDFS writer whose DataNode pipeline failed."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False

    def open_append(self, path):
        file = super().open_append(path)
        plain = file.write

        def write(data):
            if self.armed and path.endswith(".log"):
                self.armed = False
                plain(bytes(data)[:len(data) // 2])
                file.abandon()
                raise OSError("All nodes failed for write")
            plain(data)
        file.write = write
        return file


def test_a_failed_write_reopens_the_log_for_the_next_one() -> None:
    """The next commit after a store failure is written (not refused by the abandoned file),
    and the half-written batch is cut: a reopened store reads both good commits only."""
    store = PipelineFailing()
    offsets = open_offsets(store)
    commit(offsets, "g", "t", 0, 1)
    store.armed = True
    with pytest.raises(OSError, match="All nodes failed"):
        commit(offsets, "g", "t", 1, 2)
    commit(offsets, "g", "t", 2, 3)
    assert offsets.group_offsets("g") == {("t", 0): value(1), ("t", 2): value(3)}
    assert snapshot(crash_reopened(store, offsets)) == {"g": {("t", 0): value(1), ("t", 2): value(3)}}
