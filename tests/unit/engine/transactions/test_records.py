"""Transactions in the coordinator shards: a transactional id's state (`txn` records, the
transactions machine) and the offsets a transaction stages in a group (`txn_offsets`,
`txn_end`, the offsets machine) survive reopening, a crash and compaction, and staged offsets
stay invisible until their transaction commits."""

import json
from dataclasses import replace

import pytest

from martlet.engine.coordinator.machine import FORMAT_VERSION
from martlet.engine.coordinator.records import Registry
from martlet.engine.coordinator.shard import Shard
from martlet.engine.errors import CorruptBatch
from martlet.engine.offsets import state as offsets_machine
from martlet.engine.offsets.records import TxnOffsets, TxnOffsetsEnd
from martlet.engine.offsets.state import OffsetsState
from martlet.engine.service import MACHINES
from martlet.engine.store import LocalStore, MemoryStore
from martlet.engine.transactions import records as transactions
from martlet.engine.transactions.records import KIND, TxnRecord, TxnsState
from martlet.engine.transactions.types import TxnMetadata, TxnState
from martlet.engine.types import CommittedOffset, TopicPartition

PATH = "internal/group-shards/0"
SEGMENT_BYTES = 2_000
TOPIC_ID = "id-1"
REGISTRY = Registry(MACHINES)
META = TxnMetadata("tx", 7, 3, 60_000, TxnState.ONGOING, frozenset({TopicPartition("t", 0), TopicPartition("u", 2)}),
                   frozenset({"g"}), 1_000, 1_500)
BAD = [
    {"producer_id": -1}, {"epoch": 40_000}, {"timeout_ms": 0}, {"transactional_id": 5},
    {"partitions": frozenset({TopicPartition("t", -1)})},
]


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    return MemoryStore() if request.param == "memory" else LocalStore(str(tmp_path))


def open_shard(store):
    return Shard.open(store, PATH, lambda: 1_000_000, REGISTRY, segment_bytes=SEGMENT_BYTES)


def offsets(shard) -> OffsetsState:
    return shard.state(offsets_machine.MACHINE)


def txns(shard) -> TxnsState:
    return shard.state(transactions.MACHINE)


def value(offset):
    return CommittedOffset(offset, -1, None, 1_000, TOPIC_ID)


def commit(shard, group, offset, partition=0):
    shard.write(offsets_machine.commit(group, [("t", TOPIC_ID, partition, value(offset))]))


def staged(shard, group="g", producer_id=7, offset=10, partition=0):
    shard.write(offsets_machine.txn_offsets(group, producer_id, [("t", TOPIC_ID, partition, value(offset))]))


def end_txn(shard, group, producer_id, commit):
    shard.write(offsets(shard).txn_end(group, producer_id, commit))


def record_txn(shard, meta):
    shard.write(TxnRecord(meta))


def test_a_txn_record_round_trips_through_its_encoding():
    assert REGISTRY.decode(REGISTRY.encode(TxnRecord(META))) == TxnRecord(META)
    batch, header = REGISTRY.to_batch(TxnRecord(META), 1_000)
    assert REGISTRY.from_batch(batch, header) == TxnRecord(META)


@pytest.mark.parametrize("bad", BAD)
def test_a_txn_record_that_breaks_the_invariants_is_refused(bad):
    with pytest.raises(ValueError):
        REGISTRY.encode(TxnRecord(replace(META, **bad)))


@pytest.mark.parametrize("bad", BAD)
def test_a_stored_txn_record_that_breaks_the_invariants_is_corrupt(bad):
    """Read back, the same checks stop a replay rather than rebuild a wrong state."""
    record = TxnRecord(replace(META, **bad))  # written by hand: `Kind.payload` checks it first
    body = json.dumps({"v": FORMAT_VERSION, "type": KIND.name, **KIND.fields(record)}).encode()
    with pytest.raises(CorruptBatch):
        REGISTRY.decode(body)


def test_a_group_and_a_transactional_id_of_the_same_name_are_different_owners():
    assert REGISTRY.owner(TxnRecord(META)) != REGISTRY.owner(TxnOffsetsEnd("tx", 7, True))
    assert REGISTRY.owner(TxnRecord(META)) == (transactions.NAME, "tx")


def test_the_last_txn_record_of_an_id_is_its_state_after_a_reopen_and_a_crash(store):
    shard = open_shard(store)
    record_txn(shard, META)
    done = TxnMetadata("tx", 7, 3, 60_000, TxnState.COMPLETE_COMMIT, updated_ms=2_000)
    record_txn(shard, done)
    record_txn(shard, TxnMetadata("other", 8, 0, 60_000, TxnState.EMPTY))
    shard.close()
    again = open_shard(store)
    assert txns(again).get("tx") == done and {m.transactional_id for m in txns(again).all()} == {"tx", "other"}
    again.close()
    store.delete(f"{PATH}/clean-shutdown")
    assert txns(open_shard(store)).get("tx") == done


def test_staged_offsets_are_invisible_until_their_transaction_commits(store):
    shard = open_shard(store)
    commit(shard, "g", 5)
    staged(shard, offset=10)
    assert offsets(shard).fetch("g", "t", 0, TOPIC_ID).offset == 5
    assert offsets(shard).has_pending("g", TopicPartition("t", 0))
    assert not offsets(shard).has_pending("g", TopicPartition("t", 1))
    end_txn(shard, "g", 7, commit=True)
    assert offsets(shard).fetch("g", "t", 0, TOPIC_ID).offset == 10
    assert not offsets(shard).has_pending("g", TopicPartition("t", 0))


def test_an_abort_drops_the_staged_offsets_and_leaves_the_committed_ones(store):
    shard = open_shard(store)
    commit(shard, "g", 5)
    staged(shard, offset=10)
    end_txn(shard, "g", 7, commit=False)
    assert offsets(shard).fetch("g", "t", 0, TOPIC_ID).offset == 5
    assert not offsets(shard).has_pending("g", TopicPartition("t", 0))


def test_each_producer_stages_its_own_offsets(store):
    shard = open_shard(store)
    staged(shard, producer_id=7, offset=10, partition=0)
    staged(shard, producer_id=8, offset=20, partition=1)
    end_txn(shard, "g", 8, commit=True)
    assert offsets(shard).fetch("g", "t", 1, TOPIC_ID).offset == 20 and offsets(shard).fetch("g", "t", 0, TOPIC_ID) is None
    assert offsets(shard).has_pending("g", TopicPartition("t", 0))


def test_an_end_without_staged_offsets_writes_nothing(store):
    shard = open_shard(store)
    assert offsets(shard).txn_end("g", 7, True) is None
    assert offsets(shard).txn_end("g", 7, True, [TxnOffsets("g", 7, ())]) == TxnOffsetsEnd("g", 7, True)


def test_staged_offsets_and_txn_records_survive_a_reopen_and_compaction(store):
    shard = open_shard(store)
    record_txn(shard, META)
    staged(shard, offset=10)
    for offset in range(200):  # enough commits to pass the compaction floor several times
        commit(shard, "busy", offset)
    shard.compact()
    shard.close()
    again = open_shard(store)
    assert txns(again).get("tx") == META and offsets(again).has_pending("g", TopicPartition("t", 0))
    end_txn(again, "g", 7, commit=True)
    assert offsets(again).fetch("g", "t", 0, TOPIC_ID).offset == 10
    assert offsets(again).fetch("busy", "t", 0, TOPIC_ID).offset == 199
