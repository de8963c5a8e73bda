"""The transaction APIs through the dispatcher: InitProducerId with a transactional id,
AddPartitionsToTxn (client form and the batched broker form with verify_only),
AddOffsetsToTxn, TxnOffsetCommit, EndTxn and FindCoordinator for transactional ids, with
Kafka's error codes per version."""

from __future__ import annotations

from typing import Any

import pytest

from martlet.engine.api import CommittedOffset
from tests.support.handler_transactions import ADD_PARTITIONS_TO_TXN, add, end, init, settle

from .harness import Broker

FIND_COORDINATOR, OFFSET_FETCH = 10, 9
ADD_OFFSETS_TO_TXN, TXN_OFFSET_COMMIT = 25, 28
NONE, NOT_COORDINATOR, UNKNOWN_TOPIC_OR_PARTITION = 0, 16, 3
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING = 47, 48, 49
INVALID_TRANSACTION_TIMEOUT, CONCURRENT_TRANSACTIONS, OPERATION_NOT_ATTEMPTED, PRODUCER_FENCED = 50, 51, 55, 90


def test_a_new_transactional_id_gets_epoch_zero_and_each_init_bumps_it(broker: Broker) -> None:
    code, pid, epoch = init(broker)
    assert (code, epoch) == (NONE, 0) and pid >= 0
    assert init(broker) == (NONE, pid, 1)
    assert init(broker, tid="other")[1] != pid


@pytest.mark.parametrize("timeout_ms", [0, 3_600_001])
def test_a_timeout_outside_the_allowed_range_is_invalid_transaction_timeout(broker: Broker, timeout_ms: int) -> None:
    assert init(broker, timeout_ms=timeout_ms)[0] == INVALID_TRANSACTION_TIMEOUT


def test_flinks_one_hour_timeout_is_accepted(broker: Broker) -> None:
    assert init(broker, timeout_ms=3_600_000)[0] == NONE


@pytest.mark.parametrize(("version", "fenced"), [(0, INVALID_PRODUCER_EPOCH), (1, INVALID_PRODUCER_EPOCH),
                                                 (2, PRODUCER_FENCED), (3, PRODUCER_FENCED)])
def test_a_fenced_producer_gets_the_code_of_its_version(broker: Broker, version: int, fenced: int) -> None:
    broker.create_topic("t")
    _, pid, epoch = init(broker)
    init(broker)  # a new producer with the same id: epoch + 1
    assert add(broker, pid, epoch, {"t": [0]}, version=version) == {("t", 0): fenced}
    assert end(broker, pid, epoch, version=version) == fenced


def test_another_producer_id_is_invalid_producer_id_mapping(broker: Broker) -> None:
    broker.create_topic("t")
    _, pid, epoch = init(broker)
    assert add(broker, pid + 1, epoch, {"t": [0]}) == {("t", 0): INVALID_PRODUCER_ID_MAPPING}
    assert add(broker, pid, epoch, {"t": [0]}, tid="unknown") == {("t", 0): INVALID_PRODUCER_ID_MAPPING}


def test_an_unknown_partition_fails_it_and_the_others_are_not_attempted(broker: Broker) -> None:
    broker.create_topic("t", partitions=2)
    _, pid, epoch = init(broker)
    assert add(broker, pid, epoch, {"t": [0, 5], "ghost": [0]}) == {
        ("t", 0): OPERATION_NOT_ATTEMPTED, ("t", 5): UNKNOWN_TOPIC_OR_PARTITION,
        ("ghost", 0): UNKNOWN_TOPIC_OR_PARTITION}


def test_end_txn_with_nothing_open_is_invalid_txn_state(broker: Broker) -> None:
    _, pid, epoch = init(broker)
    assert end(broker, pid, epoch) == INVALID_TXN_STATE


def test_a_commit_repeated_after_it_completed_answers_success(broker: Broker) -> None:
    broker.create_topic("t")
    _, pid, epoch = init(broker)
    assert add(broker, pid, epoch, {"t": [0]}) == {("t", 0): NONE}
    assert end(broker, pid, epoch) == NONE
    settle(broker)
    assert end(broker, pid, epoch) == NONE  # a client retrying, or Flink committing a resumed transaction
    assert end(broker, pid, epoch, commit=False) == INVALID_TXN_STATE


def test_markers_end_the_transaction_in_every_partition(broker: Broker) -> None:
    broker.create_topic("t", partitions=2)
    _, pid, epoch = init(broker)
    add(broker, pid, epoch, {"t": [0, 1]})
    assert end(broker, pid, epoch) == NONE
    settle(broker)
    ends = [broker.list_offset("t", p, -1).offset for p in (0, 1)]
    assert ends == [1, 1]  # one control batch (the commit marker) in each
    meta = broker.engine.transactions.describe("tx")
    assert meta is not None and meta.state.value == "CompleteCommit"


def test_the_batched_form_adds_and_verifies_per_transaction(broker: Broker) -> None:
    broker.create_topic("t", partitions=2)
    _, pid, epoch = init(broker)

    def batched(verify_only: bool) -> dict[tuple[str, int], int]:
        answer = broker.call(ADD_PARTITIONS_TO_TXN, 4, {"transactions": [
            {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch, "verify_only": verify_only,
             "topics": [{"name": "t", "partitions": [0, 1]}]}]})
        (result,) = answer.results_by_transaction
        assert result.transactional_id == "tx"
        return {(t.name, p.partition_index): int(p.partition_error_code)
                for t in result.topic_results for p in t.results_by_partition}

    assert batched(verify_only=True) == {("t", 0): INVALID_TXN_STATE, ("t", 1): INVALID_TXN_STATE}
    assert add(broker, pid, epoch, {"t": [0]}) == {("t", 0): NONE}
    assert batched(verify_only=True) == {("t", 0): NONE, ("t", 1): INVALID_TXN_STATE}
    assert batched(verify_only=False) == {("t", 0): NONE, ("t", 1): NONE}


def test_find_coordinator_names_this_node_for_a_transactional_id(broker: Broker) -> None:
    answer = broker.call(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx"]})
    (found,) = answer.coordinators
    assert (found.key, int(found.error_code), found.node_id) == ("tx", NONE, broker.ctx.node_id)


@pytest.mark.parametrize(("version", "message"), [(1, "NONE"), (3, "NONE"), (4, ""), (6, "")])
@pytest.mark.parametrize("key_type", [0, 1])
def test_a_found_coordinator_has_kafkas_message_not_null(broker: Broker, version: int, message: str,
                                                        key_type: int) -> None:
    """Kafka 4.4 names the error (NONE) in v1-v3 and sends "" per key from v4: never null."""
    answer = broker.call(FIND_COORDINATOR, version, {"key": "k", "key_type": key_type, "coordinator_keys": ["k"]})
    found = answer.coordinators[0] if version >= 4 else answer
    assert (int(found.error_code), found.error_message) == (NONE, message)


def _committed(broker: Broker, group: str) -> Any:
    answer = broker.call(OFFSET_FETCH, 7, {"group_id": group, "topics": None, "require_stable": False})
    return {(t.name, p.partition_index): p.committed_offset for t in answer.topics for p in t.partitions}


@pytest.mark.parametrize("commit", [True, False])
def test_offsets_committed_in_a_transaction_apply_only_on_commit(broker: Broker, commit: bool) -> None:
    broker.create_topic("t")
    _, pid, epoch = init(broker)
    added = broker.call(ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "tx", "producer_id": pid,
                                                "producer_epoch": epoch, "group_id": "g"})
    assert added.error_code == NONE
    staged = broker.call(TXN_OFFSET_COMMIT, 3, {
        "transactional_id": "tx", "group_id": "g", "producer_id": pid, "producer_epoch": epoch,
        "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                 "committed_leader_epoch": -1, "committed_metadata": None}]}]})
    assert [int(p.error_code) for t in staged.topics for p in t.partitions] == [NONE]
    assert _committed(broker, "g") == {}
    assert end(broker, pid, epoch, commit=commit) == NONE
    settle(broker)
    assert _committed(broker, "g") == ({("t", 0): 42} if commit else {})


def test_transaction_state_survives_a_restart(tmp_path: Any) -> None:
    from martlet.engine.store.local import LocalStore

    first = Broker(store=LocalStore(str(tmp_path)))
    try:
        first.create_topic("t")
        _, pid, epoch = init(first)
        add(first, pid, epoch, {"t": [0]})
    finally:
        first.close()
    second = Broker(store=LocalStore(str(tmp_path)))
    try:
        meta = second.engine.transactions.describe("tx")
        assert meta is not None and (meta.producer_id, meta.epoch, meta.state.value) == (pid, epoch, "Ongoing")
        assert end(second, pid, epoch) == NONE
        assert init(second) == (NONE, pid, epoch + 1)
    finally:
        second.close()


WRITE_TXN_MARKERS = 27


def test_write_txn_markers_marks_partitions_and_ends_staged_offsets_of_a_shard(broker: Broker) -> None:
    broker.create_topic("t")
    shard = broker.engine.groups.shard_of("g")
    topic_id = broker.engine.topics.get("t").resource.uid.hex
    staged = CommittedOffset(9, -1, None, 1, topic_id)
    broker.loop.run_until_complete(broker.engine.groups.commit_in_txn("g", 77, [("t", topic_id, 0, staged)]))
    answer = broker.call(WRITE_TXN_MARKERS, 1, {"markers": [{
        "producer_id": 77, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
        "topics": [{"name": "t", "partition_indexes": [0, 4]},
                   {"name": "__consumer_offsets", "partition_indexes": [shard]}]}]})
    codes = {(t.name, p.partition_index): int(p.error_code) for m in answer.markers for t in m.topics
              for p in t.partitions}
    assert codes == {("t", 0): NONE, ("t", 4): UNKNOWN_TOPIC_OR_PARTITION, ("__consumer_offsets", shard): NONE}
    assert broker.list_offset("t", 0, -1).offset == 1  # the commit marker
    assert _committed(broker, "g") == {("t", 0): 9}
