"""The transaction coordinator's answers, case by case (Kafka's TransactionCoordinator rules);
tests/property/test_txn_coordinator.py holds it to a model over random histories."""

from __future__ import annotations

import pytest

from martlet.engine.transactions.coordinator import TIMEOUT_MS_MAX, TransactionCoordinator
from martlet.engine.transactions.types import EPOCH_MAX, TxnError, TxnMetadata, TxnState
from martlet.engine.types import TopicPartition

TP = TopicPartition("t", 0)
NOW = 1_000
FLINK_TIMEOUT_MS = 3_600_000  # Flink's KafkaSink default transaction.timeout.ms


def started(coordinator: TransactionCoordinator, tid: str = "tx") -> tuple[int, int]:
    outcome = coordinator.init_producer_id(tid, 60_000, NOW, fresh_id=7)
    assert outcome.error is TxnError.NONE
    return outcome.producer_id, outcome.epoch


def in_state(state: TxnState) -> TransactionCoordinator:
    coordinator = TransactionCoordinator()
    pid, epoch = started(coordinator)
    if state is TxnState.EMPTY:
        return coordinator
    coordinator.add_partitions("tx", pid, epoch, [TP], NOW)
    if state is TxnState.ONGOING:
        return coordinator
    commit = state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
    coordinator.end_txn("tx", pid, epoch, commit, NOW)
    if state.preparing:
        return coordinator
    coordinator.markers_written("tx", epoch, NOW)
    return coordinator


@pytest.mark.parametrize(("state", "commit", "error"), [
    (TxnState.EMPTY, True, TxnError.INVALID_TXN_STATE),
    (TxnState.EMPTY, False, TxnError.INVALID_TXN_STATE),
    (TxnState.ONGOING, True, TxnError.NONE),
    (TxnState.ONGOING, False, TxnError.NONE),
    (TxnState.PREPARE_COMMIT, True, TxnError.CONCURRENT_TRANSACTIONS),
    (TxnState.PREPARE_COMMIT, False, TxnError.INVALID_TXN_STATE),
    (TxnState.PREPARE_ABORT, True, TxnError.INVALID_TXN_STATE),
    (TxnState.PREPARE_ABORT, False, TxnError.CONCURRENT_TRANSACTIONS),
    (TxnState.COMPLETE_COMMIT, True, TxnError.NONE),  # a retried (or resumed) commit
    (TxnState.COMPLETE_COMMIT, False, TxnError.INVALID_TXN_STATE),
    (TxnState.COMPLETE_ABORT, True, TxnError.INVALID_TXN_STATE),
    (TxnState.COMPLETE_ABORT, False, TxnError.NONE),
])
def test_end_txn_in_every_state(state: TxnState, commit: bool, error: TxnError) -> None:
    coordinator = in_state(state)
    assert coordinator.get("tx").state is state
    outcome = coordinator.end_txn("tx", 7, 0, commit, NOW)
    assert outcome.error is error
    assert bool(outcome.markers) == (state is TxnState.ONGOING)


def test_a_new_id_gets_epoch_0_and_each_init_bumps_it() -> None:
    coordinator = TransactionCoordinator()
    assert coordinator.needs_producer_id("tx")
    assert started(coordinator) == (7, 0)
    assert not coordinator.needs_producer_id("tx")
    again = coordinator.init_producer_id("tx", 60_000, NOW, fresh_id=-1)
    assert (again.error, again.producer_id, again.epoch) == (TxnError.NONE, 7, 1)
    assert coordinator.add_partitions("tx", 7, 0, [TP], NOW).error is TxnError.PRODUCER_FENCED  # the old one
    assert coordinator.add_partitions("tx", 8, 1, [TP], NOW).error is TxnError.INVALID_PRODUCER_ID_MAPPING
    assert coordinator.add_partitions("other", 7, 1, [TP], NOW).error is TxnError.INVALID_PRODUCER_ID_MAPPING


def test_init_over_an_open_transaction_aborts_it_at_a_new_epoch_and_asks_to_retry() -> None:
    coordinator = in_state(TxnState.ONGOING)
    outcome = coordinator.init_producer_id("tx", 60_000, NOW, fresh_id=-1)
    assert outcome.error is TxnError.CONCURRENT_TRANSACTIONS
    [markers] = outcome.markers
    assert (markers.commit, markers.epoch, markers.partitions) == (False, 1, frozenset({TP}))
    assert coordinator.end_txn("tx", 7, 0, True, NOW).error is TxnError.PRODUCER_FENCED
    assert coordinator.init_producer_id("tx", 60_000, NOW, -1).error is TxnError.CONCURRENT_TRANSACTIONS
    coordinator.markers_written("tx", 1, NOW)
    retried = coordinator.init_producer_id("tx", 60_000, NOW, fresh_id=-1)
    assert (retried.error, retried.epoch) == (TxnError.NONE, 2)


def test_timeouts_up_to_an_hour_are_taken() -> None:
    coordinator = TransactionCoordinator()
    assert TIMEOUT_MS_MAX >= FLINK_TIMEOUT_MS
    assert coordinator.init_producer_id("flink", FLINK_TIMEOUT_MS, NOW, 7).error is TxnError.NONE
    for bad in (0, -1, TIMEOUT_MS_MAX + 1):
        assert coordinator.init_producer_id("x", bad, NOW, 8).error is TxnError.INVALID_TRANSACTION_TIMEOUT


def test_an_expired_transaction_is_aborted_and_its_producer_fenced() -> None:
    coordinator = in_state(TxnState.ONGOING)
    assert not coordinator.expire(NOW + 60_000).markers  # not older than its timeout yet
    outcome = coordinator.expire(NOW + 60_001)
    assert [(m.commit, m.epoch) for m in outcome.markers] == [(False, 1)]
    assert coordinator.add_partitions("tx", 7, 0, [TP], NOW).error is TxnError.PRODUCER_FENCED


def test_the_epoch_top_hands_out_a_new_producer_id() -> None:
    coordinator = TransactionCoordinator()
    coordinator.replay([TxnMetadata("tx", 7, EPOCH_MAX - 1, 60_000, TxnState.COMPLETE_COMMIT)])
    assert coordinator.needs_producer_id("tx")
    outcome = coordinator.init_producer_id("tx", 60_000, NOW, fresh_id=9)
    assert (outcome.producer_id, outcome.epoch) == (9, 0)


def test_a_replayed_log_resends_the_markers_of_a_prepared_commit() -> None:
    coordinator = in_state(TxnState.ONGOING)
    coordinator.add_offsets("tx", 7, 0, "group", NOW)
    log = [meta for meta in coordinator]
    outcome = coordinator.end_txn("tx", 7, 0, True, NOW)
    log += outcome.persist
    reborn = TransactionCoordinator()
    reborn.replay(log)
    [markers] = reborn.pending_markers()
    assert (markers.commit, markers.partitions, markers.groups) == (True, frozenset({TP}), frozenset({"group"}))
    assert reborn.markers_written("tx", 0, NOW).persist[0].state is TxnState.COMPLETE_COMMIT
