"""A coordinator shard's log side, over the engine's machines: open and replay, restarts, torn
tails, corrupt payloads, compaction and a crash at any point of it; and the registry's encoding
of every kind of record (the checks on both sides of the disk)."""

import json
from dataclasses import replace

import pytest

from martlet.engine.coordinator.records import Registry
from martlet.engine.coordinator.runtime import SHARDS_DIR
from martlet.engine.coordinator.shard import COMPACT_SUFFIX, OLD_SUFFIX, Shard
from martlet.engine.errors import CorruptBatch
from martlet.engine.groups import records as membership
from martlet.engine.groups.membership import ClassicGroupRecord, ClassicMemberRecord, GroupGone
from martlet.engine.log import LogConfig, PartitionLog
from martlet.engine.offsets import state as offsets_state
from martlet.engine.offsets.records import Commit, DeleteGroup, Remove, TxnOffsets, TxnOffsetsEnd
from martlet.engine.service import MACHINES
from martlet.engine.store import MemoryStore
from martlet.engine.transactions import records as transactions
from martlet.engine.transactions.records import TxnRecord
from martlet.engine.transactions.types import TxnMetadata, TxnState
from martlet.engine.types import CommittedOffset, TopicPartition
from martlet.records.header import HEADER_BYTES, BatchHeader, pack_header, parse_header, set_crc
from tests.support.coordinator import STORES, now_ms, shard_store

PATH = f"{SHARDS_DIR}/0"
SEGMENT_BYTES = 2_000
REGISTRY = Registry(MACHINES)
MEMBER = ClassicMemberRecord("m-1", None, "c", "/h", 6_000, 3_000, "consumer", (("range", b"\x00\x01"),), b"\x02")
META = TxnMetadata("tx", 7, 3, 60_000, TxnState.ONGOING, frozenset({TopicPartition("t", 0)}), frozenset({"g0"}),
                   1_000, 1_500)


@pytest.fixture(params=STORES)
def store(request, tmp_path):
    return shard_store(request.param, tmp_path)


def open_shard(store, segment_bytes=SEGMENT_BYTES, path=PATH):
    return Shard.open(store, path, now_ms, REGISTRY, segment_bytes=segment_bytes)


def value(offset, commit_ms=1_000, topic_id="id-1", metadata=None, leader_epoch=-1):
    return CommittedOffset(offset, leader_epoch, metadata, commit_ms, topic_id)


def commit(shard, group, topic, partition, offset, topic_id="id-1", commit_ms=1_000, metadata=None):
    shard.write(offsets_state.commit(group, [(topic, topic_id, partition, value(offset, commit_ms, topic_id, metadata))]))


def offsets_of(shard):
    return shard.state(offsets_state.MACHINE)


def snapshot(shard):
    """Every machine's state in the shard, as plain values."""
    offsets = offsets_of(shard)
    return {
        "offsets": {group: dict(entries) for group, entries in offsets.groups.items()},
        "staged": {group: {producer: dict(entries) for producer, entries in by_producer.items()}
                   for group, by_producer in offsets.pending.items()},
        "membership": dict(shard.state(membership.MACHINE).by_group),
        "transactions": dict(shard.state(transactions.MACHINE).by_id),
    }


def reopened(store, shard, segment_bytes=SEGMENT_BYTES):
    """Close cleanly and open again."""
    shard.close()
    return open_shard(store, segment_bytes)


def crash_reopened(store, shard):
    """Reopen as after kill -9: the log's files stay as written, the clean marker is absent.
    (Closing first releases LocalStore descriptors; removing the marker forces the full scan.)"""
    shard.close()
    store.delete(f"{PATH}/clean-shutdown")
    return open_shard(store)


def active_log_file(store, path=PATH):
    return f"{path}/{[name for name in store.list(path) if name.endswith('.log')][-1]}"


def log_end_offset(shard):
    return shard._open_log().end_offset


def filled(store, segment_bytes=SEGMENT_BYTES):
    """A shard holding records of every machine, tombstones among them."""
    shard = open_shard(store, segment_bytes)
    for i in range(20):
        commit(shard, f"g{i % 3}", f"t{i % 4}", i % 5, i, commit_ms=i, metadata=f"m{i}" if i % 2 else None)
    shard.write(offsets_of(shard).delete_offsets("g0", "t0", [0]))
    shard.write(offsets_of(shard).delete_group("g2"))
    shard.write(offsets_state.txn_offsets("g1", 7, [("t9", "id-9", 0, value(5, topic_id="id-9"))]))
    members = shard.state(membership.MACHINE)
    for group in ("g0", "g1", "g2"):
        shard.write(members.change(ClassicGroupRecord(group, 1, "consumer", "range", "m-1", (MEMBER,))))
    shard.write(members.change(ClassicGroupRecord("g0", 2, "consumer", "range", None, ())))
    shard.write(members.change(GroupGone("g2")))
    shard.write(transactions.TxnRecord(META))
    shard.write(transactions.TxnRecord(TxnMetadata("other", 8, 0, 60_000, TxnState.EMPTY)))
    return shard


# -- open and replay ------------------------------------------------------------------------


def test_a_new_shard_is_empty_and_its_states_are_the_machines(store):
    shard = open_shard(store)
    assert snapshot(shard) == {"offsets": {}, "staged": {}, "membership": {}, "transactions": {}}
    assert isinstance(offsets_of(shard), offsets_state.OffsetsState)
    assert shard.state(membership.MACHINE).live_bytes == 0
    assert reopened(store, shard).state(transactions.MACHINE).all() == []


def test_an_unopened_shard_makes_no_store_call_and_creates_its_log_at_the_first_write():
    store = MemoryStore()
    shard = Shard(store, PATH, now_ms, REGISTRY, SEGMENT_BYTES)
    assert not shard.log_open and store.list(SHARDS_DIR) == []
    commit(shard, "g", "t", 0, 1)
    assert shard.log_open and store.list(SHARDS_DIR) == ["0"]
    assert offsets_of(reopened(store, shard)).groups == {"g": {("t", 0): value(1)}}


def test_reopen_after_close_rebuilds_the_same_state(store):
    shard = filled(store)
    before = snapshot(shard)
    assert before["offsets"] and "g2" not in before["offsets"]
    assert set(before["membership"]) == {"g0", "g1"} and before["staged"] and len(before["transactions"]) == 2
    assert snapshot(reopened(store, shard)) == before


def test_reopen_after_a_crash_rebuilds_the_same_state(store):
    shard = filled(store)
    before = snapshot(shard)
    assert snapshot(crash_reopened(store, shard)) == before


def test_a_process_killed_without_closing_loses_nothing():
    store = MemoryStore()
    shard = filled(store)
    before = snapshot(shard)
    del shard  # no close: no flush, no clean-shutdown marker
    assert snapshot(open_shard(store)) == before


def test_replay_rebuilds_the_size_estimate_too(store):
    shard = filled(store)
    live = shard.snapshot().live_bytes
    assert live > 0
    assert reopened(store, shard).snapshot().live_bytes == live


@pytest.mark.parametrize("cut_bytes", [1, 5, HEADER_BYTES + 3])
def test_a_torn_tail_loses_at_most_the_last_record(store, cut_bytes):
    shard = filled(store)
    before = snapshot(shard)
    commit(shard, "g0", "t9", 0, 999)
    shard.close()
    store.delete(f"{PATH}/clean-shutdown")
    path = active_log_file(store)
    store.truncate(path, store.size(path) - cut_bytes)
    shard = open_shard(store)
    assert snapshot(shard) == before
    commit(shard, "g0", "t9", 0, 1_000)  # appends continue after the cut
    assert snapshot(reopened(store, shard))["offsets"]["g0"][("t9", 0)] == value(1_000)


def raw_batch(payload, **changes):
    """A batch holding `payload` as the registry writes one, with `changes` to its header."""
    header = BatchHeader(0, HEADER_BYTES - 12 + len(payload), -1, 2, 0, 0, 0, 0, 0, -1, -1, -1, 1)
    batch = bytearray(pack_header(header._replace(**changes))) + payload
    set_crc(batch)
    return batch


def test_a_corrupt_payload_stops_the_open(store):
    log = PartitionLog.open(store, PATH, LogConfig(), now_ms)
    batch = raw_batch(b'{"v":1,"type":"commit","group":"g","offsets":[["t","id",-4,1,-1,null,0]]}')
    log.append(batch, parse_header(batch))
    log.close()
    with pytest.raises(CorruptBatch, match="bad partition"):
        open_shard(store)


def test_a_record_of_a_kind_no_machine_registered_stops_the_open(store):
    log = PartitionLog.open(store, PATH, LogConfig(), now_ms)
    batch = raw_batch(b'{"v":1,"type":"rename","group":"g"}')
    log.append(batch, parse_header(batch))
    log.close()
    with pytest.raises(CorruptBatch, match="unknown record type"):
        open_shard(store)


@pytest.mark.parametrize("changes", [{"record_count": 2}, {"producer_id": 5}, {"attributes": 1},
                                     {"last_offset_delta": 1}])
def test_a_batch_not_shaped_as_a_coordinator_record_is_corrupt(changes):
    batch = raw_batch(b'{"v":1,"type":"delete_group","group":"g"}', **changes)
    with pytest.raises(CorruptBatch, match="not a coordinator batch"):
        REGISTRY.from_batch(batch, parse_header(batch))


def test_a_batch_that_fails_its_checksum_is_corrupt():
    batch = raw_batch(b'{"v":1,"type":"delete_group","group":"g"}')
    assert REGISTRY.from_batch(batch, parse_header(batch)) == DeleteGroup("g")
    batch[-2] ^= 1
    with pytest.raises(CorruptBatch, match="checksum"):
        REGISTRY.from_batch(batch, parse_header(batch))
    with pytest.raises(CorruptBatch, match="checksum"):
        REGISTRY.from_batch(batch[:-1], parse_header(batch))


def test_close_is_idempotent_and_final(store):
    shard = open_shard(store)
    shard.close()
    shard.close()
    with pytest.raises(AssertionError):
        commit(shard, "g", "t", 0, 1)


# -- compaction ---------------------------------------------------------------------------


def test_compact_keeps_the_live_state_and_survives_reopen(store):
    shard = filled(store, segment_bytes=1 << 20)  # no compaction but the test's own
    for i in range(50):
        commit(shard, "g0", "t0", 1, i)
    before, size_before = snapshot(shard), shard._open_log().size_bytes()
    shard.compact()
    assert snapshot(shard) == before
    assert shard._open_log().size_bytes() < size_before / 4
    assert store.list(SHARDS_DIR) == ["0"]  # no .compact or .old left behind
    commit(shard, "g0", "t0", 1, 77)
    before = snapshot(shard)
    assert snapshot(reopened(store, shard)) == before


def test_compact_of_an_empty_shard(store):
    shard = open_shard(store)
    shard.compact()
    assert snapshot(reopened(store, shard)) == {"offsets": {}, "staged": {}, "membership": {}, "transactions": {}}


def test_the_log_stays_bounded_under_repeated_commits(store):
    shard = open_shard(store, segment_bytes=1_000)
    for i in range(400):
        commit(shard, "g", "t", i % 2, i)
    # Without compaction this would be ~400 batches of ~130 bytes.
    assert shard._open_log().size_bytes() <= 2 * 1_000
    assert offsets_of(shard).groups == {"g": {("t", 0): value(398), ("t", 1): value(399)}}
    assert offsets_of(reopened(store, shard, segment_bytes=1_000)).groups == offsets_of(shard).groups


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
    shard = filled(store)
    before = snapshot(shard)
    shard.close()
    crash_at = 0
    while True:
        faulty = FaultyStore(store)
        shard = open_shard(faulty)
        faulty.crash_when = lambda name, args, f=faulty, at=faulty.changes + crash_at: f.changes == at
        try:
            shard.compact()
        except Crash:
            crashed = True
        else:
            crashed = False
            faulty.crash_when = lambda name, args: False
            shard.close()
        after = open_shard(store)
        assert snapshot(after) == before, f"crash at change {crash_at}"
        assert store.list(SHARDS_DIR) == ["0"]
        after.close()
        if not crashed:
            break
        crash_at += 1
    assert crash_at > 10  # the loop did walk through the whole compaction


@pytest.mark.parametrize("step", ["old log moved away", "compacted log moved in"])
def test_a_crash_in_a_compaction_that_a_write_started_keeps_that_write(step):
    store = MemoryStore()
    faulty = FaultyStore(store)
    shard = open_shard(faulty, segment_bytes=1_000)
    source = PATH if step == "old log moved away" else PATH + COMPACT_SUFFIX
    faulty.crash_when = lambda name, args: name == "rename" and args[0] == source
    with pytest.raises(Crash):
        for i in range(100):
            commit(shard, "g", "t", 0, i)
    assert i > 3  # compaction started only once the log had outgrown segment_bytes
    assert offsets_of(open_shard(store)).fetch("g", "t", 0, "id-1") == value(i)


def test_open_finishes_a_compaction_that_renamed_the_old_log_away(store):
    shard = filled(store)
    before, live = snapshot(shard), shard.snapshot()
    shard.close()
    fresh = Shard.open(store, "scratch", now_ms, REGISTRY)  # the compacted log, written by hand
    for record in live.records():
        fresh.write(record)
    fresh.close()
    store.rename(PATH, PATH + OLD_SUFFIX)
    store.rename("scratch", PATH + COMPACT_SUFFIX)
    assert snapshot(open_shard(store)) == before
    assert store.list(SHARDS_DIR) == ["0"]


def test_open_drops_the_old_log_left_after_the_swap(store):
    shard = filled(store)
    before = snapshot(shard)
    shard.compact()
    shard.close()
    store.mkdir(PATH + OLD_SUFFIX)  # as if the crash came before the old log's deletion
    handle = store.open_append(f"{PATH}{OLD_SUFFIX}/00000000000000000000.log")
    handle.write(b"stale")
    handle.close()
    assert snapshot(open_shard(store)) == before
    assert store.list(SHARDS_DIR) == ["0"]


def test_open_discards_a_half_written_compaction(store):
    shard = filled(store)
    before = snapshot(shard)
    shard.close()
    store.mkdir(PATH + COMPACT_SUFFIX)
    handle = store.open_append(f"{PATH}{COMPACT_SUFFIX}/00000000000000000000.log")
    handle.write(b"half a batch")
    handle.close()
    assert snapshot(open_shard(store)) == before
    assert store.list(SHARDS_DIR) == ["0"]


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
    """The next record after a store failure is written (not refused by the abandoned file),
    and the half-written batch is cut: a reopened shard reads both good commits only."""
    store = PipelineFailing()
    shard = open_shard(store)
    commit(shard, "g", "t", 0, 1)
    store.armed = True
    with pytest.raises(OSError, match="All nodes failed"):
        commit(shard, "g", "t", 1, 2)
    assert not shard.log_open
    commit(shard, "g", "t", 2, 3)
    assert offsets_of(shard).groups == {"g": {("t", 0): value(1), ("t", 2): value(3)}}
    assert snapshot(crash_reopened(store, shard))["offsets"] == {"g": {("t", 0): value(1), ("t", 2): value(3)}}


# -- records --------------------------------------------------------------------------------


ENTRY = ("tø", 2**31 - 1, CommittedOffset(2**63 - 1, 5, "é\n\"", -(2**63), "x"))


@pytest.mark.parametrize(
    "record",
    [
        Commit("g", (("t", 0, value(1)), ENTRY)),
        Remove("g", (TopicPartition("t", 0), TopicPartition("u", 3))),
        DeleteGroup("ü"),
        TxnOffsets("g", 2**63 - 1, (ENTRY,)),
        TxnOffsetsEnd("g", 0, False),
        ClassicGroupRecord("g", 3, "consumer", "range", "m-1", (MEMBER,)),
        GroupGone("g"),
        TxnRecord(META),
    ],
)
def test_records_round_trip_through_their_payload(record):
    assert REGISTRY.decode(REGISTRY.encode(record)) == record
    batch, header = REGISTRY.to_batch(record, 123)
    assert header.size == len(batch) and header.max_timestamp == 123 and header.record_count == 1
    assert REGISTRY.from_batch(batch, header) == record


def test_a_payload_is_compact_json_with_the_version_and_type_first():
    record = Commit("g", (("t", 0, value(7, metadata="é")),))
    assert REGISTRY.encode(record) == (
        '{"v":1,"type":"commit","group":"g","offsets":[["t","id-1",0,7,-1,"é",1000]]}'.encode())
    assert REGISTRY.encode(TxnOffsetsEnd("g", 4, True)) == b'{"v":1,"type":"txn_end","group":"g","producer_id":4,"commit":true}'
    assert REGISTRY.encode(DeleteGroup("g")) == b'{"v":1,"type":"delete_group","group":"g"}'


def test_each_record_names_its_machine_and_owner():
    assert REGISTRY.owner(Commit("g", ())) == (offsets_state.NAME, "g")
    assert REGISTRY.owner(GroupGone("g")) == (membership.NAME, "g")
    assert REGISTRY.owner(TxnRecord(META)) == (transactions.NAME, "tx")
    # a group and a transactional id of the same name are different owners
    assert REGISTRY.owner(TxnRecord(replace(META, transactional_id="g"))) != REGISTRY.owner(DeleteGroup("g"))


def test_a_record_no_machine_registered_is_refused():
    with pytest.raises(ValueError, match="registered kind"):
        REGISTRY.encode(("g", 1))
    with pytest.raises(ValueError, match="registered twice"):
        Registry(MACHINES + (offsets_state.MACHINE,))


@pytest.mark.parametrize(
    "record",
    [
        Commit("g", (("t", -1, value(1)),)),
        Commit("g", (("t", 0, value(True)),)),
        Commit("g", (("t", 0, value(1, leader_epoch=2**31)),)),
        Commit("g", (("t", 0, value(2**63)),)),
        Commit("g", (("t", 0, value(1, metadata="\ud800")),)),
        Commit(5, ()),
        Remove("g", (("t", 2**31),)),
        TxnOffsets("g", -1, ()),
        TxnOffsetsEnd("g", 1, 1),
        DeleteGroup(None),
        GroupGone(7),
    ],
)
def test_records_that_break_the_invariants_are_refused_when_encoded(record):
    with pytest.raises(ValueError):
        REGISTRY.encode(record)


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"\xff",
        b"[]",
        b"{}",
        json.dumps({"v": 2, "type": "delete_group", "group": "g"}).encode(),
        json.dumps({"v": 1, "type": "rename", "group": "g"}).encode(),
        json.dumps({"v": 1, "type": ["commit"], "group": "g"}).encode(),
        json.dumps({"v": 1, "type": "remove", "group": "g", "keys": [["t"]]}).encode(),
        json.dumps({"v": 1, "type": "remove", "group": 5, "keys": []}).encode(),
        json.dumps({"v": 1, "type": "commit", "group": "g", "offsets": [["t", "i", 0, 1.5, -1, None, 0]]}).encode(),
        json.dumps({"v": 1, "type": "txn_end", "group": "g", "producer_id": 1, "commit": 1}).encode(),
        json.dumps({"v": 1, "type": "classic_group", "group": "g", "members": 5}).encode(),
        b'{"v":1,"type":"delete_group","group":"\\ud800"}',
    ],
)
def test_bad_payloads_are_corrupt_batches(payload):
    with pytest.raises(CorruptBatch):
        REGISTRY.decode(payload)
