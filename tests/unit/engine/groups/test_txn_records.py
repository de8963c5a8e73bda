"""Transactions in the offsets shards: a transactional id's state (`txn` records) and the
offsets a transaction stages in a group (`txn_offsets`, `txn_end`) survive reopening, a crash
and compaction, and staged offsets stay invisible until their transaction commits."""

import pytest

from martlet.engine.groups.offsets import CommittedOffset, OffsetStore
from martlet.engine.groups.records import TxnOffsets, TxnOffsetsEnd, TxnRecord, decode, encode, owner_of
from martlet.engine.store import LocalStore, MemoryStore
from martlet.engine.transactions.types import TxnMetadata, TxnState
from martlet.engine.types import TopicPartition

PATH = "internal/group-shards/0"
SEGMENT_BYTES = 2_000
TOPIC_ID = "id-1"
META = TxnMetadata("tx", 7, 3, 60_000, TxnState.ONGOING, frozenset({TopicPartition("t", 0), TopicPartition("u", 2)}),
                   frozenset({"g"}), 1_000, 1_500)


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    return MemoryStore() if request.param == "memory" else LocalStore(str(tmp_path))


def open_offsets(store):
    return OffsetStore.open(store, PATH, lambda: 1_000_000, segment_bytes=SEGMENT_BYTES)


def value(offset):
    return CommittedOffset(offset, -1, None, 1_000, TOPIC_ID)


def staged(offsets, group="g", producer_id=7, offset=10, partition=0):
    offsets.commit_in_txn(group, producer_id, [("t", TOPIC_ID, partition, value(offset))])


def test_a_txn_record_round_trips_through_its_encoding():
    assert decode(encode(TxnRecord(META))) == TxnRecord(META)


@pytest.mark.parametrize("bad", [
    {"producer_id": -1}, {"epoch": 40_000}, {"timeout_ms": 0}, {"transactional_id": 5},
    {"partitions": frozenset({TopicPartition("t", -1)})},
])
def test_a_txn_record_that_breaks_the_invariants_is_refused(bad):
    from dataclasses import replace
    with pytest.raises(ValueError):
        encode(TxnRecord(replace(META, **bad)))


def test_a_group_and_a_transactional_id_of_the_same_name_are_different_owners():
    assert owner_of(TxnRecord(META)) != owner_of(TxnOffsetsEnd("tx", 7, True))


def test_the_last_txn_record_of_an_id_is_its_state_after_a_reopen_and_a_crash(store):
    offsets = open_offsets(store)
    offsets.record_txn(META)
    done = TxnMetadata("tx", 7, 3, 60_000, TxnState.COMPLETE_COMMIT, updated_ms=2_000)
    offsets.record_txn(done)
    offsets.record_txn(TxnMetadata("other", 8, 0, 60_000, TxnState.EMPTY))
    offsets.close()
    again = open_offsets(store)
    assert again.txn("tx") == done and {m.transactional_id for m in again.txns()} == {"tx", "other"}
    again.close()
    store.delete(f"{PATH}/clean-shutdown")
    assert open_offsets(store).txn("tx") == done


def test_staged_offsets_are_invisible_until_their_transaction_commits(store):
    offsets = open_offsets(store)
    offsets.commit("g", [("t", TOPIC_ID, 0, value(5))])
    staged(offsets, offset=10)
    assert offsets.fetch("g", "t", 0, TOPIC_ID).offset == 5
    assert offsets.has_pending("g", TopicPartition("t", 0)) and not offsets.has_pending("g", TopicPartition("t", 1))
    offsets.end_txn("g", 7, commit=True)
    assert offsets.fetch("g", "t", 0, TOPIC_ID).offset == 10
    assert not offsets.has_pending("g", TopicPartition("t", 0))


def test_an_abort_drops_the_staged_offsets_and_leaves_the_committed_ones(store):
    offsets = open_offsets(store)
    offsets.commit("g", [("t", TOPIC_ID, 0, value(5))])
    staged(offsets, offset=10)
    offsets.end_txn("g", 7, commit=False)
    assert offsets.fetch("g", "t", 0, TOPIC_ID).offset == 5 and not offsets.has_pending("g", TopicPartition("t", 0))


def test_each_producer_stages_its_own_offsets(store):
    offsets = open_offsets(store)
    staged(offsets, producer_id=7, offset=10, partition=0)
    staged(offsets, producer_id=8, offset=20, partition=1)
    offsets.end_txn("g", 8, commit=True)
    assert offsets.fetch("g", "t", 1, TOPIC_ID).offset == 20 and offsets.fetch("g", "t", 0, TOPIC_ID) is None
    assert offsets.has_pending("g", TopicPartition("t", 0))


def test_an_end_without_staged_offsets_writes_nothing(store):
    offsets = open_offsets(store)
    assert offsets.txn_end_change("g", 7, True) is None
    assert offsets.txn_end_change("g", 7, True, [TxnOffsets("g", 7, ())]) == TxnOffsetsEnd("g", 7, True)


def test_staged_offsets_and_txn_records_survive_a_reopen_and_compaction(store):
    offsets = open_offsets(store)
    offsets.record_txn(META)
    staged(offsets, offset=10)
    for offset in range(200):  # enough commits to pass the compaction floor several times
        offsets.commit("busy", [("t", TOPIC_ID, 0, value(offset))])
    offsets.compact()
    offsets.close()
    again = open_offsets(store)
    assert again.txn("tx") == META and again.has_pending("g", TopicPartition("t", 0))
    again.end_txn("g", 7, commit=True)
    assert again.fetch("g", "t", 0, TOPIC_ID).offset == 10
    assert again.fetch("busy", "t", 0, TOPIC_ID).offset == 199
