"""The committed-offsets machine: its state, the makers that turn requests into records, the
replay of its records (written through a coordinator shard, then reopened), expiry, and the
offsets a transaction stages until its end."""

import pytest

from martlet.engine.coordinator.records import Registry
from martlet.engine.coordinator.runtime import SHARDS_DIR
from martlet.engine.coordinator.shard import Shard
from martlet.engine.offsets import state as offsets_state
from martlet.engine.offsets.records import Commit, DeleteGroup, Remove, TxnOffsets, TxnOffsetsEnd
from martlet.engine.offsets.state import MACHINE, NAME, OffsetsState, commit, txn_offsets
from martlet.engine.service import MACHINES
from martlet.engine.types import CommittedOffset, TopicPartition
from tests.support.coordinator import STORES, now_ms, shard_store

PATH = f"{SHARDS_DIR}/0"
SEGMENT_BYTES = 2_000
REGISTRY = Registry(MACHINES)


@pytest.fixture(params=STORES)
def store(request, tmp_path):
    return shard_store(request.param, tmp_path)


def open_shard(store, segment_bytes=SEGMENT_BYTES):
    return Shard.open(store, PATH, now_ms, REGISTRY, segment_bytes=segment_bytes)


def offsets_of(shard) -> OffsetsState:
    return shard.state(MACHINE)


def value(offset, commit_ms=1_000, topic_id="id-1", metadata=None, leader_epoch=-1):
    return CommittedOffset(offset, leader_epoch, metadata, commit_ms, topic_id)


def put(shard, group, topic, partition, offset, topic_id="id-1", commit_ms=1_000, metadata=None):
    shard.write(commit(group, [(topic, topic_id, partition, value(offset, commit_ms, topic_id, metadata))]))


def groups(shard):
    """Groups with at least one committed offset, sorted."""
    return sorted(offsets_of(shard).groups)


def group_offsets(shard, group):
    return dict(offsets_of(shard).groups.get(group, {}))


def snapshot(shard):
    return {group: group_offsets(shard, group) for group in groups(shard)}


def reopened(store, shard, segment_bytes=SEGMENT_BYTES):
    """Close cleanly and open again."""
    shard.close()
    return open_shard(store, segment_bytes)


def crash_reopened(store, shard):
    """Reopen as after kill -9: the clean marker is absent, so the whole log is scanned."""
    shard.close()
    store.delete(f"{PATH}/clean-shutdown")
    return open_shard(store)


def log_end_offset(shard):
    return shard._open_log().end_offset


def expire(shard, now_ms, retention_ms, is_empty):
    """Write the expiry's tombstones; how many offsets they remove."""
    removals = offsets_of(shard).expired(now_ms, retention_ms, is_empty)
    assert len({removal.group_id for removal in removals}) == len(removals)  # one tombstone per group
    for removal in removals:
        shard.write(removal)
    return sum(len(removal.keys) for removal in removals)


def rebuilt(state):
    """An empty state that took in `state.records()`."""
    twin = OffsetsState()
    for record in state.records():
        twin.apply(record)
    return twin


# -- commit, fetch, listing ---------------------------------------------------------------


def test_the_machine_registers_every_offsets_kind():
    assert MACHINE.name == NAME == "offsets"
    assert [kind.name for kind in MACHINE.kinds] == ["commit", "remove", "delete_group", "txn_offsets", "txn_end"]
    assert isinstance(MACHINE.empty(), OffsetsState) and MACHINE.empty().live_bytes == 0


def test_fetch_returns_what_was_committed(store):
    shard = open_shard(store)
    committed = CommittedOffset(42, 7, "meta", 1_234, "id-1")
    shard.write(commit("g", [("t", "id-1", 0, committed), ("t", "id-1", 1, value(5))]))
    state = offsets_of(shard)
    assert state.fetch("g", "t", 0, "id-1") == committed
    assert state.fetch("g", "t", 1, "id-1") == value(5)
    assert state.fetch("g", "t", 2, "id-1") is None
    assert state.fetch("other", "t", 0, "id-1") is None
    assert groups(shard) == ["g"]
    assert group_offsets(shard, "g") == {("t", 0): committed, ("t", 1): value(5)}
    assert group_offsets(shard, "other") == {}


def test_a_later_commit_replaces_the_earlier_one(store):
    shard = open_shard(store)
    put(shard, "g", "t", 0, 1)
    put(shard, "g", "t", 0, 9, commit_ms=2_000)
    assert offsets_of(shard).fetch("g", "t", 0, "id-1") == value(9, 2_000)


def test_one_request_is_one_record_and_an_empty_request_writes_nothing(store):
    shard = open_shard(store)
    record = commit("g", [("t", "id-1", p, value(p)) for p in range(10)])
    assert isinstance(record, Commit) and len(record.offsets) == 10
    shard.write(record)
    assert log_end_offset(shard) == 1
    assert commit("g", []) is None
    shard.write(commit("g", []))
    assert log_end_offset(shard) == 1


def test_the_request_topic_id_is_the_one_stored(store):
    shard = open_shard(store)
    shard.write(commit("g", [("t", "id-2", 0, value(3, topic_id="placeholder"))]))
    assert offsets_of(shard).fetch("g", "t", 0, "id-2") == value(3, topic_id="id-2")
    assert offsets_of(shard).fetch("g", "t", 0, "placeholder") is None


def test_a_recreated_topic_does_not_inherit_old_offsets(store):
    shard = open_shard(store)
    put(shard, "g", "t", 0, 100, topic_id="old")
    assert offsets_of(shard).fetch("g", "t", 0, "new") is None
    put(shard, "g", "t", 0, 3, topic_id="new")
    shard = reopened(store, shard)
    assert offsets_of(shard).fetch("g", "t", 0, "old") is None
    assert offsets_of(shard).fetch("g", "t", 0, "new") == value(3, topic_id="new")


def test_only_groups_with_offsets_are_listed(store):
    shard = open_shard(store)
    for group in ("b", "a", "c"):
        put(shard, group, "t", 0, 1)
    shard.write(offsets_of(shard).delete_group("c"))
    assert groups(shard) == ["a", "b"]


def test_invalid_values_are_refused_before_anything_is_written(store):
    shard = open_shard(store)
    for bad in ([("t", "id", -1, value(1))], [("t", "id", 0, value(True))], [("t", "id", 0, value(1, leader_epoch=2**31))]):
        with pytest.raises(ValueError):
            shard.write(commit("g", bad))
    with pytest.raises(ValueError):
        shard.write(commit("g", [("t", "id", 0, value(1, metadata="\ud800"))]))  # not encodable
    with pytest.raises(ValueError):
        shard.write(txn_offsets("g", -1, [("t", "id", 0, value(1))]))
    assert log_end_offset(shard) == 0 and groups(shard) == [] and offsets_of(shard).pending == {}


# -- deleting and expiring ----------------------------------------------------------------


def test_delete_group_removes_all_its_offsets_and_survives_reopen(store):
    shard = open_shard(store)
    shard.write(commit("g", [("t", "id-1", p, value(p)) for p in range(3)]))
    put(shard, "h", "t", 0, 7)
    assert offsets_of(shard).delete_group("g") == DeleteGroup("g")
    shard.write(offsets_of(shard).delete_group("g"))
    assert groups(shard) == ["h"] and group_offsets(shard, "g") == {}
    shard = reopened(store, shard)
    assert snapshot(shard) == {"h": {("t", 0): value(7)}}


def test_deleting_what_is_not_there_writes_nothing(store):
    shard = open_shard(store)
    put(shard, "g", "t", 0, 1)
    state = offsets_of(shard)
    assert state.delete_group("missing") is None
    assert state.delete_offsets("g", "t", [5, 6]) is None
    assert state.delete_offsets("missing", "t", [0]) is None
    shard.write(state.delete_group("missing"))
    shard.write(state.delete_offsets("g", "t", [5, 6]))
    shard.write(state.delete_offsets("missing", "t", [0]))
    assert log_end_offset(shard) == 1


def test_delete_offsets_removes_only_those_partitions(store):
    shard = open_shard(store)
    shard.write(commit("g", [("t", "id-1", p, value(p)) for p in range(3)] + [("u", "id-u", 0, value(9, topic_id="id-u"))]))
    removal = offsets_of(shard).delete_offsets("g", "t", [0, 2, 2, 8])
    assert removal == Remove("g", (TopicPartition("t", 0), TopicPartition("t", 2)))  # each once, missing ones left out
    shard.write(removal)
    assert group_offsets(shard, "g") == {("t", 1): value(1), ("u", 0): value(9, topic_id="id-u")}
    shard = reopened(store, shard)
    assert group_offsets(shard, "g") == {("t", 1): value(1), ("u", 0): value(9, topic_id="id-u")}


def test_the_group_disappears_with_its_last_offset(store):
    shard = open_shard(store)
    put(shard, "g", "t", 0, 1)
    shard.write(offsets_of(shard).delete_offsets("g", "t", [0]))
    assert groups(shard) == []
    assert groups(reopened(store, shard)) == []


def test_expire_touches_only_empty_groups_and_only_old_offsets(store):
    shard = open_shard(store)
    for group in ("empty", "active"):
        put(shard, group, "t", 0, 1, commit_ms=1_000)
        put(shard, group, "t", 1, 2, commit_ms=5_000)
    removed = expire(shard, now_ms=11_000, retention_ms=10_000, is_empty=lambda group: group == "empty")
    assert removed == 1  # commit_ms + retention_ms <= now_ms: 1_000 + 10_000 <= 11_000 expires
    assert group_offsets(shard, "empty") == {("t", 1): value(2, 5_000)}
    assert len(group_offsets(shard, "active")) == 2
    shard = reopened(store, shard)
    assert group_offsets(shard, "empty") == {("t", 1): value(2, 5_000)}
    assert expire(shard, now_ms=15_000, retention_ms=10_000, is_empty=lambda group: True) == 3
    assert groups(crash_reopened(store, shard)) == []


def test_expire_with_nothing_due_writes_nothing(store):
    shard = open_shard(store)
    put(shard, "g", "t", 0, 1, commit_ms=1_000)
    assert offsets_of(shard).expired(now_ms=10_999, retention_ms=10_000, is_empty=lambda group: True) == []
    assert expire(shard, now_ms=10_999, retention_ms=10_000, is_empty=lambda group: True) == 0
    assert log_end_offset(shard) == 1


def test_expiry_needs_a_retention_that_is_not_negative():
    with pytest.raises(AssertionError):
        OffsetsState().expired(now_ms=0, retention_ms=-1, is_empty=lambda group: True)


# -- the makers see the records still queued -----------------------------------------------


def pending_commit(group, *partitions):
    return [Commit(group, tuple(("t", p, value(p)) for p in partitions))]


def test_delete_group_sees_a_pending_commit():
    state = OffsetsState()
    assert state.delete_group("g") is None
    assert state.delete_group("g", pending_commit("g", 0)) == DeleteGroup("g")
    assert state.delete_group("g", [Remove("g", (TopicPartition("t", 0),))]) is None


def test_delete_offsets_sees_a_pending_commit():
    state = OffsetsState()
    state.apply(Commit("g", (("t", 0, value(0)),)))
    removal = state.delete_offsets("g", "t", [0, 1, 2], pending_commit("g", 1))
    assert removal == Remove("g", (TopicPartition("t", 0), TopicPartition("t", 1)))


def test_expiry_leaves_an_offset_with_a_commit_pending():
    state = OffsetsState()
    state.apply(Commit("g", (("t", 0, value(0)), ("t", 1, value(1)))))
    state.apply(Commit("h", (("t", 0, value(0)),)))
    removals = state.expired(5_000, 1_000, lambda group: True,
                             lambda group: pending_commit("g", 0) if group == "g" else [])
    assert removals == [Remove("g", (TopicPartition("t", 1),)), Remove("h", (TopicPartition("t", 0),))]


def test_makers_do_not_change_the_state():
    state = OffsetsState()
    state.apply(Commit("g", (("t", 0, value(0)),)))
    before = (state.copy().groups, state.live_bytes)
    state.delete_group("g")
    state.delete_offsets("g", "t", [0])
    state.expired(10**9, 0, lambda group: True)
    state.txn_end("g", 7, True, [TxnOffsets("g", 7, ())])
    assert (state.groups, state.live_bytes) == before


# -- transactions' staged offsets ------------------------------------------------------------


def stage(shard, group="g", producer_id=7, offset=10, partition=0):
    shard.write(txn_offsets(group, producer_id, [("t", "id-1", partition, value(offset))]))


def test_staged_offsets_are_invisible_until_their_transaction_commits(store):
    shard = open_shard(store)
    put(shard, "g", "t", 0, 1)
    stage(shard)
    state = offsets_of(shard)
    assert state.fetch("g", "t", 0, "id-1") == value(1)
    assert state.has_pending("g", TopicPartition("t", 0)) and not state.has_pending("g", TopicPartition("t", 1))
    assert state.staging_groups(7) == ["g"] and state.staging_groups(8) == []
    end = state.txn_end("g", 7, True)
    assert end == TxnOffsetsEnd("g", 7, True)
    shard.write(end)
    assert state.fetch("g", "t", 0, "id-1") == value(10)
    assert not state.has_pending("g", TopicPartition("t", 0)) and state.pending == {}
    assert offsets_of(reopened(store, shard)).fetch("g", "t", 0, "id-1") == value(10)


def test_an_abort_drops_the_staged_offsets_and_leaves_the_committed_ones(store):
    shard = open_shard(store)
    put(shard, "g", "t", 0, 1)
    stage(shard, partition=0)
    stage(shard, partition=1)
    shard.write(offsets_of(shard).txn_end("g", 7, False))
    assert snapshot(shard) == {"g": {("t", 0): value(1)}} and offsets_of(shard).pending == {}
    assert snapshot(crash_reopened(store, shard)) == {"g": {("t", 0): value(1)}}


def test_each_producer_stages_its_own_offsets_in_each_group(store):
    shard = open_shard(store)
    stage(shard, "g", 7, offset=10)
    stage(shard, "g", 8, offset=20)
    stage(shard, "h", 7, offset=30)
    state = offsets_of(shard)
    assert state.staging_groups(7) == ["g", "h"] and state.staging_groups(8) == ["g"]
    shard.write(state.txn_end("g", 8, True))
    assert snapshot(shard) == {"g": {("t", 0): value(20)}}
    assert state.has_pending("g", TopicPartition("t", 0))  # producer 7's stays staged
    shard.write(state.txn_end("g", 7, True))
    assert state.fetch("g", "t", 0, "id-1") == value(10)  # the later end wins
    assert state.staging_groups(7) == ["h"]


def test_an_end_without_staged_offsets_writes_nothing(store):
    shard = open_shard(store)
    stage(shard, "g", 7)
    state = offsets_of(shard)
    assert state.txn_end("g", 8, True) is None and state.txn_end("h", 7, False) is None
    assert state.txn_end("h", 7, False, [TxnOffsets("h", 7, ())]) == TxnOffsetsEnd("h", 7, False)  # pending
    assert state.txn_end("h", 7, False, [TxnOffsets("h", 9, ())]) is None
    assert txn_offsets("g", 7, []) is None
    assert log_end_offset(shard) == 1


def test_a_later_stage_replaces_the_earlier_one_of_the_same_partition(store):
    shard = open_shard(store)
    stage(shard, offset=10)
    stage(shard, offset=11)
    assert offsets_of(shard).pending == {"g": {7: {("t", 0): value(11)}}}
    shard.write(offsets_of(shard).txn_end("g", 7, True))
    assert snapshot(shard) == {"g": {("t", 0): value(11)}}


def test_delete_group_leaves_the_offsets_a_transaction_staged(store):
    shard = open_shard(store)
    put(shard, "g", "t", 1, 1)
    stage(shard)
    shard.write(offsets_of(shard).delete_group("g"))
    assert groups(shard) == [] and offsets_of(shard).has_pending("g", TopicPartition("t", 0))
    shard.write(offsets_of(shard).txn_end("g", 7, True))
    assert snapshot(reopened(store, shard)) == {"g": {("t", 0): value(10)}}


def test_staged_offsets_survive_a_reopen_and_compaction(store):
    shard = open_shard(store)
    put(shard, "g", "t", 1, 1)
    stage(shard, "g", 7)
    stage(shard, "h", 8, offset=5)
    pending = offsets_of(shard).copy().pending
    shard = reopened(store, shard)
    assert offsets_of(shard).pending == pending
    shard.compact()
    assert offsets_of(shard).pending == pending
    shard = crash_reopened(store, shard)
    assert offsets_of(shard).pending == pending
    shard.write(offsets_of(shard).txn_end("h", 8, True))
    assert snapshot(shard) == {"g": {("t", 1): value(1)}, "h": {("t", 0): value(5)}}


# -- records(), copy() and the size estimate ----------------------------------------------------


def busy_state():
    state = OffsetsState()
    state.apply(Commit("g", tuple(("t", p, value(p, metadata="m" * p)) for p in range(5))))
    state.apply(Commit("h", (("tø", 0, value(1, topic_id="id-é")),)))
    state.apply(Commit("gone", (("t", 0, value(1)),)))
    state.apply(Remove("g", (TopicPartition("t", 3), TopicPartition("t", 9))))
    state.apply(DeleteGroup("gone"))
    state.apply(TxnOffsets("g", 7, (("t", 0, value(70)), ("u", 1, value(71)))))
    state.apply(TxnOffsets("k", 8, (("t", 0, value(80)),)))
    state.apply(TxnOffsetsEnd("k", 8, False))
    state.apply(Commit("g", (("t", 1, value(11, metadata="longer metadata")),)))
    return state


def test_records_rebuild_the_state_and_its_size_estimate():
    state = busy_state()
    twin = rebuilt(state)
    assert twin.groups == state.groups and twin.pending == state.pending
    assert "gone" not in twin.groups and "k" not in twin.pending
    assert twin.live_bytes == state.live_bytes > 0


def test_the_size_estimate_errs_high():
    state = busy_state()
    assert state.live_bytes >= sum(len(REGISTRY.to_batch(record, 0)[0]) for record in state.records())


def test_emptied_state_estimates_nothing():
    state = busy_state()
    for group in list(state.groups):
        state.apply(DeleteGroup(group))
    for group, by_producer in list(state.pending.items()):
        for producer in list(by_producer):
            state.apply(TxnOffsetsEnd(group, producer, False))
    assert state.groups == {} and state.pending == {} and state.live_bytes == 0


def test_records_split_a_large_group_into_bounded_commits(monkeypatch):
    monkeypatch.setattr(offsets_state, "COMPACT_BATCH_ENTRIES", 3)
    state = OffsetsState()
    state.apply(Commit("g", tuple(("t", p, value(p)) for p in range(7))))
    commits = list(state.records())
    assert [len(record.offsets) for record in commits] == [3, 3, 1]
    assert rebuilt(state).groups == state.groups


def test_a_copy_is_independent():
    state = busy_state()
    twin = state.copy()
    twin.apply(DeleteGroup("g"))
    twin.apply(TxnOffsetsEnd("g", 7, True))
    assert "g" in state.groups and 7 in state.pending["g"]
    assert twin.live_bytes != state.live_bytes and rebuilt(state).live_bytes == state.live_bytes
